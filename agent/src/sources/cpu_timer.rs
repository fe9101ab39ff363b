//! The CPU-time timer source: every Java thread gets a timer on its own
//! CPU clock (`timer_create` with the thread's CPU clock id and
//! `SIGEV_THREAD_ID`) that sends it SIGPROF each `interval_us` of CPU time
//! it uses; the signal handler (`ffi::agct`) walks the interrupted thread
//! where it is with HotSpot's `AsyncGetCallTrace`, with no safepoint and
//! without stopping any other thread, into a fixed pool of slots. A
//! thread of its own, `sprig-timer`, drains the pool every 10 ms: it turns
//! the method ids into frame ids (`FrameMethod`, the same dictionary as
//! the JVMTI source's), the JNIEnv of each sample into its Java thread
//! (`SampledThread`), and sends the samples as `StackSamples`, the same
//! messages the JVMTI source sends. Every sample is of a thread on the CPU
//! and weighs `interval_us` of CPU time: `Native` when the thread ran a
//! native method (the leaf frame AsyncGetCallTrace gives is one), `Running`
//! otherwise (Java code, or the VM on its behalf). A round's `cost_ns` is
//! the handler's time (its thread's CPU clock, entry to exit) in every signal
//! since the previous round, those that left no sample too.
//!
//! Threads: a thread that starts while the source runs gets its timer at
//! JVMTI ThreadStart, on the new thread itself, and loses it at ThreadEnd,
//! so a thread that lives a few ms is sampled too. The drain also lists
//! `/proc/self/task` every tenth period (100 ms) and gives a timer to each thread that
//! has none (the threads that ran before the source started, and those
//! the VM starts without ThreadStart: GC, JIT compiler), sprig's own
//! `sprig-*` threads excepted, and deletes the timers of threads that
//! ended. The kernel checks a thread's CPU-clock timers only at a
//! scheduler tick (4 ms at 250 Hz) that finds the thread running, so a
//! timer due between two ticks fires at the next one, and one due after
//! the thread's last tick never does: a timer armed at the interval loses
//! the CPU time a thread uses after its last tick, nearly all of a thread
//! that lives a few ms (at 20 ms, threads of 5 ms CPU each drew 24% of the
//! samples for 41% of the CPU time). So every timer fires at every tick
//! that finds its thread running (a period of [`FIRE`] of CPU time), and
//! the handler keeps a signal with the chance of one interval's worth of
//! ticks (tick over interval, all of them at an interval of a tick or
//! less): a tick lands on a thread in proportion to the CPU time it uses,
//! whatever its life. A thread that is not a Java thread gets signals too;
//! the handler leaves them
//! (no JNIEnv, or no Java frame).
//!
//! AsyncGetCallTrace needs a jmethodID for every method it names and
//! answers only while some JVMTI environment has ClassLoad on: the source
//! enables ClassLoad and ClassPrepare, calls GetClassMethods on every
//! loaded class at its start and on each class prepared after.
//!
//! The Java thread of a JNIEnv: HotSpot keeps the address of a thread's VM
//! thread in `java.lang.Thread.eetop`, and the JNIEnv at a fixed offset
//! inside it; the drain measures the offset on itself at start and maps
//! every live thread's JNIEnv from its `eetop`.
//!
//! Windows timing (`SessionOptions::windows`): the drain keeps the
//! windows' schedule (`stacks::Schedule`, checked every drain), and the
//! handler keeps only samples of threads inside a silent root call of the
//! session, the same silent root context before and after the walk
//! (`ffi::agct::SilentFilter`, reading the thread's probe state through
//! `probe::silent_filter`); the others cost no walk and are counted, sent
//! as `TimerOutside`. A thread in a counted root call, between root calls
//! or outside every root gives no sample. A carrier running a virtual
//! thread reads the virtual thread's probe state (its tls word points at
//! it), so a sample inside the virtual thread's silent root call carries
//! the virtual thread's Java id and is sent as the virtual thread's, not
//! the carrier's.
//!
//! Coexistence: [`CpuTimer::usable`] reads SIGPROF's disposition and the
//! process's profiling timer before anything is installed; when another
//! profiler holds either, the session samples with the JVMTI source and
//! says so in one line. At the stop the drain thread deletes every timer
//! as it ends, then the handler is made inert and the stop waits (at most
//! 2 s) until no handler runs. The handler stays installed: SIGPROF's
//! default action would end the JVM at a signal still pending.

