//! Startup mode (`-agentpath`): exact root counts across threads, with
//! exceptions thrown out of the root, and a root class loaded after start.

mod common;

use common::*;
use sprig_wire::Message;
use std::time::Duration;

#[test]
fn agentpath_exact_root_counts() {
    for jdk in sprig_tests::every_jdk("agentpath_exact_root_counts") {
        one_jdk(&jdk);
    }
}

fn one_jdk(jdk: &sprig_tests::Jdk) {
    let jdk = jdk.clone();
    let classes = fixture_classes(&jdk);
    let mut cli = FakeCli::new();
    let agent = format!("-agentpath:{}={}", agent_lib().display(), cli.options());
    let mut jvm = spawn_java(&jdk, classes.path(), &[agent], "fixture.Roots");
    cli.accept(jvm.pid());
    cli.start(&["fixture.Roots::work"]);
    cli.wait_msg("Started", Duration::from_secs(10), |m| {
        matches!(m, Message::Started { .. })
    });
    // Not loaded at VMInit: armed, instrumented when it loads.
    let nf = cli.wait_msg("RootNotFound", Duration::from_secs(10), |m| {
        matches!(m, Message::RootNotFound { .. })
    });
    assert!(
        matches!(
            &nf,
            Message::RootNotFound {
                class_loaded: false,
                ..
            }
        ),
        "{nf:?}"
    );
    wait_ready(&mut jvm);
    cli.wait_msg("RootInstrumented", Duration::from_secs(10), |m| {
        matches!(m, Message::RootInstrumented { methods: 1, .. })
    });
    jvm.send("run 1000 3");
    jvm.wait_for("done", Duration::from_secs(30), |l| l == "done");
    let stats = cli.detach();
    assert_eq!(stats.instrumented_methods, 1, "{stats:?}");
    assert_eq!(stats.called_methods, 1, "{stats:?}");
    assert_eq!(stats.lost_events, 0);
    assert_eq!(stats.threads, 3);

    let counts = cli.counts();
    assert_eq!(counts.len(), 3, "{counts:#?}");
    for t in 0..3 {
        let c = &counts[&format!("worker-{t}")];
        assert_eq!(c.thread_start, 1, "{counts:#?}");
        // ThreadEnd comes from the thread's TLS destructor, which may run
        // after Thread.join() returned and the session ended: at most one.
        assert!(c.thread_end <= 1, "{counts:#?}");
        assert_eq!(c.root_entry, 1000, "{counts:#?}");
        assert_eq!(c.root_exit, 1000, "{counts:#?}");
        assert_eq!(c.method_entry, 0);
        assert_eq!(c.method_exit, 0);
    }
    cli.assert_balanced();
    let id = cli
        .method_id("fixture.Roots", "work")
        .expect("Method message");
    for evs in cli.events.values() {
        assert!(
            evs.iter()
                .filter(|e| (1..=4).contains(&e.kind))
                .all(|e| e.id == id)
        );
    }

    // After detach the JVM keeps running; the probes are silent.
    jvm.send("run 100 2");
    jvm.wait_for("done", Duration::from_secs(30), |l| l == "done");
    jvm.send("quit");
    jvm.wait_for("bye", Duration::from_secs(30), |l| l == "bye");
    assert!(jvm.wait_exit(Duration::from_secs(10)).is_some());
    assert_no_verify_error(&jvm);
}
