//! The stack sampler: a thread of its own, `sprig-stacks`, attached to
//! the JVM as a daemon, that every `interval_us` takes the stack of every
//! live Java thread with one JVMTI GetAllStackTraces (the threads are
//! walked at one safepoint), at most `max_depth` frames each, and sends
//! them as one `StackSamples` message.
//!
//! The source uses two dictionaries: the session's method -> frame id
//! ([`frame_ids`], shared with the other sources that name frames; a new
//! id goes to the CLI as `FrameMethod` before the first sample that
//! carries it) and its own
//! Java thread id -> what the sampler knows of the thread (a new thread
//! goes as `SampledThread` before its first sample; sprig's own threads,
//! named `sprig-*`, are never sampled). A thread's `cpu_ns` is the CPU
//! time it used since its previous sample (JVMTI GetThreadCpuTime, hence
//! the `can_get_thread_cpu_time` capability this source takes while it
//! runs); a round's `cost_ns` is the wall time the round took the sampler
//! thread, the safepoint it waits for included.
//!
//! The sampler sends through `outbox::send` (it is no application thread;
//! a send is bounded by the socket's write timeout), and nothing once the
//! session has stopped it. Every local reference
//! a round makes is deleted, every JVMTI buffer deallocated (in `ffi`). A
//! thread that ends between the listing and a later call of the round is
//! normal: its CPU time is then unknown (`u64::MAX`).
//!
//! With windows timing (`SessionOptions::windows`) the sampler also keeps
//! the schedule: it switches the probes between counting and silent
//! windows (`probe::set_silent`; a counting window ends early once
//! `counting_calls` root contexts opened in it, checked every interval), samples only in silent windows, and
//! sends only the stacks of threads that were inside a silent root
//! context before and after the round's walk
//! (`probe::inside_before_and_after`): no sample is taken of a thread
//! whose probes record. The first round of a silent window waits an
//! interval, so no root call entered as the window switched is still
//! counting. A source that sends the same messages applies the same test
//! to each thread it samples.

use super::{Ending, Needs, Source};
use crate::env::Agent;
use crate::ffi::{Capabilities, FieldId, Jni, Jvmti, JvmtiError, MethodId, thread_state};
use crate::outbox;
use crate::probe;
use sprig_wire::Message;
use sprig_wire::clock;
use sprig_wire::control::{
    SampledState, Silence, StackOptions, StackSample, WindowOptions, WindowSwitches,
};
use std::collections::{HashMap, HashSet};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The sampler thread's name (`sprig-*` threads are never sampled).
pub const THREAD_NAME: &str = "sprig-stacks";
/// Deepest stack the sampler takes.
pub const MAX_DEPTH: u32 = 2048;
/// Longest the sampler may wait between two rounds (one minute).
pub const MAX_INTERVAL_US: u32 = 60_000_000;
/// How long the sampler thread has to start, and to end at a stop.
pub(super) const BOUND: Duration = Duration::from_secs(2);
/// JVMTI_ERROR_WRONG_PHASE: the VM is dying.
const WRONG_PHASE: JvmtiError = JvmtiError(112);

/// The stop flag and the condition the sampler waits on between rounds.
pub(super) type StopFlag = Arc<(Mutex<bool>, Condvar)>;

/// Longest counting or silent window (ten minutes).
pub const MAX_WINDOW_MS: u32 = 600_000;

/// The stack sampler of one session.
pub struct Stacks {
    opts: StackOptions,
    windows: Option<WindowOptions>,
    thread: Option<Running>,
}

/// The sampler thread while it runs.
pub(super) struct Running {
    stop: StopFlag,
    /// Says that the thread's body has ended.
    done: mpsc::Receiver<()>,
    handle: JoinHandle<()>,
}

impl Stacks {
    pub const NEEDS: Needs = Needs {
        capabilities: Capabilities {
            thread_cpu_time: true,
            ..Capabilities::NONE
        },
        events: &[],
        ring: false,
    };

