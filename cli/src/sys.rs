//! The `sprig` library's FFI, on the ground floor so that every module
//! may use it (JVM discovery, files through directory handles, the attach
//! path): signals (through a pidfd where the kernel has them), effective
//! ids, a per-thread switch of the effective uid/gid, and the `*at` calls
//! that work relative to a directory handle. Every other module of the
//! library stays safe Rust; the binary's signal handlers are `signals.rs`.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

/// Sends SIGQUIT to `pid`. Callers must have confirmed that `pid` is a
/// HotSpot JVM first: SIGQUIT terminates most other processes.
pub fn send_sigquit(pid: u32) -> io::Result<()> {
    let pid = to_pid(pid)?;
    // SAFETY: kill(2) takes two integers and touches no memory of ours.
    let rc = unsafe { libc::kill(pid, libc::SIGQUIT) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The columns of the terminal on `fd` (1 stdout, 2 stderr), or `None`
/// when `fd` is not a terminal or says it has no width.
pub fn terminal_columns(fd: i32) -> Option<usize> {
    let mut ws = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` into the struct we own and
    // pass by a valid pointer; on a non-terminal it fails with ENOTTY.
    let rc = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws as *mut libc::winsize) };
    (rc == 0 && ws.ws_col > 0).then_some(ws.ws_col as usize)
}

/// Whether a process `pid` exists (a zombie counts as existing). Sends no
/// signal: kill(2) with signal 0 only checks.
pub fn process_exists(pid: u32) -> bool {
    let Ok(pid) = to_pid(pid) else {
        return false;
    };
    // SAFETY: kill(2) with signal 0 delivers nothing and touches no memory.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// A handle on one process that stays bound to it: a signal sent through
/// it reaches that process or nobody, even once its PID is reused. Opened
/// with `pidfd_open(2)` (Linux 5.3); `None` where the kernel has no pidfds.
pub fn pidfd_open(pid: u32) -> io::Result<Option<OwnedFd>> {
    let pid = to_pid(pid)?;
    // SAFETY: pidfd_open(2) takes a PID and flags and touches no memory of
    // ours; on success it returns a new descriptor that nothing else owns.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0 as libc::c_uint) };
    if fd >= 0 {
        let fd = libc::c_int::try_from(fd).map_err(|_| io::Error::other("bad descriptor"))?;
        // SAFETY: `fd` was just returned to us by the kernel and is owned
        // by no other object.
        return Ok(Some(unsafe { OwnedFd::from_raw_fd(fd) }));
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        // No pidfds in this kernel, or a seccomp policy that refuses
        // system calls it does not know.
        Some(libc::ENOSYS | libc::EPERM) => Ok(None),
        _ => Err(e),
    }
}

/// Sends SIGQUIT to the process `pidfd` refers to (see [`pidfd_open`]);
/// `ESRCH` once that process has exited, whoever holds its PID now.
pub fn pidfd_send_sigquit(pidfd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: pidfd_send_signal(2) with a null siginfo behaves like kill(2)
    // on the process behind the descriptor; it touches no memory of ours.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            libc::SIGQUIT,
            std::ptr::null::<libc::siginfo_t>(),
            0 as libc::c_uint,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `openat(2)`: opens `name` (one path component, or a relative path)
/// relative to the directory `dir`, with `flags` (`O_CLOEXEC` is added) and
/// `mode` for a file it creates.
pub fn openat(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    flags: libc::c_int,
    mode: libc::mode_t,
) -> io::Result<OwnedFd> {
    let name = c_name(name)?;
    // SAFETY: `name` is a NUL-terminated string that outlives the call and
    // `dir` is an open descriptor; the kernel reads the name and returns a
    // new descriptor or -1.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags | libc::O_CLOEXEC,
            libc::c_uint::from(mode),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned to us by the kernel and is owned by no
    // other object.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `unlinkat(2)`: removes the entry `name` of the directory `dir` (a file,
/// a socket or a link itself, never what a link points to).
pub fn unlinkat(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    let name = c_name(name)?;
    // SAFETY: `name` is a NUL-terminated string that outlives the call and
    // `dir` is an open descriptor; unlinkat reads only the name.
    let rc = unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn c_name(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file name with a NUL byte"))
}

fn to_pid(pid: u32) -> io::Result<libc::pid_t> {
    match libc::pid_t::try_from(pid) {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(io::Error::from_raw_os_error(libc::ESRCH)),
    }
}

/// The effective uid and gid of the calling thread.
pub fn effective_ids() -> (u32, u32) {
    // SAFETY: geteuid/getegid cannot fail and touch no memory of ours.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

/// Clock ticks per second, the unit of /proc/PID/stat times.
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf takes an integer and touches no memory of ours.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(ticks).ok().filter(|&t| t > 0).unwrap_or(100)
}

/// Restores the calling thread's effective uid/gid when dropped.
///
/// Linux keeps credentials per thread; the glibc wrappers (`seteuid`, ...)
/// broadcast a change to every thread of the process, the raw system calls do
/// not. Switching with the raw calls therefore affects only the thread that
/// connects to the JVM, and the other threads of the CLI keep running as root.
/// The real and saved uid stay 0, so switching back is always permitted and
/// the permitted capabilities are kept.
#[derive(Debug)]
pub struct ThreadCredentials {
    euid: u32,
    egid: u32,
}

impl ThreadCredentials {
    /// Switches the calling thread's effective gid, then uid, to the given
    /// ids. Fails (and changes nothing) when the process may not do so.
    pub fn switch_to(uid: u32, gid: u32) -> io::Result<ThreadCredentials> {
        let (euid, egid) = effective_ids();
        set_thread_egid(gid)?;
        if let Err(e) = set_thread_euid(uid) {
            // Undo the half switch; the gid change was permitted so is its undo.
            let _ = set_thread_egid(egid);
            return Err(e);
        }
        Ok(ThreadCredentials { euid, egid })
    }
}

impl Drop for ThreadCredentials {
    fn drop(&mut self) {
        // The uid first: only uid 0 may set an arbitrary gid afterwards.
        let _ = set_thread_euid(self.euid);
        let _ = set_thread_egid(self.egid);
    }
}

const UNCHANGED: libc::c_long = -1;

fn set_thread_euid(uid: u32) -> io::Result<()> {
    // SAFETY: setresuid(2) takes three integers (-1 = unchanged) and touches
    // no memory; the raw syscall changes only the calling thread.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_setresuid,
            UNCHANGED,
            libc::c_long::from(uid),
            UNCHANGED,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn set_thread_egid(gid: u32) -> io::Result<()> {
    // SAFETY: setresgid(2) takes three integers (-1 = unchanged) and touches
    // no memory; the raw syscall changes only the calling thread.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_setresgid,
            UNCHANGED,
            libc::c_long::from(gid),
            UNCHANGED,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (real, effective, saved, fs) uid or gid of a task, from its status.
    fn ids(status_path: &str, key: &str) -> Vec<u32> {
        let text = std::fs::read_to_string(status_path).unwrap();
        let line = text.lines().find_map(|l| l.strip_prefix(key)).unwrap();
        line.split_whitespace()
            .map(|v| v.parse().unwrap())
            .collect()
    }

    #[test]
    fn credential_switch_is_per_thread_and_restored() {
        let (euid, egid) = effective_ids();
        let main_tid = std::fs::read_link("/proc/thread-self")
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let main_status = format!("/proc/self/task/{main_tid}/status");
        let before = (ids(&main_status, "Uid:"), ids(&main_status, "Gid:"));
        let status = main_status.clone();
        std::thread::spawn(move || {
            let main_status = status;
            let switched = ThreadCredentials::switch_to(65534, 65534);
            if euid != 0 {
                // Only root may take on another user's ids.
                assert!(switched.is_err() || euid == 65534);
                return;
            }
            let guard = switched.expect("root may switch");
            let uid = ids("/proc/thread-self/status", "Uid:");
            let gid = ids("/proc/thread-self/status", "Gid:");
            assert_eq!(uid, vec![0, 65534, 0, 65534]);
            assert_eq!(gid[1], 65534);
            assert_eq!(effective_ids(), (65534, 65534));
            // Meanwhile the test's own thread keeps its ids.
            assert_eq!(ids(&main_status, "Uid:")[1], euid);
            assert_eq!(ids(&main_status, "Gid:")[1], egid);
            drop(guard);
            assert_eq!(effective_ids(), (euid, egid));
            assert_eq!(ids("/proc/thread-self/status", "Uid:")[1], euid);
        })
        .join()
        .unwrap();
        // The other thread never changed.
        assert_eq!(
            (ids(&main_status, "Uid:"), ids(&main_status, "Gid:")),
            before
        );
    }

    #[test]
    fn signal_checks_reject_impossible_pids() {
        assert!(!process_exists(0));
        assert!(!process_exists(u32::MAX));
        assert!(process_exists(std::process::id()));
        assert!(send_sigquit(0).is_err());
    }
}
