//! What the harness reads from one sprig JSON report (schema version 1).
//! Fields that later versions add (calibration, revelation statistics) are
//! carried through as they come, so the tables show them once they land.

use anyhow::{Result, bail};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

/// The five statistics every version reports.
const BASE_STATS: [&str; 5] = [
    "events",
    "instrumented_methods",
    "called_methods",
    "lost_events",
    "duration_ms",
];

#[derive(Clone, Debug, Default)]
pub struct ProfileSummary {
    pub events: u64,
    pub instrumented: u64,
    pub called: u64,
    pub lost: u64,
    pub duration_ms: u64,
    /// How long profiling ran before a reset (`--settle`); 0 without one.
    pub reset_after_ms: u64,
    /// Statistics beyond the five base ones (e.g. revelation and redefinition time).
    pub extra_stats: Map<String, Value>,
    /// `calibration` as reported (null when the report has none).
    pub calibration: Value,
    pub warnings: Vec<String>,
    /// Sum over every thread's root nodes.
    pub root_calls: u64,
    pub root_total_ns: f64,
    pub root_raw_ns: f64,
    /// Calls summed over every node of every thread's tree.
    pub all_calls: u64,
    /// Distinct (class, method, descriptor) seen in the trees.
    pub distinct_methods: usize,
    /// Under `--timing windows`: the report's `windows` facts.
    pub windows: Option<Windows>,
}

/// What a windows-timing report says of its windows (JSON `windows`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Windows {
    /// Root calls the probes counted (the trees' calls are theirs).
    pub counted_root_calls: u64,
    /// Root calls in silent windows (timed, not counted).
    pub silent_root_calls: u64,
    /// Every root call over the counted ones: totals scaled to the session.
    pub scale: f64,
    /// Stack samples credited to the trees, and those outside any root.
    pub samples: u64,
    pub samples_outside: u64,
}

impl Windows {
    pub fn from_json(v: &Value) -> Option<Windows> {
        let w = v.get("windows")?.as_object()?;
        let n = |k: &str| w.get(k).and_then(Value::as_u64).unwrap_or(0);
        Some(Windows {
            counted_root_calls: n("counted_root_calls"),
            silent_root_calls: n("silent_root_calls"),
            scale: w.get("scale").and_then(Value::as_f64).unwrap_or(f64::NAN),
            samples: n("samples"),
            samples_outside: n("samples_outside"),
        })
    }

    pub fn to_json(&self) -> Value {
        json!({
            "counted_root_calls": self.counted_root_calls,
            "silent_root_calls": self.silent_root_calls,
            "scale": self.scale,
            "samples": self.samples,
            "samples_outside": self.samples_outside,
        })
    }
}

fn u(v: &Value, k: &str) -> u64 {
    v.get(k).and_then(Value::as_u64).unwrap_or(0)
}

fn f(v: &Value, k: &str) -> f64 {
    v.get(k).and_then(Value::as_f64).unwrap_or(0.0)
}

fn key(n: &Value) -> String {
    format!(
        "{}::{}{}",
        n.get("class").and_then(Value::as_str).unwrap_or("?"),
        n.get("method").and_then(Value::as_str).unwrap_or("?"),
        n.get("descriptor").and_then(Value::as_str).unwrap_or("")
    )
}

/// Depth-first over a node and its children, with an explicit stack (deep
/// recursion in the profiled program must not overflow ours).
fn walk<'a>(root: &'a Value, mut visit: impl FnMut(&'a Value)) {
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        visit(n);
        if let Some(ch) = n.get("children").and_then(Value::as_array) {
            stack.extend(ch.iter());
        }
    }
}

