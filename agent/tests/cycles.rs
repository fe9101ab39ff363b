//! Twenty attach/detach cycles against one JVM (JDK 17 and 25): exact
//! counts every time, the bytecodes the VM holds are the originals after
//! every detach (JVMTI GetBytecodes digest), and the VM's native memory
//! (NMT) does not grow beyond a small bound.

mod common;

use common::*;
use sprig_tests::{Jdk, Proc};
use sprig_wire::Message;
use std::process::Command;
use std::time::Duration;

const CYCLES: usize = 20;
/// Allowed growth of the JVM's committed native memory between cycle 5 and
/// the last cycle.
const NATIVE_GROWTH_BOUND_KB: i64 = 8 * 1024;

/// Total committed native memory of the JVM in KB (NMT summary).
fn native_committed_kb(jdk: &Jdk, pid: u32) -> i64 {
    let out = Command::new(jdk.home.join("bin/jcmd"))
        .arg(pid.to_string())
        .arg("VM.native_memory")
        .arg("summary")
        .output()
        .expect("jcmd");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("Total:"))
        .unwrap_or_else(|| panic!("no NMT total in: {text}"));
    line.split("committed=")
        .nth(1)
        .and_then(|r| {
            r.trim_end_matches("KB")
                .split(|c: char| !c.is_ascii_digit())
                .next()
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("cannot parse {line}"))
}

fn run_cycles(jdk: &Jdk) {
    let classes = fixture_classes(jdk);
    let mut jvm: Proc = spawn_java(
        jdk,
        classes.path(),
        &["-XX:NativeMemoryTracking=summary".to_string()],
        "fixture.Roots",
    );
    wait_ready(&mut jvm);
    jvm.send("run 20000 1");
    jvm.wait_for("done", Duration::from_secs(60), |l| l == "done");

    let mut original = None;
    let mut native = Vec::new();
    // jcmd load → handshake → digest → Start → RootInstrumented, per cycle.
    let mut latency = Vec::new();
    // Handshake done → digest → Start → RootInstrumented (the agent's part).
    let mut agent_latency = Vec::new();
    for cycle in 0..CYCLES {
        let mut cli = FakeCli::new();
        let t_attach = std::time::Instant::now();
        jcmd_load(jdk, jvm.pid(), &cli.options());
        cli.accept(jvm.pid());
        let t_connected = std::time::Instant::now();
        let before = cli.digest("fixture.Roots");
        assert!(before.0 >= 5, "{before:?}");
        let original = *original.get_or_insert(before);
        assert_eq!(
            before, original,
            "cycle {cycle}: bytecodes differ from the originals"
        );
        // Every other session with `--locks`: its source's events and
        // capabilities come and go with the session.
        if cycle % 2 == 1 {
            cli.start_with_locks(&["fixture.Roots::work"]);
        } else {
            cli.start(&["fixture.Roots::work"]);
        }
        cli.wait_msg("RootInstrumented", Duration::from_secs(20), |m| {
            matches!(m, Message::RootInstrumented { methods: 1, .. })
        });
        latency.push(t_attach.elapsed().as_millis() as u64);
        agent_latency.push(t_connected.elapsed().as_micros() as u64);
        let during = cli.digest("fixture.Roots");
        assert_eq!(during.0, original.0);
        assert_ne!(
            during.1, original.1,
            "cycle {cycle}: probes not visible in GetBytecodes"
        );
        jvm.send("run 200 2");
        jvm.wait_for("done", Duration::from_secs(60), |l| l == "done");
        let stats = cli.detach();
        assert_eq!(stats.instrumented_methods, 1);
        let counts = cli.counts();
        assert_eq!(counts.len(), 2, "cycle {cycle}: {counts:#?}");
        for c in counts.values() {
            assert_eq!((c.root_entry, c.root_exit), (200, 200), "cycle {cycle}");
        }
        cli.assert_balanced();
        native.push(native_committed_kb(jdk, jvm.pid()));
    }
    // One more session only to read the digest after the last detach.
    let mut cli = FakeCli::new();
    jcmd_load(jdk, jvm.pid(), &cli.options());
    cli.accept(jvm.pid());
    assert_eq!(Some(cli.digest("fixture.Roots")), original);
    cli.detach();

    let growth = native[CYCLES - 1] - native[4];
    latency.sort_unstable();
    agent_latency.sort_unstable();
    eprintln!(
        "jdk{}: connected to probes live: median {} us, max {} us",
        jdk.major,
        agent_latency[agent_latency.len() / 2],
        agent_latency[agent_latency.len() - 1]
    );
    eprintln!(
        "jdk{}: attach to probes live (incl. jcmd start-up): median {} ms, max {} ms",
        jdk.major,
        latency[latency.len() / 2],
        latency[latency.len() - 1]
    );
    eprintln!(
        "jdk{}: native committed KB per cycle: {native:?}; growth cycle 5..{CYCLES}: {growth} KB",
        jdk.major
    );
    assert!(
        growth < NATIVE_GROWTH_BOUND_KB,
        "native memory grew {growth} KB over {} cycles: {native:?}",
        CYCLES - 5
    );
    jvm.send("quit");
    jvm.wait_for("bye", Duration::from_secs(30), |l| l == "bye");
    assert_no_verify_error(&jvm);
}

// One test per JDK, so that the two run side by side.
#[test]
fn twenty_cycles_restore_originals_jdk17() {
    run_cycles(&sprig_tests::jdk17());
}

#[test]
fn twenty_cycles_restore_originals_jdk25() {
    if let Some(jdk) = sprig_tests::jdk25("twenty_cycles_restore_originals") {
        run_cycles(&jdk);
    }
}
