//! JVM discovery: which processes are HotSpot JVMs sprig may attach to, and
//! what they run. Everything here reads `/proc` and the JVM's PerfData file;
//! nothing sends a signal, so inspecting any PID is harmless.
//!
//! Any process can map a file named `libjvm.so`, and its owner controls the
//! files read through its root (`release`, PerfData): those are read
//! through [`crate::beneath`] (no link followed, regular files only, never
//! blocking, capped), the /proc files the owner can grow are read with a
//! cap or line by line, and each process's inspection has a time limit
//! ([`INSPECT_LIMIT`]).
//!
//! Its modules: `status` (/proc/PID/status and the start time), `maps` (the
//! VM library and the PerfData file a process maps), `cmdline` (the main
//! class and the options, from the command line and environment), `files`
//! (`release` and PerfData, read through the JVM's root), `perfdata` (the
//! PerfData format), `limit` (the time limit of one inspection).

mod cmdline;
mod files;
mod limit;
mod maps;
mod perfdata;
mod status;

pub use perfdata::{PerfDataError, PerfStrings};

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cmdline::{attach_disabled, main_from_cmdline, read_cmdline, short_cmdline};
use files::{read_perfdata, release_version};
use limit::time_limited;
use maps::{VmLibrary, java_home_of, perfdata_in_maps, read_maps, vm_library};
use status::{ProcStatus, read_start_time};

/// How long the inspection of one process may take. Reading /proc/PID/maps
/// waits for the process's memory map lock, which its owner can hold (a
/// fault on a hung file system); sprig gives up on that process instead.
/// Generous: a JVM's files take milliseconds to read, even on a loaded
/// machine.
pub const INSPECT_LIMIT: Duration = Duration::from_secs(2);

/// The oldest Java feature release sprig's agent runs on: its probe class
/// is a class file of version 55 (Java 11), and JDK 8 has neither the
/// module system nor `jdk.internal.misc.Unsafe` it relies on.
pub const OLDEST_JAVA: u32 = 11;

/// The feature release of a `java.version` string: `1.8.0_392` is 8,
/// `11.0.13` is 11, `25` is 25, `26-ea` is 26.
pub fn java_major(version: &str) -> Option<u32> {
    let mut parts = version.split(['.', '-', '+', '_']);
    let first: u32 = parts.next()?.parse().ok()?;
    if first == 1 {
        return parts.next()?.parse().ok();
    }
    Some(first)
}

/// A HotSpot JVM that `inspect` confirmed without signalling it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JvmProcess {
    /// PID in sprig's PID namespace.
    pub pid: u32,
    /// Effective uid of the JVM (HotSpot checks it against the attacher's).
    pub uid: u32,
    /// Effective gid of the JVM.
    pub gid: u32,
    /// Name of `uid` (from /etc/passwd), or the number when it has none.
    pub user: String,
    /// Main class, jar or module/class, like `jps -l`; `?` when unknown.
    pub main: String,
    /// `java.version` of the JVM, e.g. `17.0.15`.
    pub java_version: Option<String>,
    /// `java.home` of the JVM, as a path inside the JVM's own root.
    pub java_home: Option<PathBuf>,
    /// `java.vm.name`, e.g. `OpenJDK 64-Bit Server VM`.
    pub vm_name: Option<String>,
    /// PID inside the JVM's own PID namespace (last NSpid entry).
    pub ns_pid: u32,
    /// `/proc/PID/root`: the JVM's file system root (containers).
    pub root: PathBuf,
    /// Working directory of the JVM as sprig sees it (best effort).
    pub cwd: PathBuf,
    /// Start time in clock ticks since boot: tells a reused PID apart.
    pub start_time: u64,
    /// The JVM runs with `-XX:+DisableAttachMechanism` (as far as its
    /// arguments show): it will never open an attach socket.
    pub attach_disabled: bool,
}

