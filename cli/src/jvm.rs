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

mod perfdata;

pub use perfdata::{PerfDataError, PerfStrings};

use std::ffi::OsStr;
use std::fs;
use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use crate::beneath;

/// How long the inspection of one process may take. Reading /proc/PID/maps
/// waits for the process's memory map lock, which its owner can hold (a
/// fault on a hung file system); sprig gives up on that process instead.
/// Generous: a JVM's files take milliseconds to read, even on a loaded
/// machine.
pub const INSPECT_LIMIT: Duration = Duration::from_secs(2);
/// HotSpot's PerfData file is 32 KiB by default (`-XX:PerfDataMemorySize`);
/// its strings sit at the start, and no more than this is read.
const PERFDATA_CAP: u64 = 1 << 20;
/// A JDK's `release` file is well under a KiB; `JAVA_VERSION` is near the
/// top.
const RELEASE_CAP: u64 = 16 << 10;
/// The command line and environment are read up to this much.
const ARGS_CAP: u64 = 1 << 20;
/// /proc/PID/maps lines sprig keeps (the JVM library and the PerfData
/// file take a few each).
const MAPS_KEPT_LINES: usize = 256;

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

/// Runs `work` on a thread of its own and waits for it at most `limit`
/// (`None` then). A thread that overruns is left behind: it waits in the
/// kernel, and ends with the process. Where no thread can be started, the
/// work runs here, without the limit.
fn time_limited<T: Send + 'static>(
    limit: Duration,
    work: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    let work = std::sync::Arc::new(std::sync::Mutex::new(Some(work)));
    let theirs = std::sync::Arc::clone(&work);
    let spawned = thread::Builder::new()
        .name("sprig inspect".to_owned())
        .stack_size(256 << 10)
        .spawn(move || {
            let work = theirs.lock().ok().and_then(|mut w| w.take());
            if let Some(work) = work {
                let _ = tx.send(work());
            }
        });
    if spawned.is_err() {
        let work = work.lock().ok().and_then(|mut w| w.take())?;
        return Some(work());
    }
    rx.recv_timeout(limit).ok()
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

    let (my_uid, my_gid) = crate::attach::sys::effective_ids();
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

/// Whether the JVM's options disable attach: from PerfData (flags file and
/// VM arguments, environment options included), else from the command line
/// and the environment variables the JVM reads options from.
fn attach_disabled(perf: Option<&PerfStrings>, proc_dir: &Path, cmdline: &[String]) -> bool {
    if let Some(p) = perf {
        let args = [p.get("java.rt.vmFlags"), p.get("java.rt.vmArgs")]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" ");
        return attach_disabled_in(args.split_whitespace());
    }
    let env = read_environ(proc_dir);
    let var = |name: &str| {
        env.iter()
            .find_map(|(k, v)| (k == name).then_some(v.as_str()))
            .unwrap_or("")
    };
    // HotSpot's order: JAVA_TOOL_OPTIONS, JDK_JAVA_OPTIONS (via the
    // launcher), the command line, _JAVA_OPTIONS; the last setting wins.
    let args = var("JAVA_TOOL_OPTIONS")
        .split_whitespace()
        .chain(var("JDK_JAVA_OPTIONS").split_whitespace())
        .chain(cmdline.iter().skip(1).map(String::as_str))
        .chain(var("_JAVA_OPTIONS").split_whitespace());
    attach_disabled_in(args)
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
            let my_uid = crate::attach::sys::effective_ids().0;
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

/// The fields of /proc/PID/status sprig needs.
#[derive(Debug, PartialEq, Eq)]
struct ProcStatus {
    name: String,
    state: char,
    tgid: u32,
    /// Effective uid.
    uid: u32,
    /// Effective gid.
    gid: u32,
    ns_pid: u32,
    /// Signals with a handler installed (SigCgt bit n-1 for signal n).
    sig_caught: u64,
}

