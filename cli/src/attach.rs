//! The HotSpot attach protocol: ask a running JVM to load sprig's agent.
//!
//! 1. If `/tmp/.java_pid<nspid>` (seen through `/proc/PID/root`) is a socket
//!    the JVM listens on, use it.
//! 2. Otherwise create `.attach_pid<nspid>` in the JVM's working directory
//!    (or its /tmp), send SIGQUIT — only to a process `jvm::inspect` just
//!    confirmed to be a HotSpot JVM, through a pidfd held since (`Target`)
//!    — and wait for the socket with backoff.
//!    The trigger file is removed on every path, through a handle on the
//!    directory it was made in (see `TriggerFile`). A trigger file found there
//!    that is not the JVM's user's or sprig's (or is a link) is refused with
//!    an error naming it and its owner: HotSpot would ignore it and answer
//!    the SIGQUIT with a thread dump.
//! 3. Send `1\0load\0<path>\0true\0<options>\0` and read the whole reply: a
//!    status line, then `return code: N` for an agent that ran, or the JVM's
//!    error text. JDK 21+ answers status 0 even when loading failed, so the
//!    rest of the reply decides.
//!
//! When sprig runs as root and the JVM as another user, the thread that
//! creates the trigger file and connects switches its effective uid/gid to
//! the JVM's (HotSpot compares the peer's credentials with its own, and
//! older JDKs ignore a trigger file not owned by their user). The switch is
//! per thread (raw system calls, see `sys`), so no fork is needed and the
//! rest of the CLI keeps its credentials; a guard restores them.

pub mod pinned;
#[allow(unsafe_code)]
pub(crate) mod sys;

use std::ffi::OsString;
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use crate::beneath::Dir;
use crate::jvm::{self, JvmError, JvmProcess};

/// File name of the agent library next to the `sprig` binary.
pub const AGENT_LIBRARY: &str = "libsprig_agent.so";

/// HotSpot rejects attach arguments longer than this (bytes).
const MAX_ARG_LEN: usize = 1024;
/// A load reply is a few lines; anything larger is not HotSpot talking.
const MAX_REPLY_LEN: u64 = 64 * 1024;
const FIRST_POLL: Duration = Duration::from_millis(5);
const MAX_POLL: Duration = Duration::from_millis(200);
/// How long another attacher's trigger file is trusted to be followed by
/// its SIGQUIT before sprig signals itself.
const FOREIGN_TRIGGER_GRACE: Duration = Duration::from_secs(2);
/// A JVM older than this has finished installing its signal handlers.
const STARTUP_GRACE: Duration = Duration::from_secs(10);

/// Why loading the agent into a JVM failed. One line each.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error(transparent)]
    Jvm(#[from] JvmError),
    #[error("invalid {what}: {why}")]
    InvalidArgument { what: &'static str, why: String },
    #[error(
        "JVM {pid} does not accept attach (-XX:+DisableAttachMechanism?): start it with `sprig run ...` instead"
    )]
    AttachDisabled { pid: u32 },
    #[error(
        "JVM {pid} does not handle SIGQUIT (-Xrs?), so sprig cannot ask it to open its attach socket: start it with `sprig run ...` instead"
    )]
    NoSignalHandler { pid: u32 },
    #[error("JVM {pid} did not {stage} within {:.1} s{}", waited.as_secs_f64(), stage.hint())]
    Timeout {
        pid: u32,
        stage: Stage,
        waited: Duration,
    },
    #[error("{}", load_failure(*pid, *code, message))]
    AgentLoadFailed {
        pid: u32,
        code: Option<i32>,
        message: String,
    },
    #[error("attach protocol error with JVM {pid}: {detail}")]
    Protocol { pid: u32, detail: String },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
    #[error(
        "JVM {pid} cannot open its attach socket: {} is left from a dead JVM that had the same PID and belongs to uid {owner}, so the JVM may not replace it ({source}); remove it as root and retry",
        path.display()
    )]
    StaleSocket {
        pid: u32,
        path: PathBuf,
        owner: u32,
        #[source]
        source: io::Error,
    },
    #[error(
        "JVM {pid} cannot be asked to open its attach socket: {} is {kind} of uid {owner}, not of the JVM's user {jvm_user} or of sprig's, so the JVM would ignore it and print a thread dump instead; its owner or root must remove it",
        path.display()
    )]
    ForeignTrigger {
        pid: u32,
        path: PathBuf,
        /// `a file`, `a symbolic link`, ...
        kind: &'static str,
        owner: u32,
        jvm_user: String,
    },
    #[error(
        "sprig's agent library is not installed: looked for {}; build it with `cargo build -p sprig-agent` (it goes next to the sprig binary)",
        looked.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" and ")
    )]
    AgentNotFound { looked: Vec<PathBuf> },
}

