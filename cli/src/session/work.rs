//! The piece of work a session drives ([`Work`]), what it may tell the
//! driver about a control message ([`Flow`]), what it sees of the session
//! each turn ([`Turn`]) and at its end ([`Outcome`]).

use std::process::ExitCode;
use std::time::Instant;

use anyhow::Result;
use sprig_wire::Message;
use sprig_wire::control::AgentStats;
use sprig_wire::session::SessionError;

use super::state::{End, Phase};
use super::status::Status;

/// What a session does with the agent besides the session itself: read
/// what the agent publishes, take what it needs from the control
/// messages, and make the command's result at the end. The driver calls
/// it from one thread, in the order of its loop (see the module's doc).
///
/// An error a method returns ends the command with that error at once:
/// the driver does not settle with the agent, which restores the JVM by
/// itself when the connection closes.
pub(crate) trait Work {
    /// Reads what the agent published since the last call (the event
    /// ring); the number of events read, which paces the loop and feeds
    /// the status line. Called at the top of every turn, once more when
    /// the JVM `sprig run` started has exited, and a last time after the
    /// session settled.
    fn poll(&mut self) -> usize;

    /// A control message, before the driver acts on it; also each message
    /// read while the session settles, when the flow returned is not acted
    /// on.
    fn on_message(&mut self, msg: &Message) -> Result<Flow>;

    /// Whether profiling begins at `msg`, for a session whose agent
    /// announces no roots: the driver then enters [`Phase::Profiling`]
    /// (`--duration`, the status line and resets count from there). A
    /// session with roots begins when the agent reports them instrumented
    /// or awaited, whatever this says.
    fn begins_at(&self, _msg: &Message) -> bool {
        false
    }

    /// The control connection failed or closed with `e`. Returning an
    /// error ends the command with it; otherwise the driver ends the
    /// session as the JVM's exit or a lost agent.
    fn on_disconnect(&mut self, _e: &SessionError) -> Result<()> {
        Ok(())
    }

    /// Once a turn, after the messages and signals and before the
    /// duration and the JVM's exit are checked.
    fn on_turn(&mut self, _turn: &mut Turn<'_>) -> Result<()> {
        Ok(())
    }

    /// The root calls the status line shows.
    fn root_calls(&self) -> u64 {
        0
    }

    /// The progress line after `sprig: `, `elapsed` into profiling, for
    /// a work whose session counts neither root calls nor instrumented
    /// methods; `None` (the default) shows those.
    fn progress_text(&self, _elapsed: std::time::Duration) -> Option<String> {
        None
    }

    /// Once a turn while profiling, after the status line: a view of the
    /// work so far (`--live`).
    fn on_progress(&mut self) {}

    /// The session ended and settled with the agent: the command's result
    /// (its report, its exit code).
    fn finish(self, outcome: Outcome) -> Result<ExitCode>;
}

/// What the driver does with a control message after the work saw it.
pub(crate) enum Flow {
    /// What it does for every session: the roots, the agent's counts,
    /// warnings, errors, the detach.
    Continue,
    /// Nothing: the work took the message.
    Taken,
    /// The session ends so.
    End(End),
}

/// What the work sees of the session during a turn.
pub(crate) struct Turn<'s> {
    pub(crate) phase: Phase,
    /// When profiling began.
    pub(crate) profiling_since: Option<Instant>,
    /// For lines above the status line.
    pub(crate) status: &'s mut Status,
    /// The control connection, for a message the work sends the agent
    /// mid-session (`sprig sample --edges`' `EdgeProbes`).
    pub(crate) writer: &'s sprig_wire::session::Channel,
}

/// How a session ended, handed to [`Work::finish`].
pub(crate) struct Outcome {
    pub(crate) end: End,
    /// The phase it was in: `Starting` when profiling never began.
    pub(crate) phase: Phase,
    /// When profiling began.
    pub(crate) profiling_since: Option<Instant>,
    /// The agent's latest counts.
    pub(crate) stats: AgentStats,
    /// Whether the agent's counts ever arrived.
    pub(crate) stats_seen: bool,
    /// Whether its final counts (`Detached`) arrived.
    pub(crate) final_counts: bool,
    /// The events [`Work::poll`] read in all.
    pub(crate) events: u64,
    pub(crate) status: Status,
    /// Whether the session started its JVM (`sprig run`).
    pub(crate) child_mode: bool,
    /// Why a root may never have been called (its class never loaded, and
    /// the loaded classes with names like it), to repeat at the end.
    pub(crate) root_hint: Option<String>,
}

impl Outcome {
    /// Prints the closing note of the way the session ended, if it has
    /// one, and returns its exit code (see [`End::verdict`]).
    pub(crate) fn conclude(&mut self) -> ExitCode {
        let (code, note) = self.end.verdict(self.child_mode);
        if let Some(note) = &note {
            self.status.line(note);
        }
        code
    }

    /// Whether there are results to show: profiling began, or the agent
    /// detached as asked.
    pub(crate) fn has_results(&self) -> bool {
        self.phase != Phase::Starting || matches!(self.end, End::Detached)
    }
}
