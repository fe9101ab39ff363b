//! Sampled allocations (`--alloc-interval`, JVMTI SampledObjectAlloc) end
//! to end, on JDK 17 and 25, with one JVM per JDK for the sessions that
//! can share it (fixture `fixtures.SampledAllocs`): the allocations the
//! JDK makes below the profiled subgraph are sampled onto the node that
//! was open, within a loose bound of the bytes the JVM itself counted for
//! the thread (`ThreadMXBean.getThreadAllocatedBytes`); the exact figures
//! stay exact; the next session on the same JVM samples again (the one before
//! gave the event and its capability back); the samples taken outside
//! every root are reported by the allocating thread's stack (a thread of
//! its own allocating `byte[]`s in `outsideAlloc`); the samples whose
//! allocating frame is the probed `work` itself (its `long[]`s) are
//! counted as at a probed site, those of the JDK's code below it are not;
//! and with the capability held
//! by another JVMTI environment (the agent's test hook) the session says
//! so in one line and counts exact allocations only.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use sprig_tests::{Jdk, Proc, TempDir, fixture_classes, sprig_bin};

const LONG: Duration = Duration::from_secs(120);
/// Root calls per session: ~0.9 MB each, so ~35 MB sampled every 16 KiB
/// on average (about 1,300 samples: the bigger objects count for more;
/// ~400 of them the `long[]`s `work` allocates itself).
const CALLS: u64 = 40;
const INTERVAL: &str = "16384";

fn start_jvm(jdk: &Jdk, classes: &std::path::Path, fault: Option<&str>) -> Proc {
    let mut cmd = Command::new(jdk.java());
    cmd.arg("-cp").arg(classes).arg("fixtures.SampledAllocs");
    if let Some(f) = fault {
        cmd.env("SPRIG_AGENT_FAULT", f);
    }
    let mut p = Proc::spawn(&format!("sampled-allocs-jdk{}", jdk.major), cmd);
    p.wait_for("ready", Duration::from_secs(30), |l| l.starts_with("ready"));
    p
}

/// What one session gave: the JSON report, sprig's stderr, the bytes the
/// fixture's thread allocated in its root calls and the bytes its
/// `outside-alloc` thread allocated (the JVM's counts).
struct Run {
    report: Value,
    transcript: String,
    truth: u64,
    outside_truth: u64,
}

/// The number at the end of `line`.
fn last_number(line: &str) -> u64 {
    line.rsplit(' ')
        .next()
        .and_then(|b| b.parse().ok())
        .unwrap_or_else(|| panic!("bad line {line:?}"))
}

/// One session: attach with `flags`, make `CALLS` root calls, the same
/// work outside the root, and `outsideAlloc` on a thread of its own, then
/// detach.
fn session(jvm: &mut Proc, flags: &[&str]) -> Run {
    let tmp = TempDir::new("salloc");
    let out = tmp.path().join("report.json");
    let mut cmd = Command::new(sprig_bin());
    cmd.args(["profile", &jvm.pid().to_string()])
        .args(["--root", "fixtures.SampledAllocs::root"])
        .args(flags)
        .args(["--format", "json", "-o"])
        .arg(&out);
    let mut sprig = Proc::spawn("sprig", cmd);
    sprig.wait_for("sprig: profiling", LONG, |l| {
        l.starts_with("sprig: profiling")
    });
    jvm.send(&format!("run {CALLS}"));
    let done = jvm.wait_for("done", LONG, |l| l.starts_with("done "));
    let truth = last_number(&done);
    jvm.send("outside");
    jvm.wait_for("outside done", LONG, |l| l == "outside done");
    jvm.send("outside-thread");
    let done = jvm.wait_for("outside-thread done", LONG, |l| {
        l.starts_with("outside-thread done ")
    });
    let outside_truth = last_number(&done);
    let report = sprig.stop_and_json("sampled allocations session", &out);
    Run {
        report,
        transcript: sprig.transcript(),
        truth,
        outside_truth,
    }
}

/// Per class over every node: (samples, estimated bytes, samples at a
/// probed allocating frame) of the sampled lists, and (objects, bytes) of
/// the exact ones.
#[derive(Debug, Default)]
struct Seen {
    sampled: BTreeMap<String, (u64, u64, u64)>,
    exact: BTreeMap<String, (u64, u64)>,
}

