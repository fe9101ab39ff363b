//! A session with the agent, whatever it is for: the driver that `sprig
//! profile`, `sprig run`, `sprig calibrate`, `sprig sample` and `sprig
//! threads` share.
//!
//! The driver ([`Session`]) owns what every session has: the connection
//! to the agent and its control messages, the phase (starting, profiling,
//! detaching), Ctrl-C and SIGTERM (detach; a second one exits at once),
//! `--duration`, the detach timeout, the JVM `sprig run` started, the
//! pacing of the loop, the status line, and the settling at the end (how
//! the session ended, its exit code and closing note). What the session
//! is for is a [`Work`] the driver calls in the order of its loop, one
//! turn about every 10 ms:
//!
//! 1. [`Work::poll`]: read what the agent published (the event ring);
//! 2. each control message: [`Work::on_message`] first, then the driver's
//!    own meaning of it unless the work took it or ended the session;
//! 3. the signals; then [`Work::on_turn`] (resets, a deadline of its
//!    own); then `--duration`, the detach timeout and the JVM's exit;
//! 4. the status line with [`Work::root_calls`], then [`Work::on_progress`]
//!    (the live view); then the pause, shorter when the ring fills fast.
//!
//! When the session ends the driver settles with the agent (waits for its
//! detach after an error, reads the messages a dying JVM left), has the
//! work poll a last time and calls [`Work::finish`] with the [`Outcome`]:
//! how it ended, the agent's counts, the status line to write notes on.
//! The work makes the result; [`Outcome::conclude`] prints the closing
//! note and gives the exit code.
//!
//! Four works exist: the calling-context tree of `profile` and `run`
//! (`profile/tree.rs`: the ring consumer, the position samples, the
//! builder, resets, the live view, the report), the probe calibration
//! of `sprig calibrate` (`profile/calibrate.rs`, which takes every
//! message itself and reads no ring), and the stack samples of `sprig
//! sample` (`sample/mod.rs`: `Start` with no roots and its own
//! `stacks` options, the samples taken from the control messages, the
//! report at the end, and [`Work::begins_at`] true at `Started`, as it
//! has no roots to wait for), and the thread snapshots of `sprig threads`
//! (`threads/mod.rs`: `Start` with `threads` set, the `ThreadDump`
//! messages kept until the agent detaches by itself). The driver does not
//! change for any.
//!
//! - `connect`: the session's files, the attach or the start of the JVM,
//!   the handshake, the reader of the control connection;
//! - `driver`: [`Session`], the loop, one method per step;
//! - `work`: [`Work`] and what it is handed;
//! - `control`: what control messages mean for the session itself;
//! - `state`: the phase, the ends and their exit codes, the JVM's exit;
//! - `pacing`: the pause between two polls of the ring;
//! - `status`: the status line.

mod connect;
mod control;
mod driver;
mod pacing;
mod state;
mod status;
mod work;

#[cfg(test)]
pub(crate) use connect::played_agent;
pub(crate) use connect::{Prepared, attach_to, launch};
pub(crate) use driver::{Plan, Session};
pub(crate) use state::{End, Phase};
pub(crate) use work::{Flow, Outcome, Turn, Work};
