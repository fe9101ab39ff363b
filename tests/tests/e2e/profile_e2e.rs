//! The user's story end to end: a JVM started with no flags, `sprig profile
//! <pid> --root ...`, exact counts, detach on every path, attach again.
//! Every test starts real JVMs (JDK 17, and JDK 25 where installed) and real
//! `sprig` processes.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use sprig_tests::{
    Jdk, Proc, TempDir, agent_lib, fixture_classes, run_sprig, sprig_bin, start_sprig,
    start_sprig_bin, start_workload,
};

const LONG: Duration = Duration::from_secs(60);

/// Starts `sprig profile` against `pid` writing JSON to `out`, and waits until
/// it says the root is instrumented. With `--keep-trivial`: these tests
/// count the calls of every method of their fixtures, trivial leaves
/// included.
fn start_profile(pid: u32, root: &str, out: &Path, extra: &[&str]) -> Proc {
    let mut args = vec!["--root", root, "--format", "json", "--keep-trivial"];
    args.extend_from_slice(extra);
    start_sprig(pid, &args, out)
}

/// Sends `run SCENARIO N THREADS` to the workload and waits for it to finish.
fn run_scenario(jvm: &mut Proc, scenario: &str, n: u32, threads: u32) {
    jvm.send(&format!("run {scenario} {n} {threads}"));
    let done = format!("done {scenario}");
    jvm.wait_for(&done, LONG, |l| l.starts_with(&done));
}

/// Ctrl-C to sprig; waits for a clean exit and returns the parsed report.
fn stop_profile(mut sprig: Proc, out: &Path) -> Value {
    sprig.stop_and_json("profile", out)
}

/// Root nodes named `class::method` across threads whose name starts with
/// `thread_prefix`: (thread name, node).
/// No calibration burst left a node in the tree.
fn assert_no_burst_node(report: &Value) {
    let methods = tree_methods(report);
    assert!(
        methods
            .iter()
            .all(|m| !m.contains("Calibration") && !m.contains('#')),
        "a burst left a node: {methods:?}"
    );
}

fn root_nodes<'a>(
    report: &'a Value,
    class: &str,
    method: &str,
    thread_prefix: &str,
) -> Vec<(String, &'a Value)> {
    let mut out = Vec::new();
    for t in report["threads"].as_array().expect("threads array") {
        let name = t["name"].as_str().unwrap_or("").to_string();
        if !name.starts_with(thread_prefix) {
            continue;
        }
        for r in t["roots"].as_array().expect("roots array") {
            if r["class"] == class && r["method"] == method {
                out.push((name.clone(), r));
            }
        }
    }
    out
}

/// Root nodes named `class::method` across threads whose name starts with
/// `thread_prefix`: (thread name, calls).
fn root_calls(
    report: &Value,
    class: &str,
    method: &str,
    thread_prefix: &str,
) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = root_nodes(report, class, method, thread_prefix)
        .into_iter()
        .map(|(name, r)| (name, r["calls"].as_u64().expect("calls")))
        .collect();
    out.sort();
    out
}

/// Calls of `fixtures.Calls::root` summed over the worker threads.
fn calls_to_calls_root(report: &Value) -> u64 {
    root_calls(report, "fixtures.Calls", "root", "worker-")
        .iter()
        .map(|(_, c)| c)
        .sum()
}

fn check_schema(report: &Value, pid: u32) {
    assert_eq!(report["version"], 1);
    assert_eq!(report["target"]["pid"].as_u64(), Some(pid as u64));
    assert!(report["target"]["jvm"].is_string());
    for k in [
        "events",
        "instrumented_methods",
        "called_methods",
        "lost_events",
        "duration_ms",
    ] {
        assert!(report["stats"][k].is_u64(), "stats.{k} missing in {report}");
    }
    assert_eq!(report["stats"]["lost_events"], 0, "lost events");
    assert!(report.get("calibration").is_some());
}

fn each_jdk(test: &str, f: impl Fn(&Jdk)) {
    for jdk in sprig_tests::every_jdk(test) {
        eprintln!("== {test} on JDK {}", jdk.major);
        f(&jdk);
    }
}

#[test]
fn root_calls_are_counted_exactly_across_threads() {
    each_jdk("root_calls_are_counted_exactly_across_threads", |jdk| {
        let classes = fixture_classes(jdk);
        let mut jvm = start_workload(jdk, classes.path(), &[]);
        // Calls made before profiling must not be counted.
        run_scenario(&mut jvm, "calls", 5000, 1);
        let tmp = TempDir::new("e2e");
        let out = tmp.path().join("run.json");
        let sprig = start_profile(jvm.pid(), "fixtures.Calls::root", &out, &[]);
        run_scenario(&mut jvm, "calls", 1000, 3);
        let report = stop_profile(sprig, &out);
        check_schema(&report, jvm.pid());
        let roots = root_calls(&report, "fixtures.Calls", "root", "worker-");
        assert_eq!(
            roots,
            vec![
                ("worker-0".to_string(), 1000),
                ("worker-1".to_string(), 1000),
                ("worker-2".to_string(), 1000)
            ],
            "report: {report}"
        );
        // Calls made after detach are not counted and the JVM still works.
        run_scenario(&mut jvm, "calls", 1000, 1);
    });
}

/// On JDK 11, 17 and 21 the first class redefinition after a dynamic attach makes
/// HotSpot throw away all compiled code (on JDK 25 only what depends on
/// the classes redefined): the first profiling session in a JVM says so,
/// the second does not, and on JDK 25 neither does. The JVM is started with
/// `-Xlog:redefine+class+nmethod=debug` so that the test also checks the
/// warning against what HotSpot itself logs.
#[test]
fn the_first_profiling_session_in_a_jvm_says_when_hotspot_drops_all_compiled_code() {
    const SAID: &str = "threw away all its compiled code";
    each_jdk(
        "the_first_profiling_session_in_a_jvm_says_when_hotspot_drops_all_compiled_code",
        |jdk| {
            let classes = fixture_classes(jdk);
            let mut jvm =
                start_workload(jdk, classes.path(), &["-Xlog:redefine+class+nmethod=debug"]);
            run_scenario(&mut jvm, "calls", 2000, 1);
            let tmp = TempDir::new("deopt");
            let mut warned = Vec::new();
            for session in 0..2 {
                let out = tmp.path().join(format!("run{session}.json"));
                let sprig = start_profile(jvm.pid(), "fixtures.Calls::root", &out, &[]);
                run_scenario(&mut jvm, "calls", 100, 1);
                let report = stop_profile(sprig, &out);
                assert_eq!(calls_to_calls_root(&report), 100, "{report}");
                warned.push(report["warnings"].to_string().contains(SAID));
            }
            run_scenario(&mut jvm, "calls", 1, 1);
            if jdk.major == 11 {
                // HotSpot 11 logs no "Marked all" line under that tag; it
                // does make every compiled method not entrant at the first
                // redefinition (seen with -XX:+PrintCompilation,
                // 2026-11-29), as 17 does.
                assert_eq!(
                    warned,
                    [true, false],
                    "JDK 11: warnings of the two sessions"
                );
                return;
            }
            let log = jvm.stdout();
            let all = log.matches("Marked all nmethods for deopt").count();
            assert_eq!(
                warned,
                [all == 1, false],
                "JDK {}: warnings of the two sessions against HotSpot's log ({all} time(s) \
                 'Marked all nmethods for deopt')",
                jdk.major
            );
            assert_eq!(all, usize::from(jdk.major <= 21), "JDK {}", jdk.major);
        },
    );
}

