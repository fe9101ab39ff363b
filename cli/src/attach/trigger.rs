//! Making a JVM open its attach socket: the trigger file
//! `.attach_pid<nspid>`, shared with other attachers and removed through a
//! handle on the directory it was made in, then SIGQUIT (only to a JVM that
//! handles it, through the held [`Target`]) and the wait for the socket.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use super::error::{AttachError, Stage};
use super::socket::is_socket;
use super::target::{Target, TargetCredentials, process_age};
use crate::beneath::Dir;
use crate::jvm::{self, JvmError, JvmProcess};
use crate::sys;

const FIRST_POLL: Duration = Duration::from_millis(5);
const MAX_POLL: Duration = Duration::from_millis(200);
/// How long another attacher's trigger file is trusted to be followed by
/// its SIGQUIT before sprig signals itself.
const FOREIGN_TRIGGER_GRACE: Duration = Duration::from_secs(2);
/// A JVM older than this has finished installing its signal handlers.
const STARTUP_GRACE: Duration = Duration::from_secs(10);

/// The trigger file `.attach_pid<nspid>`; removed on drop if sprig made it.
///
/// The directory is held open from the start: the JVM's owner can move the
/// JVM's working directory (or its PID can be reused) before the file is
/// removed, and root then removes it in the directory it made it in, and
/// only if it is still the regular file of the user who made it.
pub(super) struct TriggerFile {
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
    pub(super) fn create(
        jvm: &JvmProcess,
        creds: &TargetCredentials,
    ) -> Result<TriggerFile, AttachError> {
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
pub(super) fn start_attach_listener(
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