/// What sprig was waiting for when an attach timed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The JVM to open its attach socket after SIGQUIT.
    Socket,
    /// The JVM's reply to the load request (the agent's `Agent_OnAttach`).
    Reply,
}

impl Stage {
    fn hint(self) -> &'static str {
        match self {
            Stage::Socket => {
                " (is it stopped or hung, or is attach disabled by a flag sprig cannot see? `sprig run ...` works without attach)"
            }
            Stage::Reply => " (the agent may still be starting)",
        }
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Stage::Socket => "open its attach socket",
            Stage::Reply => "answer the load request",
        })
    }
}

/// What the agent's return code `code` says, and what to do, when the JVM
/// passed on no text of its own (the agent's own line went to the JVM's
/// stderr). `None` for a code the agent does not return.
fn agent_code_meaning(code: i32) -> Option<String> {
    use sprig_wire::control::agent_code as c;
    Some(match code {
        c::OLD_PROBE_CLASS => {
            "this JVM holds the probe class of an older sprig (defined when that \
             sprig attached), which this sprig cannot use: profile it with that sprig, or restart \
             the JVM; the JVM runs on unchanged"
                .to_owned()
        }
        c::BUSY => "a sprig session is already running in this JVM: stop it or wait for it to \
             end, then try again"
            .to_owned(),
        c::OPTIONS => "the agent refused the options sprig passed (is the agent library from \
             another sprig version?)"
            .to_owned(),
        c::PIN => "the agent could not keep its library loaded and stopped before changing \
             anything in the JVM"
            .to_owned(),
        c::NO_VM | c::JVMTI | c::JNI | c::THREAD | c::PANIC => format!(
            "the agent could not start (code {code}; its reason is on the JVM's standard \
             error); nothing was instrumented and the JVM runs on"
        ),
        _ => return None,
    })
}

/// The one line of a failed load: the agent's code explained when the JVM
/// gave no text, else the JVM's text with its hint.
fn load_failure(pid: u32, code: Option<i32>, message: &str) -> String {
    if message == AGENT_FAILED
        && let Some(meaning) = code.and_then(agent_code_meaning)
    {
        return format!("JVM {pid} could not start sprig's agent: {meaning}");
    }
    format!(
        "JVM {pid} could not load the agent{}: {}",
        code.map(|c| format!(" (return code {c})"))
            .unwrap_or_default(),
        describe_failure(message)
    )
}

/// The JVM's text on one line, with a hint for the failures users can fix.
fn describe_failure(message: &str) -> String {
    let text = message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    let text = if text.is_empty() {
        "no reason given".to_owned()
    } else {
        text
    };
    let hint = if text.contains("Dynamic agent loading is not enabled")
        || text.contains("EnableDynamicAgentLoading")
    {
        " (the JVM runs with -XX:-EnableDynamicAgentLoading: start it with `sprig run ...` instead)"
    } else if text.contains("cannot open shared object") {
        " (the library must exist and be readable by the JVM's user, inside its file system)"
    } else {
        ""
    };
    format!("{text}{hint}")
}

/// Finds the agent library installed with the running `sprig` binary.
pub fn agent_library_path() -> Result<PathBuf, AttachError> {
    let exe = std::env::current_exe().map_err(|source| AttachError::Io {
        context: "cannot find the sprig binary's own path".to_owned(),
        source,
    })?;
    let dir = exe.parent().unwrap_or(Path::new("/"));
    agent_library_near(dir)
}

/// The library to hand a JVM: the pinned copy of the installed agent
/// ([`pinned`] says why), or the installed file where a copy cannot serve.
/// `jvm` is the JVM to attach to, `None` for one `sprig run` starts (ours,
/// in our file system). A JVM in another file system (a container) looks
/// the path up in its own, where sprig's `/tmp` is not; it gets the
/// installed path, as it always did. So does a JVM whose user could not
/// read the copy, and any JVM when the copy cannot be made (said on
/// stderr: overwriting the installed file in place would then crash it).
pub fn agent_for(jvm: Option<&JvmProcess>) -> Result<PathBuf, AttachError> {
    let installed = agent_library_path()?;
    if jvm.is_some_and(|j| !same_root(j)) {
        return Ok(installed);
    }
    let (euid, _) = sys::effective_ids();
    match pinned::pin_in(Path::new("/tmp"), euid, &installed) {
        Ok(copy) if jvm.is_none_or(|j| check_readable_by_target(j, &copy).is_ok()) => Ok(copy),
        Ok(_) => Ok(installed),
        Err(e) => {
            eprintln!(
                "sprig: warning: loading the agent from {} itself, without a private copy ({e}); replacing that file in place while the JVM runs would crash the JVM",
                installed.display()
            );
            Ok(installed)
        }
    }
}