/// Threads entering and leaving root contexts raise and lower
/// `Probe.active` all the time: no callee call may go unrecorded while
/// the field changes hands. Two threads (four times over) each call a
/// root that sleeps 1 ms between its two callees 1,000 times, so the
/// number of threads inside keeps crossing zero, often with both entering
/// together; every call's whole subtree must be there, on both JDKs.
/// (The field was once marked raised a few µs before it was written, and
/// a thread entering then ran its body with the field still 0: a call
/// or two in a thousand lost its `a`, whose `leaf` calls showed up
/// directly under the root. This test failed 5 runs in 5 then.)
#[test]
fn every_callee_call_is_recorded_while_threads_come_and_go() {
    each_jdk(
        "every_callee_call_is_recorded_while_threads_come_and_go",
        |jdk| {
            let classes = fixture_classes(jdk);
            let mut jvm = start_workload(jdk, classes.path(), &[]);
            run_scenario(&mut jvm, "sleepy", 2, 1); // loads the class
            let tmp = TempDir::new("e2e");
            let out = tmp.path().join("run.json");
            let sprig = start_profile(jvm.pid(), "fixtures.Calls::sleepy", &out, &[]);
            for _ in 0..4 {
                run_scenario(&mut jvm, "sleepy", 1000, 2);
            }
            let report = stop_profile(sprig, &out);
            let roots = root_nodes(&report, "fixtures.Calls", "sleepy", "worker-");
            let mut calls = 0;
            for (thread, r) in &roots {
                let n = r["calls"].as_u64().expect("calls");
                calls += n;
                let kids = child_calls(r);
                assert_eq!(
                    kids,
                    vec![("a".to_string(), n), ("b".to_string(), n)],
                    "{thread}: {n} root calls"
                );
                let a = r["children"]
                    .as_array()
                    .expect("children")
                    .iter()
                    .find(|c| c["method"] == "a")
                    .expect("a");
                assert_eq!(
                    child_calls(a),
                    vec![("leaf".to_string(), 2 * n)],
                    "{thread}: under a"
                );
            }
            assert_eq!(calls, 8 * 1000, "root calls over all threads");
        },
    );
}

/// Every method name in the report's thread trees.
fn tree_methods(report: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack: Vec<&Value> = report["threads"]
        .as_array()
        .expect("threads")
        .iter()
        .flat_map(|t| t["roots"].as_array().expect("roots"))
        .collect();
    while let Some(n) = stack.pop() {
        out.push(format!(
            "{}::{}",
            n["class"].as_str().unwrap_or("?"),
            n["method"].as_str().unwrap_or("?")
        ));
        stack.extend(n["children"].as_array().into_iter().flatten());
    }
    out
}

/// Each thread that enters a root measures the probes again now and then
/// (a burst of calls of the calibration class's empty method, every 10 ms
/// by default): the report counts the bursts per thread and their probe
/// pair, which sits near the attach-time calibration, and the bursts
/// leave no trace in the tree. `--recalibrate-every 0` turns them off.
#[test]
fn calibration_bursts_run_on_each_thread_and_stay_out_of_the_tree() {
    each_jdk(
        "calibration_bursts_run_on_each_thread_and_stay_out_of_the_tree",
        |jdk| {
            let classes = fixture_classes(jdk);
            let mut jvm = start_workload(jdk, classes.path(), &[]);
            run_scenario(&mut jvm, "sleepy", 2, 1); // loads the class
            let tmp = TempDir::new("e2e");
            for (every, bursts_expected) in [(None, true), (Some("0"), false)] {
                let out = tmp.path().join("run.json");
                let extra: Vec<&str> = match every {
                    Some(ms) => vec!["--timing", "exact", "--recalibrate-every", ms],
                    None => vec!["--timing", "exact"],
                };
                let sprig = start_profile(jvm.pid(), "fixtures.Calls::sleepy", &out, &extra);
                // 300 root calls of at least 1 ms on each of two threads.
                run_scenario(&mut jvm, "sleepy", 300, 2);
                let report = stop_profile(sprig, &out);
                let cal = &report["calibration"];
                let pair = cal["inner_ns"].as_f64().expect("calibration")
                    + cal["outer_ns"].as_f64().expect("calibration");
                assert_no_burst_node(&report);
                let roots = root_nodes(&report, "fixtures.Calls", "sleepy", "worker-");
                assert_eq!(roots.len(), 2, "{report}");
                for (thread, r) in &roots {
                    let n = r["calls"].as_u64().expect("calls");
                    assert_eq!(
                        child_calls(r),
                        vec![("a".to_string(), n), ("b".to_string(), n)],
                        "{thread}"
                    );
                }
                for t in report["threads"].as_array().expect("threads") {
                    let name = t["name"].as_str().unwrap_or("");
                    if !name.starts_with("worker-") {
                        continue;
                    }
                    let b = &t["bursts"];
                    let used = b["used"].as_u64().expect("bursts.used");
                    if !bursts_expected {
                        assert_eq!(used, 0, "{name}: {b}");
                        continue;
                    }
                    // At least 300 ms inside roots, a burst every 10 ms.
                    assert!(used >= 10, "{name}: {b}");
                    let median = b["median_pair_ns"].as_f64().expect("median");
                    eprintln!(
                        "JDK {}: {name}: {used} bursts, pair median {median:.1} ns \
                         (calibration {pair:.1} ns), {} left out",
                        jdk.major, b["rejected"]
                    );
                    assert!(
                        median > pair * 0.5 && median < pair * 4.0,
                        "{name}: burst pair {median} ns against a calibration of {pair} ns"
                    );
                }
            }
        },
    );
}

/// A root call longer than the burst period runs its calibration bursts
/// at exits inside it (it would otherwise run one only as it returns, and
/// a root call running through the whole session none): one call of 3
/// million rounds of a() and b(), hundreds of milliseconds under the
/// probes, runs at least five, and the tree keeps its exact counts and no
/// calibration node.
#[test]
fn a_long_root_call_runs_its_bursts_inside() {
    each_jdk("a_long_root_call_runs_its_bursts_inside", |jdk| {
        let classes = fixture_classes(jdk);
        let mut jvm = start_workload(jdk, classes.path(), &[]);
        run_scenario(&mut jvm, "calls", 2, 1); // loads the class
        let tmp = TempDir::new("e2e");
        let out = tmp.path().join("run.json");
        // Calibration bursts are exact timing's.
        let sprig = start_profile(
            jvm.pid(),
            "fixtures.Calls::longRoot",
            &out,
            &["--timing", "exact"],
        );
        run_scenario(&mut jvm, "long", 1, 1);
        let report = stop_profile(sprig, &out);
        assert_no_burst_node(&report);
        let roots = root_nodes(&report, "fixtures.Calls", "longRoot", "worker-");
        assert_eq!(roots.len(), 1, "{report}");
        let (thread, r) = &roots[0];
        assert_eq!(r["calls"], 1, "{thread}");
        let rounds = 3_000_000;
        assert_eq!(
            child_calls(r),
            vec![("a".to_string(), rounds), ("b".to_string(), rounds)],
            "{thread}"
        );
        let t = report["threads"]
            .as_array()
            .expect("threads")
            .iter()
            .find(|t| t["name"] == thread.as_str())
            .expect("the worker's thread");
        let used = t["bursts"]["used"].as_u64().expect("bursts.used");
        eprintln!(
            "JDK {}: one root call of {:.0} ms ran {used} bursts ({} left out): {}",
            jdk.major,
            r["raw_total_ns"].as_f64().unwrap_or(0.0) / 1e6,
            t["bursts"]["rejected"],
            t["bursts"]
        );
        assert!(used >= 5, "{thread}: {}", t["bursts"]);
    });
}

