//! Attach across users: root attaching to another user's JVM, a non-root
//! sprig attaching to its own user's JVM, and a non-root sprig refused for
//! another user's JVM. The non-root sides run this test binary again under
//! `setpriv` (see `child_helper`). These tests need root (skipped without).

mod attach_support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use attach_support::{
    ATTACH_TIMEOUT, Jvm, RunAs, TempDir, assert_no_trigger_files, fixtures, jdk17, jdk25,
};
use sprig::attach::{self, AttachError};
use sprig::jvm::{self, JvmError};

const NOBODY: u32 = 65534;
/// A uid with no account and no processes.
const STRANGER: u32 = 4242;
const CHILD_ENV: &str = "SPRIG_ATTACH_TEST_CHILD";

fn missing_library() -> PathBuf {
    PathBuf::from(format!("{}/no-such-agent.so", env!("CARGO_TARGET_TMPDIR")))
}

/// Runs `child_helper` in this test binary as `uid` (group `uid` too) with
/// `request`, and returns its result line.
fn as_user(uid: u32, request: &str) -> String {
    as_user_group(uid, uid, request)
}

/// `as_user` with a separate group.
fn as_user_group(uid: u32, gid: u32, request: &str) -> String {
    let exe = attach_support::reachable_exe();
    let out = Command::new("timeout")
        .arg("60")
        .arg("setpriv")
        .arg(format!("--reuid={uid}"))
        .arg(format!("--regid={gid}"))
        .arg("--clear-groups")
        .arg(exe)
        .args([
            "--exact",
            "child_helper",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, request)
        .output()
        .expect("run the test binary under setpriv");
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .find_map(|l| l.split_once("CHILD-RESULT: ").map(|(_, r)| r))
        .map(str::to_owned)
        .unwrap_or_else(|| {
            panic!(
                "child as uid {uid} gave no result: {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
}

/// Not a test: the other-user half of the tests above, run by `as_user`.
/// Requests: `inspect PID`, `load PID LIBRARY OPTIONS`, `list`.
#[test]
#[ignore = "helper run by the other tests under another uid"]
fn child_helper() {
    let Ok(request) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut words = request.splitn(4, ' ');
    let result = match words.next() {
        Some("inspect") => {
            let pid = words.next().unwrap().parse().unwrap();
            match jvm::inspect(pid) {
                Ok(j) => format!("ok {}", j.main),
                Err(e @ JvmError::PermissionDenied { .. }) => format!("permission-denied {e}"),
                Err(e @ JvmError::GroupMismatch { .. }) => format!("group-mismatch {e}"),
                Err(e) => format!("other {e}"),
            }
        }
        Some("load") => {
            let pid = words.next().unwrap().parse().unwrap();
            let lib = PathBuf::from(words.next().unwrap());
            let options = words.next().unwrap_or("");
            match jvm::inspect(pid)
                .map_err(AttachError::from)
                .and_then(|j| attach::load_agent(&j, &lib, options, ATTACH_TIMEOUT))
            {
                Ok(()) => "ok".to_owned(),
                Err(e @ AttachError::AgentLoadFailed { .. }) => format!("load-failed {e}"),
                Err(e) => format!("other {e}"),
            }
        }
        Some("list") => {
            let mut out = Vec::new();
            sprig::list::run(&mut out).unwrap();
            String::from_utf8(out).unwrap().replace('\n', "|")
        }
        _ => format!("other unknown request {request}"),
    };
    // The harness prints "test child_helper ... " on the same line first.
    println!("\nCHILD-RESULT: {result}");
}

#[test]
fn root_attaches_to_another_users_jvm() {
    if !attach_support::is_root("root_attaches_to_another_users_jvm") {
        return;
    }
    let home = jdk17();
    let mut jvm = Jvm::start(&home, &[], RunAs::Nobody);
    let info = jvm::inspect(jvm.pid).unwrap();
    assert_eq!((info.uid, info.gid), (NOBODY, NOBODY));
    assert_eq!(info.user, "nobody");
    assert_eq!(info.main, "Sleeper");
    // Root lists every user's JVMs.
    assert!(
        jvm::list_jvms()
            .iter()
            .any(|j| j.pid == jvm.pid && j.user == "nobody")
    );

    // The protocol gets through: the JVM answers with its own error text.
    let err = attach::load_agent(&info, &missing_library(), "", ATTACH_TIMEOUT).unwrap_err();
    assert!(
        matches!(err, AttachError::AgentLoadFailed { code: Some(-1), .. }),
        "{err:?}"
    );
    assert_no_trigger_files(&jvm);

    // And a real agent loads.
    let options = format!("{}=as-root", fixtures().agent_jar.display());
    attach::load_agent(
        &info,
        &home.join("lib/libinstrument.so"),
        &options,
        ATTACH_TIMEOUT,
    )
    .unwrap();
    assert!(
        jvm.wait_for_output("agentmain:as-root", Duration::from_secs(10)),
        "{}",
        jvm.output()
    );
    assert!(jvm.alive());
    assert_no_trigger_files(&jvm);
}

#[test]
fn root_attaches_to_another_users_jdk25_jvm_from_its_cwd() {
    if !attach_support::is_root("root_attaches_to_another_users_jdk25_jvm_from_its_cwd") {
        return;
    }
    let Some(home) = jdk25() else { return };
    // A working directory the JVM's user may write: the trigger file goes
    // there (and must be gone afterwards).
    let jvm = Jvm::start(&home, &[], RunAs::Nobody);
    std::os::unix::fs::chown(&jvm.cwd.0, Some(NOBODY), Some(NOBODY)).unwrap();
    let info = jvm::inspect(jvm.pid).unwrap();
    let options = format!("{}=jdk25", fixtures().agent_jar.display());
    attach::load_agent(
        &info,
        &home.join("lib/libinstrument.so"),
        &options,
        ATTACH_TIMEOUT,
    )
    .unwrap();
    assert!(
        jvm.wait_for_output("agentmain:jdk25", Duration::from_secs(10)),
        "{}",
        jvm.output()
    );
    assert_no_trigger_files(&jvm);
}

#[test]
fn an_agent_the_jvm_user_cannot_read_is_refused() {
    if !attach_support::is_root("an_agent_the_jvm_user_cannot_read_is_refused") {
        return;
    }
    let jvm = Jvm::start(&jdk17(), &[], RunAs::Nobody);
    let info = jvm::inspect(jvm.pid).unwrap();
    let dir = TempDir::new("private-agent");
    let lib = dir.0.join("libprivate.so");
    std::fs::write(&lib, b"not really a library").unwrap();
    std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o600)).unwrap();
    let err = attach::load_agent(&info, &lib, "", ATTACH_TIMEOUT).unwrap_err();
    assert!(
        matches!(err, AttachError::InvalidArgument { .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().ends_with(&format!(
            "JVM {} runs as user nobody, who may not read {}",
            jvm.pid,
            lib.display()
        )),
        "{err}"
    );
    // A readable library in a directory the JVM's user may not enter.
    std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o700)).unwrap();
    let err = attach::load_agent(&info, &lib, "", ATTACH_TIMEOUT).unwrap_err();
    assert!(
        matches!(err, AttachError::InvalidArgument { .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains(&format!(
            "who may not enter {} (on the way",
            dir.0.display()
        )),
        "{err}"
    );
    assert!(
        !Path::new(&format!("/tmp/.java_pid{}", jvm.pid)).exists(),
        "no attach happened"
    );
    assert_no_trigger_files(&jvm);
}

#[test]
fn a_non_root_user_attaches_to_its_own_jvm() {
    if !attach_support::is_root("a_non_root_user_attaches_to_its_own_jvm") {
        return;
    }
    let home = jdk17();
    let mut jvm = Jvm::start(&home, &[], RunAs::Nobody);
    // Its own JVM is listed for it.
    let listed = as_user(NOBODY, "list");
    let row: Vec<&str> = listed
        .split('|')
        .map(|row| row.split_whitespace().collect::<Vec<_>>())
        .find(|cols| cols.first() == Some(&jvm.pid.to_string().as_str()))
        .unwrap_or_else(|| panic!("JVM {} not listed for nobody: {listed}", jvm.pid));
    assert_eq!(row[1], "nobody", "{listed}");
    assert!(row[2].starts_with("17"), "{listed}");
    assert_eq!(row[3], "Sleeper", "{listed}");
    let result = as_user(
        NOBODY,
        &format!("load {} {} x", jvm.pid, missing_library().display()),
    );
    assert!(result.starts_with("load-failed "), "{result}");
    assert!(
        result.contains("cannot open shared object file"),
        "{result}"
    );
    let options = format!("{}=as-nobody", fixtures().agent_jar.display());
    let result = as_user(
        NOBODY,
        &format!(
            "load {} {} {options}",
            jvm.pid,
            home.join("lib/libinstrument.so").display()
        ),
    );
    assert_eq!(result, "ok");
    assert!(jvm.wait_for_output("agentmain:as-nobody", Duration::from_secs(10)));
    assert!(jvm.alive());
    assert_no_trigger_files(&jvm);
}

#[test]
fn a_non_root_user_is_refused_another_users_jvm() {
    if !attach_support::is_root("a_non_root_user_is_refused_another_users_jvm") {
        return;
    }
    let mut jvm = Jvm::start(&jdk17(), &[], RunAs::Nobody);
    let result = as_user(STRANGER, &format!("inspect {}", jvm.pid));
    assert_eq!(
        result,
        format!(
            "permission-denied PID {} belongs to user nobody; sprig runs as {STRANGER}: run sprig as nobody or as root",
            jvm.pid
        )
    );
    let result = as_user(
        STRANGER,
        &format!("load {} {} x", jvm.pid, missing_library().display()),
    );
    assert!(result.starts_with("other PID"), "{result}");
    assert!(result.contains("belongs to user nobody"), "{result}");
    // The stranger sees no JVM at all, and says so.
    let listed = as_user(STRANGER, "list");
    assert_eq!(
        listed,
        format!(
            "no running HotSpot JVMs of user {STRANGER} found (JVMs of other users need root)|"
        )
    );
    assert!(!Path::new(&format!("/tmp/.java_pid{}", jvm.pid)).exists());
    assert!(!jvm.output().contains("Full thread dump"));
    assert!(jvm.alive());
}

/// PIDs wrap (at 32768 here), and a JVM that was killed leaves its attach
/// socket in /tmp: the JVM that reuses its PID must still be attachable,
/// whether the dead JVM's socket belongs to another user or to its own.
#[test]
fn a_dead_jvms_socket_under_the_same_pid_is_not_an_obstacle() {
    if !attach_support::is_root("a_dead_jvms_socket_under_the_same_pid_is_not_an_obstacle") {
        return;
    }
    let home = jdk17();
    for owner in [0, NOBODY] {
        let mut jvm = Jvm::start(&home, &[], RunAs::Nobody);
        let info = jvm::inspect(jvm.pid).unwrap();
        let socket = format!("/tmp/.java_pid{}", jvm.pid);
        // A socket nobody listens on any more, as a SIGKILLed JVM leaves it.
        drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
        std::os::unix::fs::chown(&socket, Some(owner), Some(owner)).unwrap();
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600)).unwrap();
        let err = attach::load_agent(&info, &missing_library(), "", ATTACH_TIMEOUT).unwrap_err();
        assert!(
            matches!(err, AttachError::AgentLoadFailed { code: Some(-1), .. }),
            "stale socket of uid {owner}: {err:?}"
        );
        assert_no_trigger_files(&jvm);
        assert!(!jvm.output().contains("Full thread dump"));
        assert!(jvm.alive());
    }
}

#[test]
fn the_same_user_with_another_group_is_told_so() {
    if !attach_support::is_root("the_same_user_with_another_group_is_told_so") {
        return;
    }
    let jvm = Jvm::start(&jdk17(), &[], RunAs::Nobody);
    let result = as_user_group(NOBODY, STRANGER, &format!("inspect {}", jvm.pid));
    assert_eq!(
        result,
        format!(
            "group-mismatch PID {} runs with group nogroup; sprig runs with group {STRANGER}: run sprig with group nogroup (sg nogroup -c 'sprig ...') or as root",
            jvm.pid
        )
    );
    assert!(!Path::new(&format!("/tmp/.java_pid{}", jvm.pid)).exists());
}

#[test]
fn concurrent_attaches_to_one_jvm_all_succeed() {
    if !attach_support::is_root("concurrent_attaches_to_one_jvm_all_succeed") {
        return;
    }
    let home = jdk17();
    let mut jvm = Jvm::start(&home, &[], RunAs::Nobody);
    let info = jvm::inspect(jvm.pid).unwrap();
    let lib = home.join("lib/libinstrument.so");
    let jar = fixtures().agent_jar.display().to_string();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..3)
            .map(|i| {
                let (info, lib, options) = (&info, &lib, format!("{jar}=concurrent-{i}"));
                s.spawn(move || attach::load_agent(info, lib, &options, ATTACH_TIMEOUT))
            })
            .collect();
        for h in handles {
            h.join().unwrap().expect("every concurrent load succeeds");
        }
    });
    for i in 0..3 {
        let line = format!("agentmain:concurrent-{i}");
        assert!(
            jvm.wait_for_output(&line, Duration::from_secs(10)),
            "{}",
            jvm.output()
        );
    }
    // One SIGQUIT for all: a second one would have printed a thread dump.
    assert!(
        !jvm.output().contains("Full thread dump"),
        "{}",
        jvm.output()
    );
    assert!(jvm.alive());
    assert_no_trigger_files(&jvm);
    // This thread's credentials were never switched.
    let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
    let uid = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    assert_eq!(
        uid.split_whitespace().collect::<Vec<_>>(),
        ["Uid:", "0", "0", "0", "0"]
    );
}