use super::stacks::{
    self, BOUND, Running, Schedule, StopFlag, send, start_thread, stop_thread, wait_until,
};
use super::{Ending, Needs, Source};
use crate::env::Agent;
use crate::ffi::agct::{self, Holder, ThreadTimer};
use crate::ffi::{Capabilities, Event, FieldId, Jni, Jvmti, Local};
use sprig_wire::Message;
use sprig_wire::clock;
use sprig_wire::control::{SampledState, StackOptions, StackSample, WindowOptions};
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The drain thread's name (`sprig-*` threads are never sampled).
pub const THREAD_NAME: &str = "sprig-timer";
/// Slots in the pool: samples the handler can hold between two drains.
const SLOTS: usize = 128;
/// How often the drain empties the pool (and ticks the windows' schedule).
const DRAIN: Duration = Duration::from_millis(10);
/// Drains between two scans of `/proc/self/task` (every 100 ms). Java
/// threads get their timers at ThreadStart; the scan finds the threads that
/// ran before the source started and those the VM starts without a
/// ThreadStart (GC, JIT compiler). Listing the directory is most of the
/// drain thread's own CPU time, so it runs a tenth as often as the drain.
const SCAN_EVERY: u32 = 10;

/// The period of every thread's timer, in CPU time: short enough that the
/// timer is due at every scheduler tick that finds its thread running.
const FIRE: Duration = Duration::from_micros(10);
/// The scheduler tick assumed when the kernel does not say.
const TICK: Duration = Duration::from_millis(4);

/// Whether a timer source runs (its ClassPrepare work is on).
static ON: AtomicBool = AtomicBool::new(false);

/// The CPU-time timer source of one session.
pub struct CpuTimer {
    opts: StackOptions,
    /// Windows timing's schedule and the handler's filter.
    windows: Option<(WindowOptions, agct::SilentFilter)>,
    agct: usize,
    thread: Option<Running>,
    armed: bool,
}

impl CpuTimer {
    pub const NEEDS: Needs = Needs {
        capabilities: Capabilities {
            compiled_method_load: true,
            ..Capabilities::NONE
        },
        events: &[
            Event::ClassLoad,
            Event::ClassPrepare,
            Event::CompiledMethodLoad,
            Event::ThreadStart,
            Event::ThreadEnd,
        ],
        ring: false,
    };

    /// Whether the timer source can run in this process: HotSpot exports
    /// AsyncGetCallTrace, and no other profiler holds SIGPROF or the
    /// process's profiling timer. With `windows` it keeps windows
    /// timing's schedule and samples only silent root calls. `Err` is the
    /// one line that says why not.
    pub fn usable(opts: StackOptions, windows: Option<WindowOptions>) -> Result<CpuTimer, String> {
        stacks::Stacks::new(opts, windows)?;
        let windows = match windows {
            Some(w) => Some((
                w,
                crate::probe::silent_filter().ok_or(
                    "the timer's signal handler cannot read the threads' probe state;                      stacks are taken with JVMTI instead",
                )?,
            )),
            None => None,
        };
        if crate::error::fault_named("foreign-sigprof") {
            foreign_handler_once();
        }
        let agct = agct::find_agct()
            .ok_or("this JVM exports no AsyncGetCallTrace; stacks are taken with JVMTI instead")?;
        if agct::signal_holder() == Holder::Other {
            return Err(
                "another signal handler holds SIGPROF (another profiler?): sprig leaves \
                 it alone and takes stacks with JVMTI instead (safepoint-biased)"
                    .into(),
            );
        }
        if agct::process_timer_running() {
            return Err(
                "another profiler runs the process's profiling timer (ITIMER_PROF): \
                 sprig leaves SIGPROF alone and takes stacks with JVMTI instead \
                 (safepoint-biased)"
                    .into(),
            );
        }
        Ok(CpuTimer {
            opts,
            windows,
            agct,
            thread: None,
            armed: false,
        })
    }
}

