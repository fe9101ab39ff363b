//! Length-prefixed bincode frames for the control channel.
//!
//! A frame is a `u32` little-endian payload length followed by the payload:
//! one [`Message`] encoded with bincode 2's standard configuration (varint
//! integers, little endian) and a decode limit of [`MAX_FRAME`]. bincode is
//! pinned to 2.0.1 and used nowhere else in the workspace.
//!
//! Reading never trusts the peer: a length above [`MAX_FRAME`] is refused
//! before anything is allocated, the payload must decode to exactly one
//! message with no trailing bytes, and bincode's own limit bounds every
//! container length claimed inside the payload.

use crate::control::Message;
use std::io::{self, Read, Write};
use thiserror::Error;

/// Largest payload a frame may carry (1 MiB).
pub const MAX_FRAME: usize = 1 << 20;

/// Bytes of the length prefix.
pub const PREFIX: usize = 4;

fn config() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<MAX_FRAME>()
}

/// Why a frame could not be written or read.
#[derive(Debug, Error)]
pub enum CodecError {
    /// The stream ended cleanly at a frame boundary.
    #[error("the peer closed the connection")]
    Closed,
    /// The stream ended inside a frame.
    #[error("the connection ended inside a frame ({got} of {want} bytes)")]
    Truncated { got: usize, want: usize },
    /// The length prefix (or an encoded message) exceeds [`MAX_FRAME`].
    #[error("frame of {len} bytes exceeds the {max}-byte limit", max = MAX_FRAME)]
    TooLarge { len: usize },
    /// A zero-length frame: no message can encode to nothing.
    #[error("empty frame")]
    Empty,
    /// The payload does not decode to a message.
    #[error("malformed frame: {0}")]
    Malformed(String),
    /// The payload decoded to a message but bytes were left over.
    #[error("malformed frame: {trailing} trailing bytes after the message")]
    Trailing { trailing: usize },
    /// The message could not be encoded.
    #[error("cannot encode message: {0}")]
    Encode(String),
    #[error("i/o error on the control channel: {0}")]
    Io(#[from] io::Error),
}

/// Encodes `msg` as one frame, length prefix included.
pub fn encode(msg: &Message) -> Result<Vec<u8>, CodecError> {
    let mut out = vec![0u8; PREFIX];
    let payload =
        bincode::encode_to_vec(msg, config()).map_err(|e| CodecError::Encode(e.to_string()))?;
    if payload.len() > MAX_FRAME {
        return Err(CodecError::TooLarge { len: payload.len() });
    }
    out.extend_from_slice(&payload);
    let len = payload.len() as u32;
    out[..PREFIX].copy_from_slice(&len.to_le_bytes());
    Ok(out)
}

/// Encodes `msg` and writes the whole frame with one `write_all`.
pub fn write_frame(w: &mut impl Write, msg: &Message) -> Result<(), CodecError> {
    let frame = encode(msg)?;
    w.write_all(&frame)?;
    w.flush()?;
    Ok(())
}

/// Validates a length prefix.
fn frame_len(prefix: [u8; PREFIX]) -> Result<usize, CodecError> {
    let len = u32::from_le_bytes(prefix) as usize;
    if len > MAX_FRAME {
        return Err(CodecError::TooLarge { len });
    }
    if len == 0 {
        return Err(CodecError::Empty);
    }
    Ok(len)
}

/// Decodes one payload that must hold exactly one message.
pub fn decode_payload(payload: &[u8]) -> Result<Message, CodecError> {
    let (msg, used): (Message, usize) = bincode::decode_from_slice(payload, config())
        .map_err(|e| CodecError::Malformed(e.to_string()))?;
    if used != payload.len() {
        return Err(CodecError::Trailing {
            trailing: payload.len() - used,
        });
    }
    Ok(msg)
}

/// Reads until `buf` is full; returns how many bytes were read before EOF.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Reads one frame. EOF before the first byte is [`CodecError::Closed`];
/// EOF later is [`CodecError::Truncated`].
pub fn read_frame(r: &mut impl Read) -> Result<Message, CodecError> {
    let mut prefix = [0u8; PREFIX];
    let got = read_full(r, &mut prefix)?;
    if got == 0 {
        return Err(CodecError::Closed);
    }
    if got < PREFIX {
        return Err(CodecError::Truncated { got, want: PREFIX });
    }
    let len = frame_len(prefix)?;
    let mut payload = vec![0u8; len];
    let got = read_full(r, &mut payload)?;
    if got < len {
        return Err(CodecError::Truncated {
            got: PREFIX + got,
            want: PREFIX + len,
        });
    }
    decode_payload(&payload)
}

/// Decodes the first frame in `buf` if it is complete: `Ok(Some((msg,
/// consumed)))`, `Ok(None)` when more bytes are needed. A bad length prefix
/// is reported as soon as the prefix is there.
pub fn try_decode(buf: &[u8]) -> Result<Option<(Message, usize)>, CodecError> {
    let Some(prefix) = buf.first_chunk::<PREFIX>() else {
        return Ok(None);
    };
    let len = frame_len(*prefix)?;
    let Some(payload) = buf.get(PREFIX..PREFIX + len) else {
        return Ok(None);
    };
    Ok(Some((decode_payload(payload)?, PREFIX + len)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::{AgentStats, ClockKind, JvmInfo};

    fn hello() -> Message {
        Message::AgentHello {
            version: crate::PROTOCOL_VERSION,
            token: [7; 16],
            jvm: JvmInfo {
                pid: 42,
                version: "17.0.15".into(),
                vm_name: "OpenJDK 64-Bit Server VM".into(),
                vendor: "Debian".into(),
            },
        }
    }

    #[test]
    fn round_trip_through_stream() {
        let msgs = [
            hello(),
            Message::Started {
                clock: ClockKind::Tsc,
                ticks_per_sec: 2_900_000_000,
            },
            Message::Status(AgentStats::default()),
            Message::Detach,
        ];
        let mut buf = Vec::new();
        for m in &msgs {
            write_frame(&mut buf, m).unwrap();
        }
        let mut r = &buf[..];
        for m in &msgs {
            assert_eq!(&read_frame(&mut r).unwrap(), m);
        }
        assert!(matches!(read_frame(&mut r), Err(CodecError::Closed)));
    }

    #[test]
    fn prefix_is_le_payload_length() {
        let f = encode(&Message::Detach).unwrap();
        let len = u32::from_le_bytes(f[..4].try_into().unwrap()) as usize;
        assert_eq!(len, f.len() - 4);
        assert!(len > 0);
    }
}
