//! `sprig sample` on real JVMs (JDK 17, and JDK 25 where installed), on
//! `fixtures.Shares`: a worker in `heavy` 70% and in `light` 30% of its
//! time under `work`, and a thread blocked on a monitor. The inclusive
//! shares come out within 5 points, the blocked thread counts in the wall
//! view and not in the CPU view, `--suggest-roots` names `work`, and the
//! JVM runs on with no class redefined. It needs the agent's stack
//! sampler (the `StackSamples` messages).

use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use sprig_tests::{Jdk, Proc, fixture_classes, run_sprig, test_jdks};

const CLASS: &str = "fixtures.Shares";

/// C2 keeps the inlining scope of every instruction, not only of its
/// safepoints: AsyncGetCallTrace then names the inlined method a sample
/// lands in. Without it a sample between two safepoints is named after
/// the nearest one, which can be another inlined method (here `heavy` and
/// `light`, whose bodies are the same, came out 40/60 instead of 70/30
/// once on JDK 25). docs/stack-sampling.md.
const PRECISE: [&str; 2] = ["-XX:+UnlockDiagnosticVMOptions", "-XX:+DebugNonSafepoints"];

/// Starts the fixture with HotSpot logging every class redefinition.
fn start_shares(jdk: &Jdk, classes: &std::path::Path) -> Proc {
    let mut cmd = Command::new(jdk.java());
    cmd.args(PRECISE)
        .arg("-Xlog:redefine+class*=info")
        .arg("-cp")
        .arg(classes)
        .arg(CLASS);
    let mut p = Proc::spawn(&format!("shares-jdk{}", jdk.major), cmd);
    p.wait_for("ready", Duration::from_secs(30), |l| l == "ready");
    p
}

/// `sprig sample PID --duration 3 --format json` with `extra`; the report.
fn sample(jvm: &Proc, extra: &[&str]) -> Value {
    let pid = jvm.pid().to_string();
    let mut args = vec!["sample", &pid, "--format", "json", "--quiet"];
    for (flag, default) in [("--duration", "3"), ("--interval", "5")] {
        if !extra.contains(&flag) {
            args.extend([flag, default]);
        }
    }
    args.extend_from_slice(extra);
    let (code, out, err) = run_sprig(&args, Duration::from_secs(60));
    assert_eq!(code, 0, "sprig {args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}\n{err}"))
}

/// A method's (self, total) samples in the report, (0, 0) when absent.
fn counts(report: &Value, method: &str) -> (u64, u64) {
    report["methods"]
        .as_array()
        .expect("methods")
        .iter()
        .find(|m| m["class"] == CLASS && m["method"] == method)
        .map_or((0, 0), |m| {
            (m["self"].as_u64().unwrap(), m["total"].as_u64().unwrap())
        })
}

fn thread<'r>(report: &'r Value, name: &str) -> &'r Value {
    report["threads"]
        .as_array()
        .expect("threads")
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no thread {name}: {}", report["threads"]))
}