/// Why a PID is not a JVM sprig can attach to. One line each.
#[derive(Debug, thiserror::Error)]
pub enum JvmError {
    #[error("no process with PID {pid}")]
    NoSuchProcess { pid: u32 },
    #[error(
        "cannot read {}: the kernel protects PID {pid} (another container, a ptrace policy \
         or a security module), so sprig cannot check it is a JVM and sends it no signal",
        path.display()
    )]
    Protected { pid: u32, path: PathBuf },
    #[error("PID {pid} is a thread of process {tgid}: use PID {tgid}")]
    Thread { pid: u32, tgid: u32 },
    #[error("PID {pid} is `{comm}` ({cmdline}), not a HotSpot JVM: sprig sends it no signal")]
    NotAJvm {
        pid: u32,
        comm: String,
        cmdline: String,
    },
    #[error(
        "PID {pid} belongs to user {owner}; sprig runs as {me}: run sprig as {owner} or as root"
    )]
    PermissionDenied { pid: u32, owner: String, me: String },
    #[error(
        "PID {pid} runs with group {group}; sprig runs with group {mine}: run sprig with group {group} (sg {group} -c 'sprig ...') or as root"
    )]
    GroupMismatch {
        pid: u32,
        group: String,
        mine: String,
    },
    #[error("PID {pid} is a {vm} JVM, not HotSpot: sprig can attach only to HotSpot JVMs")]
    NotHotSpot { pid: u32, vm: String },
    #[error("PID {pid} exited while sprig was looking at it")]
    Exited { pid: u32 },
    #[error(
        "PID {pid} did not let sprig read its /proc files within {:.1} s (a hung file system, or a process holding its memory map locked): sprig sends it no signal",
        waited.as_secs_f64()
    )]
    Unresponsive { pid: u32, waited: Duration },
    #[error("cannot read {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
}

/// Confirms that `pid` is a HotSpot JVM the caller may attach to, without
/// signalling it, and describes it. Gives up after [`INSPECT_LIMIT`].
pub fn inspect(pid: u32) -> Result<JvmProcess, JvmError> {
    inspect_within(pid, INSPECT_LIMIT)
}

/// [`inspect`] given at most `limit`.
fn inspect_within(pid: u32, limit: Duration) -> Result<JvmProcess, JvmError> {
    time_limited(limit, move || inspect_now(pid))
        .unwrap_or(Err(JvmError::Unresponsive { pid, waited: limit }))
}

