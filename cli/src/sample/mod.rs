//! `sprig sample PID`: the whole JVM's stacks, sampled by the agent every
//! `--interval`, built into a partial calling context tree
//! (`sprig_callgraph::stacks`), shown as hot methods, the tree, back
//! traces, flame graphs, and the roots worth profiling exactly.
//!
//! The session is the one driver's (`crate::session`); this module's
//! work, [`Stacks`], sends `Start` with no roots and `stacks` set (the
//! agent then redefines nothing), begins at `Started`, feeds every
//! `FrameMethod`, `SampledThread` and `StackSamples` message to the model,
//! and writes the report at the end.
//!
//! - [`args`]: the command line and its validation;
//! - `text`: the text report.

pub mod args;
mod own_cpu;
mod text;

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use sprig_callgraph::profile::{MethodInfo, Metric};
use sprig_callgraph::stacks::{
    ConvertOptions, EdgeProfile, OwnCpu, StackProfile, SuggestOptions, SuggestedRoot,
    is_library_class, suggest_roots, with_edges, write_json_with_edges,
};
use sprig_wire::Message;
use sprig_wire::control::{ClockKind, SessionOptions, StackOptions, Timing};

pub use args::SampleArgs;

use crate::output::{self, Format, ViewArgs};
use crate::profile::args::attach_timeout;
use crate::session::{self, End, Flow, Outcome, Phase, Plan, Session, Turn, Work};

/// `sprig sample <pid>`.
pub fn sample(args: SampleArgs) -> Result<ExitCode> {
    args.validate()?;
    sprig::stale::clean();
    let timeout = attach_timeout(args.attach_timeout)?;
    // `--edges`: the exact-timing probe pair in this JVM, measured first in
    // a calibration session of its own (as `sprig calibrate`), for the
    // suggested roots' predicted overhead.
    let exact_pair_ns = if args.edges {
        match crate::profile::calibrate::exact_pair_ns(args.pid, timeout) {
            Ok(ns) => Some(ns),
            Err(e) => {
                eprintln!(
                    "sprig: warning: the probes' calibration failed ({e:#}); the predicted overhead takes the benchmark's probe pair"
                );
                None
            }
        }
    } else {
        None
    };
    // The agent writes nothing into the ring: the smallest one.
    let (prepared, channel, jvm_line) =
        session::attach_to(args.pid, ClockKind::Monotonic, 1, timeout)?;
    let plan = Plan {
        pid: args.pid,
        duration: args.duration,
        quiet: args.quiet,
        excludes: Vec::new(),
    };
    let session = Session::start(&prepared, channel, session_options(&args), plan, None)?;
    let live = args.live && std::io::stderr().is_terminal();
    if args.live && !live {
        eprintln!(
            "sprig: note: --live needs stderr on a terminal; showing the report at the end only"
        );
    }
    let mut profile = StackProfile::new(u64::from(args.interval_us()) * 1000);
    profile.java_only = args.java_only;
    let work = Stacks {
        profile,
        own_cpu: own_cpu::Meter::new(args.pid),
        args: &args,
        jvm_line,
        since_poll: 0,
        live: live.then(Instant::now),
        announced: false,
        edges: args.edges.then(|| Edges {
            profile: EdgeProfile {
                exact_pair_ns,
                ..EdgeProfile::default()
            },
            ..Edges::default()
        }),
    };
    session.run(work)
}

/// `Start` of a sampling session: no roots (nothing is redefined), no
/// calibration, the stack sampler on.
fn session_options(args: &SampleArgs) -> SessionOptions {
    SessionOptions {
        no_dormant: true,
        timing: Timing::Sampled,
        stacks: Some(StackOptions {
            interval_us: args.interval_us(),
            max_depth: args.max_depth,
            source: args.stack_source(),
        }),
        ..SessionOptions::without_roots()
    }
}

/// The work of a sampling session: the model, fed from the control
/// messages.
struct Stacks<'a> {
    args: &'a SampleArgs,
    profile: StackProfile,
    jvm_line: String,
    /// Samples taken since the last poll (the status line's events).
    since_poll: usize,
    /// `--live` on a terminal: when the view was last drawn.
    live: Option<Instant>,
    /// Whether the start of sampling was announced.
    announced: bool,
    /// `--edges`: the call-edge bursts asked for and what they sampled.
    edges: Option<Edges>,
    /// sprig's CPU time in the target while it samples.
    own_cpu: own_cpu::Meter,
}

