//! The HotSpot attach protocol against real JDK 17 and JDK 25 JVMs.
//!
//! sprig's own agent is built elsewhere, so these tests load what every JDK
//! has: a missing library (the JVM's own error text), and the JDK's
//! `libinstrument` with a tiny Java agent jar (a real `Agent_OnAttach` that
//! succeeds, or fails with its own return code).

mod attach_support;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use attach_support::{ATTACH_TIMEOUT, Jvm, RunAs, assert_no_trigger_files, fixtures, jdk17, jdk25};
use sprig::attach::{self, AttachError};
use sprig::jvm::{self, JvmError};

fn instrument(home: &Path) -> PathBuf {
    home.join("lib/libinstrument.so")
}

fn missing_library() -> PathBuf {
    PathBuf::from(format!(
        "{}/no-such-agent-{}.so",
        env!("CARGO_TARGET_TMPDIR"),
        std::process::id()
    ))
}

/// A missing library is reported with the JVM's own text; on JDK 17 the
/// status line carries the error code, on JDK 21+ the status is 0 and only
/// the text says it failed.
fn missing_library_is_reported(home: &Path, expect_code: Option<i32>) {
    let mut jvm = Jvm::start(home, &[], RunAs::Me);
    let info = jvm::inspect(jvm.pid).unwrap();
    let lib = missing_library();
    let err = attach::load_agent(&info, &lib, "x=1", ATTACH_TIMEOUT).unwrap_err();
    match &err {
        AttachError::AgentLoadFailed { pid, code, message } => {
            assert_eq!(*pid, jvm.pid);
            assert_eq!(*code, expect_code, "{message}");
            assert!(
                message.contains("cannot open shared object file"),
                "{message}"
            );
            assert!(message.contains(&lib.display().to_string()), "{message}");
        }
        other => panic!("expected AgentLoadFailed, got {other:?}"),
    }
    let text = err.to_string();
    assert!(!text.contains('\n'), "{text}");
    assert!(jvm.alive());
    assert_no_trigger_files(&jvm);
}

#[test]
fn jdk17_missing_library_fails_with_jvm_text() {
    missing_library_is_reported(&jdk17(), Some(-1));
}

#[test]
fn jdk25_missing_library_fails_although_status_is_zero() {
    let Some(home) = jdk25() else { return };
    missing_library_is_reported(&home, None);
}

/// A real agent loads: the JVM prints what the agent received. A second
/// load reuses the socket the first one opened.
fn java_agent_loads_twice(home: &Path) {
    let mut jvm = Jvm::start(home, &[], RunAs::Me);
    let info = jvm::inspect(jvm.pid).unwrap();
    let jar = &fixtures().agent_jar;
    let socket = PathBuf::from(format!("/tmp/.java_pid{}", jvm.pid));
    assert!(
        !socket.exists(),
        "no attach listener before the first attach"
    );

    let options = format!("{}=first", jar.display());
    attach::load_agent(&info, &instrument(home), &options, ATTACH_TIMEOUT).expect("first load");
    assert!(
        jvm.wait_for_output("agentmain:first", Duration::from_secs(10)),
        "{}",
        jvm.output()
    );
    assert!(socket.exists());
    assert_no_trigger_files(&jvm);

    let options = format!("{}=second", jar.display());
    attach::load_agent(&info, &instrument(home), &options, ATTACH_TIMEOUT).expect("second load");
    assert!(
        jvm.wait_for_output("agentmain:second", Duration::from_secs(10)),
        "{}",
        jvm.output()
    );
    assert!(
        !jvm.output().contains("Full thread dump"),
        "SIGQUIT went to the thread dumper"
    );
    assert!(jvm.alive());
    assert_no_trigger_files(&jvm);
}

#[test]
fn jdk17_java_agent_loads() {
    java_agent_loads_twice(&jdk17());
}

#[test]
fn jdk25_java_agent_loads() {
    let Some(home) = jdk25() else { return };
    java_agent_loads_twice(&home);
}

/// `Agent_OnAttach` itself fails: libinstrument returns its own code when
/// the jar does not exist.
fn agent_on_attach_failure(home: &Path) {
    let mut jvm = Jvm::start(home, &[], RunAs::Me);
    let info = jvm::inspect(jvm.pid).unwrap();
    let options = format!("{}/missing.jar", env!("CARGO_TARGET_TMPDIR"));
    let err = attach::load_agent(&info, &instrument(home), &options, ATTACH_TIMEOUT).unwrap_err();
    match err {
        AttachError::AgentLoadFailed { code, .. } => {
            assert!(matches!(code, Some(c) if c != 0), "{code:?}")
        }
        other => panic!("expected AgentLoadFailed, got {other:?}"),
    }
    assert!(jvm.alive());
    assert_no_trigger_files(&jvm);
}