fn inspect_now(pid: u32) -> Result<JvmProcess, JvmError> {
    if pid == 0 {
        return Err(JvmError::NoSuchProcess { pid });
    }
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let status_text = match fs::read_to_string(proc_dir.join("status")) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(JvmError::NoSuchProcess { pid });
        }
        Err(e) => return Err(read_error(pid, &proc_dir.join("status"), e)),
    };
    let status = ProcStatus::parse(&status_text).ok_or_else(|| JvmError::Io {
        path: proc_dir.join("status"),
        source: io::Error::new(io::ErrorKind::InvalidData, "unexpected format"),
    })?;
    if status.tgid != pid {
        return Err(JvmError::Thread {
            pid,
            tgid: status.tgid,
        });
    }
    if status.state == 'Z' || status.state == 'X' {
        return Err(JvmError::Exited { pid });
    }

    let (my_uid, my_gid) = crate::sys::effective_ids();
    if my_uid != 0 && my_uid != status.uid {
        return Err(JvmError::PermissionDenied {
            pid,
            owner: user_name(status.uid),
            me: user_name(my_uid),
        });
    }
    // HotSpot accepts only peers with its own effective uid *and* gid (or
    // root), and the kernel hides /proc/PID/root from a different group.
    if my_uid != 0 && my_gid != status.gid {
        return Err(JvmError::GroupMismatch {
            pid,
            group: group_name(status.gid),
            mine: group_name(my_gid),
        });
    }

    let maps_path = proc_dir.join("maps");
    let maps = read_maps(&maps_path).map_err(|e| read_error(pid, &maps_path, e))?;
    let libjvm = match vm_library(&maps) {
        VmLibrary::HotSpot(path) => path,
        VmLibrary::OpenJ9 => {
            return Err(JvmError::NotHotSpot {
                pid,
                vm: "OpenJ9".to_owned(),
            });
        }
        VmLibrary::None => {
            return Err(JvmError::NotAJvm {
                pid,
                comm: status.name.clone(),
                cmdline: short_cmdline(&read_cmdline(&proc_dir)),
            });
        }
    };

    let root = proc_dir.join("root");
    let perf = perfdata_in_maps(&maps, status.ns_pid).and_then(|path| read_perfdata(&root, &path));
    let perf_str = |key: &str| {
        perf.as_ref()
            .and_then(|p| p.get(key))
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    if let Some(vm) = perf_str("java.property.java.vm.name")
        && (vm.contains("OpenJ9") || vm.contains("J9"))
    {
        return Err(JvmError::NotHotSpot { pid, vm });
    }

    let cmdline = read_cmdline(&proc_dir);
    let java_home = perf_str("java.property.java.home")
        .map(PathBuf::from)
        .or_else(|| java_home_of(&libjvm));
    let java_version = perf_str("java.property.java.version").or_else(|| {
        java_home
            .as_deref()
            .and_then(|home| release_version(&root, home))
    });
    let main = perf_str("sun.rt.javaCommand")
        .and_then(|c| c.split_whitespace().next().map(str::to_owned))
        .or_else(|| main_from_cmdline(&cmdline))
        .unwrap_or_else(|| "?".to_owned());
    let attach_disabled = attach_disabled(perf.as_ref(), &proc_dir, &cmdline);
    let start_time = read_start_time(&proc_dir).ok_or(JvmError::Exited { pid })?;
    let cwd = fs::read_link(proc_dir.join("cwd")).unwrap_or_default();

    // The process may have exited (and its PID been reused) while we read.
    if !proc_dir.join("status").exists() || read_start_time(&proc_dir) != Some(start_time) {
        return Err(JvmError::Exited { pid });
    }
    Ok(JvmProcess {
        pid,
        uid: status.uid,
        gid: status.gid,
        user: user_name(status.uid),
        main,
        java_version,
        java_home,
        vm_name: perf_str("java.property.java.vm.name"),
        ns_pid: status.ns_pid,
        root,
        cwd,
        start_time,
        attach_disabled,
    })
}

/// Whether process `pid` has a SIGQUIT handler installed. A HotSpot JVM has
/// one once its signal support is up, unless it runs with `-Xrs`; without
/// one, SIGQUIT would terminate it, so sprig must not send it.
pub fn handles_sigquit(pid: u32) -> Result<bool, JvmError> {
    let path = PathBuf::from(format!("/proc/{pid}/status"));
    let text = fs::read_to_string(&path).map_err(|e| read_error(pid, &path, e))?;
    let status = ProcStatus::parse(&text).ok_or(JvmError::Exited { pid })?;
    if status.state == 'Z' || status.state == 'X' {
        return Err(JvmError::Exited { pid });
    }
    Ok(status.sig_caught & (1 << (libc::SIGQUIT - 1)) != 0)
}

/// Every HotSpot JVM the caller may attach to (all of them for root, the
/// caller's own otherwise), sorted by PID. sprig's own process is skipped.
pub fn list_jvms() -> Vec<JvmProcess> {
    survey().jvms
}

/// What [`survey`] found.
#[derive(Debug, Default)]
pub struct Survey {
    /// The JVMs, sorted by PID.
    pub jvms: Vec<JvmProcess>,
    /// Processes whose inspection overran [`INSPECT_LIMIT`], skipped.
    pub unresponsive: Vec<JvmError>,
}

/// [`list_jvms`], with the processes that could not be inspected in time.
pub fn survey() -> Survey {
    let me = std::process::id();
    let Ok(dir) = fs::read_dir("/proc") else {
        return Survey::default();
    };
    let mut pids: Vec<u32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&p| p != me)
        .collect();
    pids.sort_unstable();
    let mut survey = Survey::default();
    for pid in pids {
        match inspect(pid) {
            Ok(jvm) => survey.jvms.push(jvm),
            Err(e @ JvmError::Unresponsive { .. }) => survey.unresponsive.push(e),
            Err(_) => {}
        }
    }
    survey
}

