//! `--alloc` end to end: a fixture with known allocations per root call
//! (fixtures/src/fixtures/Allocs.java) profiled from the JVM's start with
//! `sprig run`, on JDK 17 and 25 (and on 25 with compact object headers):
//! each calling context's objects per class are exact, and their bytes are
//! what the JVM's layout gives (object header, compressed class pointers,
//! 8-byte alignment), which the JSON report's per-node `allocations` list
//! must match.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use sprig_tests::{Jdk, Proc, TempDir, fixture_classes, run_sprig, sprig_bin};

const LONG: Duration = Duration::from_secs(120);
/// Root calls the fixture makes.
const CALLS: u64 = 20;

/// (path of methods, class) -> (objects, bytes), over every thread.
type Allocs = BTreeMap<(String, String), (u64, u64)>;
/// Path of methods -> calls, over every thread.
type Calls = BTreeMap<String, u64>;

fn collect(report: &Value) -> (Allocs, Calls) {
    fn walk(node: &Value, prefix: &str, out: &mut Allocs, calls: &mut Calls) {
        let class = node["class"].as_str().expect("class");
        let short = class.strip_prefix("fixtures.").unwrap_or(class);
        let mut method = node["method"].as_str().expect("method").to_string();
        // javac names lambda bodies lambda$NAME$N: the N is javac's
        if method.starts_with("lambda$") {
            method = "lambda".into();
        }
        let name = format!("{short}.{method}");
        let path = if prefix.is_empty() {
            name
        } else {
            format!("{prefix} > {name}")
        };
        *calls.entry(path.clone()).or_default() += node["calls"].as_u64().unwrap();
        for a in node["allocations"].as_array().into_iter().flatten() {
            let e = out
                .entry((path.clone(), a["class"].as_str().unwrap().to_string()))
                .or_default();
            e.0 += a["count"].as_u64().unwrap();
            e.1 += a["bytes"].as_u64().unwrap();
        }
        for c in node["children"].as_array().into_iter().flatten() {
            walk(c, &path, out, calls);
        }
    }
    let mut out = Allocs::new();
    let mut calls = Calls::new();
    for t in report["threads"].as_array().expect("threads") {
        for r in t["roots"].as_array().expect("roots") {
            walk(r, "", &mut out, &mut calls);
        }
    }
    (out, calls)
}

/// The heap layout the sizes follow: object header bytes, and where an
/// array's elements start (by element size).
#[derive(Clone, Copy, Debug)]
struct Layout {
    compact: bool,
}

impl Layout {
    fn align(n: u64) -> u64 {
        n.div_ceil(8) * 8
    }
    /// An instance with fields of these sizes (compressed references: 4).
    fn object(self, fields: &[u64]) -> u64 {
        let header = if self.compact { 8 } else { 12 };
        Self::align(header + fields.iter().sum::<u64>())
    }
    /// An array of `len` elements of `elem` bytes.
    fn array(self, elem: u64, len: u64) -> u64 {
        // header and length, the elements aligned to their size
        let head: u64 = if self.compact { 12 } else { 16 };
        let base = head.div_ceil(elem) * elem;
        Self::align(base + elem * len)
    }
}

/// The JSON report (rendered from the run's snapshot: snapshots carry the
/// allocations) and the text report of the same snapshot.
fn profile(jdk: &Jdk, flags: &[&str], timing: &str, fault: Option<&str>) -> (Value, String) {
    let env: Vec<(&str, &str)> = fault
        .map(|f| ("SPRIG_AGENT_FAULT", f))
        .into_iter()
        .collect();
    profile_with(jdk, flags, timing, &env, CALLS)
}