#[test]
fn sample_finds_known_shares_the_blocked_thread_and_the_root() {
    for jdk in sprig_tests::every_jdk("sample_finds_known_shares_the_blocked_thread_and_the_root") {
        let classes = fixture_classes(&jdk);
        let mut jvm = start_shares(&jdk, classes.path());

        // The CPU view (the default, from the CPU-time timer), with
        // suggestions. The timer fires at scheduler ticks of the worker's
        // CPU time (at most 250 a second here): 1 ms asks for every tick.
        // The samples come with the CPU the worker gets: on a loaded host
        // a longer run gathers the 300 the 5-point bound needs.
        let mut cpu = Value::Null;
        for secs in ["4", "8", "16"] {
            cpu = sample(
                &jvm,
                &[
                    "--suggest-roots",
                    "5",
                    "--interval",
                    "1",
                    "--duration",
                    secs,
                ],
            );
            if counts(&cpu, "work").1 >= 300 {
                break;
            }
        }
        assert_eq!(cpu["source"], "timer", "JDK {}", jdk.major);
        let (_, work) = counts(&cpu, "work");
        let (_, heavy) = counts(&cpu, "heavy");
        let (_, light) = counts(&cpu, "light");
        assert!(
            work >= 300,
            "JDK {}: {work} samples in work: {cpu}",
            jdk.major
        );
        for (name, n, want) in [("heavy", heavy, 0.70), ("light", light, 0.30)] {
            let share = n as f64 / work as f64;
            assert!(
                (share - want).abs() <= 0.05,
                "JDK {}: {name} holds {share:.3} of work's samples, not {want} within 5 points ({n} of {work})",
                jdk.major
            );
        }
        // A blocked thread runs only for the few µs of a spurious wake-up;
        // its timer's first expiry is drawn at random within the interval
        // (so a thread's expected samples are its CPU time over the
        // interval), and may fall inside them: at most one sample, against
        // the hundreds `work` holds (the wall view below holds it whole).
        let (_, blocked) = counts(&cpu, "waitForLock");
        assert!(
            blocked <= 1,
            "JDK {}: the blocked thread in the CPU view: {blocked} samples",
            jdk.major
        );
        let blocked_cpu = thread(&cpu, "shares-blocked")["cpu_samples"]
            .as_u64()
            .unwrap_or(0);
        assert!(
            blocked_cpu <= 1,
            "JDK {}: the blocked thread's CPU samples: {blocked_cpu}",
            jdk.major
        );
        let roots: Vec<&str> = cpu["suggested_roots"]
            .as_array()
            .expect("suggested_roots")
            .iter()
            .map(|r| r["root"].as_str().unwrap())
            .collect();
        assert!(
            roots.contains(&"fixtures.Shares::work"),
            "JDK {}: suggested {roots:?}",
            jdk.major
        );
        assert!(
            roots.iter().all(|r| !r.starts_with("java.")
                && !r.starts_with("jdk.")
                && *r != "fixtures.Shares::main"),
            "JDK {}: suggested {roots:?}",
            jdk.major
        );
        let w = cpu["suggested_roots"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["root"] == "fixtures.Shares::work")
            .unwrap();
        let cmd = w["command"].as_str().unwrap();
        assert_eq!(
            cmd,
            format!("sprig profile {} --root 'fixtures.Shares::work'", jvm.pid())
        );

        // The wall view (JVMTI: every thread every round): the blocked
        // thread is there, in every round.
        let wall = sample(&jvm, &["--clock", "wall"]);
        assert_eq!(wall["source"], "jvmti", "JDK {}", jdk.major);
        let (_, blocked) = counts(&wall, "waitForLock");
        let rounds = wall["rounds"].as_u64().unwrap();
        assert!(
            blocked * 10 >= rounds * 9,
            "JDK {}: waitForLock in {blocked} of {rounds} rounds: {wall}",
            jdk.major
        );
        let t = thread(&wall, "shares-blocked");
        assert!(t["wall_samples"].as_u64().unwrap() >= blocked);
        assert_eq!(t["cpu_samples"], 0);

        // The JVM runs on, and no class was ever redefined.
        jvm.send("ping");
        jvm.wait_for("pong", Duration::from_secs(10), |l| l.starts_with("pong "));
        let log = jvm.stdout();
        assert!(
            !log.contains("redefine,class"),
            "JDK {}: HotSpot logged a redefinition:\n{log}",
            jdk.major
        );
    }
}

// ---------------------------------------------------------------------
// The safepoint bias, attach/detach cycles, bad input: `fixtures.Bias`.

const BIAS: &str = "fixtures.Bias";

/// Starts `fixtures.Bias` with the serial collector (C2 then keeps no
/// safepoint poll in a counted int loop: no loop strip mining) and
/// HotSpot logging every class redefinition.
fn start_bias(jdk: &Jdk, classes: &std::path::Path) -> Proc {
    let mut cmd = Command::new(jdk.java());
    cmd.args(PRECISE)
        .arg("-XX:+UseSerialGC")
        .arg("-Xlog:redefine+class*=info")
        .arg("-cp")
        .arg(classes)
        .arg(BIAS);
    let mut p = Proc::spawn(&format!("bias-jdk{}", jdk.major), cmd);
    p.wait_for("ready", Duration::from_secs(30), |l| l == "ready");
    p
}

