//! The session loop: a [`Session`] holds what every session with the agent
//! has on the CLI side, and [`Session::run`] drives a [`Work`] through it,
//! one method per step, until the session ends, then settles with the
//! agent and hands the [`Outcome`] to [`Work::finish`].

use std::os::fd::AsFd;
use std::process::{Child, ExitCode};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use sprig_wire::Message;
use sprig_wire::control::SessionOptions;
use sprig_wire::session::{Channel, SessionError};

use super::connect::{Prepared, spawn_reader};
use super::control::Control;
use super::pacing::next_pause;
use super::state::{End, Phase, connection_closed};
use super::status::{Progress, Status};
use super::work::{Flow, Outcome, Turn, Work};
use crate::signals;

/// How long to wait for the agent to answer a detach before giving up
/// (the agent then detaches by itself when the socket closes).
const DETACH_TIMEOUT: Duration = Duration::from_secs(20);

/// What a session needs to know besides its connection.
pub(crate) struct Plan {
    /// The JVM's process id.
    pub(crate) pid: u32,
    /// `--duration`: detach this many seconds into profiling.
    pub(crate) duration: Option<f64>,
    /// `--quiet`: no status line.
    pub(crate) quiet: bool,
    /// The `--exclude` patterns, to explain a root they leave out.
    pub(crate) excludes: Vec<String>,
}

/// One session, from the `Start` sent to the agent to the settling at the
/// end.
pub(crate) struct Session<'a> {
    plan: Plan,
    /// The JVM `sprig run` started, watched for its exit.
    child: Option<&'a mut Child>,
    writer: Channel,
    messages: Receiver<Result<Message, SessionError>>,
    /// Event slots in the whole ring.
    ring_events: usize,
    control: Control,
    status: Status,
    events: u64,
    last_poll: Instant,
    detach_sent_at: Option<Instant>,
    signals_seen: u32,
    /// (start, events then, rate) of the rate shown on the status line.
    rate_window: (Instant, u64, f64),
}