/// A JVM whose probe class an older sprig defined (one without
/// `BURST_CALLS`, which would take the agent's "burst first" answer for
/// "context closed"): the agent never asks it for a burst, and the tree
/// stays exact. The older class is today's with that field renamed, put on
/// the boot class path, where the agent finds it as it would find one an
/// earlier attach defined.
#[test]
fn a_probe_class_without_bursts_gets_none_and_stays_exact() {
    let old = TempDir::new("old-probe");
    let src = old.path().join("src/sprig/rt");
    std::fs::create_dir_all(&src).expect("mkdir");
    let probe =
        std::fs::read_to_string(sprig_tests::repo_root().join("agent/java/sprig/rt/Probe.java"))
            .expect("Probe.java");
    // Before bursts: no BURST_CALLS, and any non-zero answer of
    // nRootExit closes the root context.
    assert!(
        probe.contains("BURST_CALLS") && probe.contains("r == BURST_FIRST"),
        "the probe class changed"
    );
    let older = probe
        .replace("BURST_CALLS", "BURST_CALLS_BEFORE_THEY_EXISTED")
        .replace("r == BURST_FIRST", "false");
    std::fs::write(src.join("Probe.java"), older).expect("write");
    // The real Calibration class is the agent's; the old Probe only
    // names it in the burst it never runs.
    std::fs::write(
        src.join("Calibration.java"),
        "package sprig.rt; final class Calibration { \
         static void burst(int n) { throw new AssertionError(\"no burst\"); } }",
    )
    .expect("write");
    let boot = old.path().join("classes");
    // (The probe class reads jdk.internal.misc.Unsafe, which the agent
    // exports to it at run time.) One class file for every JDK, as the
    // agent's own: JDK 17's javac, version 55 (JDK 11).
    sprig_tests::javac(
        &sprig_tests::jdk17(),
        &old.path().join("src"),
        &boot,
        &[
            "-source",
            "11",
            "-target",
            "11",
            "--add-exports",
            "java.base/jdk.internal.misc=ALL-UNNAMED",
        ],
    );
    std::fs::remove_file(boot.join("sprig/rt/Calibration.class")).expect("rm");
    each_jdk(
        "a_probe_class_without_bursts_gets_none_and_stays_exact",
        |jdk| {
            let classes = fixture_classes(jdk);
            let flag = format!("-Xbootclasspath/a:{}", boot.display());
            let mut jvm = start_workload(jdk, classes.path(), &[flag.as_str()]);
            run_scenario(&mut jvm, "sleepy", 2, 1);
            let tmp = TempDir::new("e2e");
            let out = tmp.path().join("run.json");
            let sprig = start_profile(
                jvm.pid(),
                "fixtures.Calls::sleepy",
                &out,
                &["--timing", "exact"],
            );
            run_scenario(&mut jvm, "sleepy", 100, 2);
            let report = stop_profile(sprig, &out);
            let roots = root_nodes(&report, "fixtures.Calls", "sleepy", "worker-");
            assert_eq!(roots.len(), 2, "{report}");
            for (thread, r) in &roots {
                let n = r["calls"].as_u64().expect("calls");
                assert_eq!(n, 100, "{thread}");
                assert_eq!(
                    child_calls(r),
                    vec![("a".to_string(), n), ("b".to_string(), n)],
                    "{thread}"
                );
                assert_eq!(r["incomplete"], 0, "{thread}: {r}");
            }
            for t in report["threads"].as_array().expect("threads") {
                assert_eq!(t["bursts"]["used"], 0, "{t}");
            }
            // The agent used the class it found: nothing printed about it.
            assert!(
                !jvm.stderr().contains("Exception"),
                "target stderr: {}",
                jvm.stderr()
            );
        },
    );
}

#[test]
fn exceptions_thrown_out_of_the_root_still_close_the_call() {
    each_jdk(
        "exceptions_thrown_out_of_the_root_still_close_the_call",
        |jdk| {
            let classes = fixture_classes(jdk);
            let mut jvm = start_workload(jdk, classes.path(), &[]);
            run_scenario(&mut jvm, "throws", 2, 1); // loads the classes: calls before attach are not counted
            let tmp = TempDir::new("e2e");
            let out = tmp.path().join("run.json");
            let sprig = start_profile(jvm.pid(), "fixtures.Calls::throwing", &out, &[]);
            run_scenario(&mut jvm, "throws", 400, 2);
            let report = stop_profile(sprig, &out);
            let roots = root_calls(&report, "fixtures.Calls", "throwing", "worker-");
            assert_eq!(
                roots,
                vec![("worker-0".to_string(), 400), ("worker-1".to_string(), 400)],
                "report: {report}"
            );
            // Balanced: no frame was left open by the 200 throws per thread.
            for t in report["threads"].as_array().unwrap() {
                for r in t["roots"].as_array().unwrap() {
                    assert_eq!(r["incomplete"], 0, "unbalanced frames: {report}");
                }
            }
            assert!(
                !report["warnings"].to_string().contains("unbalanced"),
                "stream problems reported: {report}"
            );
        },
    );
}