/// A method of `fixtures.Bias`: (self, total) samples, (0, 0) when absent.
fn bias_counts(report: &Value, method: &str) -> (u64, u64) {
    report["methods"]
        .as_array()
        .expect("methods")
        .iter()
        .find(|m| m["class"] == BIAS && m["method"] == method)
        .map_or((0, 0), |m| {
            (m["self"].as_u64().unwrap(), m["total"].as_u64().unwrap())
        })
}

/// The fixture's own clocks: the counted loop's share of the two phases
/// since the last `reset`, by the wall clock and by the worker's CPU time.
fn measured_counted_shares(jvm: &mut Proc) -> (f64, f64) {
    jvm.send("shares");
    let line = jvm.wait_for("shares", Duration::from_secs(10), |l| {
        l.starts_with("shares ")
    });
    let ns: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().expect("a number of ns"))
        .collect();
    (ns[0] / (ns[0] + ns[1]), ns[2] / (ns[2] + ns[3]))
}

/// The bias test. `work` alternates a counted int loop without safepoint
/// polls and a loop of calls that polls, about 50/50 by the fixture's own
/// clock. The default source of the CPU view, a CPU-time timer whose
/// signal handler walks the interrupted thread with AsyncGetCallTrace,
/// sees the thread where it is: the loop's share (inlined into `work` by
/// C2, a frame of its own in the stack) is within 5 points of the
/// fixture's clock, and the text report's header names the source. The
/// JVMTI source (`--source jvmti`) is safepoint-biased: its figures are
/// printed beside (docs/stack-sampling.md).
#[test]
fn sample_bias_of_a_counted_loop_without_safepoint_polls() {
    // JDK 17 and 25: the bias is the sources' (AsyncGetCallTrace's on
    // JDK 11 and 21 is shown by the shares test, on every JDK).
    for jdk in test_jdks("sample_bias_of_a_counted_loop_without_safepoint_polls") {
        let classes = fixture_classes(&jdk);
        let mut jvm = start_bias(&jdk, classes.path());
        let mut shares = Vec::new();
        for source in ["default", "jvmti"] {
            // The timer's samples come at scheduler ticks while the thread
            // runs (at most 250 a second here). The JVMTI source samples
            // at each round whatever the load.
            // They come with the CPU the worker gets: on a loaded host a
            // longer run gathers the 1,000 samples wanted (a standard
            // deviation of 1.6 points on a share of one half).
            let mut report = Value::Null;
            let (mut truth, mut cpu_truth) = (0.0, 0.0);
            for secs in ["8", "16", "32"] {
                jvm.send("reset");
                jvm.wait_for("reset", Duration::from_secs(10), |l| l == "reset");
                let extra: &[&str] = if source == "default" {
                    &["--interval", "1", "--duration", secs]
                } else {
                    &["--source", source]
                };
                report = sample(&jvm, extra);
                // The fixture's wall clock is the truth asserted; its
                // CPU-time share is printed beside (on a loaded host the
                // two differ, see the fixture and docs/stack-sampling.md).
                (truth, cpu_truth) = measured_counted_shares(&mut jvm);
                if source != "default" || bias_counts(&report, "work").1 >= 1000 {
                    break;
                }
            }
            let (_, work) = bias_counts(&report, "work");
            let (_, counted) = bias_counts(&report, "counted");
            let (_, calls) = bias_counts(&report, "calls");
            let (work_self, _) = bias_counts(&report, "work");
            assert!(
                work >= 150,
                "JDK {}: {source}: {work} samples in work",
                jdk.major
            );
            assert!(
                (0.3..=0.7).contains(&truth),
                "JDK {}: the fixture's counted loop took {truth:.3} of its time, not about half",
                jdk.major
            );
            let share = counted as f64 / work as f64;
            let bias = (share - truth) * 100.0;
            // The JVMTI source's cost is a round's (all threads at a
            // safepoint), the timer's a sample's (in the signal handler).
            let per = if source == "default" {
                report["wall_samples"].as_f64().unwrap()
            } else {
                report["rounds"].as_f64().unwrap()
            };
            eprintln!(
                "JDK {}: {source}: counted loop: {:.1}% of work's time by the fixture's clock \
                 ({:.1}% of its CPU time), {:.1}% by sprig sample ({counted} of {work} samples; calls {calls}, work's own frame \
                 {work_self}): bias {bias:+.1} points; cost {:.1} us a {}",
                jdk.major,
                truth * 100.0,
                cpu_truth * 100.0,
                share * 100.0,
                report["cost_ns"].as_f64().unwrap() / per.max(1.0) / 1e3,
                if source == "default" {
                    "sample"
                } else {
                    "round"
                }
            );
            shares.push((source, bias));
            // The default source of the CPU view is the timer.
            assert!(
                source != "default" || bias.abs() <= 5.0,
                "JDK {}: the counted loop's share by the default source is {bias:+.1} points off \
                 the fixture's clock ({shares:?})",
                jdk.major
            );
        }

        // The text report names the source of the default CPU view.
        let pid = jvm.pid().to_string();
        let (code, text, err) = run_sprig(
            &["sample", &pid, "--duration", "0.5", "--quiet"],
            Duration::from_secs(60),
        );
        assert_eq!(code, 0, "{err}");
        let head: Vec<&str> = text.lines().take(4).collect();
        assert!(
            head.iter()
                .any(|l| l.contains("AsyncGetCallTrace") && l.contains("no safepoint bias")),
            "JDK {}: the report's header does not name the timer source:\n{}",
            jdk.major,
            head.join("\n")
        );
        // And the JVMTI source's bias where it is used.
        let (code, text, err) = run_sprig(
            &[
                "sample",
                &pid,
                "--duration",
                "0.5",
                "--quiet",
                "--source",
                "jvmti",
            ],
            Duration::from_secs(60),
        );
        assert_eq!(code, 0, "{err}");
        let head: Vec<&str> = text.lines().take(4).collect();
        assert!(
            head.iter()
                .any(|l| l.contains("safepoint") && l.contains("bias")),
            "JDK {}: the report's header does not name the safepoint bias:\n{}",
            jdk.major,
            head.join("\n")
        );
        jvm.send("ping");
        jvm.wait_for("pong", Duration::from_secs(10), |l| l.starts_with("pong "));
    }
}

