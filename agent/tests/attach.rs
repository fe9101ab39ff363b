//! Dynamic attach with `jcmd <pid> JVMTI.agent_load` (no sprig attach
//! code): exact counts, nested roots, restore to the original bytecodes,
//! re-attach cycles, the CLI disappearing, and refusing a second profiling session.

mod common;

use common::*;
use sprig_tests::Jdk;
use sprig_wire::Message;
use std::time::{Duration, Instant};

/// One attach → profile → detach cycle against a running fixture JVM;
/// returns the CLI with its messages and events.
fn cycle(jdk: &Jdk, jvm: &mut sprig_tests::Proc, roots: &[&str], cmd: &str) -> FakeCli {
    let mut cli = FakeCli::new();
    jcmd_load(jdk, jvm.pid(), &cli.options());
    cli.accept(jvm.pid());
    cli.start(roots);
    cli.wait_msg("RootInstrumented", Duration::from_secs(20), |m| {
        matches!(m, Message::RootInstrumented { .. })
    });
    jvm.send(cmd);
    jvm.wait_for("done", Duration::from_secs(60), |l| l == "done");
    cli.detach();
    cli
}

fn check_flat(cli: &FakeCli, threads: usize, calls: u64) {
    let counts = cli.counts();
    assert_eq!(counts.len(), threads, "{counts:#?}");
    for (name, c) in &counts {
        assert!(name.starts_with("worker-"), "{counts:#?}");
        assert_eq!(c.root_entry, calls, "{name}: {counts:#?}");
        assert_eq!(c.root_exit, calls, "{name}: {counts:#?}");
        assert_eq!(c.method_entry + c.method_exit, 0);
    }
    cli.assert_balanced();
}

#[test]
fn jcmd_attach_counts_and_nested_roots() {
    for jdk in sprig_tests::every_jdk("jcmd_attach_counts_and_nested_roots") {
        let classes = fixture_classes(&jdk);
        let mut jvm = spawn_java(&jdk, classes.path(), &[], "fixture.Roots");
        wait_ready(&mut jvm);
        // Warm the code up before attaching (compiled frames get deoptimised).
        jvm.send("run 20000 1");
        jvm.wait_for("done", Duration::from_secs(60), |l| l == "done");

        let cli = cycle(&jdk, &mut jvm, &["fixture.Roots::work"], "run 700 2");
        check_flat(&cli, 2, 700);

        // `outer` and `work` are both roots: an outer call is one RootEntry
        // with two nested entries (one of them throws, caught by `outer`).
        let cli = cycle(
            &jdk,
            &mut jvm,
            &["fixture.Roots::outer", "fixture.Roots::work"],
            "nested 300 2",
        );
        let counts = cli.counts();
        assert_eq!(counts.len(), 2, "{counts:#?}");
        for c in counts.values() {
            assert_eq!(c.root_entry, 300);
            assert_eq!(c.root_exit, 300);
            assert_eq!(c.method_entry, 600);
            assert_eq!(c.method_exit, 600);
        }
        cli.assert_balanced();
        let rooted: Vec<_> = cli
            .msgs
            .iter()
            .filter(|m| matches!(m, Message::RootInstrumented { .. }))
            .collect();
        assert_eq!(rooted.len(), 2, "{rooted:?}");

        jvm.send("quit");
        jvm.wait_for("bye", Duration::from_secs(30), |l| l == "bye");
        assert_no_verify_error(&jvm);
    }
}

