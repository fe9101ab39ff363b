//! Code that was running when sprig attached, after the detach
//! (`fixtures.Spin`): HotSpot never compiles a method version a class
//! redefinition replaced, so a loop running in a class sprig redefines
//! stays interpreted after the detach. The loop in the root's class cannot
//! escape that (the root must be instrumented): the end report names it.
//! A loop in a class the root can reach but revelation never needs keeps
//! its speed, because nothing redefines its class while it runs.

use serde_json::Value;
use sprig_tests::{Jdk, Proc, TempDir, every_jdk, fixture_classes, sprig_bin};
use std::process::Command;
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(60);

/// Starts `fixtures.Spin` and waits until both loops ran 2 seconds.
fn start_spin(jdk: &Jdk, classes: &std::path::Path) -> Proc {
    let mut cmd = Command::new(jdk.java());
    cmd.arg("-cp").arg(classes).arg("fixtures.Spin");
    let mut p = Proc::spawn(&format!("spin-jdk{}", jdk.major), cmd);
    p.wait_for("ready", LONG, |l| l == "ready");
    p
}

/// The values of `keys` (`same=`, `loop=`, ...) in each `rate` line
/// printed from now on, for `span`; lines missing one are skipped.
fn rate_fields(jvm: &mut Proc, span: Duration, keys: &[&str]) -> Vec<Vec<f64>> {
    let deadline = Instant::now() + span;
    let mut out = Vec::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        let Some(line) = jvm.try_wait_for(left, |_, l| l.starts_with("rate ")) else {
            break;
        };
        let values: Option<Vec<f64>> = keys
            .iter()
            .map(|key| {
                line.split_whitespace()
                    .find_map(|f| f.strip_prefix(key))
                    .and_then(|v| v.parse().ok())
            })
            .collect();
        out.extend(values);
    }
    out
}

/// The (same, other) rates of `fixtures.Spin`'s `rate` lines, for `span`.
fn rates(jvm: &mut Proc, span: Duration) -> Vec<(f64, f64)> {
    rate_fields(jvm, span, &["same=", "other="])
        .into_iter()
        .map(|v| (v[0], v[1]))
        .collect()
}

/// Profiles `root` in `jvm` for `secs` seconds with a JSON report; returns
/// the report, its warnings, and the stopped sprig (for its stderr).
fn profile(jvm: &Proc, root: &str, secs: &str) -> (Value, Vec<String>, Proc) {
    let tmp = TempDir::new("running");
    let out = tmp.path().join("report.json");
    let mut sprig = Proc::spawn("sprig", {
        let mut c = Command::new(sprig_bin());
        c.arg("profile")
            .arg(jvm.pid().to_string())
            // Every method: the fixtures' task bodies are trivial leaves.
            .args(["--root", root, "--format", "json", "--keep-trivial"])
            .args(["--duration", secs, "-o"])
            .arg(&out);
        c
    });
    let status = sprig.wait_exit(LONG).expect("sprig stops after --duration");
    assert!(status.success(), "{status}:\n{}", sprig.transcript());
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("report")).unwrap();
    let warnings: Vec<String> = report["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .map(|w| w.as_str().unwrap_or_default().to_string())
        .collect();
    (report, warnings, sprig)
}