impl ProfileSummary {
    pub fn from_json(v: &Value) -> Result<ProfileSummary> {
        if v.get("version").and_then(Value::as_u64) != Some(1) {
            bail!("sprig's report is not JSON schema version 1");
        }
        let Some(stats) = v.get("stats") else {
            bail!("sprig's report has no stats");
        };
        let mut s = ProfileSummary {
            events: u(stats, "events"),
            instrumented: u(stats, "instrumented_methods"),
            called: u(stats, "called_methods"),
            lost: u(stats, "lost_events"),
            duration_ms: u(stats, "duration_ms"),
            reset_after_ms: u(stats, "reset_after_ms"),
            calibration: v.get("calibration").cloned().unwrap_or(Value::Null),
            ..ProfileSummary::default()
        };
        if let Some(m) = stats.as_object() {
            for (k, val) in m {
                if !BASE_STATS.contains(&k.as_str()) {
                    s.extra_stats.insert(k.clone(), val.clone());
                }
            }
            // Reveal latency per batch: what one first call that needs a
            // redefinition costs the thread, on average (finding the callees
            // plus the redefinition).
            let f = |k: &str| m.get(k).and_then(Value::as_f64);
            if let (Some(b), Some(redef), Some(reveal)) = (
                f("redefinition_batches"),
                f("redefinition_ms"),
                f("reveal_ms"),
            ) && b > 0.0
            {
                s.extra_stats.insert(
                    "ms_per_batch".into(),
                    Value::from(((redef + reveal) / b * 100.0).round() / 100.0),
                );
            }
        }
        if let Some(w) = v.get("warnings").and_then(Value::as_array) {
            s.warnings = w
                .iter()
                .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_owned))
                .collect();
        }
        let mut methods = std::collections::BTreeSet::new();
        for t in v
            .get("threads")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            for r in t
                .get("roots")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                s.root_calls += u(r, "calls");
                s.root_total_ns += f(r, "total_ns");
                s.root_raw_ns += r
                    .get("raw_total_ns")
                    .and_then(Value::as_f64)
                    .unwrap_or_else(|| f(r, "total_ns"));
                walk(r, |n| {
                    s.all_calls += u(n, "calls");
                    methods.insert(key(n));
                });
            }
        }
        s.distinct_methods = methods.len();
        s.windows = Windows::from_json(v);
        Ok(s)
    }

    /// Every root call the session saw: under windows timing the counted
    /// and the silent ones (the trees hold the counted ones only).
    pub fn all_root_calls(&self) -> u64 {
        self.windows.as_ref().map_or(self.root_calls, |w| {
            w.counted_root_calls + w.silent_root_calls
        })
    }

    /// What the trees' calls and times are multiplied by to cover every
    /// root call of the session: 1, or windows timing's scale.
    pub fn scale(&self) -> f64 {
        self.windows
            .as_ref()
            .map_or(1.0, |w| if w.scale.is_finite() { w.scale } else { 1.0 })
    }

    /// Calls of every node of `class::method` anywhere in the trees.
    pub fn calls_of(report: &Value, class: &str, method: &str) -> u64 {
        let mut total = 0;
        for t in report
            .get("threads")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            for r in t
                .get("roots")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                walk(r, |n| {
                    if n.get("class").and_then(Value::as_str) == Some(class)
                        && n.get("method").and_then(Value::as_str) == Some(method)
                    {
                        total += u(n, "calls");
                    }
                });
            }
        }
        total
    }

    /// Every calling-context path of the report, merged over threads: a
    /// hash of the path (each frame's class, method and descriptor from the
    /// root down) to its calls, and the path's depth and last frame (to
    /// name a difference). Hashes, not strings: javac's trees hold paths
    /// hundreds of frames deep.
    pub fn paths_and_calls(report: &Value) -> BTreeMap<u64, (u64, String)> {
        let mut out: BTreeMap<u64, (u64, String)> = BTreeMap::new();
        for t in report
            .get("threads")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let mut stack: Vec<(&Value, u64, usize)> = t
                .get("roots")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|r| (r, 0u64, 0usize))
                .collect();
            while let Some((n, parent, depth)) = stack.pop() {
                let k = key(n);
                let mut h = DefaultHasher::new();
                (parent, &k).hash(&mut h);
                let id = h.finish();
                let e = out.entry(id).or_insert((0, format!("depth {depth} {k}")));
                e.0 += u(n, "calls");
                if let Some(ch) = n.get("children").and_then(Value::as_array) {
                    stack.extend(ch.iter().map(|c| (c, id, depth + 1)));
                }
            }
        }
        out
    }

    /// The agent said it instruments only the roots (callee revelation missing).
    pub fn roots_only(&self) -> bool {
        self.warnings
            .iter()
            .any(|w| w.contains("revelation is not available"))
    }
}