/// Whether `jvm` sees the same root directory as sprig.
fn same_root(jvm: &JvmProcess) -> bool {
    match (fs::metadata(&jvm.root), fs::metadata("/")) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// The agent library in `bin_dir` or in `bin_dir/../lib/sprig/`, as an
/// absolute canonical path.
pub fn agent_library_near(bin_dir: &Path) -> Result<PathBuf, AttachError> {
    let looked = vec![
        bin_dir.join(AGENT_LIBRARY),
        bin_dir.join("../lib/sprig").join(AGENT_LIBRARY),
    ];
    for candidate in &looked {
        if fs::metadata(candidate).is_ok_and(|m| m.is_file()) {
            return fs::canonicalize(candidate).map_err(|source| AttachError::Io {
                context: format!("cannot resolve {}", candidate.display()),
                source,
            });
        }
    }
    Err(AttachError::AgentNotFound { looked })
}

/// Loads the JVMTI agent library `agent_path` (absolute) into `jvm`, passing
/// `options` to its `Agent_OnAttach`. `timeout` bounds the whole exchange,
/// including the agent's `Agent_OnAttach`.
pub fn load_agent(
    jvm: &JvmProcess,
    agent_path: &Path,
    options: &str,
    timeout: Duration,
) -> Result<(), AttachError> {
    let deadline = Instant::now() + timeout;
    let path = validate(agent_path, options)?;
    let pid = jvm.pid;

    // Confirm again, right before any signal, that this PID is still the
    // HotSpot JVM the caller inspected (PIDs get reused).
    let now = jvm::inspect(pid)?;
    if now.start_time != jvm.start_time {
        return Err(JvmError::Exited { pid }.into());
    }
    if now.attach_disabled {
        return Err(AttachError::AttachDisabled { pid });
    }
    check_readable_by_target(jvm, agent_path)?;

    let target = Target::hold(jvm)?;

    let creds = TargetCredentials::of(jvm);
    let socket = jvm.root.join(format!("tmp/.java_pid{}", jvm.ns_pid));
    let mut stream = match connect_existing(jvm, &socket, &creds)? {
        Some(stream) => stream,
        None => start_attach_listener(jvm, &target, &socket, &creds, deadline)?,
    };

    let mut request = Vec::with_capacity(path.len() + options.len() + 16);
    for arg in ["1", "load", path.as_str(), "true", options] {
        request.extend_from_slice(arg.as_bytes());
        request.push(0);
    }
    let reply = exchange(&mut stream, &request, deadline, timeout, pid)?;
    parse_load_reply(&reply).map_err(|failure| match failure {
        ReplyError::Failed { code, message } => AttachError::AgentLoadFailed { pid, code, message },
        ReplyError::Malformed(detail) => AttachError::Protocol { pid, detail },
    })
}

/// Checks what HotSpot would reject or misread, and returns the path as text.
fn validate(agent_path: &Path, options: &str) -> Result<String, AttachError> {
    let invalid = |what, why: &str| AttachError::InvalidArgument {
        what,
        why: why.to_owned(),
    };
    if !agent_path.is_absolute() {
        return Err(invalid(
            "agent path",
            &format!("{} is not absolute", agent_path.display()),
        ));
    }
    let Some(path) = agent_path.to_str() else {
        return Err(invalid("agent path", "it is not valid UTF-8"));
    };
    if path.contains('\0') {
        return Err(invalid("agent path", "it contains a NUL byte"));
    }
    if options.contains('\0') {
        return Err(invalid("agent options", "they contain a NUL byte"));
    }
    for (what, text) in [("agent path", path), ("agent options", options)] {
        if text.len() > MAX_ARG_LEN {
            return Err(invalid(
                what,
                &format!(
                    "{} bytes, HotSpot accepts at most {MAX_ARG_LEN}",
                    text.len()
                ),
            ));
        }
    }
    Ok(path.to_owned())
}

/// When the JVM shares sprig's file system and runs as another user, the
/// library and the directories above it must be open to that user, or the
/// JVM's error is obscure. (Permission bits only: an ACL granting more is
/// not seen.)
fn check_readable_by_target(jvm: &JvmProcess, agent_path: &Path) -> Result<(), AttachError> {
    let same_root = same_root(jvm);
    let Ok(meta) = fs::metadata(agent_path) else {
        // Missing here: the JVM reports it in its own words.
        return Ok(());
    };
    if !same_root || jvm.uid == 0 {
        return Ok(());
    }
    let groups = supplementary_groups(jvm.pid);
    let may = |m: &fs::Metadata, bit: u32| {
        let shift = if m.uid() == jvm.uid {
            6
        } else if m.gid() == jvm.gid || groups.contains(&m.gid()) {
            3
        } else {
            0
        };
        m.mode() & (bit << shift) != 0
    };
    let refuse = |what: String| AttachError::InvalidArgument {
        what: "agent path",
        why: format!(
            "JVM {} runs as user {}, who may not {what}",
            jvm.pid, jvm.user
        ),
    };
    if !may(&meta, 0o4) {
        return Err(refuse(format!("read {}", agent_path.display())));
    }
    for dir in agent_path.ancestors().skip(1) {
        if let Ok(m) = fs::metadata(dir)
            && !may(&m, 0o1)
        {
            return Err(refuse(format!(
                "enter {} (on the way to {})",
                dir.display(),
                agent_path.display()
            )));
        }
    }
    Ok(())
}

/// The supplementary groups of `pid` (the `Groups:` line of its status).
fn supplementary_groups(pid: u32) -> Vec<u32> {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|text| {
            text.lines().find_map(|l| {
                l.strip_prefix("Groups:").map(|g| {
                    g.split_whitespace()
                        .filter_map(|n| n.parse().ok())
                        .collect()
                })
            })
        })
        .unwrap_or_default()
}