/// `--edges` in a sampling session.
#[derive(Default)]
struct Edges {
    /// `EdgeProbes` went to the agent, with this many classes.
    asked: Option<usize>,
    /// The agent's `EdgeProbed` was said on the status line.
    said: bool,
    profile: EdgeProfile,
}

impl Work for Stacks<'_> {
    /// The agent writes nothing into the ring; the samples that came in
    /// messages since the last turn stand for the events read.
    fn poll(&mut self) -> usize {
        std::mem::take(&mut self.since_poll)
    }

    fn on_message(&mut self, msg: &Message) -> Result<Flow> {
        match msg {
            Message::FrameMethod {
                id,
                class,
                name,
                descriptor,
            } => self
                .profile
                .add_method(*id, MethodInfo::new(class, name, descriptor)),
            Message::SampledThread { java_id, name } => self.profile.add_thread(*java_id, name),
            Message::StackSource(s) => self.profile.source = Some(*s),
            Message::EdgeProbed { classes, methods } => {
                if let Some(e) = &mut self.edges {
                    e.profile.classes = *classes;
                    e.profile.methods = *methods;
                    e.profile.probed = true;
                }
            }
            Message::EdgeSamples(m) => {
                if let Some(e) = &mut self.edges {
                    e.profile.add(m);
                }
            }
            Message::StackSamples {
                time_ns,
                cost_ns,
                samples,
            } => {
                self.profile.add_round(*time_ns, *cost_ns, samples);
                self.since_poll += samples.len();
            }
            _ => return Ok(Flow::Continue),
        }
        Ok(Flow::Taken)
    }

    /// No roots to wait for: sampling begins when the agent started.
    fn begins_at(&self, msg: &Message) -> bool {
        matches!(msg, Message::Started { .. })
    }

    /// Announces the sampling once it began.
    fn on_turn(&mut self, turn: &mut Turn<'_>) -> Result<()> {
        if turn.phase == Phase::Profiling {
            self.own_cpu.read();
        }
        if !self.announced && turn.phase == Phase::Profiling {
            self.announced = true;
            turn.status.line(&format!(
                "sprig: sampling JVM {} every {} ms ({} view){}",
                self.args.pid,
                self.args.interval,
                self.args.view().name(),
                match self.args.duration {
                    Some(d) => format!(" for {d} s"),
                    None => ", Ctrl-C to stop".to_owned(),
                }
            ));
        }
        self.edges_turn(turn)?;
        Ok(())
    }

    fn progress_text(&self, elapsed: Duration) -> Option<String> {
        let p = &self.profile;
        Some(format!(
            "sampling {:>6.1} s, {} rounds, {} samples ({} on the CPU), {} threads",
            elapsed.as_secs_f64(),
            p.rounds,
            p.wall_samples,
            p.cpu_samples,
            p.threads.len()
        ))
    }

    /// The live view with `--live`, redrawn every second.
    fn on_progress(&mut self) {
        if let Some(last) = self.live
            && last.elapsed() >= Duration::from_secs(1)
        {
            self.live = Some(Instant::now());
            let mut buf = Vec::new();
            if text::live(self, 25, &mut buf).is_ok() {
                // Clear the screen, home the cursor, draw.
                eprint!("\x1b[2J\x1b[H{}", String::from_utf8_lossy(&buf));
            }
        }
    }

    fn finish(mut self, mut outcome: Outcome) -> Result<ExitCode> {
        let code = outcome.conclude();
        if !outcome.has_results() {
            return Ok(code);
        }
        if self.profile.rounds == 0 {
            // An early end has said why in its closing note.
            if matches!(outcome.end, End::Detached) {
                bail!(
                    "JVM {} sent no stack samples: its sprig agent may be too old to sample stacks",
                    self.args.pid
                );
            }
            return Ok(code);
        }
        if let Some((threads_ns, target_cpu_ns)) = self.own_cpu.window() {
            let timer = self.profile.source == Some(sprig_wire::control::StackSource::Timer);
            self.profile.own_cpu = Some(OwnCpu {
                handler_ns: if timer { self.profile.cost_ns } else { 0 },
                threads_ns,
                target_cpu_ns,
            });
        }
        self.write_report()?;
        Ok(code)
    }
}

