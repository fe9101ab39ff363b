//! The session loop: a [`SessionLoop`] holds everything one session needs
//! on the CLI side, and [`SessionLoop::run`] calls one method per step
//! (read the ring, read the control messages, act on signals, resets and
//! the duration, watch the JVM, show progress, pause) until the session
//! ends, then [`SessionLoop::finish`] builds and writes the report.

use std::io::IsTerminal;
use std::os::fd::AsFd;
use std::process::{Child, ExitCode};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use sprig_callgraph::Timing;
use sprig_callgraph::report::live::Live;
use sprig_callgraph::{CctBuilder, Profile, Render, RenderOptions, Sample};
use sprig_rewriter::pattern::MethodPattern;
use sprig_wire::control::{AgentStats, ClockKind};
use sprig_wire::event::Event;
use sprig_wire::ring::{Consumer, Run};
use sprig_wire::session::{Channel, SessionError};
use sprig_wire::{Message, clock};

use super::args::{SessionArgs, TimingArg, excluded_by};
use super::connect::{Prepared, spawn_reader};
use super::sampler::{Sampler, Weight};
use super::status::{Progress, Status};
use crate::{output, signals};

/// How long to wait for the agent to answer a detach before giving up
/// (the agent then detaches by itself when the socket closes).
const DETACH_TIMEOUT: Duration = Duration::from_secs(20);
/// Pause between ring polls while the consumer keeps up. Each poll frees
/// the segments it read, and a producer that took one of those at once
/// wrote into lines still in this process's cache (BENCHMARKS.md, "Ninth
/// session"): polling less often was the first cure found (a 2 ms pause
/// left the probe pair ~3 ns dearer than 10 or 20 ms, and 12-28 ns dearer
/// for a whole session in 13 sessions of 96). Producers now take the
/// oldest free segment instead, which cures it at 2 ms too; the longer
/// pause stays because it costs nothing: at the probes' fastest one
/// thread writes about 12 MiB of ring in 10 ms, and the pause shortens
/// when the ring would fill faster.
const POLL_PAUSE: Duration = Duration::from_millis(10);
/// The pause is shortened so that, at the rate the last poll saw, the
/// producers fill at most this share of the ring (1/4) before the next
/// poll: many busy threads would otherwise fill it and wait.
const FILL_SHARE_PER_PAUSE: f64 = 0.25;
/// Shortest pause: below it the consumer polls again at once.
const MIN_POLL_PAUSE: Duration = Duration::from_millis(1);

/// How long the consumer waits before its next poll, after a poll that
/// delivered `n` events `since` the one before, on a ring of
/// `ring_events` slots; `None` when it is behind and must poll at once
/// (the poll delivered an eighth of the ring or more, or the producers
/// would fill a quarter of it within [`MIN_POLL_PAUSE`]).
fn next_pause(n: usize, since: Duration, ring_events: usize) -> Option<Duration> {
    if n >= ring_events.div_ceil(8) {
        return None;
    }
    if n == 0 || since.is_zero() {
        return Some(POLL_PAUSE);
    }
    let rate = n as f64 / since.as_secs_f64();
    let fill = Duration::from_secs_f64(ring_events as f64 * FILL_SHARE_PER_PAUSE / rate);
    let pause = fill.min(POLL_PAUSE);
    (pause >= MIN_POLL_PAUSE).then_some(pause)
}

#[derive(PartialEq, Eq, Debug)]
enum Phase {
    /// Waiting for the agent to start the session.
    Starting,
    Profiling,
    /// Detach requested; waiting for `Detached`.
    Detaching,
}

/// Why the session ended.
enum End {
    Detached,
    /// The JVM exited (normal for `sprig run`, an early end for `profile`).
    JvmExited(String),
    /// The JVM or the agent went away without detaching.
    Lost(String),
    /// The agent reported a fatal error.
    AgentError(String),
}