/// [`profile`] of `calls` root calls, the JVM run with `env`.
fn profile_with(
    jdk: &Jdk,
    flags: &[&str],
    timing: &str,
    env: &[(&str, &str)],
    calls: u64,
) -> (Value, String) {
    let classes = fixture_classes(jdk);
    let tmp = TempDir::new("alloc");
    let out = tmp.path().join("alloc.sprig");
    let mut cmd = Command::new(sprig_bin());
    cmd.args([
        "run",
        "--alloc",
        "--timing",
        timing,
        "--root",
        "fixtures.Allocs::root",
        "-o",
    ])
    .arg(&out)
    .arg("--")
    .arg(jdk.java())
    .args(flags)
    .arg("-cp")
    .arg(classes.path())
    .arg("fixtures.Allocs")
    .arg(calls.to_string());
    cmd.envs(env.iter().copied());
    let mut p = Proc::spawn("sprig-run-alloc", cmd);
    p.wait_for("done", LONG, |l| l.starts_with("done"));
    let status = p.wait_exit(LONG).expect("sprig run ends with the JVM");
    assert!(status.success(), "{status}\n{}", p.transcript());
    let snapshot = out.to_str().unwrap();
    let (code, json, err) = run_sprig(&["report", snapshot, "--format", "json"], LONG);
    assert_eq!(code, 0, "{err}");
    let (code, text, err) = run_sprig(&["report", snapshot], LONG);
    assert_eq!(code, 0, "{err}");
    (serde_json::from_str(&json).unwrap(), text)
}

fn check(jdk: &Jdk, flags: &[&str], timing: &str, layout: Layout, fault: Option<&str>) {
    let (report, text) = profile(jdk, flags, timing, fault);
    // The fixture also allocates outside the root: the probes record nothing
    // there (the builder would warn of records outside a root context).
    let warnings = report["warnings"].to_string();
    assert!(!warnings.contains("allocation records"), "{warnings}");
    let (got, calls) = collect(&report);
    let n = CALLS;
    let r = "Allocs.root";
    let what = format!("JDK {} {flags:?} --timing {timing} {fault:?}", jdk.major);
    // Every allocating context runs once per root call, but the super
    // constructor: revelation finds it at the first entry of the
    // constructor that calls it, which comes after `super(...)` ran, so its
    // first call is not seen (nor what it allocated).
    let base = format!("{r} > Allocs.ctorChain > Allocs$Base.<init>");
    // Allocations per call, times the context's calls.
    let mut want = Allocs::new();
    let mut put = |path: &str, class: &str, count: u64, each: u64| {
        let path = format!("{r} > {path}");
        let k = calls.get(&path).copied().unwrap_or(0);
        let low = if path == base { n - 1 } else { n };
        assert!(
            (low..=n).contains(&k),
            "{what}: {k} calls of {path}\n{calls:#?}"
        );
        want.insert((path, class.to_string()), (count * k, count * each * k));
    };
    let point = layout.object(&[4, 4]);
    put("Allocs.instances", "fixtures.Allocs$Point", 2, point);
    put(
        "Allocs.instances",
        "fixtures.Allocs$Outer$Inner",
        1,
        layout.object(&[4]),
    );
    put("Allocs.arrays", "int[]", 1, layout.array(4, 10));
    put("Allocs.arrays", "java.lang.String[]", 1, layout.array(4, 4));
    put("Allocs.arrays", "byte[]", 1, layout.array(1, 200));
    put("Allocs.multi", "int[][]", 1, layout.array(4, 3));
    put("Allocs.multi", "int[]", 3, layout.array(4, 5));
    put(
        "Allocs.lambda > Allocs.lambda",
        "fixtures.Allocs$Point",
        1,
        point,
    );
    put(
        "Allocs.ctorChain",
        "fixtures.Allocs$Derived",
        1,
        layout.object(&[4, 4]),
    );
    // The super constructor is the constructor's sibling (ARCHITECTURE.md).
    put(
        "Allocs.ctorChain > Allocs$Base.<init>",
        "long[]",
        1,
        layout.array(8, 3),
    );
    put(
        "Allocs.ctorChain > Allocs$Derived.<init>",
        "fixtures.Allocs$Point",
        1,
        point,
    );
    put(
        "Allocs.throwing > Allocs.thrower",
        "int[]",
        1,
        layout.array(4, 7),
    );
    // Object.clone() of an instance: a copy of the class whose method
    // copies, and one of a subclass that inherits the method (recorded
    // under its own class), each weighed as the JVM weighs it; the
    // copying method runs twice a root call.
    let copy = format!("{r} > Allocs.copies > Allocs$Copyable.copy");
    let k = calls.get(&copy).copied().unwrap_or(0);
    assert_eq!(k, 2 * n, "{what}: calls of {copy}\n{calls:#?}");
    want.insert(
        (copy.clone(), "fixtures.Allocs$Copyable".to_string()),
        (n, n * layout.object(&[4])),
    );
    want.insert(
        (copy, "fixtures.Allocs$Wider".to_string()),
        (n, n * layout.object(&[4, 8])),
    );
    // A generic array's clone(): the code names Object[], the copy is a
    // Point[] of two.
    let dup = format!("{r} > Allocs.copies > Allocs.dup");
    assert_eq!(calls.get(&dup).copied(), Some(n), "{what}\n{calls:#?}");
    want.insert(
        (dup, "fixtures.Allocs$Point[]".to_string()),
        (n, n * layout.array(4, 2)),
    );
    // The exception's size depends on the JDK's Throwable: count only.
    let ise = (
        format!("{r} > Allocs.throwing > Allocs.thrower"),
        "java.lang.IllegalStateException".to_string(),
    );
    let mut got = got;
    let (count, bytes) = got.remove(&ise).unwrap_or_default();
    assert_eq!(count, n, "{what}: IllegalStateException objects");
    assert!(
        bytes >= count * 16,
        "{what}: IllegalStateException bytes {bytes}"
    );
    assert_eq!(got, want, "{what}");
    // The text report: allocation columns, and the hot spots by site and
    // class, the most bytes first (byte[200] on every layout here).
    assert!(text.contains("alloc bytes"), "{what}:\n{text}");
    let spots: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("allocation hot spots: exact"))
        .skip(2)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    assert!(
        spots
            .first()
            .is_some_and(|l| l.contains("  byte[]  ") && l.contains("fixtures.Allocs.arrays @")),
        "{what}:\n{text}"
    );
    let bytes_of = |l: &str| l.split_whitespace().next().unwrap().parse::<u64>().unwrap();
    assert!(
        spots.windows(2).all(|w| bytes_of(w[0]) >= bytes_of(w[1])),
        "{what}:\n{text}"
    );
}

