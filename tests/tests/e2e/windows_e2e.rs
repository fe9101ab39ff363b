//! Windows timing on real JVMs (JDK 17, and JDK 25 where installed), what
//! can be asserted without timing: calls per counted root call exactly
//! those of exact timing, stack samples credited only to paths under a
//! root, none to a root call whose probes record (a counted call held
//! through a silent window), no JDK frame in the tree, and every silent
//! root call timed (the latencies come from the silent windows).
//!
//! Both stack sources run: the CPU timer (the default), whose signal
//! handler drops every sample of a thread outside a silent root call (the
//! `hold` call spins on the CPU through a silent window with its probes
//! recording: every timer signal in it must be dropped, and counted), and
//! JVMTI (`--source jvmti`), whose sampler drops such threads after its
//! walk. The report says which ran.
//!
//! The timer source runs again with `--windows-silence original`: the
//! fixture's class goes back to its original bytes but for the roots'
//! probes in each silent window (the switch waits until the counted `hold`
//! call has returned) and is instrumented again for the next counting
//! window; the same assertions hold, and the report counts the switches.
//! A silent window that settles (`--windows-settle`) through the whole
//! session times its root calls and credits no stack sample of them.
//! Last, a CLI killed while original-bytes silence switches every 100 ms:
//! the next session starts and counts as the first one did.
//!
//! The schedule is set so that the phases fall in known windows: the
//! session opens with a counting window of 2.5 s, then a silent one of
//! 1 s, and so on. `hold 3500` is sent as the session starts, so its one
//! root call (`Windows.hold`) is entered while counting and runs through
//! the first silent window; `shorts 3500` then runs `Windows.shortRoot`
//! through the second counting window and the second silent one.

use std::time::Duration;

use serde_json::Value;
use sprig_tests::{
    Jdk, Proc, TempDir, calls_by_path, fixture_classes, start_sprig, start_workload, test_jdks,
};

const LONG: Duration = Duration::from_secs(120);
const ROOTS: [&str; 4] = [
    "--root",
    "fixtures.Windows::hold",
    "--root",
    "fixtures.Windows::shortRoot",
];

/// Runs `cmd` in the workload and waits for its `done` line.
fn run(jvm: &mut Proc, cmd: &str, done: &str) {
    jvm.send(cmd);
    jvm.wait_for(done, LONG, |l| l.starts_with(done));
}

/// One session with `extra` options around `phases`; the JSON report.
fn session(
    jvm: &mut Proc,
    out: &std::path::Path,
    extra: &[&str],
    phases: &[(&str, &str)],
) -> Value {
    let mut args = ROOTS.to_vec();
    args.extend_from_slice(&["--format", "json"]);
    args.extend_from_slice(extra);
    let mut p = start_sprig(jvm.pid(), &args, out);
    for (cmd, done) in phases {
        run(jvm, cmd, done);
    }
    p.stop_and_json(&format!("session {extra:?}"), out)
}

/// Every node with its path (`method;method;...` from the root).
fn nodes(report: &Value) -> Vec<(String, &Value)> {
    let mut all = Vec::new();
    let mut stack: Vec<(String, &Value)> = Vec::new();
    for t in report["threads"].as_array().unwrap() {
        for r in t["roots"].as_array().unwrap() {
            stack.push((String::new(), r));
        }
    }
    while let Some((prefix, n)) = stack.pop() {
        let path = format!("{prefix};{}", n["method"].as_str().unwrap());
        for c in n["children"].as_array().into_iter().flatten() {
            stack.push((path.clone(), c));
        }
        all.push((path, n));
    }
    all
}

#[test]
fn windows_timing_counts_exactly_and_credits_only_silent_root_calls() {
    for jdk in test_jdks("windows_timing_counts_exactly") {
        run_on(&jdk);
    }
}