/// The test hook's foreign handler, installed once per process (a later
/// session must find it still there).
fn foreign_handler_once() {
    static DONE: std::sync::Once = std::sync::Once::new();
    DONE.call_once(|| {
        agct::install_foreign_handler();
    });
}

impl Source for CpuTimer {
    fn name(&self) -> &'static str {
        "cpu-timer"
    }

    fn needs(&self) -> Needs {
        // Measurement knob (`timer-no-cml-capability`): the source runs
        // without can_generate_compiled_method_load_events.
        if crate::error::fault_named("timer-no-cml-capability") {
            return Needs {
                capabilities: Capabilities::NONE,
                events: &[
                    Event::ClassLoad,
                    Event::ClassPrepare,
                    Event::ThreadStart,
                    Event::ThreadEnd,
                ],
                ring: false,
            };
        }
        CpuTimer::NEEDS
    }

    fn start(&mut self, agent: &'static Agent, _jni: Jni<'_>) -> Result<(), String> {
        // Measurement knobs (the agent's test hooks): `timer-no-events`
        // leaves the class and compiled-method events off, and
        // `timer-no-thread-events` ThreadStart/ThreadEnd.
        let skip = |e: &Event| match e {
            Event::ClassLoad | Event::ClassPrepare | Event::CompiledMethodLoad => {
                crate::error::fault_named("timer-no-events")
            }
            Event::ThreadStart | Event::ThreadEnd => {
                crate::error::fault_named("timer-no-thread-events")
            }
            _ => false,
        };
        for e in self.needs().events.iter().filter(|e| !skip(e)) {
            agent
                .jvmti
                .set_event(*e, true)
                .map_err(|err| format!("stack sampling: cannot enable {e:?} events: {err}"))?;
        }
        ON.store(true, Ordering::SeqCst);
        let depth = self.opts.max_depth as usize + 1;
        let filter = self.windows.map(|(_, f)| f);
        agct::set_no_walk(crate::error::fault_named("timer-no-walk"));
        // One signal at every tick that finds a thread running: kept with
        // the chance of one interval's worth of ticks.
        let tick = agct::scheduler_tick().unwrap_or(TICK);
        let interval = Duration::from_micros(u64::from(self.opts.interval_us));
        agct::set_keep(
            tick.as_secs_f64() / interval.as_secs_f64().max(1e-9),
            clock::monotonic_ns().rotate_left(17),
        );
        if !agct::arm(self.agct, agent.vm, SLOTS, depth, filter) {
            return Err("stack sampling: cannot install the SIGPROF handler".into());
        }
        self.armed = true;
        crate::outbox::send(Message::StackSource(
            sprig_wire::control::StackSource::Timer,
        ));
        let opts = self.opts;
        let schedule = self.windows.map(|(w, _)| w);
        let jvmti = agent.jvmti;
        start_thread(agent, THREAD_NAME, &mut self.thread, move |jni, stop| {
            let mut d = Drain::new(jvmti, jni, opts, schedule.map(Schedule::new), stop)?;
            Ok(move |jni: Jni<'_>| d.run(jni))
        })
    }

    fn stop(&mut self, _agent: &'static Agent, _jni: Jni<'_>, _ending: &mut Ending) {
        ON.store(false, Ordering::SeqCst);
        // The drain deletes every timer as it ends; a drain that did not
        // end within the bound leaves them here.
        stop_thread(self.thread.take());
        *timers() = None;
        if self.armed {
            self.armed = false;
            if let Some(line) = losses() {
                crate::outbox::send(Message::Warning(line));
            }
            if !agct::disarm(BOUND) {
                eprintln!(
                    "sprig agent: a SIGPROF handler still ran after {} s; its memory is left",
                    BOUND.as_secs()
                );
            }
        }
    }
}