/// A class whose constant pool holds NaN constants, profiled session after
/// session in one JVM. HotSpot on JDK 25 appends such constants again at
/// every redefinition (they never compare equal), and rebuilds the class
/// bytes it hands back from the grown pool: redefining from those made a
/// redefinition of a 30-entry class take 31 s (the JVM stopped) by its tenth
/// profiling session. sprig redefines it from its first bytes, and once the pool has
/// grown past its bound it warns and leaves the class out of later
/// sessions. Every session counts the root's calls exactly and no
/// redefinition takes long; JDK 17 does not grow the pool, so its class is
/// profiled in every session.
#[test]
fn a_class_with_nan_constants_stays_cheap_to_redefine_session_after_session() {
    const SESSIONS: usize = 14;
    const CALLS: u64 = 1000;
    each_jdk(
        "a_class_with_nan_constants_stays_cheap_to_redefine_session_after_session",
        |jdk| {
            let classes = fixture_classes(jdk);
            let mut jvm = start_workload(jdk, classes.path(), &[]);
            run_scenario(&mut jvm, "nan", 1000, 1);
            let mut froze_at = None;
            let mut slowest: f64 = 0.0;
            for session in 1..=SESSIONS {
                let tmp = TempDir::new("nan");
                let out = tmp.path().join("run.json");
                let sprig = start_profile(jvm.pid(), "fixtures.Nan::root", &out, &[]);
                run_scenario(&mut jvm, "nan", CALLS as u32, 1);
                let report = stop_profile(sprig, &out);
                let what = format!("JDK {} session {session}", jdk.major);
                let warnings = report["warnings"].to_string();
                let stats = &report["stats"];
                let ms = stats["redefinition_ms"].as_f64().expect("redefinition_ms");
                slowest = slowest.max(ms);
                assert_eq!(stats["failed_classes"], 0, "{what}: {stats}");
                let roots = root_nodes(&report, "fixtures.Nan", "root", "");
                let calls: u64 = roots
                    .iter()
                    .map(|(_, n)| n["calls"].as_u64().unwrap())
                    .sum();
                assert_eq!(calls, CALLS, "{what}: {report}");
                let children: Vec<(String, u64)> =
                    roots.iter().flat_map(|(_, n)| child_calls(n)).collect();
                if froze_at.is_some() {
                    // Left out, and said so.
                    assert!(
                        warnings.contains("left uninstrumented in this JVM")
                            && warnings.contains("fixtures.NanConstants"),
                        "{what}: {warnings}"
                    );
                    assert!(children.is_empty(), "{what}: {children:?}");
                    break;
                }
                let want = vec![("d".to_string(), CALLS), ("f".to_string(), CALLS)];
                assert_eq!(children, want, "{what}");
                if warnings.contains("copies this class's NaN constants again") {
                    froze_at = Some(session);
                }
            }
            eprintln!(
                "JDK {}: NaN class left out after session {froze_at:?}; slowest redefinition \
                 total of a session {slowest:.1} ms",
                jdk.major
            );
            assert!(slowest < 3000.0, "JDK {}: {slowest} ms", jdk.major);
            // HotSpot 21 and 25 copy the NaN constants again at each
            // redefinition; 11 and 17 do not (measured 2026-11-29).
            if jdk.major >= 21 {
                assert!(froze_at.is_some(), "JDK {}: never left out", jdk.major);
            } else {
                assert_eq!(froze_at, None, "JDK {}: the pool grew", jdk.major);
            }
            jvm.send("exit");
            let _ = jvm.wait_exit(Duration::from_secs(10));
        },
    );
}

