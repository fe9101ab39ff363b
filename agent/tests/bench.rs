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
        // One root context for `root`, one per `empty` call outside it;
        // every instrumented call inside the root context was recorded.
        assert_eq!(main.root_entry, 1 + N * rounds);
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
             outside root context: probe pair {:.3} ns = {:.4} x nanoTime | \
             a root call opening its own context {:.2} ns = {:.3} x nanoTime | adjust-time records {}",
            jdk.major,
            nano,
            pair,
            pair / nano,
            outside,
            outside / r("outside_nanotime"),
            r("outside_root_call") - r("outside_plain"),
            (r("outside_root_call") - r("outside_plain")) / r("outside_nanotime"),
            adjust
        );
        println!("jdk{} raw: {results:?}", jdk.major);
        // `Probe.active` went back to 0 after the root contexts closed:
        // plain probes outside them never reach the native side.
        assert!(
            outside < 0.25 * r("outside_nanotime"),
            "outside pair {outside} ns: Probe.active stayed set?"
        );
        jvm.send("quit");
        assert!(jvm.wait_exit(Duration::from_secs(20)).is_some());
        assert_no_verify_error(&jvm);
    }
}

/// Runs `tput WINDOWS MS` and returns calls per window, draining the ring
/// of `cli` (if any) meanwhile.
fn tput(jvm: &mut sprig_tests::Proc, mut cli: Option<&mut FakeCli>, windows: u32) -> Vec<u64> {
    jvm.send(&format!("tput {windows} 100"));
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut out = Vec::new();
    loop {
        if let Some(c) = cli.as_deref_mut() {
            c.poll();
        }
        if let Some(l) = jvm.try_wait_for(Duration::from_millis(5), |_, l| {
            l.starts_with("tput ") || l == "done"
        }) {
            if l == "done" {
                return out;
            }
            out.push(l.split_whitespace().nth(2).unwrap().parse().unwrap());
        }
        assert!(Instant::now() < deadline, "{}", jvm.transcript());
    }
}

fn median(v: &[u64]) -> u64 {
    let mut v = v.to_vec();
    v.sort_unstable();
    v[v.len() / 2]
}

/// Throughput of a root-heavy loop before attach, while profiling, and
/// after detach (with how many 100 ms windows the re-warm takes).
#[test]
#[ignore = "benchmark: run in release with --ignored --nocapture"]
fn throughput_before_during_after() {
    for jdk in sprig_tests::test_jdks("throughput_before_during_after") {
        let classes = fixture_classes(&jdk);
        let mut jvm = spawn_java(&jdk, classes.path(), &[], "bench.Bench");
        wait_ready(&mut jvm);
        tput(&mut jvm, None, 30);
        let before = median(&tput(&mut jvm, None, 20));

        let mut cli = FakeCli::with_segments(1024);
        jcmd_load(&jdk, jvm.pid(), &cli.options());
        cli.accept(jvm.pid());
        cli.start(&["bench.Bench::work"]);
        cli.wait_msg("RootInstrumented", Duration::from_secs(20), |m| {
            matches!(m, Message::RootInstrumented { .. })
        });
        let during_w = tput(&mut jvm, Some(&mut cli), 20);
        let during = median(&during_w[10..]);
        let stats = cli.detach();
        let roots: u64 = cli.counts().values().map(|c| c.root_entry).sum();
        assert!(roots > 0 && stats.lost_events == 0, "{stats:?}");

        let after_w = tput(&mut jvm, None, 60);
        let after = median(&after_w[30..]);
        let rewarm = after_w
            .iter()
            .position(|&c| c * 100 >= before * 98)
            .map(|w| format!("{} ms", (w + 1) * 100))
            .unwrap_or_else(|| "not within 6 s".into());
        println!(
            "jdk{}: calls/100ms before {before}, profiling {during} ({:.1}%), after detach {after} \
             ({:.1}% of before); back to >= 98% after {rewarm}; {roots} root calls recorded",
            jdk.major,
            during as f64 * 100.0 / before as f64,
            after as f64 * 100.0 / before as f64
        );
        println!("jdk{} after-detach windows: {after_w:?}", jdk.major);
        jvm.send("quit");
        assert!(jvm.wait_exit(Duration::from_secs(20)).is_some());
        assert_no_verify_error(&jvm);
    }
}
