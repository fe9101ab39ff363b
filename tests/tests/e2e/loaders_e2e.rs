//! Attaching to a program that defines classes as it goes: `gen.Units`
//! (fixtures/src/gen) defines the 24 classes of `gen.script` again in a
//! class loader of its own for every unit of work and keeps the last KEEP
//! loaders alive, as a scripting engine compiling a script per request, so
//! that each of those names has KEEP classes in the JVM. A session profiling
//! `gen.Units::unit` must retransform a number of classes that does not grow
//! with KEEP, instrument about what it calls, record every call of the units
//! run while it profiles, and detach; twice in the same JVM.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use sprig_tests::{Jdk, Proc, Stream, TempDir, fixture_classes, start_sprig, test_jdks};

const LONG: Duration = Duration::from_secs(60);
/// Live class loaders, each with 24 classes of the same names.
const KEEP: u32 = 150;
/// Units run while a session profiles.
const UNITS: u64 = 10;
/// Classes of `gen.script` a unit defines.
const CLASSES_A_UNIT: usize = 24;
/// Classes a session may retransform, restore excepted: the root's class,
/// its loader class, one unit's classes and reflection's two watch points,
/// with room to spare; a tenth of one class per live loader.
const RETRANSFORMED_MAX: usize = 40;

fn start_units(jdk: &Jdk, classes: &std::path::Path, keep: u32) -> Proc {
    let cwd = TempDir::new("loaders-cwd");
    let mut cmd = Command::new(jdk.java());
    cmd.current_dir(cwd.path())
        .env("SPRIG_AGENT_DEBUG", "1")
        .arg("-cp")
        .arg(classes)
        .arg("gen.Units")
        .arg(keep.to_string());
    let mut p = Proc::spawn(&format!("units-jdk{}", jdk.major), cmd);
    p.cwd = Some(cwd);
    p.wait_for("ready", LONG, |l| l.starts_with("ready"));
    p
}

/// Calls per CCT path (`Class.method > ...`, `gen.` and `gen.script.`
/// left out), summed over every thread; no node may be incomplete.
fn paths(report: &Value) -> BTreeMap<String, u64> {
    sprig_tests::calls_by_path(report, &["gen.script.", "gen."])
}

/// Classes retransformed by the agent's batches (`SPRIG_AGENT_DEBUG` lines
/// `batch at +N ms: K classes in ...`) among `lines`.
fn retransformed(lines: &[String]) -> usize {
    lines
        .iter()
        .filter_map(|l| l.strip_prefix("sprig agent: batch at +"))
        .filter_map(|l| {
            l.split(": ")
                .nth(1)?
                .split(' ')
                .next()?
                .parse::<usize>()
                .ok()
        })
        .sum()
}

