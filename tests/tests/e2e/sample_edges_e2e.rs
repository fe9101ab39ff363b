//! `sprig sample --edges` on real JVMs (JDK 17, and JDK 25 where
//! installed), on `fixtures.Edges`: a worker whose `a` calls `b` three
//! times and `c` once, and each of those calls `spin` once. The call-edge
//! bursts find `a -> b` and `a -> c`, and `b -> spin` and `c -> spin`, in
//! shares within 5 points of 3:1; the fixture's classes were redefined for
//! the bursts, and the JVM runs on. (That the classes' bytes are the
//! original ones after the session is checked with the agent's digest in
//! `agent/tests/stacks.rs`; that a session without `--edges` redefines
//! nothing in `sample_e2e.rs`.)
//!
//! The bound: a burst samples 32 consecutive method entries of the
//! worker, about 4 calls of `a` (8 entries each with `spin`), so a burst's
//! count of `a -> b` against `a -> c` is off from 3:1 by at most the one
//! call of `a` its ends cut; the bursts start at phases of the loop that do
//! not repeat, and over the hundreds of bursts of a 3-second session the
//! share's error is about 1 point (a binomial bound over the bursts as if
//! each gave one edge, 200 of them, is 3 points at 1 sigma; 5 points
//! leaves room for a burst cut by a deoptimisation or a loaded host).
//!
//! The same run checks the rates against the fixture's own count of its
//! calls of `a` (asked before and after the session), with `spin` at 200
//! xorshift steps (calls a few hundred nanoseconds of CPU time apart,
//! closer than the bursts' own path between two entries): the estimated
//! calls of `loop -> a` a second, and the calls at and below the
//! suggested root `a` (9 per call of `a`: `a`, 3 `b`, `c`, 4 `spin`),
//! within a factor of 1.5. The rates rest on the counting windows (the
//! probes count entries in Java; seen 1.04-1.11 of the count on JDK 17
//! and 25, 2026-11-30); before them they rested on the bursts' intervals
//! less a calibrated path, which read 0.82-1.29 on one host and 0.49-0.67
//! on another (docs/stack-sampling.md). Then `sprig profile` of that root,
//! `--timing exact` and then `--timing sampled`: what each costs by sprig
//! profile's own measure (its root's median latency while recording over
//! that of the silent calls after the session, the report's
//! `cost.ratio`), against the suggestion's predicted `exact_pct` and
//! `sampled_pct` (the exact pair calibrated in this JVM before the
//! sample): within 2x, or within 8 points (sampled timing costs 1-3%,
//! less than what two medians seconds apart move on a loaded host; exact
//! timing came within 0.62-1.65 of it: the measure itself reads 12-36%
//! from one session to the next). The fixture's throughput while profiled is printed,
//! not asserted: on 2 loaded cores the profiling CLI's own reading of
//! every event comes out of it (59-185% seen under `--timing exact`,
//! against 14-22% by the latencies; docs/stack-sampling.md). `--edges-after
//! 0.1`: before the first redefinition C2 inlines `a`, `b` and `spin`
//! into `loop` and the stack samples show `loop` alone, so `a` holds a
//! steady share only when the bursts begin at once.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use sprig_tests::{Jdk, Proc, TempDir, fixture_classes, run_sprig, start_sprig, test_jdks};

const CLASS: &str = "fixtures.Edges";
/// xorshift steps per call of `spin`: calls a few hundred nanoseconds of
/// CPU time apart, where the probe's own path is most of what a burst's
/// interval holds unless it is taken out.
const SPIN: u32 = 200;
/// How far the estimated rates may be from the fixture's count (module
/// docs).
const RATE_FACTOR: f64 = 1.5;

