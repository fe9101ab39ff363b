//! `sprig calibrate <pid>`: the probes' cost inside a running JVM, measured
//! as at the start of every profiling session, without profiling. Its
//! work, [`Calibration`], takes every control message itself and reads no
//! ring; the session driver gives it the connection and Ctrl-C.

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use sprig_callgraph::report::escape::escape;
use sprig_wire::Message;
use sprig_wire::control::{ClockKind, SessionOptions};
use sprig_wire::session::SessionError;

use super::args::{self, CalibrateArgs};
use crate::session::{self, End, Flow, Outcome, Plan, Session, Turn, Work};

/// How long the agent may take to calibrate.
const DEADLINE: Duration = Duration::from_secs(30);

/// `sprig calibrate <pid>`: attaches, measures the probes' cost inside the
/// JVM exactly as `profile` does at the start of a session, prints it,
/// detaches. Nothing is instrumented but sprig's own calibration class.
pub fn calibrate(args: CalibrateArgs) -> Result<ExitCode> {
    let timeout = args::attach_timeout(args.attach_timeout)?;
    run(
        args.pid,
        args.clock_kind(),
        timeout,
        Output::Print { json: args.json },
    )
}

/// The exact-timing probe pair (inner plus outer time) in JVM `pid`, in
/// ns, measured as `sprig calibrate` does on the wall clock a profiling
/// session reads, in a session of its own that prints nothing (its status
/// lines but the first are quiet). `sprig sample --edges` takes it for
/// the suggested roots' predicted overhead.
pub fn exact_pair_ns(pid: u32, timeout: Duration) -> Result<f64> {
    let pair = std::rc::Rc::new(std::cell::Cell::new(None));
    run(pid, ClockKind::Tsc, timeout, Output::Keep(pair.clone()))?;
    pair.get()
        .ok_or_else(|| anyhow::anyhow!("the agent returned no calibration"))
}

/// Where a calibration's figures go.
enum Output {
    /// Printed, as text or JSON (`sprig calibrate`).
    Print { json: bool },
    /// Kept as the pair's ns.
    Keep(std::rc::Rc<std::cell::Cell<Option<f64>>>),
}

fn run(pid: u32, clock_kind: ClockKind, timeout: Duration, output: Output) -> Result<ExitCode> {
    let (prepared, channel, jvm_line) = session::attach_to(pid, clock_kind, 1, timeout)?;
    let options = SessionOptions {
        clock: clock_kind,
        calibrate: true,
        ..SessionOptions::without_roots()
    };
    let plan = Plan {
        pid,
        duration: None,
        quiet: matches!(output, Output::Keep(_)),
        excludes: Vec::new(),
    };
    let session = Session::start(&prepared, channel, options, plan, None)?;
    let work = Calibration {
        pid,
        output,
        jvm_line,
        clock_used: prepared.region.clock(),
        ticks_per_sec: prepared.region.ticks_per_sec(),
        figures: None,
        problems: Vec::new(),
        deadline: Instant::now() + DEADLINE,
    };
    session.run(work)
}

/// The calibration the agent runs and reports, and its printout.
struct Calibration {
    pid: u32,
    output: Output,
    jvm_line: String,
    /// The clock the agent used, and its ticks a second.
    clock_used: ClockKind,
    ticks_per_sec: u64,
    /// (inner ticks, outer ticks, batches), when they came.
    figures: Option<(f64, f64, u32)>,
    /// The agent's warnings.
    problems: Vec<String>,
    deadline: Instant,
}

impl Calibration {
    fn too_slow(&self) -> anyhow::Error {
        anyhow::anyhow!(
            "the agent in JVM {} did not finish calibrating within 30 s",
            self.pid
        )
    }
}

impl Work for Calibration {
    /// The agent writes nothing into the ring.
    fn poll(&mut self) -> usize {
        0
    }