/// The signals that gave no sample, in one line, when more than 1% did
/// (a thread with no Java frame, in the VM or in native code from its
/// start, is no loss).
fn losses() -> Option<String> {
    let signals = agct::SIGNALS.load(Ordering::Relaxed);
    let code = |i: usize| agct::FAILED.get(i).map_or(0, |c| c.load(Ordering::Relaxed));
    let dropped = agct::DROPPED.load(Ordering::Relaxed);
    let failed: u64 = (1..agct::FAILED.len()).map(code).sum();
    let lost = failed + dropped;
    if signals == 0 || lost * 100 <= signals {
        return None;
    }
    let names = [
        "no Java frame",
        "no class load",
        "GC active",
        "unknown not Java",
        "not walkable not Java",
        "unknown Java",
        "not walkable Java",
        "unknown state",
        "thread exit",
        "deopt",
        "safepoint",
    ];
    let why: Vec<String> = (1..agct::FAILED.len())
        .filter(|i| code(*i) > 0)
        .map(|i| format!("{} {}", code(i), names.get(i).unwrap_or(&"?")))
        .chain((dropped > 0).then(|| format!("{dropped} with the sample pool full")))
        .collect();
    Some(format!(
        "stack sampling: {lost} of {signals} timer signals gave no stack ({})",
        why.join(", ")
    ))
}

/// ClassPrepare while the source runs: the class's methods get their
/// jmethodIDs before any of its code runs.
pub fn on_class_prepare(jvmti: &Jvmti, class: Local<'_>) {
    if ON.load(Ordering::Relaxed) {
        let _ = jvmti.class_methods(class);
    }
}

/// The threads' timers while a source runs (`None` otherwise), shared by
/// the drain's scan and the ThreadStart/ThreadEnd callbacks. Whoever holds
/// the lock does map operations and timer syscalls only (no file read, no
/// JNI), so a starting or ending thread waits microseconds at most.
static TIMERS: Mutex<Option<Timers>> = Mutex::new(None);

fn timers() -> std::sync::MutexGuard<'static, Option<Timers>> {
    TIMERS.lock().unwrap_or_else(|p| p.into_inner())
}

/// A thread's timer and the scan it was armed in.
struct Armed {
    _timer: ThreadTimer,
    /// The scan count when it was armed: a scan removes only the timers
    /// armed before its listing of the threads.
    scan: u64,
}

struct Timers {
    armed: HashMap<i32, Armed>,
    /// Threads ThreadEnd saw end while `/proc` may still list them.
    ended: HashSet<i32>,
    /// Threads that are sprig's or refused a timer.
    skipped: HashSet<i32>,
    /// Scans begun.
    scans: u64,
    /// Measurement knob (the agent's test hook `timer-no-signal`): no
    /// thread gets a timer; everything else of the source runs.
    no_signal: bool,
    /// Threads started since the drain's last pass: JNIEnv, Java id, name
    /// (at most [`STARTED_MAX`]; beyond, the drain's scan names them).
    started: Vec<(usize, u64, String)>,
}

/// Threads named at ThreadStart that wait for the drain, at most.
const STARTED_MAX: usize = 4096;

/// `java.lang.Thread`'s tid field (the same for the JVM's life), to name
/// threads at ThreadStart.
static TID_FIELD: std::sync::OnceLock<FieldId> = std::sync::OnceLock::new();

impl Timers {
    /// Arms thread `tid`'s timer (due every [`FIRE`] of its CPU time, so
    /// at every tick that finds it running) and keeps it (a timer the tid
    /// had is deleted: the tid is a new thread's).
    fn arm(&mut self, tid: i32) {
        self.armed.remove(&tid);
        if self.no_signal {
            self.skipped.insert(tid);
            return;
        }
        match ThreadTimer::start(tid, FIRE, FIRE) {
            Ok(t) => {
                self.armed.insert(
                    tid,
                    Armed {
                        _timer: t,
                        scan: self.scans,
                    },
                );
            }
            Err(_) => {
                self.skipped.insert(tid);
            }
        }
    }
}

