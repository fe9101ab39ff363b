//! The JVM process as sprig acts on it: held through a pidfd so that
//! SIGQUIT reaches that process or none, the effective ids sprig takes on
//! to talk to it, and how long it has been running.

use std::fs;
use std::io;
use std::time::Duration;

use super::error::AttachError;
use crate::jvm::{self, JvmError, JvmProcess};
use crate::sys;

/// The inspected JVM, held so that SIGQUIT reaches that process or none.
///
/// A pidfd opened right after the last start-time check, and checked once
/// more, refers to the inspected process for good: a signal sent through it
/// fails with `ESRCH` once that process is gone, even if another took its
/// PID while sprig waited for the signal handler or another attacher.
/// Where the kernel has no pidfds (before 5.3), the start time is checked
/// again right before the signal, which leaves only that instant open.
pub(super) struct Target {
    pub(super) pid: u32,
    pub(super) start_time: u64,
    pub(super) pidfd: Option<std::os::fd::OwnedFd>,
}

impl Target {
    pub(super) fn hold(jvm: &JvmProcess) -> Result<Target, AttachError> {
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

    pub(super) fn send_sigquit(&self) -> io::Result<()> {
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
pub(super) struct TargetCredentials(pub(super) Option<(u32, u32)>);

impl TargetCredentials {
    pub(super) fn of(jvm: &JvmProcess) -> TargetCredentials {
        let (euid, _) = sys::effective_ids();
        TargetCredentials((euid == 0 && jvm.uid != 0).then_some((jvm.uid, jvm.gid)))
    }

    /// Runs `f` with the calling thread switched to the JVM's effective ids.
    /// If switching is not permitted, `f` runs as is: HotSpot 9+ accepts
    /// root peers anyway.
    pub(super) fn run<T>(&self, f: impl FnOnce() -> T) -> T {
        let _guard = self
            .0
            .and_then(|(uid, gid)| sys::ThreadCredentials::switch_to(uid, gid).ok());
        f()
    }
}

/// How long the process has been running, from its start time in ticks
/// since boot and the system uptime.
pub(super) fn process_age(jvm: &JvmProcess) -> Option<Duration> {
    let uptime = fs::read_to_string("/proc/uptime").ok()?;
    let uptime: f64 = uptime.split_whitespace().next()?.parse().ok()?;
    let started = jvm.start_time as f64 / sys::clock_ticks_per_second() as f64;
    Duration::try_from_secs_f64(uptime - started).ok()
}
