//! The session: connect to the CLI, wait for `Start`, instrument, run the
//! control loop on the `sprig-control` thread, and detach on every path
//! (CLI request, CLI gone, ring abandoned, VM death) in bounded time.
//!
//! # What the CLI sees
//!
//! The agent option string is wire's `AgentOptions` (`dir=<session dir>,
//! token=<32 hex>,cli=<pid>`); the ring is `<dir>/ring`, the socket
//! `<dir>/control.sock`. Loading the agent while a session runs fails with
//! return code 5 ("already running"); other codes are in
//! `AgentError::code`.
//!
//! 1. Handshake (wire's `connect`): `AgentHello` → `CliHello`.
//! 2. Before `Start` the agent answers `StatusRequest` and
//!    `BytecodeDigest`; `Detach` ends the session at once (`Detached`).
//! 3. `Start(SessionOptions)`: bad patterns, no roots (unless only a
//!    calibration is asked: `sprig calibrate`) or an unmappable ring give
//!    `Error` then `Detached`. Otherwise `Started{clock, ticks_per_sec}`
//!    (the ring's), then `Calibration` (or a `Warning` if it failed) when
//!    asked (a calibration-only session then ends with `Detached`), then
//!    for every root method found a
//!    `Method{id,..}` before any event with that id, then per pattern
//!    `RootInstrumented{pattern, methods}` (probes live) or
//!    `RootNotFound{pattern, class_loaded, suggestions}` (still armed: a
//!    class loading later sends `Method`s and `RootInstrumented`).
//!    `ClassFailed` for a class that could not be instrumented.
//! 4. While profiling: `Thread{index,..}` for each new thread (queued,
//!    forwarded within 200 ms), `Status` about once a second and on
//!    `StatusRequest`, `Digest` on `BytecodeDigest`. With revelation on,
//!    `Method{id,..}` for every method revealed (sent by the revealing
//!    thread before the redefinition that makes its probes live) and
//!    `ClassFailed` for revealed classes that could not be redefined.
//! 5. The end: on `Detach`, the socket closing, the ring dying (consumer
//!    gone or stalled past `wait_bound_ms`) the agent restores every class
//!    and sends `Detached(stats)` (after a `Warning` when the ring died and
//!    a `Warning` with the revelation summary when revelation was on, and
//!    a `Warning` naming the running frames the session's redefinitions
//!    left on an old method version),
//!    then closes the socket. On VM exit it sends `Warning("the target JVM
//!    is exiting")` and the socket closes with the process.

use crate::calibrate;
use crate::env::{self, Agent};
use crate::error::AgentError;
use crate::ffi::{ClassFile, Event, JavaVm, Jni, Jvmti, JvmtiError, Local};
use crate::frames;
use crate::instrument;
use crate::ledger;
use crate::methods;
use crate::outbox;
use crate::probe;
use crate::probe_class;
use crate::reveal;
use crate::threads;
use sprig_rewriter::pattern::MethodPattern;
use sprig_wire::control::{AgentStats, JvmInfo, SessionOptions, Timing};
use sprig_wire::session::{Channel, connect};
use sprig_wire::{AgentOptions, Message};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long the agent waits for the CLI's socket handshake.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the agent waits for `Start` after the handshake.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest a send may block on a CLI that does not read.
const WRITE_TIMEOUT: Duration = Duration::from_secs(2);
/// Control loop tick.
const TICK: Duration = Duration::from_millis(200);
const STATUS_EVERY: Duration = Duration::from_secs(1);
/// Time the probe calibration may take at the start of a session.
const CALIBRATION_BUDGET: Duration = Duration::from_millis(200);
/// A session is running in this JVM (at most one at a time).
static BUSY: AtomicBool = AtomicBool::new(false);
/// The VM is dying: the control loop stops at once.
static VM_DEAD: AtomicBool = AtomicBool::new(false);
/// Startup mode: options kept from Agent_OnLoad until VMInit.
static PENDING: Mutex<Option<AgentOptions>> = Mutex::new(None);

/// The agent's handlers of the JVMTI events, as `ffi` binds them.
struct Events;