    fn on_message(&mut self, msg: &Message) -> Result<Flow> {
        match msg {
            Message::Started {
                clock,
                ticks_per_sec: t,
            } => {
                self.clock_used = *clock;
                self.ticks_per_sec = *t;
            }
            Message::Calibration {
                inner_ticks,
                outer_ticks,
                samples,
            } => self.figures = Some((*inner_ticks, *outer_ticks, *samples)),
            Message::Warning(w) => self.problems.push(w.clone()),
            Message::Error(e) => bail!("the agent failed: {e}"),
            Message::Detached(_) => return Ok(Flow::End(End::Detached)),
            _ => {}
        }
        Ok(Flow::Taken)
    }

    fn on_disconnect(&mut self, e: &SessionError) -> Result<()> {
        bail!("the agent's connection broke before calibration ended: {e}")
    }

    fn on_turn(&mut self, _turn: &mut Turn<'_>) -> Result<()> {
        if Instant::now() >= self.deadline {
            return Err(self.too_slow());
        }
        Ok(())
    }

    fn finish(self, outcome: Outcome) -> Result<ExitCode> {
        match outcome.end {
            End::Detached => {}
            End::AgentError(why) => bail!("the agent failed: {why}"),
            End::JvmExited(why) | End::Lost(why) => bail!("calibration ended early: {why}"),
        }
        let Some((inner, outer, samples)) = self.figures else {
            bail!(
                "the agent could not calibrate: {}",
                if self.problems.is_empty() {
                    "no figures came back".to_string()
                } else {
                    self.problems.join("; ")
                }
            );
        };
        match &self.output {
            Output::Print { json } => self.print(*json, inner, outer, samples)?,
            Output::Keep(pair) => {
                let ns = |ticks: f64| ticks * 1e9 / self.ticks_per_sec.max(1) as f64;
                pair.set(Some(ns(inner) + ns(outer)));
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}

impl Calibration {
    /// Prints the figures on stdout, as text or JSON.
    fn print(&self, json: bool, inner: f64, outer: f64, samples: u32) -> Result<()> {
        let ticks_per_sec = self.ticks_per_sec;
        let ns = |ticks: f64| ticks * 1e9 / ticks_per_sec.max(1) as f64;
        let (inner_ns, outer_ns) = (ns(inner), ns(outer));
        let clock_name = format!("{:?}", self.clock_used).to_lowercase();
        let problems = &self.problems;
        let mut out = std::io::stdout().lock();
        if json {
            let js =
                |out: &mut dyn Write, v: &str| sprig_callgraph::report::json::write_str(out, v);
            write!(out, "{{\n  \"pid\": {},\n  \"jvm\": ", self.pid)?;
            js(&mut out, &self.jvm_line)?;
            write!(out, ",\n  \"clock\": ")?;
            js(&mut out, &clock_name)?;
            writeln!(out, ",\n  \"ticks_per_sec\": {ticks_per_sec},")?;
            writeln!(
                out,
                "  \"calibration\": {{\"inner_ns\": {inner_ns:.3}, \"outer_ns\": {outer_ns:.3}, \
                 \"pair_ns\": {:.3}, \"batches\": {samples}, \"calls_per_batch\": 1000}},",
                inner_ns + outer_ns
            )?;
            write!(out, "  \"warnings\": [")?;
            for (i, p) in problems.iter().enumerate() {
                if i > 0 {
                    write!(out, ", ")?;
                }
                js(&mut out, p)?;
            }
            writeln!(out, "]\n}}")?;
        } else {
            writeln!(
                out,
                "sprig calibrate: pid {}, {}",
                self.pid,
                escape(&self.jvm_line)
            )?;
            writeln!(out, "  clock        {clock_name} ({ticks_per_sec} ticks/s)")?;
            writeln!(
                out,
                "  inner  t_I   {inner_ns:8.2} ns per call, inside the called method's own time"
            )?;
            writeln!(
                out,
                "  outer  t_O   {outer_ns:8.2} ns per call, inside the caller's time"
            )?;
            writeln!(
                out,
                "  pair         {:8.2} ns per instrumented call (entry + exit probe)",
                inner_ns + outer_ns
            )?;
            writeln!(
                out,
                "  samples      {samples} batches of 1000 calls, the median batch of the fastest few ms kept"
            )?;
            for p in problems {
                writeln!(out, "  warning      {}", escape(p))?;
            }
        }
        Ok(())
    }
}