#[test]
fn allocations_per_context_are_exact_and_weigh_what_the_jvm_says() {
    for jdk in sprig_tests::test_jdks("allocations_per_context_are_exact") {
        check(&jdk, &[], "sampled", Layout { compact: false }, None);
        if jdk.major >= 25 {
            check(
                &jdk,
                &["-XX:+UseCompactObjectHeaders"],
                "exact",
                Layout { compact: true },
                None,
            );
        }
    }
}

/// Under sampled timing the probes write allocation records from Java:
/// only a site's first allocation (its instance size learned), an array
/// type's first (its layout learned), a `clone()` site's first copy of
/// each class (a class and a subclass at one site, a `Point[]` where the
/// code names `Object[]`) and a `multianewarray` go through JNI. On
/// every JDK (11 and 21 included: the same probe class as 17's). The agent's test hook drops every other allocation the native
/// path sees, so the counts and bytes are exact only if the Java path
/// recorded them, on JDK 25 with compact object headers too.
#[test]
fn under_sampled_timing_allocations_are_recorded_from_java_after_the_first() {
    const HOOK: Option<&str> = Some("alloc-jni-learns-only");
    for jdk in sprig_tests::every_jdk("allocations_are_recorded_from_java") {
        check(&jdk, &[], "sampled", Layout { compact: false }, HOOK);
        if jdk.major >= 25 {
            check(
                &jdk,
                &["-XX:+UseCompactObjectHeaders"],
                "sampled",
                Layout { compact: true },
                HOOK,
            );
        }
    }
}