/// The inspected JVM, held so that SIGQUIT reaches that process or none.
///
/// A pidfd opened right after the last start-time check, and checked once
/// more, refers to the inspected process for good: a signal sent through it
/// fails with `ESRCH` once that process is gone, even if another took its
/// PID while sprig waited for the signal handler or another attacher.
/// Where the kernel has no pidfds (before 5.3), the start time is checked
/// again right before the signal, which leaves only that instant open.
struct Target {
    pid: u32,
    start_time: u64,
    pidfd: Option<std::os::fd::OwnedFd>,
}

impl Target {
    fn hold(jvm: &JvmProcess) -> Result<Target, AttachError> {
        let pid = jvm.pid;
        let gone = || AttachError::from(JvmError::Exited { pid });
        let pidfd = match sys::pidfd_open(pid) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Err(gone()),
            Err(source) => {
                return Err(AttachError::Io {
                    context: format!("cannot hold JVM {pid} (pidfd_open)"),
                    source,
                });
            }
        };
        // The descriptor holds whichever process had the PID when it was
        // opened: the inspected one only if it still runs now.
        if jvm::start_time(pid) != Some(jvm.start_time) {
            return Err(gone());
        }
        Ok(Target {
            pid,
            start_time: jvm.start_time,
            pidfd,
        })
    }

    fn send_sigquit(&self) -> io::Result<()> {
        use std::os::fd::AsFd;
        match &self.pidfd {
            Some(fd) => sys::pidfd_send_sigquit(fd.as_fd()),
            None if jvm::start_time(self.pid) != Some(self.start_time) => {
                Err(io::Error::from_raw_os_error(libc::ESRCH))
            }
            None => sys::send_sigquit(self.pid),
        }
    }
}

/// The JVM's effective ids, when sprig (as root) should take them on.
struct TargetCredentials(Option<(u32, u32)>);

impl TargetCredentials {
    fn of(jvm: &JvmProcess) -> TargetCredentials {
        let (euid, _) = sys::effective_ids();
        TargetCredentials((euid == 0 && jvm.uid != 0).then_some((jvm.uid, jvm.gid)))
    }

    /// Runs `f` with the calling thread switched to the JVM's effective ids.
    /// If switching is not permitted, `f` runs as is: HotSpot 9+ accepts
    /// root peers anyway.
    fn run<T>(&self, f: impl FnOnce() -> T) -> T {
        let _guard = self
            .0
            .and_then(|(uid, gid)| sys::ThreadCredentials::switch_to(uid, gid).ok());
        f()
    }
}