impl crate::ffi::VmEvents for Events {
    /// On a thread inside a root context, the hook's time is the
    /// profiler's, not the program's (`probe::charged_out`).
    fn class_file(jni: Jni<'_>, input: &ClassFile<'_>) -> Option<Vec<u8>> {
        probe::charged_out(|| instrument::on_class_file(jni, input))
    }
    fn class_file_failed(name: Option<&str>, e: JvmtiError) {
        instrument::report_hook_failure(name, e)
    }
    /// Revelation mirrors a class now if it was loaded before the attach
    /// but not prepared then.
    fn class_prepare(jvmti: &Jvmti, jni: Jni<'_>, class: Local<'_>) {
        probe::charged_out(|| reveal::on_class_prepare(jvmti, jni, class))
    }
    fn vm_init(jni: Jni<'_>) {
        on_vm_init(jni)
    }
    fn vm_death() {
        on_vm_death()
    }
}

fn claim() -> Result<(), AgentError> {
    BUSY.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
        .map(|_| ())
        .map_err(|_| AgentError::Busy)
}

fn release() {
    BUSY.store(false, Ordering::Release);
}

fn parse_options(options: Option<&str>) -> Result<AgentOptions, AgentError> {
    let text = options
        .filter(|s| !s.is_empty())
        .ok_or(AgentError::NoOptions)?;
    Ok(AgentOptions::parse(text)?)
}

/// `Agent_OnAttach`: parse, claim the JVM, bind the probe class, start the
/// control thread, return.
pub fn on_attach(vm: JavaVm, options: Option<&str>) -> Result<(), AgentError> {
    let opts = parse_options(options)?;
    let agent = env::init::<Events>(vm)?;
    claim()?;
    let result = (|| {
        let jni = vm.current_jni().ok_or(AgentError::NotAttached)?;
        if probe_class::ensure::<probe::Natives>(jni)? {
            ledger::expect_whole_deoptimization(probe_class::vm_major());
        }
        spawn_control(agent, move |jni| begin(agent, jni, opts))
    })();
    if result.is_err() {
        release();
    }
    result
}

/// `Agent_OnLoad` (startup mode, `sprig run`): the environment now, the
/// session at VMInit.
pub fn on_load(vm: JavaVm, options: Option<&str>) -> Result<(), AgentError> {
    let opts = parse_options(options)?;
    let agent = env::init::<Events>(vm)?;
    *crate::sync::lock(&PENDING) = Some(opts);
    agent
        .jvmti
        .set_event(Event::VmInit, true)
        .map_err(AgentError::jvmti("SetEventNotificationMode(VMInit)"))
}

/// VMInit in startup mode: the session starts on this thread (so the roots
/// are armed before `main` runs), the control loop on its own thread.
pub fn on_vm_init(jni: Jni<'_>) {
    let Some(opts) = crate::sync::lock(&PENDING).take() else {
        return;
    };
    let Some(agent) = env::get() else {
        return;
    };
    let _ = agent.jvmti.set_event(Event::VmInit, false);
    if claim().is_err() {
        return;
    }
    let started = probe_class::ensure::<probe::Natives>(jni).map(|_| begin(agent, jni, opts));
    match started {
        Ok(Some(session)) => {
            if let Err(e) = spawn_control(agent, move |_| Some(session)) {
                eprintln!("sprig agent: {e}");
                release();
            }
        }
        Ok(None) => release(),
        Err(e) => {
            eprintln!("sprig agent: {e}");
            release();
        }
    }
}

/// VMDeath: tell the CLI and stop the control loop.
pub fn on_vm_death() {
    VM_DEAD.store(true, Ordering::Release);
    if BUSY.load(Ordering::Acquire) {
        outbox::flush();
        outbox::send(Message::Warning("the target JVM is exiting".into()));
    }
}

/// Starts the `sprig-control` thread: attaches it to the VM as a daemon,
/// runs `start` (which returns the started session or `None`), then the
/// control loop and the detach.
fn spawn_control(
    agent: &'static Agent,
    start: impl FnOnce(Jni<'_>) -> Option<Session> + Send + 'static,
) -> Result<(), AgentError> {
    std::thread::Builder::new()
        .name("sprig-control".into())
        .spawn(move || {
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let attached = match agent.vm.attach_daemon("sprig-control") {
                    Ok(a) => a,
                    Err(e) => {
                        eprintln!("sprig agent: {e}");
                        return;
                    }
                };
                let jni = attached.jni();
                if let Some(session) = start(jni) {
                    session.run(agent, jni);
                }
            }));
            if outcome.is_err() {
                eprintln!("sprig agent: {}", AgentError::Panic);
                outbox::close();
            }
            release();
        })
        .map(|_| ())
        .map_err(AgentError::Thread)
}

/// A started session, owned by the control thread.
fn send_calibration(f: calibrate::Figures) {
    outbox::send(Message::Calibration {
        inner_ticks: f.inner_ticks,
        outer_ticks: f.outer_ticks,
        samples: f.samples,
    });
}

