//! pprof output: the gzipped protocol buffer that `go tool pprof`,
//! Pyroscope, Parca and Grafana read.
//!
//! Every calling context of every thread becomes one sample: its stack is
//! the path from the root (the sample's locations, leaf first, as pprof
//! wants them), its values the node's self time (the first and default
//! sample type, what `go tool pprof -top` shows) and exact calls. So
//! pprof's "flat" figures are exact per-method call counts and self times,
//! and its "cum" time is the exact total time; a `thread` label names the
//! thread each sample came from. There is one function and one location
//! per method: `name` is `pkg.Class.method`, `system_name` adds the
//! descriptor, `filename` is the class's source-less internal name. A
//! stack deeper than `max_stack` frames ends in the function
//! `[truncated N frames]`, with the calls and exact total of what was
//! cut. The message types below are the pprof schema (`perftools.profiles`),
//! declared for prost; prost encodes them.

use super::view::{stack_view, truncated_frame};
use super::{Render, RenderOptions};
use crate::profile::{Metric, Profile};
use std::collections::HashMap;
use std::io::{self, Write};

/// `--format pprof`.
pub struct Pprof;

/// The pprof schema, field numbers as in `profile.proto`.
pub mod schema {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Profile {
        #[prost(message, repeated, tag = "1")]
        pub sample_type: Vec<ValueType>,
        #[prost(message, repeated, tag = "2")]
        pub sample: Vec<Sample>,
        #[prost(message, repeated, tag = "3")]
        pub mapping: Vec<Mapping>,
        #[prost(message, repeated, tag = "4")]
        pub location: Vec<Location>,
        #[prost(message, repeated, tag = "5")]
        pub function: Vec<Function>,
        #[prost(string, repeated, tag = "6")]
        pub string_table: Vec<String>,
        #[prost(int64, tag = "7")]
        pub drop_frames: i64,
        #[prost(int64, tag = "8")]
        pub keep_frames: i64,
        #[prost(int64, tag = "9")]
        pub time_nanos: i64,
        #[prost(int64, tag = "10")]
        pub duration_nanos: i64,
        #[prost(message, optional, tag = "11")]
        pub period_type: Option<ValueType>,
        #[prost(int64, tag = "12")]
        pub period: i64,
        #[prost(int64, repeated, tag = "13")]
        pub comment: Vec<i64>,
        #[prost(int64, tag = "14")]
        pub default_sample_type: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ValueType {
        #[prost(int64, tag = "1")]
        pub r#type: i64,
        #[prost(int64, tag = "2")]
        pub unit: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Sample {
        #[prost(uint64, repeated, tag = "1")]
        pub location_id: Vec<u64>,
        #[prost(int64, repeated, tag = "2")]
        pub value: Vec<i64>,
        #[prost(message, repeated, tag = "3")]
        pub label: Vec<Label>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Label {
        #[prost(int64, tag = "1")]
        pub key: i64,
        #[prost(int64, tag = "2")]
        pub str: i64,
        #[prost(int64, tag = "3")]
        pub num: i64,
        #[prost(int64, tag = "4")]
        pub num_unit: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Mapping {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(uint64, tag = "2")]
        pub memory_start: u64,
        #[prost(uint64, tag = "3")]
        pub memory_limit: u64,
        #[prost(uint64, tag = "4")]
        pub file_offset: u64,
        #[prost(int64, tag = "5")]
        pub filename: i64,
        #[prost(int64, tag = "6")]
        pub build_id: i64,
        #[prost(bool, tag = "7")]
        pub has_functions: bool,
        #[prost(bool, tag = "8")]
        pub has_filenames: bool,
        #[prost(bool, tag = "9")]
        pub has_line_numbers: bool,
        #[prost(bool, tag = "10")]
        pub has_inline_frames: bool,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Location {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(uint64, tag = "2")]
        pub mapping_id: u64,
        #[prost(uint64, tag = "3")]
        pub address: u64,
        #[prost(message, repeated, tag = "4")]
        pub line: Vec<Line>,
        #[prost(bool, tag = "5")]
        pub is_folded: bool,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Line {
        #[prost(uint64, tag = "1")]
        pub function_id: u64,
        #[prost(int64, tag = "2")]
        pub line: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Function {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(int64, tag = "2")]
        pub name: i64,
        #[prost(int64, tag = "3")]
        pub system_name: i64,
        #[prost(int64, tag = "4")]
        pub filename: i64,
        #[prost(int64, tag = "5")]
        pub start_line: i64,
    }
}

/// The string table: index 0 is the empty string, as pprof requires.
#[derive(Default)]
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Strings {
        let mut s = Strings::default();
        s.get("");
        s
    }

    fn get(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(s.to_owned());
        self.index.insert(s.to_owned(), i);
        i
    }
}

/// The pprof message for `p` (before encoding), with the thresholds of
/// `opts` applied as in the other reports (a hidden node's time stays with
/// its nearest shown ancestor). [`Pprof`] streams the same message
/// instead of holding it: this is for tests and tools.
pub fn profile_message(p: &Profile, opts: &RenderOptions) -> schema::Profile {
    let mut samples = Vec::new();
    let mut m = walk(p, opts, &mut |s| {
        samples.push(s);
        Ok(())
    })
    .expect("collecting samples cannot fail");
    m.sample = samples;
    m
}

/// The metrics each sample carries, in order: time (the default sample
/// type, what `go tool pprof -top` shows), exact calls, and with waits in
/// the profile (`--locks`) the time waited (`-sample_index=waits`), which
/// only the wait rows carry.
const SAMPLE_METRICS: [Metric; 3] = [Metric::Time, Metric::Calls, Metric::Waits];

/// The metrics of a profile's samples: [`SAMPLE_METRICS`], without the
/// waits when the profile has none.
fn sample_metrics(p: &Profile) -> &'static [Metric] {
    let waits = p
        .threads
        .iter()
        .any(|t| t.tree.nodes.iter().any(|n| n.is_wait()));
    if waits {
        &SAMPLE_METRICS
    } else {
        &SAMPLE_METRICS[..2]
    }
}

/// A sample's values in the order of `metrics`: a wait's row counts no
/// calls, and its time is its waits.
fn values(metrics: &[Metric], wait: bool, calls: u64, time_ns: u64) -> Vec<i64> {
    metrics
        .iter()
        .map(|m| match m {
            Metric::Calls if wait => 0,
            Metric::Calls => clamp(calls),
            Metric::Waits if wait => clamp(time_ns),
            Metric::Waits => 0,
            _ => clamp(time_ns),
        })
        .collect()
}

/// The sample types of `metrics`.
fn sample_types(metrics: &[Metric], strings: &mut Strings) -> Vec<schema::ValueType> {
    metrics
        .iter()
        .map(|m| schema::ValueType {
            r#type: strings.get(m.name()),
            unit: strings.get(m.unit().name()),
        })
        .collect()
}

/// Hands every sample of `p` to `sample`, in order, and returns the rest of
/// the message (`sample` empty). Memory: the string table, one function and
/// location per method, and the current stack, never a sample per node
/// (pprof repeats each sample's whole stack: held for every node of a
/// recursion 10,000 deep, that was 50 million location ids). A stack holds
/// at most `max_stack` frames: the children cut below its last frame make
/// one more sample whose leaf is the function `[truncated N frames]`, with
/// the cut nodes' calls and exact total.
fn walk(
    p: &Profile,
    opts: &RenderOptions,
    sample: &mut dyn FnMut(schema::Sample) -> io::Result<()>,
) -> io::Result<schema::Profile> {
    let mut strings = Strings::new();
    let metrics = sample_metrics(p);
    let sample_type = sample_types(metrics, &mut strings);
    let thread_key = strings.get("thread");
    let mut functions: Vec<schema::Function> = Vec::new();
    let mut locations: Vec<schema::Location> = Vec::new();
    // method id -> location id (= function id)
    let mut by_method: HashMap<u32, u64> = HashMap::new();
    // frames cut -> location id of the `[truncated N frames]` function
    let mut by_cut: HashMap<usize, u64> = HashMap::new();
    let mut function = |strings: &mut Strings, name: &str, system: &str, file: &str| {
        let id = functions.len() as u64 + 1;
        functions.push(schema::Function {
            id,
            name: strings.get(name),
            system_name: strings.get(system),
            filename: strings.get(file),
            start_line: 0,
        });
        locations.push(schema::Location {
            id,
            mapping_id: 0,
            address: 0,
            line: vec![schema::Line {
                function_id: id,
                line: 0,
            }],
            is_folded: false,
        });
        id
    };
    let time_opts = RenderOptions {
        weight: Metric::Time,
        ..opts.clone()
    };
    for t in &p.threads {
        // Thresholds and cuts weigh time; each sample carries every metric.
        let view = stack_view(p, &t.tree, &time_opts);
        let thread_str = strings.get(&t.display_name());
        let label = vec![schema::Label {
            key: thread_key,
            str: thread_str,
            num: 0,
            num_unit: 0,
        }];
        // Location ids of the shown path, root first.
        let mut path: Vec<u64> = Vec::new();
        for line in &view.lines {
            let node = &t.tree.nodes[line.node as usize];
            let loc = match by_method.get(&node.method) {
                Some(&l) => l,
                None => {
                    let m = p.method(node.method);
                    // A wait's row has no class: its name says it all.
                    let name = if m.class.is_empty() {
                        m.name.clone()
                    } else {
                        format!("{}.{}", m.class, m.name)
                    };
                    let l = function(
                        &mut strings,
                        &name,
                        &m.display(),
                        &m.class.replace('.', "/"),
                    );
                    by_method.insert(node.method, l);
                    l
                }
            };
            path.truncate(line.depth);
            path.push(loc);
            let self_ns = view.times[line.node as usize]
                .self_ns
                .saturating_add(line.hidden);
            sample(schema::Sample {
                location_id: path.iter().rev().copied().collect(),
                value: values(metrics, node.is_wait(), node.calls, self_ns),
                label: label.clone(),
            })?;
            if let Some(cut) = view.cut(line) {
                let marker = match by_cut.get(&cut.frames) {
                    Some(&l) => l,
                    None => {
                        let name = truncated_frame(cut.frames);
                        let l = function(&mut strings, &name, &name, "");
                        by_cut.insert(cut.frames, l);
                        l
                    }
                };
                sample(schema::Sample {
                    location_id: std::iter::once(marker)
                        .chain(path.iter().rev().copied())
                        .collect(),
                    value: values(metrics, false, cut.calls, cut.total_ns),
                    label: label.clone(),
                })?;
            }
        }
    }
    let mut comments = vec![strings.get(&format!("sprig {}", env!("CARGO_PKG_VERSION")))];
    if !p.target.jvm.is_empty() {
        comments.push(strings.get(&format!("JVM {} {}", p.target.pid, p.target.jvm)));
    }
    let time_type =
        sample_type[metrics.iter().position(|&m| m == Metric::Time).unwrap_or(0)].clone();
    let default_sample_type = time_type.r#type;
    Ok(schema::Profile {
        sample_type,
        sample: Vec::new(),
        mapping: Vec::new(),
        location: locations,
        function: functions,
        string_table: strings.table,
        drop_frames: 0,
        keep_frames: 0,
        time_nanos: 0,
        duration_nanos: clamp(p.stats.duration_ms.saturating_mul(1_000_000)),
        period_type: Some(time_type),
        period: 1,
        comment: comments,
        default_sample_type,
    })
}

fn clamp(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Field 2 (`sample`) of `perftools.profiles.Profile`, length-delimited.
const SAMPLE_KEY: u8 = (2 << 3) | 2;

impl Render for Pprof {
    /// Writes the message field by field, in the order prost encodes a
    /// whole message (`sample_type`, the samples, then the rest), so the
    /// bytes are those of [`profile_message`] encoded, without holding
    /// the samples.
    fn render(&self, p: &Profile, opts: &RenderOptions, out: &mut dyn Write) -> io::Result<()> {
        use prost::Message as _;
        let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
        let head = schema::Profile {
            sample_type: sample_types(sample_metrics(p), &mut Strings::new()),
            ..schema::Profile::default()
        };
        gz.write_all(&head.encode_to_vec())?;
        let mut buf = Vec::new();
        let mut rest = walk(p, opts, &mut |s| {
            buf.clear();
            buf.push(SAMPLE_KEY);
            s.encode_length_delimited(&mut buf)
                .map_err(|e| io::Error::other(e.to_string()))?;
            gz.write_all(&buf)
        })?;
        debug_assert_eq!(rest.sample_type, head.sample_type);
        rest.sample_type.clear();
        gz.write_all(&rest.encode_to_vec())?;
        gz.finish()?;
        Ok(())
    }
}

/// Reads back what [`Pprof`] wrote (for tests and tools).
pub fn decode(gzipped: &[u8]) -> io::Result<schema::Profile> {
    use prost::Message as _;
    use std::io::Read as _;
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(gzipped).read_to_end(&mut raw)?;
    schema::Profile::decode(raw.as_slice())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{MethodInfo, Node, ThreadProfile, Tree};
    use crate::report::DEFAULT_MAX_STACK;

    fn sample() -> Profile {
        let mut p = Profile::new(1_000_000_000);
        p.target.pid = 42;
        p.target.jvm = "OpenJDK 17".into();
        p.stats.duration_ms = 5;
        for (id, name) in [(1, "root"), (2, "a"), (3, "b")] {
            p.methods.insert(id, MethodInfo::new("x.Y", name, "()V"));
        }
        for (index, name) in [(0, "main"), (1, "worker")] {
            let mut t = Tree::default();
            let leaf = |method, calls, total| Node {
                method,
                calls,
                total_ticks: total,
                ..Node::default()
            };
            let r = t.push(None, leaf(1, 1, 100));
            let a = t.push(Some(r), leaf(2, 3, 60));
            t.push(Some(a), leaf(3, 7, 10));
            t.push(Some(r), leaf(3, 2, 30));
            t.recount();
            p.threads.push(ThreadProfile {
                virtual_threads: 0,
                index,
                name: name.into(),
                tree: t,
                ..ThreadProfile::default()
            });
        }
        p
    }

    fn round_trip(p: &Profile) -> schema::Profile {
        let mut out = Vec::new();
        Pprof
            .render(p, &RenderOptions::default(), &mut out)
            .unwrap();
        assert_eq!(&out[..2], &[0x1f, 0x8b], "gzip magic");
        decode(&out).unwrap()
    }

    #[test]
    fn a_sample_per_context_with_exact_calls_and_self_time() {
        let m = round_trip(&sample());
        let s = |i: i64| m.string_table[i as usize].as_str();
        assert_eq!(s(0), "");
        let types: Vec<(&str, &str)> = m
            .sample_type
            .iter()
            .map(|v| (s(v.r#type), s(v.unit)))
            .collect();
        // Time first and the default (what `go tool pprof -top` shows).
        assert_eq!(types, [("time", "nanoseconds"), ("calls", "count")]);
        assert_eq!(s(m.default_sample_type), "time");
        assert_eq!(m.sample.len(), 8);
        assert_eq!(m.function.len(), 3);
        assert_eq!(m.location.len(), 3);
        let name_of_loc = |id: u64| {
            let l = m.location.iter().find(|l| l.id == id).unwrap();
            let f = m
                .function
                .iter()
                .find(|f| f.id == l.line[0].function_id)
                .unwrap();
            s(f.name)
        };
        // Flat calls per method add up to the exact calls of every context.
        let mut flat: HashMap<&str, i64> = HashMap::new();
        let mut self_time = 0;
        for smp in &m.sample {
            *flat.entry(name_of_loc(smp.location_id[0])).or_default() += smp.value[1];
            self_time += smp.value[0];
            assert_eq!(s(smp.label[0].key), "thread");
        }
        assert_eq!(flat["x.Y.root"], 2);
        assert_eq!(flat["x.Y.a"], 6);
        assert_eq!(flat["x.Y.b"], 18);
        // Self times add up to the roots' exact totals.
        assert_eq!(self_time, 200);
        // The deepest sample's stack is leaf first.
        let deep = m.sample.iter().find(|x| x.location_id.len() == 3).unwrap();
        let names: Vec<&str> = deep.location_id.iter().map(|&l| name_of_loc(l)).collect();
        assert_eq!(names, ["x.Y.b", "x.Y.a", "x.Y.root"]);
        let f = &m.function[0];
        assert_eq!(s(f.system_name), "x.Y.root()V");
        assert_eq!(s(f.filename), "x/Y");
        assert_eq!(m.duration_nanos, 5_000_000);
        assert!(m.comment.iter().any(|&c| s(c) == "JVM 42 OpenJDK 17"));
    }

    /// `--locks`: every sample carries the waits (nanoseconds) too, a
    /// wait's row being a frame of its own named like the tree's row, so
    /// that `go tool pprof -sample_index=waits` weighs by wait time.
    #[test]
    fn wait_rows_carry_the_waits_sample_type() {
        use sprig_wire::{WaitKind, wait_row_id};
        let mut p = sample();
        let row = wait_row_id(WaitKind::Parked, 1);
        p.methods
            .insert(row, MethodInfo::wait_row(WaitKind::Parked, "x.Lock"));
        let t = &mut p.threads[0].tree;
        // Under `a` (60 ticks), 40 of them parked.
        t.push(
            Some(1),
            Node {
                method: row,
                calls: 2,
                total_ticks: 40,
                ..Node::default()
            },
        );
        t.recount();
        let m = round_trip(&p);
        let s = |i: i64| m.string_table[i as usize].as_str();
        let types: Vec<(&str, &str)> = m
            .sample_type
            .iter()
            .map(|v| (s(v.r#type), s(v.unit)))
            .collect();
        assert_eq!(
            types,
            [
                ("time", "nanoseconds"),
                ("calls", "count"),
                ("waits", "nanoseconds")
            ]
        );
        assert_eq!(s(m.default_sample_type), "time");
        let name_of = |smp: &schema::Sample| {
            let l = m
                .location
                .iter()
                .find(|l| l.id == smp.location_id[0])
                .unwrap();
            let f = m
                .function
                .iter()
                .find(|f| f.id == l.line[0].function_id)
                .unwrap();
            s(f.name)
        };
        let mut waits = 0;
        let mut time = 0;
        for smp in &m.sample {
            assert_eq!(smp.value.len(), 3);
            time += smp.value[0];
            if name_of(smp) == "(parked: x.Lock)" {
                assert_eq!(
                    smp.value,
                    [40, 0, 40],
                    "the row: its time, no calls, its waits"
                );
                assert_eq!(smp.location_id.len(), 3, "under root > a");
            } else {
                assert_eq!(smp.value[2], 0, "{}", name_of(smp));
            }
            waits += smp.value[2];
        }
        assert_eq!(waits, 40);
        // The wait is taken out of `a`'s self time: the totals stay.
        assert_eq!(time, 200);
        // Without waits in the profile, the samples carry none.
        let plain = round_trip(&sample());
        assert_eq!(plain.sample_type.len(), 2);
    }

    #[test]
    fn thresholds_give_hidden_time_to_the_shown_ancestor() {
        let opts = RenderOptions {
            max_depth: Some(1),
            ..RenderOptions::default()
        };
        let m = profile_message(&sample(), &opts);
        assert_eq!(m.sample.len(), 2);
        assert!(m.sample.iter().all(|s| s.value == vec![100, 1]));
    }

    #[test]
    fn the_streamed_bytes_are_those_of_the_whole_message() {
        use prost::Message as _;
        let p = sample();
        for max_stack in [1, 2, DEFAULT_MAX_STACK] {
            let opts = RenderOptions {
                max_stack,
                ..RenderOptions::default()
            };
            let mut out = Vec::new();
            Pprof.render(&p, &opts, &mut out).unwrap();
            let mut raw = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&out[..]), &mut raw)
                .unwrap();
            assert_eq!(raw, profile_message(&p, &opts).encode_to_vec());
        }
    }

    #[test]
    fn a_stack_deeper_than_max_stack_ends_in_the_truncation_frame() {
        let opts = RenderOptions {
            max_stack: 1,
            ..RenderOptions::default()
        };
        let m = profile_message(&sample(), &opts);
        let s = |i: i64| m.string_table[i as usize].as_str();
        // Per thread: the root, and one sample for everything under it.
        assert_eq!(m.sample.len(), 4);
        let cut: Vec<&schema::Sample> = m
            .sample
            .iter()
            .filter(|x| x.location_id.len() == 2)
            .collect();
        assert_eq!(cut.len(), 2);
        let f = m
            .function
            .iter()
            .find(|f| f.id == cut[0].location_id[0])
            .unwrap();
        // a -> b is the deepest path cut under the root.
        assert_eq!(s(f.name), "[truncated 2 frames]");
        // a (3 calls) + b (7) + b (2); a's total 60 + b's 30.
        assert!(cut.iter().all(|x| x.value == vec![90, 12]));
        let time: i64 = m.sample.iter().map(|x| x.value[0]).sum();
        assert_eq!(time, 200, "the cut keeps the exact total");
    }

    #[test]
    fn damaged_input_is_an_error_not_a_panic() {
        assert!(decode(b"not gzip").is_err());
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&[0xff, 0xff, 0xff]).unwrap();
        assert!(decode(&gz.finish().unwrap()).is_err());
    }
}
