//! Where a session stands ([`Phase`]), how it ended ([`End`]) and what
//! that means for the exit code and the closing note, and the checks of
//! the JVM's process that tell an exit from a lost agent.

use std::process::{Child, ExitCode};
use std::time::{Duration, Instant};

/// Where a session stands.
#[derive(PartialEq, Eq, Debug, Clone, Copy)]
pub(crate) enum Phase {
    /// Waiting for the agent to start the session.
    Starting,
    Profiling,
    /// Detach requested; waiting for `Detached`.
    Detaching,
}

/// Why the session ended.
#[derive(Debug)]
pub(crate) enum End {
    Detached,
    /// The JVM exited (normal for `sprig run`, an early end for `profile`).
    JvmExited(String),
    /// The JVM or the agent went away without detaching.
    Lost(String),
    /// The agent reported a fatal error.
    AgentError(String),
}

impl End {
    /// The exit code of a session that ended so, and the note that says
    /// why when it did not end by a detach. `child_mode`: the session
    /// started its JVM (`sprig run`), whose exit is its normal end.
    pub(crate) fn verdict(&self, child_mode: bool) -> (ExitCode, Option<String>) {
        match self {
            End::Detached => (ExitCode::SUCCESS, None),
            // `sprig run` profiles until the JVM ends: that is the normal end.
            End::JvmExited(why) if child_mode => (
                ExitCode::SUCCESS,
                Some(format!("sprig: {why}; profile complete")),
            ),
            End::JvmExited(why) => (
                ExitCode::from(3),
                Some(format!(
                    "sprig: session ended early: {why}; showing what was collected"
                )),
            ),
            End::Lost(why) => (
                ExitCode::from(3),
                Some(format!(
                    "sprig: session ended early: {why}; showing what was collected"
                )),
            ),
            End::AgentError(why) => (
                ExitCode::from(1),
                Some(format!("sprig: error: the agent stopped: {why}")),
            ),
        }
    }
}

/// Whether process `pid` is gone (or a zombie) within `bound`.
pub(super) fn jvm_gone_within(pid: u32, bound: Duration) -> bool {
    let deadline = Instant::now() + bound;
    loop {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() || is_zombie(pid) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The control connection closed: the JVM exited (or is exiting) unless it is
/// still there after a short wait, in which case the agent went away.
pub(super) fn connection_closed(pid: u32, child: Option<&mut Child>) -> End {
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut child = child;
    while Instant::now() < deadline {
        let gone = match child.as_deref_mut() {
            Some(c) => matches!(c.try_wait(), Ok(Some(_))),
            None => !std::path::Path::new(&format!("/proc/{pid}")).exists() || is_zombie(pid),
        };
        if gone {
            return End::JvmExited(format!("JVM {pid} exited"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    End::Lost(format!("the agent in JVM {pid} closed the connection"))
}

/// Whether `pid` has exited but not been reaped.
fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}