fn run_on(jdk: &Jdk) {
    let classes = fixture_classes(jdk);
    let mut jvm = start_workload(jdk, classes.path(), &[]);
    let tmp = TempDir::new("windows");
    // Both roots' classes loaded and compiled before any session.
    run(&mut jvm, "shorts 300", "done shorts");
    run(&mut jvm, "hold 10", "done hold");

    let exact = session(
        &mut jvm,
        &tmp.path().join("exact.json"),
        &["--timing", "exact"],
        &[("shorts 300", "done shorts")],
    );
    // the timer by default, then JVMTI, then the timer with the classes
    // put back to their original bytes in silent windows
    for (source, extra, original) in [
        ("timer", None, false),
        ("jvmti", Some("jvmti"), false),
        ("timer", None, true),
    ] {
        let mut args = vec![
            "--timing",
            "windows",
            "--windows",
            "2500,1000",
            "--interval",
            "1",
        ];
        if let Some(s) = extra {
            args.extend_from_slice(&["--source", s]);
        }
        if original {
            args.extend_from_slice(&["--windows-silence", "original"]);
        }
        let windows = session(
            &mut jvm,
            &tmp.path().join(format!("windows-{source}-{original}.json")),
            &args,
            &[("hold 3500", "done hold"), ("shorts 3500", "done shorts")],
        );
        check_windows(jdk, source, &exact, &windows);
        let w = &windows["windows"];
        let major = jdk.major;
        if original {
            assert_eq!(w["silence"], "original", "{w}");
            // Into the silent window once the hold call returned, out of
            // it for the second counting window; the fixture's class
            // each time.
            let s = &w["switches"];
            assert!(
                s["to_original"].as_u64() >= Some(1)
                    && s["to_instrumented"].as_u64() >= Some(1)
                    && s["classes"].as_u64() >= Some(2)
                    && s["failed"] == 0
                    && s["cut"] == 0,
                "JDK {major}: the silent windows were not on the original bytes: {w}"
            );
        } else {
            assert_eq!(w["silence"], "dormant", "{w}");
            assert!(w["switches"].is_null(), "{w}");
        }
    }

    // A silent window that settles longer than the session lasts: its root
    // calls are timed, and no stack sample of them is credited (the timer
    // drops every signal, since no silent root call opened its word).
    let settled = session(
        &mut jvm,
        &tmp.path().join("windows-settle.json"),
        &[
            "--timing",
            "windows",
            "--windows",
            "2500,20000",
            "--windows-settle",
            "19999",
            "--interval",
            "1",
        ],
        &[("hold 3500", "done hold"), ("shorts 3500", "done shorts")],
    );
    let w = &settled["windows"];
    assert!(
        w["silent_root_calls"].as_u64() > Some(0) && w["samples_dropped"].as_u64() > Some(0),
        "JDK {}: the settling window's root calls were not timed, or no signal came: {w}",
        jdk.major
    );
    assert_eq!(
        w["samples"], 0,
        "JDK {}: a stack sample of a root call entered while the silent window settles was credited: {w}",
        jdk.major
    );

    // A CLI killed while original-bytes silence switches every 100 ms:
    // the agent still detaches (the next session starts at once) and
    // leaves the classes as they were (that session counts as the first).
    let mut args = ROOTS.to_vec();
    args.extend_from_slice(&[
        "--format",
        "json",
        "--timing",
        "windows",
        "--windows",
        "100,100",
        "--windows-silence",
        "original",
        "--interval",
        "1",
    ]);
    let mut dying = start_sprig(jvm.pid(), &args, &tmp.path().join("killed.json"));
    jvm.send("shorts 1500");
    std::thread::sleep(Duration::from_millis(700));
    dying.signal("KILL");
    dying.wait_exit(LONG);
    jvm.wait_for("done shorts", LONG, |l| l.starts_with("done shorts"));
    let after = session(
        &mut jvm,
        &tmp.path().join("exact-after-kill.json"),
        &["--timing", "exact"],
        &[("shorts 300", "done shorts")],
    );
    let per_root = |report: &Value| -> Vec<(String, f64)> {
        let calls = calls_by_path(report, &["fixtures."]);
        let roots = calls["Windows.shortRoot"] as f64;
        calls
            .into_iter()
            .filter(|(p, c)| p.starts_with("Windows.shortRoot") && *c > 0)
            .map(|(p, c)| (p, c as f64 / roots))
            .collect()
    };
    assert_eq!(
        per_root(&exact),
        per_root(&after),
        "JDK {}: after a CLI killed during original-bytes silence",
        jdk.major
    );

    jvm.send("exit");
    jvm.wait_exit(LONG);
}

