//! How a session begins and ends when something goes wrong, on JDK 17 and
//! 25 (loaded with `jcmd <pid> JVMTI.agent_load`): an attach that fails
//! leaves nothing the JVM could still call into an unloaded library, a
//! second copy of the agent cannot start a session while one runs, and a
//! panic on the agent's control thread ends the session with every class
//! restored.

mod common;

use common::*;
use sprig_tests::{Jdk, Proc, TempDir};
use sprig_wire::Message;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// `jcmd <pid> JVMTI.agent_load <lib> "<options>"`: jcmd's output.
fn jcmd_load_lib(jdk: &Jdk, pid: u32, lib: &Path, options: &str) -> String {
    let out = Command::new(jdk.home.join("bin/jcmd"))
        .arg(pid.to_string())
        .arg("JVMTI.agent_load")
        .arg(lib)
        .arg(jcmd_quote(options))
        .output()
        .expect("run jcmd");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Starts `class` with `env` set in the JVM's environment and its working
/// directory (where an hs_err file would go) in `cwd`.
fn spawn_java_env(
    jdk: &Jdk,
    classes: &Path,
    extra: &[String],
    class: &str,
    env: &[(&str, &str)],
    cwd: &Path,
) -> Proc {
    let mut cmd = Command::new(jdk.java());
    cmd.current_dir(cwd)
        .envs(env.iter().copied())
        .args(jvm_flags(jdk))
        .args(extra)
        .arg("-cp")
        .arg(classes)
        .arg(class);
    Proc::spawn(&format!("{class}-jdk{}", jdk.major), cmd)
}

/// The hs_err files in `dir`.
fn crash_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("hs_err"))
                .collect()
        })
        .unwrap_or_default()
}

/// Sends `quit` and checks that the JVM exits by itself with status 0 and
/// leaves no crash file.
fn assert_clean_exit(jdk: &Jdk, jvm: &mut Proc, cwd: &Path) {
    jvm.send("quit");
    let status = jvm
        .wait_exit(Duration::from_secs(30))
        .expect("the JVM exits after quit");
    assert!(
        status.success() && crash_files(cwd).is_empty(),
        "JDK {}: the JVM ended with {status:?}, crash files {:?}:\n{}",
        jdk.major,
        crash_files(cwd),
        jvm.transcript()
    );
}

/// Reads the session's messages until the agent closes the socket (or a
/// `Detached` comes), up to `timeout`.
fn until_closed(cli: &mut FakeCli, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        cli.poll();
        let ch = cli.ch.as_mut().expect("connected");
        match ch.recv_timeout(Duration::from_millis(50)) {
            Ok(Some(m)) => {
                let end = matches!(m, Message::Detached(_));
                cli.msgs.push(m);
                if end {
                    return;
                }
            }
            Ok(None) => {}
            Err(_) => return,
        }
    }
    panic!(
        "the agent neither detached nor closed the socket within {timeout:?}: {:#?}",
        cli.msgs
    );
}