fn median(mut v: Vec<f64>) -> f64 {
    assert!(!v.is_empty(), "no rate lines");
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn the_report_names_the_loop_left_on_an_old_version_and_the_other_keeps_its_speed() {
    for jdk in every_jdk("running frames after the detach") {
        let classes = fixture_classes(&jdk);
        let mut jvm = start_spin(&jdk, classes.path());
        let before = rates(&mut jvm, Duration::from_secs(2));
        let (_, warnings, sprig) = profile(&jvm, "fixtures.Spin::root", "1");
        let stale: Vec<&String> = warnings
            .iter()
            .filter(|w| w.contains("left on an old version"))
            .collect();
        assert_eq!(stale.len(), 1, "JDK {}: {warnings:?}", jdk.major);
        assert!(
            stale[0].contains("thread \"spin-same\": fixtures.Spin::loop"),
            "JDK {}: the loop in the root's class is named: {}",
            jdk.major,
            stale[0]
        );
        assert!(
            !stale[0].contains("spin-other") && !stale[0].contains("SpinOther"),
            "JDK {}: the loop outside was not redefined: {}",
            jdk.major,
            stale[0]
        );
        // The CLI printed it as it came.
        assert!(
            sprig.stderr().contains("fixtures.Spin::loop"),
            "{}",
            sprig.transcript()
        );
        // Both loops share the machine's load: after the detach the loop
        // whose class stayed as it was runs compiled, the other interpreted.
        // Before the attach they ran at about the same speed. Under heavy
        // load the JIT may need a while to compile the loop again: windows
        // of 2 s are taken until it has (the loop in the root's class never
        // catches up, so waiting does not weaken the check), for at most
        // 30 s.
        let ratio = |v: &[(f64, f64)]| median(v.iter().map(|(s, o)| o / s.max(1.0)).collect());
        let r_before = ratio(&before);
        let speed = |v: &[(f64, f64)], i: usize| {
            median(v.iter().map(|r| if i == 0 { r.0 } else { r.1 }).collect())
        };
        // The JIT compiles the root again first.
        std::thread::sleep(Duration::from_secs(2));
        let mut after = Vec::new();
        let mut r_after = 0.0;
        for _ in 0..14 {
            after = rates(&mut jvm, Duration::from_secs(2));
            r_after = ratio(&after);
            if r_after >= 2.0 * r_before.min(1.0) {
                break;
            }
        }
        eprintln!(
            "JDK {}: other/same loop speed {r_before:.2} before the attach, {r_after:.2} after \
             the detach; same after/before {:.2}, other after/before {:.2}",
            jdk.major,
            speed(&after, 0) / speed(&before, 0),
            speed(&after, 1) / speed(&before, 1),
        );
        assert!(
            r_after >= 2.0 * r_before.min(1.0),
            "JDK {}: the loop outside the root's class runs {r_after:.2}x the one inside after \
             the detach ({r_before:.2}x before): it should be compiled again, the other not",
            jdk.major
        );
    }
}

/// A thread's `Runnable` loop running at the attach (`fixtures.PoolLoop`)
/// that a `Runnable.run` call inside the root could reach by class
/// hierarchy analysis: revelation spares it, so its class is never
/// redefined and the loop keeps its speed after the detach, while the
/// tasks the root really runs are counted; the report names the loop.
#[test]
fn a_thread_loop_a_call_could_reach_is_spared_and_keeps_its_speed() {
    for jdk in every_jdk("a thread loop spared by revelation") {
        if jdk.major == 11 {
            // Measured 2026-11-29 (Temurin 11.0.13): the first redefinition
            // after the attach makes every compiled method not entrant, and
            // a loop that never returns stays interpreted (a tenth of its
            // speed) for good: HotSpot 11 does not compile its OSR version
            // again. The guide says so (docs/guide.md, "JDK 11").
            eprintln!(
                "SKIP a thread loop spared by revelation on JDK 11: HotSpot 11 never recompiles a running loop after the attach's deoptimization"
            );
            continue;
        }
        let classes = fixture_classes(&jdk);
        let mut cmd = Command::new(jdk.java());
        cmd.arg("-cp").arg(classes.path()).arg("fixtures.PoolLoop");
        let mut jvm = Proc::spawn(&format!("pool-jdk{}", jdk.major), cmd);
        jvm.wait_for("ready", LONG, |l| l == "ready");
        let loop_rates = |jvm: &mut Proc, span: Duration| -> Vec<f64> {
            rate_fields(jvm, span, &["loop="])
                .into_iter()
                .map(|v| v[0])
                .collect()
        };
        let before = median(loop_rates(&mut jvm, Duration::from_secs(2)));
        let (report, warnings, _) = profile(&jvm, "fixtures.PoolRoot::root", "2");
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("thread loop") && w.contains("fixtures.PoolLoop::run")),
            "JDK {}: the spared loop is named: {warnings:?}",
            jdk.major
        );
        assert!(
            !warnings
                .iter()
                .any(|w| w.contains("left on an old version") && w.contains("PoolLoop")),
            "JDK {}: the loop's class was not redefined: {warnings:?}",
            jdk.major
        );
        // The tasks the root runs are counted: one call of Task.run per
        // root call. A root call the stop cut short (its exit never came:
        // `incomplete`) may have ended the session before its task began.
        let (mut roots, mut cut, mut tasks) = (0u64, 0u64, 0u64);
        for t in report["threads"].as_array().expect("threads") {
            for r in t["roots"].as_array().into_iter().flatten() {
                roots += r["calls"].as_u64().unwrap_or(0);
                cut += r["incomplete"].as_u64().unwrap_or(0);
                for c in r["children"].as_array().into_iter().flatten() {
                    if c["class"] == "fixtures.PoolRoot$Task" && c["method"] == "run" {
                        tasks += c["calls"].as_u64().unwrap_or(0);
                    }
                }
            }
        }
        assert!(roots > 100, "JDK {}: {roots} root calls", jdk.major);
        if tasks != roots {
            eprintln!(
                "JDK {}: {tasks} tasks, {roots} root calls, {cut} cut short by the stop",
                jdk.major
            );
        }
        assert!(
            tasks <= roots && tasks + cut >= roots,
            "JDK {}: every root call ran a task: {tasks} tasks, {roots} root calls of which \
             {cut} cut short by the stop",
            jdk.major
        );
        // The loop runs compiled after the detach: at least half its speed
        // before the attach (interpreted, it runs at about a tenth), given
        // the JIT up to 30 s to compile it again.
        let mut after = 0.0;
        for _ in 0..15 {
            after = median(loop_rates(&mut jvm, Duration::from_secs(2)));
            if after >= 0.5 * before {
                break;
            }
        }
        eprintln!(
            "JDK {}: spared loop after/before the session {:.2}",
            jdk.major,
            after / before.max(1.0)
        );
        assert!(
            after >= 0.5 * before,
            "JDK {}: the spared loop runs {after:.0}/ms after the detach against {before:.0}/ms \
             before",
            jdk.major
        );
    }
}
