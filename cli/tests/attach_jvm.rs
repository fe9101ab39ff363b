//! JVM discovery against real processes: `jvm::inspect`, `jvm::list_jvms`
//! and `sprig list`, none of which may signal anything.

mod attach_support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use attach_support::{Jvm, RunAs, jdk17, jdk25, unused_pid};
use sprig::jvm::{self, JvmError};

#[test]
fn inspects_a_jdk17_jvm() {
    let home = jdk17();
    let jvm = Jvm::start(&home, &[], RunAs::Me);
    let info = jvm::inspect(jvm.pid).expect("inspect a running JDK 17");
    assert_eq!(info.pid, jvm.pid);
    assert_eq!(info.main, "Sleeper");
    let version = info.java_version.as_deref().unwrap_or("");
    assert!(version.starts_with("17"), "version {version:?}");
    let java_home = info.java_home.clone().expect("java.home");
    assert_eq!(
        java_home.canonicalize().unwrap(),
        home.canonicalize().unwrap()
    );
    assert_eq!(info.ns_pid, jvm.pid, "no PID namespace here");
    assert_eq!(info.root, Path::new(&format!("/proc/{}/root", jvm.pid)));
    assert_eq!(info.cwd, jvm.cwd.0);
    assert_eq!(info.uid, sprig_uid());
    assert!(!info.attach_disabled);
    assert!(
        info.vm_name.as_deref().unwrap_or("").contains("Server VM"),
        "{info:?}"
    );
    attach_support::assert_no_trigger_files(&jvm);
}

#[test]
fn inspects_a_jdk25_jvm() {
    let Some(home) = jdk25() else { return };
    let jvm = Jvm::start(&home, &[], RunAs::Me);
    let info = jvm::inspect(jvm.pid).expect("inspect a running JDK 25");
    assert_eq!(info.main, "Sleeper");
    let version = info.java_version.as_deref().unwrap_or("");
    assert!(version.starts_with("25"), "version {version:?}");
    // Read from its PerfData (the fallback has no VM name).
    assert!(info.vm_name.is_some(), "{info:?}");
}

#[test]
fn inspects_without_perfdata_from_the_command_line() {
    // -XX:-UsePerfData: no hsperfdata file, so main class and version come
    // from /proc/PID/cmdline, the mapped libjvm.so and the JDK's release file.
    let home = jdk17();
    let jvm = Jvm::start(
        &home,
        &["-XX:-UsePerfData", "-XX:+DisableAttachMechanism"],
        RunAs::Me,
    );
    assert!(!Path::new(&format!("/tmp/hsperfdata_root/{}", jvm.pid)).exists());
    let info = jvm::inspect(jvm.pid).expect("inspect");
    assert_eq!(info.main, "Sleeper");
    assert!(
        info.java_version.as_deref().unwrap_or("").starts_with("17"),
        "{info:?}"
    );
    assert!(info.attach_disabled, "flag seen on the command line");
    assert_eq!(info.vm_name, None, "nothing read from PerfData");
}

#[test]
fn sees_disable_attach_mechanism_in_perfdata() {
    let jvm = Jvm::start(&jdk17(), &["-XX:+DisableAttachMechanism"], RunAs::Me);
    assert!(jvm::inspect(jvm.pid).unwrap().attach_disabled);
}

#[test]
fn a_non_jvm_is_refused_and_not_signalled() {
    let mut sleep = Command::new("sleep")
        .arg("100")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = sleep.id();
    // Let exec finish, so /proc shows `sleep` rather than the forked test.
    let mut is_sleep = false;
    for _ in 0..500 {
        // comm changes before the new command line is in place.
        if std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sleep")
            && std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.starts_with(b"sleep\0"))
        {
            is_sleep = true;
            break;
        }
        thread::sleep(Duration::from_millis(10));
    }
    assert!(is_sleep);
    let err = jvm::inspect(pid).unwrap_err();
    let text = err.to_string();
    let _ = sleep.try_wait();
    let alive = matches!(sleep.try_wait(), Ok(None));
    let _ = sleep.kill();
    let _ = sleep.wait();
    assert!(matches!(err, JvmError::NotAJvm { .. }), "{err:?}");
    assert!(
        text.contains("`sleep`") && text.contains("sleep 100"),
        "{text}"
    );
    assert!(text.contains("sprig sends it no signal"), "{text}");
    assert!(!text.contains('\n'));
    assert!(alive, "sleep must not have received a signal");
}