/// Loads the agent from `lib` until the JVM answers `return code: 0` (the
/// session before may still be ending), within 5 s.
fn load_when_free(jdk: &Jdk, pid: u32, lib: &Path, cli: &FakeCli) {
    let t0 = Instant::now();
    loop {
        let out = jcmd_load_lib(jdk, pid, lib, &cli.options());
        if out.contains("return code: 0") {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the agent did not load within 5 s: {out}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A JVM that holds the probe class of an older sprig (one without
/// `INSIDE`, the case the README documents) refuses the attach; the JVM
/// then runs on and exits normally, with no crash file: nothing it calls
/// at its exit (VMDeath) may point into the library HotSpot unloaded.
#[test]
fn a_failed_attach_leaves_the_jvm_to_exit_cleanly() {
    for jdk in sprig_tests::test_jdks("a_failed_attach_leaves_the_jvm_to_exit_cleanly") {
        let classes = fixture_classes(&jdk);
        let old = sprig_tests::old_probe_class(&jdk);
        let boot = old.path().join("boot");
        let cwd = TempDir::new("old-probe-cwd");
        let mut jvm = spawn_java_env(
            &jdk,
            classes.path(),
            &[format!("-Xbootclasspath/a:{}", boot.display())],
            "fixture.Roots",
            &[],
            cwd.path(),
        );
        wait_ready(&mut jvm);
        // The fixture loads the class (as an older sprig's attach did).
        jvm.send("after 1");
        jvm.wait_for("raised", Duration::from_secs(30), |l| {
            l.starts_with("raised")
        });
        let cli = FakeCli::new();
        let out = jcmd_load_lib(&jdk, jvm.pid(), &agent_lib(), &cli.options());
        assert!(
            out.contains("return code: 8"),
            "JDK {}: jcmd said: {out}",
            jdk.major
        );
        assert_clean_exit(&jdk, &mut jvm, cwd.path());
    }
}

/// Two copies of the agent library in one JVM (two sprig builds, or root's
/// and the JVM owner's): while the first copy's session runs, the second
/// copy's session is refused with one line naming the session that runs
/// (its sprig's pid and user), and the first counts every root call.
#[test]
fn a_second_copy_of_the_agent_is_refused_while_a_session_runs() {
    for jdk in sprig_tests::test_jdks("a_second_copy_of_the_agent_is_refused_while_a_session_runs")
    {
        let classes = fixture_classes(&jdk);
        let copy_dir = TempDir::new("agent-copy");
        let copy = copy_dir.path().join("libsprig_agent.so");
        std::fs::copy(agent_lib(), &copy).expect("copy the agent library");
        let cwd = TempDir::new("two-copies-cwd");
        let mut jvm = spawn_java_env(&jdk, classes.path(), &[], "fixture.Roots", &[], cwd.path());
        wait_ready(&mut jvm);

        let mut first = FakeCli::new();
        let out = jcmd_load_lib(&jdk, jvm.pid(), &agent_lib(), &first.options());
        assert!(out.contains("return code: 0"), "{out}");
        first.accept(jvm.pid());
        first.start(&["fixture.Roots::work"]);
        first.wait_msg("RootInstrumented", Duration::from_secs(20), |m| {
            matches!(m, Message::RootInstrumented { .. })
        });

        let mut second = FakeCli::new();
        let out = jcmd_load_lib(&jdk, jvm.pid(), &copy, &second.options());
        assert!(out.contains("return code: 0"), "{out}");
        second.accept(jvm.pid());
        second.start(&["fixture.Roots::work"]);
        let refused = second.wait_msg("Error", Duration::from_secs(20), |m| {
            matches!(
                m,
                Message::Error(_) | Message::RootInstrumented { .. } | Message::Started { .. }
            )
        });
        let pid = std::process::id();
        match &refused {
            Message::Error(why) => assert!(
                why.contains("already running") && why.contains(&format!("pid {pid}")),
                "JDK {}: {why}",
                jdk.major
            ),
            other => panic!(
                "JDK {}: the second copy started a session: {other:?}",
                jdk.major
            ),
        }
        until_closed(&mut second, Duration::from_secs(10));

        jvm.send("run 1000 2");
        jvm.wait_for("done", Duration::from_secs(60), |l| l == "done");
        first.detach();
        let counts = first.counts();
        assert_eq!(counts.len(), 2, "JDK {}: {counts:#?}", jdk.major);
        for (name, c) in &counts {
            assert_eq!(c.root_entry, 1000, "JDK {} {name}: {counts:#?}", jdk.major);
            assert_eq!(c.root_exit, 1000, "JDK {} {name}: {counts:#?}", jdk.major);
        }
        first.assert_balanced();

        // The JVM is free again, for either copy.
        let mut next = FakeCli::new();
        load_when_free(&jdk, jvm.pid(), &copy, &next);
        next.accept(jvm.pid());
        next.start(&["fixture.Roots::work"]);
        next.wait_msg("RootInstrumented", Duration::from_secs(20), |m| {
            matches!(m, Message::RootInstrumented { .. })
        });
        jvm.send("run 100 1");
        jvm.wait_for("done", Duration::from_secs(60), |l| l == "done");
        next.detach();
        let counts = next.counts();
        assert_eq!(counts.len(), 1, "JDK {}: {counts:#?}", jdk.major);
        assert!(
            counts
                .values()
                .all(|c| c.root_entry == 100 && c.root_exit == 100),
            "JDK {}: {counts:#?}",
            jdk.major
        );
        assert_clean_exit(&jdk, &mut jvm, cwd.path());
    }
}

/// A panic on the agent's control thread (the test-only fault switch
/// `SPRIG_AGENT_FAULT`: `control` panics in the control loop, `teardown` in
/// one step of the end of the session) ends the session like any other
/// end: the classes are restored (same bytecode digest as before the
/// session) and the next session counts exactly.
#[test]
fn a_panic_on_the_control_thread_restores_every_class() {
    for jdk in sprig_tests::test_jdks("a_panic_on_the_control_thread_restores_every_class") {
        let classes = fixture_classes(&jdk);
        let cwd = TempDir::new("panic-cwd");
        let mut jvm = spawn_java_env(
            &jdk,
            classes.path(),
            &[],
            "fixture.Roots",
            &[("SPRIG_AGENT_FAULT", "control,teardown")],
            cwd.path(),
        );
        wait_ready(&mut jvm);

        let mut cli = FakeCli::new();
        load_when_free(&jdk, jvm.pid(), &agent_lib(), &cli);
        cli.accept(jvm.pid());
        let original = cli.digest("fixture.Roots");
        cli.start(&["fixture.Roots::work"]);
        cli.wait_msg("RootInstrumented", Duration::from_secs(20), |m| {
            matches!(m, Message::RootInstrumented { .. })
        });
        jvm.wait_for("the injected panic", Duration::from_secs(10), |l| {
            l.contains("injected fault at control")
        });
        until_closed(&mut cli, Duration::from_secs(10));
        // The teardown ran, past a step that panicked too.
        jvm.wait_for(
            "the injected panic in the teardown",
            Duration::from_secs(10),
            |l| l.contains("injected fault at teardown"),
        );
        assert!(
            cli.msgs
                .iter()
                .any(|m| matches!(m, Message::Warning(w) if w.contains("panic"))),
            "JDK {}: no warning about the panic: {:#?}",
            jdk.major,
            cli.msgs
        );

        let mut next = FakeCli::new();
        load_when_free(&jdk, jvm.pid(), &agent_lib(), &next);
        next.accept(jvm.pid());
        assert_eq!(
            next.digest("fixture.Roots"),
            original,
            "JDK {}: fixture.Roots is still instrumented after the panic:\n{}",
            jdk.major,
            jvm.transcript()
        );
        next.start(&["fixture.Roots::work"]);
        next.wait_msg("RootInstrumented", Duration::from_secs(20), |m| {
            matches!(m, Message::RootInstrumented { .. })
        });
        jvm.send("run 200 2");
        jvm.wait_for("done", Duration::from_secs(60), |l| l == "done");
        next.detach();
        let counts = next.counts();
        assert_eq!(counts.len(), 2, "JDK {}: {counts:#?}", jdk.major);
        assert!(
            counts
                .values()
                .all(|c| c.root_entry == 200 && c.root_exit == 200),
            "JDK {}: {counts:#?}",
            jdk.major
        );
        next.assert_balanced();
        assert_clean_exit(&jdk, &mut jvm, cwd.path());
    }
}

/// A thread whose class overrides `getId()` is named by its real thread id
/// (`threadId()`, what the probe class reads), on JDK 17 and 25: the id
/// the agent claims a Java-path slot with is the one the probes look up.
#[test]
fn a_thread_that_overrides_get_id_is_named_by_its_real_id() {
    for jdk in sprig_tests::test_jdks("a_thread_that_overrides_get_id_is_named_by_its_real_id") {
        let classes = fixture_classes(&jdk);
        let cwd = TempDir::new("ids-cwd");
        let mut jvm = spawn_java_env(&jdk, classes.path(), &[], "fixture.Ids", &[], cwd.path());
        wait_ready(&mut jvm);
        let mut cli = FakeCli::new();
        load_when_free(&jdk, jvm.pid(), &agent_lib(), &cli);
        cli.accept(jvm.pid());
        cli.start(&["fixture.Ids::work"]);
        cli.wait_msg("RootInstrumented", Duration::from_secs(20), |m| {
            matches!(m, Message::RootInstrumented { .. })
        });
        jvm.send("run 100");
        let line = jvm.wait_for("tid", Duration::from_secs(30), |l| l.starts_with("tid "));
        let real: u64 = line["tid ".len()..].trim().parse().expect("a thread id");
        jvm.wait_for("done", Duration::from_secs(30), |l| l == "done");
        cli.detach();
        let named: Vec<u64> = cli
            .msgs
            .iter()
            .filter_map(|m| match m {
                Message::Thread { name, java_id, .. } if name == "liar" => Some(*java_id),
                _ => None,
            })
            .collect();
        assert_eq!(named, vec![real], "JDK {}", jdk.major);
        let counts = cli.counts();
        assert_eq!(
            counts["liar"].root_entry, 100,
            "JDK {}: {counts:#?}",
            jdk.major
        );
        assert_clean_exit(&jdk, &mut jvm, cwd.path());
    }
}
