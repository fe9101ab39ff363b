//! `sprig threads PID`: every Java thread's state, stack and locks, and
//! the deadlocks among them.
//!
//! The session is the one driver's (`crate::session`); this module's
//! work, [`Snapshots`], sends `Start` with no roots, no stacks and
//! `threads` set (the agent then redefines nothing, takes the snapshots,
//! sends each as a `ThreadDump` and detaches), keeps the snapshots, and at
//! `Detached` writes the report. The deadlocks are the waits-for cycles
//! every snapshot shows (`model`).
//!
//! - [`args`]: the command line and its validation;
//! - `model`: states, waits, cycles;
//! - `report`: the text and JSON reports.

pub mod args;
mod model;
mod report;

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use sprig_wire::Message;
use sprig_wire::control::{ClockKind, SessionOptions, ThreadDump, ThreadsOptions, Timing};
use sprig_wire::session::SessionError;

pub use args::{ThreadsArgs, ThreadsFormat};

use crate::profile::args::attach_timeout;
use crate::session::{self, End, Flow, Outcome, Plan, Session, Turn, Work};

/// How many snapshots `sprig threads` takes, and the gap between them.
const SNAPSHOTS: u32 = 2;
const GAP_MS: u32 = 50;
/// Longest the agent may take from the attach to its detach.
const DEADLINE: Duration = Duration::from_secs(30);
/// The exit status when a deadlock is found.
pub const DEADLOCK_EXIT: u8 = 2;

/// `sprig threads <pid>`.
pub fn threads(args: ThreadsArgs) -> Result<ExitCode> {
    args.validate()?;
    sprig::stale::clean();
    let timeout = attach_timeout(args.attach_timeout)?;
    let (prepared, channel, jvm_line) =
        session::attach_to(args.pid, ClockKind::Monotonic, 1, timeout)?;
    let plan = Plan {
        pid: args.pid,
        duration: None,
        quiet: true,
        excludes: Vec::new(),
    };
    let session = Session::start(&prepared, channel, session_options(&args), plan, None)?;
    let work = Snapshots {
        args: &args,
        jvm_line,
        dumps: Vec::new(),
        deadline: Instant::now() + DEADLINE,
    };
    session.run(work)
}

/// `Start` of a snapshot session: no roots, no stacks, no calibration.
fn session_options(args: &ThreadsArgs) -> SessionOptions {
    SessionOptions {
        no_dormant: true,
        timing: Timing::Sampled,
        threads: Some(ThreadsOptions {
            snapshots: SNAPSHOTS,
            gap_ms: GAP_MS,
            max_depth: args.max_depth,
        }),
        ..SessionOptions::without_roots()
    }
}

/// The work of a snapshot session.
struct Snapshots<'a> {
    args: &'a ThreadsArgs,
    jvm_line: String,
    dumps: Vec<ThreadDump>,
    deadline: Instant,
}

impl Work for Snapshots<'_> {
    /// The agent writes nothing into the ring.
    fn poll(&mut self) -> usize {
        0
    }

    fn on_message(&mut self, msg: &Message) -> Result<Flow> {
        match msg {
            Message::ThreadDump(d) => self.dumps.push(d.clone()),
            Message::Warning(w) => eprintln!("sprig: warning: {}", escape(w)),
            Message::Error(e) => bail!("the agent failed: {}", escape(e)),
            Message::Detached(_) => return Ok(Flow::End(End::Detached)),
            _ => {}
        }
        Ok(Flow::Taken)
    }

    fn on_disconnect(&mut self, e: &SessionError) -> Result<()> {
        bail!("the agent's connection broke before the snapshots came: {e}")
    }

    fn on_turn(&mut self, _turn: &mut Turn<'_>) -> Result<()> {
        if Instant::now() >= self.deadline {
            bail!(
                "the agent in JVM {} sent no thread snapshot within {} s",
                self.args.pid,
                DEADLINE.as_secs()
            );
        }
        Ok(())
    }

    fn finish(self, outcome: Outcome) -> Result<ExitCode> {
        match outcome.end {
            End::Detached => {}
            End::AgentError(why) => bail!("the agent failed: {why}"),
            End::JvmExited(why) | End::Lost(why) => bail!("the snapshot ended early: {why}"),
        }
        let Some(last) = self.dumps.last() else {
            bail!(
                "JVM {} sent no thread snapshot: its sprig agent may be too old",
                self.args.pid
            );
        };
        let deadlocks = model::deadlocks(&self.dumps);
        let report = report::Report {
            pid: self.args.pid,
            jvm: &self.jvm_line,
            dump: last,
            deadlocks: &deadlocks,
            snapshots: self.dumps.len(),
        };
        let mut buf = Vec::new();
        match self.args.format {
            ThreadsFormat::Text => report.write_text(&mut buf)?,
            ThreadsFormat::Json => report.write_json(&mut buf)?,
        }
        match &self.args.output {
            Some(path) => std::fs::write(path, &buf)
                .with_context(|| format!("cannot write {}", path.display()))?,
            None => {
                let mut out = std::io::stdout().lock();
                out.write_all(&buf)?;
                out.flush()?;
            }
        }
        Ok(if deadlocks.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(DEADLOCK_EXIT)
        })
    }
}

fn escape(s: &str) -> String {
    sprig_callgraph::report::escape::escape(s).into_owned()
}