/// ThreadStart (`start`) or ThreadEnd on the calling thread: its timer is
/// armed or deleted while a source runs. sprig's own threads get none.
pub fn on_thread(start: bool, java: Option<(&Jvmti, Jni<'_>, Local<'_>)>) {
    if !ON.load(Ordering::Relaxed) {
        return;
    }
    let tid = crate::ffi::gettid() as i32;
    if tid == 0 {
        return;
    }
    let own = start
        && std::thread::current()
            .name()
            .is_some_and(|n| n.starts_with("sprig-"));
    // The new thread's JNIEnv named now (read before the lock), for the
    // drain: a thread that ends before the drain's next pass keeps its
    // samples.
    let named = match (java, TID_FIELD.get()) {
        (Some((jvmti, jni, thread)), Some(&field)) if !own => {
            let java_id = jni.thread_id_by(thread, field);
            let name = jvmti.thread_name(&jni, thread).unwrap_or_default();
            Some((agct::env_addr(&jni), java_id, name))
        }
        _ => None,
    };
    let mut guard = timers();
    let Some(t) = guard.as_mut() else {
        return;
    };
    if own {
        t.skipped.insert(tid);
    } else if start {
        t.ended.remove(&tid);
        t.skipped.remove(&tid);
        t.arm(tid);
        if let Some(named) = named
            && t.started.len() < STARTED_MAX
        {
            t.started.push(named);
        }
    } else {
        t.armed.remove(&tid);
        t.ended.insert(tid);
    }
}

/// What the drain knows of a JNIEnv.
#[derive(Clone, Copy)]
enum EnvOf {
    Java(u64),
    Own,
}

/// The drain thread's state.
struct Drain {
    jvmti: Jvmti,
    opts: StackOptions,
    /// Windows timing's schedule.
    schedule: Option<Schedule>,
    /// `agct::OUTSIDE` as last sent.
    outside_sent: u64,
    /// `agct::UNKEPT_NS` as last counted into a round's cost.
    unkept_sent: u64,
    stop: StopFlag,
    tid_field: FieldId,
    eetop: FieldId,
    /// JNIEnv address minus `eetop`, measured on this thread.
    env_offset: usize,
    envs: HashMap<usize, EnvOf>,
    announced: HashSet<u64>,
    /// Samples whose JNIEnv matched no live thread.
    unknown: u64,
    /// When the last `StackSamples` went (`None`: none yet). With no
    /// sample, an empty one goes at the first drain and once a second, so
    /// that an idle JVM's session still has rounds.
    sent_at: Option<Instant>,
    /// When `envs` was last emptied: a VM thread's memory (and its JNIEnv)
    /// may serve a new thread after one ends, so the map is rebuilt once a
    /// second.
    mapped_at: Instant,
    taken: Vec<agct::Taken>,
    /// The CPU time a kept signal stands for, ns: one interval, or one
    /// tick where the interval is shorter (every signal is kept then, and
    /// one comes at most once a tick); weighed at the interval, the CPU
    /// view's times came to interval / tick of the truth at `--interval 2`
    /// (shares were right).
    sample_cpu_ns: u64,
}

impl Drain {
    fn new(
        jvmti: Jvmti,
        jni: Jni<'_>,
        opts: StackOptions,
        schedule: Option<Schedule>,
        stop: StopFlag,
    ) -> Result<Drain, String> {
        let tid_field = jni
            .thread_id_field()
            .ok_or("stack sampling: cannot find java.lang.Thread's tid field")?;
        let _ = TID_FIELD.set(tid_field);
        let eetop = jni
            .with_local_frame(4, |jni| {
                let class = jni.find_class("java/lang/Thread").ok()??;
                jni.find_field(class, "eetop", c"J")
            })
            .ok_or("stack sampling: cannot find java.lang.Thread's eetop field")?;
        let my_eetop = jni.with_local_frame(4, |jni| {
            jvmti
                .current_thread(&jni)
                .ok()
                .map(|(_, t)| jni.thread_id_by(t, eetop) as usize)
        });
        let env_offset = match my_eetop {
            Some(e) if e != 0 => agct::env_addr(&jni).wrapping_sub(e),
            _ => return Err("stack sampling: cannot read this thread's eetop".into()),
        };
        // Every method of every loaded class gets its jmethodID (not with
        // the measurement knob `timer-no-methods`).
        let methods = !crate::error::fault_named("timer-no-methods");
        jni.with_local_frame(16, |jni| {
            if !methods {
                return;
            }
            if let Ok(classes) = jvmti.loaded_classes(&jni) {
                for c in classes {
                    let _ = jvmti.class_methods(c);
                    jni.delete_local(c);
                }
            }
        });
        let own_tid = crate::ffi::gettid() as i32;
        *timers() = Some(Timers {
            armed: HashMap::new(),
            ended: HashSet::new(),
            skipped: HashSet::from([own_tid]),
            scans: 0,
            no_signal: crate::error::fault_named("timer-no-signal"),
            started: Vec::new(),
        });
        let tick = agct::scheduler_tick().unwrap_or(TICK);
        Ok(Drain {
            sample_cpu_ns: (u64::from(opts.interval_us) * 1000).max(tick.as_nanos() as u64),
            jvmti,
            opts,
            schedule,
            outside_sent: 0,
            unkept_sent: 0,
            stop,
            tid_field,
            eetop,
            env_offset,
            envs: HashMap::new(),
            announced: HashSet::new(),
            unknown: 0,
            mapped_at: Instant::now(),
            sent_at: None,
            taken: Vec::with_capacity(SLOTS),
        })
    }

