//! The JVM's attach socket (`/tmp/.java_pid<nspid>` under its root): one
//! that is already listening, a stale one left by a dead JVM, and the
//! exchange of one request and its whole reply.

use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use super::error::{AttachError, Stage};
use super::target::{TargetCredentials, process_age};
use crate::beneath::Dir;
use crate::jvm::JvmProcess;

/// A load reply is a few lines; anything larger is not HotSpot talking.
const MAX_REPLY_LEN: u64 = 64 * 1024;

pub(super) fn is_socket(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

/// Connects to the JVM's attach socket if it is already listening. `None`
/// when there is no socket, or a stale one: left by a JVM that died, whose
/// PID was reused (PIDs wrap at 32768 on many machines). A stale socket
/// refuses connections, or is not the JVM's to begin with: owned by another
/// user, or older than the process.
pub(super) fn connect_existing(
    jvm: &JvmProcess,
    socket: &Path,
    creds: &TargetCredentials,
) -> Result<Option<UnixStream>, AttachError> {
    let Ok(meta) = fs::symlink_metadata(socket) else {
        return Ok(None);
    };
    if !meta.file_type().is_socket() {
        return Ok(None);
    }
    if meta.uid() != jvm.uid {
        // In the sticky /tmp the JVM may not rename its new socket over
        // another user's file: without this, SIGQUIT would start nothing.
        // Made by a dead JVM (HotSpot makes it as the JVM's user), so
        // removing it takes nothing from anyone. Removed through a handle
        // on the JVM's /tmp, reached without following a link, and only if
        // it is still such a socket there.
        return match remove_stale_socket(jvm, socket) {
            Ok(()) => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(AttachError::StaleSocket {
                pid: jvm.pid,
                path: socket.to_owned(),
                owner: meta.uid(),
                source,
            }),
        };
    }
    if socket_is_stale(jvm, &meta) {
        // The JVM's own user: its listener renames the new socket over it.
        return Ok(None);
    }
    let pid = jvm.pid;
    match creds.run(|| UnixStream::connect(socket)) {
        Ok(stream) => Ok(Some(stream)),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(None),
        // The listener runs: a SIGQUIT now would only print a thread dump.
        Err(source) => Err(AttachError::Io {
            context: format!(
                "cannot connect to JVM {pid}'s attach socket {}",
                socket.display()
            ),
            source,
        }),
    }
}

/// Removes the socket named like `socket` from the JVM's `/tmp`, reached
/// from its root without following a link, if it is a socket of another
/// user than the JVM's.
fn remove_stale_socket(jvm: &JvmProcess, socket: &Path) -> io::Result<()> {
    let name = socket
        .file_name()
        .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    let tmp = Dir::open(&jvm.root)?.walk(Path::new("tmp"))?;
    match tmp.entry(name)? {
        Some(m) if m.file_type().is_socket() && m.uid() != jvm.uid => tmp.unlink(name),
        Some(_) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not another user's socket",
        )),
        None => Ok(()),
    }
}

/// A socket of the JVM's user made before the process started is a dead
/// JVM's.
fn socket_is_stale(jvm: &JvmProcess, meta: &fs::Metadata) -> bool {
    let socket_age = meta.modified().ok().and_then(|m| m.elapsed().ok());
    match (socket_age, process_age(jvm)) {
        // Two clocks (wall and boot time): allow a second of slack.
        (Some(socket), Some(process)) => socket > process + Duration::from_secs(1),
        _ => false,
    }
}

/// Sends the request and reads the reply until the JVM closes the stream.
pub(super) fn exchange(
    stream: &mut UnixStream,
    request: &[u8],
    deadline: Instant,
    timeout: Duration,
    pid: u32,
) -> Result<String, AttachError> {
    let timed_out = || AttachError::Timeout {
        pid,
        stage: Stage::Reply,
        waited: timeout,
    };
    let io_err = |context: &str, source: io::Error| {
        if matches!(
            source.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ) {
            timed_out()
        } else {
            AttachError::Io {
                context: format!("{context} JVM {pid}'s attach socket"),
                source,
            }
        }
    };
    let remaining = || {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
    };
    stream
        .set_write_timeout(Some(remaining().ok_or_else(timed_out)?))
        .map_err(|e| io_err("cannot configure", e))?;
    stream
        .write_all(request)
        .map_err(|e| io_err("cannot write to", e))?;

    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        stream
            .set_read_timeout(Some(remaining().ok_or_else(timed_out)?))
            .map_err(|e| io_err("cannot configure", e))?;
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                reply.extend_from_slice(&buf[..n]);
                if reply.len() as u64 > MAX_REPLY_LEN {
                    return Err(AttachError::Protocol {
                        pid,
                        detail: format!("reply longer than {MAX_REPLY_LEN} bytes"),
                    });
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_err("cannot read from", e)),
        }
    }
    Ok(String::from_utf8_lossy(&reply).into_owned())
}
