//! Probe cost against `System.nanoTime()` in the same JVM run (release
//! build; ignored by default):
//!
//! ```text
//! cargo build --release -p sprig-agent
//! cargo test --release -p sprig-agent --test bench -- --ignored --nocapture
//! ```
//!
//! Inside the root context: an instrumented empty method (entry + exit
//! probe, two events) minus the same method uninstrumented, as a ratio to
//! one nanoTime call. Outside any root context: the plain probe pair as the
//! rewriter injects it (one volatile load and a branch each).

mod common;

use common::*;
use sprig_wire::Message;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const N: u64 = 100_000;
const ROUNDS: u64 = 40;

/// `SPRIG_BENCH_ROUNDS` overrides the round count (e.g. to profile the
/// target with perf while it runs).
fn rounds() -> u64 {
    std::env::var("SPRIG_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(ROUNDS)
}

#[test]
#[ignore = "benchmark: run in release with --ignored --nocapture"]
fn probe_cost_vs_nanotime() {
    for jdk in sprig_tests::test_jdks("probe_cost_vs_nanotime") {
        let classes = fixture_classes(&jdk);
        let mut cli = FakeCli::with_segments(1024);
        let agent = format!("-agentpath:{}={}", agent_lib().display(), cli.options());
        let mut jvm = spawn_java(&jdk, classes.path(), &[agent], "bench.Bench");
        cli.accept(jvm.pid());
        cli.start(&["bench.Bench::root", "bench.Bench::empty"]);
        cli.wait_msg("Started", Duration::from_secs(10), |m| {
            matches!(m, Message::Started { .. })
        });
        wait_ready(&mut jvm);
        let rounds = rounds();
        jvm.send(&format!("bench {N} {rounds}"));
        // Keep draining the ring while the benchmark runs.
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut results = BTreeMap::new();
        loop {
            cli.poll();
            if let Some(l) = jvm.try_wait_for(Duration::from_millis(5), |_, l| {
                l.starts_with("result ") || l == "done"
            }) {
                if l == "done" {
                    break;
                }
                let mut w = l.split_whitespace().skip(1);
                let name = w.next().unwrap().to_string();
                let v: f64 = w.next().unwrap().parse().unwrap();
                results.insert(name, v);
            }
            assert!(Instant::now() < deadline, "{}", jvm.transcript());
        }
        let stats = cli.detach();
        let counts = cli.counts();
        let main = &counts["main"];
        // One root context; every instrumented call inside it was recorded.
        assert_eq!(main.root_entry, 1);
        assert_eq!(main.method_entry, N * rounds, "{counts:?}");
        assert_eq!(main.method_exit, N * rounds);
        assert_eq!(stats.lost_events, 0);
        let adjust: u64 = main.other;
        let r = |k: &str| results[k];
        let pair = r("root_pair") - r("root_plain");
        let outside = r("outside_pair") - r("outside_plain");
        let nano = r("root_nanotime");
        println!(
            "jdk{}: nanoTime {:.2} ns | in root context: probe pair {:.2} ns = {:.3} x nanoTime | \
             outside root context: probe pair {:.3} ns = {:.4} x nanoTime | adjust-time records {}",
            jdk.major,
            nano,
            pair,
            pair / nano,
            outside,
            outside / r("outside_nanotime"),
            adjust
        );
        println!("jdk{} raw: {results:?}", jdk.major);
        jvm.send("quit");
        assert!(jvm.wait_exit(Duration::from_secs(20)).is_some());
        assert_no_verify_error(&jvm);
    }
}
