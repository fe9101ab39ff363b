//! Sampled timing on real JVMs (JDK 17, and JDK 25 where installed): the
//! same calling context tree and call counts as exact timing, samples
//! credited only to nodes inside root contexts, none behind the stream,
//! and each root's latency present and consistent with its measured time.
//! Also that the probes inside root contexts record in Java (the agent
//! writes only a small share of the events), that sessions in a row in one
//! JVM stay exact, and that a CLI killed mid-session leaves a JVM that
//! runs on and can be profiled again. Nothing here depends on how fast the
//! host is.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use sprig_tests::{
    Jdk, Proc, TempDir, every_jdk, fixture_classes, sprig_bin, start_sprig, start_workload,
};
use std::time::Instant;

const LONG: Duration = Duration::from_secs(120);

/// Profiles `fixtures.Calls` roots over the `calls` (2 x 500 root calls)
/// and `long` (one root call of 3 million rounds) scenarios with `extra`
/// options; the JSON report.
fn session(jvm: &mut Proc, out: &Path, extra: &[&str]) -> Value {
    let mut args = vec![
        "--root",
        "fixtures.Calls::root",
        "--root",
        "fixtures.Calls::longRoot",
        "--format",
        "json",
        // Every method: the trees compared hold the fixture's trivial leaves.
        "--keep-trivial",
    ];
    args.extend_from_slice(extra);
    let mut p = start_sprig(jvm.pid(), &args, out);
    for (scenario, n, threads) in [("calls", 500, 2), ("long", 1, 1)] {
        jvm.send(&format!("run {scenario} {n} {threads}"));
        let done = format!("done {scenario}");
        jvm.wait_for(&done, LONG, |l| l.starts_with(&done));
    }
    p.stop_and_json(&format!("session {extra:?}"), out)
}

/// Calls per path (`root;child;...` of method names) over all threads.
fn path_calls(report: &Value) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let mut stack: Vec<(String, &Value)> = Vec::new();
    for t in report["threads"].as_array().unwrap() {
        for r in t["roots"].as_array().unwrap() {
            stack.push((String::new(), r));
        }
    }
    while let Some((prefix, n)) = stack.pop() {
        let path = format!("{prefix};{}", n["method"].as_str().unwrap());
        *out.entry(path.clone()).or_default() += n["calls"].as_u64().unwrap();
        for c in n["children"].as_array().into_iter().flatten() {
            stack.push((path.clone(), c));
        }
    }
    out
}

/// Every node of a thread's tree.
fn nodes(thread: &Value) -> Vec<&Value> {
    let mut all = Vec::new();
    let mut stack: Vec<&Value> = thread["roots"].as_array().unwrap().iter().collect();
    while let Some(n) = stack.pop() {
        all.push(n);
        stack.extend(n["children"].as_array().into_iter().flatten());
    }
    all
}

fn check_latency(root: &Value, sampled: bool) {
    let l = &root["latency"];
    let calls = root["calls"].as_u64().unwrap();
    let count = l["count"]
        .as_u64()
        .unwrap_or_else(|| panic!("no latency: {root}"));
    assert_eq!(
        count,
        calls - root["incomplete"].as_u64().unwrap_or(0),
        "{l}"
    );
    let q: Vec<u64> = ["min_ns", "p50_ns", "p90_ns", "p99_ns", "max_ns"]
        .iter()
        .map(|k| l[*k].as_u64().unwrap())
        .collect();
    assert!(
        q.windows(2).all(|w| w[0] <= w[1]),
        "quantiles out of order: {l}"
    );
    // Each call is its measured time less the profiler's waits inside it
    // (in exact mode less the probes' calibrated cost too, never below
    // zero), so the calls add up to the root's measured time less waits
    // (sampled), or to at least its unclamped exact total (exact: where
    // the probes' cost swamps a call, that call reads 0).
    let measured = root["raw_total_ns"].as_u64().unwrap() - root["adjust_ns"].as_u64().unwrap();
    let slack = count; // rounding: up to a nanosecond a call
    assert!(
        count * q[0] <= measured + slack,
        "{count} calls of at least {} ns exceed the measured {measured} ns: {l}",
        q[0]
    );
    let floor = if sampled {
        assert_eq!(root["probe_ns"], 0);
        measured
    } else {
        // A call's latency is charged the probe cost the exact total
        // charges, except where a later calibration replaced the one it
        // was charged (the thread's first burst came after the call, or a
        // faster session calibration): the two part by that change, a
        // share of the probe cost, never of what is left after it (here a
        // root of 6 million calls whose probes are nearly all its time).
        let probe = root["probe_ns"].as_u64().unwrap();
        measured.saturating_sub(probe + probe / 100)
    };
    assert!(
        floor <= count * q[4] + slack,
        "{count} calls of at most {} ns cannot add up to {floor} ns: {l}",
        q[4]
    );
}

