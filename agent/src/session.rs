//! The session: connect to the CLI, wait for `Start`, instrument, run the
//! control loop on the `sprig-control` thread, and detach on every path
//! (CLI request, CLI gone, ring abandoned, VM death) in bounded time.
//!
//! # What the CLI sees
//!
//! The agent option string is wire's `AgentOptions` (`dir=<session dir>,
//! token=<32 hex>,cli=<pid>`); the ring is `<dir>/ring`, the socket
//! `<dir>/control.sock`. One session runs per JVM, whichever copy of the
//! agent library runs it (`probe_class::claim_jvm`); loading the agent
//! while a session runs returns 0 and refuses the new session over its
//! socket: `Error` naming the sprig that runs the session (pid and user)
//! and `Detached` answer its `Start`. The codes of an attach that fails are
//! in `AgentError::code`.
//!
//! 1. Handshake (wire's `connect`): `AgentHello` → `CliHello`.
//! 2. Before `Start` the agent answers `StatusRequest` and
//!    `BytecodeDigest`; `Detach` ends the session at once (`Detached`).
//! 3. `Start(SessionOptions)`: bad patterns, no roots (unless only a
//!    calibration is asked: `sprig calibrate`, or stack samples), stack
//!    options out of range or an unmappable ring give `Error` then
//!    `Detached`. Otherwise `Started{clock, ticks_per_sec}`
//!    (the ring's), then `Calibration` (or a `Warning` if it failed) when
//!    asked (a calibration-only session then ends with `Detached`), then
//!    for every root method found a
//!    `Method{id,..}` before any event with that id, then per pattern
//!    `RootInstrumented{pattern, methods}` (probes live) or
//!    `RootNotFound{pattern, class_loaded, suggestions}` (still armed: a
//!    class loading later sends `Method`s and `RootInstrumented`).
//!    `ClassFailed` for a class that could not be instrumented.
//!    With `stacks` set, the stack sampler starts too (`sources::stacks`):
//!    `SampledThread` and `FrameMethod` before the `StackSamples` round that
//!    first needs them. With `stacks` set and no root the session samples
//!    only: no ring is mapped (`Started` names the monotonic clock), no
//!    class is redefined, the probes do not start. With `threads` set the
//!    thread snapshots are taken as their source starts
//!    (`sources::threads`): `ThreadDump` messages; with `threads` alone
//!    (no root, no stacks, no calibration) no ring is mapped, no class is
//!    redefined, and the session ends after them (`Detached`).
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
//!    is exiting")` and the socket closes with the process. A panic on the
//!    control thread ends the session with the same teardown (`Warning`,
//!    then `Detached`).