#[test]
fn duration_stops_profiling_and_the_jvm_survives_twenty_cycles() {
    let jdk = sprig_tests::jdk17();
    let classes = fixture_classes(&jdk);
    let mut jvm = start_workload(&jdk, classes.path(), &[]);
    run_scenario(&mut jvm, "calls", 1, 1);
    let rss = |pid: u32| -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        s.lines()
            .find(|l| l.starts_with("VmRSS:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap()
    };
    let mut after_first = 0;
    for cycle in 0..20 {
        let tmp = TempDir::new("cycle");
        let out = tmp.path().join("run.json");
        let mut sprig = start_profile(
            jvm.pid(),
            "fixtures.Calls::root",
            &out,
            &["--duration", "0.5"],
        );
        run_scenario(&mut jvm, "calls", 100, 1);
        let status = sprig
            .wait_exit(LONG)
            .expect("sprig stops by itself after --duration");
        assert!(
            status.success(),
            "cycle {cycle}: {status}\n{}",
            sprig.transcript()
        );
        let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        let calls: u64 = calls_to_calls_root(&report);
        assert_eq!(calls, 100, "cycle {cycle}: {report}");
        if cycle == 0 {
            after_first = rss(jvm.pid());
        }
    }
    let last = rss(jvm.pid());
    eprintln!("JVM RSS after cycle 1: {after_first} KiB, after cycle 20: {last} KiB");
    assert!(
        last < after_first + 64 * 1024,
        "JVM resident memory grew from {after_first} KiB to {last} KiB over 20 attach/detach cycles"
    );
}

#[test]
fn killing_the_cli_restores_the_jvm_within_two_seconds() {
    each_jdk(
        "killing_the_cli_restores_the_jvm_within_two_seconds",
        |jdk| {
            let classes = fixture_classes(jdk);
            let mut jvm = start_workload(jdk, classes.path(), &[]);
            run_scenario(&mut jvm, "calls", 1, 1);
            let tmp = TempDir::new("kill");
            let out = tmp.path().join("run.json");
            let mut sprig = start_profile(jvm.pid(), "fixtures.Calls::root", &out, &[]);
            run_scenario(&mut jvm, "calls", 100, 1);
            sprig.signal("KILL");
            sprig.wait_exit(LONG).expect("killed");
            let killed_at = Instant::now();
            // The agent accepts one session at a time: a new session that gets
            // going proves the old one detached. Retry until 2 s are up.
            let out2 = tmp.path().join("run2.json");
            let mut ok = None;
            while killed_at.elapsed() < Duration::from_secs(2) {
                let mut cmd = Command::new(sprig_bin());
                cmd.args([
                    "profile",
                    &jvm.pid().to_string(),
                    "--root",
                    "fixtures.Calls::root",
                    "--format",
                    "json",
                    "-o",
                ])
                .arg(&out2);
                let mut p = Proc::spawn("sprig-2", cmd);
                if p.try_wait_for(Duration::from_secs(2), |_, l| {
                    l.starts_with("sprig: profiling")
                })
                .is_some()
                {
                    ok = Some(p);
                    break;
                }
                p.wait_exit(Duration::from_secs(5));
                std::thread::sleep(Duration::from_millis(100));
            }
            let elapsed = killed_at.elapsed();
            let second = ok
                .unwrap_or_else(|| panic!("JVM not restored {elapsed:?} after the CLI was killed"));
            eprintln!(
                "JDK {}: new session running {elapsed:?} after SIGKILL of the first CLI",
                jdk.major
            );
            run_scenario(&mut jvm, "calls", 10, 1);
            let report = stop_profile(second, &out2);
            let calls: u64 = calls_to_calls_root(&report);
            assert_eq!(calls, 10);
        },
    );
}

/// The sprig agent libraries JVM `pid` has mapped (/proc/PID/maps).
fn mapped_agents(pid: u32) -> std::collections::BTreeSet<String> {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .expect("maps")
        .lines()
        .filter_map(|l| l.find('/').map(|i| l[i..].to_string()))
        .filter(|p| p.contains("libsprig_agent"))
        .collect()
}

/// One `--duration` session of the sprig binary `bin` over 100 calls of
/// `fixtures.Calls::root`; returns the calls it counted.
fn session_with(bin: &Path, jvm: &mut Proc, out: &Path) -> u64 {
    let args = [
        "--root",
        "fixtures.Calls::root",
        "--format",
        "json",
        "--duration",
        "1",
    ];
    let mut sprig = start_sprig_bin(bin, jvm.pid(), &args, out);
    run_scenario(jvm, "calls", 100, 1);
    let status = sprig.wait_exit(LONG).expect("sprig stops after --duration");
    assert!(status.success(), "{status}\n{}", sprig.transcript());
    let report: Value = serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap();
    calls_to_calls_root(&report)
}

#[test]
fn the_jvm_loads_a_private_copy_of_the_agent_that_overwriting_the_installed_one_leaves_alone() {
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;
    each_jdk(
        "the_jvm_loads_a_private_copy_of_the_agent_that_overwriting_the_installed_one_leaves_alone",
        |jdk| {
            // An installed sprig of our own, to overwrite.
            let install = TempDir::new("install");
            let bin = install.path().join("sprig");
            let lib = install.path().join("libsprig_agent.so");
            std::fs::copy(sprig_bin(), &bin).unwrap();
            std::fs::copy(agent_lib(), &lib).unwrap();
            let original = std::fs::read(&lib).unwrap();
            let euid = std::fs::metadata(install.path()).unwrap().uid();
            let dir = format!("/tmp/sprig-agents-{euid}/");

            let classes = fixture_classes(jdk);
            let mut jvm = start_workload(jdk, classes.path(), &[]);
            run_scenario(&mut jvm, "calls", 1, 1);
            let tmp = TempDir::new("pinned");
            assert_eq!(
                session_with(&bin, &mut jvm, &tmp.path().join("1.json")),
                100
            );
            let first = mapped_agents(jvm.pid());
            assert_eq!(first.len(), 1, "one agent library mapped: {first:?}");
            let copy = first.first().unwrap().clone();
            assert!(
                copy.starts_with(&dir) && copy.ends_with(".so"),
                "the JVM maps {copy}, not a copy in {dir}"
            );
            let meta = std::fs::metadata(&copy).unwrap();
            assert_eq!((meta.uid(), meta.mode() & 0o777), (euid, 0o644));
            let d = std::fs::metadata(&dir).unwrap();
            assert_eq!((d.uid(), d.mode() & 0o777), (euid, 0o755));
            assert_eq!(std::fs::read(&copy).unwrap(), original);
            let ino = meta.ino();

            // A new build copied over the installed one, in place (the
            // same file, truncated and rewritten): the JVM is untouched,
            // and the next session loads the new build from its own copy.
            let mut newer = original.clone();
            newer.extend_from_slice(b"a newer build");
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(&lib)
                .unwrap();
            f.write_all(&newer).unwrap();
            drop(f);
            run_scenario(&mut jvm, "calls", 100, 1);
            assert_eq!(
                session_with(&bin, &mut jvm, &tmp.path().join("2.json")),
                100
            );
            let second = mapped_agents(jvm.pid());
            assert_eq!(second.len(), 2, "{second:?}");
            assert!(second.contains(&copy));
            assert_eq!(std::fs::metadata(&copy).unwrap().ino(), ino);
            assert_eq!(
                std::fs::read(&copy).unwrap(),
                original,
                "the first copy never changes"
            );

            // The first build back, in place again: its copy, already
            // loaded, serves the session; nothing new is mapped.
            std::fs::write(&lib, &original).unwrap();
            assert_eq!(
                session_with(&bin, &mut jvm, &tmp.path().join("3.json")),
                100
            );
            assert_eq!(mapped_agents(jvm.pid()), second);
            for p in second.iter().filter(|p| **p != copy) {
                let _ = std::fs::remove_file(p);
            }
        },
    );
}

#[test]
fn the_jvm_exiting_mid_profile_prints_what_was_collected() {
    let jdk = sprig_tests::jdk17();
    let classes = fixture_classes(&jdk);
    let mut jvm = start_workload(&jdk, classes.path(), &[]);
    run_scenario(&mut jvm, "calls", 1, 1);
    let tmp = TempDir::new("exit");
    let out = tmp.path().join("run.json");
    let mut sprig = start_profile(jvm.pid(), "fixtures.Calls::root", &out, &[]);
    run_scenario(&mut jvm, "calls", 50, 1);
    jvm.send("exit");
    jvm.wait_exit(LONG).expect("JVM exits");
    let status = sprig.wait_exit(LONG).expect("sprig notices the JVM exit");
    assert_eq!(status.code(), Some(3), "{}", sprig.transcript());
    assert!(
        sprig.stderr().contains("session ended early"),
        "no clear message:\n{}",
        sprig.transcript()
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let calls: u64 = calls_to_calls_root(&report);
    assert_eq!(calls, 50, "{report}");
}

#[test]
fn sprig_run_profiles_from_the_jvm_start() {
    for jdk in sprig_tests::every_jdk("sprig_run_profiles_from_the_jvm_start") {
        sprig_run_profiles_from_the_jvm_start_on(&jdk);
    }
}

fn sprig_run_profiles_from_the_jvm_start_on(jdk: &Jdk) {
    let classes = fixture_classes(jdk);
    let tmp = TempDir::new("run");
    let out = tmp.path().join("run.json");
    let mut cmd = Command::new(sprig_bin());
    cmd.args([
        "run",
        "--root",
        "fixtures.Calls::root",
        "--format",
        "json",
        "-o",
    ])
    .arg(&out)
    .arg("--")
    .arg(jdk.java())
    .arg("-XX:+DisableAttachMechanism")
    .arg("-cp")
    .arg(classes.path())
    .arg("fixtures.Workload");
    let mut p = Proc::spawn("sprig-run", cmd);
    p.wait_for("ready", LONG, |l| l.starts_with("ready"));
    p.send("run calls 300 2");
    p.wait_for("done", LONG, |l| l.starts_with("done calls"));
    p.send("exit");
    let status = p.wait_exit(LONG).expect("sprig run ends with the JVM");
    assert!(status.success(), "{status}\n{}", p.transcript());
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let roots = root_calls(&report, "fixtures.Calls", "root", "worker-");
    assert_eq!(
        roots,
        vec![("worker-0".to_string(), 300), ("worker-1".to_string(), 300)],
        "{report}"
    );
}

/// `sprig run` without `-o` writes its report to stderr: stdout stays the
/// application's own.
#[test]
fn sprig_run_writes_its_report_to_stderr() {
    let jdk = sprig_tests::jdk17();
    let classes = fixture_classes(&jdk);
    let mut cmd = Command::new(sprig_bin());
    cmd.args(["run", "--root", "fixtures.Calls::root", "--"])
        .arg(jdk.java())
        .arg("-cp")
        .arg(classes.path())
        .arg("fixtures.Workload");
    let mut p = Proc::spawn("sprig-run", cmd);
    p.wait_for("ready", LONG, |l| l.starts_with("ready"));
    p.send("run calls 3 1");
    p.wait_for("done", LONG, |l| l.starts_with("done calls"));
    p.send("exit");
    let status = p.wait_exit(LONG).expect("sprig run ends with the JVM");
    assert!(status.success(), "{status}\n{}", p.transcript());
    let (out, err) = (p.stdout(), p.stderr());
    assert!(
        out.contains("ready") && !out.contains("sprig"),
        "stdout holds only the application's lines:\n{out}"
    );
    assert!(
        err.contains("fixtures.Calls.root"),
        "the report is on stderr:\n{err}"
    );
    assert!(
        err.contains("sprig run: pid "),
        "the report names the command that made it:\n{err}"
    );
}

/// A `sprig run` whose JVM exits soon after the root ran: the JVM is gone
/// before the agent's last counts, and the agent's status (once a second)
/// either never came or came before the root ran, so the counts in the
/// header must not read 0 above a tree of methods.
#[test]
fn sprig_run_of_a_short_jvm_counts_its_methods() {
    for wait in [Duration::ZERO, Duration::from_millis(1500)] {
        sprig_run_of_a_short_jvm_counts_its_methods_after(wait);
    }
}

fn sprig_run_of_a_short_jvm_counts_its_methods_after(wait: Duration) {
    let jdk = sprig_tests::jdk17();
    let classes = fixture_classes(&jdk);
    let tmp = TempDir::new("run-short");
    let out = tmp.path().join("run.txt");
    let mut cmd = Command::new(sprig_bin());
    cmd.args(["run", "--root", "fixtures.Calls::root", "--verbose", "-o"])
        .arg(&out)
        .arg("--")
        .arg(jdk.java())
        .arg("-cp")
        .arg(classes.path())
        .arg("fixtures.Workload");
    let mut p = Proc::spawn("sprig-run-short", cmd);
    p.wait_for("ready", LONG, |l| l.starts_with("ready"));
    // With a wait, a status message comes before the root runs.
    std::thread::sleep(wait);
    p.send("run calls 5 1");
    p.wait_for("done", LONG, |l| l.starts_with("done calls"));
    p.send("exit");
    let status = p.wait_exit(LONG).expect("sprig run ends with the JVM");
    assert!(status.success(), "{status}\n{}", p.transcript());
    let text = std::fs::read_to_string(&out).unwrap();
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("methods "))
        .unwrap_or_else(|| panic!("no methods line:\n{text}"));
    let numbers: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    let in_tree = text
        .lines()
        .filter(|l| l.contains("fixtures.Calls."))
        .count() as u64;
    assert!(in_tree >= 2, "{text}");
    assert_eq!(numbers.len(), 2, "{line}");
    assert!(
        numbers[0] >= numbers[1] && numbers[1] >= 2,
        "{line} above a tree of {in_tree} lines (after {wait:?}):\n{text}\n{}",
        p.transcript()
    );
}

// ---------------------------------------------------------------- bad input

/// Runs sprig (with its own TMPDIR) expecting a one-line error and a
/// non-zero exit, then checks it left nothing behind: no session directory,
/// no `.attach_pid` file in the JVM's working directory or in /tmp.
fn expect_error(args: &[&str], needle: &str, jvm: Option<&Proc>) -> String {
    let tmp = TempDir::new("badinput");
    let (code, out, err) = sprig_tests::run_sprig_in(args, Some(tmp.path()), LONG);
    assert_ne!(code, 0, "sprig {args:?} succeeded:\n{out}\n{err}");
    assert!(
        err.contains(needle),
        "sprig {args:?}: expected {needle:?} in stderr:\n{err}"
    );
    assert!(!err.contains("panicked"), "sprig {args:?} panicked:\n{err}");
    assert!(!err.contains("RUST_BACKTRACE"), "{err}");
    let error_lines = err
        .lines()
        .filter(|l| l.starts_with("sprig: error:"))
        .count();
    assert_eq!(error_lines, 1, "expected exactly one error line:\n{err}");
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "sprig left {left:?} in its TMPDIR");
    if let Some(jvm) = jvm {
        let cwd = jvm.cwd.as_ref().expect("harness JVM has its own cwd");
        let attach_files = sprig_tests::files_with_prefix(cwd.path(), ".attach_pid");
        assert!(attach_files.is_empty(), "left behind: {attach_files:?}");
        let in_tmp = Path::new("/tmp").join(format!(".attach_pid{}", jvm.pid()));
        assert!(!in_tmp.exists(), "left behind: {}", in_tmp.display());
    }
    err
}