/// One session, from the `Start` sent to the agent to the report.
pub(super) struct SessionLoop<'a> {
    args: &'a SessionArgs,
    prepared: &'a Prepared,
    pid: u32,
    /// The JVM `sprig run` started, watched for its exit.
    child: Option<&'a mut Child>,
    writer: Channel,
    messages: Receiver<Result<Message, SessionError>>,
    consumer: Consumer,
    /// Sampled timing: the sampler, and the runs of the last poll (their
    /// events in `run_events`), held until its samples are in.
    sampler: Option<Sampler>,
    runs: Vec<(Run, std::ops::Range<usize>)>,
    run_events: Vec<Event>,
    /// Event slots in the whole ring.
    ring_events: usize,
    builder: CctBuilder,
    control: Control,
    status: Status,
    events: u64,
    last_poll: Instant,
    detach_sent_at: Option<Instant>,
    signals_seen: u32,
    resets_seen: u32,
    timed_reset_done: bool,
    // When the results were last reset, and when to reset the threads that
    // had no event since (the builder holds the reset for them till then).
    reset_when: Option<Instant>,
    catch_up_at: Option<Instant>,
    /// (start, events then, rate) of the rate shown on the status line.
    rate_window: (Instant, u64, f64),
    /// Whether the live view is drawn, and when it was last.
    live: bool,
    last_live: Instant,
}

