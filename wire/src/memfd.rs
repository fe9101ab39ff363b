//! Sealed anonymous shared memory (memfd) for the event ring: the few
//! system calls the standard library lacks, each in one small function.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The seals a ring must carry: no one may shrink or grow it (a mapped page
/// past a shrunk end raises SIGBUS). [`seal_size`] also adds
/// `F_SEAL_SEAL`, so the seals cannot change afterwards.
const SIZE_SEALS: libc::c_int = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW;

/// A new memfd named `name` (shown in `/proc/PID/maps`), close-on-exec,
/// sealable.
pub fn create(name: &str) -> io::Result<OwnedFd> {
    let name = CString::new(name).map_err(|_| io::Error::other("memfd name holds a NUL"))?;
    // SAFETY: `name` is a valid NUL-terminated string that outlives the
    // call; memfd_create has no other preconditions.
    let fd =
        unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a descriptor memfd_create just opened for us alone.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Seals `file`'s size (and the seals themselves) for good.
pub fn seal_size(file: &File) -> io::Result<()> {
    // SAFETY: the descriptor is live (borrowed from `file`); F_ADD_SEALS
    // takes an int argument and touches no memory of ours.
    let rc = unsafe {
        libc::fcntl(
            file.as_raw_fd(),
            libc::F_ADD_SEALS,
            SIZE_SEALS | libc::F_SEAL_SEAL,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Checks that `fd` carries the size seals (a memfd from [`create`] after
/// [`seal_size`]).
pub fn check_size_sealed(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: the descriptor is live (borrowed from `fd`); F_GET_SEALS
    // takes no argument and touches no memory of ours.
    let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
    if seals < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("the ring descriptor is not a sealed memfd: {e}"),
        ));
    }
    if seals & SIZE_SEALS != SIZE_SEALS {
        return Err(io::Error::other(
            "the ring descriptor is not sealed against resizing",
        ));
    }
    Ok(())
}