#[test]
fn an_unknown_pid_is_reported() {
    let pid = unused_pid();
    let err = jvm::inspect(pid).unwrap_err();
    assert!(matches!(err, JvmError::NoSuchProcess { .. }), "{err:?}");
    assert_eq!(err.to_string(), format!("no process with PID {pid}"));
}

#[test]
fn a_thread_id_points_to_its_process() {
    let jvm = Jvm::start(&jdk17(), &[], RunAs::Me);
    let tid: u32 = std::fs::read_dir(format!("/proc/{}/task", jvm.pid))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .find(|&t| t != jvm.pid)
        .expect("a JVM has more than one thread");
    let err = jvm::inspect(tid).unwrap_err();
    assert!(
        matches!(err, JvmError::Thread { tgid, .. } if tgid == jvm.pid),
        "{err:?}"
    );
}

#[test]
fn list_shows_running_jvms_sorted() {
    let a = Jvm::start(&jdk17(), &[], RunAs::Me);
    let b = Jvm::start(&jdk17(), &[], RunAs::Me);
    let listed = jvm::list_jvms();
    assert!(listed.windows(2).all(|w| w[0].pid < w[1].pid), "sorted");
    for j in [&a, &b] {
        let found = listed.iter().find(|l| l.pid == j.pid).expect("listed");
        assert_eq!(found.main, "Sleeper");
    }
    assert!(listed.iter().all(|l| l.pid != std::process::id()));

    let mut out = Vec::new();
    sprig::list::run(&mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let header = text.lines().next().unwrap();
    assert!(
        header.starts_with("PID")
            && header.contains("USER")
            && header.contains("JDK")
            && header.ends_with("MAIN"),
        "{text}"
    );
    for j in [&a, &b] {
        let row = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(&j.pid.to_string()))
            .unwrap_or_else(|| panic!("no row for {} in\n{text}", j.pid));
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols[1], jvm::user_name(sprig_uid()));
        assert!(cols[2].starts_with("17"), "{row}");
        assert_eq!(cols[3], "Sleeper");
    }
}

fn sprig_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").unwrap().uid()
}

#[test]
fn a_stale_perfdata_file_with_the_same_pid_is_ignored() {
    // A file named like the JVM's PerfData but not mapped by it (left by a
    // dead JVM that had the same PID) must not describe it.
    let home = jdk17();
    let donor = Jvm::start(&home, &[], RunAs::Me);
    let jvm = Jvm::start(&home, &["-XX:-UsePerfData"], RunAs::Me);
    let user = jvm::user_name(sprig_uid());
    let donor_file = format!("/tmp/hsperfdata_{user}/{}", donor.pid);
    let planted = format!("/tmp/hsperfdata_{user}/{}", jvm.pid);
    assert!(!Path::new(&planted).exists());
    std::fs::copy(&donor_file, &planted).unwrap();
    let info = jvm::inspect(jvm.pid);
    let _ = std::fs::remove_file(&planted);
    let info = info.unwrap();
    assert_eq!(info.vm_name, None, "read the planted file: {info:?}");
    assert_eq!(info.main, "Sleeper");
}

#[test]
fn sees_disable_attach_mechanism_in_the_environment() {
    let env = [("JAVA_TOOL_OPTIONS", "-XX:+DisableAttachMechanism")];
    // Through PerfData's VM arguments, and through the environment itself.
    for flags in [&[][..], &["-XX:-UsePerfData"][..]] {
        let jvm = Jvm::start_with_env(&jdk17(), flags, &env, RunAs::Me);
        let info = jvm::inspect(jvm.pid).unwrap();
        assert!(info.attach_disabled, "{flags:?}: {info:?}");
    }
    // A later setting on the command line wins over the environment.
    let jvm = Jvm::start_with_env(&jdk17(), &["-XX:-DisableAttachMechanism"], &env, RunAs::Me);
    let info = jvm::inspect(jvm.pid).unwrap();
    assert!(!info.attach_disabled);
    // And HotSpot agrees: the attach goes through to a load error.
    let missing = Path::new(env!("CARGO_TARGET_TMPDIR")).join("no-such-agent.so");
    let err =
        sprig::attach::load_agent(&info, &missing, "", attach_support::ATTACH_TIMEOUT).unwrap_err();
    assert!(
        matches!(err, sprig::attach::AttachError::AgentLoadFailed { .. }),
        "{err:?}"
    );
    attach_support::assert_no_trigger_files(&jvm);
}