fn is_socket(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

/// Connects to the JVM's attach socket if it is already listening. `None`
/// when there is no socket, or a stale one: left by a JVM that died, whose
/// PID was reused (PIDs wrap at 32768 on many machines). A stale socket
/// refuses connections, or is not the JVM's to begin with: owned by another
/// user, or older than the process.
fn connect_existing(
    jvm: &JvmProcess,
    socket: &Path,
    creds: &TargetCredentials,
) -> Result<Option<UnixStream>, AttachError> {
    let Ok(meta) = fs::symlink_metadata(socket) else {
        return Ok(None);
    };
    if !meta.file_type().is_socket() {
        return Ok(None);
    }
    if meta.uid() != jvm.uid {
        // In the sticky /tmp the JVM may not rename its new socket over
        // another user's file: without this, SIGQUIT would start nothing.
        // Made by a dead JVM (HotSpot makes it as the JVM's user), so
        // removing it takes nothing from anyone. Removed through a handle
        // on the JVM's /tmp, reached without following a link, and only if
        // it is still such a socket there.
        return match remove_stale_socket(jvm, socket) {
            Ok(()) => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(AttachError::StaleSocket {
                pid: jvm.pid,
                path: socket.to_owned(),
                owner: meta.uid(),
                source,
            }),
        };
    }
    if socket_is_stale(jvm, &meta) {
        // The JVM's own user: its listener renames the new socket over it.
        return Ok(None);
    }
    let pid = jvm.pid;
    match creds.run(|| UnixStream::connect(socket)) {
        Ok(stream) => Ok(Some(stream)),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(None),
        // The listener runs: a SIGQUIT now would only print a thread dump.
        Err(source) => Err(AttachError::Io {
            context: format!(
                "cannot connect to JVM {pid}'s attach socket {}",
                socket.display()
            ),
            source,
        }),
    }
}

/// Removes the socket named like `socket` from the JVM's `/tmp`, reached
/// from its root without following a link, if it is a socket of another
/// user than the JVM's.
fn remove_stale_socket(jvm: &JvmProcess, socket: &Path) -> io::Result<()> {
    let name = socket
        .file_name()
        .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    let tmp = Dir::open(&jvm.root)?.walk(Path::new("tmp"))?;
    match tmp.entry(name)? {
        Some(m) if m.file_type().is_socket() && m.uid() != jvm.uid => tmp.unlink(name),
        Some(_) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not another user's socket",
        )),
        None => Ok(()),
    }
}

/// A socket of the JVM's user made before the process started is a dead
/// JVM's.
fn socket_is_stale(jvm: &JvmProcess, meta: &fs::Metadata) -> bool {
    let socket_age = meta.modified().ok().and_then(|m| m.elapsed().ok());
    match (socket_age, process_age(jvm)) {
        // Two clocks (wall and boot time): allow a second of slack.
        (Some(socket), Some(process)) => socket > process + Duration::from_secs(1),
        _ => false,
    }
}

/// The trigger file `.attach_pid<nspid>`; removed on drop if sprig made it.
///
/// The directory is held open from the start: the JVM's owner can move the
/// JVM's working directory (or its PID can be reused) before the file is
/// removed, and root then removes it in the directory it made it in, and
/// only if it is still the regular file of the user who made it.
struct TriggerFile {
    dir: Dir,
    name: OsString,
    /// For messages.
    path: PathBuf,
    /// Made by this attach; otherwise another attacher's, theirs to remove.
    owned: bool,
    /// The uid it was made as.
    maker: u32,
}

impl TriggerFile {
    fn create(jvm: &JvmProcess, creds: &TargetCredentials) -> Result<TriggerFile, AttachError> {
        let name = OsString::from(format!(".attach_pid{}", jvm.ns_pid));
        // /proc/PID/cwd reaches the JVM's working directory even inside a
        // container; HotSpot looks there first, then in its /tmp (reached
        // without following a link from the JVM's root).
        let cwd = PathBuf::from(format!("/proc/{}/cwd", jvm.pid));
        let tmp = jvm.root.join("tmp");
        let places = [
            (Dir::open(&cwd), cwd.join(&name)),
            (
                Dir::open(&jvm.root).and_then(|root| root.walk(Path::new("tmp"))),
                tmp.join(&name),
            ),
        ];
        // The handles were opened after the last check of the PID: they are
        // the inspected JVM's only if it still runs.
        if jvm::start_time(jvm.pid) != Some(jvm.start_time) {
            return Err(JvmError::Exited { pid: jvm.pid }.into());
        }
        let maker = creds
            .0
            .map_or_else(|| sys::effective_ids().0, |(uid, _)| uid);
        let mut errors = Vec::new();
        for (dir, path) in places {
            let dir = match dir {
                Ok(dir) => dir,
                Err(e) => {
                    errors.push(format!("{}: {e}", path.display()));
                    continue;
                }
            };
            let created = creds.run(|| dir.create_new(&name, 0o600));
            let owned = match created {
                Ok(_) => true,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    check_foreign_trigger(jvm, &path, dir.entry(&name).ok().flatten())?;
                    false
                }
                Err(e) => {
                    errors.push(format!("{}: {e}", path.display()));
                    continue;
                }
            };
            return Ok(TriggerFile {
                dir,
                name,
                path,
                owned,
                maker,
            });
        }
        Err(AttachError::Io {
            context: format!(
                "cannot create the attach trigger file for JVM {} ({})",
                jvm.pid,
                errors.join("; ")
            ),
            source: io::Error::from(io::ErrorKind::PermissionDenied),
        })
    }

    /// What is at the trigger's name now (a link is not followed).
    fn entry(&self) -> Option<fs::Metadata> {
        self.dir.entry(&self.name).ok().flatten()
    }

    /// Another attacher's trigger that is still fresh: that attacher has
    /// signalled or is about to, and a second SIGQUIT would reach a JVM whose
    /// listener already runs, which prints a thread dump instead.
    fn is_fresh_foreign(&self) -> bool {
        !self.owned
            && self
                .entry()
                .and_then(|m| m.modified().ok())
                .is_some_and(|t| t.elapsed().is_ok_and(|age| age < FOREIGN_TRIGGER_GRACE))
    }

    fn exists(&self) -> bool {
        self.entry().is_some()
    }
}

