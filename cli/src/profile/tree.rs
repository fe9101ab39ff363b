//! The work of `sprig profile` and `sprig run`: the calling-context tree.
//! [`CallTree`] reads the ring into the CCT builder (with sampled timing,
//! the position samples first; with windows timing, the stack samples
//! through [`StackCredit`]), resets the results on SIGUSR1
//! or `--reset-after`, draws the live view, and at the end builds the
//! [`Profile`] and writes the report.

use std::io::IsTerminal;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use sprig_callgraph::Timing;
use sprig_callgraph::report::live::Live;
use sprig_callgraph::{CctBuilder, PositionSample, Profile, Render, RenderOptions};
use sprig_wire::control::ClockKind;
use sprig_wire::event::Event;
use sprig_wire::ring::{Consumer, Region, Run};
use sprig_wire::{Message, clock};

use super::args::{SessionArgs, TimingArg};
use super::position_samples::{PositionSamples, Weight};
use super::stack_credit::StackCredit;
use crate::session::{Flow, Outcome, Phase, Prepared, Turn, Work};
use crate::{output, signals};

/// Whether the live view is drawn: `--live` with stderr on a terminal
/// (a note says why not otherwise).
pub(super) fn live_view(args: &SessionArgs) -> bool {
    let live = args.live && std::io::stderr().is_terminal();
    if args.live && !live {
        eprintln!(
            "sprig: note: --live needs stderr on a terminal; showing the report at the end only"
        );
    }
    live
}

/// The calling-context tree of one session, from the ring to the report.
pub(super) struct CallTree<'a> {
    args: &'a SessionArgs,
    region: Arc<Region>,
    consumer: Consumer,
    /// Sampled timing: the position samples, and the runs of the last poll (their
    /// events in `run_events`), held until its samples are in.
    positions: Option<PositionSamples>,
    runs: Vec<(Run, Range<usize>)>,
    run_events: Vec<Event>,
    builder: CctBuilder,
    /// Windows timing: the stack samples' mapping onto the tree.
    stacks: Option<StackCredit>,
    resets_seen: u32,
    timed_reset_done: bool,
    // When the results were last reset, and when to reset the threads that
    // had no event since (the builder holds the reset for them till then).
    reset_when: Option<Instant>,
    catch_up_at: Option<Instant>,
    /// Whether the live view is drawn, and when it was last.
    live: bool,
    last_live: Instant,
}

impl<'a> CallTree<'a> {
    /// The tree of JVM `pid` (named `jvm_line`) on `prepared`'s ring, made
    /// by sprig's `command` (`profile`, `run`); `live` from [`live_view`].
    pub(super) fn new(
        args: &'a SessionArgs,
        prepared: &Prepared,
        pid: u32,
        jvm_line: String,
        command: &str,
        live: bool,
    ) -> CallTree<'a> {
        let region = prepared.region.clone();
        let consumer = Consumer::new(region.clone());
        let mut builder = CctBuilder::new(region.ticks_per_sec());
        let positions = (args.timing == TimingArg::Sampled).then(|| {
            builder.set_timing(Timing::Sampled);
            let weight = match args.clock_kind() {
                ClockKind::ThreadCpu => Weight::Cpu { pid },
                _ => Weight::Wall,
            };
            PositionSamples::start(
                region.clone(),
                Duration::from_secs_f64(args.interval_ms() / 1000.0),
                weight,
            )
        });
        let stacks = (args.timing == TimingArg::Windows).then(|| {
            builder.set_timing(Timing::Sampled);
            builder.set_windows(true);
            StackCredit::new(
                &args.roots,
                &args.include,
                (args.interval_ms() * 1000.0).round() as u64,
            )
        });
        {
            let (target, _) = builder.profile_fields_mut();
            target.pid = pid;
            target.jvm = jvm_line;
            target.command = command.to_owned();
        }
        CallTree {
            args,
            region,
            consumer,
            positions,
            runs: Vec::new(),
            run_events: Vec::new(),
            builder,
            stacks,
            resets_seen: 0,
            timed_reset_done: false,
            reset_when: None,
            catch_up_at: None,
            live,
            last_live: Instant::now(),
        }
    }
}