fn seen(report: &Value) -> Seen {
    fn walk(node: &Value, s: &mut Seen) {
        for a in node["sampled_allocations"].as_array().into_iter().flatten() {
            let e = s
                .sampled
                .entry(a["class"].as_str().expect("class").to_string())
                .or_default();
            e.0 += a["samples"].as_u64().expect("samples");
            e.1 += a["bytes_est"].as_u64().expect("bytes_est");
            e.2 += a["probed_samples"].as_u64().expect("probed_samples");
        }
        for a in node["allocations"].as_array().into_iter().flatten() {
            let e = s
                .exact
                .entry(a["class"].as_str().expect("class").to_string())
                .or_default();
            e.0 += a["count"].as_u64().expect("count");
            e.1 += a["bytes"].as_u64().expect("bytes");
        }
        for c in node["children"].as_array().into_iter().flatten() {
            walk(c, s);
        }
    }
    let mut s = Seen::default();
    for t in report["threads"].as_array().expect("threads") {
        for r in t["roots"].as_array().expect("roots") {
            walk(r, &mut s);
        }
    }
    s
}

/// Checks a session that sampled: the estimate within a loose bound of
/// the JVM's own count (about 1,000 samples: the estimate's standard
/// error is about 3%; the bound also holds what the probes and the JVM allocate
/// for themselves on the thread), the JDK's classes by their Java names,
/// samples outside the root counted apart, the exact list exact.
fn check_sampled(what: &str, report: &Value, truth: u64) {
    let s = seen(report);
    let samples: u64 = s.sampled.values().map(|v| v.0).sum();
    let est: u64 = s.sampled.values().map(|v| v.1).sum();
    println!("{what}: {samples} samples, ~{est} bytes against {truth} counted by the JVM");
    assert!(samples >= 200, "{what}: {samples} samples\n{s:#?}");
    let ratio = est as f64 / truth as f64;
    assert!(
        (0.7..=1.3).contains(&ratio),
        "{what}: sampled ~{est} bytes, the JVM counted {truth} ({ratio:.3})\n{s:#?}"
    );
    for class in ["java.lang.Integer", "byte[]", "java.lang.Object[]"] {
        assert!(
            s.sampled.get(class).is_some_and(|v| v.0 > 0),
            "{what}: no sample of {class}\n{s:#?}"
        );
        // Allocated by the JDK's code below `work`: not at a probed site,
        // but for the odd one whose allocating JDK method C2 compiled into
        // `work` as an intrinsic (a clean-clone run read 1 of 41 `byte[]`
        // samples on JDK 25): at most a tenth.
        let (n, probed) = (s.sampled[class].0, s.sampled[class].2);
        assert!(
            probed * 10 <= n,
            "{what}: {class}: {probed} of {n} at a probed site\n{s:#?}"
        );
    }
    // `work`'s own `long[1024]`s: at a probed site (at least 90% of them:
    // a first run read 310 of 323 on JDK 17, the others not explained).
    let longs = s.sampled.get("long[]").copied().unwrap_or_default();
    println!(
        "{what}: long[]: {} samples, {} at a probed site",
        longs.0, longs.2
    );
    assert!(
        longs.0 >= 50 && longs.2 * 10 >= longs.0 * 9,
        "{what}: long[] samples (all, at a probed site) {:?}\n{s:#?}",
        (longs.0, longs.2)
    );
    // Exact: the root's own `new ArrayList`, once per call.
    assert_eq!(
        s.exact.get("java.util.ArrayList").map(|v| v.0),
        Some(CALLS),
        "{what}\n{s:#?}"
    );
    // The same work outside the root: sampled, counted apart.
    let outside = &report["sampled_outside_roots"];
    assert!(
        outside["samples"].as_u64().is_some_and(|n| n > 0),
        "{what}: {outside}"
    );
}