use crate::allocs;
use crate::calibrate;
use crate::env::{self, Agent};
use crate::error::{AgentError, inject_fault, step};
use crate::ffi::{ClassFile, Event, JavaVm, Jni, Jvmti, JvmtiError, Local, MonitorEvent};
use crate::instrument;
use crate::ledger;
use crate::methods;
use crate::outbox;
use crate::probe;
use crate::probe_class;
use crate::reveal;
use crate::sources::cpu_timer::CpuTimer;
use crate::sources::edges::Edges;
use crate::sources::live::LiveObjects;
use crate::sources::locks::Locks;
use crate::sources::probes::Probes;
use crate::sources::sampled_alloc::SampledAllocs;
use crate::sources::stacks::Stacks;
use crate::sources::threads::Threads;
use crate::sources::{self, Running};
use crate::threads;
use sprig_rewriter::pattern::MethodPattern;
use sprig_wire::control::{AgentStats, JvmInfo, SessionOptions, Timing};
use sprig_wire::session::{Channel, connect};
use sprig_wire::{AgentOptions, Message};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long the agent waits for the CLI's socket handshake.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the agent waits for `Start` after the handshake.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest a send may block on a CLI that does not read.
const WRITE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long VMDeath waits for a flush the control thread has under way.
const VM_DEATH_FLUSH_BOUND: Duration = Duration::from_millis(500);
/// Control loop tick.
const TICK: Duration = Duration::from_millis(200);
const STATUS_EVERY: Duration = Duration::from_secs(1);
/// The cost tail's warm-up (at most half the tail): silent root calls
/// are not timed while the JIT recompiles what the switch deoptimised.
const TAIL_WARMUP: Duration = Duration::from_millis(100);
/// How often the cost tail looks whether it has its root calls.
const TAIL_STEP: Duration = Duration::from_millis(2);
/// Time the probe calibration may take at the start of a session.
const CALIBRATION_BUDGET: Duration = Duration::from_millis(200);
/// A session is running in this JVM (at most one at a time).
static BUSY: AtomicBool = AtomicBool::new(false);
/// The running session started with the JVM (`sprig run`, at VMInit,
/// before `main`), not attached to a running one.
static STARTED_WITH_JVM: AtomicBool = AtomicBool::new(false);
/// The VM is dying: the control loop stops at once.
static VM_DEAD: AtomicBool = AtomicBool::new(false);
/// A session's per-session state has begun and its teardown has not run.
static LIVE: AtomicBool = AtomicBool::new(false);
/// The sources the session started (`sources`), stopped by the teardown.
static SOURCES: Mutex<Running> = Mutex::new(Running::new());
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
        crate::sources::cpu_timer::on_class_prepare(jvmti, class);
        probe::charged_out(|| reveal::on_class_prepare(jvmti, jni, class))
    }
    fn vm_init(jni: Jni<'_>) {
        on_vm_init(jni)
    }
    fn vm_death(jni: Option<Jni<'_>>) {
        on_vm_death(jni)
    }
    fn monitor(jvmti: &Jvmti, jni: Jni<'_>, object: Local<'_>, event: MonitorEvent) {
        sources::locks::on_monitor(jvmti, jni, object, event)
    }
    fn gc(start: bool) {
        sources::locks::on_gc(start);
        if !start {
            sources::live::on_gc_finish();
        }
    }
    fn thread(start: bool, java: Option<(&Jvmti, Jni<'_>, Local<'_>)>) {
        crate::sources::cpu_timer::on_thread(start, java)
    }
    fn sampled_alloc(jvmti: &Jvmti, jni: Jni<'_>, object: Local<'_>, class: Local<'_>, size: u64) {
        sources::sampled_alloc::on_sample(jvmti, jni, object, class, size)
    }
    fn object_free(tag: u64) {
        sources::live::on_free(tag)
    }
}

/// The sprig of `cli_pid` (its effective user id from /proc, `u32::MAX`
/// when unreadable): the process the control socket is checked against.
fn owner_of(cli_pid: u32) -> probe_class::Owner {
    let uid = std::fs::read_to_string(format!("/proc/{cli_pid}/status"))
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("Uid:"))?;
            line.split_whitespace().nth(2)?.parse::<u32>().ok()
        })
        .unwrap_or(u32::MAX);
    probe_class::Owner { pid: cli_pid, uid }
}

/// Claims the JVM for a session of `me`: this copy of the agent first
/// (`BUSY`), then the JVM, whichever copy of the agent asks
/// (`probe_class::claim_jvm`), before anything binds the probe natives.
fn claim(jni: Jni<'_>, me: probe_class::Owner) -> Result<(), AgentError> {
    if BUSY
        .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return Err(AgentError::Busy {
            owner: probe_class::jvm_owner(jni)
                .map_or_else(|| "started by this agent".to_string(), |o| o.describe()),
        });
    }
    probe_class::claim_jvm(jni, me).inspect_err(|_| BUSY.store(false, Ordering::Release))
}

/// Gives the JVM back: its session, then this copy's.
fn release(jni: Jni<'_>, me: probe_class::Owner) {
    probe_class::release_jvm(jni, me);
    BUSY.store(false, Ordering::Release);
}