/// The assertions on one windows-timing report taken with `source`.
fn check_windows(jdk: &Jdk, source: &str, exact: &Value, windows: &Value) {
    let major = jdk.major;
    assert_eq!(windows["timing"], "sampled");
    let w = &windows["windows"];
    assert_eq!(
        w["source"], source,
        "JDK {major}: the report names the stack source that ran: {w}"
    );
    if source == "timer" {
        // The handler drops what is not a silent root call's (the hold
        // call spinning through a silent window, the loop between
        // shortRoot calls): counted, and no stack without a root frame is
        // sent.
        let dropped = w["samples_dropped"].as_u64().unwrap();
        assert!(
            dropped > 0,
            "JDK {major}: the timer's handler dropped no signal: {w}"
        );
        let (samples, outside) = (
            w["samples"].as_u64().unwrap(),
            w["samples_outside"].as_u64().unwrap(),
        );
        assert!(
            outside * 100 <= samples,
            "JDK {major}: the timer sent {outside} samples outside a root call ({samples} \
             credited): {w}"
        );
    }
    assert_eq!(w["counting_ms"], 2500, "{w}");
    assert_eq!(w["silent_ms"], 1000, "{w}");
    let silent_calls = w["silent_root_calls"].as_u64().unwrap();
    assert!(silent_calls > 0, "JDK {major}: no silent root call: {w}");

    // Calls per counted root call: those of exact timing, path by path
    // (the nodes the samples alone made have no call).
    let per_root = |report: &Value| -> Vec<(String, f64)> {
        let calls = calls_by_path(report, &["fixtures."]);
        let roots = calls["Windows.shortRoot"] as f64;
        calls
            .into_iter()
            .filter(|(p, c)| p.starts_with("Windows.shortRoot") && *c > 0)
            .map(|(p, c)| (p, c as f64 / roots))
            .collect()
    };
    let (e, s) = (per_root(exact), per_root(windows));
    assert!(e.len() >= 3, "{e:?}");
    assert_eq!(
        e, s,
        "JDK {major}: windows timing changed the calls per root call"
    );
    let hold = nodes(windows)
        .into_iter()
        .find(|(p, _)| p == ";hold")
        .map(|(_, n)| n)
        .expect("the hold root");
    assert_eq!(
        hold["calls"], 1,
        "JDK {major}: the hold call was not entered in the first counting window: {hold}"
    );
    assert!(
        hold["latency"].is_null(),
        "a counted root call has no latency: {hold}"
    );

    // Samples: some, all under the silent root calls of shortRoot, none in
    // the counted hold call that ran through the first silent window.
    let all = nodes(windows);
    let on_nodes: u64 = all
        .iter()
        .map(|(_, n)| n["samples"].as_u64().unwrap())
        .sum();
    assert!(on_nodes > 0, "JDK {major}, {source}: no sample credited");
    assert_eq!(on_nodes, w["samples"].as_u64().unwrap(), "{w}");
    for (path, n) in &all {
        let samples = n["samples"].as_u64().unwrap();
        assert!(
            samples == 0 || path.starts_with(";shortRoot"),
            "JDK {major}, {source}: {samples} samples credited at {path}, in a root call whose \
             probes recorded"
        );
        let class = n["class"].as_str().unwrap();
        assert!(
            class.starts_with("fixtures."),
            "JDK {major}: a JDK frame was not folded into its caller: {path} ({class})"
        );
    }
    // Below the root, work() holds most of the time (a, b and leaf are a
    // few ns). The root's own samples are left out: the timer also samples
    // the root's probes' native entry and exit, which land on the root.
    // Samples of a method taken before the probes announced it make a node
    // of their own beside the counted one (same path): summed.
    let at = |path: &str| -> u64 {
        all.iter()
            .filter(|(p, _)| p == path)
            .map(|(_, n)| n["samples"].as_u64().unwrap())
            .sum()
    };
    let work = at(";shortRoot;work");
    let below = on_nodes - at(";shortRoot");
    assert!(
        below > 0 && work * 2 > below,
        "JDK {major}, {source}: work() holds most of the samples below shortRoot, {work} of \
         {below}: {:?}",
        all.iter()
            .map(|(p, n)| (p, n["samples"].as_u64().unwrap()))
            .filter(|(_, s)| *s > 0)
            .collect::<Vec<_>>()
    );
    for t in windows["threads"].as_array().unwrap() {
        assert_eq!(t["samples"]["late"], 0, "{}", t["samples"]);
    }

    // Every silent root call is timed; the counted ones are not.
    let short = all
        .iter()
        .find(|(p, _)| p == ";shortRoot")
        .map(|(_, n)| *n)
        .expect("the shortRoot root");
    let l = &short["latency"];
    assert_eq!(
        l["count"].as_u64(),
        Some(silent_calls),
        "JDK {major}: latencies of the silent root calls: {l}"
    );
    let q: Vec<u64> = ["min_ns", "p50_ns", "p90_ns", "p99_ns", "max_ns"]
        .iter()
        .map(|k| l[*k].as_u64().unwrap())
        .collect();
    assert!(q[0] > 0 && q.windows(2).all(|p| p[0] <= p[1]), "{l}");
    assert_eq!(
        w["counted_root_calls"].as_u64().unwrap(),
        short["calls"].as_u64().unwrap() + 1,
        "{w}"
    );
}

