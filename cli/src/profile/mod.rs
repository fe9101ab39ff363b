//! `sprig profile` and `sprig run`: set up a private session, get the agent
//! into the JVM (attach or -agentpath), drive the session, build the CCT,
//! write the report; and `sprig calibrate`.
//!
//! - [`args`]: the command lines and their validation;
//! - `connect`: the session's files, the attach or the start of the JVM,
//!   the handshake, the reader of the control connection;
//! - `calibrate`: `sprig calibrate`;
//! - `session`: the session loop, one method per step;
//! - `status`: the status line.

pub mod args;
mod calibrate;
mod connect;
mod sampler;
mod session;
mod status;

use std::process::ExitCode;

use anyhow::Result;

pub use args::{CalibrateArgs, ProfileArgs, RunArgs};
pub use calibrate::calibrate;
use session::SessionLoop;

/// `sprig profile <pid>`.
pub fn profile(args: ProfileArgs) -> Result<ExitCode> {
    args.session.validate()?;
    sprig::stale::clean();
    let timeout = args::attach_timeout(args.attach_timeout)?;
    let (prepared, channel, jvm_line) = connect::attach_to(
        args.pid,
        args.session.clock_kind(),
        args.session.ring_mib,
        timeout,
    )?;
    SessionLoop::start(&args.session, &prepared, channel, args.pid, jvm_line, None)?.run()
}

/// `sprig run -- java ...`.
pub fn run(args: RunArgs) -> Result<ExitCode> {
    args.session.validate()?;
    sprig::stale::clean();
    let (prepared, mut child, channel, jvm_line) = connect::launch(
        &args.command,
        args.session.clock_kind(),
        args.session.ring_mib,
    )?;
    let pid = child.id();
    let code = SessionLoop::start(
        &args.session,
        &prepared,
        channel,
        pid,
        jvm_line,
        Some(&mut child),
    )
    .and_then(SessionLoop::run);
    // Ctrl-C reaches the JVM too (same process group); reap it.
    let _ = child.wait();
    code
}