/// Coexistence: a SIGPROF handler that is not sprig's, installed in the
/// target before the session (the agent's test-only fault hook
/// `foreign-sigprof` installs one, as async-profiler's would be), makes
/// the timer source step aside: one line says so, the samples come from
/// the JVMTI source, the foreign handler is left in place, and the JVM
/// runs on.
#[test]
fn sample_steps_aside_from_a_foreign_sigprof_handler() {
    for jdk in test_jdks("sample_steps_aside_from_a_foreign_sigprof_handler") {
        let classes = fixture_classes(&jdk);
        let mut cmd = Command::new(jdk.java());
        cmd.env("SPRIG_AGENT_FAULT", "foreign-sigprof")
            .arg("-XX:+UseSerialGC")
            .arg("-cp")
            .arg(classes.path())
            .arg(BIAS);
        let mut jvm = Proc::spawn(&format!("bias-foreign-jdk{}", jdk.major), cmd);
        jvm.wait_for("ready", Duration::from_secs(30), |l| l == "ready");
        let pid = jvm.pid().to_string();
        for _ in 0..2 {
            let (code, out, err) = run_sprig(
                &[
                    "sample",
                    &pid,
                    "--duration",
                    "1",
                    "--interval",
                    "5",
                    "--format",
                    "json",
                ],
                Duration::from_secs(60),
            );
            assert_eq!(code, 0, "JDK {}: {err}", jdk.major);
            let lines: Vec<&str> = err.lines().filter(|l| l.contains("SIGPROF")).collect();
            assert_eq!(
                lines.len(),
                1,
                "JDK {}: not one line about SIGPROF on stderr:\n{err}",
                jdk.major
            );
            assert!(
                lines[0].contains("another") && lines[0].contains("JVMTI"),
                "JDK {}: {}",
                jdk.major,
                lines[0]
            );
            let report: Value = serde_json::from_str(&out).expect("JSON");
            let (_, work) = bias_counts(&report, "work");
            assert!(work > 0, "JDK {}: no samples of work: {report}", jdk.major);
        }
        jvm.send("ping");
        jvm.wait_for("pong", Duration::from_secs(10), |l| l.starts_with("pong "));
    }
}