fn parse_options(options: Option<&str>) -> Result<AgentOptions, AgentError> {
    let text = options
        .filter(|s| !s.is_empty())
        .ok_or(AgentError::NoOptions)?;
    Ok(AgentOptions::parse(text)?)
}

/// `Agent_OnAttach`: parse, claim the JVM, bind the probe class, start the
/// control thread, return. A JVM whose session runs already (this copy's
/// or another's) is refused over the control socket, where the refusal
/// can name the session that runs.
pub fn on_attach(vm: JavaVm, options: Option<&str>) -> Result<(), AgentError> {
    let opts = parse_options(options)?;
    let agent = env::init::<Events>(vm)?;
    let jni = vm.current_jni().ok_or(AgentError::NotAttached)?;
    let me = owner_of(opts.cli_pid);
    match claim(jni, me) {
        Ok(()) => STARTED_WITH_JVM.store(false, Ordering::Release),
        Err(AgentError::Busy { owner }) => return spawn_refusal(agent, opts, owner),
        Err(e) => return Err(e),
    }
    let result = (|| {
        if probe_class::ensure::<probe::Natives>(jni)? {
            ledger::expect_whole_deoptimization(probe_class::vm_major());
        }
        spawn_control(agent, me, move |jni| begin(agent, jni, opts))
    })();
    if result.is_err() {
        release(jni, me);
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
    let me = owner_of(opts.cli_pid);
    if let Err(e) = claim(jni, me) {
        eprintln!("sprig agent: {e}");
        return;
    }
    STARTED_WITH_JVM.store(true, Ordering::Release);
    let started = probe_class::ensure::<probe::Natives>(jni).map(|_| begin(agent, jni, opts));
    match started {
        Ok(Some(session)) => {
            if let Err(e) = spawn_control(agent, me, move |_| Some(session)) {
                eprintln!("sprig agent: {e}");
                release(jni, me);
            }
        }
        Ok(None) => release(jni, me),
        Err(e) => {
            eprintln!("sprig agent: {e}");
            release(jni, me);
        }
    }
}

/// VMDeath: tell the CLI and stop the control loop.
pub fn on_vm_death(jni: Option<Jni<'_>>) {
    VM_DEAD.store(true, Ordering::Release);
    if BUSY.load(Ordering::Acquire) {
        // The session's teardown runs on the control thread, which the
        // process may end before it gets there: what the sampled source
        // keeps until the end goes now (bounded), and with the flush.
        if let (Some(agent), Some(jni)) = (env::get(), jni) {
            crate::sources::sampled_alloc::at_vm_death(agent, jni);
        }
        // Bounded: the JVM thread that delivers VMDeath waits at most this
        // long for the control thread's flush in progress.
        outbox::flush_within(VM_DEATH_FLUSH_BOUND);
        outbox::send(Message::Warning("the target JVM is exiting".into()));
    }
}

/// Starts a thread named `name`, attached to the VM as a daemon, that runs
/// `body`; a panic in `body` is caught and `after_panic` runs (still
/// attached). `unattached` runs instead when the thread cannot attach.
fn spawn_attached(
    agent: &'static Agent,
    name: &'static str,
    body: impl FnOnce(Jni<'_>) + Send + 'static,
    after_panic: impl FnOnce(Jni<'_>) + Send + 'static,
    unattached: impl FnOnce() + Send + 'static,
) -> Result<(), AgentError> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let attached = match agent.vm.attach_daemon(name) {
                Ok(a) => a,
                Err(e) => {
                    eprintln!("sprig agent: {e}");
                    unattached();
                    return;
                }
            };
            let jni = attached.jni();
            if catch_unwind(AssertUnwindSafe(|| body(jni))).is_err() {
                eprintln!("sprig agent: {}", AgentError::Panic);
                let _ = catch_unwind(AssertUnwindSafe(|| after_panic(jni)));
            }
        })
        .map(|_| ())
        .map_err(AgentError::Thread)
}

