//! `jfr print --json` read as it comes: one event at a time, the tool's
//! output never held whole. A JFR window of javac at 1 ms with stacks of
//! up to 2,048 frames prints gigabytes of JSON; read into one string and
//! one `Value`, it took the benchmark to 23 GB and the kernel killed it.

use anyhow::{Context, Result, bail};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::fmt;
use std::io::{BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};

/// Runs the JDK's `jfr` with `args` (a `print --json`) and hands each
/// element of the output's `recording.events` to `each`, in order.
pub(crate) fn each_event(jdk: &Path, args: &[String], each: impl FnMut(Value)) -> Result<()> {
    let mut child = Command::new(jdk.join("bin").join("jfr"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running jfr")?;
    let stdout = child.stdout.take().context("jfr's output")?;
    let mut stderr = child.stderr.take().context("jfr's errors")?;
    // jfr writes little to stderr; read it after the output, on a thread
    // so that a full pipe cannot stall the tool.
    let errors = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let parsed = read_events(BufReader::with_capacity(1 << 20, stdout), each);
    let status = child.wait().context("waiting for jfr")?;
    let errors = errors.join().unwrap_or_default();
    if !status.success() {
        bail!("jfr {} failed ({status}): {errors}", args.join(" "));
    }
    parsed.context("parsing jfr print --json")
}

/// [`each_event`]'s reading of `{"recording": {"events": [...]}}` from
/// `r`: other keys are skipped, each event is parsed alone.
fn read_events<R: Read>(r: R, mut each: impl FnMut(Value)) -> serde_json::Result<()> {
    let mut de = serde_json::Deserializer::from_reader(r);
    Field {
        name: "recording",
        inner: Field {
            name: "events",
            inner: Each(&mut each),
        },
    }
    .deserialize(&mut de)?;
    de.end()
}

/// The value of key `name` of a JSON object, read with `inner`; the
/// object's other values skipped.
struct Field<S> {
    name: &'static str,
    inner: S,
}

impl<'de, S: DeserializeSeed<'de, Value = ()>> DeserializeSeed<'de> for Field<S> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, S: DeserializeSeed<'de, Value = ()>> Visitor<'de> for Field<S> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "an object with \"{}\"", self.name)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut inner = Some(self.inner);
        while let Some(key) = map.next_key::<String>()? {
            match inner.take() {
                Some(s) if key == self.name => map.next_value_seed(s)?,
                other => {
                    inner = other;
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if inner.is_some() {
            return Err(de::Error::missing_field(self.name));
        }
        Ok(())
    }
}

/// Each element of a JSON array, parsed alone and handed on.
struct Each<'a, F>(&'a mut F);

impl<'de, F: FnMut(Value)> DeserializeSeed<'de> for Each<'_, F> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, F: FnMut(Value)> Visitor<'de> for Each<'_, F> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(v) = seq.next_element::<Value>()? {
            (self.0)(v);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_events_come_one_at_a_time_and_other_keys_are_skipped() {
        let text = r#"{"before": [1, {"a": 2}],
            "recording": {"version": 1, "events": [{"type": "x", "n": 1}, {"type": "y"}],
                "after": "z"}}"#;
        let mut seen = Vec::new();
        read_events(text.as_bytes(), |v| {
            seen.push(v["type"].as_str().unwrap().to_owned())
        })
        .unwrap();
        assert_eq!(seen, ["x", "y"]);
        // No events key: an error, not an empty recording.
        assert!(read_events(r#"{"recording": {}}"#.as_bytes(), |_| ()).is_err());
        // Trailing garbage is an error too.
        assert!(read_events(r#"{"recording": {"events": []}} x"#.as_bytes(), |_| ()).is_err());
    }
}
