//! `sprig diff --overlap A B`: Arnold and Grove's overlap of two profiles
//! (the sum over methods of the smaller of their two self shares), read
//! from any sprig output: a `.sprig` snapshot, the JSON report of `sprig
//! profile` or of `sprig sample`, or a JFR recording (`.jfr`, its
//! `jdk.ExecutionSample` events read with the JDK's own `jfr` tool).
//! Where both hold call edges, the overlap of their edges follows (the
//! sum over (caller, callee) pairs of the smaller share): `sprig sample
//! --edges`' bursts, a `sprig sample` tree's activations (the timer-only
//! baseline), `sprig profile`'s exact parent-child calls.

use std::io::Write;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, anyhow, bail};
use serde_json::Value;
use sprig_callgraph::report::escape::escape;
use sprig_callgraph::stacks::{MethodShare, edge_overlap, edges_within, exact_edges, overlap};
use std::collections::BTreeMap;

/// Methods that differ most, listed under the figure.
const SHOWN: usize = 10;

/// Call edges (caller, callee) -> weight.
pub type Edges = BTreeMap<(String, String), u64>;

/// Stack of the thread that reads a sprig JSON report: javac's trees nest
/// up to 2,048 frames deep, two JSON levels a frame.
const JSON_STACK: usize = 256 << 20;

/// `f` of the JSON `text`, parsed without serde_json's default limit of
/// 128 levels (a `sprig sample` report of javac nests far deeper), on a
/// thread with a stack to match; the value is dropped there too.
fn deep_json<T: Send>(text: &str, f: impl FnOnce(&Value) -> Result<T> + Send) -> Result<T> {
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("sprig-json".into())
            .stack_size(JSON_STACK)
            .spawn_scoped(s, || {
                let mut de = serde_json::Deserializer::from_str(text);
                de.disable_recursion_limit();
                let mut values = de.into_iter::<Value>();
                let v = match (values.next(), values.next()) {
                    (Some(Ok(v)), None) => v,
                    (Some(Err(e)), _) | (_, Some(Err(e))) => bail!("not JSON: {e}"),
                    (None, _) => bail!("not JSON: empty"),
                    (Some(Ok(_)), Some(Ok(_))) => bail!("not JSON: more than one value"),
                };
                f(&v)
            })
            .context("cannot start the thread that reads JSON")?
            .join()
            .map_err(|_| anyhow!("the thread that reads JSON panicked"))?
    })
}

/// The call edges an output holds, and what they are.
pub struct EdgeSet {
    pub edges: Edges,
    /// `bursts` (`sprig sample --edges`), `activations` (Whaley's, a
    /// `sprig sample` tree: the timer-only baseline) or `calls` (exact:
    /// `sprig profile`).
    pub kind: &'static str,
}

/// The call edges of the output at `path`: a `sprig sample` report's
/// bursts (with `--edges`) and its tree's activations, or a `sprig
/// profile` report's or snapshot's exact calls. Empty for a JFR recording.
pub fn read_edges(path: &Path) -> Result<Vec<EdgeSet>> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    match ext {
        "sprig" => Ok(vec![EdgeSet {
            edges: exact_edges(&crate::output::read_snapshot(path)?),
            kind: "calls",
        }]),
        "jfr" => Ok(Vec::new()),
        _ => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            json_edges(&text).with_context(|| format!("{}", path.display()))
        }
    }
}

/// The edge sets of a sprig JSON report (see [`read_edges`]).
pub fn json_edges(text: &str) -> Result<Vec<EdgeSet>> {
    deep_json(text, edges_of)
}