fn start_edges(jdk: &Jdk, classes: &std::path::Path) -> Proc {
    let mut cmd = Command::new(jdk.java());
    cmd.arg("-Xlog:redefine+class*=info")
        .arg(format!("-Dedges.spin={SPIN}"))
        .arg("-cp")
        .arg(classes)
        .arg(CLASS);
    let mut p = Proc::spawn(&format!("edges-jdk{}", jdk.major), cmd);
    p.wait_for("ready", Duration::from_secs(30), |l| l == "ready");
    p
}

/// The fixture's count of its calls of `a` so far, and when it said it.
fn calls(jvm: &mut Proc) -> (u64, Instant) {
    jvm.send("ping");
    let l = jvm.wait_for("pong", Duration::from_secs(10), |l| l.starts_with("pong "));
    let n = l["pong ".len()..].trim().parse().expect("pong N");
    (n, Instant::now())
}

/// Calls of `a` a second between two counts.
fn rate(a: (u64, Instant), b: (u64, Instant)) -> f64 {
    b.0.saturating_sub(a.0) as f64 / b.1.duration_since(a.1).as_secs_f64()
}

/// Whether `x` is within a factor of `f` of `truth`.
fn within(x: f64, truth: f64, f: f64) -> bool {
    x >= truth / f && x <= truth * f
}

/// The sampled entries of the edge `caller -> callee` (methods of the
/// fixture) in the report's `edges`.
fn edge(report: &Value, caller: &str, callee: &str) -> u64 {
    report["edges"]["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .find(|e| {
            e["caller"] == format!("{CLASS}::{caller}")
                && e["callee"] == format!("{CLASS}::{callee}")
        })
        .map_or(0, |e| e["samples"].as_u64().unwrap())
}

/// `sprig profile --root a --timing <timing>` for 2.5 s: the report's
/// `cost` (its root's median latency recording and with the probes silent
/// after the session), and the fixture's calls of `a` a second while it
/// ran (over 1.5 s, 0.7 s after it started: past the attach, the
/// redefinition and the JIT's first recompiles).
fn profiled_cost(jdk: &Jdk, jvm: &mut Proc, timing: &str) -> (Value, f64) {
    let dir = TempDir::new("edges-cost");
    let out = dir.path().join("p.json");
    let mut sprig = start_sprig(
        jvm.pid(),
        &[
            "--root",
            &format!("{CLASS}::a"),
            "--timing",
            timing,
            "--duration",
            "2.5",
            "--format",
            "json",
            "--quiet",
        ],
        &out,
    );
    std::thread::sleep(Duration::from_millis(700));
    let p0 = calls(jvm);
    std::thread::sleep(Duration::from_millis(1500));
    let profiled = rate(p0, calls(jvm));
    assert!(
        sprig.wait_exit(Duration::from_secs(60)).is_some(),
        "JDK {}: sprig profile --timing {timing} did not end",
        jdk.major
    );
    let text = std::fs::read_to_string(&out)
        .unwrap_or_else(|e| panic!("JDK {}: {}: {e}", jdk.major, out.display()));
    let report: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("JDK {}: not JSON ({e}): {text}", jdk.major));
    (report["cost"].clone(), profiled)
}