impl ProcStatus {
    fn parse(text: &str) -> Option<ProcStatus> {
        let field = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
                .map(str::trim)
        };
        let nth = |key: &str, n: usize| -> Option<u32> {
            field(key)?.split_whitespace().nth(n)?.parse().ok()
        };
        let pid = nth("Pid", 0)?;
        Some(ProcStatus {
            name: field("Name")?.to_owned(),
            state: field("State")?.chars().next()?,
            tgid: nth("Tgid", 0)?,
            uid: nth("Uid", 1)?,
            gid: nth("Gid", 1)?,
            // Kernels before 4.1 have no NSpid: no namespaces to care about.
            ns_pid: field("NSpid")
                .and_then(|v| v.split_whitespace().last()?.parse().ok())
                .unwrap_or(pid),
            sig_caught: field("SigCgt")
                .and_then(|v| u64::from_str_radix(v, 16).ok())
                .unwrap_or(0),
        })
    }
}

#[derive(Debug, PartialEq, Eq)]
enum VmLibrary {
    HotSpot(PathBuf),
    OpenJ9,
    None,
}

/// Which JVM library /proc/PID/maps shows. OpenJ9 ships a `libjvm.so` shim
/// too, so its own `libj9vm` decides first.
fn vm_library(maps: &str) -> VmLibrary {
    let mut hotspot = None;
    for path in maps.lines().filter_map(map_path) {
        let file = path.rsplit('/').next().unwrap_or(path);
        if file.starts_with("libj9vm") {
            return VmLibrary::OpenJ9;
        }
        if file == "libjvm.so" && hotspot.is_none() {
            hotspot = Some(PathBuf::from(path));
        }
    }
    hotspot.map_or(VmLibrary::None, VmLibrary::HotSpot)
}

/// `.../lib/server/libjvm.so` (and JDK 8's `.../jre/lib/amd64/server/`) →
/// the directory holding `lib`.
fn java_home_of(libjvm: &Path) -> Option<PathBuf> {
    libjvm
        .ancestors()
        .find(|a| a.file_name() == Some(OsStr::new("lib")))
        .and_then(Path::parent)
        .map(Path::to_owned)
}

/// `JAVA_VERSION` from `<java.home>/release`, read through the JVM's root
/// (no link followed, a regular file only, at most [`RELEASE_CAP`]).
fn release_version(root: &Path, home: &Path) -> Option<String> {
    let bytes = beneath::read_in_root(root, &home.join("release"), RELEASE_CAP).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    text.lines().find_map(|l| {
        let v = l.strip_prefix("JAVA_VERSION=")?.trim().trim_matches('"');
        (!v.is_empty()).then(|| v.to_owned())
    })
}

/// The PerfData file the JVM has mapped (`/tmp/hsperfdata_<user>/<ns_pid>`
/// as the JVM sees it): this JVM's own file, never a stale one left by a
/// dead JVM that had the same PID, and none with -XX:-UsePerfData.
fn perfdata_in_maps(maps: &str, ns_pid: u32) -> Option<PathBuf> {
    let name = ns_pid.to_string();
    maps.lines().filter_map(map_path).find_map(|path| {
        let (dir, file) = path.rsplit_once('/')?;
        let dir_name = dir.rsplit('/').next()?;
        (file == name && dir_name.starts_with("hsperfdata_")).then(|| PathBuf::from(path))
    })
}

/// The PerfData strings in `path` (a path inside the JVM's root), read
/// without following a link, from a regular file only, at most
/// [`PERFDATA_CAP`].
fn read_perfdata(root: &Path, path: &Path) -> Option<PerfStrings> {
    PerfStrings::parse(&beneath::read_in_root(root, path, PERFDATA_CAP).ok()?).ok()
}