    fn run(&mut self, jni: Jni<'_>) {
        let stop = self.stop.clone();
        let mut next = Instant::now();
        // Measurement knob (`timer-idle-drain`): the drain keeps the
        // schedule only (no thread scan, no pool drain).
        let idle = crate::error::fault_named("timer-idle-drain");
        // Measurement knobs: `timer-drain-1ms`, the drain wakes (scans,
        // drains, ticks the schedule) every 1 ms; `timer-tick-1ms`, it
        // wakes every 1 ms to tick the schedule and scans and drains every
        // 10th wake.
        let fast = crate::error::fault_named("timer-drain-1ms");
        let tick_fast = crate::error::fault_named("timer-tick-1ms");
        let (period, every) = match (fast, tick_fast) {
            (true, _) => (Duration::from_millis(1), 1),
            (false, true) => (Duration::from_millis(1), 10),
            _ => (DRAIN, 1),
        };
        let mut wakes: u32 = 0;
        loop {
            let work = !idle && wakes.is_multiple_of(every);
            if work && wakes.is_multiple_of(every * SCAN_EVERY) {
                self.refresh_timers();
            }
            if wait_until(&stop, next) {
                break;
            }
            let jvmti = self.jvmti;
            if let Some(s) = &mut self.schedule {
                s.tick(&jvmti, jni);
                if let Some(m) = s.switches_untold() {
                    send(&self.stop, m);
                }
            }
            if work {
                self.drain(jni);
            }
            wakes = wakes.wrapping_add(1);
            next = (next + period).max(Instant::now());
        }
        // Timers first (dropping `Drain` deletes them too): no new signal
        // once they are gone.
        *timers() = None;
    }

