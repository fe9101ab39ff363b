//! Both halves of the handshake: the listener's on an accepted connection
//! ([`handshake`], called by [`Listener::accept`](super::Listener::accept)
//! once the peer's credentials passed) and the agent's ([`connect`]). The
//! agent checks the listener is the CLI process of its options running as
//! its user or root; the listener checks the session token (in constant
//! time) and both check the protocol version.

use super::channel::Channel;
use super::error::SessionError;
use super::sys::{euid, peer_cred};
use crate::control::{AgentOptions, JvmInfo, Message, PROTOCOL_VERSION};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// The listener's half of the handshake on one accepted connection.
pub(super) fn handshake(
    stream: UnixStream,
    expect_token: &[u8; 16],
    wait: Duration,
) -> Result<(Channel, JvmInfo), SessionError> {
    let mut ch = Channel::new(stream)?;
    ch.set_write_timeout(Some(wait))?;
    let first = ch.recv_timeout(wait)?.ok_or(SessionError::NoHello(wait))?;
    let Message::AgentHello {
        version,
        token,
        jvm,
    } = first
    else {
        return Err(SessionError::Unexpected {
            expected: "AgentHello",
            got: message_name(&first),
        });
    };
    if !tokens_equal(&token, expect_token) {
        let _ = ch.send(&Message::Error("wrong session token".into()));
        return Err(SessionError::BadToken);
    }
    if version != PROTOCOL_VERSION {
        let _ = ch.send(&Message::Error(format!(
            "protocol version mismatch: sprig speaks {PROTOCOL_VERSION}, the agent speaks {version}"
        )));
        return Err(SessionError::VersionMismatch {
            ours: PROTOCOL_VERSION,
            theirs: version,
        });
    }
    ch.send(&Message::CliHello {
        version: PROTOCOL_VERSION,
    })?;
    ch.set_write_timeout(None)?;
    Ok((ch, jvm))
}

/// Constant-time comparison, so the token cannot be guessed byte by byte.
fn tokens_equal(a: &[u8; 16], b: &[u8; 16]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The variant name of a message, for error texts.
fn message_name(m: &Message) -> String {
    let dbg = format!("{m:?}");
    let end = dbg.find([' ', '(', '{']).unwrap_or(dbg.len());
    dbg[..end].to_string()
}

/// The agent side: connects to the session's socket, checks the listener
/// is the CLI process `opts.cli_pid` running as this user or root, sends
/// `AgentHello` with the token and waits for a `CliHello` of the same
/// protocol version.
pub fn connect(
    opts: &AgentOptions,
    jvm: JvmInfo,
    timeout: Duration,
) -> Result<Channel, SessionError> {
    let stream = UnixStream::connect(opts.socket_path())?;
    let cred = peer_cred(&stream)?;
    let me = euid();
    if cred.pid != opts.cli_pid || (cred.uid != me && cred.uid != 0) {
        return Err(SessionError::WrongPeer {
            got: cred,
            expected: format!("pid {} uid {me} or 0", opts.cli_pid),
        });
    }
    let mut ch = Channel::new(stream)?;
    ch.set_write_timeout(Some(timeout))?;
    ch.send(&Message::AgentHello {
        version: PROTOCOL_VERSION,
        token: opts.token,
        jvm,
    })?;
    let reply = ch
        .recv_timeout(timeout)?
        .ok_or(SessionError::Timeout(timeout))?;
    ch.set_write_timeout(None)?;
    match reply {
        Message::CliHello { version } if version == PROTOCOL_VERSION => Ok(ch),
        Message::CliHello { version } => Err(SessionError::VersionMismatch {
            ours: PROTOCOL_VERSION,
            theirs: version,
        }),
        Message::Error(text) => Err(SessionError::Rejected(text)),
        other => Err(SessionError::Unexpected {
            expected: "CliHello",
            got: message_name(&other),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_compare() {
        assert!(tokens_equal(&[1; 16], &[1; 16]));
        let mut b = [1; 16];
        b[15] = 2;
        assert!(!tokens_equal(&[1; 16], &b));
    }

    #[test]
    fn message_names() {
        assert_eq!(message_name(&Message::Detach), "Detach");
        assert_eq!(message_name(&Message::Warning("x".into())), "Warning");
        assert_eq!(message_name(&Message::CliHello { version: 1 }), "CliHello");
    }
}