/// Two sessions' trees path by path ([`ProfileSummary::paths_and_calls`]):
/// whether they hold the same paths with the same calls, how many paths
/// and calls, and the first few paths that differ.
pub fn compare_paths(a: &BTreeMap<u64, (u64, String)>, b: &BTreeMap<u64, (u64, String)>) -> Value {
    let mut differ = Vec::new();
    let mut n_differ = 0usize;
    for (id, (calls, name)) in a {
        let other = b.get(id).map_or(0, |x| x.0);
        if other != *calls {
            n_differ += 1;
            if differ.len() < 5 {
                differ.push(format!("{name}: {calls} vs {other}"));
            }
        }
    }
    for (id, (calls, name)) in b {
        if !a.contains_key(id) {
            n_differ += 1;
            if differ.len() < 5 {
                differ.push(format!("{name}: 0 vs {calls}"));
            }
        }
    }
    let calls = |m: &BTreeMap<u64, (u64, String)>| m.values().map(|x| x.0).sum::<u64>();
    json!({
        "identical": n_differ == 0,
        "paths": [a.len(), b.len()],
        "calls": [calls(a), calls(b)],
        "paths_differing": n_differ,
        "first_differences": differ,
    })
}

/// Two sessions' trees path by path per root call: the calls of each path
/// over the root calls its tree counted (`ra`, `rb`), compared exactly
/// (`a × rb == b × ra`). Windows timing counts only the root calls of its
/// counting windows, so its tree is set against an exact session's this
/// way. Paths with no call (under windows timing, a stack sample's node
/// the probes never counted) take no part. Also how far apart the two
/// are: half the sum over paths of the difference of their shares of all
/// calls (0: the same distribution), and how many of `b`'s paths `a` never
/// saw.
pub fn compare_paths_per_root(
    a: &BTreeMap<u64, (u64, String)>,
    ra: u64,
    b: &BTreeMap<u64, (u64, String)>,
    rb: u64,
) -> Value {
    let counted = |m: &BTreeMap<u64, (u64, String)>| -> BTreeMap<u64, (u64, String)> {
        m.iter()
            .filter(|(_, v)| v.0 > 0)
            .map(|(k, v)| (*k, v.clone()))
            .collect()
    };
    let (a, b) = (counted(a), counted(b));
    let (ra1, rb1) = (u128::from(ra.max(1)), u128::from(rb.max(1)));
    let mut differ = Vec::new();
    let mut n_differ = 0usize;
    let mut note = |name: &str, x: u64, y: u64| {
        n_differ += 1;
        if differ.len() < 5 {
            differ.push(format!(
                "{name}: {:.3} vs {:.3} per root call",
                x as f64 / ra1 as f64,
                y as f64 / rb1 as f64
            ));
        }
    };
    for (id, (calls, name)) in &a {
        let other = b.get(id).map_or(0, |x| x.0);
        if u128::from(*calls) * rb1 != u128::from(other) * ra1 {
            note(name, *calls, other);
        }
    }
    let mut only_b = 0usize;
    for (id, (calls, name)) in &b {
        if !a.contains_key(id) {
            only_b += 1;
            note(name, 0, *calls);
        }
    }
    let total = |m: &BTreeMap<u64, (u64, String)>| m.values().map(|x| x.0).sum::<u64>();
    let (ta, tb) = (total(&a).max(1) as f64, total(&b).max(1) as f64);
    let mut distance = 0.0;
    for (id, (calls, _)) in &a {
        let other = b.get(id).map_or(0, |x| x.0);
        distance += (*calls as f64 / ta - other as f64 / tb).abs();
    }
    for (id, (calls, _)) in &b {
        if !a.contains_key(id) {
            distance += *calls as f64 / tb;
        }
    }
    json!({
        "identical": n_differ == 0,
        "per_root_call": true,
        "root_calls": [ra, rb],
        "paths": [a.len(), b.len()],
        "calls": [total(&a), total(&b)],
        "paths_differing": n_differ,
        "paths_only_in_second": only_b,
        "distance": distance / 2.0,
        "first_differences": differ,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_roots_and_nodes() {
        let r = json!({"version":1,"target":{"pid":1,"jvm":"x"},
            "stats":{"events":10,"instrumented_methods":3,"called_methods":2,"lost_events":0,"duration_ms":5,"reveal_ms":7},
            "calibration":null,"warnings":["callee revelation is not available yet: x"],
            "threads":[{"id":1,"name":"main","roots":[
              {"class":"a.B","method":"r","descriptor":"()V","calls":2,"total_ns":100,"self_ns":40,"raw_total_ns":120,
               "children":[{"class":"a.B","method":"c","descriptor":"()V","calls":5,"total_ns":60,"self_ns":60,"raw_total_ns":70,"children":[]}]}]}]});
        let s = ProfileSummary::from_json(&r).unwrap();
        assert_eq!((s.root_calls, s.all_calls, s.distinct_methods), (2, 7, 2));
        assert_eq!((s.root_total_ns, s.root_raw_ns), (100.0, 120.0));
        assert_eq!(s.extra_stats.get("reveal_ms"), Some(&json!(7)));
        assert_eq!(s.extra_stats.get("ms_per_batch"), None);
        let r2 = json!({"version":1,"target":{"pid":1,"jvm":"x"},
            "stats":{"events":1,"instrumented_methods":1,"called_methods":1,"lost_events":0,"duration_ms":5,
                     "redefinition_batches":4,"redefinition_ms":30.0,"reveal_ms":10.0},
            "calibration":null,"warnings":[],"threads":[]});
        let s2 = ProfileSummary::from_json(&r2).unwrap();
        assert_eq!(s2.extra_stats.get("ms_per_batch"), Some(&json!(10.0)));
        assert!(s.roots_only() && s.calibration.is_null());
        assert_eq!(ProfileSummary::calls_of(&r, "a.B", "c"), 5);
        assert!(ProfileSummary::from_json(&json!({"version":2})).is_err());
        assert!(ProfileSummary::from_json(&json!([])).is_err());
    }

    #[test]
    fn paths_compare_by_calls_and_context() {
        let tree = |c_calls: u64, under: &str| {
            json!({"threads":[
              {"roots":[{"class":"a.B","method":"r","descriptor":"()V","calls":2,
                "children":[{"class":"a.B","method":under,"descriptor":"()V","calls":1,
                  "children":[{"class":"a.B","method":"c","descriptor":"()V","calls":c_calls,"children":[]}]}]}]},
              {"roots":[{"class":"a.B","method":"r","descriptor":"()V","calls":1,"children":[]}]}]})
        };
        let a = ProfileSummary::paths_and_calls(&tree(5, "m"));
        assert_eq!(a.len(), 3);
        assert_eq!(a.values().map(|x| x.0).sum::<u64>(), 3 + 1 + 5);
        let same = compare_paths(&a, &ProfileSummary::paths_and_calls(&tree(5, "m")));
        assert_eq!(same["identical"], true);
        assert_eq!(same["paths"], json!([3, 3]));
        let counts = compare_paths(&a, &ProfileSummary::paths_and_calls(&tree(6, "m")));
        assert_eq!(counts["identical"], false);
        assert_eq!(counts["paths_differing"], 1);
        // The same methods under another caller are other paths.
        let moved = compare_paths(&a, &ProfileSummary::paths_and_calls(&tree(5, "n")));
        assert_eq!(moved["paths_differing"], 4);
    }

    #[test]
    fn per_root_call_comparison_scales_by_each_sides_root_calls() {
        // A root that makes 3 calls of c per root call: exact over 10
        // root calls, windows over the 4 it counted (and a sampled node
        // with no call, which takes no part).
        let tree = |root_calls: u64, extra: Option<&str>| {
            let mut children = vec![json!({"class":"a.B","method":"c","descriptor":"()V",
                "calls": root_calls * 3, "children":[]})];
            if let Some(m) = extra {
                children.push(json!({"class":"a.B","method":m,"descriptor":"()V","calls":0,"samples":4,"children":[]}));
            }
            json!({"threads":[{"roots":[{"class":"a.B","method":"r","descriptor":"()V",
                "calls": root_calls, "children": children}]}]})
        };
        let exact = ProfileSummary::paths_and_calls(&tree(10, None));
        let windows = ProfileSummary::paths_and_calls(&tree(4, Some("getter")));
        let same = compare_paths_per_root(&exact, 10, &windows, 4);
        assert_eq!(same["identical"], true, "{same}");
        assert_eq!(same["paths"], json!([2, 2]));
        assert_eq!(same["calls"], json!([40, 16]));
        assert_eq!(same["distance"], json!(0.0));
        // Plain totals differ, of course.
        assert_eq!(compare_paths(&exact, &windows)["identical"], false);
        // One call of c too many in the windows tree: 13 / 4 is not 30 / 10.
        let mut off = ProfileSummary::paths_and_calls(&tree(4, None));
        for v in off.values_mut() {
            if v.0 == 12 {
                v.0 = 13;
            }
        }
        let d = compare_paths_per_root(&exact, 10, &off, 4);
        assert_eq!(d["identical"], false);
        assert_eq!(d["paths_differing"], 1);
        assert_eq!(d["paths_only_in_second"], 0);
        assert!(d["distance"].as_f64().unwrap() > 0.0);
        // A path the exact session never saw.
        let other = json!({"threads":[{"roots":[{"class":"a.B","method":"r","descriptor":"()V",
            "calls": 4, "children": [{"class":"a.B","method":"z","descriptor":"()V","calls":12,"children":[]}]}]}]});
        let n = compare_paths_per_root(&exact, 10, &ProfileSummary::paths_and_calls(&other), 4);
        assert_eq!(
            (
                n["paths_differing"].as_u64(),
                n["paths_only_in_second"].as_u64()
            ),
            (Some(2), Some(1))
        );
    }

    #[test]
    fn windows_facts_give_every_root_call_and_the_scale() {
        let r = json!({"version":1,"stats":{"events":1,"instrumented_methods":1,"called_methods":1,
            "lost_events":0,"duration_ms":5},"timing":"sampled",
            "windows":{"counting_ms":50,"silent_ms":950,"interval_us":5000,"counted_root_calls":3,
                "silent_root_calls":27,"scale":10.0,"samples":120,"samples_outside":7},
            "threads":[{"roots":[{"class":"a.B","method":"r","descriptor":"()V","calls":3,"children":[]}]}]});
        let s = ProfileSummary::from_json(&r).unwrap();
        assert_eq!((s.root_calls, s.all_root_calls()), (3, 30));
        assert_eq!(s.scale(), 10.0);
        let w = s.windows.as_ref().unwrap();
        assert_eq!((w.samples, w.samples_outside), (120, 7));
        // Without windows: the trees' root calls, unscaled.
        let mut plain = r.clone();
        plain.as_object_mut().unwrap().remove("windows");
        let p = ProfileSummary::from_json(&plain).unwrap();
        assert_eq!((p.all_root_calls(), p.scale()), (3, 1.0));
    }
}
