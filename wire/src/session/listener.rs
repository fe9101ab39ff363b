//! The CLI side: the listening socket `control.sock` and the wait for the
//! expected agent.
//!
//! Its part of the invariant that the session directory stays root's and
//! private until the socket is bound: [`Listener::bind`] is the last thing
//! made in the directory; it sets the socket's mode and owner while the
//! directory is private and hands the directory over as its last step. Its
//! drop removes the socket relative to the directory's descriptor, never by
//! path.

use super::channel::Channel;
use super::dir::{SOCKET_NAME, SessionDir};
use super::error::SessionError;
use super::handshake::handshake;
use super::sys::{peer_cred, unlink_at};
use crate::control::JvmInfo;
use std::fs;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Whom [`Listener::accept`] waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerExpectation {
    /// The target JVM's pid, when known (always when attaching by pid).
    pub pid: Option<u32>,
    /// The uid the JVM runs as.
    pub uid: u32,
    /// The session token handed to the agent.
    pub token: [u8; 16],
}

/// The CLI side: a listening socket `control.sock` (mode 0600).
#[derive(Debug)]
pub struct Listener {
    inner: UnixListener,
    path: PathBuf,
    /// The session directory, to remove the socket without a path walk.
    dir: OwnedFd,
}

impl Listener {
    /// Binds `dir`'s control socket, mode 0600, and when the directory has
    /// an owner ([`SessionDir::create_for_owner`]) gives the socket and then
    /// the directory to that owner: binding is the last thing made in a
    /// session directory. The socket is made, and its mode and owner set,
    /// while the directory is still private to this process's user, so
    /// nobody can swap a link in for it; its owner is set without
    /// following links all the same.
    pub fn bind(dir: &SessionDir) -> io::Result<Listener> {
        dir.check_private()?;
        let path = dir.socket_path();
        let inner = UnixListener::bind(&path)?;
        let dir_fd = dir.clone_handle()?;
        let listener = Listener {
            inner,
            path,
            dir: dir_fd,
        };
        fs::set_permissions(&listener.path, fs::Permissions::from_mode(0o600))?;
        dir.adopt(&listener.path)?;
        dir.hand_over()?;
        listener.inner.set_nonblocking(true)?;
        Ok(listener)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Waits up to `timeout` for the expected agent and shakes hands.
    ///
    /// Connections from another uid, or another pid when `expect.pid` is
    /// given, are dropped and waiting goes on. The first frame must be an
    /// `AgentHello` with the session token and
    /// [`PROTOCOL_VERSION`](crate::PROTOCOL_VERSION); the CLI answers
    /// `CliHello` and returns the channel and the JVM facts.
    ///
    /// When the pid is known and matches, the peer is the target JVM, so a
    /// wrong token, wrong version or malformed hello is returned as an error
    /// (the agent is told why first). When the pid is not known, any
    /// process of that uid could connect: one that does not send a valid
    /// hello within [`HELLO_TIMEOUT`] is dropped and waiting goes on, and
    /// its error is only returned if nobody better comes before the
    /// deadline. A version mismatch with the right token is always returned
    /// at once: that is our agent, only older or newer.
    ///
    /// The hello wait of a connected peer may run past `timeout` (by at most
    /// [`VERIFIED_HELLO_TIMEOUT`] or [`HELLO_TIMEOUT`]), so accepting in
    /// short slices never drops an agent in the middle of its handshake.
    pub fn accept(
        &self,
        expect: &PeerExpectation,
        timeout: Duration,
    ) -> Result<(Channel, JvmInfo), SessionError> {
        let deadline = Instant::now() + timeout;
        let mut last_err = None;
        loop {
            let stream = match self.inner.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        return Err(last_err.unwrap_or(SessionError::Timeout(timeout)));
                    }
                    std::thread::sleep(Duration::from_millis(2));
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            };
            stream.set_nonblocking(false)?;
            let cred = peer_cred(&stream)?;
            if cred.uid != expect.uid || expect.pid.is_some_and(|p| p != cred.pid) {
                // Not our agent: drop it and keep waiting.
                continue;
            }
            let verified = expect.pid.is_some();
            // Once a peer is connected it gets its own time for the hello,
            // even when `timeout` is nearly used up (callers may accept in
            // short slices): the target gets VERIFIED_HELLO_TIMEOUT, an
            // unverified peer HELLO_TIMEOUT.
            let remaining = deadline.saturating_duration_since(Instant::now());
            let hello_wait = if verified {
                remaining.max(VERIFIED_HELLO_TIMEOUT)
            } else {
                HELLO_TIMEOUT
            };
            match handshake(
                stream,
                &expect.token,
                hello_wait.max(Duration::from_millis(1)),
            ) {
                Ok(done) => return Ok(done),
                Err(e @ SessionError::VersionMismatch { .. }) => return Err(e),
                Err(e) if verified => return Err(e),
                Err(e) => last_err = Some(e),
            }
        }
    }
}

/// How long [`Listener::accept`] waits for the hello of a peer whose pid
/// it cannot check before it drops it and waits for another.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(1);

/// How long [`Listener::accept`] waits at least for the hello of the
/// expected pid once it has connected.
pub const VERIFIED_HELLO_TIMEOUT: Duration = Duration::from_secs(5);

impl Drop for Listener {
    fn drop(&mut self) {
        // Relative to the directory's descriptor: the directory may belong
        // to another user by now, who could have put a link where its path
        // was.
        let name = c"control.sock";
        debug_assert_eq!(name.to_bytes(), SOCKET_NAME.as_bytes());
        unlink_at(self.dir.as_fd(), name);
    }
}