fn edges_of(v: &Value) -> Result<Vec<EdgeSet>> {
    let name = |n: &Value| -> Option<String> {
        Some(format!(
            "{}::{}",
            n.get("class")?.as_str()?,
            n.get("method")?.as_str()?
        ))
    };
    // Parent-child weights of a tree of nodes.
    let tree = |roots: Vec<&Value>, weight: &str| -> Edges {
        let mut edges = Edges::new();
        let mut stack = roots;
        while let Some(n) = stack.pop() {
            let children: Vec<&Value> = n
                .get("children")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .collect();
            if let Some(parent) = name(n) {
                for c in &children {
                    if let (Some(child), Some(w)) = (name(c), c.get(weight).and_then(Value::as_u64))
                        && w > 0
                    {
                        *edges.entry((parent.clone(), child)).or_default() += w;
                    }
                }
            }
            stack.extend(children);
        }
        edges
    };
    let mut out = Vec::new();
    if v.get("suggested_roots").is_some() {
        if let Some(rows) = v.pointer("/edges/edges").and_then(Value::as_array) {
            let mut edges = Edges::new();
            for r in rows {
                if let (Some(a), Some(b), Some(n)) = (
                    r.get("caller").and_then(Value::as_str),
                    r.get("callee").and_then(Value::as_str),
                    r.get("samples").and_then(Value::as_u64),
                ) {
                    *edges.entry((a.to_owned(), b.to_owned())).or_default() += n;
                }
            }
            out.push(EdgeSet {
                edges,
                kind: "bursts",
            });
        }
        let roots: Vec<&Value> = v
            .get("tree")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .collect();
        out.push(EdgeSet {
            edges: tree(roots, "activations"),
            kind: "activations",
        });
        return Ok(out);
    }
    let roots: Vec<&Value> = v
        .get("threads")
        .and_then(Value::as_array)
        .ok_or_else(|| anyhow!("not a JSON report of sprig profile or sprig sample"))?
        .iter()
        .filter_map(|t| t.get("roots").and_then(Value::as_array))
        .flatten()
        .collect();
    out.push(EdgeSet {
        edges: tree(roots, "calls"),
        kind: "calls",
    });
    Ok(out)
}

/// What an edge set is, for the report line.
fn kind_words(kind: &str) -> &'static str {
    match kind {
        "bursts" => "call-edge bursts",
        "activations" => "timer-only: Whaley's activations",
        _ => "exact calls",
    }
}

/// Prints the edge overlaps of `a` and `b`: every edge set of one against
/// every edge set of the other, where both hold edges. Where one side is
/// exact calls (one root's subgraph) and the other sampled the whole JVM,
/// a second line narrows the sampled edges to those between the exact
/// profile's methods ([`edges_within`]).
fn run_edges(a: &Path, b: &Path, out: &mut dyn Write) -> Result<()> {
    let (ea, eb) = (read_edges(a)?, read_edges(b)?);
    for x in ea.iter().filter(|e| !e.edges.is_empty()) {
        for y in eb.iter().filter(|e| !e.edges.is_empty()) {
            writeln!(
                out,
                "edge overlap: {:.1}% (A's {}, {} edges; B's {}, {} edges)",
                100.0 * edge_overlap(&x.edges, &y.edges),
                kind_words(x.kind),
                x.edges.len(),
                kind_words(y.kind),
                y.edges.len()
            )?;
            let (sampled, exact, side) = match (x.kind, y.kind) {
                ("calls", "calls") => continue,
                (_, "calls") => (x, y, ("A", "B")),
                ("calls", _) => (y, x, ("B", "A")),
                _ => continue,
            };
            let within = edges_within(&sampled.edges, &exact.edges);
            writeln!(
                out,
                "edge overlap within {}'s methods: {:.1}% ({}'s {}, {} of its {} edges between methods of {}'s exact calls)",
                side.1,
                100.0 * edge_overlap(&within, &exact.edges),
                side.0,
                kind_words(sampled.kind),
                within.len(),
                sampled.edges.len(),
                side.1
            )?;
        }
    }
    Ok(())
}

/// Prints the overlap of `a` and `b` and the methods that differ most,
/// then the overlap of their call edges where both hold some.
/// With `native`, the samples of threads in native methods
/// (`jdk.NativeMethodSample`, a sample report's `native_self`), and no
/// edges.
pub fn run(a: &Path, b: &Path, native: bool, out: &mut dyn Write) -> Result<()> {
    run_methods(a, b, native, out)?;
    if native {
        return Ok(());
    }
    run_edges(a, b, out)
}

/// Prints the overlap of `a` and `b` and the methods that differ most.
fn run_methods(a: &Path, b: &Path, native: bool, out: &mut dyn Write) -> Result<()> {
    let (sa, sb) = (read_part(a, native)?, read_part(b, native)?);
    let o = overlap(&sa, &sb);
    writeln!(
        out,
        "overlap: {:.1}% (sum over methods of the smaller self share; {} methods in A, {} in B)",
        o.percent,
        distinct(&sa),
        distinct(&sb)
    )?;
    writeln!(out, "methods that differ most:")?;
    writeln!(out, "  {:>7} {:>7} {:>8}  method", "A", "B", "B - A")?;
    for (m, x, y) in o.methods.iter().take(SHOWN) {
        writeln!(
            out,
            "  {:>6.1}% {:>6.1}% {:>+7.1}%  {}",
            x * 100.0,
            y * 100.0,
            (y - x) * 100.0,
            escape(m)
        )?;
    }
    Ok(())
}

