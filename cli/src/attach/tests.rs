//! The attach steps against real processes and directories: the held
//! process and SIGQUIT, the trigger file, a stale socket; and the checks of
//! what HotSpot would reject.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use super::socket::connect_existing;
use super::target::{Target, TargetCredentials};
use super::trigger::TriggerFile;
use super::*;
use crate::jvm::{self, JvmError, JvmProcess};
use crate::sys;

#[test]
fn validation_rejects_what_hotspot_cannot_take() {
    assert!(matches!(
        validate(Path::new("lib.so"), ""),
        Err(AttachError::InvalidArgument { .. })
    ));
    assert!(matches!(
        validate(Path::new("/lib.so"), "a\0b"),
        Err(AttachError::InvalidArgument { .. })
    ));
    assert!(matches!(
        validate(Path::new("/lib.so"), &"x".repeat(MAX_ARG_LEN + 1)),
        Err(AttachError::InvalidArgument { .. })
    ));
    assert_eq!(validate(Path::new("/lib.so"), "a=b").unwrap(), "/lib.so");
}

/// A `sleep` child, killed and reaped on drop.
struct Sleeper(std::process::Child);

impl Sleeper {
    fn start() -> Sleeper {
        Sleeper(
            std::process::Command::new("sleep")
                .arg("30")
                .spawn()
                .unwrap(),
        )
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What `inspect` would say of `pid`, enough for [`Target`].
fn described(pid: u32) -> JvmProcess {
    JvmProcess {
        pid,
        uid: 0,
        gid: 0,
        user: String::new(),
        main: String::new(),
        java_version: None,
        java_home: None,
        vm_name: None,
        ns_pid: pid,
        root: PathBuf::from("/"),
        cwd: PathBuf::from("/"),
        start_time: jvm::start_time(pid).unwrap(),
        attach_disabled: false,
    }
}

#[test]
fn sigquit_never_reaches_a_process_that_took_the_pid() {
    let first = Sleeper::start();
    let pid = first.0.id();
    let target = Target::hold(&described(pid)).unwrap();
    // Start times count clock ticks (10 ms): let the next process start
    // in a later one, as a PID takes far longer than that to come round.
    thread::sleep(Duration::from_millis(50));
    drop(first);
    // Give the PID to a new process: as root, by setting the last PID
    // handed out (other processes forking meanwhile may take it: retry).
    let mut second = None;
    for _ in 0..20 {
        if fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).is_err() {
            eprintln!("note: cannot set ns_last_pid (needs root): skipped");
            return;
        }
        let s = Sleeper::start();
        if s.0.id() == pid {
            second = Some(s);
            break;
        }
    }
    let Some(mut second) = second else {
        eprintln!("note: could not get PID {pid} again: skipped");
        return;
    };
    let sent = target.send_sigquit();
    // Without pidfds: the start time, checked again before the signal.
    let fallback = Target {
        pid,
        start_time: target.start_time,
        pidfd: None,
    };
    assert_eq!(
        fallback.send_sigquit().map_err(|e| e.raw_os_error()),
        Err(Some(libc::ESRCH))
    );
    thread::sleep(Duration::from_millis(100));
    assert!(
        second.0.try_wait().unwrap().is_none(),
        "SIGQUIT killed the process that took PID {pid} (send: {sent:?})"
    );
    assert_eq!(
        sent.map_err(|e| e.raw_os_error()),
        Err(Some(libc::ESRCH)),
        "the signal must fail as the held process is gone"
    );
}

#[test]
fn holding_a_process_that_is_gone_fails() {
    let s = Sleeper::start();
    let described = described(s.0.id());
    drop(s);
    assert!(matches!(
        Target::hold(&described),
        Err(AttachError::Jvm(JvmError::Exited { .. }))
    ));
}

/// A fresh directory under the system temp dir, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let p = std::env::temp_dir().join(format!("sprig-attach-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[test]
fn trigger_is_removed_where_it_was_made_not_where_cwd_points_later() {
    use std::io::{BufRead, BufReader};
    let scratch = Scratch::new("trigger");
    let (first, other) = (scratch.0.join("first"), scratch.0.join("other"));
    fs::create_dir_all(&first).unwrap();
    fs::create_dir_all(&other).unwrap();
    // A process whose working directory moves when told: as a JVM whose
    // owner makes it chdir after sprig made its trigger file.
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg("read line; cd \"$1\" && echo moved && exec sleep 30")
        .arg("sh")
        .arg(&other)
        .current_dir(&first)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut jvm = described(pid);
    jvm.root = scratch.0.clone();
    let name = format!(".attach_pid{pid}");
    let trigger = TriggerFile::create(&jvm, &TargetCredentials(None)).unwrap();
    assert!(first.join(&name).is_file(), "made in the working directory");
    // A file of the same name where the working directory goes next.
    fs::write(other.join(&name), b"not sprig's").unwrap();
    writeln!(child.stdin.as_mut().unwrap()).unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "moved");
    drop(trigger);
    let kept = other.join(&name).exists();
    let removed = !first.join(&name).exists();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        kept,
        "sprig removed a file in the JVM's new working directory"
    );
    assert!(removed, "sprig left its trigger file behind");
}

#[test]
fn stale_socket_is_not_removed_through_a_link() {
    use std::os::unix::net::UnixListener;
    if sys::effective_ids().0 != 0 {
        eprintln!("note: needs root (sockets of another uid): skipped");
        return;
    }
    let scratch = Scratch::new("socket");
    let root = scratch.0.join("root");
    let elsewhere = scratch.0.join("elsewhere");
    fs::create_dir_all(&root).unwrap();
    fs::create_dir_all(&elsewhere).unwrap();
    // The JVM's owner made its /tmp a link to a directory holding
    // another user's attach socket (another JVM's).
    std::os::unix::fs::symlink(&elsewhere, root.join("tmp")).unwrap();
    let sleeper = Sleeper::start();
    let mut jvm = described(sleeper.0.id());
    jvm.root = root.clone();
    jvm.uid = 65534;
    let name = format!(".java_pid{}", jvm.ns_pid);
    let _listener = UnixListener::bind(elsewhere.join(&name)).unwrap();
    std::os::unix::fs::lchown(elsewhere.join(&name), Some(4242), Some(4242)).unwrap();
    let socket = root.join("tmp").join(&name);
    let got = connect_existing(&jvm, &socket, &TargetCredentials(None));
    assert!(
        elsewhere.join(&name).exists(),
        "removed another user's socket through a link ({:?})",
        got.map(|s| s.is_some())
    );
}