impl Stacks<'_> {
    fn suggestions(&self) -> Vec<SuggestedRoot> {
        let mut roots = suggest_roots(
            &self.profile,
            &SuggestOptions {
                view: self.args.view(),
                max: self.args.suggest_roots,
                ..SuggestOptions::default()
            },
        );
        if let Some(e) = self.edge_profile() {
            with_edges(&mut roots, e, &self.profile);
        }
        roots
    }

    /// The edges `--edges` sampled, once bursts ran.
    fn edge_profile(&self) -> Option<&EdgeProfile> {
        self.edges
            .as_ref()
            .map(|e| &e.profile)
            .filter(|p| p.bursts > 0)
    }

    /// `--edges`: once `--edges-after` seconds were sampled and some
    /// class outside the JDK was seen, the classes seen go to the agent;
    /// its answer goes on the status line.
    fn edges_turn(&mut self, turn: &mut Turn<'_>) -> Result<()> {
        let Some(since) = turn.profiling_since else {
            return Ok(());
        };
        let due = since.elapsed().as_secs_f64() >= self.args.edges_after;
        let classes = match &self.edges {
            Some(e) if e.asked.is_none() && due => edge_classes(&self.profile),
            Some(e) if e.profile.probed && !e.said => {
                turn.status.line(&format!(
                    "sprig: call-edge bursts: {} methods of {} classes hold dormant probes; {} entries every {} ms",
                    e.profile.methods, e.profile.classes, self.args.edge_budget, self.args.edge_interval
                ));
                if let Some(e) = &mut self.edges {
                    e.said = true;
                }
                return Ok(());
            }
            _ => return Ok(()),
        };
        let n = classes.len();
        if n == 0 {
            // Asked again at the next turn: the first samples of a
            // loaded host can come late.
            return Ok(());
        }
        turn.writer.send(&Message::EdgeProbes {
            classes,
            interval_us: self.args.edge_interval_us(),
            budget: self.args.edge_budget,
        })?;
        if let Some(e) = &mut self.edges {
            e.asked = Some(n);
        }
        Ok(())
    }

    fn convert(&self) -> ConvertOptions {
        ConvertOptions {
            view: self.args.view(),
            fold_jdk: self.args.fold_jdk,
        }
    }

    /// Writes the report in the chosen format, to `-o` or stdout.
    fn write_report(&self) -> Result<()> {
        let args = self.args;
        let snapshot = args
            .output
            .as_deref()
            .is_some_and(|p| p.extension().is_some_and(|e| e == "sprig"));
        match args.format {
            Format::Text | Format::Json if !snapshot => {
                let mut buf = Vec::new();
                if args.format == Format::Json {
                    write_json_with_edges(
                        &self.profile,
                        self.convert(),
                        args.threads,
                        &self.suggestions(),
                        self.edges.as_ref().map(|e| &e.profile),
                        args.pid,
                        &mut buf,
                    )?;
                } else {
                    text::write(self, &mut buf)?;
                }
                match &args.output {
                    Some(path) => std::fs::write(path, &buf)
                        .with_context(|| format!("cannot write {}", path.display()))?,
                    None => {
                        let mut out = std::io::stdout().lock();
                        out.write_all(&buf)?;
                        out.flush()?;
                    }
                }
                Ok(())
            }
            // The profile model's renderers (and its snapshots).
            _ => {
                let mut profile = self.profile.to_profile(self.convert());
                profile.target.pid = args.pid;
                profile.target.jvm = self.jvm_line.clone();
                let view = ViewArgs {
                    format: args.format,
                    min_percent: 0.0,
                    depth: None,
                    max_stack: sprig_callgraph::report::DEFAULT_MAX_STACK,
                    weight: Metric::Samples,
                    merged: !args.threads,
                    threads: args.threads,
                    hot_spots: args.hot,
                    back_traces: args.back_traces.clone(),
                    width: None,
                    verbose: false,
                };
                output::write(&profile, &view, args.output.as_deref(), false)
            }
        }
    }
}

/// The classes that get dormant probes for `--edges`: those of the
/// methods sampled so far outside the JDK's library (the tools the JDK
/// ships, such as javac, included; sprig's own left out), sorted.
fn edge_classes(p: &StackProfile) -> Vec<String> {
    let mut classes: Vec<String> = p
        .counts
        .keys()
        .filter_map(|m| p.methods.get(m))
        .map(|info| info.class.clone())
        .filter(|c| !is_library_class(c) && !c.starts_with("sprig."))
        .collect();
    classes.sort();
    classes.dedup();
    classes
}

#[cfg(test)]
mod tests;
