//! The HotSpot attach protocol: ask a running JVM to load sprig's agent.
//!
//! 1. If `/tmp/.java_pid<nspid>` (seen through `/proc/PID/root`) is a socket
//!    the JVM listens on, use it.
//! 2. Otherwise create `.attach_pid<nspid>` in the JVM's working directory
//!    (or its /tmp), send SIGQUIT — only to a process `jvm::inspect` just
//!    confirmed to be a HotSpot JVM, through a pidfd held since (`Target`)
//!    — and wait for the socket with backoff.
//!    The trigger file is removed on every path, through a handle on the
//!    directory it was made in (see `TriggerFile`). A trigger file found there
//!    that is not the JVM's user's or sprig's (or is a link) is refused with
//!    an error naming it and its owner: HotSpot would ignore it and answer
//!    the SIGQUIT with a thread dump.
//! 3. Send `1\0load\0<path>\0true\0<options>\0` and read the whole reply: a
//!    status line, then `return code: N` for an agent that ran, or the JVM's
//!    error text. JDK 21+ answers status 0 even when loading failed, so the
//!    rest of the reply decides.
//!
//! When sprig runs as root and the JVM as another user, the thread that
//! creates the trigger file and connects switches its effective uid/gid to
//! the JVM's (HotSpot compares the peer's credentials with its own, and
//! older JDKs ignore a trigger file not owned by their user). The switch is
//! per thread (raw system calls, see `crate::sys`), so no fork is needed
//! and the rest of the CLI keeps its credentials; a guard restores them.
//!
//! Its modules: `error` (the one-line errors, and the agent's return codes
//! in words), `library` (the installed agent, and whether the JVM's user
//! can read it), `pinned` (the copies JVMs load), `target` (the held
//! process and the credentials taken on), `socket` (connecting, and the
//! exchange), `trigger` (the trigger file, SIGQUIT and the wait for the
//! socket), `reply` (reading the JVM's answer).

mod error;
mod library;
pub mod pinned;
mod reply;
mod socket;
mod target;
mod trigger;

pub use error::{AttachError, Stage};
pub use library::{AGENT_LIBRARY, agent_library_near, agent_library_path};

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::jvm::{self, JvmError, JvmProcess};
use crate::sys;
use library::{check_readable_by_target, same_root};
use reply::{ReplyError, parse_load_reply};
use socket::{connect_existing, exchange};
use target::{Target, TargetCredentials};
use trigger::start_attach_listener;

/// HotSpot rejects attach arguments longer than this (bytes).
const MAX_ARG_LEN: usize = 1024;

/// The library to hand a JVM: the pinned copy of the installed agent
/// ([`pinned`] says why), or the installed file where a copy cannot serve.
/// `jvm` is the JVM to attach to, `None` for one `sprig run` starts (ours,
/// in our file system). A JVM in another file system (a container) looks
/// the path up in its own, where sprig's `/tmp` is not; it gets the
/// installed path, as it always did. So does a JVM whose user could not
/// read the copy, and any JVM when the copy cannot be made (said on
/// stderr: overwriting the installed file in place would then crash it).
pub fn agent_for(jvm: Option<&JvmProcess>) -> Result<PathBuf, AttachError> {
    let installed = agent_library_path()?;
    if jvm.is_some_and(|j| !same_root(j)) {
        return Ok(installed);
    }
    let (euid, _) = sys::effective_ids();
    match pinned::pin_in(Path::new("/tmp"), euid, &installed) {
        Ok(copy) if jvm.is_none_or(|j| check_readable_by_target(j, &copy).is_ok()) => Ok(copy),
        Ok(_) => Ok(installed),
        Err(e) => {
            eprintln!(
                "sprig: warning: loading the agent from {} itself, without a private copy ({e}); replacing that file in place while the JVM runs would crash the JVM",
                installed.display()
            );
            Ok(installed)
        }
    }
}

/// Loads the JVMTI agent library `agent_path` (absolute) into `jvm`, passing
/// `options` to its `Agent_OnAttach`. `timeout` bounds the whole exchange,
/// including the agent's `Agent_OnAttach`.
pub fn load_agent(
    jvm: &JvmProcess,
    agent_path: &Path,
    options: &str,
    timeout: Duration,
) -> Result<(), AttachError> {
    let deadline = Instant::now() + timeout;
    let path = validate(agent_path, options)?;
    let pid = jvm.pid;

    // Confirm again, right before any signal, that this PID is still the
    // HotSpot JVM the caller inspected (PIDs get reused).
    let now = jvm::inspect(pid)?;
    if now.start_time != jvm.start_time {
        return Err(JvmError::Exited { pid }.into());
    }
    if now.attach_disabled {
        return Err(AttachError::AttachDisabled { pid });
    }
    if let Some(version) = &now.java_version
        && jvm::java_major(version).is_some_and(|m| m < jvm::OLDEST_JAVA)
    {
        return Err(AttachError::TooOld {
            pid,
            version: version.clone(),
            oldest: jvm::OLDEST_JAVA,
        });
    }
    check_readable_by_target(jvm, agent_path)?;

    let target = Target::hold(jvm)?;

    let creds = TargetCredentials::of(jvm);
    let socket = jvm.root.join(format!("tmp/.java_pid{}", jvm.ns_pid));
    let mut stream = match connect_existing(jvm, &socket, &creds)? {
        Some(stream) => stream,
        None => start_attach_listener(jvm, &target, &socket, &creds, deadline)?,
    };

    let mut request = Vec::with_capacity(path.len() + options.len() + 16);
    for arg in ["1", "load", path.as_str(), "true", options] {
        request.extend_from_slice(arg.as_bytes());
        request.push(0);
    }
    let reply = exchange(&mut stream, &request, deadline, timeout, pid)?;
    parse_load_reply(&reply).map_err(|failure| match failure {
        ReplyError::Failed { code, message } => AttachError::AgentLoadFailed { pid, code, message },
        ReplyError::Malformed(detail) => AttachError::Protocol { pid, detail },
    })
}

/// Checks what HotSpot would reject or misread, and returns the path as text.
fn validate(agent_path: &Path, options: &str) -> Result<String, AttachError> {
    let invalid = |what, why: &str| AttachError::InvalidArgument {
        what,
        why: why.to_owned(),
    };
    if !agent_path.is_absolute() {
        return Err(invalid(
            "agent path",
            &format!("{} is not absolute", agent_path.display()),
        ));
    }
    let Some(path) = agent_path.to_str() else {
        return Err(invalid("agent path", "it is not valid UTF-8"));
    };
    if path.contains('\0') {
        return Err(invalid("agent path", "it contains a NUL byte"));
    }
    if options.contains('\0') {
        return Err(invalid("agent options", "they contain a NUL byte"));
    }
    for (what, text) in [("agent path", path), ("agent options", options)] {
        if text.len() > MAX_ARG_LEN {
            return Err(invalid(
                what,
                &format!(
                    "{} bytes, HotSpot accepts at most {MAX_ARG_LEN}",
                    text.len()
                ),
            ));
        }
    }
    Ok(path.to_owned())
}

#[cfg(test)]
mod tests;