impl Work for CallTree<'_> {
    /// Reads what the ring holds into the tree.
    fn poll(&mut self) -> usize {
        let builder = &mut self.builder;
        match &self.positions {
            None => self
                .consumer
                .poll(&mut |thread, evs| builder.process(thread, evs)),
            Some(positions) => {
                // The ring first, then the samples taken up to now, then
                // the events: no sample comes after the events it falls in.
                let (runs, events) = (&mut self.runs, &mut self.run_events);
                runs.clear();
                events.clear();
                let n = self.consumer.poll_into(runs, events);
                builder.add_samples(&positions.take());
                for (run, range) in runs.iter() {
                    builder.process_run(*run, &events[range.clone()]);
                }
                n
            }
        }
    }

    fn on_message(&mut self, msg: &Message) -> Result<Flow> {
        self.builder.apply_message(msg);
        if let Some(s) = &mut self.stacks {
            s.on_message(msg, &mut self.builder);
        }
        if let (Some(s), Message::Thread { index, tid, .. }) = (&self.positions, msg) {
            s.set_tid(*index, *tid);
        }
        Ok(Flow::Continue)
    }

    /// Resets: SIGUSR1 at any time while profiling, or --reset-after.
    fn on_turn(&mut self, turn: &mut Turn<'_>) -> Result<()> {
        let resets = signals::resets();
        if turn.phase == Phase::Detaching {
            self.resets_seen = resets;
        }
        if turn.phase == Phase::Profiling
            && let Some(since) = turn.profiling_since
        {
            let timed = !self.timed_reset_done
                && self
                    .args
                    .reset_after
                    .is_some_and(|r| since.elapsed().as_secs_f64() >= r);
            if timed || resets > self.resets_seen {
                self.timed_reset_done |= timed;
                self.resets_seen = resets;
                match self.region.clock() {
                    ClockKind::ThreadCpu => self.builder.reset_now(),
                    wall => {
                        let at = clock::read(wall);
                        self.builder.reset_at(at);
                        if self.positions.is_some() {
                            // Each thread's place in its stream now: the
                            // reset falls there, not at its next timed event.
                            let mut now = Vec::new();
                            self.region.positions(&mut now);
                            let marks: Vec<PositionSample> = now
                                .into_iter()
                                .map(|p| PositionSample::at(p, at, 0))
                                .collect();
                            self.builder.mark_reset(&marks);
                        }
                    }
                }
                let now = Instant::now();
                self.reset_when = Some(now);
                // By then every event recorded before the reset has long
                // been published and read.
                self.catch_up_at = Some(now + Duration::from_secs(1));
                let windows = self.args.timing == TimingArg::Windows;
                if windows {
                    // A silent window would leave the results after the
                    // reset without a counted root call until it ended.
                    turn.writer.send(&Message::CountingWindowNow)?;
                }
                turn.status.line(&format!(
                    "sprig: results reset {:.1} s into profiling: the report covers what runs from now on{}",
                    since.elapsed().as_secs_f64(),
                    if windows {
                        " (a counting window opens now)"
                    } else {
                        ""
                    }
                ));
            }
        }
        if self.catch_up_at.is_some_and(|at| Instant::now() >= at) {
            self.builder.apply_pending_reset();
            self.catch_up_at = None;
        }
        Ok(())
    }

    fn root_calls(&self) -> u64 {
        self.builder.root_calls()
    }

    /// The live view with `--live`, redrawn every second.
    fn on_progress(&mut self) {
        if self.live && self.last_live.elapsed() >= Duration::from_secs(1) {
            self.last_live = Instant::now();
            draw_live(&self.builder, self.args);
        }
    }

    /// Builds the profile, prints the closing note and writes the report.
    fn finish(mut self, mut outcome: Outcome) -> Result<std::process::ExitCode> {
        // No sample after the last events.
        self.positions = None;
        self.region.mark_consumer_gone();

        let profiling_since = outcome.profiling_since;
        let duration_ms = self
            .reset_when
            .or(profiling_since)
            .map(|s| s.elapsed().as_millis() as u64)
            .unwrap_or(0);
        let reset_after_ms = match (profiling_since, self.reset_when) {
            (Some(p), Some(r)) => r.duration_since(p).as_millis().max(1) as u64,
            _ => 0,
        };
        {
            let (_, st) = self.builder.profile_fields_mut();
            st.events = outcome.events;
            st.set_agent(&outcome.stats);
            st.lost_events = st.lost_events.max(self.region.lost_events());
            st.duration_ms = duration_ms;
            st.reset_after_ms = reset_after_ms;
        }
        if let Some(s) = &mut self.stacks {
            s.finish(&mut self.builder);
        }
        if let (Some(s), Ok(w)) = (&self.stacks, self.args.window_options()) {
            let silent = self.builder.silent_root_calls();
            let counted = self.builder.root_calls();
            let (_, st) = self.builder.profile_fields_mut();
            st.windows = Some(sprig_callgraph::WindowFacts {
                counting_ms: w.counting_ms,
                silent_ms: w.silent_ms,
                interval_us: s.interval_us(),
                counted_root_calls: counted,
                silent_root_calls: silent,
                samples: s.credited,
                samples_outside: s.outside + s.unnamed(),
                source: s.source,
                samples_dropped: s.dropped,
                samples_in_probes: s.in_probes,
                silence: w.silence,
                switches: s.switches,
            });
        }
        let mut profile: Profile = self.builder.finish();
        if !outcome.final_counts {
            complete_method_counts(&mut profile, outcome.stats_seen);
        }

        let code = outcome.conclude();
        if !outcome.has_results() {
            return Ok(code);
        }
        output::write_sections(
            &profile,
            &self.args.view,
            &self.args.sections,
            self.args.output.as_deref(),
            true,
            // `sprig run`: stdout is the application's.
            if outcome.child_mode {
                output::Console::Stderr
            } else {
                output::Console::Stdout
            },
        )?;
        if profile.stats.lost_events > 0 {
            outcome.status.line(&format!(
                "sprig: warning: {} events were lost (the ring was full for longer than the wait bound)",
                profile.stats.lost_events
            ));
        }
        if profile.threads.is_empty() && code == std::process::ExitCode::SUCCESS {
            // Nothing to show: say why once more, where it is read last.
            let why = outcome
                .root_hint
                .as_deref()
                .unwrap_or("no thread called a root while the probes were in place");
            outcome
                .status
                .line(&format!("sprig: no root call was recorded: {why}"));
            return Ok(std::process::ExitCode::from(NO_ROOT_CALL));
        }
        Ok(code)
    }
}