/// A reset (SIGUSR1) under windows timing opens a counting window at once:
/// with silent windows of 20 s, the results after a reset made in the
/// first silent window hold counted root calls within the next second and
/// a half, where they would hold none until that window ended (the
/// session ends before it does). Under either silence.
#[test]
fn a_reset_opens_a_counting_window() {
    let Some(jdk) = test_jdks("a_reset_opens_a_counting_window")
        .into_iter()
        .next()
    else {
        return;
    };
    let classes = fixture_classes(&jdk);
    let mut jvm = start_workload(&jdk, classes.path(), &[]);
    let tmp = TempDir::new("windows-reset");
    run(&mut jvm, "shorts 300", "done shorts");
    for silence in ["dormant", "original"] {
        let out = tmp.path().join(format!("reset-{silence}.json"));
        let mut args = ROOTS.to_vec();
        args.extend_from_slice(&[
            "--format",
            "json",
            "--timing",
            "windows",
            "--windows",
            "300,20000",
            "--windows-silence",
            silence,
        ]);
        let mut sprig = start_sprig(jvm.pid(), &args, &out);
        jvm.send("shorts 4000");
        // well into the first silent window
        std::thread::sleep(Duration::from_millis(1500));
        sprig.signal("USR1");
        sprig.wait_for("sprig: results reset", LONG, |l| {
            l.starts_with("sprig: results reset") && l.contains("a counting window opens now")
        });
        std::thread::sleep(Duration::from_millis(1500));
        let report = sprig.stop_and_json(&format!("reset under {silence} silence"), &out);
        jvm.wait_for("done shorts", LONG, |l| l.starts_with("done shorts"));
        let counted = report["windows"]["counted_root_calls"]
            .as_u64()
            .unwrap_or(0);
        let silent = report["windows"]["silent_root_calls"].as_u64().unwrap_or(0);
        assert!(
            counted > 0 && silent > 0,
            "{silence}: {counted} counted and {silent} silent root calls after the reset: {}",
            report["windows"]
        );
    }
}