/// Starts the `sprig-control` thread: runs `start` (which returns the
/// started session or `None`), then the control loop and the detach. A
/// panic on the thread ends the session with the same teardown as every
/// other end. The JVM is released (`me`) on every path.
fn spawn_control(
    agent: &'static Agent,
    me: probe_class::Owner,
    start: impl FnOnce(Jni<'_>) -> Option<Session> + Send + 'static,
) -> Result<(), AgentError> {
    spawn_attached(
        agent,
        "sprig-control",
        move |jni| {
            if let Some(session) = start(jni) {
                session.run(agent, jni);
            }
            release(jni, me);
        },
        move |jni| {
            end_after_panic(agent, jni);
            release(jni, me);
        },
        // Nothing began; without a JNI environment only this copy's claim
        // can be given back (the JVM's stays with `me`).
        || BUSY.store(false, Ordering::Release),
    )
}

/// Refuses a session while another runs (`owner` names it): a thread
/// connects to the CLI, answers it as `begin` does until `Start`, then
/// sends the `Error` and `Detached`. It binds nothing and claims nothing.
fn spawn_refusal(
    agent: &'static Agent,
    opts: AgentOptions,
    owner: String,
) -> Result<(), AgentError> {
    let why = AgentError::Busy { owner }.to_string();
    let refused = why.clone();
    spawn_attached(
        agent,
        "sprig-refusal",
        move |jni| {
            if let Some((ch, _)) = await_start(agent, jni, &opts) {
                refuse(ch, why);
            }
        },
        |_| {},
        || {},
    )
    .map_err(|_| AgentError::Busy { owner: refused })
}

/// A panic ended the control thread: if a session had begun, its end runs
/// now (the same teardown as every other end), then the CLI is told.
fn end_after_panic(agent: &'static Agent, jni: Jni<'_>) {
    if LIVE.load(Ordering::Acquire) {
        let stats = teardown(agent, jni, &End::Panic);
        outbox::send(Message::Warning(
            "internal error (panic) on the agent's control thread: the session ended and every \
             class was restored"
                .into(),
        ));
        outbox::send(Message::Detached(stats));
    }
    outbox::end_session();
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
    /// The session has a ring (a sample-only session has none).
    ring: bool,
    /// Calibrate again at a requested detach (private directory, clock and
    /// its ticks per second): a second measurement, seconds or minutes after
    /// the first, which the CLI takes when it is the faster (see
    /// `calibrate_again`).
    recalibrate: Option<(sprig_wire::ClockKind, u64)>,
    /// The cost tail at a requested detach, in ms (0: none; see
    /// `cost_tail`).
    cost_tail_ms: u32,
    /// The session samples stacks only and may take `EdgeProbes` once
    /// (`sprig sample --edges`); false once it did.
    edges_allowed: bool,
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
    /// The control thread panicked.
    Panic,
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

/// Connects and waits for `Start`, answering what the CLI may ask before
/// it; `None` when the session ended first (told to the CLI or on stderr).
fn await_start(
    agent: &'static Agent,
    jni: Jni<'_>,
    opts: &AgentOptions,
) -> Option<(Channel, SessionOptions)> {
    let mut ch = match connect(opts, jvm_info(agent), CONNECT_TIMEOUT) {
        Ok(ch) => ch,
        Err(e) => {
            eprintln!("sprig agent: cannot reach sprig: {e}");
            return None;
        }
    };
    let _ = ch.set_write_timeout(Some(WRITE_TIMEOUT));
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            refuse(ch, "no Start from sprig in time".into());
            return None;
        }
        match ch.recv_timeout(left.min(TICK)) {
            Ok(Some(Message::Start(o))) => return Some((ch, o)),
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
    }
}

/// Connects, waits for `Start`, maps the ring and instruments the roots.
fn begin(agent: &'static Agent, jni: Jni<'_>, opts: AgentOptions) -> Option<Session> {
    VM_DEAD.store(false, Ordering::Release);
    let (mut ch, session_opts) = await_start(agent, jni, &opts)?;
    // The ring came as a sealed memfd with the `Start` frame.
    let ring = ch.take_fd();
    start_profiling(agent, jni, ch, ring, session_opts)
}

/// Starts `source` and keeps it in the session's list (see
/// `sources::Running::start`).
fn start_source(
    agent: &'static Agent,
    jni: Jni<'_>,
    source: Box<dyn sources::Source>,
) -> Result<(), String> {
    crate::sync::lock(&SOURCES).start(agent, jni, source)
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
    // No root and stacks asked: `sprig sample`, a session that only samples
    // stacks; no class is redefined.
    let sample_only = so.roots.is_empty() && !so.calibrate && so.stacks.is_some();
    // No root, no stacks and thread snapshots asked: `sprig threads`, a
    // session that takes its snapshots and ends; no class is redefined.
    let threads_only =
        so.roots.is_empty() && !so.calibrate && so.stacks.is_none() && so.threads.is_some();
    if so.roots.is_empty() && !calibrate_only && !sample_only && !threads_only {
        return refuse(ch, "no root pattern given".into());
    }
    if so.windows.is_some() && (so.stacks.is_none() || so.roots.is_empty()) {
        return refuse(
            ch,
            "windows timing needs roots and the stack sampler (stacks)".into(),
        );
    }
    let stacks = match so.stacks.map(|s| Stacks::new(s, so.windows)).transpose() {
        Ok(s) => s,
        Err(e) => return refuse(ch, e),
    };
    let snapshots = match so.threads.map(Threads::new).transpose() {
        Ok(s) => s,
        Err(e) => return refuse(ch, e),
    };
    let patterns = match so
        .roots
        .iter()
        .map(|r| MethodPattern::parse(r))
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(p) => p,
        Err(e) => return refuse(ch, e.to_string()),
    };
    // The ring carries the probes' events and the calibration's; a session
    // whose sources need none goes without it.
    let needs_ring = so.calibrate
        || (!patterns.is_empty() && Probes::NEEDS.ring)
        || (stacks.is_some() && Stacks::NEEDS.ring)
        || (snapshots.is_some() && Threads::NEEDS.ring);
    let region = match ring {
        Some(ring) if needs_ring => match probe::map_ring(ring) {
            Ok(r) => Some(r),
            Err(e) => return refuse(ch, format!("cannot map the event ring: {e}")),
        },
        Some(_) => None,
        None if needs_ring => {
            return refuse(ch, "no event ring came with the Start message".into());
        }
        None => None,
    };
    // Without a ring, times are CLOCK_MONOTONIC ns (the stack samples').
    let (clock, ticks_per_sec) = region
        .as_ref()
        .map_or((sprig_wire::ClockKind::Monotonic, 1_000_000_000), |r| {
            (r.clock(), r.ticks_per_sec())
        });
    let writer = match ch.try_clone() {
        Ok(w) => w,
        Err(e) => return refuse(ch, format!("control socket: {e}")),
    };
    let _ = ch.send(&Message::Started {
        clock,
        ticks_per_sec,
    });
    // Per-session state begins in this order (and ends in `detach`):
    // outbox, the frame dictionary, methods, probe_class, threads, reveal
    // (with revelation on),
    // probe, then frames, ledger and instrument (not in a calibration-only
    // session).
    outbox::begin_session(writer);
    sources::stacks::begin_frames();
    methods::begin_session();
    allocs::begin_session(so.alloc && probe_class::allocs_available());
    if so.alloc && !probe_class::allocs_available() {
        outbox::send(Message::Warning(
            "--alloc: allocation probes are not available in this JVM (the probe class an \
             older sprig defined has none); no allocations are recorded"
                .into(),
        ));
    }
    probe_class::begin_session(jni, reveal::sites_handed(), allocs::on());
    threads::begin_session();
    if !so.roots_only
        && !calibrate_only
        && !sample_only
        && !threads_only
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
        && !sample_only
        && !threads_only
        && !reveal::receivers_on()
    {
        outbox::send(Message::Warning(
            "--virtual-calls receiver: receiver checks are not available in this JVM (the \
             probe class an older sprig defined has none, or their memory could not be \
             allocated); calls are revealed by class hierarchy analysis"
                .into(),
        ));
    }
    // From here on every end of the session, a panic included, runs the
    // teardown.
    LIVE.store(true, Ordering::Release);
    let ring = region.is_some();
    if let Some(region) = region {
        probe::begin_session(
            jni,
            region,
            so.wait_bound_ms,
            so.timing,
            so.windows.is_some(),
        );
    }
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
        ring,
        recalibrate: (so.calibrate && !calibrate_only).then_some((clock, ticks_per_sec)),
        cost_tail_ms: if calibrate_only || so.roots.is_empty() {
            0
        } else {
            so.cost_tail_ms
        },
        edges_allowed: sample_only,
    };
    if calibrate_only {
        session.detach(agent, jni, End::Requested);
        return None;
    }
    // `--locks` where `Thread.sleep(long)` is native: the probes' classes
    // call `Waits.sleep` instead, from their first rewrite on.
    sources::locks::prepare(agent, jni, so.locks && !sample_only);
    // The probes: the roots' classes rewritten, put back at the end.
    if !sample_only
        && !threads_only
        && let Err(e) = start_source(agent, jni, Box::new(Probes::new(patterns)))
    {
        outbox::send(Message::Error(e));
        session.detach(agent, jni, End::Failed);
        return None;
    }
    // The waits of `--locks`, once the probes run.
    if so.locks
        && !sample_only
        && let Err(e) = start_source(agent, jni, Box::new(Locks))
    {
        outbox::send(Message::Error(e));
        session.detach(agent, jni, End::Failed);
        return None;
    }
    // Sampled allocations, once the probes run: without the capability,
    // one line and exact allocations only.
    if so.alloc_interval > 0 && !sample_only {
        start_sampled_allocs(agent, jni, so.alloc_interval, so.alloc_live);
    }
    // The stack sampler, with the probes or alone: the CPU-time timer
    // when asked for and usable, the JVMTI sampler otherwise.
    if let Some(stacks) = stacks
        && let Err(e) = start_stacks(agent, jni, stacks, so.stacks)
    {
        outbox::send(Message::Error(e));
        session.detach(agent, jni, End::Failed);
        return None;
    }
    // The thread snapshots, taken as the source starts.
    if let Some(snapshots) = snapshots
        && let Err(e) = start_source(agent, jni, Box::new(snapshots))
    {
        outbox::send(Message::Error(e));
        session.detach(agent, jni, End::Failed);
        return None;
    }
    if threads_only {
        session.detach(agent, jni, End::Requested);
        return None;
    }
    Some(session)
}

