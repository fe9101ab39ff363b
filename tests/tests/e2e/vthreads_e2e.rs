//! Root calls on virtual threads (JDK 21 and 25): each virtual thread is
//! its own stream whatever carrier runs it, its root calls are counted
//! exactly, and reports merge virtual threads into one tree per root
//! unless `--threads` keeps them apart. The fixture (`fixtures/vthreads`)
//! starts its virtual threads by reflection, so JDK 17's javac compiles it.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use sprig_tests::{Jdk, Proc, TempDir, compiled, repo_root, sprig_bin};

const LONG: Duration = Duration::from_secs(120);

/// The JDKs with virtual threads (21 and 25), those missing skipped.
fn vthread_jdks(test: &str) -> Vec<Jdk> {
    sprig_tests::every_jdk(test)
        .into_iter()
        .filter(|j| j.major >= 21)
        .collect()
}

/// `sprig run --root vthreads.Task::root` of `VThreads ARGS` with two
/// carriers; returns the JSON report and the fixture's output.
fn run(jdk: &Jdk, sprig_args: &[&str], args: &[&str]) -> (Value, String) {
    let classes = compiled(jdk, "vthreads", &repo_root().join("fixtures/vthreads"), &[]);
    let tmp = TempDir::new("vthreads");
    let out = tmp.path().join("run.json");
    let mut cmd = Command::new(sprig_bin());
    cmd.args([
        "run",
        "--root",
        "vthreads.Task::root",
        "--format",
        "json",
        "--keep-trivial",
    ])
    .args(sprig_args)
    .arg("-o")
    .arg(&out)
    .arg("--")
    .arg(jdk.java())
    .arg("-Djdk.virtualThreadScheduler.parallelism=2")
    .arg("-cp")
    .arg(classes.path())
    .arg("vthreads.VThreads")
    .args(args);
    let mut p = Proc::spawn(&format!("vthreads-jdk{}", jdk.major), cmd);
    p.close_stdin();
    let status = p
        .wait_exit(LONG)
        .unwrap_or_else(|| panic!("sprig run did not end:\n{}", p.transcript()));
    assert!(status.success(), "{status}\n{}", p.transcript());
    let stdout = p.stdout();
    assert!(
        stdout.contains("failed 0"),
        "a root call failed:\n{}",
        p.transcript()
    );
    let text = std::fs::read_to_string(&out)
        .unwrap_or_else(|e| panic!("no report ({e}):\n{}", p.transcript()));
    let report = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("report is not JSON ({e}):\n{text}\n{}", p.transcript()));
    (report, stdout)
}

/// The fixture's `moved M` line.
fn moved(stdout: &str) -> u64 {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("moved "))
        .and_then(|n| n.trim().parse().ok())
        .expect("a moved line")
}

/// One thread's calls per path (`method > method`), every node complete.
fn tree(thread: &Value) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let mut stack: Vec<(&Value, String)> = thread["roots"]
        .as_array()
        .expect("roots")
        .iter()
        .map(|r| (r, String::new()))
        .collect();
    while let Some((n, prefix)) = stack.pop() {
        let name = n["method"].as_str().expect("method");
        let path = if prefix.is_empty() {
            name.to_owned()
        } else {
            format!("{prefix} > {name}")
        };
        assert_eq!(n["incomplete"], 0, "incomplete calls at {path}: {thread}");
        assert!(
            out.insert(path.clone(), n["calls"].as_u64().expect("calls"))
                .is_none(),
            "two nodes for {path}: {thread}"
        );
        for c in n["children"].as_array().into_iter().flatten() {
            stack.push((c, path.clone()));
        }
    }
    out
}