#[test]
fn unknown_pid_is_one_clear_line() {
    // A pid above the kernel's pid_max cannot exist.
    expect_error(
        &["profile", "4194304", "--root", "a.B::c"],
        "no process",
        None,
    );
}

#[test]
fn a_process_that_is_not_a_jvm_gets_no_signal() {
    let mut sleeper = Proc::spawn("sleep", {
        let mut c = Command::new("sleep");
        c.arg("60");
        c
    });
    expect_error(
        &["profile", &sleeper.pid().to_string(), "--root", "a.B::c"],
        "not a HotSpot JVM",
        None,
    );
    assert!(
        sleeper.wait_exit(Duration::from_millis(300)).is_none(),
        "the non-JVM process died: it must not receive SIGQUIT"
    );
}

#[test]
fn malformed_patterns_and_options_are_rejected_before_attaching() {
    let jdk = sprig_tests::jdk17();
    let classes = fixture_classes(&jdk);
    let jvm = start_workload(&jdk, classes.path(), &[]);
    let pid = jvm.pid().to_string();
    let j = Some(&jvm);
    expect_error(&["profile", &pid, "--root", "fixtures.Calls"], "--root", j);
    expect_error(&["profile", &pid, "--root", "::root"], "--root", j);
    expect_error(
        &[
            "profile",
            &pid,
            "--root",
            "fixtures.Calls::root",
            "--duration",
            "0",
        ],
        "--duration",
        j,
    );
    let root = ["profile", &pid, "--root", "fixtures.Calls::root"];
    expect_error(
        &[&root[..], &["--reset-after", "0"]].concat(),
        "--reset-after",
        j,
    );
    expect_error(
        &[&root[..], &["--reset-after", "5", "--duration", "2"]].concat(),
        "--reset-after 5 is not before --duration 2",
        j,
    );
    // clap's own usage errors: non-zero, no panic.
    let (code, _, err) = run_sprig(&["profile", "not-a-pid", "--root", "a.B::c"], LONG);
    assert_eq!(code, 2, "{err}");
    assert!(!err.contains("panicked"));
    for bad in ["--skip-trivial=0", "--skip-trivial=300", "--skip-trivial=x"] {
        let (code, _, err) = run_sprig(&[&root[..], &[bad]].concat(), LONG);
        assert_eq!(code, 2, "{bad}: {err}");
        assert!(err.starts_with("error: invalid value"), "{bad}: {err}");
        assert!(err.contains("--skip-trivial"), "{bad}: {err}");
    }
}

#[test]
fn a_root_method_that_does_not_exist_suggests_near_matches() {
    let jdk = sprig_tests::jdk17();
    let classes = fixture_classes(&jdk);
    let mut jvm = start_workload(&jdk, classes.path(), &[]);
    run_scenario(&mut jvm, "calls", 1, 1); // makes sure fixtures.Calls is loaded
    let err = expect_error(
        &[
            "profile",
            &jvm.pid().to_string(),
            "--root",
            "fixtures.Calls::rooot",
        ],
        "fixtures.Calls::rooot",
        Some(&jvm),
    );
    assert!(
        err.contains("fixtures.Calls::root"),
        "no near match suggested:\n{err}"
    );
    // The JVM is unharmed and can be profiled right away.
    let tmp = TempDir::new("after");
    let out = tmp.path().join("r.json");
    let sprig = start_profile(jvm.pid(), "fixtures.Calls::root", &out, &[]);
    run_scenario(&mut jvm, "calls", 7, 1);
    let report = stop_profile(sprig, &out);
    let calls: u64 = calls_to_calls_root(&report);
    assert_eq!(calls, 7);
}

