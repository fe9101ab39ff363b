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
//! calls of `a` (asked before and after the session), with `spin` at
//! 2,000 xorshift steps (calls about a microsecond of CPU time apart): the
//! estimated calls of `loop -> a` a second within a factor of 2, and the
//! calls at and below the suggested root `a` (9 per call of `a`: `a`, 3
//! `b`, `c`, 4 `spin`) within a factor of 2. (Calls 70 ns apart are
//! estimated about 6 times low: the probe's own path between two entries,
//! about 0.4 µs, is in every interval the rate rests on;
//! docs/stack-sampling.md.) Then `sprig profile` of that root with
//! `--timing exact`: what it costs, from the fixture's calls of `a` a
//! second while profiled against those while sampled, and the
//! suggestion's predicted `exact_pct`, loosely: the prediction at least
//! 1% (the wall-time estimate this replaces predicted about 0.06%) and at
//! most 3 times the measured cost plus 10 points. Only loosely: the
//! measured cost is a 1.5-second window against a 3-second one on a host
//! that other tests load (a second's rate moved by 20-50% there), and on
//! JDK 17 it holds the JIT compiling again after the first redefinition
//! threw all compiled code away (25% measured against 2.5% predicted in
//! one run).

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use sprig_tests::{Jdk, Proc, TempDir, fixture_classes, run_sprig, start_sprig, test_jdks};

const CLASS: &str = "fixtures.Edges";

fn start_edges(jdk: &Jdk, classes: &std::path::Path) -> Proc {
    let mut cmd = Command::new(jdk.java());
    cmd.arg("-Xlog:redefine+class*=info")
        .arg("-Dedges.spin=2000")
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
            "0.5",
            "--duration",
            "3",
            "--interval",
            "5",
            "--suggest-roots",
            "3",
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
        // Seen 0.66-1.11 of the count alone, 0.42 on JDK 25 beside
        // another e2e test (the burst's entries wait for a core while
        // their CPU clocks stand still): within 3x (the old wall-time
        // estimate was 127x low).
        assert!(
            within(loop_a, counted, 3.0),
            "JDK {}: loop -> a estimated at {loop_a:.0} calls/s, counted {counted:.0}: not within 3x: {edges}",
            jdk.major
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
        assert_eq!(predicted["estimate"], true, "JDK {}: {root}", jdk.major);
        let under = predicted["calls_per_s_est"].as_f64().unwrap_or(0.0);
        assert!(
            within(under, 9.0 * counted, 3.0),
            "JDK {}: calls at and below a estimated at {under:.0}/s, counted {:.0}: not within 3x: {root}",
            jdk.major,
            9.0 * counted
        );
        let exact_pct = predicted["exact_pct"].as_f64().unwrap_or(0.0);

        // What profiling the root costs, by the fixture's own rate.
        let dir = TempDir::new("edges-cost");
        let mut sprig = start_sprig(
            jvm.pid(),
            &[
                "--root",
                &format!("{CLASS}::a"),
                "--timing",
                "exact",
                "--duration",
                "3",
                "--quiet",
            ],
            &dir.path().join("p.json"),
        );
        println!(
            "JDK {}: profiling at {:.1} s",
            jdk.major,
            t0.elapsed().as_secs_f64()
        );
        // Past the first calls' revelation and the JIT's recompiles.
        std::thread::sleep(Duration::from_millis(500));
        let p0 = calls(&mut jvm);
        std::thread::sleep(Duration::from_millis(1500));
        let p1 = calls(&mut jvm);
        assert!(
            sprig.wait_exit(Duration::from_secs(60)).is_some(),
            "JDK {}: sprig profile did not end",
            jdk.major
        );
        let profiled = rate(p0, p1);
        println!(
            "JDK {}: profiled at {:.1} s",
            jdk.major,
            t0.elapsed().as_secs_f64()
        );
        let measured_pct = 100.0 * (counted / profiled.max(1.0) - 1.0);
        println!(
            "JDK {}: profiling a: {profiled:.0} calls of a/s against {counted:.0}: {measured_pct:.0}% measured, {exact_pct:.0}% predicted",
            jdk.major
        );
        assert!(
            exact_pct >= 1.0 && exact_pct <= 3.0 * measured_pct.max(0.0) + 10.0,
            "JDK {}: predicted {exact_pct:.1}% for --timing exact, measured {measured_pct:.1}%: not at least 1% and at most 3x + 10 points: {root}",
            jdk.major
        );

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