/// The user name of `uid` from /etc/passwd, or the number.
pub fn user_name(uid: u32) -> String {
    name_in("/etc/passwd", uid)
}

/// The group name of `gid` from /etc/group, or the number.
pub fn group_name(gid: u32) -> String {
    name_in("/etc/group", gid)
}

/// The name of `id` in a passwd-style file (`name:x:id:...`), or the number.
fn name_in(file: &str, id: u32) -> String {
    fs::read_to_string(file)
        .ok()
        .and_then(|text| {
            text.lines().find_map(|line| {
                let mut f = line.split(':');
                let name = f.next()?;
                let n: u32 = f.nth(1)?.parse().ok()?;
                (n == id).then(|| name.to_owned())
            })
        })
        .unwrap_or_else(|| id.to_string())
}

fn read_error(pid: u32, path: &Path, e: io::Error) -> JvmError {
    match e.kind() {
        io::ErrorKind::NotFound => JvmError::Exited { pid },
        io::ErrorKind::PermissionDenied => {
            let owner_uid = fs::metadata(format!("/proc/{pid}")).map(|m| m.uid()).ok();
            let my_uid = crate::sys::effective_ids().0;
            if my_uid == 0 || owner_uid == Some(my_uid) {
                // Not a question of users: the kernel protects the process
                // (another namespace, a ptrace policy, a security module).
                return JvmError::Protected {
                    pid,
                    path: path.to_owned(),
                };
            }
            JvmError::PermissionDenied {
                pid,
                owner: owner_uid.map_or_else(|| "?".to_owned(), user_name),
                me: user_name(my_uid),
            }
        }
        _ if e.raw_os_error() == Some(libc::ESRCH) => JvmError::Exited { pid },
        _ => JvmError::Io {
            path: path.to_owned(),
            source: e,
        },
    }
}

/// The start time of process `pid` in clock ticks since boot (what
/// [`JvmProcess::start_time`] holds); `None` when there is no such process.
pub fn start_time(pid: u32) -> Option<u64> {
    read_start_time(Path::new(&format!("/proc/{pid}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_major_reads_old_and_new_version_strings() {
        assert_eq!(java_major("1.8.0_392"), Some(8));
        assert_eq!(java_major("1.7.0"), Some(7));
        assert_eq!(java_major("11.0.13"), Some(11));
        assert_eq!(java_major("17.0.15"), Some(17));
        assert_eq!(java_major("21"), Some(21));
        assert_eq!(java_major("26-ea"), Some(26));
        assert_eq!(java_major("25+36"), Some(25));
        assert_eq!(java_major(""), None);
        assert_eq!(java_major("x"), None);
    }
    use std::thread;

    #[test]
    fn work_that_overruns_its_limit_is_given_up() {
        let started = std::time::Instant::now();
        let slow = time_limited(Duration::from_millis(100), || {
            thread::sleep(Duration::from_secs(5));
            1
        });
        assert_eq!(slow, None);
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(time_limited(Duration::from_secs(5), || 7), Some(7));
        let gone = JvmError::Unresponsive {
            pid: 9,
            waited: INSPECT_LIMIT,
        };
        assert!(gone.to_string().contains("PID 9"), "{gone}");
        assert!(matches!(
            inspect_within(std::process::id(), Duration::from_secs(10)),
            Err(JvmError::NotAJvm { .. })
        ));
    }

    #[test]
    fn no_process_for_pid_zero_and_huge() {
        assert!(matches!(
            inspect(0),
            Err(JvmError::NoSuchProcess { pid: 0 })
        ));
        assert!(matches!(
            inspect(u32::MAX),
            Err(JvmError::NoSuchProcess { .. })
        ));
    }
}