/// The tree of `n` root calls: `block` adds the socket I/O.
fn expected(n: u64, io: bool) -> BTreeMap<String, u64> {
    let mut m: BTreeMap<String, u64> = [
        ("root", n),
        ("root > carrier", 2 * n),
        ("root > step", 3 * n),
        ("root > locked", n),
        ("root > locked > inLock", n),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    if io {
        m.insert("root > io".into(), n);
        m.insert("root > io > check".into(), n);
    }
    m
}

/// The tree of `n` root calls with `extra` nodes (path, calls per root
/// call) added to `expected(n, false)`.
fn expected_with(n: u64, extra: &[(&str, u64)]) -> BTreeMap<String, u64> {
    let mut m = expected(n, false);
    for (path, per_call) in extra {
        m.insert((*path).to_owned(), per_call * n);
    }
    m
}

/// The node at `path` (`method > method`) of a thread.
fn node<'a>(thread: &'a Value, path: &str) -> &'a Value {
    let mut level: &Vec<Value> = thread["roots"].as_array().expect("roots");
    let mut found = None;
    for name in path.split(" > ") {
        let n = level
            .iter()
            .find(|n| n["method"] == name)
            .unwrap_or_else(|| panic!("no {path}: {thread}"));
        level = n["children"].as_array().unwrap_or_else(|| {
            static NONE: Vec<Value> = Vec::new();
            &NONE
        });
        found = Some(n);
    }
    found.expect("a path")
}

/// The fixture's `NAME N` line.
fn figure(stdout: &str, name: &str) -> u64 {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} line:\n{stdout}"))
}

fn threads(report: &Value) -> &Vec<Value> {
    report["threads"].as_array().expect("threads")
}

/// Smallest complete root call of a thread, in ns.
fn min_root_ns(thread: &Value) -> u64 {
    thread["roots"][0]["latency"]["min_ns"]
        .as_u64()
        .unwrap_or_else(|| panic!("no latency: {thread}"))
}

#[test]
fn roots_on_virtual_threads_that_block_are_profiled_per_thread() {
    for jdk in vthread_jdks("roots_on_virtual_threads_that_block_are_profiled_per_thread") {
        for timing in ["sampled", "exact"] {
            blocking_roots_on(&jdk, timing);
        }
    }
}

fn blocking_roots_on(jdk: &Jdk, timing: &str) {
    const N: u64 = 40;
    let n = N.to_string();
    let what = format!("JDK {} {timing}", jdk.major);

    // By default the virtual threads are one tree per root.
    let (report, stdout) = run(jdk, &["--timing", timing], &["block", &n, "0"]);
    assert!(moved(&stdout) > 0, "{what}: no root call changed carriers");
    let ts = threads(&report);
    assert_eq!(ts.len(), 1, "{what}: one merged thread: {report}");
    assert_eq!(
        ts[0]["name"],
        format!("virtual threads ({N})"),
        "{what}: {report}"
    );
    assert_eq!(ts[0]["virtual"], N, "{what}");
    assert_eq!(tree(&ts[0]), expected(N, true), "{what}: {report}");
    assert_eq!(report["stats"]["threads"], N, "{what}");
    assert_eq!(report["stats"]["virtual_threads"], N, "{what}");
    // Wall time: every root call slept 20 ms and waited for the lock and
    // the echo (5 ms).
    assert!(
        min_root_ns(&ts[0]) >= 25_000_000,
        "{what}: a root call took less than its sleep and echo: {}",
        ts[0]["roots"][0]["latency"]
    );
    assert!(
        ts[0]["roots"][0]["total_ns"].as_u64().unwrap() >= N * 25_000_000,
        "{what}: total below the sleeps: {}",
        ts[0]["roots"][0]["total_ns"]
    );

    // --threads: each virtual thread its own tree, exactly one root call
    // and nothing of another's.
    let (report, stdout) = run(jdk, &["--timing", timing, "--threads"], &["block", &n, "0"]);
    assert!(moved(&stdout) > 0, "{what}: no root call changed carriers");
    let ts = threads(&report);
    assert_eq!(ts.len() as u64, N, "{what}: a thread per virtual thread");
    let mut ids: Vec<u64> = Vec::new();
    for t in ts {
        assert_eq!(t["virtual"], 1, "{what}: {t}");
        assert_eq!(tree(t), expected(1, true), "{what}: {t}");
        assert!(min_root_ns(t) >= 25_000_000, "{what}: {t}");
        ids.push(t["id"].as_u64().expect("id"));
    }
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len() as u64, N, "{what}: Java thread ids repeat");
}