/// HotSpot ignores a trigger file that is not its user's (or root's), and
/// answers the SIGQUIT with a thread dump: another user who plants one in
/// /tmp, or in a working directory it may write, would block every attach.
/// sprig names the file and its owner instead, and does not signal.
#[test]
fn a_trigger_file_planted_by_another_user_is_named_and_no_signal_sent() {
    if !attach_support::is_root(
        "a_trigger_file_planted_by_another_user_is_named_and_no_signal_sent",
    ) {
        return;
    }
    let home = jdk17();
    let timeout = Duration::from_secs(6);
    // In /tmp: the JVM's working directory is root's, so the trigger goes
    // to /tmp, where a stranger's file already is.
    let mut jvm = Jvm::start(&home, &[], RunAs::Nobody);
    let info = jvm::inspect(jvm.pid).unwrap();
    let planted = PathBuf::from(format!("/tmp/.attach_pid{}", jvm.pid));
    std::fs::write(&planted, b"").unwrap();
    std::os::unix::fs::chown(&planted, Some(STRANGER), Some(STRANGER)).unwrap();
    let result = attach::load_agent(&info, &missing_library(), "", timeout);
    let _ = std::fs::remove_file(&planted);
    let err = result.unwrap_err();
    assert!(matches!(err, AttachError::ForeignTrigger { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.starts_with(&format!(
            "JVM {} cannot be asked to open its attach socket: {} is a file of uid {STRANGER}, not of the JVM's user nobody",
            jvm.pid,
            info.root.join(format!("tmp/.attach_pid{}", jvm.pid)).display()
        )),
        "{text}"
    );
    assert!(!text.contains('\n'), "{text}");
    // In the working directory, which HotSpot reads first: a link there is
    // refused whatever it points to.
    std::os::unix::fs::chown(&jvm.cwd.0, Some(NOBODY), Some(NOBODY)).unwrap();
    let link = jvm.cwd.0.join(format!(".attach_pid{}", jvm.pid));
    std::os::unix::fs::symlink("/nonexistent", &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(STRANGER), Some(STRANGER)).unwrap();
    let err = attach::load_agent(&info, &missing_library(), "", timeout).unwrap_err();
    assert!(
        err.to_string().contains(&format!(
            "/proc/{0}/cwd/.attach_pid{0} is a symbolic link of uid {STRANGER}",
            jvm.pid
        )),
        "{err}"
    );
    std::fs::remove_file(&link).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !jvm.output().contains("Full thread dump"),
        "{}",
        jvm.output()
    );
    assert!(jvm.alive());
    // With the files gone the attach goes through.
    let err = attach::load_agent(&info, &missing_library(), "", ATTACH_TIMEOUT).unwrap_err();
    assert!(
        matches!(err, AttachError::AgentLoadFailed { code: Some(-1), .. }),
        "{err:?}"
    );
    assert_no_trigger_files(&jvm);
}