/// The probe class stays in its JVM after the session: an older sprig's
/// agent attached later uses it, and its reader knows only the records
/// its own natives write. The Java path writes its one-slot `Alloc`
/// events only while the agent set `Probe.allocJava`; the agent's test
/// hook `alloc-java-unset` leaves it as such an agent does, and
/// `alloc-jni-learns-only` drops every allocation the natives get that
/// the Java path could have recorded: so the fixture's objects after each
/// site's first all go missing, where they would be exact had the Java
/// path recorded them.
#[test]
fn the_java_path_records_allocations_only_for_an_agent_that_asked_for_it() {
    const MANY: u64 = 50_000;
    let Some(jdk) = sprig_tests::test_jdks("alloc_java_unset")
        .into_iter()
        .next()
    else {
        return;
    };
    let env = [(
        "SPRIG_AGENT_FAULT",
        "alloc-jni-learns-only,alloc-java-unset",
    )];
    let (report, text) = profile_with(&jdk, &[], "sampled", &env, MANY);
    let (got, calls) = collect(&report);
    let path = "Allocs.root > Allocs.instances";
    assert_eq!(calls.get(path).copied(), Some(MANY), "{text}");
    let points = got
        .get(&(path.to_string(), "fixtures.Allocs$Point".to_string()))
        .map_or(0, |a| a.0);
    // two a call; the natives record a site's first only
    assert!(
        points <= 2,
        "{points} points recorded of {}\n{text}",
        2 * MANY
    );
}

/// The measurement knob `exact-alloc-duty` (sprig-bench `--only
/// alloc-duty`) pauses the exact allocation probes' recording, on the
/// Java path and the agent's, in every other turn of 20 ms: over a run of
/// many turns about half of the fixture's allocations are recorded, while
/// its calls stay exact.
#[test]
fn the_exact_alloc_duty_knob_records_allocations_in_every_other_turn() {
    const MANY: u64 = 300_000;
    let Some(jdk) = sprig_tests::test_jdks("exact_alloc_duty")
        .into_iter()
        .next()
    else {
        return;
    };
    let env = [
        ("SPRIG_AGENT_FAULT", "exact-alloc-duty"),
        ("SPRIG_AGENT_ALLOC_DUTY_MS", "20"),
    ];
    let (report, text) = profile_with(&jdk, &[], "sampled", &env, MANY);
    let (got, calls) = collect(&report);
    let path = "Allocs.root > Allocs.instances";
    assert_eq!(calls.get(path).copied(), Some(MANY), "{text}");
    let points = got
        .get(&(path.to_string(), "fixtures.Allocs$Point".to_string()))
        .map_or(0, |a| a.0);
    // two a call while recording
    let share = points as f64 / (2 * MANY) as f64;
    assert!(
        (0.2..=0.8).contains(&share),
        "{points} points recorded of {} ({share:.3})\n{text}",
        2 * MANY
    );
}

/// Under windows timing the allocation probes record in the counted root
/// calls only, exactly there: the objects per counted call are the
/// fixture's, and the silent root calls add none (their probes record
/// nothing, so the exact path costs only in the counting windows).
#[test]
fn under_windows_timing_allocations_are_exact_per_counted_root_call() {
    const MANY: u64 = 300_000;
    let Some(jdk) = sprig_tests::test_jdks("alloc_windows").into_iter().next() else {
        return;
    };
    let (report, text) = profile_with(&jdk, &[], "windows", &[], MANY);
    let counted = report["windows"]["counted_root_calls"]
        .as_u64()
        .unwrap_or(0);
    let silent = report["windows"]["silent_root_calls"].as_u64().unwrap_or(0);
    assert!(
        counted > 0 && silent > 0,
        "{counted} counted, {silent} silent\n{text}"
    );
    let (got, calls) = collect(&report);
    let path = "Allocs.root > Allocs.instances";
    let k = calls.get(path).copied().unwrap_or(0);
    assert!(k > 0 && k < MANY, "{k} counted calls of {path}\n{text}");
    let objects = |class: &str| {
        got.get(&(path.to_string(), class.to_string()))
            .map_or(0, |a| a.0)
    };
    assert_eq!(objects("fixtures.Allocs$Point"), 2 * k, "{text}");
    assert_eq!(objects("fixtures.Allocs$Outer$Inner"), k, "{text}");
}