#[test]
fn sample_edges_finds_known_call_shares_and_puts_the_classes_back() {
    for jdk in test_jdks("sample_edges_finds_known_call_shares_and_puts_the_classes_back") {
        let t0 = Instant::now();
        let classes = fixture_classes(&jdk);
        let mut jvm = start_edges(&jdk, classes.path());
        let pid = jvm.pid().to_string();
        let args = [
            "sample",
            &pid,
            "--edges",
            "--edges-after",
            "0.1",
            "--duration",
            "3",
            // Under the kernel's 4 ms tick: each sample then stands for a
            // tick of CPU time, and the CPU time under `a` (which the
            // predicted overhead divides by) comes out right only if the
            // samples weigh that (at the interval it was half).
            "--interval",
            "2",
            // a is on every stack of the worker (`loop` calls it back to
            // back): a loop by sampling, ranked after b, c and spin.
            "--suggest-roots",
            "5",
            "--format",
            "json",
            "--quiet",
        ];
        let before = calls(&mut jvm);
        let (code, out, err) = run_sprig(&args, Duration::from_secs(60));
        let after = calls(&mut jvm);
        println!(
            "JDK {}: sampled at {:.1} s",
            jdk.major,
            t0.elapsed().as_secs_f64()
        );
        let counted = rate(before, after);
        assert_eq!(code, 0, "JDK {}: sprig {args:?}: {err}", jdk.major);
        let report: Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}\n{err}"));
        let edges = &report["edges"];
        assert!(
            edges["methods"].as_u64().unwrap() >= 5,
            "JDK {}: the fixture's methods did not get probes: {edges}",
            jdk.major
        );
        let (ab, ac) = (edge(&report, "a", "b"), edge(&report, "a", "c"));
        let (bs, cs) = (edge(&report, "b", "spin"), edge(&report, "c", "spin"));
        println!(
            "JDK {}: {} bursts, {} samples; a->b {ab}, a->c {ac}, b->spin {bs}, c->spin {cs}",
            jdk.major, edges["bursts"], edges["samples"]
        );
        for (name, x, y) in [
            ("a -> b : a -> c", ab, ac),
            ("b -> spin : c -> spin", bs, cs),
        ] {
            assert!(
                x + y >= 200,
                "JDK {}: {name}: only {} samples: {edges}",
                jdk.major,
                x + y
            );
            let share = x as f64 / (x + y) as f64;
            assert!(
                (share - 0.75).abs() <= 0.05,
                "JDK {}: {name} = {x} : {y}, a share of {share:.3}, not 0.75 within 5 points: {edges}",
                jdk.major
            );
        }
        // The worker spins on a core of its own: about one CPU second a
        // second in the samples (read 0.96-0.98 at --interval 5). At
        // --interval 2, under the tick, a sample weighed at the interval
        // gave half of it, and twice the predicted overhead.
        let app_cpu = edges["app_cpu_per_s"].as_f64().unwrap_or(0.0);
        println!("JDK {}: app CPU {app_cpu:.3} s a second", jdk.major);
        assert!(
            (0.65..=1.3).contains(&app_cpu),
            "JDK {}: the samples hold {app_cpu:.3} CPU seconds a second of a worker that spins: {edges}",
            jdk.major
        );
        // The counting windows ran: the rates rest on them.
        assert!(
            edges["counted"].as_u64().unwrap_or(0) > 0
                && edges["counted_ms"].as_f64().unwrap_or(0.0) > 0.0,
            "JDK {}: no counting window: {edges}",
            jdk.major
        );
        // Every estimated rate is positive and the edges' rates keep their
        // samples' ratio.
        for e in edges["edges"].as_array().unwrap() {
            assert!(e["calls_per_s_est"].as_f64().unwrap() > 0.0, "{e}");
        }

        // The rates against the fixture's own count.
        let loop_a = edges["edges"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| {
                e["caller"] == format!("{CLASS}::loop") && e["callee"] == format!("{CLASS}::a")
            })
            .map_or(0.0, |e| e["calls_per_s_est"].as_f64().unwrap());
        println!(
            "JDK {}: calls of a a second: {counted:.0} counted, {loop_a:.0} estimated",
            jdk.major
        );
        assert!(
            within(loop_a, counted, RATE_FACTOR),
            "JDK {}: loop -> a estimated at {loop_a:.0} calls/s, counted {counted:.0} (ratio {:.2}): \
             not within {RATE_FACTOR}x: {edges}",
            jdk.major,
            loop_a / counted
        );
        let root = report["suggested_roots"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["root"] == format!("{CLASS}::a"))
            .unwrap_or_else(|| {
                panic!(
                    "JDK {}: a is not suggested: {}",
                    jdk.major, report["suggested_roots"]
                )
            })
            .clone();
        let predicted = &root["predicted_overhead"];
        assert_eq!(predicted["basis"], "edges", "JDK {}: {root}", jdk.major);
        assert_eq!(
            predicted["pair_source"], "calibration",
            "JDK {}: the exact pair was not calibrated in this JVM: {root}",
            jdk.major
        );
        assert_eq!(predicted["estimate"], true, "JDK {}: {root}", jdk.major);
        let under = predicted["calls_per_s_est"].as_f64().unwrap_or(0.0);
        assert!(
            within(under, 9.0 * counted, RATE_FACTOR),
            "JDK {}: calls at and below a estimated at {under:.0}/s, counted {:.0}: not within {RATE_FACTOR}x: {root}",
            jdk.major,
            9.0 * counted
        );
        let exact_pct = predicted["exact_pct"].as_f64().unwrap_or(0.0);
        let sampled_pct = predicted["sampled_pct"].as_f64().unwrap_or(0.0);

        // What profiling the root costs: sprig profile's own measure (the
        // root's median latency while recording over that of the silent
        // root calls after the session), the prediction within 2x of it;
        // and, printed, the fixture's throughput while profiled against
        // its rate while sampled.
        for (timing, pct) in [("exact", exact_pct), ("sampled", sampled_pct)] {
            // Two medians of windows seconds apart move by 4 points or more
            // on a loaded host: sampled timing's 1.5-4% predicted read
            // between -4.4% and +3.5% measured (8.4 points apart on the CI
            // host), below what the medians resolve. Within 2x, or within 8
            // points for exact timing and 12 for sampled timing. A loaded
            // host once read one measure 2.3x off (JDK 25, exact: 44.7%
            // predicted, 19.4% measured, where five runs had read 0.58-1.46):
            // a measure outside the bound is taken again, up to three times
            // (the measure itself is bimodal on some hosts: 14-16% or 28-36%
            // under exact timing, run to run, 2026-11-30, and one run in
            // about eight read both of two measures outside); the defect
            // this guards (predictions 2-8x off) fails all three.
            let points = if timing == "exact" { 8.0 } else { 12.0 };
            for attempt in 1..=3 {
                let (cost, profiled) = profiled_cost(&jdk, &mut jvm, timing);
                let ratio = cost["ratio"].as_f64().unwrap_or_else(|| {
                    panic!(
                        "JDK {}: --timing {timing}: no cost measured: {cost}",
                        jdk.major
                    )
                });
                let measured_pct = 100.0 * (ratio - 1.0);
                println!(
                    "JDK {}: --timing {timing} (measure {attempt}): {measured_pct:.1}% measured (p50 {} ns recording, {} ns silent), \
                     {pct:.1}% predicted (ratio {:.2}); throughput {profiled:.0} calls of a/s against \
                     {counted:.0} sampled ({:.1}%) at {:.1} s",
                    jdk.major,
                    cost["recorded_p50_ns"],
                    cost["silent_p50_ns"],
                    pct / measured_pct,
                    100.0 * (counted / profiled.max(1.0) - 1.0),
                    t0.elapsed().as_secs_f64()
                );
                let held = within(pct, measured_pct, 2.0) || (pct - measured_pct).abs() <= points;
                if held {
                    break;
                }
                assert!(
                    attempt < 3,
                    "JDK {}: predicted {pct:.1}% for --timing {timing}, measured {measured_pct:.1}% \
                     (a third measure): not within 2x or {points} points: {root}\n{cost}",
                    jdk.major
                );
            }
        }

        // The JVM runs on; the fixture's class was redefined (the probes,
        // then the restore).
        jvm.send("ping");
        jvm.wait_for("pong", Duration::from_secs(10), |l| l.starts_with("pong "));
        let log = jvm.stdout();
        assert!(
            log.lines()
                .filter(|l| l.contains("redefine,class") && l.contains(CLASS))
                .count()
                >= 2,
            "JDK {}: no redefinition of {CLASS} logged:\n{log}",
            jdk.major
        );
    }
}