fn distinct(v: &[MethodShare]) -> usize {
    let mut k: Vec<&str> = v.iter().map(|(m, _)| m.as_str()).collect();
    k.sort_unstable();
    k.dedup();
    k.len()
}

/// The self weight of each method in the profile at `path`; with
/// `native`, the samples of threads in native methods only (a `.jfr`'s `jdk.NativeMethodSample` events, a `sprig sample`
/// report's `native_self`).
pub fn read_part(path: &Path, native: bool) -> Result<Vec<MethodShare>> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let shares = match ext {
        "sprig" if native => bail!(
            "{}: --native reads sprig sample JSON reports and .jfr recordings, not snapshots",
            path.display()
        ),
        "sprig" => crate::output::read_snapshot(path)?.method_self_shares(),
        "jfr" => jfr_shares(
            path,
            if native {
                "jdk.NativeMethodSample"
            } else {
                "jdk.ExecutionSample"
            },
        )?,
        _ => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            if native {
                json_native_shares(&text).with_context(|| format!("{}", path.display()))?
            } else {
                json_shares(&text).with_context(|| format!("{}", path.display()))?
            }
        }
    };
    if shares.iter().all(|(_, w)| *w <= 0.0) {
        bail!("{} holds no sample and no timed method", path.display());
    }
    Ok(shares)
}

/// The shares of a sprig JSON report: `sprig sample`'s (its `methods`'
/// self samples) or `sprig profile`'s (every node's `self_ns`).
pub fn json_shares(text: &str) -> Result<Vec<MethodShare>> {
    deep_json(text, shares_of_report)
}

fn shares_of_report(v: &Value) -> Result<Vec<MethodShare>> {
    let name = |n: &Value| -> Option<String> {
        Some(format!(
            "{}::{}",
            n.get("class")?.as_str()?,
            n.get("method")?.as_str()?
        ))
    };
    if v.get("suggested_roots").is_some() {
        let methods = v
            .get("methods")
            .and_then(Value::as_array)
            .ok_or_else(|| anyhow!("a sprig sample report without its methods"))?;
        return Ok(methods
            .iter()
            .filter_map(|m| Some((name(m)?, m.get("self")?.as_f64()?)))
            .collect());
    }
    let threads = v
        .get("threads")
        .and_then(Value::as_array)
        .ok_or_else(|| anyhow!("not a JSON report of sprig profile or sprig sample"))?;
    let mut out = Vec::new();
    let mut stack: Vec<&Value> = threads
        .iter()
        .filter_map(|t| t.get("roots").and_then(Value::as_array))
        .flatten()
        .collect();
    while let Some(n) = stack.pop() {
        if let (Some(k), Some(s)) = (name(n), n.get("self_ns").and_then(Value::as_f64)) {
            out.push((k, s));
        }
        stack.extend(
            n.get("children")
                .and_then(Value::as_array)
                .into_iter()
                .flatten(),
        );
    }
    Ok(out)
}

/// The samples in native methods of a `sprig sample` JSON report: its
/// methods' `native_self`.
pub fn json_native_shares(text: &str) -> Result<Vec<MethodShare>> {
    deep_json(text, native_shares_of)
}

fn native_shares_of(v: &Value) -> Result<Vec<MethodShare>> {
    let methods = v
        .get("suggested_roots")
        .and(v.get("methods"))
        .and_then(Value::as_array)
        .ok_or_else(|| anyhow!("--native reads sprig sample reports, and this is none"))?;
    Ok(methods
        .iter()
        .filter_map(|m| {
            Some((
                format!(
                    "{}::{}",
                    m.get("class")?.as_str()?,
                    m.get("method")?.as_str()?
                ),
                m.get("native_self")?.as_f64()?,
            ))
        })
        .collect())
}