/// One session: profile while UNITS units run, detach; checks the tree,
/// the work and the detach. Returns (instrumented, called, retransformed).
fn session(jdk: &Jdk, jvm: &mut Proc, n: u32) -> (u64, u64, usize) {
    let what = format!("JDK {} session {n}", jdk.major);
    let before = jvm.lines_of(Stream::Stderr).len();
    let out_dir = TempDir::new("loaders-out");
    let out = out_dir.path().join("report.json");
    let mut sprig = start_sprig(
        jvm.pid(),
        // Every method: the generated units' leaves are trivial.
        &[
            "--root",
            "gen.Units::unit",
            "--format",
            "json",
            "--keep-trivial",
        ],
        &out,
    );
    jvm.send(&format!("run {UNITS}"));
    jvm.wait_for("done", LONG, |l| l.starts_with("done "));
    sprig.stop(&what);
    let transcript = sprig.transcript();
    assert!(
        !transcript.contains("did not confirm the detach"),
        "{what}: {transcript}"
    );
    // The agent's end-of-session lines come after the restore.
    let deadline = Instant::now() + Duration::from_secs(10);
    let end = "instrumented methods never called";
    while !jvm.lines_of(Stream::Stderr)[before..]
        .iter()
        .any(|l| l.contains(end))
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("report")).expect("JSON");

    // Every unit run while profiling, each call exactly once.
    let got = paths(&report);
    let n_units = UNITS;
    assert_eq!(got.get("Units.unit"), Some(&n_units), "{what}: {got:#?}");
    assert_eq!(
        got.get("Units.unit > Script.run"),
        Some(&n_units),
        "{what}: {got:#?}"
    );
    for i in 0..CLASSES_A_UNIT - 2 {
        let apply = format!("Units.unit > Script.run > Script$S{i}.apply");
        assert_eq!(got.get(&apply), Some(&n_units), "{what}: {apply}");
        assert_eq!(
            got.get(&format!("{apply} > Script$S{i}.mix")),
            Some(&n_units),
            "{what}: {apply}.mix"
        );
    }

    // The work: what the batches retransformed does not grow with the
    // loaders, and about only what ran is instrumented.
    let stats = &report["stats"];
    let instrumented = stats["instrumented_methods"]
        .as_u64()
        .expect("instrumented");
    let called = stats["called_methods"].as_u64().expect("called");
    let lines = jvm.lines_of(Stream::Stderr)[before..].to_vec();
    let classes = retransformed(&lines);
    println!(
        "{what}: {instrumented} instrumented, {called} called, {classes} classes retransformed \
         with {} live loaders of {CLASSES_A_UNIT} classes, {} batches, {:.1} ms redefining",
        KEEP, stats["redefinition_batches"], stats["redefinition_ms"]
    );
    assert!(
        (1..=RETRANSFORMED_MAX).contains(&classes),
        "{what}: {classes} classes retransformed:\n{}",
        lines.join("\n")
    );
    assert!(
        instrumented * 100 <= called * 105,
        "{what}: {instrumented} instrumented for {called} called: {stats}"
    );
    // The other loaders' classes left as they were are said.
    let warnings = report["warnings"].to_string();
    let left = (KEEP as usize - 1) * CLASSES_A_UNIT;
    assert!(
        warnings.contains("left uninstrumented because classes of the same names"),
        "{what}: {warnings}"
    );
    let said: usize = warnings
        .split(" loaded classes were left uninstrumented because")
        .next()
        .and_then(|w| w.split_whitespace().last())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        said >= left,
        "{what}: {said} left, expected {left}+: {warnings}"
    );
    (instrumented, called, classes)
}

#[test]
fn attach_work_does_not_grow_with_class_loaders_defining_the_same_names() {
    for jdk in test_jdks("attach_work_does_not_grow_with_class_loaders_defining_the_same_names") {
        let classes = fixture_classes(&jdk);
        let mut jvm = start_units(&jdk, classes.path(), KEEP);
        let earlier = session(&jdk, &mut jvm, 1);
        // Profiling the same JVM again (more loaders alive now, none
        // collected) does the same work.
        let again = session(&jdk, &mut jvm, 2);
        assert_eq!(earlier.0, again.0, "JDK {}: instrumented", jdk.major);
        assert_eq!(earlier.1, again.1, "JDK {}: called", jdk.major);
        jvm.send("exit");
        let _ = jvm.wait_exit(Duration::from_secs(10));
    }
}

/// A root whose class several live loaders define (one server hosting the
/// same application twice): every copy of the root's class is profiled,
/// not only the newest loader's.
#[test]
fn a_root_defined_by_two_loaders_is_profiled_in_both() {
    for jdk in test_jdks("a_root_defined_by_two_loaders_is_profiled_in_both") {
        let classes = fixture_classes(&jdk);
        let mut jvm = start_units(&jdk, classes.path(), 4);
        // Both deployments exist (and the newest units after them) before
        // the attach.
        jvm.send("apps 1");
        jvm.wait_for("apps", LONG, |l| l.starts_with("apps "));
        jvm.send("run 2");
        jvm.wait_for("done", LONG, |l| l.starts_with("done "));
        let out_dir = TempDir::new("loaders-apps-out");
        let out = out_dir.path().join("report.json");
        let mut sprig = start_sprig(
            jvm.pid(),
            &[
                "--root",
                "gen.script.Script::run",
                "--format",
                "json",
                "--keep-trivial",
            ],
            &out,
        );
        jvm.send("apps 20");
        jvm.wait_for("apps", LONG, |l| l.starts_with("apps 20 "));
        let report = sprig.stop_and_json(&format!("JDK {}", jdk.major), &out);
        let got = paths(&report);
        assert_eq!(
            got.get("Script.run"),
            Some(&40),
            "JDK {}: both deployments' 20 calls: {got:#?}",
            jdk.major
        );
        jvm.send("exit");
        let _ = jvm.wait_exit(Duration::from_secs(10));
    }
}