impl Drop for TriggerFile {
    fn drop(&mut self) {
        if self.owned
            && self
                .entry()
                .is_some_and(|m| m.file_type().is_file() && m.uid() == self.maker)
        {
            let _ = self.dir.unlink(&self.name);
        }
    }
}

/// Refuses a trigger file sprig did not make unless HotSpot would act on it:
/// a file (not a link, which HotSpot would follow) of the JVM's user or of
/// sprig's. HotSpot ignores one of another user and answers the SIGQUIT
/// with a thread dump; in the working directory it does not even look in
/// /tmp then. A file that is gone is no obstacle.
fn check_foreign_trigger(
    jvm: &JvmProcess,
    path: &Path,
    meta: Option<fs::Metadata>,
) -> Result<(), AttachError> {
    let Some(meta) = meta else {
        return Ok(());
    };
    let (euid, _) = sys::effective_ids();
    let kind = meta.file_type();
    if !kind.is_symlink() && (meta.uid() == jvm.uid || meta.uid() == euid) {
        return Ok(());
    }
    Err(AttachError::ForeignTrigger {
        pid: jvm.pid,
        path: path.to_owned(),
        kind: if kind.is_symlink() {
            "a symbolic link"
        } else if kind.is_file() {
            "a file"
        } else if kind.is_dir() {
            "a directory"
        } else {
            "a special file"
        },
        owner: meta.uid(),
        jvm_user: jvm.user.clone(),
    })
}

/// Makes the JVM open its attach socket and connects to it.
///
/// Attachers racing for one JVM (several sprig threads or processes, jcmd)
/// share one trigger: only the attacher that created it signals, the others
/// wait for the socket, so the JVM receives no SIGQUIT it would answer with
/// a thread dump. A trigger whose owner vanished is taken over.
fn start_attach_listener(
    jvm: &JvmProcess,
    target: &Target,
    socket: &Path,
    creds: &TargetCredentials,
    deadline: Instant,
) -> Result<UnixStream, AttachError> {
    let started = Instant::now();
    wait_for_sigquit_handler(jvm, deadline)?;
    let mut trigger = TriggerFile::create(jvm, creds)?;
    let mut signalled = false;
    let mut pause = FIRST_POLL;
    let stream = loop {
        // Checked before signalling too: the listener may have come up
        // while the trigger was being made.
        if is_socket(socket)
            && let Ok(stream) = creds.run(|| UnixStream::connect(socket))
        {
            break stream;
        }
        if !signalled {
            if !trigger.owned && !trigger.exists() {
                // The other attacher is gone: make our own trigger, and
                // signal after checking the socket once more.
                trigger = TriggerFile::create(jvm, creds)?;
            } else if !trigger.is_fresh_foreign() {
                if !trigger.owned {
                    // It may have been replaced while its owner's grace ran.
                    check_foreign_trigger(jvm, &trigger.path, trigger.entry())?;
                }
                target.send_sigquit().map_err(|source| AttachError::Io {
                    context: format!("cannot signal JVM {}", jvm.pid),
                    source,
                })?;
                signalled = true;
            }
        }
        if !sys::process_exists(jvm.pid) {
            return Err(JvmError::Exited { pid: jvm.pid }.into());
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(AttachError::Timeout {
                pid: jvm.pid,
                stage: Stage::Socket,
                waited: now - started,
            });
        }
        thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(MAX_POLL);
    };
    drop(trigger);
    Ok(stream)
}

/// Waits until the JVM handles SIGQUIT (a JVM still starting may not yet);
/// never signals a process that would die of it (`-Xrs`). A JVM past its
/// start-up that has no handler will not get one: fail at once.
fn wait_for_sigquit_handler(jvm: &JvmProcess, deadline: Instant) -> Result<(), AttachError> {
    let pid = jvm.pid;
    let mut pause = FIRST_POLL;
    loop {
        if jvm::handles_sigquit(pid)? {
            return Ok(());
        }
        let now = Instant::now();
        let started_up = process_age(jvm).is_some_and(|age| age > STARTUP_GRACE);
        if now >= deadline || started_up {
            return Err(AttachError::NoSignalHandler { pid });
        }
        thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(MAX_POLL);
    }
}