/// The shares of a JFR recording: one per `event` (`jdk.ExecutionSample`
/// or `jdk.NativeMethodSample`), to its top frame's method.
fn jfr_shares(path: &Path, event: &str) -> Result<Vec<MethodShare>> {
    let jfr = match std::env::var_os("JAVA_HOME") {
        Some(home) => Path::new(&home).join("bin/jfr"),
        None => "jfr".into(),
    };
    let output = Command::new(&jfr)
        .args(["print", "--json", "--events", event])
        .arg(path)
        .output()
        .with_context(|| {
            format!(
                "cannot run {} to read {} (set JAVA_HOME to a JDK)",
                jfr.display(),
                path.display()
            )
        })?;
    if !output.status.success() {
        let err = String::from_utf8_lossy(&output.stderr);
        bail!(
            "{} cannot read {}: {}",
            jfr.display(),
            path.display(),
            err.lines().next().unwrap_or("").trim()
        );
    }
    jfr_json_shares(&String::from_utf8_lossy(&output.stdout))
        .with_context(|| format!("{}", path.display()))
}

/// The shares in `jfr print --json` output.
pub fn jfr_json_shares(text: &str) -> Result<Vec<MethodShare>> {
    let v: Value = serde_json::from_str(text).map_err(|e| anyhow!("not JFR's JSON: {e}"))?;
    let events = v
        .pointer("/recording/events")
        .and_then(Value::as_array)
        .ok_or_else(|| anyhow!("no events in the recording"))?;
    Ok(events
        .iter()
        .filter_map(|e| {
            let top = e.pointer("/values/stackTrace/frames/0/method")?;
            let class = top.pointer("/type/name")?.as_str()?.replace('/', ".");
            let name = top.get("name")?.as_str()?;
            Some((format!("{class}::{name}"), 1.0))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_and_profile_reports_and_jfr_read_as_self_shares() {
        let sample = r#"{"version":1,"samples":10,"methods":[
            {"class":"a.A","method":"x","descriptor":"()V","self":7,"total":10},
            {"class":"a.A","method":"y","descriptor":"()V","self":3,"total":3}],
            "tree":[],"suggested_roots":[]}"#;
        let profile = r#"{"version":1,"threads":[{"id":1,"name":"t","roots":[
            {"class":"a.A","method":"x","self_ns":70,"children":[
              {"class":"a.A","method":"y","self_ns":30,"children":[]}]}]}]}"#;
        let jfr = r#"{"recording":{"events":[
            {"type":"jdk.ExecutionSample","values":{"stackTrace":{"frames":[{"method":{"type":{"name":"a.A"},"name":"x"}}]}}},
            {"type":"jdk.ExecutionSample","values":{"stackTrace":{"frames":[{"method":{"type":{"name":"a/A"},"name":"y"}}]}}}]}}"#;
        let s = json_shares(sample).unwrap();
        let p = json_shares(profile).unwrap();
        let j = jfr_json_shares(jfr).unwrap();
        assert_eq!(s, [("a.A::x".into(), 7.0), ("a.A::y".into(), 3.0)]);
        let mut p2 = p.clone();
        p2.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(p2, [("a.A::x".into(), 70.0), ("a.A::y".into(), 30.0)]);
        assert_eq!(j, [("a.A::x".into(), 1.0), ("a.A::y".into(), 1.0)]);
        assert!((overlap(&s, &p).percent - 100.0).abs() < 1e-9);
        assert!((overlap(&s, &j).percent - 80.0).abs() < 1e-9);
    }

    #[test]
    fn native_samples_of_a_sample_report() {
        let sample = r#"{"version":1,"methods":[
            {"class":"a.A","method":"x","self":7,"total":10,"native_self":0},
            {"class":"a.N","method":"n","self":3,"total":3,"native_self":3}],
            "tree":[],"suggested_roots":[]}"#;
        assert_eq!(
            json_native_shares(sample).unwrap(),
            [("a.A::x".into(), 0.0), ("a.N::n".into(), 3.0)]
        );
        let profile = r#"{"version":1,"threads":[]}"#;
        assert!(json_native_shares(profile).is_err());
    }

    #[test]
    fn edges_of_bursts_activations_and_exact_calls_overlap() {
        let sample = r#"{"version":1,"methods":[],"suggested_roots":[],
            "tree":[{"class":"a.A","method":"r","activations":1,"children":[
              {"class":"a.A","method":"b","activations":5,"children":[]},
              {"class":"a.A","method":"c","activations":5,"children":[]}]}],
            "edges":{"edges":[
              {"caller":"a.A::r","callee":"a.A::b","samples":30,"calls_per_s_est":3.0},
              {"caller":"a.A::r","callee":"a.A::c","samples":10,"calls_per_s_est":1.0}]}}"#;
        let profile = r#"{"version":1,"threads":[{"id":1,"name":"t","roots":[
            {"class":"a.A","method":"r","calls":1,"children":[
              {"class":"a.A","method":"b","calls":300,"children":[]},
              {"class":"a.A","method":"c","calls":100,"children":[]}]}]}]}"#;
        let s = json_edges(sample).unwrap();
        let p = json_edges(profile).unwrap();
        assert_eq!(
            s.iter().map(|e| e.kind).collect::<Vec<_>>(),
            ["bursts", "activations"]
        );
        assert_eq!(p[0].kind, "calls");
        // Bursts 3:1 as the exact calls; activations 1:1.
        assert!((edge_overlap(&s[0].edges, &p[0].edges) - 1.0).abs() < 1e-9);
        assert!((edge_overlap(&s[1].edges, &p[0].edges) - 0.75).abs() < 1e-9);
    }

    #[test]
    fn a_whole_jvm_sample_against_one_roots_profile_also_overlaps_within_its_methods() {
        // The bursts saw the root's caller and a method beside the root
        // too; within the root's methods they are 3:1 as the exact calls.
        let sample = r#"{"version":1,"methods":[],"suggested_roots":[],"tree":[],
            "edges":{"edges":[
              {"caller":"a.A::loop","callee":"a.A::r","samples":10},
              {"caller":"a.A::r","callee":"a.A::b","samples":30},
              {"caller":"a.A::r","callee":"a.A::c","samples":10},
              {"caller":"a.A::x","callee":"a.A::y","samples":50}]}}"#;
        let profile = r#"{"version":1,"threads":[{"id":1,"name":"t","roots":[
            {"class":"a.A","method":"r","calls":1,"children":[
              {"class":"a.A","method":"b","calls":300,"children":[]},
              {"class":"a.A","method":"c","calls":100,"children":[]}]}]}]}"#;
        let dir = std::env::temp_dir().join(format!("sprig-overlap-within-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("a.json"), dir.join("b.json"));
        std::fs::write(&a, sample).unwrap();
        std::fs::write(&b, profile).unwrap();
        let mut out = Vec::new();
        run_edges(&a, &b, &mut out).unwrap();
        let mut back = Vec::new();
        run_edges(&b, &a, &mut back).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(
            out.contains("edge overlap: 40.0% (A's call-edge bursts, 4 edges"),
            "{out}"
        );
        assert!(
            out.contains(
                "edge overlap within B's methods: 100.0% (A's call-edge bursts, 2 of its 4 edges"
            ),
            "{out}"
        );
        let back = String::from_utf8(back).unwrap();
        assert!(
            back.contains(
                "edge overlap within A's methods: 100.0% (B's call-edge bursts, 2 of its 4 edges"
            ),
            "{back}"
        );
    }

    /// A javac sample's tree nests a node's children two JSON levels
    /// below it, 2,048 frames deep at most: far past serde_json's default
    /// limit of 128 levels.
    #[test]
    fn a_tree_2048_frames_deep_reads() {
        let depth = 2048;
        let mut tree = String::new();
        for i in 0..depth {
            tree.push_str(&format!(
                r#"{{"class":"a.A","method":"m{i}","activations":1,"children":["#
            ));
        }
        tree.push_str(&"]}".repeat(depth));
        let sample = format!(
            r#"{{"version":1,"samples":1,"methods":[
                {{"class":"a.A","method":"m0","descriptor":"()V","self":1,"total":1}}],
                "suggested_roots":[],"tree":[{tree}]}}"#
        );
        let edges = json_edges(&sample).unwrap();
        assert_eq!(edges[0].kind, "activations");
        assert_eq!(edges[0].edges.len(), depth - 1);
        assert_eq!(json_shares(&sample).unwrap().len(), 1);
    }

    #[test]
    fn what_is_not_a_profile_is_one_clear_error() {
        assert!(
            json_shares("[1,2")
                .unwrap_err()
                .to_string()
                .starts_with("not JSON")
        );
        assert_eq!(
            json_shares(r#"{"a":1}"#).unwrap_err().to_string(),
            "not a JSON report of sprig profile or sprig sample"
        );
        let dir = std::env::temp_dir().join(format!("sprig-overlap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.json");
        std::fs::write(&empty, r#"{"methods":[],"suggested_roots":[]}"#).unwrap();
        let e = read_part(&empty, false).unwrap_err().to_string();
        assert!(e.ends_with("holds no sample and no timed method"), "{e}");
        let e = read_part(&dir.join("missing.json"), false)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("cannot read"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