    /// A sampler for `opts` (keeping windows timing's schedule when
    /// `windows` is set); `Err` (one line) for an interval, a depth or a
    /// window out of range.
    pub fn new(opts: StackOptions, windows: Option<WindowOptions>) -> Result<Stacks, String> {
        if let Some(w) = windows {
            for (what, ms) in [("counting", w.counting_ms), ("silent", w.silent_ms)] {
                if ms == 0 || ms > MAX_WINDOW_MS {
                    return Err(format!(
                        "windows timing: {what} window of {ms} ms out of range (1 to {MAX_WINDOW_MS})"
                    ));
                }
            }
            if w.settle_ms >= w.silent_ms {
                return Err(format!(
                    "windows timing: a settle of {} ms must be shorter than the silent window ({} ms)",
                    w.settle_ms, w.silent_ms
                ));
            }
        }
        if opts.interval_us == 0 || opts.interval_us > MAX_INTERVAL_US {
            return Err(format!(
                "stack sampling: interval of {} us out of range (1 to {MAX_INTERVAL_US})",
                opts.interval_us
            ));
        }
        if opts.max_depth == 0 || opts.max_depth > MAX_DEPTH {
            return Err(format!(
                "stack sampling: depth of {} frames out of range (1 to {MAX_DEPTH})",
                opts.max_depth
            ));
        }
        Ok(Stacks {
            opts,
            windows,
            thread: None,
        })
    }

    /// Windows timing's schedule, when this sampler would keep one.
    pub fn windows(&self) -> Option<WindowOptions> {
        self.windows
    }
}

impl Source for Stacks {
    fn name(&self) -> &'static str {
        "stacks"
    }

    fn needs(&self) -> Needs {
        Stacks::NEEDS
    }

    /// Starts the sampler thread and waits (bounded) until it is attached
    /// to the VM and ready.
    fn start(&mut self, agent: &'static Agent, _jni: Jni<'_>) -> Result<(), String> {
        outbox::send(Message::StackSource(
            sprig_wire::control::StackSource::Jvmti,
        ));
        let opts = self.opts;
        let jvmti = agent.jvmti;
        let windows = self.windows;
        start_thread(agent, THREAD_NAME, &mut self.thread, move |jni, stop| {
            let mut s = Sampler::new(jvmti, jni, opts, windows, stop)?;
            Ok(move |jni: Jni<'_>| s.run(jni))
        })
    }

    /// Stops the sampler thread and joins it, waiting at most 2 s (a round
    /// in progress ends first; a thread still busy after that is left to
    /// end by itself, said on stderr).
    fn stop(&mut self, _agent: &'static Agent, _jni: Jni<'_>, _ending: &mut Ending) {
        stop_thread(self.thread.take());
    }
}

/// Starts a sampling thread named `name`, attached to the VM as a daemon,
/// into `slot`, and waits (bounded) until `make` has built its body on that
/// thread; the body then runs until the stop flag is set. `make`'s `Err`
/// (one line) is the start's.
pub(super) fn start_thread<M, B>(
    agent: &'static Agent,
    name: &'static str,
    slot: &mut Option<Running>,
    make: M,
) -> Result<(), String>
where
    M: FnOnce(Jni<'_>, StopFlag) -> Result<B, String> + Send + 'static,
    B: FnOnce(Jni<'_>),
{
    let stop: StopFlag = Arc::new((Mutex::new(false), Condvar::new()));
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let flag = stop.clone();
    let handle = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let attached = match agent.vm.attach_daemon(name) {
                Ok(a) => a,
                Err(e) => {
                    let _ = ready_tx.send(Err(format!(
                        "stack sampling: the sampler thread cannot attach to the JVM: {e}"
                    )));
                    let _ = done_tx.send(());
                    return;
                }
            };
            let jni = attached.jni();
            let body = catch_unwind(AssertUnwindSafe(|| match make(jni, flag) {
                Ok(body) => {
                    let _ = ready_tx.send(Ok(()));
                    body(jni);
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                }
            }));
            if body.is_err() {
                eprintln!("sprig agent: internal error (panic) in the stack sampler");
                outbox::send(Message::Warning(
                    "internal error (panic) in the stack sampler: stack sampling stopped".into(),
                ));
            }
            drop(attached);
            let _ = done_tx.send(());
        })
        .map_err(|e| format!("stack sampling: cannot start the sampler thread: {e}"))?;
    *slot = Some(Running {
        stop,
        done: done_rx,
        handle,
    });
    match ready_rx.recv_timeout(BOUND) {
        Ok(r) => r,
        Err(_) => Err(format!(
            "stack sampling: the sampler thread did not start within {} s",
            BOUND.as_secs()
        )),
    }
}