pub struct Session {
    ch: Channel,
    /// Calibrate again at a requested detach (private directory, clock and
    /// its ticks per second): a second measurement, seconds or minutes after
    /// the first, which the CLI takes when it is the faster (see
    /// `calibrate_again`).
    recalibrate: Option<(sprig_wire::ClockKind, u64)>,
}

/// Why the control loop ended.
#[derive(Debug)]
enum End {
    Requested,
    CliGone,
    RingDead,
    VmDeath,
    /// Instrumentation could not start (already reported with `Error`).
    Failed,
    Channel(String),
}

fn jvm_info(agent: &Agent) -> JvmInfo {
    let prop = |k| agent.jvmti.system_property(k).unwrap_or_default();
    JvmInfo {
        pid: std::process::id(),
        version: prop("java.vm.version"),
        vm_name: prop("java.vm.name"),
        vendor: prop("java.vm.vendor"),
    }
}

fn stats(counters: ledger::Counters) -> AgentStats {
    stats_with(counters, reveal::stats())
}

fn stats_with(
    counters: ledger::Counters,
    reveal: Option<sprig_wire::control::RevealStats>,
) -> AgentStats {
    AgentStats {
        // Probed methods whose probes record (dormant ones do not).
        instrumented_methods: counters
            .methods
            .saturating_sub(reveal.as_ref().map_or(0, |r| r.dormant)),
        instrumented_classes: counters.classes,
        called_methods: methods::called_count(),
        lost_events: probe::lost_events(),
        redefinition_batches: counters.batches,
        redefinition_ns: counters.redefinition_ns,
        reveal_ns: reveal::reveal_ns(),
        failed_classes: counters.failed,
        threads: threads::count(),
        reveal,
    }
}

/// The answer to `BytecodeDigest` (restore verification).
fn digest(agent: &Agent, jni: Jni<'_>, class: String) -> Message {
    let (methods, digest) = instrument::bytecode_digest(&agent.jvmti, jni, &class);
    Message::Digest {
        class,
        methods,
        digest,
    }
}

/// Ends a session that never started profiling.
fn refuse(ch: Channel, why: String) -> Option<Session> {
    let _ = ch.send(&Message::Error(why));
    let _ = ch.send(&Message::Detached(stats(ledger::Counters::default())));
    let _ = ch.shutdown();
    None
}

/// Connects, waits for `Start`, maps the ring and instruments the roots.
fn begin(agent: &'static Agent, jni: Jni<'_>, opts: AgentOptions) -> Option<Session> {
    VM_DEAD.store(false, Ordering::Release);
    let mut ch = match connect(&opts, jvm_info(agent), CONNECT_TIMEOUT) {
        Ok(ch) => ch,
        Err(e) => {
            eprintln!("sprig agent: cannot reach sprig: {e}");
            return None;
        }
    };
    let _ = ch.set_write_timeout(Some(WRITE_TIMEOUT));
    let deadline = Instant::now() + START_TIMEOUT;
    let session_opts = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return refuse(ch, "no Start from sprig in time".into());
        }
        match ch.recv_timeout(left.min(TICK)) {
            Ok(Some(Message::Start(o))) => break o,
            Ok(Some(Message::Detach)) => {
                let _ = ch.send(&Message::Detached(stats(ledger::Counters::default())));
                let _ = ch.shutdown();
                return None;
            }
            Ok(Some(Message::StatusRequest)) => {
                let _ = ch.send(&Message::Status(stats(ledger::Counters::default())));
            }
            Ok(Some(Message::BytecodeDigest { class })) => {
                let _ = ch.send(&digest(agent, jni, class));
            }
            Ok(Some(_)) | Ok(None) => {}
            Err(e) => {
                eprintln!("sprig agent: control channel: {e}");
                return None;
            }
        }
    };
    // The ring came as a sealed memfd with the `Start` frame.
    let ring = ch.take_fd();
    start_profiling(agent, jni, ch, ring, session_opts)
}