#[test]
fn jdk17_agent_on_attach_failure_has_its_code() {
    agent_on_attach_failure(&jdk17());
}

#[test]
fn jdk25_agent_on_attach_failure_has_its_code() {
    let Some(home) = jdk25() else { return };
    agent_on_attach_failure(&home);
}

#[test]
fn attach_disabled_is_refused_without_a_signal() {
    let mut jvm = Jvm::start(&jdk17(), &["-XX:+DisableAttachMechanism"], RunAs::Me);
    let info = jvm::inspect(jvm.pid).unwrap();
    let started = Instant::now();
    let err = attach::load_agent(&info, &missing_library(), "", ATTACH_TIMEOUT).unwrap_err();
    assert!(
        matches!(err, AttachError::AttachDisabled { pid } if pid == jvm.pid),
        "{err:?}"
    );
    assert!(started.elapsed() < ATTACH_TIMEOUT);
    assert!(err.to_string().contains("sprig run"), "{err}");
    // A SIGQUIT would have made the JVM print a thread dump.
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !jvm.output().contains("Full thread dump"),
        "{}",
        jvm.output()
    );
    assert!(jvm.alive());
    assert_no_trigger_files(&jvm);
}

#[test]
fn jdk25_dynamic_agent_loading_disabled_says_how_to_proceed() {
    let Some(home) = jdk25() else { return };
    let jvm = Jvm::start(&home, &["-XX:-EnableDynamicAgentLoading"], RunAs::Me);
    let info = jvm::inspect(jvm.pid).unwrap();
    let options = format!("{}=x", fixtures().agent_jar.display());
    let err = attach::load_agent(&info, &instrument(&home), &options, ATTACH_TIMEOUT).unwrap_err();
    assert!(
        matches!(err, AttachError::AgentLoadFailed { .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("Dynamic agent loading is not enabled"),
        "{text}"
    );
    assert!(text.contains("sprig run"), "{text}");
    assert!(!jvm.output().contains("agentmain:"));
    assert_no_trigger_files(&jvm);
}

#[test]
fn a_stopped_jvm_times_out_and_leaves_nothing_behind() {
    let jvm = Jvm::start(&jdk17(), &[], RunAs::Me);
    let info = jvm::inspect(jvm.pid).unwrap();
    jvm.signal("STOP");
    let limit = Duration::from_millis(800);
    let started = Instant::now();
    let err = attach::load_agent(&info, &missing_library(), "", limit).unwrap_err();
    let took = started.elapsed();
    assert!(
        matches!(
            err,
            AttachError::Timeout {
                stage: attach::Stage::Socket,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("did not open its attach socket within"),
        "{err}"
    );
    assert!(
        took >= limit && took < limit + Duration::from_secs(2),
        "{took:?}"
    );
    assert_no_trigger_files(&jvm);
    jvm.signal("CONT");
}

#[test]
fn a_reused_pid_is_not_signalled() {
    let mut jvm = Jvm::start(&jdk17(), &[], RunAs::Me);
    let mut info = jvm::inspect(jvm.pid).unwrap();
    info.start_time += 1; // as if the PID now belonged to another process
    let err = attach::load_agent(&info, &missing_library(), "", ATTACH_TIMEOUT).unwrap_err();
    assert!(
        matches!(err, AttachError::Jvm(JvmError::Exited { .. })),
        "{err:?}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(!jvm.output().contains("Full thread dump"));
    assert!(!Path::new(&format!("/tmp/.java_pid{}", jvm.pid)).exists());
    assert!(jvm.alive());
}

#[test]
fn bad_arguments_are_refused_before_touching_the_jvm() {
    let jvm = Jvm::start(&jdk17(), &[], RunAs::Me);
    let info = jvm::inspect(jvm.pid).unwrap();
    for (path, options) in [
        (PathBuf::from("relative/libx.so"), ""),
        (missing_library(), "a\0b"),
    ] {
        let err = attach::load_agent(&info, &path, options, ATTACH_TIMEOUT).unwrap_err();
        assert!(
            matches!(err, AttachError::InvalidArgument { .. }),
            "{err:?}"
        );
    }
    assert!(!Path::new(&format!("/tmp/.java_pid{}", jvm.pid)).exists());
    assert_no_trigger_files(&jvm);
}

#[test]
fn a_jvm_that_exits_is_reported() {
    // No PerfData: a killed JVM cannot remove its hsperfdata file.
    let mut jvm = Jvm::start(&jdk17(), &["-XX:-UsePerfData"], RunAs::Me);
    let info = jvm::inspect(jvm.pid).unwrap();
    jvm.signal("KILL");
    let end = Instant::now() + Duration::from_secs(10);
    while jvm.alive() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10));
    }
    let err = attach::load_agent(&info, &missing_library(), "", ATTACH_TIMEOUT).unwrap_err();
    assert!(
        matches!(
            err,
            AttachError::Jvm(JvmError::NoSuchProcess { .. } | JvmError::Exited { .. })
        ),
        "{err:?}"
    );
}

#[test]
fn a_jvm_without_sigquit_handler_is_not_signalled() {
    // With -Xrs HotSpot opens its attach socket at startup and leaves SIGQUIT
    // at its default action: terminate.
    let mut jvm = Jvm::start(&jdk17(), &["-Xrs"], RunAs::Me);
    let info = jvm::inspect(jvm.pid).unwrap();
    let socket = PathBuf::from(format!("/tmp/.java_pid{}", jvm.pid));
    assert!(
        socket.exists(),
        "-Xrs starts the attach listener at startup"
    );
    let err = attach::load_agent(&info, &missing_library(), "", ATTACH_TIMEOUT).unwrap_err();
    assert!(
        matches!(err, AttachError::AgentLoadFailed { .. }),
        "{err:?}"
    );

    // Once the socket is gone (a /tmp cleaner), a SIGQUIT would kill it.
    std::fs::remove_file(&socket).unwrap();
    let limit = Duration::from_millis(600);
    let started = Instant::now();
    let err = attach::load_agent(&info, &missing_library(), "", limit).unwrap_err();
    assert!(
        matches!(err, AttachError::NoSignalHandler { .. }),
        "{err:?}"
    );
    assert!(started.elapsed() < limit + Duration::from_secs(2));
    assert!(err.to_string().contains("sprig run"), "{err}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(jvm.alive(), "the JVM must not have received SIGQUIT");
    assert_no_trigger_files(&jvm);
}

#[test]
fn a_jvm_in_its_own_pid_and_mount_namespace() {
    if !attach_support::is_root("a_jvm_in_its_own_pid_and_mount_namespace") {
        return;
    }
    let home = jdk17();
    let jvm = Jvm::start(&home, &[], RunAs::Container);
    let info = jvm::inspect(jvm.pid).unwrap();
    assert_ne!(info.ns_pid, jvm.pid, "the JVM has its own PID inside");
    assert_eq!(info.ns_pid, jvm.ns_pid());
    // Its PerfData lives in its private /tmp, still found through its root.
    assert_eq!(info.main, "Sleeper");
    assert!(
        info.java_version.as_deref().unwrap_or("").starts_with("17"),
        "{info:?}"
    );
    let private_tmp = PathBuf::from(format!("/proc/{}/root/tmp", jvm.pid));
    assert_ne!(
        std::fs::metadata(&private_tmp).unwrap().ino(),
        std::fs::metadata("/tmp").unwrap().ino(),
        "the JVM has its own /tmp"
    );
    assert!(
        private_tmp
            .join(format!("hsperfdata_root/{}", info.ns_pid))
            .exists()
    );

    // The jar as the JVM sees it: copied into its private /tmp at start.
    let options = "/tmp/classes/probe-agent.jar=in-container".to_string();
    attach::load_agent(&info, &instrument(&home), &options, ATTACH_TIMEOUT).unwrap();
    assert!(
        jvm.wait_for_output("agentmain:in-container", Duration::from_secs(10)),
        "{}",
        jvm.output()
    );
    let inside = PathBuf::from(format!(
        "/proc/{}/root/tmp/.java_pid{}",
        jvm.pid, info.ns_pid
    ));
    assert!(inside.exists(), "socket in the JVM's own /tmp");
    assert_no_trigger_files(&jvm);
}

#[test]
fn a_trigger_file_left_by_a_crashed_attacher_is_taken_over() {
    let home = jdk17();
    let mut jvm = Jvm::start(&home, &[], RunAs::Me);
    let info = jvm::inspect(jvm.pid).unwrap();
    // Someone made the trigger and never signalled (killed in between).
    let foreign = jvm.cwd.0.join(format!(".attach_pid{}", jvm.pid));
    std::fs::write(&foreign, b"").unwrap();
    let started = Instant::now();
    let options = format!("{}=after-crash", fixtures().agent_jar.display());
    attach::load_agent(&info, &instrument(&home), &options, ATTACH_TIMEOUT).unwrap();
    assert!(started.elapsed() < ATTACH_TIMEOUT);
    assert!(
        jvm.wait_for_output("agentmain:after-crash", Duration::from_secs(10)),
        "{}",
        jvm.output()
    );
    assert!(
        !jvm.output().contains("Full thread dump"),
        "{}",
        jvm.output()
    );
    // Not sprig's file: left where its owner put it.
    assert!(foreign.exists());
    std::fs::remove_file(&foreign).unwrap();
    assert!(jvm.alive());
    assert_no_trigger_files(&jvm);
}