impl<'a> Session<'a> {
    /// Sends `Start` with `options` and the ring to the agent on
    /// `channel` and sets up the reading side.
    pub(crate) fn start(
        prepared: &Prepared,
        channel: Channel,
        options: SessionOptions,
        plan: Plan,
        child: Option<&'a mut Child>,
    ) -> Result<Session<'a>> {
        signals::install();
        let writer = channel
            .try_clone()
            .context("cannot duplicate the control socket")?;
        writer.send_with_fd(&Message::Start(options), prepared.ring_fd.as_fd())?;
        let messages = spawn_reader(channel);
        let ring_events =
            prepared.region.segments() as usize * prepared.region.segment_capacity() as usize;
        let status = if plan.quiet {
            Status::new().quiet()
        } else {
            Status::new()
        };
        Ok(Session {
            control: Control::new(plan.excludes.clone()),
            plan,
            child,
            writer,
            messages,
            ring_events,
            status,
            events: 0,
            last_poll: Instant::now(),
            detach_sent_at: None,
            signals_seen: 0,
            rate_window: (Instant::now(), 0, 0.0),
        })
    }

    /// Runs the session to its end and hands it to `work`: the exit code.
    pub(crate) fn run<W: Work>(mut self, mut work: W) -> Result<ExitCode> {
        let end = loop {
            let (n, since_last_poll) = self.poll(&mut work);
            if let Some(end) = self.read_messages(&mut work)? {
                break end;
            }
            if let Some(end) = self.on_signals()? {
                break end;
            }
            work.on_turn(&mut self.turn())?;
            self.on_duration()?;
            if let Some(end) = self.check_detach_timeout() {
                break end;
            }
            if let Some(end) = self.check_child_exit(&mut work) {
                break end;
            }
            self.show_progress(&mut work);
            self.pause(n, since_last_poll);
        };
        self.finish(work, end)
    }

    fn turn(&mut self) -> Turn<'_> {
        Turn {
            phase: self.control.phase,
            profiling_since: self.control.profiling_since,
            status: &mut self.status,
            writer: &self.writer,
        }
    }

    /// Has the work read what the ring holds: the number of events and
    /// the time since the poll before.
    fn poll(&mut self, work: &mut impl Work) -> (usize, Duration) {
        let polled_at = Instant::now();
        let n = work.poll();
        let since_last_poll = polled_at.duration_since(self.last_poll);
        self.last_poll = polled_at;
        self.events += n as u64;
        (n, since_last_poll)
    }

    /// Handles the control messages that arrived; how the session ended,
    /// if one of them (or the closed connection) ended it.
    fn read_messages(&mut self, work: &mut impl Work) -> Result<Option<End>> {
        loop {
            match self.messages.try_recv() {
                Ok(Ok(msg)) => {
                    match work.on_message(&msg)? {
                        Flow::Continue => {}
                        Flow::Taken => continue,
                        Flow::End(e) => return Ok(Some(e)),
                    }
                    let begins = work.begins_at(&msg);
                    if let Some(e) = self
                        .control
                        .on_message(msg, &mut self.status, self.plan.pid)
                    {
                        return Ok(Some(e));
                    }
                    if begins {
                        self.control.start_profiling();
                    }
                }
                Ok(Err(e)) => {
                    work.on_disconnect(&e)?;
                    return Ok(Some(if e.is_closed() {
                        connection_closed(self.plan.pid, self.child.as_deref_mut())
                    } else {
                        End::Lost(format!("control connection failed: {e}"))
                    }));
                }
                Err(TryRecvError::Empty) => return Ok(None),
                Err(TryRecvError::Disconnected) => {
                    return Ok(Some(connection_closed(
                        self.plan.pid,
                        self.child.as_deref_mut(),
                    )));
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

    /// `--duration` reached: detach.
    fn on_duration(&mut self) -> Result<()> {
        if self.control.phase == Phase::Profiling
            && let (Some(d), Some(since)) = (self.plan.duration, self.control.profiling_since)
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
    fn check_child_exit(&mut self, work: &mut impl Work) -> Option<End> {
        if let Some(c) = self.child.as_deref_mut()
            && let Ok(Some(st)) = c.try_wait()
        {
            // Drain what the agent managed to publish, then stop.
            self.poll(work);
            return Some(End::JvmExited(format!("the JVM exited ({st})")));
        }
        None
    }

    /// The status line, and the work's own view (`--live`).
    fn show_progress(&mut self, work: &mut impl Work) {
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
                root_calls: work.root_calls(),
            };
            match work.progress_text(since.elapsed()) {
                Some(text) => self.status.update_text(&text),
                None => self
                    .status
                    .update(since.elapsed(), progress, &self.control.stats),
            }
            work.on_progress();
        }
    }

    /// Poll in batches: every poll costs the probes it reads behind (see
    /// the pacing's `POLL_PAUSE`). Only a consumer that is behind polls
    /// again without a pause.
    fn pause(&self, n: usize, since_last_poll: Duration) {
        if let Some(pause) = next_pause(n, since_last_poll, self.ring_events) {
            std::thread::sleep(pause);
        }
    }

    /// After the loop: settles with the agent, has the work read what is
    /// left, and hands it the outcome.
    fn finish<W: Work>(mut self, mut work: W, end: End) -> Result<ExitCode> {
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
                let _ = work.on_message(&msg);
                self.control.take_counts(msg);
            }
        }

        // Final drain: everything the agent published before it retired the ring.
        self.poll(&mut work);
        let control = self.control;
        work.finish(Outcome {
            end,
            phase: control.phase,
            profiling_since: control.profiling_since,
            stats: control.stats,
            stats_seen: control.stats_seen,
            final_counts: control.final_counts,
            events: self.events,
            status: self.status,
            child_mode: self.child.is_some(),
            root_hint: control.root_hint,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    use sprig_wire::control::{AgentStats, ClockKind, JvmInfo};
    use sprig_wire::session::PeerExpectation;

    use crate::session::connect::prepare_with;

    /// What the test's work saw.
    #[derive(Default, Debug)]
    struct Seen {
        polls: usize,
        messages: Vec<String>,
        phases: Vec<Phase>,
        end: Option<String>,
        outcome_phase: Option<Phase>,
        instrumented: u64,
        final_counts: bool,
    }

    /// A work without roots that begins at `Started`, as a stack-sampling
    /// session would.
    struct Recorder(Rc<RefCell<Seen>>);

    impl Work for Recorder {
        fn poll(&mut self) -> usize {
            self.0.borrow_mut().polls += 1;
            0
        }
        fn on_message(&mut self, msg: &Message) -> Result<Flow> {
            let name = format!("{msg:?}");
            let name = name.split([' ', '(']).next().unwrap_or("").to_owned();
            self.0.borrow_mut().messages.push(name);
            Ok(Flow::Continue)
        }
        fn begins_at(&self, msg: &Message) -> bool {
            matches!(msg, Message::Started { .. })
        }
        fn on_turn(&mut self, turn: &mut Turn<'_>) -> Result<()> {
            let mut seen = self.0.borrow_mut();
            if seen.phases.last() != Some(&turn.phase) {
                seen.phases.push(turn.phase);
            }
            Ok(())
        }
        fn finish(self, mut outcome: Outcome) -> Result<ExitCode> {
            let mut seen = self.0.borrow_mut();
            seen.end = Some(format!("{:?}", outcome.end));
            seen.outcome_phase = Some(outcome.phase);
            seen.instrumented = outcome.stats.instrumented_methods;
            seen.final_counts = outcome.final_counts;
            Ok(outcome.conclude())
        }
    }

    /// The driver with an agent played by a thread: the work begins at
    /// `Started`, `--duration` sends `Detach`, the agent's `Detached` ends
    /// the session and its counts reach the outcome.
    #[test]
    fn a_work_is_driven_from_start_to_detach() {
        let prepared = prepare_with(ClockKind::Monotonic, 1, None).expect("session files");
        let me = std::process::id();
        let opts = prepared.dir.agent_options(me);
        let agent = std::thread::spawn(move || -> Result<(bool, bool)> {
            let jvm = JvmInfo {
                pid: me,
                version: "17".into(),
                vm_name: "Test VM".into(),
                vendor: "test".into(),
            };
            let mut ch = sprig_wire::session::connect(&opts, jvm, Duration::from_secs(10))?;
            let start = matches!(ch.recv()?, Message::Start(_)) && ch.take_fd().is_some();
            ch.send(&Message::Started {
                clock: ClockKind::Monotonic,
                ticks_per_sec: 1_000_000_000,
            })?;
            // Bounded: a driver that never detaches fails the test, not
            // hangs it.
            let detach = matches!(
                ch.recv_timeout(Duration::from_secs(5))?,
                Some(Message::Detach)
            );
            if !detach {
                return Ok((start, detach));
            }
            ch.send(&Message::Detached(AgentStats {
                instrumented_methods: 7,
                ..AgentStats::default()
            }))?;
            Ok((start, detach))
        });
        let expect = PeerExpectation {
            pid: Some(me),
            uid: sprig_wire::session::euid(),
            token: prepared.dir.token(),
        };
        let (channel, _) = prepared
            .listener
            .accept(&expect, Duration::from_secs(10))
            .expect("the agent connects");
        let options = SessionOptions::without_roots();
        let plan = Plan {
            pid: me,
            duration: Some(0.05),
            quiet: true,
            excludes: Vec::new(),
        };
        let seen = Rc::new(RefCell::new(Seen::default()));
        let session = Session::start(&prepared, channel, options, plan, None).expect("start");
        let code = session.run(Recorder(seen.clone())).expect("a session");
        assert_eq!(code, ExitCode::SUCCESS);
        assert_eq!(agent.join().unwrap().expect("the agent"), (true, true));
        let seen = seen.borrow();
        assert_eq!(seen.messages, ["Started", "Detached"], "{seen:?}");
        // Starting until `Started` came (it may come before the first
        // turn), then profiling; the `Detached` answering the detach ends
        // the session within the turn that reads it.
        let phases: Vec<Phase> = seen
            .phases
            .iter()
            .copied()
            .filter(|&p| p != Phase::Starting)
            .collect();
        assert_eq!(phases, [Phase::Profiling], "{seen:?}");
        assert_eq!(seen.end.as_deref(), Some("Detached"));
        assert_eq!(seen.outcome_phase, Some(Phase::Detaching));
        assert_eq!(seen.instrumented, 7);
        assert!(seen.final_counts);
        // Every turn polls, and the end polls once more.
        assert!(seen.polls >= 3, "{seen:?}");
    }
}