fn start_profiling(
    agent: &'static Agent,
    jni: Jni<'_>,
    ch: Channel,
    ring: Option<std::os::fd::OwnedFd>,
    so: SessionOptions,
) -> Option<Session> {
    // No root and calibration asked: `sprig calibrate`, a session that only
    // measures the probes and detaches.
    let calibrate_only = so.roots.is_empty() && so.calibrate;
    if so.roots.is_empty() && !calibrate_only {
        return refuse(ch, "no root pattern given".into());
    }
    let patterns = match so
        .roots
        .iter()
        .map(|r| MethodPattern::parse(r))
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(p) => p,
        Err(e) => return refuse(ch, e.to_string()),
    };
    let Some(ring) = ring else {
        return refuse(ch, "no event ring came with the Start message".into());
    };
    let region = match probe::map_ring(ring) {
        Ok(r) => r,
        Err(e) => return refuse(ch, format!("cannot map the event ring: {e}")),
    };
    let writer = match ch.try_clone() {
        Ok(w) => w,
        Err(e) => return refuse(ch, format!("control socket: {e}")),
    };
    let _ = ch.send(&Message::Started {
        clock: region.clock(),
        ticks_per_sec: region.ticks_per_sec(),
    });
    // Per-session state begins in this order (and ends in `detach`):
    // outbox, methods, probe_class, threads, reveal (with revelation on),
    // probe, then frames, ledger and instrument (not in a calibration-only
    // session).
    outbox::begin_session(writer);
    methods::begin_session();
    probe_class::begin_session(jni, reveal::sites_handed());
    threads::begin_session();
    if !so.roots_only
        && !calibrate_only
        && let Err(e) = reveal::begin_session(
            so.scheme,
            &so.include,
            &so.exclude,
            !so.no_dormant,
            so.skip_trivial,
            so.receivers
                && probe_class::receivers_available()
                && probe_class::ensure_receivers(jni),
        )
    {
        outbox::close();
        return refuse(ch, e);
    }
    if so.receivers
        && so.scheme == sprig_wire::control::Scheme::Lazy
        && !so.roots_only
        && !calibrate_only
        && !reveal::receivers_on()
    {
        outbox::send(Message::Warning(
            "--virtual-calls receiver: receiver checks are not available in this JVM (the \
             probe class an older sprig defined has none, or their memory could not be \
             allocated); calls are revealed by class hierarchy analysis"
                .into(),
        ));
    }
    let (clock, ticks_per_sec) = (region.clock(), region.ticks_per_sec());
    probe::begin_session(jni, region, so.wait_bound_ms, so.timing);
    if so.calibrate {
        // Before any root is instrumented: no user event can interleave.
        match calibrate::run(jni, clock, ticks_per_sec, CALIBRATION_BUDGET) {
            Ok(f) => {
                send_calibration(f);
                // The calibration class is defined now: the probe class
                // may call it for the threads' own bursts.
                // No bursts under sampled timing: nothing is subtracted.
                if !calibrate_only
                    && so.timing == Timing::Exact
                    && f.bursts
                    && probe_class::bursts_available()
                {
                    if !probe::has_burst_class()
                        && let Some(c) = calibrate::class_ref(jni)
                    {
                        probe::set_burst_class(c);
                    }
                    probe::set_burst_every(
                        u64::from(so.recalibrate_ms).saturating_mul(ticks_per_sec / 1000),
                    );
                }
            }
            Err(e) => {
                outbox::send(Message::Warning(format!(
                    "probe calibration failed ({e}): times include the probes' cost"
                )));
            }
        }
    }
    let session = Session {
        ch,
        recalibrate: (so.calibrate && !calibrate_only).then_some((clock, ticks_per_sec)),
    };
    if calibrate_only {
        session.detach(agent, jni, End::Requested);
        return None;
    }
    // Before any class is redefined: what runs now.
    frames::begin_session(&agent.jvmti, jni);
    reveal::spare_loops(frames::running_loops());
    ledger::begin_session(patterns);
    if let Err(e) = instrument::begin_session(&agent.jvmti) {
        outbox::send(Message::Error(format!(
            "cannot enable the class file load hook: {e}"
        )));
        session.detach(agent, jni, End::Failed);
        return None;
    }
    let report = instrument::instrument_loaded(&agent.jvmti, jni);
    for (pattern, methods) in report.instrumented {
        outbox::send(Message::RootInstrumented { pattern, methods });
    }
    for pattern in report.failed {
        outbox::send(Message::Warning(format!(
            "root {pattern}: no matching class could be instrumented (see the class failures); \
             it stays armed for classes loaded later"
        )));
    }
    for (pattern, class_loaded, suggestions) in report.not_found {
        outbox::send(Message::RootNotFound {
            pattern,
            class_loaded,
            suggestions,
        });
    }
    Some(session)
}

impl Session {
    fn status(&self) -> AgentStats {
        stats(ledger::counters())
    }