#[test]
fn sampled_timing_keeps_the_exact_tree_and_counts_and_credits_samples_inside_roots() {
    for jdk in every_jdk("sampled_timing_keeps_the_exact_tree") {
        run_on(&jdk);
    }
}

fn run_on(jdk: &Jdk) {
    let classes = fixture_classes(jdk);
    let mut jvm = start_workload(jdk, classes.path(), &[]);
    let tmp = TempDir::new("sampled");
    // Warm up, so that both sessions see the same code.
    jvm.send("run calls 2000 1");
    jvm.wait_for("done calls", LONG, |l| l.starts_with("done calls"));
    let exact = session(
        &mut jvm,
        &tmp.path().join("exact.json"),
        &["--timing", "exact"],
    );
    let sampled = session(
        &mut jvm,
        &tmp.path().join("sampled.json"),
        &["--timing", "sampled", "--interval", "0.5"],
    );
    // And exact timing again in the same JVM: every thread times its
    // calls again (the sampled session's state is gone).
    let exact_again = session(
        &mut jvm,
        &tmp.path().join("exact2.json"),
        &["--timing", "exact"],
    );
    assert_eq!(exact["timing"], "exact");
    assert_eq!(sampled["timing"], "sampled");
    assert_eq!(exact_again["timing"], "exact");
    // Inside a root context the probes read no clock under sampled
    // timing: no node below a root has measured time; under exact timing
    // the callees do.
    let inner_raw = |report: &Value| -> u64 {
        report["threads"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|t| t["roots"].as_array().unwrap().iter())
            .flat_map(|r| r["children"].as_array().into_iter().flatten())
            .map(|c| c["raw_total_ns"].as_u64().unwrap())
            .sum()
    };
    assert_eq!(
        inner_raw(&sampled),
        0,
        "JDK {}: a probe read the clock",
        jdk.major
    );
    assert!(inner_raw(&exact) > 0 && inner_raw(&exact_again) > 0);
    assert_eq!(path_calls(&exact_again), path_calls(&exact));

    // The same tree and the same counts, path by path.
    let (e, s) = (path_calls(&exact), path_calls(&sampled));
    assert_eq!(e, s, "JDK {}: sampled timing changed the tree", jdk.major);
    assert_eq!(e[";root"], 1000, "{e:?}");
    assert_eq!(e[";longRoot;a;leaf"], 6_000_000, "{e:?}");

    let mut credited = 0;
    for t in sampled["threads"].as_array().unwrap() {
        let counts = &t["samples"];
        assert_eq!(counts["late"], 0, "samples behind the stream: {counts}");
        let all = nodes(t);
        let on_nodes: u64 = all.iter().map(|n| n["samples"].as_u64().unwrap()).sum();
        // Samples go to nodes only from inside root contexts; the others
        // are counted apart.
        assert_eq!(on_nodes, counts["credited"].as_u64().unwrap(), "{counts}");
        for n in &all {
            if n["samples"].as_u64().unwrap() > 0 {
                assert!(n["calls"].as_u64().unwrap() > 0, "{n}");
            }
            assert!(n["self_ns"].as_u64().unwrap() <= n["total_ns"].as_u64().unwrap());
        }
        credited += on_nodes;
        for r in t["roots"].as_array().unwrap() {
            check_latency(r, true);
        }
    }
    // The long root runs for hundreds of milliseconds at a sample every
    // 0.5 ms (at least 3 million probed calls).
    assert!(
        credited >= 20,
        "JDK {}: only {credited} samples credited",
        jdk.major
    );
    for t in exact["threads"].as_array().unwrap() {
        for r in t["roots"].as_array().unwrap() {
            check_latency(r, false);
        }
    }
}

