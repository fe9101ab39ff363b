//! Why a control connection failed ([`SessionError`]), for the listener,
//! the connector and the channel alike.

use super::sys::PeerCred;
use crate::codec::CodecError;
use std::io;
use std::time::Duration;
use thiserror::Error;

/// Why a control connection failed.
#[derive(Debug, Error)]
pub enum SessionError {
    /// The peer closed the connection.
    #[error("the peer closed the control connection")]
    Closed,
    /// Nobody (acceptable) connected in time, or the peer did not answer.
    #[error("timed out after {0:?} waiting for the peer")]
    Timeout(Duration),
    /// A peer connected but sent no hello in time.
    #[error("the peer connected but sent no hello within {0:?}")]
    NoHello(Duration),
    /// The process at the other end is not the one expected.
    #[error("control socket peer is pid {} uid {}, expected {expected}", got.pid, got.uid)]
    WrongPeer { got: PeerCred, expected: String },
    #[error("the agent presented a wrong session token")]
    BadToken,
    #[error("protocol version mismatch: this side speaks {ours}, the peer speaks {theirs}")]
    VersionMismatch { ours: u32, theirs: u32 },
    /// The first frame was not the expected hello.
    #[error("expected {expected} as the first frame, got {got}")]
    Unexpected { expected: &'static str, got: String },
    /// The peer refused the handshake with an `Error` message.
    #[error("the peer refused the session: {0}")]
    Rejected(String),
    #[error(transparent)]
    Codec(CodecError),
    #[error("control socket: {0}")]
    Io(#[from] io::Error),
}

impl From<CodecError> for SessionError {
    fn from(e: CodecError) -> SessionError {
        match e {
            CodecError::Closed => SessionError::Closed,
            CodecError::Io(io) => SessionError::Io(io),
            other => SessionError::Codec(other),
        }
    }
}

impl SessionError {
    /// The peer is gone (clean close or connection reset).
    pub fn is_closed(&self) -> bool {
        match self {
            SessionError::Closed => true,
            SessionError::Io(e) => matches!(
                e.kind(),
                io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
            ),
            _ => false,
        }
    }
}
