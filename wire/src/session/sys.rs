//! The kernel calls of a session, and the only file of `session/` with
//! `unsafe`: this process's uid, the peer's credentials (`SO_PEERCRED`),
//! descriptor passing (`SCM_RIGHTS` over `sendmsg`/`recvmsg`) and removing
//! a name relative to a directory's descriptor (`unlinkat`). Each block has
//! its `// SAFETY:` line.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;

/// Effective uid of this process.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Credentials of the process at the other end of a Unix socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerCred {
    pub pid: u32,
    pub uid: u32,
    pub gid: u32,
}

/// Reads `SO_PEERCRED` of a connected Unix socket.
pub fn peer_cred(sock: &UnixStream) -> io::Result<PeerCred> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: the fd is a live socket borrowed from `sock`; `cred` and `len`
    // are valid for writes and `len` holds the size of `cred`, so the kernel
    // writes at most that many bytes.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if len as usize != std::mem::size_of::<libc::ucred>() {
        return Err(io::Error::other("short SO_PEERCRED answer"));
    }
    Ok(PeerCred {
        pid: cred.pid as u32,
        uid: cred.uid,
        gid: cred.gid,
    })
}

/// Room for the control message of one descriptor (`CMSG_SPACE` of an
/// int, rounded up generously), in u64 words for alignment.
const CMSG_WORDS: usize = 8;
/// Most descriptors one receive accepts; more are closed at once.
const MAX_FDS: usize = 4;

/// A message header over one buffer (`iov`) with `cbuf` as the whole
/// control buffer; both must outlive every use of the header.
fn msghdr(iov: &mut libc::iovec, cbuf: &mut [u64]) -> libc::msghdr {
    // SAFETY: msghdr is plain data; zeroed is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(cbuf) as _;
    msg
}

/// `sendmsg` of (a first part of) `bytes` with `fd` attached; returns how
/// many bytes went out (at least one).
pub(super) fn send_fd(stream: &UnixStream, bytes: &[u8], fd: BorrowedFd<'_>) -> io::Result<usize> {
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    let mut cbuf = [0u64; CMSG_WORDS];
    let mut msg = msghdr(&mut iov, &mut cbuf);
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) } as usize;
    assert!(space <= std::mem::size_of_val(&cbuf));
    msg.msg_controllen = space as _;
    // SAFETY: msg_control points at `cbuf`, which holds `space` bytes, so
    // CMSG_FIRSTHDR is non-null and the header and its int payload (at
    // CMSG_DATA, within CMSG_LEN(int) <= space) lie inside `cbuf`.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>(), fd.as_raw_fd());
    }
    loop {
        // SAFETY: the socket is live (borrowed from `stream`); `msg` points
        // at `iov` (over `bytes`) and `cbuf`, all alive for the call.
        let n = unsafe { libc::sendmsg(stream.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if n > 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// `recvmsg` into `buf`, keeping any descriptors that came along
/// (close-on-exec) in `fds`; returns the byte count like `read`.
pub(super) fn recv_with_fds(
    stream: &UnixStream,
    buf: &mut [u8],
    fds: &mut Vec<OwnedFd>,
) -> io::Result<usize> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut cbuf = [0u64; CMSG_WORDS * MAX_FDS];
    let mut msg = msghdr(&mut iov, &mut cbuf);
    // SAFETY: the socket is live (borrowed from `stream`); `msg` points at
    // `iov` (over `buf`) and `cbuf`, both writable and alive for the call.
    let n = unsafe { libc::recvmsg(stream.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel filled `msg` and `cbuf`; CMSG_FIRSTHDR/NXTHDR walk
    // only headers inside msg_controllen, and each SCM_RIGHTS payload holds
    // (cmsg_len - CMSG_LEN(0)) / sizeof(int) descriptors now owned by us.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let payload = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let data = libc::CMSG_DATA(c).cast::<libc::c_int>();
                for i in 0..payload / std::mem::size_of::<libc::c_int>() {
                    let fd = std::ptr::read_unaligned(data.add(i));
                    let owned = OwnedFd::from_raw_fd(fd);
                    if fds.len() < MAX_FDS {
                        fds.push(owned);
                    }
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok(n as usize)
}

/// `unlinkat(dir, name, 0)`: removes `name` inside the directory `dir`
/// without walking a path to it. Best effort: the result is not looked at.
pub(super) fn unlink_at(dir: BorrowedFd<'_>, name: &CStr) {
    // SAFETY: `dir` is an open directory descriptor borrowed for the call
    // and `name` is a NUL-terminated string that outlives the call;
    // unlinkat reads both and changes no memory of ours.
    unsafe {
        libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0);
    }
}