/// Starts the sampled allocations of `--alloc-interval`; when they cannot
/// run (the capability held by another environment), says so in one
/// line and goes on without them.
fn start_sampled_allocs(agent: &'static Agent, jni: Jni<'_>, interval: u32, live: bool) {
    // Live objects first, so that the first sample is tagged; without its
    // capabilities, one line and samples only.
    if live {
        start_live_objects(agent, jni);
    }
    let at_start = STARTED_WITH_JVM.load(Ordering::Acquire);
    let source = Box::new(SampledAllocs::new(interval, at_start));
    let Err(e) = start_source(agent, jni, source) else {
        return;
    };
    // A source whose check failed was never kept; one whose start failed
    // is stopped at once.
    let mut running = crate::sync::lock(&SOURCES);
    if running.last_name() == Some(SampledAllocs::NAME) {
        let mut ending = sources::Ending::default();
        running.stop_last(agent, jni, &mut ending).release(agent);
    }
    drop(running);
    outbox::send(Message::Warning(SampledAllocs::unavailable(&e)));
}

/// Starts the live objects of `--alloc=live`; when they cannot run (a
/// capability this JVM does not grant), says so in one line and goes on
/// without them.
fn start_live_objects(agent: &'static Agent, jni: Jni<'_>) {
    let Err(e) = start_source(agent, jni, Box::new(LiveObjects)) else {
        return;
    };
    let mut running = crate::sync::lock(&SOURCES);
    if running.last_name() == Some(LiveObjects::NAME) {
        let mut ending = sources::Ending::default();
        running.stop_last(agent, jni, &mut ending).release(agent);
    }
    drop(running);
    outbox::send(Message::Warning(LiveObjects::unavailable(&e)));
}