#[test]
fn bad_timing_options_are_one_clear_line() {
    for (args, needle) in [
        (&["--timing", "fast"][..], "invalid value 'fast'"),
        (
            &["--timing", "sampled", "--interval", "0"][..],
            "--interval must be",
        ),
        (&["--interval", "nan"][..], "--interval must be"),
    ] {
        let out = Command::new(sprig_bin())
            .args(["profile", "1", "--root", "a.B::c"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// `fixtures.Workload` with the agent's debugging lines on (it says which
/// probe path it bound and, after a sampled session, how many events
/// inside root contexts it wrote itself).
fn start_debug_workload(jdk: &Jdk, classes: &Path) -> Proc {
    let cwd = TempDir::new("jvm-cwd");
    let mut cmd = Command::new(jdk.java());
    cmd.current_dir(cwd.path())
        .env("SPRIG_AGENT_DEBUG", "1")
        .arg("-cp")
        .arg(classes)
        .arg("fixtures.Workload");
    let mut p = Proc::spawn(&format!("workload-jdk{}", jdk.major), cmd);
    p.cwd = Some(cwd);
    p.wait_for("ready", Duration::from_secs(30), |l| l.starts_with("ready"));
    p
}

/// Calls of every node below a root, over all threads.
fn inner_calls(report: &Value) -> u64 {
    report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| nodes(t))
        .filter(|n| n["latency"].is_null())
        .map(|n| n["calls"].as_u64().unwrap())
        .sum()
}

/// The agent's count of events inside root contexts it wrote itself in
/// the sampled session that just ended.
fn native_events(jvm: &mut Proc) -> u64 {
    const LINE: &str = "events inside root contexts written natively";
    let l = jvm.wait_for(LINE, LONG, |l| l.contains(LINE));
    l.split_whitespace()
        .find_map(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no count in {l:?}"))
}

#[test]
fn sampled_probes_record_in_java_and_sessions_in_a_row_stay_exact() {
    for jdk in every_jdk("sampled_probes_record_in_java") {
        let classes = fixture_classes(&jdk);
        let mut jvm = start_debug_workload(&jdk, classes.path());
        jvm.send("run calls 2000 1");
        jvm.wait_for("done calls", LONG, |l| l.starts_with("done calls"));
        let tmp = TempDir::new("sampled-java");
        let sampled = ["--timing", "sampled", "--interval", "0.5"];
        let sampled_a = session(&mut jvm, &tmp.path().join("s1.json"), &sampled);
        let stderr = jvm.stderr();
        let path = stderr
            .lines()
            .find(|l| l.contains("probe path"))
            .unwrap_or_default();
        assert!(
            path.contains("Java stores under sampled timing"),
            "JDK {}: no Java path: {path}",
            jdk.major
        );
        // No flag asked for, no warning printed (the package is exported
        // to the probe class by the agent).
        for word in ["Unsafe", "jdk.internal.misc", "IllegalAccess"] {
            assert!(
                !stderr.contains(word),
                "JDK {}: {word} on the target's stderr:\n{stderr}",
                jdk.major
            );
        }
        let native_a = native_events(&mut jvm);
        let exact = session(&mut jvm, &tmp.path().join("e.json"), &["--timing", "exact"]);
        let sampled_b = session(&mut jvm, &tmp.path().join("s2.json"), &sampled);
        let native_b = native_events(&mut jvm);
        // Sampled, exact, sampled in one JVM: the same tree and counts.
        assert_eq!(
            path_calls(&sampled_a),
            path_calls(&exact),
            "JDK {}",
            jdk.major
        );
        assert_eq!(
            path_calls(&sampled_b),
            path_calls(&exact),
            "JDK {}",
            jdk.major
        );
        assert_eq!(path_calls(&exact)[";longRoot;a;leaf"], 6_000_000);
        // Two events a call; the agent writes those of first calls, full
        // segments (one in 4,092) and little else: under 1% of them.
        for (report, native) in [(&sampled_a, native_a), (&sampled_b, native_b)] {
            let events = 2 * inner_calls(report);
            assert!(events >= 2 * 12_000_000, "{events}");
            assert!(
                native * 100 < events,
                "JDK {}: the agent wrote {native} of {events} events inside root contexts",
                jdk.major
            );
        }
        // The JVM runs on.
        jvm.send("run calls 10 1");
        jvm.wait_for("done calls", LONG, |l| l.starts_with("done calls"));
    }
}

#[test]
fn killing_the_cli_mid_sampled_session_leaves_a_running_jvm() {
    for jdk in every_jdk("killing_the_cli_mid_sampled_session") {
        let classes = fixture_classes(&jdk);
        let mut jvm = start_workload(&jdk, classes.path(), &[]);
        jvm.send("run calls 200 1");
        jvm.wait_for("done calls", LONG, |l| l.starts_with("done calls"));
        let tmp = TempDir::new("sampled-kill");
        let out = tmp.path().join("killed.json");
        let args = [
            "--root",
            "fixtures.Calls::longRoot",
            "--timing",
            "sampled",
            "--format",
            "json",
        ];
        let mut cli = start_sprig(jvm.pid(), &args, &out);
        // Two threads in the long root, their probes writing the ring in
        // Java, when the CLI dies.
        jvm.send("run long 20 2");
        std::thread::sleep(Duration::from_millis(500));
        cli.signal("KILL");
        cli.wait_exit(LONG).expect("killed");
        let killed_at = Instant::now();
        jvm.wait_for("done long", LONG, |l| l.starts_with("done long"));
        // The agent detached by itself: a new session gets going (the agent
        // takes one at a time), within a few seconds.
        let out2 = tmp.path().join("after.json");
        let mut next = None;
        while next.is_none() && killed_at.elapsed() < Duration::from_secs(20) {
            let mut cmd = Command::new(sprig_bin());
            cmd.args([
                "profile",
                &jvm.pid().to_string(),
                "--root",
                "fixtures.Calls::root",
            ])
            .args(["--timing", "sampled", "--format", "json", "-o"])
            .arg(&out2);
            let mut p = Proc::spawn("sprig-after", cmd);
            if p.try_wait_for(Duration::from_secs(5), |_, l| {
                l.starts_with("sprig: profiling")
            })
            .is_some()
            {
                next = Some(p);
            } else {
                p.wait_exit(Duration::from_secs(5));
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        let mut p = next.unwrap_or_else(|| panic!("JDK {}: no new session", jdk.major));
        jvm.send("run calls 10 1");
        jvm.wait_for("done calls", LONG, |l| l.starts_with("done calls"));
        let report = p.stop_and_json(&format!("JDK {}: the next session", jdk.major), &out2);
        assert_eq!(path_calls(&report)[";root"], 10, "{report}");
        // And the JVM still works.
        jvm.send("run long 1 1");
        jvm.wait_for("done long", LONG, |l| l.starts_with("done long"));
    }
}