/// The Java threads the fixture lists (`Thread.getAllStackTraces`).
fn java_threads(jvm: &mut Proc) -> Vec<String> {
    jvm.send("threads");
    let line = jvm.wait_for("threads", Duration::from_secs(10), |l| {
        l.starts_with("threads ")
    });
    line.split_whitespace().skip(1).map(str::to_owned).collect()
}

/// 20 attach/detach cycles of `sprig sample` on one JVM: every cycle
/// gives samples of the worker, the JVM answers after, no sprig thread is
/// left among its threads, and no class was redefined.
#[test]
fn sample_twenty_attach_detach_cycles() {
    for jdk in test_jdks("sample_twenty_attach_detach_cycles") {
        let classes = fixture_classes(&jdk);
        let mut jvm = start_bias(&jdk, classes.path());
        let pid = jvm.pid().to_string();
        let t = std::time::Instant::now();
        for cycle in 1..=20 {
            let (code, out, err) = run_sprig(
                &[
                    "sample",
                    &pid,
                    "--duration",
                    "0.6",
                    "--interval",
                    "5",
                    "--format",
                    "json",
                    "--quiet",
                ],
                Duration::from_secs(60),
            );
            assert_eq!(code, 0, "JDK {}: cycle {cycle}: {err}", jdk.major);
            let report: Value = serde_json::from_str(&out)
                .unwrap_or_else(|e| panic!("cycle {cycle}: not JSON ({e}): {out}\n{err}"));
            let (_, work) = bias_counts(&report, "work");
            assert!(
                report["rounds"].as_u64().unwrap() > 0 && work > 0,
                "JDK {}: cycle {cycle}: no samples of work: {report}",
                jdk.major
            );
        }
        eprintln!(
            "JDK {}: 20 cycles in {:.1} s",
            jdk.major,
            t.elapsed().as_secs_f64()
        );
        jvm.send("ping");
        jvm.wait_for("pong", Duration::from_secs(10), |l| l.starts_with("pong "));
        // The timer source's SIGPROF handler stays, inert: a SIGPROF still
        // pending after a session (here sent by hand) does not take the
        // signal's default action, which ends the process.
        let status = Command::new("kill")
            .args(["-PROF", &pid])
            .status()
            .expect("kill");
        assert!(status.success());
        std::thread::sleep(Duration::from_millis(300));
        jvm.send("ping");
        jvm.wait_for("pong", Duration::from_secs(10), |l| l.starts_with("pong "));
        // The sampler's thread is joined before `Detached`; the control
        // thread may take a moment longer to go.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let threads = loop {
            let threads = java_threads(&mut jvm);
            if !threads.iter().any(|n| n.starts_with("sprig"))
                || std::time::Instant::now() > deadline
            {
                break threads;
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        assert!(
            threads.iter().all(|n| !n.starts_with("sprig")),
            "JDK {}: sprig threads left: {threads:?}",
            jdk.major
        );
        assert!(threads.iter().any(|n| n == "bias-worker"), "{threads:?}");
        let log = jvm.stdout();
        assert!(
            !log.contains("redefine,class"),
            "JDK {}: HotSpot logged a redefinition:\n{log}",
            jdk.major
        );
    }
}

/// One line on stderr, saying `want`, and a non-zero exit.
fn refused(args: &[&str], want: &str) {
    let (code, out, err) = run_sprig(args, Duration::from_secs(60));
    assert_ne!(code, 0, "sprig {args:?} succeeded: {out}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "sprig {args:?}: not one line:\n{err}");
    assert!(
        lines[0].contains(want),
        "sprig {args:?}: {:?} does not say {want:?}",
        lines[0]
    );
    assert!(out.is_empty(), "sprig {args:?} wrote a report: {out}");
}

/// Bad input: one clear line and a non-zero exit each, the JVM untouched.
/// A JVM that exits mid-sample: sprig prints what it collected (the JSON
/// report, with the rounds before the exit), says on one line that the
/// session ended early because the JVM exited, and exits non-zero (3).
#[test]
fn sample_bad_input_and_a_jvm_that_exits_mid_sample() {
    let not_a_jvm = {
        let mut cmd = Command::new("sleep");
        cmd.arg("60");
        Proc::spawn("sleep", cmd)
    };
    let sleep_pid = not_a_jvm.pid().to_string();
    for jdk in test_jdks("sample_bad_input_and_a_jvm_that_exits_mid_sample") {
        let classes = fixture_classes(&jdk);
        let mut jvm = start_bias(&jdk, classes.path());
        let pid = jvm.pid().to_string();
        for (args, want) in [
            (
                vec!["--interval", "0"],
                "--interval must be between 1 and 10000",
            ),
            (
                vec!["--interval=-5"],
                "--interval must be between 1 and 10000",
            ),
            (
                vec!["--interval", "1e12"],
                "--interval must be between 1 and 10000",
            ),
            (
                vec!["--interval", "nan"],
                "--interval must be between 1 and 10000",
            ),
            (
                vec!["--duration", "0"],
                "--duration must be a positive number",
            ),
            (
                vec!["--duration", "1e300"],
                "--duration must be a positive number",
            ),
            (
                vec!["--max-depth", "0"],
                "--max-depth must be between 1 and 2048",
            ),
            (
                vec!["--max-depth", "100000"],
                "--max-depth must be between 1 and 2048",
            ),
            (
                vec!["--suggest-roots", "1000000"],
                "--suggest-roots must be at most 100",
            ),
        ] {
            let mut a = vec!["sample", &pid];
            a.extend(args);
            refused(&a, want);
        }
        refused(
            &["sample", &sleep_pid, "--duration", "1"],
            "not a HotSpot JVM",
        );
        refused(&["sample", "999999999", "--duration", "1"], "no process");

        // Nothing was attached by any of them.
        jvm.send("ping");
        jvm.wait_for("pong", Duration::from_secs(10), |l| l.starts_with("pong "));
        assert!(
            java_threads(&mut jvm)
                .iter()
                .all(|n| !n.starts_with("sprig")),
            "JDK {}: a refused command attached",
            jdk.major
        );

        // The JVM exits 1 s after sampling began, 20 s before its end
        // (the attach alone may take seconds on a loaded host).
        let mut cmd = Command::new(sprig_tests::sprig_bin());
        cmd.args([
            "sample",
            &pid,
            "--duration",
            "20",
            "--interval",
            "5",
            "--format",
            "json",
            "--quiet",
        ]);
        let mut sprig = Proc::spawn("sprig-sample", cmd);
        sprig.wait_for("sampling began", Duration::from_secs(60), |l| {
            l.starts_with(&format!("sprig: sampling JVM {pid} "))
        });
        std::thread::sleep(Duration::from_millis(1000));
        jvm.send("exit");
        let status = sprig.wait_exit(Duration::from_secs(15)).unwrap_or_else(|| {
            panic!(
                "sprig runs on after the JVM exited:\n{}",
                sprig.transcript()
            )
        });
        assert_eq!(status.code(), Some(3), "{}", sprig.transcript());
        let err = sprig.stderr();
        assert!(
            err.lines().any(|l| l.contains(&format!("JVM {pid} exited"))
                && l.contains("showing what was collected")),
            "JDK {}: {err}",
            jdk.major
        );
        let report: Value = serde_json::from_str(&sprig.stdout())
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", sprig.transcript()));
        let (_, work) = bias_counts(&report, "work");
        assert!(
            report["rounds"].as_u64().unwrap() > 0 && work > 0,
            "JDK {}: nothing collected before the exit: {report}",
            jdk.major
        );
        assert!(jvm.wait_exit(Duration::from_secs(10)).is_some());
    }
}

// Short-lived threads: `fixtures.ShortThreads`.

const SHORT: &str = "fixtures.ShortThreads";

/// A method of `fixtures.ShortThreads`: its total samples, 0 when absent.
fn short_total(report: &Value, method: &str) -> u64 {
    report["methods"]
        .as_array()
        .expect("methods")
        .iter()
        .find(|m| m["class"] == SHORT && m["method"] == method)
        .map_or(0, |m| m["total"].as_u64().unwrap())
}

/// `sprig sample` of `fixtures.ShortThreads` for `secs` seconds at
/// `--interval interval`, with the fixture's CPU totals taken over the
/// sampling itself: reset when sprig says it samples, read `secs` later.
/// Totals taken from before the attach to after the detach also hold the
/// attach and the detach, when the two kinds of thread do not share the
/// CPU as they do while sampled (the spawner made 36% of the short
/// threads' CPU time during an attach where they had 45% while sampled).
/// Returns the report, the totals (short ns, long ns, threads, wall ns)
/// and short's share through sprig's exit.
fn sample_in_window(jvm: &mut Proc, interval: &str, secs: &str) -> (Value, Vec<f64>, f64) {
    let dir = sprig_tests::TempDir::new("short-sample");
    let out = dir.path().join("report.json");
    let args = ["--interval", interval, "--duration", secs];
    let mut sprig = sprig_tests::start_sample_in_window(jvm, &args, &out);
    std::thread::sleep(Duration::from_secs_f64(secs.parse::<f64>().expect("secs")));
    let v = sprig_tests::fixture_shares(jvm);
    let report = sprig.ended_json("sprig sample", &out, Duration::from_secs(60));
    let after = sprig_tests::fixture_shares(jvm);
    (report, v, after[0] / (after[0] + after[1]))
}

/// Threads that live a few ms: `fixtures.ShortThreads` starts one thread
/// after another, each spinning about 5 ms of its CPU time in `shortWork`
/// and ending, beside a thread that spins in `longWork` for ever. The
/// timer source arms a thread's timer when the thread starts (JVMTI
/// ThreadStart, on the new thread), due at every scheduler tick that
/// finds the thread running, and keeps a signal with the chance of one
/// interval's worth of ticks, so a thread that lives less than the
/// drain's 10 ms, and less than one interval of CPU time, is sampled by
/// the CPU it uses: `shortWork`'s share of the two methods' samples is
/// within 8 points of its share of their CPU time by the fixture's clock
/// while sprig sampled (wider on an oversubscribed host: see the bounds), at `--interval 1` (every tick) and at the default
/// 20 ms (one tick in five; a timer armed at the interval lost the CPU
/// time after a thread's last tick: -17.2 points at load 17).
/// The samples come with the CPU the JVM gets: on a loaded host a longer
/// run gathers the 300 wanted.
#[test]
fn sample_threads_that_live_less_than_the_drain_period() {
    for jdk in test_jdks("sample_threads_that_live_less_than_the_drain_period") {
        let classes = fixture_classes(&jdk);
        let mut cmd = Command::new(jdk.java());
        cmd.args(PRECISE).arg("-cp").arg(classes.path()).arg(SHORT);
        let mut jvm = Proc::spawn(&format!("short-jdk{}", jdk.major), cmd);
        jvm.wait_for("ready", Duration::from_secs(30), |l| l == "ready");
        // (interval, seconds): a longer run where a shorter one gathered
        // fewer than 300 samples; one check per interval.
        let runs = [
            ("1", "4"),
            ("1", "8"),
            ("1", "16"),
            ("20", "6"),
            ("20", "12"),
            ("20", "24"),
        ];
        let mut checked: Vec<&str> = Vec::new();
        for (interval, secs) in runs {
            if checked.contains(&interval) {
                continue;
            }
            let (report, v, through_exit) = sample_in_window(&mut jvm, interval, secs);
            let truth = v[0] / (v[0] + v[1]);
            let short = short_total(&report, "shortWork");
            let long = short_total(&report, "longWork");
            let last = secs == "16" || secs == "24";
            if short + long < 300 && !last {
                continue;
            }
            let share = short as f64 / (short + long).max(1) as f64;
            eprintln!(
                "JDK {}: --interval {interval}: shortWork {:.1}% of the two methods' CPU time \
                 while sprig sampled ({} threads, short-long {:.0}% of a core; {:.1}% through \
                 sprig's exit), {:.1}% of their samples ({short} of {}): {:+.1} points",
                jdk.major,
                truth * 100.0,
                v[2],
                v[1] / v[3] * 100.0,
                through_exit * 100.0,
                share * 100.0,
                short + long,
                (share - truth) * 100.0
            );
            assert!(
                short + long >= 100,
                "JDK {}: --interval {interval}: {} samples in the two methods",
                jdk.major,
                short + long
            );
            // The spawner makes one thread at a time: on a loaded host
            // the short threads get less than the half they take on a
            // quiet one (20% in a CI run, 14% at load 11), which leaves
            // the comparison its meaning while they draw samples enough.
            assert!(
                (0.05..=0.95).contains(&truth) && short >= 30,
                "JDK {}: the short threads took {truth:.3} of the CPU time ({short} samples)",
                jdk.major
            );
            // A short thread's JNIEnv is named to the drain at its
            // ThreadStart: before, the drain named it when it next ran,
            // and a thread that had ended by then lost its samples (-19.4
            // points at load 17-24, -4.7 and -3.9 alone; -1.6 and -1.5
            // since, alone). At an interval under the kernel's 4 ms tick
            // the samples follow a thread's slices of a core rather than
            // its CPU time (docs/stack-sampling.md): on an oversubscribed
            // host the error goes either way (+10.9 points on JDK 25
            // beside four spinning processes, +11.2 and -10.0 in CI runs
            // beside another e2e test, +17.2 at --interval 20 in a CI run
            // where `short-long` had 51% of a core; -1.5 to -3.8 on a
            // quiet host). The bound is 8 points either way where
            // `short-long` had a core of its own while sampled; where it
            // had less than 80% of one, 15 points below (still short of
            // the defect's -19.4, which loses samples) and 20 above.
            let core = v[1] / v[3];
            let (below, above) = if core < 0.8 {
                (0.15, 0.20)
            } else {
                (0.08, 0.08)
            };
            if core < 0.8 {
                eprintln!(
                    "JDK {}: short-long had {:.0}% of a core while sampled: the host was \
                     oversubscribed, the bounds are -{:.0} and +{:.0} points",
                    jdk.major,
                    core * 100.0,
                    below * 100.0,
                    above * 100.0
                );
            }
            assert!(
                (-below..=above).contains(&(share - truth)),
                "JDK {}: --interval {interval}: shortWork holds {:.1}% of the samples, \
                 {:.1}% of the CPU time while sampled, {:.1}% through sprig's exit \
                 ({short} of {} samples; short-long had {:.0}% of a core; bounds -{:.0} and \
                 +{:.0} points)",
                jdk.major,
                share * 100.0,
                truth * 100.0,
                through_exit * 100.0,
                short + long,
                core * 100.0,
                below * 100.0,
                above * 100.0
            );
            checked.push(interval);
        }
        jvm.send("ping");
        jvm.wait_for("pong", Duration::from_secs(10), |l| l.starts_with("pong "));
    }
}