#[test]
fn ten_thousand_virtual_threads_each_with_a_root_call() {
    for jdk in vthread_jdks("ten_thousand_virtual_threads_each_with_a_root_call") {
        let what = format!("JDK {}", jdk.major);
        let (report, _) = run(&jdk, &[], &["plain", "10000", "0"]);
        let ts = threads(&report);
        // A thread announced last must still be named and marked virtual
        // when the JVM exits right after it (VMDeath waits for the control
        // thread's flush under way).
        let names: Vec<&str> = ts.iter().filter_map(|t| t["name"].as_str()).collect();
        assert_eq!(
            ts.len(),
            1,
            "{what}: threads {:?}..., stats {}",
            &names[..names.len().min(5)],
            report["stats"]
        );
        assert_eq!(ts[0]["name"], "virtual threads (10000)", "{what}");
        assert_eq!(tree(&ts[0]), expected(10_000, false), "{what}");
        assert_eq!(report["stats"]["threads"], 10_000, "{what}");
        assert_eq!(report["stats"]["virtual_threads"], 10_000, "{what}");
        assert_eq!(report["stats"]["lost_events"], 0, "{what}");
    }
}

/// More virtual threads parked inside roots than the ring has segments
/// (1,000 against 64): an unmounting virtual thread past half the ring
/// hands its segment back, so the carriers that run the others on never
/// wait for one that only a parked thread could free (the JVM hung there).
#[test]
fn more_virtual_threads_parked_inside_roots_than_ring_segments() {
    for jdk in vthread_jdks("more_virtual_threads_parked_inside_roots_than_ring_segments") {
        for timing in ["sampled", "exact"] {
            let what = format!("JDK {} {timing}", jdk.major);
            let (report, _) = run(
                &jdk,
                &["--ring-mib", "4", "--timing", timing],
                &["sleep", "1000", "0"],
            );
            let ts = threads(&report);
            assert_eq!(ts.len(), 1, "{what}: {report}");
            assert_eq!(tree(&ts[0]), expected(1000, false), "{what}");
            assert_eq!(report["stats"]["lost_events"], 0, "{what}");
            assert!(min_root_ns(&ts[0]) >= 20_000_000, "{what}");
        }
    }
}

#[test]
fn platform_and_virtual_threads_run_the_same_root_at_once() {
    for jdk in vthread_jdks("platform_and_virtual_threads_run_the_same_root_at_once") {
        let what = format!("JDK {}", jdk.major);
        // 3 platform threads of 20 root calls each, 200 virtual threads of
        // one, every call sleeping 20 ms.
        let (report, _) = run(&jdk, &[], &["sleep", "200", "3", "20"]);
        let mut by_name: BTreeMap<String, &Value> = BTreeMap::new();
        for t in threads(&report) {
            by_name.insert(t["name"].as_str().expect("name").to_owned(), t);
        }
        let names: Vec<&String> = by_name.keys().collect();
        assert_eq!(
            names,
            ["plat-0", "plat-1", "plat-2", "virtual threads (200)"],
            "{what}"
        );
        for p in ["plat-0", "plat-1", "plat-2"] {
            assert_eq!(by_name[p]["virtual"], 0, "{what}");
            assert_eq!(tree(by_name[p]), expected(20, false), "{what}: {p}");
        }
        let v = by_name["virtual threads (200)"];
        assert_eq!(tree(v), expected(200, false), "{what}");
        assert_eq!(report["stats"]["threads"], 203, "{what}");
        assert_eq!(report["stats"]["virtual_threads"], 200, "{what}");
    }
}