/// A misspelt class in `--root` cannot be refused at once (the class may
/// load later), but a session that then records no root call ends with
/// status 4 and says why again in its last line, with the near match.
#[test]
fn a_misspelt_root_class_ends_without_root_calls_and_says_why_last() {
    let jdk = sprig_tests::jdk17();
    let classes = fixture_classes(&jdk);
    let mut jvm = start_workload(&jdk, classes.path(), &[]);
    run_scenario(&mut jvm, "calls", 1, 1); // loads fixtures.Calls
    let tmp = TempDir::new("misspelt");
    let out = tmp.path().join("r.txt");
    let mut cmd = Command::new(sprig_bin());
    cmd.args(["profile", &jvm.pid().to_string()])
        .args(["--root", "fixtures.Callz::root", "--duration", "1", "-o"])
        .arg(&out);
    let mut sprig = Proc::spawn("sprig", cmd);
    let status = sprig
        .wait_exit(LONG)
        .unwrap_or_else(|| panic!("sprig did not stop:\n{}", sprig.transcript()));
    let transcript = sprig.transcript();
    assert_eq!(status.code(), Some(4), "{transcript}");
    let last = transcript
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default();
    assert!(
        last.contains("no root call was recorded")
            && last.contains("fixtures.Callz::root")
            && last.contains("fixtures.Calls"),
        "the last line repeats the near match:\n{transcript}"
    );
    // The report is still written, and the JVM still runs.
    let report = std::fs::read_to_string(&out).expect("report written");
    assert!(report.contains("no calls were recorded"), "{report}");
    run_scenario(&mut jvm, "calls", 1, 1);
}

#[test]
fn a_jvm_with_attach_disabled_points_to_sprig_run() {
    let jdk = sprig_tests::jdk17();
    let classes = fixture_classes(&jdk);
    let jvm = start_workload(&jdk, classes.path(), &["-XX:+DisableAttachMechanism"]);
    let err = expect_error(
        &[
            "profile",
            &jvm.pid().to_string(),
            "--root",
            "fixtures.Calls::root",
            "--attach-timeout",
            "3",
        ],
        "attach",
        Some(&jvm),
    );
    assert!(
        err.contains("sprig run"),
        "no hint to use `sprig run`:\n{err}"
    );
}

