//! Following reflective calls instruments two JDK classes,
//! `java.lang.reflect.Method` and `Constructor`: they must hold probes while
//! the session runs and their original bytecodes after the detach (JDK 17
//! and 25). The counts under the root are checked end to end in
//! tests/tests/e2e/reveal_e2e.rs.

mod common;

use common::*;
use sprig_wire::Message;
use std::time::Duration;

const WATCHED: [&str; 2] = ["java.lang.reflect.Method", "java.lang.reflect.Constructor"];

fn run_reflect(jvm: &mut sprig_tests::Proc, n: u32) {
    jvm.send(&format!("run reflect {n} 1"));
    jvm.wait_for("done reflect", Duration::from_secs(60), |l| {
        l.starts_with("done reflect ")
    });
}

#[test]
fn watched_reflection_classes_are_restored_on_detach() {
    for jdk in sprig_tests::every_jdk("watched_reflection_classes_are_restored_on_detach") {
        let classes = sprig_tests::fixture_classes(&jdk);
        let mut jvm = spawn_java(&jdk, classes.path(), &[], "reveal.Driver");
        wait_ready(&mut jvm);
        run_reflect(&mut jvm, 50);

        let mut cli = FakeCli::new();
        jcmd_load(&jdk, jvm.pid(), &cli.options());
        cli.accept(jvm.pid());
        let before: Vec<(u32, u64)> = WATCHED.iter().map(|c| cli.digest(c)).collect();
        for (c, d) in WATCHED.iter().zip(&before) {
            assert!(d.0 > 0, "JDK {}: {c} not found: {d:?}", jdk.major);
        }
        cli.start_revealing(&["reveal.Reflect::root"]);
        cli.wait_msg("RootInstrumented", Duration::from_secs(20), |m| {
            matches!(m, Message::RootInstrumented { methods: 1, .. })
        });
        run_reflect(&mut jvm, 20);
        for (c, d) in WATCHED.iter().zip(&before) {
            let during = cli.digest(c);
            assert_eq!(during.0, d.0, "JDK {}: {c}", jdk.major);
            assert_ne!(
                during.1, d.1,
                "JDK {}: {c} holds no probe while reflection is watched",
                jdk.major
            );
        }
        let stats = cli.detach();
        let rev = stats.reveal.expect("revelation stats");
        assert!(rev.reflective_sites >= 2, "{rev:?}");

        // A new session only to read the bytecodes after the detach.
        let mut cli = FakeCli::new();
        jcmd_load(&jdk, jvm.pid(), &cli.options());
        cli.accept(jvm.pid());
        for (c, d) in WATCHED.iter().zip(&before) {
            assert_eq!(
                cli.digest(c),
                *d,
                "JDK {}: {c} not restored after the detach",
                jdk.major
            );
        }
        cli.detach();
        // Reflection still works in the JVM.
        run_reflect(&mut jvm, 10);
        jvm.send("exit");
    }
}