impl<'a> SessionLoop<'a> {
    /// Sends `Start` with the ring to the agent on `channel` and sets up
    /// the reading side.
    pub(super) fn start(
        args: &'a SessionArgs,
        prepared: &'a Prepared,
        channel: Channel,
        pid: u32,
        jvm_line: String,
        child: Option<&'a mut Child>,
    ) -> Result<SessionLoop<'a>> {
        let live = args.live && std::io::stderr().is_terminal();
        if args.live && !live {
            eprintln!(
                "sprig: note: --live needs stderr on a terminal; showing the report at the end only"
            );
        }
        let last_live = Instant::now();
        signals::install();
        let writer = channel
            .try_clone()
            .context("cannot duplicate the control socket")?;
        writer.send_with_fd(
            &Message::Start(args.session_options()),
            prepared.ring_fd.as_fd(),
        )?;
        let messages = spawn_reader(channel);
        let ticks_per_sec = prepared.region.ticks_per_sec();
        let consumer = Consumer::new(prepared.region.clone());
        let ring_events =
            prepared.region.segments() as usize * prepared.region.segment_capacity() as usize;
        let last_poll = Instant::now();
        let mut builder = CctBuilder::new(ticks_per_sec);
        let sampler = (args.timing == TimingArg::Sampled).then(|| {
            builder.set_timing(Timing::Sampled);
            let weight = match args.clock_kind() {
                ClockKind::ThreadCpu => Weight::Cpu { pid },
                _ => Weight::Wall,
            };
            Sampler::start(
                prepared.region.clone(),
                Duration::from_secs_f64(args.interval / 1000.0),
                weight,
            )
        });
        {
            let (target, _) = builder.profile_fields_mut();
            target.pid = pid;
            target.jvm = jvm_line;
        }
        Ok(SessionLoop {
            args,
            prepared,
            pid,
            child,
            writer,
            messages,
            consumer,
            sampler,
            runs: Vec::new(),
            run_events: Vec::new(),
            ring_events,
            builder,
            control: Control::new(args.exclude.clone()),
            status: if args.quiet {
                Status::new().quiet()
            } else {
                Status::new()
            },
            events: 0,
            last_poll,
            detach_sent_at: None,
            signals_seen: 0,
            resets_seen: 0,
            timed_reset_done: false,
            reset_when: None,
            catch_up_at: None,
            rate_window: (Instant::now(), 0, 0.0),
            live,
            last_live,
        })
    }

    /// Runs the session to its end and writes the report; the exit code.
    pub(super) fn run(mut self) -> Result<ExitCode> {
        let end = loop {
            let (n, since_last_poll) = self.read_ring();
            if let Some(end) = self.read_messages() {
                break end;
            }
            if let Some(end) = self.on_signals()? {
                break end;
            }
            self.on_resets();
            self.on_duration()?;
            if let Some(end) = self.check_detach_timeout() {
                break end;
            }
            if let Some(end) = self.check_child_exit() {
                break end;
            }
            self.show_progress();
            self.pause(n, since_last_poll);
        };
        self.finish(end)
    }

    /// Reads what the ring holds into the tree: the number of events and
    /// the time since the poll before.
    fn read_ring(&mut self) -> (usize, Duration) {
        let polled_at = Instant::now();
        let builder = &mut self.builder;
        let n = match &self.sampler {
            None => self
                .consumer
                .poll(&mut |thread, evs| builder.process(thread, evs)),
            Some(sampler) => {
                // The ring first, then the samples taken up to now, then
                // the events: no sample comes after the events it falls in.
                let (runs, events) = (&mut self.runs, &mut self.run_events);
                runs.clear();
                events.clear();
                let n = self.consumer.poll_into(runs, events);
                builder.add_samples(&sampler.take());
                for (run, range) in runs.iter() {
                    builder.process_run(*run, &events[range.clone()]);
                }
                n
            }
        };
        let since_last_poll = polled_at.duration_since(self.last_poll);
        self.last_poll = polled_at;
        self.events += n as u64;
        (n, since_last_poll)
    }

    /// Handles the control messages that arrived; how the session ended,
    /// if one of them (or the closed connection) ended it.
    fn read_messages(&mut self) -> Option<End> {
        loop {
            match self.messages.try_recv() {
                Ok(Ok(msg)) => {
                    self.builder.apply_message(&msg);
                    if let (Some(s), Message::Thread { index, tid, .. }) = (&self.sampler, &msg) {
                        s.set_tid(*index, *tid);
                    }
                    if let Some(e) = self.control.on_message(msg, &mut self.status, self.pid) {
                        return Some(e);
                    }
                }
                Ok(Err(e)) => {
                    return Some(if e.is_closed() {
                        connection_closed(self.pid, self.child.as_deref_mut())
                    } else {
                        End::Lost(format!("control connection failed: {e}"))
                    });
                }
                Err(TryRecvError::Empty) => return None,
                Err(TryRecvError::Disconnected) => {
                    return Some(connection_closed(self.pid, self.child.as_deref_mut()));
                }
            }
        }
    }

    /// Ctrl-C or SIGTERM: detach, or at the second one exit at once.
    fn on_signals(&mut self) -> Result<Option<End>> {
        let sigs = signals::count();
        if sigs > self.signals_seen {
            self.signals_seen = sigs;
            if self.control.phase == Phase::Detaching {
                self.status.line(
                    "sprig: interrupted again: exiting now; the agent restores the JVM by itself",
                );
                return Ok(Some(End::Lost("interrupted twice".into())));
            }
            self.status.line(
                "sprig: stopping: restoring classes and detaching (Ctrl-C again to exit at once)",
            );
            self.send_detach()?;
        }
        Ok(None)
    }

    /// Resets: SIGUSR1 at any time while profiling, or --reset-after.
    fn on_resets(&mut self) {
        let resets = signals::resets();
        if self.control.phase == Phase::Detaching {
            self.resets_seen = resets;
        }
        if self.control.phase == Phase::Profiling
            && let Some(since) = self.control.profiling_since
        {
            let timed = !self.timed_reset_done
                && self
                    .args
                    .reset_after
                    .is_some_and(|r| since.elapsed().as_secs_f64() >= r);
            if timed || resets > self.resets_seen {
                self.timed_reset_done |= timed;
                self.resets_seen = resets;
                match self.prepared.region.clock() {
                    ClockKind::ThreadCpu => self.builder.reset_now(),
                    wall => {
                        let at = clock::read(wall);
                        self.builder.reset_at(at);
                        if self.sampler.is_some() {
                            // Each thread's place in its stream now: the
                            // reset falls there, not at its next timed event.
                            let mut now = Vec::new();
                            self.prepared.region.positions(&mut now);
                            let marks: Vec<Sample> =
                                now.into_iter().map(|p| Sample::at(p, at, 0)).collect();
                            self.builder.mark_reset(&marks);
                        }
                    }
                }
                let now = Instant::now();
                self.reset_when = Some(now);
                // By then every event recorded before the reset has long
                // been published and read.
                self.catch_up_at = Some(now + Duration::from_secs(1));
                self.status.line(&format!(
                    "sprig: results reset {:.1} s into profiling: the report covers what runs from now on",
                    since.elapsed().as_secs_f64()
                ));
            }
        }
        if self.catch_up_at.is_some_and(|at| Instant::now() >= at) {
            self.builder.apply_pending_reset();
            self.catch_up_at = None;
        }
    }

    /// `--duration` reached: detach.
    fn on_duration(&mut self) -> Result<()> {
        if self.control.phase == Phase::Profiling
            && let (Some(d), Some(since)) = (self.args.duration, self.control.profiling_since)
            && since.elapsed().as_secs_f64() >= d
        {
            self.send_detach()?;
        }
        Ok(())
    }

    fn send_detach(&mut self) -> Result<()> {
        self.writer.send(&Message::Detach)?;
        self.detach_sent_at = Some(Instant::now());
        self.control.phase = Phase::Detaching;
        Ok(())
    }

    /// A detach the agent did not confirm in time ends the session.
    fn check_detach_timeout(&self) -> Option<End> {
        if let Some(at) = self.detach_sent_at
            && at.elapsed() > DETACH_TIMEOUT
        {
            return Some(End::Lost(format!(
                "the agent did not confirm the detach within {DETACH_TIMEOUT:?}"
            )));
        }
        None
    }

    /// The JVM `sprig run` started has exited.
    fn check_child_exit(&mut self) -> Option<End> {
        if let Some(c) = self.child.as_deref_mut()
            && let Ok(Some(st)) = c.try_wait()
        {
            // Drain what the agent managed to publish, then stop.
            self.read_ring();
            return Some(End::JvmExited(format!("the JVM exited ({st})")));
        }
        None
    }

    /// The status line, and the live view with `--live`.
    fn show_progress(&mut self) {
        if let Some(since) = self.control.profiling_since {
            let (t0, e0, r) = self.rate_window;
            let dt = t0.elapsed().as_secs_f64();
            let rate = if dt >= 1.0 {
                let r = (self.events - e0) as f64 / dt;
                self.rate_window = (Instant::now(), self.events, r);
                r
            } else {
                r
            };
            let progress = Progress {
                events: self.events,
                rate,
                root_calls: self.builder.root_calls(),
            };
            self.status
                .update(since.elapsed(), progress, &self.control.stats);
            if self.live && self.last_live.elapsed() >= Duration::from_secs(1) {
                self.last_live = Instant::now();
                draw_live(&self.builder, self.args);
            }
        }
    }

    /// Poll in batches: every poll costs the probes it reads behind (see
    /// POLL_PAUSE). Only a consumer that is behind polls again without a
    /// pause.
    fn pause(&self, n: usize, since_last_poll: Duration) {
        if let Some(pause) = next_pause(n, since_last_poll, self.ring_events) {
            std::thread::sleep(pause);
        }
    }

    /// After the loop: settles with the agent, reads what is left, builds
    /// the profile, prints the closing note and writes the report.
    fn finish(mut self, end: End) -> Result<ExitCode> {
        // An agent-reported error ends the session: make sure the agent has
        // restored the JVM before we go (a new session may follow at once).
        if matches!(end, End::AgentError(_)) && self.control.phase != Phase::Detaching {
            let _ = self.writer.send(&Message::Detach);
            let deadline = Instant::now() + DETACH_TIMEOUT;
            while Instant::now() < deadline {
                match self.messages.recv_timeout(Duration::from_millis(50)) {
                    Ok(Ok(Message::Detached(s))) => {
                        self.control.stats = s;
                        self.control.stats_seen = true;
                        self.control.final_counts = true;
                        break;
                    }
                    Ok(Ok(_)) | Err(RecvTimeoutError::Timeout) => {}
                    Ok(Err(_)) | Err(RecvTimeoutError::Disconnected) => break,
                }
            }
        }

        // A JVM that exits ends the session before the control messages it
        // sent last are read (its `Detached`, when it got that out): read what
        // is left, up to the closed connection.
        if matches!(end, End::JvmExited(_) | End::Lost(_)) {
            let deadline = Instant::now() + Duration::from_secs(1);
            while let Ok(Ok(msg)) = self
                .messages
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                self.builder.apply_message(&msg);
                self.control.stats_seen |= carries_stats(&msg);
                self.control.final_counts |= matches!(msg, Message::Detached(_));
                if let Message::Status(s) | Message::Detached(s) = msg {
                    self.control.stats = s;
                }
            }
        }

        // Final drain: everything the agent published before it retired the ring.
        self.read_ring();
        // No sample after the last events.
        self.sampler = None;
        let prepared = self.prepared;
        prepared.region.mark_consumer_gone();

        let profiling_since = self.control.profiling_since;
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
            st.events = self.events;
            st.set_agent(&self.control.stats);
            st.lost_events = st.lost_events.max(prepared.region.lost_events());
            st.duration_ms = duration_ms;
            st.reset_after_ms = reset_after_ms;
        }
        let child_mode = self.child.is_some();
        let mut status = self.status;
        let mut profile: Profile = self.builder.finish();
        if !self.control.final_counts {
            complete_method_counts(&mut profile, self.control.stats_seen);
        }

        let (code, note) = match &end {
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
        };
        if let Some(note) = &note {
            status.line(note);
        }
        if self.control.phase == Phase::Starting && !matches!(end, End::Detached) {
            return Ok(code);
        }
        output::write(&profile, &self.args.view, self.args.output.as_deref(), true)?;
        if profile.stats.lost_events > 0 {
            status.line(&format!(
                "sprig: warning: {} events were lost (the ring was full for longer than the wait bound)",
                profile.stats.lost_events
            ));
        }
        Ok(code)
    }
}