/// `sprig profile` killed while virtual threads sit inside roots: the agent
/// detaches by itself, the JVM goes on, and a new session counts the
/// virtual threads' root calls exactly (the killed session's states, left
/// in the virtual threads that ran roots, stay out of it).
#[test]
fn killing_the_cli_while_virtual_threads_are_inside_roots() {
    for jdk in vthread_jdks("killing_the_cli_while_virtual_threads_are_inside_roots") {
        let what = format!("JDK {}", jdk.major);
        let classes = compiled(
            &jdk,
            "vthreads",
            &repo_root().join("fixtures/vthreads"),
            &[],
        );
        let mut cmd = Command::new(jdk.java());
        cmd.arg("-Djdk.virtualThreadScheduler.parallelism=2")
            .arg("-cp")
            .arg(classes.path())
            .args(["vthreads.VThreads", "loop", "50", "0"]);
        let mut jvm = Proc::spawn(&format!("vthreads-loop-jdk{}", jdk.major), cmd);
        jvm.wait_for("ready", LONG, |l| l.starts_with("ready"));
        let tmp = TempDir::new("vthreads-kill");
        let args = [
            "--root",
            "vthreads.Task::root",
            "--format",
            "json",
            "--keep-trivial",
        ];
        let first = tmp.path().join("first.json");
        let mut sprig = sprig_tests::start_sprig(jvm.pid(), &args, &first);
        std::thread::sleep(Duration::from_millis(500));
        sprig.signal("KILL");
        sprig.wait_exit(LONG).expect("killed");
        // A new session gets going once the old one detached.
        let second = tmp.path().join("second.json");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut sprig = loop {
            let mut cmd = Command::new(sprig_bin());
            cmd.arg("profile")
                .arg(jvm.pid().to_string())
                .args(args)
                .arg("-o")
                .arg(&second);
            let mut p = Proc::spawn("sprig-2", cmd);
            if p.try_wait_for(Duration::from_secs(3), |_, l| {
                l.starts_with("sprig: profiling")
            })
            .is_some()
            {
                break p;
            }
            p.wait_exit(Duration::from_secs(5));
            assert!(
                std::time::Instant::now() < deadline,
                "{what}: no new session within 10 s of the kill"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        std::thread::sleep(Duration::from_millis(500));
        jvm.send("stop");
        jvm.wait_for("stopped", LONG, |l| l.starts_with("stopped"));
        assert!(
            jvm.stdout().contains("failed 0"),
            "{what}: {}",
            jvm.transcript()
        );
        let report = sprig.stop_and_json(&what, &second);
        let ts = threads(&report);
        assert_eq!(ts.len(), 1, "{what}: {report}");
        // Calls already inside the root when the session began are left
        // out whole (their thread had no root context open), as on
        // platform threads: the rest is exact.
        let t = tree(&ts[0]);
        let n = t["root"];
        assert!(n >= 50, "{what}: {n} root calls");
        assert_eq!(t, expected(n, false), "{what}: {report}");
        jvm.close_stdin();
        let _ = jvm.wait_exit(Duration::from_secs(10));
    }
}

/// `--clock cpu`: a virtual thread's CPU time is the sum of its mounted
/// stretches, whatever carriers ran them. Each root call spins about 2.5 ms
/// of CPU, sleeps 20 ms (unmounted) and spins again, often on another
/// carrier: its CPU time is near the two spins, its wall time includes the
/// sleep.
#[test]
fn cpu_clock_times_virtual_threads_by_their_own_cpu() {
    for jdk in vthread_jdks("cpu_clock_times_virtual_threads_by_their_own_cpu") {
        for (clock, timing) in [("cpu", "exact"), ("cpu", "sampled"), ("wall", "exact")] {
            const N: u64 = 40;
            let what = format!("JDK {} --clock {clock} --timing {timing}", jdk.major);
            let (report, stdout) = run(
                &jdk,
                &["--clock", clock, "--timing", timing],
                &["spin", &N.to_string(), "0"],
            );
            let spin_ns = figure(&stdout, "spin_ns");
            assert!(moved(&stdout) > 0, "{what}: no root call changed carriers");
            let warnings = report["warnings"].to_string();
            assert!(!warnings.contains("not profiled"), "{what}: {warnings}");
            let ts = threads(&report);
            assert_eq!(ts.len(), 1, "{what}: {report}");
            assert_eq!(ts[0]["name"], format!("virtual threads ({N})"), "{what}");
            assert_eq!(
                tree(&ts[0]),
                expected_with(N, &[("root > spin", 2)]),
                "{what}: {report}"
            );
            assert_eq!(report["stats"]["virtual_threads"], N, "{what}");
            let root = &ts[0]["roots"][0];
            let latency = &root["latency"];
            let at = |k: &str| latency[k].as_u64().unwrap_or_else(|| panic!("{k}: {root}"));
            let total = root["total_ns"].as_u64().expect("total_ns");
            if clock == "cpu" {
                // Every call at least half its spins (the CPU clock may
                // run slow for nothing); nothing of the 20 ms sleep, which
                // would put every call above 20 ms (a first call may
                // spend a few ms more on class initialisation and
                // revelation: the 90th percentile, and the total).
                assert!(
                    at("min_ns") >= spin_ns / 2,
                    "{what}: spins {spin_ns} ns, a root call took less CPU: {latency}"
                );
                assert!(
                    at("p90_ns") < 15_000_000 && total < N * 15_000_000,
                    "{what}: spins {spin_ns} ns, root calls {latency}, total {total} ns: the \
                     sleep or another carrier's time counted"
                );
                if timing == "sampled" {
                    // The position samples weigh each virtual thread by its
                    // own CPU time: the spins, inner nodes, hold at least a
                    // fifth of the root's sampled time and of the spins'
                    // CPU (they held none before the agent published a
                    // virtual thread's clock). Not all of it: `schedstat`
                    // brings a running carrier's CPU time up to date at the
                    // kernel's ticks (4 ms here, a spin 2.5 ms), so a
                    // spin's last stretch is often weighed at a reading
                    // after the spin returned (JDK 21 and 25: 30-66% of the
                    // root's sampled time on the spins, the root's total
                    // 0.85-1.1 of the spins' CPU, load 6-11).
                    let spin = node(&ts[0], "root > spin");
                    let spin_total = spin["total_ns"].as_u64().expect("total_ns");
                    let credited = ts[0]["samples"]["credited"].as_u64().expect("credited");
                    eprintln!(
                        "{what}: root > spin {spin_total} ns sampled ({} samples) of root \
                         {total} ns, {credited} samples credited; spins {} ns",
                        spin["samples"],
                        N * spin_ns
                    );
                    assert!(
                        spin_total * 5 >= N * spin_ns && spin_total * 5 >= total,
                        "{what}: root > spin sampled {spin_total} ns of root {total} ns, the \
                         spins took {} ns of CPU: {}",
                        N * spin_ns,
                        ts[0]
                    );
                }
            } else {
                assert!(
                    at("min_ns") >= 20_000_000 + spin_ns / 2,
                    "{what}: a root call took less wall time than its sleep and spins \
                     ({spin_ns} ns): {latency}"
                );
            }
        }
    }
}

/// One thread's calls per path like [`tree`], without the rows of waits
/// (`(blocked on C)`, `--locks`).
fn tree_without_waits(thread: &Value) -> BTreeMap<String, u64> {
    tree(thread)
        .into_iter()
        .filter(|(path, _)| !path.split(" > ").any(|m| m.starts_with('(')))
        .collect()
}

/// `--alloc`: what a root call on a virtual thread allocates lands on the
/// node that allocated it, counted exactly, whatever carrier ran it.
#[test]
fn allocations_on_virtual_threads_land_on_their_nodes() {
    for jdk in vthread_jdks("allocations_on_virtual_threads_land_on_their_nodes") {
        for timing in ["sampled", "exact"] {
            const N: u64 = 40;
            let what = format!("JDK {} --timing {timing}", jdk.major);
            let (report, _) = run(
                &jdk,
                &["--alloc", "--timing", timing],
                &["alloc", &N.to_string(), "0"],
            );
            let ts = threads(&report);
            assert_eq!(ts.len(), 1, "{what}: {report}");
            assert_eq!(
                tree(&ts[0]),
                expected_with(N, &[("root > alloc", 1)]),
                "{what}: {report}"
            );
            // int[16]: a 16-byte array header and 64 bytes, on both JDKs'
            // default layouts; allocated nowhere else.
            let mut int_arrays = Vec::new();
            let mut stack: Vec<(&Value, String)> = ts[0]["roots"]
                .as_array()
                .expect("roots")
                .iter()
                .map(|r| (r, String::new()))
                .collect();
            while let Some((n, prefix)) = stack.pop() {
                let path = format!("{prefix}{}", n["method"].as_str().expect("method"));
                for a in n["allocations"].as_array().into_iter().flatten() {
                    if a["class"] == "int[]" {
                        int_arrays.push((path.clone(), a["count"].clone(), a["bytes"].clone()));
                    }
                }
                for c in n["children"].as_array().into_iter().flatten() {
                    stack.push((c, format!("{path} > ")));
                }
            }
            assert_eq!(
                int_arrays,
                [(
                    "root > alloc".to_owned(),
                    Value::from(N),
                    Value::from(80 * N)
                )],
                "{what}: {report}"
            );
        }
    }
}

/// `--locks`: a virtual thread blocked on a contended monitor inside a
/// root (a platform thread holds it for 300 ms as the threads start) has
/// the wait's row under the node that waited. JDK 21 pins the virtual
/// thread to its carrier while it blocks, so only as many block as there
/// are carriers (2), the others waiting for a carrier; JDK 24 and later
/// unmount it (it may go on on another carrier), so every one blocks: the
/// row is the same.
#[test]
fn a_virtual_thread_blocked_on_a_monitor_has_its_wait_row() {
    for jdk in vthread_jdks("a_virtual_thread_blocked_on_a_monitor_has_its_wait_row") {
        for timing in ["sampled", "exact"] {
            const N: u64 = 20;
            let what = format!("JDK {} --timing {timing}", jdk.major);
            let (report, _) = run(
                &jdk,
                &["--locks", "--timing", timing],
                &["monitor", &N.to_string(), "0"],
            );
            let ts = threads(&report);
            assert_eq!(ts.len(), 1, "{what}: {report}");
            assert_eq!(
                tree_without_waits(&ts[0]),
                expected_with(
                    N,
                    &[("root > monitored", 1), ("root > monitored > inMonitor", 1)]
                ),
                "{what}: {report}"
            );
            let monitored = node(&ts[0], "root > monitored");
            let entry = monitored["contention"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["monitor"] == "java.lang.Object" && c["kind"] == "blocked")
                .unwrap_or_else(|| panic!("{what}: no blocked wait at {monitored}"));
            let count = entry["count"].as_u64().expect("count");
            eprintln!("{what}: {count} blocked waits of {N} root calls");
            if jdk.major < 24 {
                // Pinned: the two virtual threads that reached the monitor
                // first block their carriers, and the others wait for a
                // carrier, not for the monitor.
                assert!(
                    (2..=N / 2).contains(&count),
                    "{what}: {count} waits: {entry}"
                );
            } else {
                // Unmounted while they block: every virtual thread reaches
                // the monitor while it is held.
                assert!(count > N / 2, "{what}: {count} waits: {entry}");
            }
            assert!(
                monitored["children"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["method"] == "(blocked on java.lang.Object)"),
                "{what}: no wait row under {monitored}"
            );
            // The first waiters waited for most of the 300 ms hold.
            assert!(
                entry["blocked_ns"].as_u64().expect("blocked_ns") >= 150_000_000,
                "{what}: {entry}"
            );
        }
    }
}

/// `--timing windows`: root calls on virtual threads are counted in the
/// counting windows and timed by their own entry and exit in the silent
/// ones, and the CPU timer's samples taken while a virtual thread is
/// mounted inside a silent root call are credited to that virtual
/// thread's tree (the handler reads the identity of the probe state the
/// carrier's tls word points at, the virtual thread's). With `--threads`
/// each virtual thread is a tree of its own: the samples fall on the
/// virtual threads whose one root call was silent, the spins hold most of
/// them, no virtual thread holds more than its own spins' CPU can give,
/// and no carrier (a platform thread, inside no root) holds any.
#[test]
fn windows_timing_credits_stack_samples_to_virtual_threads() {
    for jdk in vthread_jdks("windows_timing_credits_stack_samples_to_virtual_threads") {
        const N: u64 = 200;
        let what = format!("JDK {}", jdk.major);
        let started = std::time::Instant::now();
        let (report, stdout) = run(
            &jdk,
            &[
                "--timing",
                "windows",
                "--windows",
                "150,250",
                "--interval",
                "1",
                "--threads",
            ],
            &["spin", &N.to_string(), "0"],
        );
        let spin_ns = figure(&stdout, "spin_ns");
        let w = &report["windows"];
        let silent = w["silent_root_calls"].as_u64().expect("silent_root_calls");
        let credited = w["samples"].as_u64().expect("samples");
        let ts = threads(&report);
        // Every thread in the report is a virtual thread: no carrier.
        assert_eq!(ts.len() as u64, N, "{what}: a tree per virtual thread: {w}");
        let (mut counted, mut timed, mut on_nodes, mut on_spin) = (0u64, 0u64, 0u64, 0u64);
        let mut per_thread: Vec<u64> = Vec::new();
        for t in ts {
            assert_eq!(t["virtual"], 1, "{what}: not a virtual thread: {t}");
            let root = &t["roots"][0];
            let calls = root["calls"].as_u64().expect("calls");
            let silent_here = root["latency"]["count"].as_u64().unwrap_or(0);
            assert_eq!(calls + silent_here, 1, "{what}: one root call: {t}");
            counted += calls;
            timed += silent_here;
            let mut samples = 0;
            let mut stack: Vec<(&Value, String)> = vec![(root, String::new())];
            while let Some((n, prefix)) = stack.pop() {
                let path = format!("{prefix}{}", n["method"].as_str().expect("method"));
                let s = n["samples"].as_u64().unwrap_or(0);
                samples += s;
                if path == "root > spin" {
                    on_spin += s;
                }
                for c in n["children"].as_array().into_iter().flatten() {
                    stack.push((c, format!("{path} > ")));
                }
            }
            // A sample only in a silent root call: a virtual thread whose
            // root call was counted holds none.
            assert!(
                samples == 0 || silent_here == 1,
                "{what}: {samples} samples on a virtual thread whose root call was counted: {t}"
            );
            // No more than its own two spins' CPU at 1 ms a sample (three
            // times that, and three more, for a JIT tier that spins slower
            // and the root's own frames).
            assert!(
                samples <= 3 * spin_ns.div_ceil(1_000_000) + 3,
                "{what}: {samples} samples on one virtual thread, whose spins take {spin_ns} \
                 ns of CPU: {t}"
            );
            on_nodes += samples;
            per_thread.push(samples);
        }
        assert!(silent > 0 && counted > 0, "{what}: {w}");
        assert_eq!(counted + silent, N, "{what}: {w}");
        assert_eq!(
            timed, silent,
            "{what}: every silent root call is timed: {w}"
        );
        // Every credited sample is on a virtual thread's node.
        assert_eq!(on_nodes, credited, "{what}: {w}");
        // The spins take spin_ns of CPU per root call (about 5 ms). A
        // thread's CPU-time timer fires at most once per kernel tick (4 ms
        // here, docs/stack-sampling.md), so a silent call gives its spin
        // node about 1.25 samples: at least half a sample a silent call on
        // average, and the spins hold most of the samples.
        assert!(
            on_spin * 2 >= silent && on_spin * 10 >= on_nodes * 8,
            "{what}: {on_spin} samples on root > spin of {on_nodes} credited, {silent} silent \
             root calls of {spin_ns} ns of spins each: {w}"
        );
        per_thread.sort_unstable();
        eprintln!(
            "{what}: {silent} silent root calls, {on_nodes} samples credited ({on_spin} on \
             root > spin), {} outside; per virtual thread with samples: median {}, max {}; \
             spins {spin_ns} ns a call; {:.1} s",
            w["samples_outside"],
            per_thread
                .iter()
                .filter(|s| **s > 0)
                .nth(per_thread.iter().filter(|s| **s > 0).count() / 2)
                .unwrap_or(&0),
            per_thread.last().unwrap_or(&0),
            started.elapsed().as_secs_f64()
        );
    }
}

/// `--alloc --locks --threads`: what each virtual thread allocated and
/// waited for inside its root call is on its own tree's nodes, counted
/// exactly: its one `int[16]` on `root > alloc`, its one 20 ms sleep as a
/// `(sleeping)` row under `root`, whatever carriers ran it before and
/// after the sleep.
#[test]
fn allocations_and_sleeps_land_on_each_virtual_threads_own_nodes() {
    for jdk in vthread_jdks("allocations_and_sleeps_land_on_each_virtual_threads_own_nodes") {
        for timing in ["sampled", "exact"] {
            const N: u64 = 20;
            let what = format!("JDK {} --timing {timing}", jdk.major);
            let started = std::time::Instant::now();
            let (report, stdout) = run(
                &jdk,
                &["--alloc", "--locks", "--threads", "--timing", timing],
                &["sleepalloc", &N.to_string(), "0"],
            );
            assert!(moved(&stdout) > 0, "{what}: no root call changed carriers");
            let ts = threads(&report);
            assert_eq!(ts.len() as u64, N, "{what}: a tree per virtual thread");
            for t in ts {
                assert_eq!(t["virtual"], 1, "{what}: {t}");
                assert_eq!(
                    tree_without_waits(t),
                    expected_with(1, &[("root > alloc", 1)]),
                    "{what}: {t}"
                );
                // Allocations: exactly the one int[16], where it was made.
                let mut allocs = Vec::new();
                // Waits: (path, row, calls) of every wait row.
                let mut waits = Vec::new();
                let mut stack: Vec<(&Value, String)> = vec![(&t["roots"][0], String::new())];
                while let Some((n, prefix)) = stack.pop() {
                    let name = n["method"].as_str().expect("method");
                    let path = format!("{prefix}{name}");
                    if name.starts_with('(') {
                        waits.push((
                            prefix.trim_end_matches(" > ").to_owned(),
                            name.to_owned(),
                            n["calls"].clone(),
                        ));
                    }
                    for a in n["allocations"].as_array().into_iter().flatten() {
                        allocs.push((path.clone(), a["class"].clone(), a["count"].clone()));
                    }
                    for c in n["children"].as_array().into_iter().flatten() {
                        stack.push((c, format!("{path} > ")));
                    }
                }
                let int_arrays: Vec<_> = allocs.iter().filter(|a| a.1 == "int[]").collect();
                assert_eq!(
                    int_arrays,
                    [&(
                        "root > alloc".to_owned(),
                        Value::from("int[]"),
                        Value::from(1)
                    )],
                    "{what}: {t}"
                );
                let sleeps: Vec<_> = waits.iter().filter(|w| w.1 == "(sleeping)").collect();
                assert_eq!(
                    sleeps,
                    [&("root".to_owned(), "(sleeping)".to_owned(), Value::from(1))],
                    "{what}: waits {waits:?}: {t}"
                );
                let slept = t["roots"][0]["contention"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|c| c["kind"] == "sleeping")
                    .unwrap_or_else(|| panic!("{what}: no sleeping contention: {t}"));
                assert_eq!(slept["count"], 1, "{what}: {slept}");
                assert!(
                    slept["blocked_ns"].as_u64().expect("blocked_ns") >= 15_000_000,
                    "{what}: a 20 ms sleep measured {slept}"
                );
            }
            eprintln!("{what}: {:.1} s", started.elapsed().as_secs_f64());
        }
    }
}
