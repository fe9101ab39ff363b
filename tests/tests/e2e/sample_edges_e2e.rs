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

use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use sprig_tests::{Jdk, Proc, fixture_classes, run_sprig, test_jdks};

const CLASS: &str = "fixtures.Edges";

fn start_edges(jdk: &Jdk, classes: &std::path::Path) -> Proc {
    let mut cmd = Command::new(jdk.java());
    cmd.arg("-Xlog:redefine+class*=info")
        .arg("-cp")
        .arg(classes)
        .arg(CLASS);
    let mut p = Proc::spawn(&format!("edges-jdk{}", jdk.major), cmd);
    p.wait_for("ready", Duration::from_secs(30), |l| l == "ready");
    p
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
            "--format",
            "json",
            "--quiet",
        ];
        let (code, out, err) = run_sprig(&args, Duration::from_secs(60));
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