/// Starts the stack source `opts` asks for: the CPU-time timer
/// (`StackSource::Timer`) when this JVM and process allow it, else the
/// JVMTI sampler `stacks`, with one line that says why. Each source names
/// itself to the CLI (`StackSource`) before its first sample.
fn start_stacks(
    agent: &'static Agent,
    jni: Jni<'_>,
    stacks: Stacks,
    opts: Option<sprig_wire::control::StackOptions>,
) -> Result<(), String> {
    use sprig_wire::control::StackSource;
    if let Some(o) = opts
        && o.source == StackSource::Timer
    {
        match CpuTimer::usable(o, stacks.windows()) {
            Ok(timer) => match start_source(agent, jni, Box::new(timer)) {
                Ok(()) => return Ok(()),
                Err(e) => {
                    // Stopped at once: the JVMTI sampler takes over.
                    // (A source whose check failed was never kept.)
                    let mut running = crate::sync::lock(&SOURCES);
                    if running.last_name() == Some("cpu-timer") {
                        let mut ending = sources::Ending::default();
                        running.stop_last(agent, jni, &mut ending).release(agent);
                    }
                    drop(running);
                    outbox::send(Message::Warning(format!(
                        "{e}; stacks are taken with JVMTI instead (safepoint-biased)"
                    )));
                }
            },
            Err(why) => {
                outbox::send(Message::Warning(format!("stack sampling: {why}")));
            }
        }
    }
    start_source(agent, jni, Box::new(stacks))
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
            inject_fault("control");
            sources::live::service(&agent.jvmti);
            outbox::flush();
            let wait = probe::settle_active(jni).map_or(TICK, |w| w.min(TICK));
            reveal::service(&agent.jvmti, jni);
            if VM_DEAD.load(Ordering::Acquire) {
                break End::VmDeath;
            }
            if self.ring && probe::ring_is_dead() {
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
                Ok(Some(Message::CountingWindowNow)) => sources::stacks::counting_window_now(),
                Ok(Some(Message::EdgeProbes {
                    classes,
                    interval_us,
                    budget,
                })) => {
                    if let Err(e) = self.start_edges(agent, jni, classes, interval_us, budget) {
                        outbox::send(Message::Warning(format!(
                            "call-edge bursts not started: {e}"
                        )));
                    }
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

    /// `EdgeProbes`: the call-edge bursts' source, once, in a session that
    /// samples stacks only (no root context opens in it: the bursts open
    /// every thread's slot of `Probe.INSIDE`).
    fn start_edges(
        &mut self,
        agent: &'static Agent,
        jni: Jni<'_>,
        classes: Vec<String>,
        interval_us: u32,
        budget: u32,
    ) -> Result<(), String> {
        if !std::mem::replace(&mut self.edges_allowed, false) {
            return Err("only once, in a session that samples stacks and has no root".into());
        }
        let source = Edges::new(classes, interval_us, budget)?;
        start_source(agent, jni, Box::new(source))
    }

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

    /// The cost tail at a requested detach, after the second calibration
    /// (whose batches open root contexts of their own): the probes inside
    /// roots go silent, and after a warm-up ([`TAIL_WARMUP`]) the roots'
    /// own probes time root calls until
    /// `COST_TAIL_CALLS` of them closed or `cost_tail_ms` passed, whichever
    /// first (also ended by VM death or a dead ring). The control thread
    /// sleeps in steps of [`TAIL_STEP`] meanwhile; no JVM thread waits on it.
    fn cost_tail(&self) {
        if self.cost_tail_ms == 0 || !self.ring {
            return;
        }
        let begin = Instant::now();
        let deadline = begin + Duration::from_millis(u64::from(self.cost_tail_ms));
        let warmed =
            begin + TAIL_WARMUP.min(Duration::from_millis(u64::from(self.cost_tail_ms) / 2));
        probe::begin_tail();
        let mut warming = true;
        while Instant::now() < deadline
            && probe::tail_closed() < sprig_wire::control::COST_TAIL_CALLS
            && !VM_DEAD.load(Ordering::Acquire)
            && !probe::ring_is_dead()
        {
            if warming && Instant::now() >= warmed {
                probe::tail_warmed();
                warming = false;
            }
            outbox::flush();
            std::thread::sleep(TAIL_STEP);
        }
        // Root entries stay silent until the probes go silent for good
        // (`probe::end_session`): no root call after the tail is counted.
    }

    /// Ends the session ([`teardown`]), sends `Detached` and closes the
    /// channel.
    fn detach(self, agent: &'static Agent, jni: Jni<'_>, end: End) {
        if matches!(end, End::Requested) {
            step("the second calibration", (), || self.calibrate_again(jni));
            step("the cost tail", (), || self.cost_tail());
        }
        let stats = teardown(agent, jni, &end);
        step("the last messages", (), || {
            match &end {
                End::RingDead => {
                    outbox::send(Message::Warning(
                        "the event ring was abandoned: profiling stopped".into(),
                    ));
                }
                End::Channel(e) => {
                    outbox::send(Message::Warning(format!("control channel failed: {e}")));
                }
                End::Requested | End::CliGone | End::VmDeath | End::Failed | End::Panic => {}
            }
            outbox::send(Message::Detached(stats));
        });
        let _ = self.ch.shutdown();
        outbox::end_session();
    }
}

/// The end of every session, however it ends (a requested detach, the CLI
/// gone, the ring dead, VM death, a panic on the control thread): every
/// probe silenced, every class restored, revelation and the probe class's
/// session state ended, the hook and class-prepare events off, the ring
/// retired and the queued messages sent. Each step runs even when one
/// before it panicked. Runs once per session; returns the final counts.
fn teardown(agent: &'static Agent, jni: Jni<'_>, end: &End) -> AgentStats {
    if !LIVE.swap(false, Ordering::AcqRel) {
        return stats(ledger::Counters::default());
    }
    let vm_death = matches!(end, End::VmDeath);
    // Per-session state ends in this order: probe (silenced), the sources
    // (the last started first: the probes' restore, under revelation's
    // quiesce, and frames), reveal, probe_class, the sources' events and
    // capabilities, the ring, outbox.
    step("probe::end_session", (), || probe::end_session(jni));
    step("allocs::end_session", (), allocs::end_session);
    // Every source the session started, the last started first.
    let mut ending = sources::Ending {
        vm_death,
        ..Default::default()
    };
    let running = std::mem::take(&mut *crate::sync::lock(&SOURCES));
    let stopped = step("the sources' stop", Default::default(), || {
        let mut running = running;
        running.stop_all(agent, jni, &mut ending)
    });
    let counters = ending.counters;
    let revelation = step("reveal::end_session", None, || {
        if let Some(w) = reveal::spared_warning() {
            outbox::send(Message::Warning(w));
        }
        let revelation = reveal::stats();
        reveal::end_session(jni);
        revelation
    });
    // The receiver classes the checks remembered: references that would
    // keep those classes (and their loaders) from unloading.
    if !vm_death {
        step("probe_class::end_session", (), || {
            probe_class::end_session(jni, reveal::sites_handed())
        });
    }
    step("the sources' events and capabilities", (), || {
        stopped.release(agent)
    });
    step("the ring's retirement", (), || {
        let _ = probe::retire_ring();
    });
    step("outbox::flush", (), outbox::flush);
    stats_with(counters, revelation)
}