    /// The control loop: forwards queued messages, answers requests, sends
    /// `Status` about once a second, and detaches when the session ends.
    fn run(mut self, agent: &'static Agent, jni: Jni<'_>) {
        let mut last_status = Instant::now();
        let end = loop {
            outbox::flush();
            let wait = probe::settle_active(jni).map_or(TICK, |w| w.min(TICK));
            reveal::service(&agent.jvmti, jni);
            if VM_DEAD.load(Ordering::Acquire) {
                break End::VmDeath;
            }
            if probe::ring_is_dead() {
                break End::RingDead;
            }
            match self.ch.recv_timeout(wait) {
                Ok(Some(Message::Detach)) => break End::Requested,
                Ok(Some(Message::StatusRequest)) => {
                    outbox::send(Message::Status(self.status()));
                    last_status = Instant::now();
                }
                Ok(Some(Message::BytecodeDigest { class })) => {
                    outbox::send(digest(agent, jni, class));
                }
                Ok(Some(_)) | Ok(None) => {}
                Err(e) if e.is_closed() => break End::CliGone,
                Err(e) => break End::Channel(e.to_string()),
            }
            if last_status.elapsed() >= STATUS_EVERY {
                outbox::send(Message::Status(self.status()));
                last_status = Instant::now();
            }
        };
        self.detach(agent, jni, end);
    }

    /// Silences the probes, restores every class, retires the ring, sends
    /// `Detached` and closes the channel.
    /// A second calibration at a requested detach, while the probes still
    /// run. The host can slow this machine kind's cores by half for a
    /// second or more (the calibration windows of one attach then all sit
    /// at ~38 ns a pair instead of ~22 ns), and one calibration cannot tell;
    /// a disturbance only ever slows a calibration, so the CLI keeps the
    /// faster of the two.
    fn calibrate_again(&self, jni: Jni<'_>) {
        // The calibration's batches open root contexts: no bursts in them.
        probe::set_burst_every(0);
        if let Some((clock, ticks_per_sec)) = self.recalibrate
            && let Ok(f) = calibrate::run(jni, clock, ticks_per_sec, CALIBRATION_BUDGET)
        {
            send_calibration(f);
        }
    }

    fn detach(self, agent: &'static Agent, jni: Jni<'_>, end: End) {
        if matches!(end, End::Requested) {
            self.calibrate_again(jni);
        }
        // Per-session state ends in this order: probe (silenced), the
        // restore (ledger, under revelation's quiesce), frames, reveal,
        // probe_class, the ring, outbox.
        probe::end_session(jni);
        let on_virtual = probe_class::virtual_roots(jni);
        if on_virtual > 0 {
            outbox::send(Message::Warning(format!(
                "{on_virtual} root call{} ran on virtual threads and {} not profiled: sprig keeps \
                 a thread's probe state with the carrier thread, and a virtual thread that \
                 blocks inside the root can go on on another carrier",
                if on_virtual == 1 { "" } else { "s" },
                if on_virtual == 1 { "was" } else { "were" },
            )));
        }
        let serial = reveal::quiesce();
        let (counters, redefined) = if matches!(end, End::VmDeath) {
            (ledger::counters(), Default::default())
        } else {
            instrument::restore_all(&agent.jvmti, jni)
        };
        drop(serial);
        // Frames the redefinitions left on old method versions.
        if !redefined.is_empty() {
            let stale = frames::left_on_old_versions(&agent.jvmti, jni, &redefined);
            if let Some(w) = frames::warning(&stale) {
                outbox::send(Message::Warning(w));
            }
        }
        frames::end_session();
        if let Some(w) = reveal::spared_warning() {
            outbox::send(Message::Warning(w));
        }
        let revelation = reveal::stats();
        reveal::end_session(jni);
        // The receiver classes the checks remembered: references that
        // would keep those classes (and their loaders) from unloading.
        if !matches!(end, End::VmDeath) {
            probe_class::end_session(jni, reveal::sites_handed());
        }
        let _ = agent.jvmti.set_event(Event::ClassFileLoadHook, false);
        let _ = agent.jvmti.set_event(Event::ClassPrepare, false);
        let _ = probe::retire_ring();
        outbox::flush();
        match &end {
            End::RingDead => {
                outbox::send(Message::Warning(
                    "the event ring was abandoned: profiling stopped".into(),
                ));
            }
            End::Channel(e) => {
                outbox::send(Message::Warning(format!("control channel failed: {e}")));
            }
            End::Requested | End::CliGone | End::VmDeath | End::Failed => {}
        }
        outbox::send(Message::Detached(stats_with(counters, revelation)));
        let _ = self.ch.shutdown();
        outbox::end_session();
    }
}
