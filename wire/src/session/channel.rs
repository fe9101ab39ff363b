//! The framed control connection between the CLI and the agent:
//! length-prefixed messages ([`crate::codec`]), sends serialised across
//! clones, a receive buffer that survives a timed-out wait, and a
//! descriptor passed along with a message (the sealed memfd of the ring
//! rides with `Start`).

use super::error::SessionError;
use super::sys::{PeerCred, peer_cred, recv_with_fds, send_fd};
use crate::codec::{self, CodecError};
use crate::control::Message;
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A framed, bidirectional control connection. [`Channel::try_clone`] gives
/// a second handle on the same socket so one thread can block in `recv`
/// while others `send`; sends from all clones are serialised so frames
/// never interleave.
#[derive(Debug)]
pub struct Channel {
    stream: UnixStream,
    write_lock: Arc<Mutex<()>>,
    /// Bytes received but not yet decoded (a partial frame survives a
    /// `recv_timeout` that timed out).
    rbuf: Vec<u8>,
    /// Descriptors received with the bytes (`SCM_RIGHTS`), oldest first.
    fds: Vec<OwnedFd>,
}

impl Channel {
    pub(super) fn new(stream: UnixStream) -> io::Result<Channel> {
        Ok(Channel {
            stream,
            write_lock: Arc::new(Mutex::new(())),
            rbuf: Vec::new(),
            fds: Vec::new(),
        })
    }

    /// Sends one message with a descriptor attached (`SCM_RIGHTS` on the
    /// frame's bytes); the peer takes it with [`Channel::take_fd`] once it
    /// has received the message.
    pub fn send_with_fd(&self, msg: &Message, fd: BorrowedFd<'_>) -> Result<(), SessionError> {
        self.send_frame(msg, Some(fd))
    }

    /// The oldest descriptor received and not yet taken. Descriptors come
    /// with the bytes of the message they were sent with, so after that
    /// message has been received this returns its descriptor.
    pub fn take_fd(&mut self) -> Option<OwnedFd> {
        if self.fds.is_empty() {
            None
        } else {
            Some(self.fds.remove(0))
        }
    }

    /// Sends one message (one `write_all` under the channel's write lock).
    /// Blocks while the socket buffer is full; bound that with
    /// [`Channel::set_write_timeout`] on threads that must not stall.
    pub fn send(&self, msg: &Message) -> Result<(), SessionError> {
        self.send_frame(msg, None)
    }

    /// Sends `msgs` in order, as one write under the write lock (a burst of
    /// queued messages costs one system call, not one each).
    pub fn send_all(&self, msgs: &[Message]) -> Result<(), SessionError> {
        let mut frames = Vec::new();
        for m in msgs {
            frames.extend_from_slice(&codec::encode(m)?);
        }
        let _guard = self
            .write_lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        use std::io::Write;
        (&self.stream).write_all(&frames).map_err(closed_or_io)
    }

    /// Encodes `msg` and writes the frame under the write lock, its first
    /// bytes with `fd` attached when there is one.
    fn send_frame(&self, msg: &Message, fd: Option<BorrowedFd<'_>>) -> Result<(), SessionError> {
        let frame = codec::encode(msg)?;
        let _guard = self
            .write_lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let sent = match fd {
            Some(fd) => send_fd(&self.stream, &frame, fd).map_err(closed_or_io)?,
            None => 0,
        };
        use std::io::Write;
        (&self.stream)
            .write_all(&frame[sent..])
            .map_err(closed_or_io)
    }

    /// Blocks until the next message arrives.
    pub fn recv(&mut self) -> Result<Message, SessionError> {
        loop {
            if let Some(m) = self.recv_inner(None)? {
                return Ok(m);
            }
        }
    }

    /// Waits up to `timeout` for the next message; `Ok(None)` on timeout.
    /// A closed peer is `Err(SessionError::Closed)`.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Option<Message>, SessionError> {
        let deadline = Instant::now() + timeout;
        self.recv_inner(Some(deadline))
    }

    fn recv_inner(&mut self, deadline: Option<Instant>) -> Result<Option<Message>, SessionError> {
        let mut chunk = [0u8; 8192];
        loop {
            if let Some((msg, used)) = codec::try_decode(&self.rbuf)? {
                self.rbuf.drain(..used);
                return Ok(Some(msg));
            }
            let wait = match deadline {
                None => None,
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Ok(None);
                    }
                    Some(left)
                }
            };
            self.stream.set_read_timeout(wait)?;
            match recv_with_fds(&self.stream, &mut chunk, &mut self.fds) {
                Ok(0) => {
                    return Err(if self.rbuf.is_empty() {
                        SessionError::Closed
                    } else {
                        SessionError::Codec(CodecError::Truncated {
                            got: self.rbuf.len(),
                            want: expected_len(&self.rbuf),
                        })
                    });
                }
                Ok(n) => self.rbuf.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    if deadline.is_some() {
                        continue; // the deadline check above decides
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                    return Err(SessionError::Closed);
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// A second handle on the same connection (for a reader thread). The
    /// clone starts with an empty receive buffer: read from one handle only.
    pub fn try_clone(&self) -> io::Result<Channel> {
        Ok(Channel {
            stream: self.stream.try_clone()?,
            write_lock: Arc::clone(&self.write_lock),
            rbuf: Vec::new(),
            fds: Vec::new(),
        })
    }

    /// Bounds how long a `send` may block on a peer that does not read.
    pub fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.stream.set_write_timeout(t)
    }

    /// Credentials of the peer process.
    pub fn peer(&self) -> io::Result<PeerCred> {
        peer_cred(&self.stream)
    }

    /// Shuts both directions down; a peer blocked in `recv` sees `Closed`.
    pub fn shutdown(&self) -> io::Result<()> {
        match self.stream.shutdown(std::net::Shutdown::Both) {
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
            other => other,
        }
    }
}

fn closed_or_io(e: io::Error) -> SessionError {
    if matches!(
        e.kind(),
        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
    ) {
        SessionError::Closed
    } else {
        SessionError::Io(e)
    }
}

fn expected_len(buf: &[u8]) -> usize {
    match buf.first_chunk::<{ codec::PREFIX }>() {
        Some(p) => codec::PREFIX + u32::from_le_bytes(*p) as usize,
        None => codec::PREFIX,
    }
}