/// The exit status of a session that recorded no root call.
pub(crate) const NO_ROOT_CALL: u8 = 4;

/// The method counts of a session whose agent's final counts never came
/// (its `Detached`, lost when the JVM exits): its last status is up to a
/// second old, from before the root ran in a JVM that exits soon after it,
/// or there was none. The counts are then at least the methods of the tree;
/// without a status, instrumented counts the methods the agent gave probes
/// (dormant ones too). A warning says so when this changes them.
fn complete_method_counts(profile: &mut Profile, had_status: bool) {
    let in_tree = profile
        .threads
        .iter()
        .flat_map(|t| t.tree.nodes.iter())
        .filter(|n| n.calls > 0)
        .map(|n| n.method)
        .collect::<std::collections::BTreeSet<u32>>()
        .len() as u64;
    let announced = profile.methods.len() as u64;
    let st = &mut profile.stats;
    let before = (st.instrumented_methods, st.called_methods);
    st.called_methods = st.called_methods.max(in_tree);
    st.instrumented_methods = if had_status {
        st.instrumented_methods.max(st.called_methods)
    } else {
        announced.max(st.called_methods)
    };
    if (st.instrumented_methods, st.called_methods) != before {
        profile.warnings.push(
            "the JVM exited before the agent's final counts: the method counts are the \
             larger of its last status and the methods of the tree"
                .to_owned(),
        );
    }
}

/// Redraws the live view (the hottest merged paths) on stderr.
fn draw_live(builder: &CctBuilder, args: &SessionArgs) {
    let snapshot = builder.snapshot();
    let opts = RenderOptions {
        min_percent: args.view.min_percent.max(1.0),
        max_depth: args.view.depth,
        width: args.view.width_for(Some(2)),
        ..RenderOptions::default()
    };
    let mut buf = Vec::new();
    if (Live { max_lines: 30 })
        .render(&snapshot, &opts, &mut buf)
        .is_ok()
    {
        // Clear the screen, home the cursor, draw.
        eprint!("\x1b[2J\x1b[H{}", String::from_utf8_lossy(&buf));
    }
}