/// Whether `msg` carries the agent's counts.
fn carries_stats(msg: &Message) -> bool {
    matches!(msg, Message::Status(_) | Message::Detached(_))
}

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

/// Whether process `pid` is gone (or a zombie) within `bound`.
fn jvm_gone_within(pid: u32, bound: Duration) -> bool {
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
fn connection_closed(pid: u32, child: Option<&mut std::process::Child>) -> End {
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

/// What the control messages tell the session loop.
#[derive(Debug)]
struct Control {
    phase: Phase,
    /// The agent's latest counts.
    stats: AgentStats,
    /// Whether the agent's counts (`Status`, `Detached`) ever arrived.
    stats_seen: bool,
    /// Whether its final counts (`Detached`) arrived.
    final_counts: bool,
    profiling_since: Option<Instant>,
    announced_roots: bool,
    /// The `--exclude` patterns, to explain a root they leave out.
    excludes: Vec<String>,
}

impl Control {
    fn new(excludes: Vec<String>) -> Control {
        Control {
            phase: Phase::Starting,
            stats: AgentStats::default(),
            stats_seen: false,
            final_counts: false,
            profiling_since: None,
            announced_roots: false,
            excludes,
        }
    }

    fn start_profiling(&mut self) {
        if self.phase == Phase::Starting {
            self.phase = Phase::Profiling;
            self.profiling_since = Some(Instant::now());
        }
    }

    /// The `--exclude` pattern that covers the classes of every near match
    /// the agent gave for a root it found no method for, when the root's
    /// class pattern matches them all: the root is excluded, not missing.
    fn excluding_all(&self, pattern: &str, suggestions: &[String]) -> Option<&str> {
        let root = MethodPattern::parse(pattern).ok()?;
        let mut found = None;
        for s in suggestions {
            let class = s.split("::").next().unwrap_or(s);
            if !root.matches_class(class) {
                return None;
            }
            found = Some(excluded_by(class, &self.excludes)?);
        }
        found
    }

    /// What the session loop itself does with a control message (the CCT
    /// builder has already taken what it needs). Returns how the session
    /// ended, if it did.
    fn on_message(&mut self, msg: Message, status: &mut Status, pid: u32) -> Option<End> {
        self.stats_seen |= carries_stats(&msg);
        self.final_counts |= matches!(msg, Message::Detached(_));
        match msg {
            Message::RootInstrumented {
                pattern,
                methods: n,
            } => {
                if !self.announced_roots {
                    self.announced_roots = true;
                    status.line(&format!(
                        "sprig: profiling JVM {pid}: root {pattern} instrumented ({n} method{})",
                        if n == 1 { "" } else { "s" }
                    ));
                }
                self.start_profiling();
            }
            Message::RootNotFound {
                pattern,
                class_loaded,
                suggestions,
            } => {
                if class_loaded {
                    if let Some(p) = self.excluding_all(&pattern, &suggestions) {
                        return Some(End::AgentError(format!(
                            "root {pattern} matches only classes excluded by --exclude {p}"
                        )));
                    }
                    let near = if suggestions.is_empty() {
                        String::new()
                    } else {
                        format!("; near matches: {}", suggestions.join(", "))
                    };
                    return Some(End::AgentError(format!(
                        "root {pattern} matches no method of the loaded classes{near}"
                    )));
                }
                // Suggestions name loaded classes close to the pattern's class.
                let mut classes: Vec<&str> = suggestions
                    .iter()
                    .map(|s| s.split("::").next().unwrap_or(s))
                    .collect();
                classes.dedup();
                let near = if classes.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (loaded classes with similar names: {})",
                        classes.join(", ")
                    )
                };
                status.line(&format!(
                    "sprig: root {pattern} matches no loaded class yet; it is instrumented when its class loads{near}"
                ));
                self.start_profiling();
            }
            Message::Status(s) => self.stats = s,
            Message::ClassFailed(f) => {
                let err = if f.jvmti_error.is_empty() {
                    String::new()
                } else {
                    format!("{}: ", f.jvmti_error)
                };
                status.line(&format!(
                    "sprig: warning: class {} left uninstrumented: {err}{}",
                    f.class, f.reason
                ));
            }
            Message::Warning(w) => status.line(&format!("sprig: warning: {w}")),
            Message::Error(e) => return Some(End::AgentError(e)),
            Message::Detached(s) => {
                self.stats = s;
                // Not asked for: the agent ended the session itself. When the
                // JVM is exiting it may still get its `Detached` out before the
                // process goes; that is an early end, not a normal detach.
                if self.phase != Phase::Detaching && jvm_gone_within(pid, Duration::from_secs(2)) {
                    return Some(End::JvmExited(format!("JVM {pid} exited")));
                }
                return Some(End::Detached);
            }
            _ => {}
        }
        None
    }
}

