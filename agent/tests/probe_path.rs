//! Which probe path the agent binds (JNI natives on JDK 17–21; FFM
//! critical downcalls first on JDK 22+, JNI for the slow paths), and that
//! counts stay exact on each, with revealed (plain) probes, nested roots
//! and exceptional exits. The agent names its path on the target's stderr
//! when `SPRIG_AGENT_DEBUG` is set in the target's environment.

mod common;

use common::*;
use sprig_tests::{Jdk, Proc};
use sprig_wire::{EventKind, Message};
use std::process::Command;
use std::time::Duration;

fn spawn_roots(jdk: &Jdk, classes: &std::path::Path, jni_only: bool) -> Proc {
    let mut cmd = Command::new(jdk.java());
    cmd.args(jvm_flags(jdk))
        .arg("-cp")
        .arg(classes)
        .arg("fixture.Roots")
        .env("SPRIG_AGENT_DEBUG", "1");
    if jni_only {
        cmd.env("SPRIG_AGENT_JNI_PROBES", "1");
    } else {
        cmd.env_remove("SPRIG_AGENT_JNI_PROBES");
    }
    Proc::spawn(&format!("roots-jdk{}-jni{jni_only}", jdk.major), cmd)
}

/// Calls `nested N T` makes of `work` and of `helper` in total.
fn expected(n: u64, threads: u64) -> (u64, u64) {
    let mut helper = 0;
    for i in 0..n {
        for k in 0..2 {
            if (i + k) % 7 != 3 {
                helper += 1;
            }
        }
    }
    (2 * n * threads, helper * threads)
}

fn check(jdk: &Jdk, jni_only: bool, path: &str) {
    let classes = fixture_classes(jdk);
    let mut jvm = spawn_roots(jdk, classes.path(), jni_only);
    wait_ready(&mut jvm);
    jvm.send("nested 20000 1");
    jvm.wait_for("done", Duration::from_secs(60), |l| l == "done");

    let mut cli = FakeCli::new();
    jcmd_load(jdk, jvm.pid(), &cli.options());
    cli.accept(jvm.pid());
    cli.start_revealing(&["fixture.Roots::outer"]);
    cli.wait_msg("RootInstrumented", Duration::from_secs(20), |m| {
        matches!(m, Message::RootInstrumented { .. })
    });
    // One thread first: revelation of work() and helper() happens in its
    // first calls, before any other thread calls them.
    jvm.send("nested 40 1");
    jvm.wait_for("done", Duration::from_secs(60), |l| l == "done");
    jvm.send("nested 3000 2");
    jvm.wait_for("done", Duration::from_secs(60), |l| l == "done");
    // The last thread out of a root context lowers Probe.active at once, so
    // instrumented methods called after the root cost one load again.
    jvm.send("after 100");
    let raised = jvm.wait_for("raised", Duration::from_secs(60), |l| {
        l.starts_with("raised")
    });
    cli.detach();

    let what = format!("JDK {} jni_only={jni_only}", jdk.major);
    let line = format!("sprig agent: probe path: {path}");
    assert!(
        jvm.stderr().lines().any(|l| l.starts_with(&line)),
        "{what}: no {line:?} on stderr:\n{}",
        jvm.stderr()
    );
    assert!(
        !jvm.stderr().contains("restricted method"),
        "{what}: restricted-method warning on the target's stderr:\n{}",
        jvm.stderr()
    );
    let outer = cli.method_id("fixture.Roots", "outer").expect("outer id");
    let work = cli
        .method_id("fixture.Roots", "work")
        .expect("work revealed");
    let helper = cli
        .method_id("fixture.Roots", "helper")
        .expect("helper revealed");
    let (mut roots, mut root_exits, mut works, mut work_exits, mut helpers) = (0, 0, 0, 0, 0);
    for evs in cli.events.values() {
        for e in evs {
            match (e.kind(), e.id) {
                (Some(EventKind::RootEntry), id) if id == outer => roots += 1,
                (Some(EventKind::RootExit), id) if id == outer => root_exits += 1,
                (Some(EventKind::MethodEntry), id) if id == work => works += 1,
                (Some(EventKind::MethodExit), id) if id == work => work_exits += 1,
                (Some(EventKind::MethodEntry), id) if id == helper => helpers += 1,
                _ => {}
            }
        }
    }
    let (w1, h1) = expected(40, 1);
    let (w2, h2) = expected(3000, 2);
    let (w3, h3) = expected(100, 1);
    assert_eq!(
        raised, "raised 0",
        "{what}: Probe.active still up right after the root returned"
    );
    assert_eq!((roots, root_exits), (6140, 6140), "{what}");
    assert_eq!((works, work_exits), (w1 + w2 + w3, w1 + w2 + w3), "{what}");
    assert_eq!(helpers, h1 + h2 + h3, "{what}");
    cli.assert_balanced();
    jvm.send("quit");
    jvm.wait_for("bye", Duration::from_secs(30), |l| l == "bye");
    assert_no_verify_error(&jvm);
}

#[test]
fn jni_probes_on_jdk17() {
    check(&sprig_tests::jdk17(), false, "JNI");
}

#[test]
fn ffm_fast_path_on_jdk25_with_exact_counts() {
    let Some(jdk) = sprig_tests::jdk25("ffm_fast_path_on_jdk25_with_exact_counts") else {
        return;
    };
    // Built without a javac 22+ (SPRIG_JAVAC22=none, or only JDK 17
    // installed), the agent has no JDK 22+ class and uses JNI everywhere.
    if option_env!("SPRIG_FFM_PROBE") == Some("1") {
        check(&jdk, false, "FFM critical downcalls");
    } else {
        eprintln!("the agent was built without the JDK 22+ probe class: expecting JNI");
        check(&jdk, false, "JNI");
    }
    check(&jdk, true, "JNI");
}