/// Checks the samples outside every root by stack: the `outside-alloc`
/// thread's `byte[]`s on a stack whose innermost frame is
/// `fixtures.SampledAllocs.outsideAlloc`, their estimate within a loose
/// bound of the bytes the JVM counted for that thread (about 900 samples of
/// ~18 KiB each: a standard error near 3.5%), and the stacks adding up to
/// the outside totals.
fn check_outside(what: &str, report: &Value, outside_truth: u64) {
    let stacks = report["sampled_outside_stacks"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: no sampled_outside_stacks in the report"));
    let innermost = |s: &Value| {
        let f = &s["frames"][0];
        (
            f["class"].as_str().unwrap_or("").to_string(),
            f["method"].as_str().unwrap_or("").to_string(),
        )
    };
    let ours: Vec<&Value> = stacks
        .iter()
        .filter(|s| {
            s["class"] == "byte[]"
                && innermost(s) == ("fixtures.SampledAllocs".into(), "outsideAlloc".into())
        })
        .collect();
    let est: u64 = ours.iter().map(|s| s["bytes_est"].as_u64().unwrap()).sum();
    let samples: u64 = ours.iter().map(|s| s["samples"].as_u64().unwrap()).sum();
    println!(
        "{what}: outsideAlloc: {samples} samples on {} stacks, ~{est} bytes against {outside_truth} \
         counted by the JVM",
        ours.len()
    );
    let ratio = est as f64 / outside_truth as f64;
    assert!(
        samples >= 100 && (0.6..=1.5).contains(&ratio),
        "{what}: outsideAlloc's byte[]: ~{est} bytes in {samples} samples, the JVM counted \
         {outside_truth} ({ratio:.3})\n{stacks:#?}"
    );
    // Each of those stacks goes on to its caller, named.
    for s in &ours {
        let frames = s["frames"].as_array().expect("frames");
        assert!(
            frames.len() >= 2 && frames.iter().all(|f| f["method"].as_str().is_some()),
            "{what}: {s}"
        );
    }
    // The stacks and the samples kept without one are the outside totals.
    let outside = &report["sampled_outside_roots"];
    let all: u64 = stacks.iter().map(|s| s["samples"].as_u64().unwrap()).sum();
    let unkept = outside["stacks_unkept"]["samples"]
        .as_u64()
        .expect("unkept");
    assert_eq!(
        Some(all + unkept),
        outside["samples"].as_u64(),
        "{what}: {outside}"
    );
}

#[test]
fn jdk_allocations_below_the_subgraph_are_sampled_onto_the_open_node() {
    for jdk in sprig_tests::test_jdks("sampled_allocations") {
        let t0 = Instant::now();
        let classes = fixture_classes(&jdk);
        let mut jvm = start_jvm(&jdk, classes.path(), None);
        let flags = ["--alloc", "--alloc-interval", INTERVAL];
        for round in ["session A", "session B, after A detached"] {
            let run = session(&mut jvm, &flags);
            let what = format!("JDK {} {round}", jdk.major);
            check_sampled(&what, &run.report, run.truth);
            check_outside(&what, &run.report, run.outside_truth);
        }
        jvm.send("exit");
        let _ = jvm.wait_exit(LONG);
        println!("JDK {}: {:.1} s", jdk.major, t0.elapsed().as_secs_f64());
    }
}

#[test]
fn held_by_another_environment_the_session_counts_exact_allocations_only() {
    for jdk in sprig_tests::test_jdks("sampled_allocations_held") {
        let t0 = Instant::now();
        let classes = fixture_classes(&jdk);
        let mut jvm = start_jvm(&jdk, classes.path(), Some("sampled-alloc-held"));
        let flags = ["--alloc", "--alloc-interval", INTERVAL];
        let Run {
            report, transcript, ..
        } = session(&mut jvm, &flags);
        let what = format!("JDK {}", jdk.major);
        let lines: Vec<&str> = transcript
            .lines()
            .filter(|l| l.contains("can_generate_sampled_object_alloc_events"))
            .collect();
        assert_eq!(lines.len(), 1, "{what}: one line expected\n{transcript}");
        assert!(
            lines[0].contains("exact allocations only"),
            "{what}\n{transcript}"
        );
        let s = seen(&report);
        assert!(s.sampled.is_empty(), "{what}: {s:#?}");
        assert_eq!(
            s.exact.get("java.util.ArrayList").map(|v| v.0),
            Some(CALLS),
            "{what}\n{s:#?}"
        );
        jvm.send("exit");
        let _ = jvm.wait_exit(LONG);
        println!("JDK {}: {:.1} s", jdk.major, t0.elapsed().as_secs_f64());
    }
}

#[test]
fn a_bad_interval_is_one_clear_line() {
    for bad in ["-5", "lots", "4294967296"] {
        let arg = format!("--alloc-interval={bad}");
        let (code, _, err) =
            sprig_tests::run_sprig(&["run", &arg, "--root", "a.B::c", "--", "java"], LONG);
        assert_eq!(code, 2, "{bad}: {err}");
        assert!(err.contains("--alloc-interval"), "{bad}: {err}");
    }
}