#[test]
fn root_not_found_lists_near_matches() {
    let jdk = sprig_tests::jdk17();
    let classes = fixture_classes(&jdk);
    let mut jvm = spawn_java(&jdk, classes.path(), &[], "fixture.Roots");
    wait_ready(&mut jvm);
    let mut cli = FakeCli::new();
    jcmd_load(&jdk, jvm.pid(), &cli.options());
    cli.accept(jvm.pid());
    cli.start(&["fixture.Roots::wrok", "fixture.Rotos::work"]);
    let mut seen = Vec::new();
    for _ in 0..2 {
        let m = cli.wait_msg("RootNotFound", Duration::from_secs(20), |m| {
            matches!(m, Message::RootNotFound { .. })
        });
        seen.push(m);
    }
    let by = |p: &str| {
        seen.iter()
            .find_map(|m| match m {
                Message::RootNotFound {
                    pattern,
                    class_loaded,
                    suggestions,
                } if pattern == p => Some((*class_loaded, suggestions.clone())),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no RootNotFound for {p}: {seen:?}"))
    };
    let (loaded, s) = by("fixture.Roots::wrok");
    assert!(loaded);
    assert_eq!(
        s.first().map(String::as_str),
        Some("fixture.Roots::work"),
        "{s:?}"
    );
    let (loaded, s) = by("fixture.Rotos::work");
    assert!(!loaded);
    assert!(s.contains(&"fixture.Roots::work".to_string()), "{s:?}");
    let stats = cli.detach();
    assert_eq!(stats.instrumented_methods, 0);
}

#[test]
fn a_second_profiling_session_is_refused_and_cli_death_detaches() {
    let jdk = sprig_tests::jdk17();
    let classes = fixture_classes(&jdk);
    let mut jvm = spawn_java(&jdk, classes.path(), &[], "fixture.Roots");
    wait_ready(&mut jvm);
    let mut cli = FakeCli::new();
    jcmd_load(&jdk, jvm.pid(), &cli.options());
    cli.accept(jvm.pid());
    let original = digest(&mut cli, "fixture.Roots");
    cli.start(&["fixture.Roots::work"]);
    cli.wait_msg("RootInstrumented", Duration::from_secs(20), |m| {
        matches!(m, Message::RootInstrumented { .. })
    });

    // A second load while the session runs: refused over its control
    // socket with one line naming the session that runs.
    let mut other = FakeCli::new();
    let text = jcmd_load(&jdk, jvm.pid(), &other.options());
    assert!(text.contains("return code: 0"), "jcmd said: {text}");
    other.accept(jvm.pid());
    other.start(&["fixture.Roots::work"]);
    let refused = other.wait_msg("Error", Duration::from_secs(10), |m| {
        matches!(m, Message::Error(_) | Message::Started { .. })
    });
    let pid = format!("sprig pid {}", std::process::id());
    assert!(
        matches!(&refused, Message::Error(why) if why.contains("already running") && why.contains(&pid)),
        "{refused:?}"
    );

    // The CLI vanishes (socket closed): the agent detaches by itself and a
    // new session works right after.
    let t0 = Instant::now();
    drop(cli);
    let mut next = loop {
        // The agent refuses while the old session is still detaching.
        let mut next = FakeCli::new();
        jcmd_load(&jdk, jvm.pid(), &next.options());
        next.accept(jvm.pid());
        let original_now = digest(&mut next, "fixture.Roots");
        next.start(&["fixture.Roots::work"]);
        let m = next.wait_msg("RootInstrumented", Duration::from_secs(20), |m| {
            matches!(m, Message::RootInstrumented { .. } | Message::Error(_))
        });
        if matches!(m, Message::RootInstrumented { .. }) {
            // Restored before this session began.
            assert_eq!(original_now, original);
            break next;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(2),
            "no detach within 2 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    jvm.send("run 50 1");
    jvm.wait_for("done", Duration::from_secs(30), |l| l == "done");
    next.detach();
    check_flat(&next, 1, 50);
}

fn digest(cli: &mut FakeCli, class: &str) -> (u32, u64) {
    cli.send(&Message::BytecodeDigest {
        class: class.to_string(),
    });
    match cli.wait_msg("Digest", Duration::from_secs(10), |m| {
        matches!(m, Message::Digest { .. })
    }) {
        Message::Digest {
            methods, digest, ..
        } => (methods, digest),
        _ => unreachable!(),
    }
}

#[test]
fn abandoned_ring_detaches_and_restores() {
    let jdk = sprig_tests::jdk17();
    let classes = fixture_classes(&jdk);
    let mut jvm = spawn_java(&jdk, classes.path(), &[], "fixture.Roots");
    wait_ready(&mut jvm);
    let mut cli = FakeCli::new();
    jcmd_load(&jdk, jvm.pid(), &cli.options());
    cli.accept(jvm.pid());
    let original = digest(&mut cli, "fixture.Roots");
    cli.start(&["fixture.Roots::work"]);
    cli.wait_msg("RootInstrumented", Duration::from_secs(20), |m| {
        matches!(m, Message::RootInstrumented { .. })
    });
    // The consumer says it is gone: the next probe that needs a segment
    // finds the ring dead and the agent detaches on its own.
    cli.region.mark_consumer_gone();
    jvm.send("run 100 1");
    jvm.wait_for("done", Duration::from_secs(30), |l| l == "done");
    let t0 = Instant::now();
    cli.wait_msg(
        "ring warning",
        Duration::from_secs(5),
        |m| matches!(m, Message::Warning(w) if w.contains("ring")),
    );
    cli.wait_msg("Detached", Duration::from_secs(5), |m| {
        matches!(m, Message::Detached(_))
    });
    assert!(t0.elapsed() < Duration::from_secs(2));
    // Restored: a new session sees the original bytecodes.
    let mut next = FakeCli::new();
    jcmd_load(&jdk, jvm.pid(), &next.options());
    next.accept(jvm.pid());
    assert_eq!(digest(&mut next, "fixture.Roots"), original);
    next.detach();
}

#[test]
fn vm_exit_mid_profile_is_reported() {
    let jdk = sprig_tests::jdk17();
    let classes = fixture_classes(&jdk);
    let mut jvm = spawn_java(&jdk, classes.path(), &[], "fixture.Roots");
    wait_ready(&mut jvm);
    let mut cli = FakeCli::new();
    jcmd_load(&jdk, jvm.pid(), &cli.options());
    cli.accept(jvm.pid());
    cli.start(&["fixture.Roots::work"]);
    cli.wait_msg("RootInstrumented", Duration::from_secs(20), |m| {
        matches!(m, Message::RootInstrumented { .. })
    });
    jvm.send("run 100 1");
    jvm.wait_for("done", Duration::from_secs(30), |l| l == "done");
    jvm.send("quit");
    cli.wait_msg(
        "VM exit error",
        Duration::from_secs(10),
        |m| matches!(m, Message::Warning(e) if e.contains("exiting")),
    );
    let status = jvm.wait_exit(Duration::from_secs(10)).expect("JVM exits");
    assert!(status.success(), "{}", jvm.transcript());
    check_flat(&cli, 1, 100);
}

#[test]
fn a_frame_inside_the_root_at_detach_finishes_silently() {
    let jdk = sprig_tests::jdk17();
    let classes = fixture_classes(&jdk);
    let mut jvm = spawn_java(&jdk, classes.path(), &[], "fixture.Roots");
    wait_ready(&mut jvm);
    let mut cli = FakeCli::new();
    jcmd_load(&jdk, jvm.pid(), &cli.options());
    cli.accept(jvm.pid());
    cli.start(&["fixture.Roots::sleepy", "fixture.Roots::work"]);
    cli.wait_msg(
        "RootInstrumented",
        Duration::from_secs(20),
        |m| matches!(m, Message::RootInstrumented { pattern, .. } if pattern.ends_with("sleepy")),
    );
    jvm.send("slow 1500");
    jvm.wait_for("in-root", Duration::from_secs(10), |l| l == "in-root");
    // Detach (restore, retire the ring) while the frame is inside the root.
    cli.detach();
    let counts = cli.counts();
    assert_eq!(counts["slow"].root_entry, 1);
    assert_eq!(counts["slow"].root_exit, 0);
    // The old instrumented frame calls work() and its exit probes after the
    // ring was retired: nothing is recorded, nothing breaks.
    jvm.wait_for("out-root", Duration::from_secs(10), |l| l == "out-root");
    assert!(
        jvm.wait_exit(Duration::from_millis(100)).is_none(),
        "JVM died"
    );
    // ...and a new session is exact again.
    let next = cycle(&jdk, &mut jvm, &["fixture.Roots::work"], "run 70 1");
    check_flat(&next, 1, 70);
    assert_no_verify_error(&jvm);
}