/// Stops a thread [`start_thread`] started and joins it, waiting at most
/// 2 s; whether it ended (a thread still busy is left to end by itself,
/// said on stderr).
pub(super) fn stop_thread(t: Option<Running>) -> bool {
    let Some(t) = t else {
        return true;
    };
    {
        let (lock, cvar) = &*t.stop;
        *crate::sync::lock(lock) = true;
        cvar.notify_all();
    }
    match t.done.recv_timeout(BOUND) {
        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => {
            let _ = t.handle.join();
            true
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            eprintln!(
                "sprig agent: the stack sampler did not stop within {} s; it ends by itself",
                BOUND.as_secs()
            );
            false
        }
    }
}

/// Waits until `until` or the stop flag; whether the flag is set.
pub(super) fn wait_until(stop: &StopFlag, until: Instant) -> bool {
    let (lock, cvar) = &**stop;
    let mut stopped = crate::sync::lock(lock);
    loop {
        if *stopped {
            return true;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        stopped = cvar
            .wait_timeout(stopped, left)
            .map(|(g, _)| g)
            .unwrap_or_else(|p| p.into_inner().0);
    }
}

/// What the sampler knows of a thread.
struct Seen {
    /// One of sprig's own threads: never sampled.
    own: bool,
    /// Its CPU time at its previous sample.
    cpu_ns: Option<u64>,
}

/// The sampler thread's state.
struct Sampler {
    jvmti: Jvmti,
    opts: StackOptions,
    /// `java.lang.Thread.tid`.
    tid: FieldId,
    threads: HashMap<u64, Seen>,
    /// A failed round was said once.
    warned: bool,
    /// Set when the session stops the sampler.
    stop: StopFlag,
    /// Windows timing's schedule.
    windows: Option<Schedule>,
}

/// Windows timing's schedule, kept by the thread of the stack source that
/// runs (the JVMTI sampler or the CPU timer's drain): when the current
/// window ends, and whether it is a silent one.
///
/// With `Silence::Original` a switch also redefines the session's
/// instrumented classes (`instrument::silence`): a silent window begins
/// with root entries silent at once, waits until no counted root call is
/// left open (at most the longer window's length: a counted call still
/// running then loses the counts of its calls after the switch), then puts
/// the classes back to their original bytes and starts its clock; a
/// counting window instruments them again before root entries count.
pub(super) struct Schedule {
    w: WindowOptions,
    window_end: Instant,
    silent: bool,
    /// Root contexts opened when the current counting window began.
    opened_at: u64,
    /// Original-bytes silence: since when the silent window waits for the
    /// counted root calls still open.
    draining: Option<Instant>,
    /// When the current silent window's settle ends (`settle_ms`: root
    /// calls entered before are timed, not sampled).
    settle_end: Option<Instant>,
    /// What the original-bytes switches did, and whether that changed
    /// since the CLI was told.
    switches: WindowSwitches,
    untold: bool,
}

/// The CLI reset its results (`CountingWindowNow`): the schedule's next
/// tick ends the silent window on now, if one is on.
static COUNT_NOW: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Asks the schedule for a counting window at its next tick (the CLI's
/// `CountingWindowNow`, after a reset of its results). The control
/// thread; nothing waits.
pub fn counting_window_now() {
    COUNT_NOW.store(true, std::sync::atomic::Ordering::Release);
}

impl Schedule {
    /// The schedule of `w`, opening with a counting window.
    pub(super) fn new(w: WindowOptions) -> Schedule {
        COUNT_NOW.store(false, std::sync::atomic::Ordering::Release);
        probe::set_quota(w.counting_calls);
        Schedule {
            w,
            window_end: Instant::now() + ms(w.counting_ms),
            silent: false,
            opened_at: probe::root_contexts_opened(),
            draining: None,
            settle_end: None,
            switches: WindowSwitches::default(),
            untold: false,
        }
    }

    fn original(&self) -> bool {
        self.w.silence == Silence::Original
    }

    /// The switches so far, once after each switch.
    pub(super) fn switches_untold(&mut self) -> Option<Message> {
        std::mem::take(&mut self.untold).then_some(Message::WindowSwitches(self.switches))
    }

    fn note(&mut self, s: crate::instrument::Switch, to_original: bool) {
        self.untold = true;
        let t = &mut self.switches;
        if to_original {
            t.to_original += 1;
        } else {
            t.to_instrumented += 1;
        }
        t.classes += u64::from(s.classes);
        t.failed += u64::from(s.failed);
        t.ns += s.ns;
        t.max_ns = t.max_ns.max(s.ns);
    }

    /// Switches to the next window when the current one is over (the
    /// probes follow: `probe::set_silent`, and with original-bytes silence
    /// the classes); whether it switched.
    pub(super) fn tick(&mut self, jvmti: &Jvmti, jni: Jni<'_>) -> bool {
        let w = self.w;
        let now = Instant::now();
        if self.settle_end.is_some_and(|e| now >= e) {
            self.settle_end = None;
            probe::set_settling(false);
        }
        if let Some(since) = self.draining {
            let bound = ms(w.counting_ms.max(w.silent_ms));
            let open = probe::counted_root_contexts_open() > 0;
            if open && now < since + bound {
                return false;
            }
            if open {
                self.switches.cut += 1;
            }
            self.draining = None;
            let s = crate::instrument::silence(jvmti, jni, true);
            self.note(s, true);
            let start = Instant::now();
            self.window_end = start + ms(w.silent_ms);
            self.settle_end = (w.settle_ms > 0).then(|| start + ms(w.settle_ms));
            return false;
        }
        // Asked for a counting window: a silent window ends now (a
        // counting one is already on).
        if COUNT_NOW.swap(false, std::sync::atomic::Ordering::AcqRel) && self.silent {
            self.window_end = now;
        }
        let enough_calls = !self.silent
            && w.counting_calls > 0
            && (probe::root_contexts_opened().wrapping_sub(self.opened_at) & 0xffff_ffff)
                >= u64::from(w.counting_calls);
        if now < self.window_end && !enough_calls {
            return false;
        }
        self.silent = !self.silent;
        // A silent window settles from its first root entry (under
        // original-bytes silence, through the wait and the redefinition
        // too); so do the last silent root entries before a counting
        // window (under original-bytes silence, while the classes are
        // instrumented again), which ends the settle.
        probe::set_settling(w.settle_ms > 0);
        self.settle_end = None;
        if self.original() {
            if self.silent {
                probe::set_silent(true);
                self.draining = Some(now);
                // The window's clock starts once the classes are back.
                self.window_end = now + ms(MAX_WINDOW_MS);
                return true;
            }
            let s = crate::instrument::silence(jvmti, jni, false);
            self.note(s, false);
        }
        if !self.silent {
            self.opened_at = probe::root_contexts_opened();
            probe::set_quota(w.counting_calls);
        }
        probe::set_silent(self.silent);
        if !self.silent {
            probe::set_settling(false);
        }
        let len = if self.silent {
            w.silent_ms
        } else {
            w.counting_ms
        };
        let start = Instant::now();
        self.window_end = start + ms(len);
        if self.silent && w.settle_ms > 0 {
            self.settle_end = Some(start + ms(w.settle_ms));
        }
        true
    }

    /// Whether a silent window is on.
    pub(super) fn silent(&self) -> bool {
        self.silent
    }
}

impl Sampler {
    fn new(
        jvmti: Jvmti,
        jni: Jni<'_>,
        opts: StackOptions,
        windows: Option<WindowOptions>,
        stop: StopFlag,
    ) -> Result<Sampler, String> {
        let tid = jni
            .thread_id_field()
            .ok_or("stack sampling: cannot find java.lang.Thread's tid field")?;
        Ok(Sampler {
            jvmti,
            opts,
            tid,
            threads: HashMap::new(),
            warned: false,
            stop,
            windows: windows.map(Schedule::new),
        })
    }

    /// Windows timing: switches to the next window when the current one
    /// is over; returns whether this round samples: in a silent window but
    /// its first round, which only switches (always true without windows
    /// timing: every round samples).
    fn switch_window(&mut self, jni: Jni<'_>) -> bool {
        let jvmti = self.jvmti;
        let Some(schedule) = &mut self.windows else {
            return true;
        };
        let switched = schedule.tick(&jvmti, jni);
        if let Some(m) = schedule.switches_untold() {
            send(&self.stop, m);
        }
        !switched && schedule.silent()
    }

    /// Rounds every `interval_us` until the stop flag is set or the VM
    /// dies.
    fn run(&mut self, jni: Jni<'_>) {
        let interval = Duration::from_micros(u64::from(self.opts.interval_us));
        let mut next = Instant::now();
        let stop = self.stop.clone();
        loop {
            if wait_until(&stop, next) {
                return;
            }
            let sampling = self.switch_window(jni);
            let result = if sampling { self.round(jni) } else { Ok(()) };
            match result {
                Ok(()) => {}
                Err(WRONG_PHASE) => return,
                Err(e) => {
                    if !self.warned {
                        self.warned = true;
                        send(
                            &self.stop,
                            Message::Warning(format!(
                                "stack sampling: GetAllStackTraces failed ({e}); rounds that fail \
                             are skipped"
                            )),
                        );
                    }
                }
            }
            // No catching up after a slow round: the next one is an
            // interval from now at the earliest.
            next = (next + interval).max(Instant::now());
        }
    }

    /// One round: every live thread's stack, sent as `StackSamples` after
    /// the `SampledThread` and `FrameMethod` messages it needs.
    fn round(&mut self, jni: Jni<'_>) -> Result<(), JvmtiError> {
        let started = Instant::now();
        let time_ns = clock::monotonic_ns();
        let depth = self.opts.max_depth as usize;
        let samples = jni.with_local_frame(64, |jni| -> Result<Vec<StackSample>, JvmtiError> {
            // One frame more than kept tells a cut stack from a full one.
            let depth_asked = i32::try_from(depth + 1).unwrap_or(i32::MAX);
            // Windows timing: which threads are inside a silent root
            // context before the walk (checked again after it).
            let marks_before = self.windows.as_ref().map(|_| probe::marks());
            let stacks = self.jvmti.stack_samples(&jni, depth_asked)?;
            let mut samples = Vec::with_capacity(stacks.len());
            let mut alive = HashSet::with_capacity(stacks.len());
            for st in stacks {
                let java_id = jni.thread_id_by(st.thread, self.tid);
                alive.insert(java_id);
                let jvmti = self.jvmti;
                let stop = &self.stop;
                let seen = self.threads.entry(java_id).or_insert_with(|| {
                    let name = jvmti.thread_name(&jni, st.thread).unwrap_or_default();
                    let own = name.starts_with("sprig-");
                    if !own {
                        send(stop, Message::SampledThread { java_id, name });
                    }
                    Seen { own, cpu_ns: None }
                });
                if seen.own
                    || marks_before
                        .as_ref()
                        .is_some_and(|m| !probe::inside_before_and_after(m, java_id))
                {
                    jni.delete_local(st.thread);
                    continue;
                }
                // A thread that ended since the listing has no CPU time.
                let cpu_now = jvmti.thread_cpu_time(st.thread).ok();
                jni.delete_local(st.thread);
                let cpu_ns = match (seen.cpu_ns, cpu_now) {
                    (Some(before), Some(now)) => now.saturating_sub(before),
                    _ => u64::MAX,
                };
                seen.cpu_ns = cpu_now;
                let truncated = st.frames.len() > depth;
                let kept = &st.frames[..st.frames.len().min(depth)];
                let frames = frame_ids(jvmti, jni, kept, &mut |m| send(stop, m));
                samples.push(StackSample {
                    thread: java_id,
                    state: state_of(st.state),
                    cpu_ns,
                    frames,
                    truncated,
                });
            }
            // Threads that ended: their ids are never used again.
            self.threads.retain(|id, _| alive.contains(id));
            Ok(samples)
        })?;
        let cost_ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        send(
            &self.stop,
            Message::StackSamples {
                time_ns,
                cost_ns,
                samples,
            },
        );
        Ok(())
    }
}

/// The session's frame dictionary, shared by every source that names
/// frames (the stack sampler, the CPU timer's drain, the sampled
/// allocations outside every root): a method's [`MethodId::addr`] -> its
/// frame id, named to the CLI (`FrameMethod`) the first time. Emptied when
/// a session begins ([`begin_frames`]), so ids are the session's.
static FRAMES: Mutex<Option<HashMap<usize, u32>>> = Mutex::new(None);

/// A session begins: its frame dictionary starts empty.
pub fn begin_frames() {
    *crate::sync::lock(&FRAMES) = Some(HashMap::new());
}

/// The frame ids of `methods`, in their order, each new one named to the
/// CLI through `out` (a `FrameMethod`, before any message that carries the
/// id, given `out` sends in order). Holds the dictionary while it names
/// new methods: `out` must not wait without a bound.
pub(super) fn frame_ids(
    jvmti: Jvmti,
    jni: Jni<'_>,
    methods: &[MethodId],
    out: &mut dyn FnMut(Message),
) -> Vec<u32> {
    let mut guard = crate::sync::lock(&FRAMES);
    let frames = guard.get_or_insert_with(HashMap::new);
    methods
        .iter()
        .map(|&m| {
            if let Some(id) = frames.get(&m.addr()) {
                return *id;
            }
            let id = u32::try_from(frames.len()).unwrap_or(u32::MAX);
            frames.insert(m.addr(), id);
            out(frame_method(jvmti, jni, m, id));
            id
        })
        .collect()
}

/// The `FrameMethod` message that names `m` as frame `id`.
fn frame_method(jvmti: Jvmti, jni: Jni<'_>, m: MethodId, id: u32) -> Message {
    let class = match jvmti.method_declaring_class(&jni, m) {
        Ok(c) => {
            let sig = jvmti.class_signature(c).unwrap_or_default();
            jni.delete_local(c);
            binary_name(&sig)
        }
        Err(_) => String::new(),
    };
    let (name, descriptor) = jvmti
        .method_name(m)
        .unwrap_or_else(|_| ("<unknown>".into(), String::new()));
    Message::FrameMethod {
        id,
        class,
        name,
        descriptor,
    }
}

fn ms(v: u32) -> Duration {
    Duration::from_millis(u64::from(v))
}

/// Sends `msg` unless the session stopped the sampler: a sampler that
/// outlived its stop's bound sends nothing into a later session.
pub(super) fn send(stop: &StopFlag, msg: Message) {
    if !*crate::sync::lock(&stop.0) {
        outbox::send(msg);
    }
}

/// The binary name, with dots, of the class of signature `sig`
/// (`Lpkg/Name;` -> `pkg.Name`); other signatures as they are.
pub(super) fn binary_name(sig: &str) -> String {
    sig.strip_prefix('L')
        .and_then(|s| s.strip_suffix(';'))
        .unwrap_or(sig)
        .replace('/', ".")
}

/// What a thread was doing, from its JVMTI state bits.
fn state_of(bits: u32) -> SampledState {
    use thread_state as t;
    if bits & t::RUNNABLE != 0 {
        if bits & t::IN_NATIVE != 0 {
            SampledState::Native
        } else {
            SampledState::Running
        }
    } else if bits & t::BLOCKED_ON_MONITOR_ENTER != 0 {
        SampledState::Blocked
    } else if bits & t::IN_OBJECT_WAIT != 0 {
        SampledState::Waiting
    } else if bits & t::PARKED != 0 {
        SampledState::Parked
    } else if bits & t::SLEEPING != 0 {
        SampledState::Sleeping
    } else {
        SampledState::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_follow_the_jvmti_bits() {
        let alive = 0x1;
        assert_eq!(state_of(alive | 0x4), SampledState::Running);
        assert_eq!(state_of(alive | 0x4 | 0x40_0000), SampledState::Native);
        assert_eq!(state_of(alive | 0x400), SampledState::Blocked);
        assert_eq!(state_of(alive | 0x80 | 0x10 | 0x100), SampledState::Waiting);
        assert_eq!(state_of(alive | 0x80 | 0x10 | 0x200), SampledState::Parked);
        assert_eq!(state_of(alive | 0x80 | 0x20 | 0x40), SampledState::Sleeping);
        assert_eq!(state_of(alive | 0x80 | 0x20), SampledState::Other);
    }

    #[test]
    fn binary_names_have_dots() {
        assert_eq!(binary_name("Lfixture/Stacks;"), "fixture.Stacks");
        assert_eq!(
            binary_name("Ljava/lang/Thread$State;"),
            "java.lang.Thread$State"
        );
        assert_eq!(binary_name("[I"), "[I");
    }

    #[test]
    fn out_of_range_options_are_refused() {
        let ok = StackOptions {
            interval_us: 10_000,
            max_depth: 64,
            source: sprig_wire::control::StackSource::Jvmti,
        };
        assert!(Stacks::new(ok, None).is_ok());
        let w = WindowOptions {
            counting_ms: 100,
            silent_ms: 400,
            counting_calls: 0,
            silence: sprig_wire::Silence::Dormant,
            settle_ms: 0,
        };
        assert!(Stacks::new(ok, Some(w)).is_ok());
        for bad in [
            WindowOptions {
                counting_ms: 0,
                ..w
            },
            WindowOptions {
                silent_ms: MAX_WINDOW_MS + 1,
                ..w
            },
            WindowOptions {
                settle_ms: 400,
                ..w
            },
        ] {
            let e = Stacks::new(ok, Some(bad)).err().expect("refused");
            assert!(e.starts_with("windows timing:") && !e.contains('\n'), "{e}");
        }
        for bad in [
            StackOptions {
                interval_us: 0,
                ..ok
            },
            StackOptions { max_depth: 0, ..ok },
            StackOptions {
                max_depth: MAX_DEPTH + 1,
                source: sprig_wire::control::StackSource::Jvmti,
                ..ok
            },
            StackOptions {
                interval_us: MAX_INTERVAL_US + 1,
                ..ok
            },
        ] {
            let e = Stacks::new(bad, None).err().expect("refused");
            assert!(e.starts_with("stack sampling:") && !e.contains('\n'), "{e}");
        }
    }
}