/// The lines of /proc/PID/maps that [`vm_library`] and
/// [`perfdata_in_maps`] look at (`libjvm.so`, `libj9vm*`, `hsperfdata_*`),
/// read line by line: a process can map tens of thousands of files.
fn read_maps(path: &Path) -> io::Result<String> {
    let mut kept = String::new();
    let mut count = 0;
    let mut reader = BufReader::new(fs::File::open(path)?);
    let mut bytes = Vec::new();
    loop {
        bytes.clear();
        // A maps line is at most a path (PATH_MAX) and ~100 bytes.
        let n = (&mut reader).take(8 << 10).read_until(b'\n', &mut bytes)?;
        if n == 0 {
            break;
        }
        let line = String::from_utf8_lossy(&bytes);
        let relevant = map_path(line.trim_end_matches('\n')).is_some_and(|p| {
            let (dir, file) = p.rsplit_once('/').unwrap_or(("", p));
            file == "libjvm.so"
                || file.starts_with("libj9vm")
                || dir
                    .rsplit('/')
                    .next()
                    .is_some_and(|d| d.starts_with("hsperfdata_"))
        });
        if relevant && count < MAPS_KEPT_LINES {
            kept.push_str(line.trim_end_matches('\n'));
            kept.push('\n');
            count += 1;
        }
    }
    Ok(kept)
}

/// The path of a /proc/PID/maps line (which may contain spaces), without
/// the ` (deleted)` mark of an unlinked file; None for anonymous memory and
/// for unlinked files.
fn map_path(line: &str) -> Option<&str> {
    // address perms offset dev inode path
    let mut rest = line;
    for _ in 0..5 {
        rest = rest.trim_start();
        rest = &rest[rest.find(' ')?..];
    }
    let path = rest.trim_start();
    (path.starts_with('/') && !path.ends_with(" (deleted)")).then_some(path)
}

