//! `sprig profile` and `sprig run`: set up a private session, get the agent
//! into the JVM (attach or -agentpath), drive the session, build the CCT,
//! write the report; and `sprig calibrate`. The session itself (the
//! connection, signals, the loop, the status line, the end) is the
//! driver's in `crate::session`; this module holds the commands and the
//! work each has the driver do.
//!
//! - [`args`]: the command lines and their validation;
//! - `tree`: the work of `profile` and `run`, the calling-context tree
//!   from the ring to the report;
//! - `position_samples`: sampled timing's reader of ring positions (the
//!   position samples);
//! - `stack_credit`: windows timing's stack samples mapped onto the tree;
//! - `calibrate`: `sprig calibrate` and its work.

pub mod args;
pub mod calibrate;
pub(crate) mod position_samples;
mod stack_credit;
mod tree;

use std::process::{Child, ExitCode};

use anyhow::Result;

use args::SessionArgs;
pub use args::{CalibrateArgs, ProfileArgs, RunArgs};
pub use calibrate::calibrate;
use tree::CallTree;

use crate::session::{self, Plan, Prepared, Session};
use sprig_wire::session::Channel;

/// `sprig profile <pid>`.
pub fn profile(args: ProfileArgs) -> Result<ExitCode> {
    args.session.validate()?;
    sprig::stale::clean();
    let timeout = args::attach_timeout(args.attach_timeout)?;
    let (prepared, channel, jvm_line) = session::attach_to(
        args.pid,
        args.session.clock_kind(),
        args.session.ring_mib,
        timeout,
    )?;
    profile_session(&args.session, &prepared, channel, args.pid, jvm_line, None)
}

/// `sprig run -- java ...`.
pub fn run(args: RunArgs) -> Result<ExitCode> {
    args.session.validate()?;
    sprig::stale::clean();
    let (prepared, mut child, channel, jvm_line) = session::launch(
        &args.command,
        args.session.clock_kind(),
        args.session.ring_mib,
    )?;
    let pid = child.id();
    let code = profile_session(
        &args.session,
        &prepared,
        channel,
        pid,
        jvm_line,
        Some(&mut child),
    );
    // Ctrl-C reaches the JVM too (same process group); reap it.
    let _ = child.wait();
    code
}

/// Starts the session on `channel` and drives the calling-context tree
/// through it to the report.
fn profile_session(
    args: &SessionArgs,
    prepared: &Prepared,
    channel: Channel,
    pid: u32,
    jvm_line: String,
    child: Option<&mut Child>,
) -> Result<ExitCode> {
    let live = tree::live_view(args);
    let plan = Plan {
        pid,
        duration: args.duration,
        quiet: args.quiet,
        excludes: args.exclude.clone(),
    };
    let command = if child.is_some() { "run" } else { "profile" };
    let session = Session::start(prepared, channel, args.session_options(), plan, child)?;
    session.run(CallTree::new(args, prepared, pid, jvm_line, command, live))
}