#[test]
fn another_users_jvm_is_refused_with_a_clear_line() {
    // sprig runs as `nobody` against a JVM of ours (root). Needs setpriv and root.
    let is_root = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"));
    if !is_root || Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("SKIP another_users_jvm_is_refused_with_a_clear_line: needs root and setpriv");
        return;
    }
    let jdk = sprig_tests::jdk17();
    let classes = fixture_classes(&jdk);
    let jvm = start_workload(&jdk, classes.path(), &[]);
    let bin = sprig_bin();
    // `nobody` must be able to execute the binary: copy it somewhere readable.
    let tmp = TempDir::new("otheruser");
    std::fs::set_permissions(
        tmp.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let copy = tmp.path().join("sprig");
    std::fs::copy(&bin, &copy).unwrap();
    let output = Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .arg(&copy)
        .args([
            "profile",
            &jvm.pid().to_string(),
            "--root",
            "fixtures.Calls::root",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{err}");
    assert!(err.contains("belongs to user"), "unclear error:\n{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn snapshots_re_render_and_diff() {
    let jdk = sprig_tests::jdk17();
    let classes = fixture_classes(&jdk);
    let mut jvm = start_workload(&jdk, classes.path(), &[]);
    run_scenario(&mut jvm, "calls", 1, 1);
    let tmp = TempDir::new("snap");
    let mut snaps = Vec::new();
    for (i, n) in [(0, 200u32), (1, 300)] {
        let path = tmp.path().join(format!("run{i}.sprig"));
        let mut p = start_sprig(jvm.pid(), &["--root", "fixtures.Calls::root"], &path);
        run_scenario(&mut jvm, "calls", n, 1);
        p.stop(&format!("snapshot {i}"));
        let bytes = std::fs::read(&path).unwrap();
        assert!(bytes.starts_with(b"SPRIGSNP"), "not a snapshot");
        snaps.push(path);
    }
    let a = snaps[0].to_str().unwrap();
    let b = snaps[1].to_str().unwrap();
    let (code, out, err) = run_sprig(&["report", a, "--format", "json"], LONG);
    assert_eq!(code, 0, "{err}");
    let report: Value = serde_json::from_str(&out).expect("report JSON");
    let calls: u64 = calls_to_calls_root(&report);
    assert_eq!(calls, 200);
    // Per root call (the default): one root call per root call on both
    // sides; whole runs (`--totals`): 200 against 300.
    for (args, want) in [
        (&[][..], ["1.00", "1.00"]),
        (&["--totals"][..], ["200", "300"]),
    ] {
        let mut argv = vec!["diff", a, b];
        argv.extend_from_slice(args);
        let (code, out, err) = run_sprig(&argv, LONG);
        assert_eq!(code, 0, "{err}");
        let line = out
            .lines()
            .find(|l| l.contains("fixtures.Calls.root"))
            .unwrap_or_else(|| panic!("root missing from diff:\n{out}"));
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(&cols[..2], &want, "diff {args:?} line: {line}");
    }
    // A file that is not a snapshot is one clear error.
    let (code, _, err) = run_sprig(&["report", "/etc/hostname"], LONG);
    assert_ne!(code, 0);
    assert!(
        err.starts_with("sprig: error:") && err.contains("not a readable sprig snapshot"),
        "{err}"
    );
}

/// (method name, calls) of a node's children, by name (the report orders
/// them by time).
fn child_calls(node: &Value) -> Vec<(String, u64)> {
    let mut kids: Vec<(String, u64)> = node["children"]
        .as_array()
        .expect("children")
        .iter()
        .map(|c| {
            (
                c["method"].as_str().unwrap_or("").to_string(),
                c["calls"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    kids.sort();
    kids
}

/// A root node of one worker thread: (thread name, calls, incomplete,
/// calls of each child by method name).
type WorkerRoot = (String, u64, u64, Vec<(String, u64)>);

/// The root nodes named `fixtures.Calls::<method>` per worker thread.
fn worker_roots(report: &Value, method: &str) -> Vec<WorkerRoot> {
    let mut out: Vec<WorkerRoot> = root_nodes(report, "fixtures.Calls", method, "worker-")
        .into_iter()
        .map(|(name, r)| {
            (
                name,
                r["calls"].as_u64().expect("calls"),
                r["incomplete"].as_u64().expect("incomplete"),
                child_calls(r),
            )
        })
        .collect();
    out.sort();
    out
}

fn wait_reset(sprig: &mut Proc) {
    sprig.wait_for("sprig: results reset", LONG, |l| {
        l.starts_with("sprig: results reset")
    });
}

/// `kill -USR1` resets the results: the report holds the calls made after
/// the reset, a call running at that moment once (marked incomplete, its
/// children from the cut on), and says when the reset was; `--reset-after`
/// does the same by itself.
#[test]
fn a_reset_leaves_out_what_ran_before_it() {
    let jdk = sprig_tests::jdk17();
    let classes = fixture_classes(&jdk);
    let mut jvm = start_workload(&jdk, classes.path(), &[]);
    run_scenario(&mut jvm, "calls", 1, 1); // loads the class
    let tmp = TempDir::new("reset");
    let out = tmp.path().join("run.json");
    let mut sprig = start_profile(jvm.pid(), "fixtures.Calls::sleepy", &out, &[]);
    // Revealed before the run the reset cuts, on a thread that ends
    // before it.
    run_scenario(&mut jvm, "sleepy", 20, 1);
    // Two threads making 1,500 root calls that sleep 1 ms each: the reset
    // falls inside one of each thread's calls.
    jvm.send("run sleepy 1500 2");
    std::thread::sleep(Duration::from_millis(500));
    sprig.signal("USR1");
    wait_reset(&mut sprig);
    jvm.wait_for("done sleepy", LONG, |l| l.starts_with("done sleepy"));
    let report = stop_profile(sprig, &out);
    check_schema(&report, jvm.pid());
    assert!(
        report["stats"]["reset_after_ms"].as_u64().unwrap_or(0) >= 500,
        "reset_after_ms: {}",
        report["stats"]
    );
    let roots = worker_roots(&report, "sleepy");
    assert_eq!(
        roots.len(),
        2,
        "one root per thread of the last run, none of the first: {roots:?}"
    );
    for (thread, calls, incomplete, kids) in &roots {
        assert!(
            *calls > 1 && *calls < 1500,
            "{thread}: {calls} root calls after a reset in the middle of 1500"
        );
        assert_eq!(*incomplete, 1, "{thread}: the call open at the reset");
        let a = kids.iter().find(|k| k.0 == "a").map_or(0, |k| k.1);
        let b = kids.iter().find(|k| k.0 == "b").map_or(0, |k| k.1);
        // The open call keeps its children from the cut on: a misses
        // its call when the cut fell after a, and b too when the cut fell
        // after b (the root's exit still to come: its timed exit goes
        // through a native call, where a safepoint can hold the thread).
        // Every call after the cut has both.
        let cut_before_b = b == *calls && (a == *calls || a + 1 == *calls);
        let cut_after_b = b + 1 == *calls && a + 1 == *calls;
        assert!(
            cut_before_b || cut_after_b,
            "{thread}: {calls} calls, {kids:?}"
        );
    }
    // --reset-after: the reset comes by itself, and profiling goes on.
    let out2 = tmp.path().join("run2.json");
    let mut sprig = start_profile(
        jvm.pid(),
        "fixtures.Calls::root",
        &out2,
        &["--reset-after", "1"],
    );
    wait_reset(&mut sprig);
    run_scenario(&mut jvm, "calls", 400, 1);
    let report = stop_profile(sprig, &out2);
    let roots = worker_roots(&report, "root");
    assert_eq!(
        roots,
        vec![(
            "worker-0".to_string(),
            400,
            0,
            vec![("a".to_string(), 400), ("b".to_string(), 400)]
        )],
        "{report}"
    );
    assert!(report["stats"]["reset_after_ms"].as_u64().unwrap_or(0) >= 1000);
}

/// Root calls on virtual threads after an attach: each virtual thread's
/// calls are its own (never mixed into a carrier's tree, though one that
/// blocks inside the root goes on on any carrier while another runs on the
/// first), merged into one tree `virtual threads (N)` beside the platform
/// threads' trees; under `--clock cpu` as under the wall clock (a virtual
/// thread's CPU time is that of its mounted stretches).
#[test]
fn root_calls_on_virtual_threads_are_profiled_after_an_attach() {
    each_jdk(
        "root_calls_on_virtual_threads_are_profiled_after_an_attach",
        |jdk| {
            if jdk.major < 21 {
                eprintln!("skipped on JDK {}: no virtual threads", jdk.major);
                return;
            }
            for cpu in [false, true] {
                virtual_roots_after_an_attach(jdk, cpu);
            }
        },
    );
}

fn virtual_roots_after_an_attach(jdk: &Jdk, cpu: bool) {
    let classes = fixture_classes(jdk);
    let mut jvm = start_workload(jdk, classes.path(), &[]);
    // Loads `Calls` (the root is instrumented when attaching).
    run_scenario(&mut jvm, "calls", 1, 1);
    let tmp = TempDir::new("vthreads");
    let out = tmp.path().join("run.json");
    let extra: &[&str] = if cpu { &["--clock", "cpu"] } else { &[] };
    let sprig = start_profile(jvm.pid(), "fixtures.Calls::sleepy", &out, extra);
    // 2 platform threads x 5 calls, then 40 virtual threads x 3 calls,
    // then the platform threads again.
    run_scenario(&mut jvm, "sleepy", 5, 2);
    jvm.send("vrun sleepy 3 40");
    jvm.wait_for("done sleepy", LONG, |l| {
        assert!(!l.starts_with("error"), "{l}");
        l.starts_with("done sleepy")
    });
    run_scenario(&mut jvm, "sleepy", 5, 2);
    let report = stop_profile(sprig, &out);
    let mut per_thread: Vec<(String, u64)> = Vec::new();
    for t in report["threads"].as_array().expect("threads") {
        let roots = t["roots"].as_array().expect("roots");
        assert_eq!(roots.len(), 1, "one root per thread: {t}");
        let root = &roots[0];
        assert_eq!(root["method"], "sleepy", "{t}");
        assert_eq!(root["incomplete"], 0, "{t}");
        let calls = root["calls"].as_u64().unwrap();
        let kids = child_calls(root);
        assert_eq!(
            kids,
            vec![("a".to_string(), calls), ("b".to_string(), calls)],
            "{t}"
        );
        per_thread.push((t["name"].as_str().unwrap().to_string(), calls));
    }
    per_thread.sort();
    // Each `run` starts two new platform threads.
    let worker = |n: &str| (format!("worker-{n}"), 5);
    let expected = vec![
        ("virtual threads (40)".to_string(), 120),
        worker("0"),
        worker("0"),
        worker("1"),
        worker("1"),
    ];
    assert_eq!(per_thread, expected, "cpu {cpu}: {report}");
    let warnings = report["warnings"].to_string();
    assert!(!warnings.contains("not profiled"), "cpu {cpu}: {warnings}");
    assert_eq!(report["stats"]["virtual_threads"], 40, "cpu {cpu}");
    jvm.send("exit");
    let _ = jvm.wait_exit(Duration::from_secs(10));
}

#[test]
fn a_second_profiling_session_on_the_same_jvm_is_refused_clearly() {
    each_jdk(
        "a_second_profiling_session_on_the_same_jvm_is_refused_clearly",
        |jdk| {
            let classes = fixture_classes(jdk);
            let mut jvm = start_workload(jdk, classes.path(), &[]);
            run_scenario(&mut jvm, "calls", 1, 1);
            let tmp = TempDir::new("second");
            let out = tmp.path().join("first.json");
            let first = start_profile(jvm.pid(), "fixtures.Calls::root", &out, &[]);
            let err = expect_error(
                &[
                    "profile",
                    &jvm.pid().to_string(),
                    "--root",
                    "fixtures.Calls::root",
                ],
                "a sprig session is already running in this JVM",
                Some(&jvm),
            );
            // One line that names the session that runs (#38: whichever
            // copy of the agent asks, the refusal comes over the socket).
            let first_pid = first.pid().to_string();
            assert!(
                err.contains(&format!("sprig pid {first_pid}, user ")),
                "the refusal does not name the running session:\n{err}"
            );
            assert_eq!(
                err.lines()
                    .filter(|l| l.starts_with("sprig: error:"))
                    .count(),
                1,
                "not one error line:\n{err}"
            );
            // The first profiling session is unharmed.
            run_scenario(&mut jvm, "calls", 25, 1);
            let report = stop_profile(first, &out);
            let calls: u64 = calls_to_calls_root(&report);
            assert_eq!(calls, 25);
        },
    );
}