/// At most `cap` bytes of a /proc file.
fn read_capped(path: &Path, cap: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    fs::File::open(path)?.take(cap).read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn read_cmdline(proc_dir: &Path) -> Vec<String> {
    read_capped(&proc_dir.join("cmdline"), ARGS_CAP)
        .map(|bytes| {
            bytes
                .split(|&b| b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn read_environ(proc_dir: &Path) -> Vec<(String, String)> {
    read_capped(&proc_dir.join("environ"), ARGS_CAP)
        .map(|bytes| {
            bytes
                .split(|&b| b == 0)
                .filter_map(|kv| {
                    let kv = String::from_utf8_lossy(kv);
                    let (k, v) = kv.split_once('=')?;
                    Some((k.to_owned(), v.to_owned()))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The start time of process `pid` in clock ticks since boot (what
/// [`JvmProcess::start_time`] holds); `None` when there is no such process.
pub fn start_time(pid: u32) -> Option<u64> {
    read_start_time(Path::new(&format!("/proc/{pid}")))
}

/// Field 22 of /proc/PID/stat (start time in clock ticks).
fn read_start_time(proc_dir: &Path) -> Option<u64> {
    let stat = fs::read_to_string(proc_dir.join("stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// The command line shortened for a one-line message.
fn short_cmdline(args: &[String]) -> String {
    const MAX: usize = 60;
    let full = args.join(" ");
    if full.is_empty() {
        return "no command line".to_owned();
    }
    if full.chars().count() <= MAX {
        return full;
    }
    let cut: String = full.chars().take(MAX).collect();
    format!("{cut}…")
}

/// The launcher options whose value is the next argument.
const OPTIONS_WITH_VALUE: &[&str] = &[
    "-cp",
    "-classpath",
    "--class-path",
    "-p",
    "--module-path",
    "--upgrade-module-path",
    "--add-modules",
    "--limit-modules",
    "--add-reads",
    "--add-exports",
    "--add-opens",
    "--patch-module",
    "--enable-native-access",
    "--source",
];

/// The main class, jar or module of a `java` command line, like `jps -l`.
fn main_from_cmdline(args: &[String]) -> Option<String> {
    let mut it = args.iter().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-jar" | "-m" | "--module" => return it.next().cloned(),
            a if a.starts_with("--module=") => return Some(a["--module=".len()..].to_owned()),
            a if OPTIONS_WITH_VALUE.contains(&a) => {
                it.next();
            }
            a if a.starts_with('-') || a.starts_with('@') => {}
            a => return Some(a.to_owned()),
        }
    }
    None
}

/// Whether the JVM options disable the attach mechanism; the last setting
/// wins, as in HotSpot.
fn attach_disabled_in<'a>(args: impl Iterator<Item = &'a str>) -> bool {
    let mut disabled = false;
    for arg in args {
        match arg {
            "-XX:+DisableAttachMechanism" => disabled = true,
            "-XX:-DisableAttachMechanism" => disabled = false,
            a => {
                if let Some(v) = a.strip_prefix("-XX:DisableAttachMechanism=") {
                    disabled = matches!(v, "true" | "1");
                }
            }
        }
    }
    disabled
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses_status_with_nested_pid_namespace() {
        let text = "Name:\tjava\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\nNgid:\t0\n\
                    Pid:\t4242\nPPid:\t1\nUid:\t1000\t1001\t1001\t1001\nGid:\t50\t51\t51\t51\n\
                    NSpid:\t4242\t7\nSigCgt:\t0000000000000004\n";
        let s = ProcStatus::parse(text).unwrap();
        assert_eq!(
            s,
            ProcStatus {
                name: "java".into(),
                state: 'S',
                tgid: 4242,
                uid: 1001,
                gid: 51,
                ns_pid: 7,
                sig_caught: 0x4
            }
        );
        let old = text.replace("NSpid:\t4242\t7\n", "");
        assert_eq!(ProcStatus::parse(&old).unwrap().ns_pid, 4242);
        assert_eq!(ProcStatus::parse("garbage"), None);
    }

    #[test]
    fn finds_hotspot_and_openj9_in_maps() {
        let hs = "7f00-7f10 r-xp 00000000 08:01 123 /usr/lib/jvm/jdk-17/lib/server/libjvm.so\n\
                  7f10-7f20 r--p 00000000 08:01 124 /usr/lib/x86_64-linux-gnu/libc.so.6\n";
        assert_eq!(
            vm_library(hs),
            VmLibrary::HotSpot("/usr/lib/jvm/jdk-17/lib/server/libjvm.so".into())
        );
        let j9 = format!("{hs}7f30-7f40 r-xp 0 08:01 9 /opt/j9/lib/default/libj9vm29.so\n");
        assert_eq!(vm_library(&j9), VmLibrary::OpenJ9);
        assert_eq!(
            vm_library("7f00-7f10 r-xp 0 08:01 1 /usr/bin/sleep\n7f [vdso]\n"),
            VmLibrary::None
        );
        // A file merely named like the library in a path component is not it.
        assert_eq!(
            vm_library("7f00-7f10 r-xp 0 08:01 1 /data/libjvm.so.txt\n"),
            VmLibrary::None
        );
    }

    #[test]
    fn map_paths_with_spaces_and_deleted_files() {
        assert_eq!(
            map_path("7f00-7f10 r-xp 00000000 08:01 123     /opt/my jdk/lib/server/libjvm.so"),
            Some("/opt/my jdk/lib/server/libjvm.so")
        );
        assert_eq!(map_path("7f00-7f10 rw-p 00000000 00:00 0 "), None);
        assert_eq!(map_path("7ffd-7ffe rw-p 00000000 00:00 0    [stack]"), None);
        assert_eq!(
            map_path("7f00-7f10 rw-s 00000000 08:01 9 /tmp/hsperfdata_root/42 (deleted)"),
            None
        );
        assert_eq!(map_path("garbage"), None);
        assert_eq!(
            vm_library("7f00-7f10 r-xp 0 08:01 1 /opt/my jdk/lib/server/libjvm.so\n"),
            VmLibrary::HotSpot("/opt/my jdk/lib/server/libjvm.so".into())
        );
    }

    #[test]
    fn perfdata_file_is_the_mapped_one() {
        let maps = "7f00-7f10 r-xp 0 08:01 1 /jdk/lib/server/libjvm.so\n\
                    7f20-7f30 rw-s 0 08:01 2 /tmp/hsperfdata_app/7\n";
        assert_eq!(
            perfdata_in_maps(maps, 7),
            Some(PathBuf::from("/tmp/hsperfdata_app/7"))
        );
        assert_eq!(perfdata_in_maps(maps, 8), None);
        assert_eq!(
            perfdata_in_maps("7f20-7f30 rw-s 0 08:01 2 /data/7\n", 7),
            None
        );
    }

    #[test]
    fn java_home_from_library_path() {
        assert_eq!(
            java_home_of(Path::new("/usr/lib/jvm/jdk-17/lib/server/libjvm.so")),
            Some(PathBuf::from("/usr/lib/jvm/jdk-17"))
        );
        assert_eq!(
            java_home_of(Path::new("/opt/jdk8/jre/lib/amd64/server/libjvm.so")),
            Some(PathBuf::from("/opt/jdk8/jre"))
        );
        assert_eq!(java_home_of(Path::new("libjvm.so")), None);
    }

    #[test]
    fn main_like_jps() {
        let m = |a: &[&str]| main_from_cmdline(&strings(a));
        assert_eq!(
            m(&["java", "-cp", "a:b", "-Xmx1g", "com.x.Main", "arg"]).as_deref(),
            Some("com.x.Main")
        );
        assert_eq!(
            m(&["java", "-Dx=1", "-jar", "/opt/app.jar", "x"]).as_deref(),
            Some("/opt/app.jar")
        );
        assert_eq!(
            m(&["java", "-p", "mods", "-m", "m/p.Main"]).as_deref(),
            Some("m/p.Main")
        );
        assert_eq!(
            m(&["java", "--module=m/p.Main"]).as_deref(),
            Some("m/p.Main")
        );
        assert_eq!(
            m(&["java", "@argfile", "--add-opens", "a/b=c", "Main"]).as_deref(),
            Some("Main")
        );
        assert_eq!(m(&["java", "-version"]), None);
        assert_eq!(m(&[]), None);
    }

    #[test]
    fn disable_attach_last_setting_wins() {
        let d = |s: &str| attach_disabled_in(s.split_whitespace());
        assert!(d("-Xmx1g -XX:+DisableAttachMechanism"));
        assert!(!d(
            "-XX:+DisableAttachMechanism -XX:-DisableAttachMechanism"
        ));
        assert!(d("-XX:DisableAttachMechanism=true"));
        assert!(!d(
            "-XX:DisableAttachMechanism=false -Dx=-XX:+DisableAttachMechanismX"
        ));
        assert!(!d(""));
    }

    #[test]
    fn short_cmdline_is_one_bounded_line() {
        assert_eq!(short_cmdline(&[]), "no command line");
        assert_eq!(short_cmdline(&strings(&["sleep", "100"])), "sleep 100");
        let long = short_cmdline(&strings(&[&"x".repeat(200)]));
        assert_eq!(long.chars().count(), 61);
    }

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

    /// Files a hostile JVM owner controls, under a directory standing in
    /// for `/proc/PID/root`.
    mod owner_files {
        use super::*;
        use std::os::unix::fs::{PermissionsExt, symlink};
        use std::sync::atomic::{AtomicU32, Ordering};
        use std::time::Duration;

        struct Root(PathBuf);

        impl Root {
            fn new(tag: &str) -> Root {
                static NEXT: AtomicU32 = AtomicU32::new(0);
                let n = NEXT.fetch_add(1, Ordering::SeqCst);
                let path = std::env::temp_dir()
                    .join(format!("sprig-jvm-files-{tag}-{}-{n}", std::process::id()));
                let _ = fs::remove_dir_all(&path);
                fs::create_dir_all(path.join("jdk")).unwrap();
                fs::create_dir_all(path.join("tmp/hsperfdata_x")).unwrap();
                Root(path)
            }
        }

        impl Drop for Root {
            fn drop(&mut self) {
                let _ = fs::remove_dir_all(&self.0);
            }
        }

        fn perfdata(version: &str) -> Vec<u8> {
            perfdata::tests::buffer(&[(
                "java.property.java.version",
                b'B',
                perfdata::tests::padded(version, 16),
            )])
        }

        #[test]
        fn release_is_read_only_as_a_regular_file_without_links() {
            let root = Root::new("release");
            let r = &root.0;
            fs::write(
                r.join("jdk/release"),
                "IMPLEMENTOR=x\nJAVA_VERSION=\"17.0.9\"\n",
            )
            .unwrap();
            assert_eq!(
                release_version(r, Path::new("/jdk")).as_deref(),
                Some("17.0.9")
            );
            // A link to a file only root may read, at the last component.
            fs::write(r.join("secret"), "JAVA_VERSION=\"66.6\"\n").unwrap();
            fs::set_permissions(r.join("secret"), fs::Permissions::from_mode(0o600)).unwrap();
            fs::remove_file(r.join("jdk/release")).unwrap();
            symlink(r.join("secret"), r.join("jdk/release")).unwrap();
            assert_eq!(release_version(r, Path::new("/jdk")), None);
            // A link on the way there.
            fs::create_dir(r.join("other")).unwrap();
            fs::write(r.join("other/release"), "JAVA_VERSION=\"66.6\"\n").unwrap();
            symlink(r.join("other"), r.join("linked-jdk")).unwrap();
            assert_eq!(release_version(r, Path::new("/linked-jdk")), None);
            // `..` does not climb out of the root.
            fs::create_dir_all(r.join("inner/jdk")).unwrap();
            assert_eq!(
                release_version(&r.join("inner"), Path::new("/jdk/../../other")),
                None
            );
            // Not a file.
            fs::create_dir(r.join("dir-jdk")).unwrap();
            fs::create_dir(r.join("dir-jdk/release")).unwrap();
            assert_eq!(release_version(r, Path::new("/dir-jdk")), None);
        }

        #[test]
        fn fifo_release_does_not_block() {
            let root = Root::new("fifo");
            let fifo = root.0.join("jdk/release");
            let made = std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap();
            assert!(made.success());
            let r = root.0.clone();
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let _ = tx.send(release_version(&r, Path::new("/jdk")));
            });
            let got = rx.recv_timeout(Duration::from_secs(2));
            if got.is_err() {
                // Release the reader stuck in open(2) before failing.
                let _ = fs::OpenOptions::new().write(true).open(&fifo);
            }
            assert_eq!(
                got,
                Ok(None),
                "reading a FIFO release blocked (or read something)"
            );
        }

        #[test]
        fn perfdata_is_read_only_as_a_regular_file_without_links() {
            let root = Root::new("perf");
            let r = &root.0;
            let mapped = Path::new("/tmp/hsperfdata_x/7");
            fs::write(r.join("tmp/hsperfdata_x/7"), perfdata("17.0.9")).unwrap();
            let got = read_perfdata(r, mapped).expect("a plain PerfData file");
            assert_eq!(got.get("java.property.java.version"), Some("17.0.9"));

            fs::write(r.join("elsewhere"), perfdata("66.6")).unwrap();
            fs::remove_file(r.join("tmp/hsperfdata_x/7")).unwrap();
            symlink(r.join("elsewhere"), r.join("tmp/hsperfdata_x/7")).unwrap();
            assert!(read_perfdata(r, mapped).is_none(), "followed a link");

            fs::create_dir(r.join("tmp/real")).unwrap();
            fs::write(r.join("tmp/real/7"), perfdata("66.6")).unwrap();
            symlink(r.join("tmp/real"), r.join("tmp/hsperfdata_y")).unwrap();
            assert!(
                read_perfdata(r, Path::new("/tmp/hsperfdata_y/7")).is_none(),
                "followed a directory link"
            );
        }

        #[test]
        fn oversized_perfdata_still_parses_from_its_start() {
            let root = Root::new("big");
            let r = &root.0;
            let path = r.join("tmp/hsperfdata_x/7");
            fs::write(&path, perfdata("17.0.9")).unwrap();
            // 400 MB, sparse: HotSpot's file is 32 KiB; what follows the
            // live part is not read.
            fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(400 << 20)
                .unwrap();
            let got = read_perfdata(r, Path::new("/tmp/hsperfdata_x/7")).expect("parsed");
            assert_eq!(got.get("java.property.java.version"), Some("17.0.9"));
        }
    }
}