/// How long the process has been running, from its start time in ticks
/// since boot and the system uptime.
fn process_age(jvm: &JvmProcess) -> Option<Duration> {
    let uptime = fs::read_to_string("/proc/uptime").ok()?;
    let uptime: f64 = uptime.split_whitespace().next()?.parse().ok()?;
    let started = jvm.start_time as f64 / sys::clock_ticks_per_second() as f64;
    Duration::try_from_secs_f64(uptime - started).ok()
}

/// Sends the request and reads the reply until the JVM closes the stream.
fn exchange(
    stream: &mut UnixStream,
    request: &[u8],
    deadline: Instant,
    timeout: Duration,
    pid: u32,
) -> Result<String, AttachError> {
    let timed_out = || AttachError::Timeout {
        pid,
        stage: Stage::Reply,
        waited: timeout,
    };
    let io_err = |context: &str, source: io::Error| {
        if matches!(
            source.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ) {
            timed_out()
        } else {
            AttachError::Io {
                context: format!("{context} JVM {pid}'s attach socket"),
                source,
            }
        }
    };
    let remaining = || {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
    };
    stream
        .set_write_timeout(Some(remaining().ok_or_else(timed_out)?))
        .map_err(|e| io_err("cannot configure", e))?;
    stream
        .write_all(request)
        .map_err(|e| io_err("cannot write to", e))?;

    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        stream
            .set_read_timeout(Some(remaining().ok_or_else(timed_out)?))
            .map_err(|e| io_err("cannot configure", e))?;
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                reply.extend_from_slice(&buf[..n]);
                if reply.len() as u64 > MAX_REPLY_LEN {
                    return Err(AttachError::Protocol {
                        pid,
                        detail: format!("reply longer than {MAX_REPLY_LEN} bytes"),
                    });
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_err("cannot read from", e)),
        }
    }
    Ok(String::from_utf8_lossy(&reply).into_owned())
}

/// A load reply that does not say success.
#[derive(Debug, PartialEq, Eq)]
enum ReplyError {
    Failed { code: Option<i32>, message: String },
    Malformed(String),
}

const RETURN_CODE: &str = "return code: ";
/// The message of a failed `Agent_OnAttach` the JVM gave no text for.
const AGENT_FAILED: &str = "the agent's Agent_OnAttach failed";

/// Decodes the reply to `load`: `<status>\n` then, when the agent ran,
/// `return code: <N>\n`, else the JVM's error text (status -1 before JDK 21,
/// status 0 with the text from JDK 21 on).
fn parse_load_reply(reply: &str) -> Result<(), ReplyError> {
    if reply.is_empty() {
        return Err(ReplyError::Malformed(
            "the JVM closed the connection without a reply (does sprig run with the JVM's user and group?)"
                .to_owned(),
        ));
    }
    let (first, rest) = reply.split_once('\n').unwrap_or((reply, ""));
    let status: i32 = first.trim().parse().map_err(|_| {
        ReplyError::Malformed(format!("unexpected reply {:?}", truncate(reply, 80)))
    })?;
    if status != 0 {
        return Err(ReplyError::Failed {
            code: Some(status),
            message: rest.trim().to_owned(),
        });
    }
    let (line, after) = rest.split_once('\n').unwrap_or((rest, ""));
    match line.trim().strip_prefix(RETURN_CODE.trim_end()) {
        Some(code) => match code.trim().parse::<i32>() {
            Ok(0) => Ok(()),
            Ok(code) => Err(ReplyError::Failed {
                code: Some(code),
                message: match after.trim() {
                    "" => AGENT_FAILED.to_owned(),
                    text => text.to_owned(),
                },
            }),
            Err(_) => Err(ReplyError::Malformed(format!(
                "unexpected return code line {:?}",
                truncate(line, 80)
            ))),
        },
        None if rest.trim().is_empty() => Err(ReplyError::Malformed(
            "the JVM answered status 0 without a return code".to_owned(),
        )),
        None => Err(ReplyError::Failed {
            code: None,
            message: rest.trim().to_owned(),
        }),
    }
}