/// Redraws the live view (the hottest merged paths) on stderr.
fn draw_live(builder: &CctBuilder, args: &SessionArgs) {
    let snapshot = builder.snapshot();
    let opts = RenderOptions {
        min_percent: args.view.min_percent.max(1.0),
        max_depth: args.view.depth,
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const RING: usize = 2_000_000;

    /// A sink the test keeps a handle on.
    #[derive(Clone, Default)]
    struct Captured(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.borrow_mut().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_progress_line_shows_root_calls_and_quiet_turns_it_off() {
        let progress = Progress {
            events: 2_500_000,
            rate: 1_250_000.0,
            root_calls: 4_200,
        };
        let stats = AgentStats {
            instrumented_methods: 12,
            called_methods: 9,
            ..AgentStats::default()
        };
        for quiet in [false, true] {
            let captured = Captured::default();
            let status = Status::to(Box::new(captured.clone()), true);
            let mut status = if quiet { status.quiet() } else { status };
            std::thread::sleep(Duration::from_millis(510));
            status.update(Duration::from_secs(3), progress, &stats);
            let text = String::from_utf8(captured.0.borrow().clone()).unwrap();
            if quiet {
                assert!(text.is_empty(), "{text:?}");
            } else {
                assert!(
                    text.contains("3.0 s, 4.2k root calls, 2.5M events (1.2M/s), 12 methods instrumented / 9 called"),
                    "{text:?}"
                );
            }
        }
    }

    #[test]
    fn agent_messages_are_printed_with_control_characters_escaped() {
        let captured = Captured::default();
        let mut status = Status::to(Box::new(captured.clone()), false);
        let mut control = Control::new(Vec::new());
        let esc = "a.B\u{1b}]0;t\u{7}";
        for msg in [
            Message::RootInstrumented {
                pattern: format!("{esc}::run"),
                methods: 1,
            },
            Message::RootNotFound {
                pattern: format!("{esc}::x"),
                class_loaded: false,
                suggestions: vec![format!("{esc}::y")],
            },
            Message::Warning(format!("class {esc} \u{9b}")),
            Message::ClassFailed(sprig_wire::control::ClassFailure {
                class: esc.into(),
                jvmti_error: "E\u{1b}".into(),
                reason: "r\r".into(),
            }),
        ] {
            let end = control.on_message(msg, &mut status, 1);
            assert!(end.is_none());
        }
        let text = String::from_utf8(captured.0.borrow().clone()).unwrap();
        assert_eq!(text.lines().count(), 4, "{text}");
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
        assert!(
            text.contains("warning: class a.B\\x1b]0;t\\x07 \\u{9b}"),
            "{text}"
        );
    }

    #[test]
    fn a_root_whose_classes_are_all_excluded_says_so() {
        let captured = Captured::default();
        let mut status = Status::to(Box::new(captured.clone()), false);
        let mut control = Control::new(vec!["com.acme.**".into()]);
        // The agent finds the root's classes loaded but may not instrument
        // them: its near matches are the root's own methods.
        let end = control.on_message(
            Message::RootNotFound {
                pattern: "com.acme.*::run".into(),
                class_loaded: true,
                suggestions: vec!["com.acme.A::run".into(), "com.acme.B::run".into()],
            },
            &mut status,
            1,
        );
        match end {
            Some(End::AgentError(why)) => assert_eq!(
                why,
                "root com.acme.*::run matches only classes excluded by --exclude com.acme.**"
            ),
            _ => panic!("not an error"),
        }
        // A near match outside the excluded classes is still shown as one.
        let end = control.on_message(
            Message::RootNotFound {
                pattern: "com.acme.*::run".into(),
                class_loaded: true,
                suggestions: vec!["org.other.A::run".into()],
            },
            &mut status,
            1,
        );
        match end {
            Some(End::AgentError(why)) => assert_eq!(
                why,
                "root com.acme.*::run matches no method of the loaded classes; near matches: org.other.A::run"
            ),
            _ => panic!("not an error"),
        }
    }

    #[test]
    fn a_quiet_ring_is_read_every_poll_pause() {
        assert_eq!(
            next_pause(0, Duration::from_millis(10), RING),
            Some(POLL_PAUSE)
        );
        assert_eq!(next_pause(0, Duration::ZERO, RING), Some(POLL_PAUSE));
        // One busy thread: 720,000 events in 10 ms fill a quarter of the
        // ring in ~7 ms.
        assert_eq!(
            next_pause(100_000, Duration::from_millis(10), RING),
            Some(POLL_PAUSE)
        );
        let p = next_pause(200_000, Duration::from_millis(4), RING).expect("a pause");
        assert_eq!(p, Duration::from_millis(10));
        let p = next_pause(200_000, Duration::from_millis(2), RING).expect("a pause");
        assert!((p.as_secs_f64() - 0.005).abs() < 1e-9, "{p:?}");
    }

    #[test]
    fn a_consumer_behind_polls_again_at_once() {
        // An eighth of the ring in one poll.
        assert_eq!(next_pause(RING / 8, Duration::from_millis(10), RING), None);
        // A rate that fills a quarter of the ring in under 1 ms.
        assert_eq!(next_pause(200_000, Duration::from_micros(300), RING), None);
    }
}