    /// Gives a timer to every thread that has none, and drops the timers
    /// of threads that ended. The listing and the reads of thread names
    /// are done outside the lock.
    fn refresh_timers(&mut self) {
        let scan = match timers().as_mut() {
            Some(t) => {
                t.scans += 1;
                t.scans - 1
            }
            None => return,
        };
        let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
            return;
        };
        let alive: HashSet<i32> = dir
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()))
            .collect();
        let new: Vec<i32> = match timers().as_ref() {
            Some(t) => alive
                .iter()
                .copied()
                .filter(|tid| {
                    !t.armed.contains_key(tid) && !t.skipped.contains(tid) && !t.ended.contains(tid)
                })
                .collect(),
            None => return,
        };
        let own: HashSet<i32> = new
            .iter()
            .copied()
            .filter(|tid| {
                std::fs::read_to_string(format!("/proc/self/task/{tid}/comm"))
                    .is_ok_and(|c| c.starts_with("sprig-"))
            })
            .collect();
        let mut guard = timers();
        let Some(t) = guard.as_mut() else {
            return;
        };
        for tid in new {
            // ThreadStart may have armed it since the listing.
            if t.armed.contains_key(&tid) || t.ended.contains(&tid) || t.skipped.contains(&tid) {
                continue;
            }
            if own.contains(&tid) {
                t.skipped.insert(tid);
            } else {
                t.arm(tid);
            }
        }
        t.armed
            .retain(|tid, a| alive.contains(tid) || a.scan > scan);
        t.skipped.retain(|tid| alive.contains(tid));
        t.ended.retain(|tid| alive.contains(tid));
    }

    /// Sends the samples in the pool as one `StackSamples`.
    fn drain(&mut self, jni: Jni<'_>) {
        let time_ns = clock::monotonic_ns();
        if self.schedule.is_some() {
            let outside = agct::OUTSIDE.load(Ordering::Relaxed);
            if outside != self.outside_sent {
                self.outside_sent = outside;
                send(&self.stop, Message::TimerOutside { signals: outside });
            }
        }
        let mut taken = std::mem::take(&mut self.taken);
        taken.clear();
        agct::drain(&mut taken);
        let quiet = self
            .sent_at
            .is_some_and(|t| t.elapsed() < Duration::from_secs(1));
        if taken.is_empty() && quiet {
            self.taken = taken;
            return;
        }
        if self.mapped_at.elapsed() >= Duration::from_secs(1) {
            self.envs.clear();
            self.mapped_at = Instant::now();
        }
        let started = timers()
            .as_mut()
            .map(|t| std::mem::take(&mut t.started))
            .unwrap_or_default();
        for (env, java_id, name) in started {
            self.name_thread(env, java_id, name);
        }
        if taken
            .iter()
            .any(|t| t.key == 0 && !self.envs.contains_key(&t.env))
        {
            self.map_threads(jni);
        }
        let depth = self.opts.max_depth as usize;
        let cpu_ns = self.sample_cpu_ns;
        // The round's cost: the handler's time in the samples it holds and
        // in the signals that left none since the previous round.
        let unkept = agct::UNKEPT_NS.load(Ordering::Relaxed);
        let mut cost_ns = unkept.wrapping_sub(self.unkept_sent);
        self.unkept_sent = unkept;
        let mut samples = Vec::with_capacity(taken.len());
        for t in &taken {
            cost_ns = cost_ns.saturating_add(t.cost_ns);
            // A sample of a virtual thread (its carrier ran it inside a
            // silent root call) is the virtual thread's, by the Java id its
            // probe state carries; the CLI knows it from the thread's
            // `Thread` message.
            let thread = match self.envs.get(&t.env) {
                _ if t.key != 0 => t.key,
                Some(EnvOf::Java(id)) => *id,
                Some(EnvOf::Own) => continue,
                None => {
                    self.unknown += 1;
                    continue;
                }
            };
            let kept = &t.frames[..t.frames.len().min(depth)];
            let stop = &self.stop;
            let frames = stacks::frame_ids(self.jvmti, jni, kept, &mut |m| send(stop, m));
            samples.push(StackSample {
                thread,
                state: if t.native {
                    SampledState::Native
                } else {
                    SampledState::Running
                },
                cpu_ns,
                frames,
                truncated: t.frames.len() > depth,
            });
        }
        self.taken = taken;
        self.sent_at = Some(Instant::now());
        send(
            &self.stop,
            Message::StackSamples {
                time_ns,
                cost_ns,
                samples,
            },
        );
    }

    /// Maps `env` to its thread (sprig's own, or Java thread `java_id`,
    /// named to the CLI the first time).
    fn name_thread(&mut self, env: usize, java_id: u64, name: String) {
        if name.starts_with("sprig-") {
            self.envs.insert(env, EnvOf::Own);
        } else {
            self.envs.insert(env, EnvOf::Java(java_id));
            if self.announced.insert(java_id) {
                send(&self.stop, Message::SampledThread { java_id, name });
            }
        }
    }

    /// Maps the JNIEnv of every live thread to its Java id, naming new
    /// threads to the CLI.
    fn map_threads(&mut self, jni: Jni<'_>) {
        let jvmti = self.jvmti;
        jni.with_local_frame(16, |jni| {
            let Ok(threads) = jvmti.all_threads(&jni) else {
                return;
            };
            for t in threads {
                let eetop = jni.thread_id_by(t, self.eetop) as usize;
                if eetop != 0 {
                    let env = eetop.wrapping_add(self.env_offset);
                    if !self.envs.contains_key(&env) {
                        let name = jvmti.thread_name(&jni, t).unwrap_or_default();
                        let java_id = jni.thread_id_by(t, self.tid_field);
                        self.name_thread(env, java_id, name);
                    }
                }
                jni.delete_local(t);
            }
        });
    }
}

impl Drop for Drain {
    /// A drain that ends, by a panic too, deletes every timer.
    fn drop(&mut self) {
        *timers() = None;
    }
}