fn truncate(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(code: Option<i32>, message: &str) -> Result<(), ReplyError> {
        Err(ReplyError::Failed {
            code,
            message: message.to_owned(),
        })
    }

    #[test]
    fn success_on_every_jdk() {
        assert_eq!(parse_load_reply("0\nreturn code: 0\n"), Ok(()));
        assert_eq!(parse_load_reply("0\r\nreturn code: 0"), Ok(()));
    }

    #[test]
    fn agent_on_attach_failure_keeps_its_code() {
        assert_eq!(
            parse_load_reply("0\nreturn code: 100\n"),
            failed(Some(100), "the agent's Agent_OnAttach failed")
        );
        assert_eq!(
            parse_load_reply("0\nreturn code: -1\nbad options\n"),
            failed(Some(-1), "bad options")
        );
    }

    #[test]
    fn load_failure_before_jdk_21_has_nonzero_status() {
        assert_eq!(
            parse_load_reply(
                "-1\n/x/lib.so was not loaded.\n/x/lib.so: cannot open shared object file\n"
            ),
            failed(
                Some(-1),
                "/x/lib.so was not loaded.\n/x/lib.so: cannot open shared object file"
            )
        );
    }

    #[test]
    fn load_failure_from_jdk_21_has_status_zero_and_text() {
        assert_eq!(
            parse_load_reply(
                "0\nDynamic agent loading is not enabled. Use -XX:+EnableDynamicAgentLoading to launch target VM.\n"
            ),
            failed(
                None,
                "Dynamic agent loading is not enabled. Use -XX:+EnableDynamicAgentLoading to launch target VM."
            )
        );
    }

    #[test]
    fn malformed_replies() {
        assert!(matches!(
            parse_load_reply(""),
            Err(ReplyError::Malformed(_))
        ));
        assert!(matches!(
            parse_load_reply("0\n"),
            Err(ReplyError::Malformed(_))
        ));
        assert!(matches!(
            parse_load_reply("hello\n"),
            Err(ReplyError::Malformed(_))
        ));
        assert!(matches!(
            parse_load_reply("0\nreturn code: x\n"),
            Err(ReplyError::Malformed(_))
        ));
    }

    #[test]
    fn failure_messages_are_one_line_with_hints() {
        let e = AttachError::AgentLoadFailed {
            pid: 7,
            code: None,
            message: "Dynamic agent loading is not enabled. Use -XX:+EnableDynamicAgentLoading to launch target VM.\n".into(),
        };
        let text = e.to_string();
        assert!(!text.contains('\n'), "{text}");
        assert!(text.contains("sprig run"), "{text}");
        let e = AttachError::AgentLoadFailed {
            pid: 7,
            code: Some(-1),
            message: "/a.so was not loaded.\n/a.so: cannot open shared object file: No such file or directory".into(),
        };
        let text = e.to_string();
        assert!(!text.contains('\n'), "{text}");
        assert!(text.contains("return code -1"), "{text}");
        assert!(text.contains("readable by the JVM's user"), "{text}");
    }

    #[test]
    fn the_agent_s_codes_say_what_failed_and_what_to_do() {
        let text = |code| {
            AttachError::AgentLoadFailed {
                pid: 7,
                code: Some(code),
                message: AGENT_FAILED.into(),
            }
            .to_string()
        };
        let old = text(sprig_wire::control::agent_code::OLD_PROBE_CLASS);
        assert!(!old.contains("return code"), "{old}");
        assert!(
            old.contains("older sprig") && old.contains("restart the JVM"),
            "{old}"
        );
        let busy = text(sprig_wire::control::agent_code::BUSY);
        assert!(busy.contains("already running"), "{busy}");
        let panic = text(sprig_wire::control::agent_code::PANIC);
        assert!(panic.contains("standard error"), "{panic}");
        for code in 1..=9 {
            assert!(!text(code).contains('\n'));
        }
        // A code the agent never returns keeps the JVM's words.
        assert!(text(100).contains("return code 100"), "{}", text(100));
    }

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

    #[test]
    fn agent_library_lookup() {
        let dir = std::env::temp_dir().join(format!("sprig-agent-lookup-{}", std::process::id()));
        let bin = dir.join("bin");
        fs::create_dir_all(&bin).unwrap();
        let err = agent_library_near(&bin).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("cargo build -p sprig-agent"), "{text}");
        assert!(
            text.contains(&bin.join(AGENT_LIBRARY).display().to_string()),
            "{text}"
        );

        fs::create_dir_all(dir.join("lib/sprig")).unwrap();
        fs::write(dir.join("lib/sprig").join(AGENT_LIBRARY), b"").unwrap();
        let found = agent_library_near(&bin).unwrap();
        assert!(found.is_absolute());
        assert_eq!(
            found,
            fs::canonicalize(dir.join("lib/sprig").join(AGENT_LIBRARY)).unwrap()
        );

        fs::write(bin.join(AGENT_LIBRARY), b"").unwrap();
        assert_eq!(
            agent_library_near(&bin).unwrap(),
            fs::canonicalize(bin.join(AGENT_LIBRARY)).unwrap()
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
