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
//! (`Running`) and weighs `interval_us` of CPU time.
//!
//! Threads: the drain lists `/proc/self/task` every period and gives a
//! timer to each thread it has not seen (sprig's own `sprig-*` threads
//! excepted), and deletes the timers of threads that ended. A thread the
//! kernel runs that is not a Java thread (GC, JIT compiler) gets signals
//! too; the handler leaves them (no JNIEnv, or no Java frame).
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
//! or outside every root gives no sample.
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
use crate::ffi::{Capabilities, Event, FieldId, Jni, Jvmti, Local, MethodId};
use sprig_wire::Message;
use sprig_wire::clock;
use sprig_wire::control::{SampledState, StackOptions, StackSample, WindowOptions};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The drain thread's name (`sprig-*` threads are never sampled).
pub const THREAD_NAME: &str = "sprig-timer";
/// Slots in the pool: samples the handler can hold between two drains.
const SLOTS: usize = 128;
/// How often the drain empties the pool and looks for new threads.
const DRAIN: Duration = Duration::from_millis(10);

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
        CpuTimer::NEEDS
    }

    fn start(&mut self, agent: &'static Agent, _jni: Jni<'_>) -> Result<(), String> {
        for e in CpuTimer::NEEDS.events {
            agent
                .jvmti
                .set_event(*e, true)
                .map_err(|err| format!("stack sampling: cannot enable {e:?} events: {err}"))?;
        }
        ON.store(true, Ordering::SeqCst);
        let depth = self.opts.max_depth as usize + 1;
        let filter = self.windows.map(|(_, f)| f);
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
        // The drain deletes every timer as it ends.
        stop_thread(self.thread.take());
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
    stop: StopFlag,
    tid_field: FieldId,
    eetop: FieldId,
    /// JNIEnv address minus `eetop`, measured on this thread.
    env_offset: usize,
    frames: HashMap<MethodId, u32>,
    envs: HashMap<usize, EnvOf>,
    announced: HashSet<u64>,
    timers: HashMap<i32, ThreadTimer>,
    /// Threads that are sprig's or refused a timer.
    skipped: HashSet<i32>,
    own_tid: i32,
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
        // Every method of every loaded class gets its jmethodID.
        jni.with_local_frame(16, |jni| {
            if let Ok(classes) = jvmti.loaded_classes(&jni) {
                for c in classes {
                    let _ = jvmti.class_methods(c);
                    jni.delete_local(c);
                }
            }
        });
        Ok(Drain {
            jvmti,
            opts,
            schedule,
            outside_sent: 0,
            stop,
            tid_field,
            eetop,
            env_offset,
            frames: HashMap::new(),
            envs: HashMap::new(),
            announced: HashSet::new(),
            timers: HashMap::new(),
            skipped: HashSet::new(),
            own_tid: crate::ffi::gettid() as i32,
            unknown: 0,
            mapped_at: Instant::now(),
            sent_at: None,
            taken: Vec::with_capacity(SLOTS),
        })
    }

    fn run(&mut self, jni: Jni<'_>) {
        let stop = self.stop.clone();
        let mut next = Instant::now();
        loop {
            self.refresh_timers();
            if wait_until(&stop, next) {
                break;
            }
            if let Some(s) = &mut self.schedule {
                s.tick();
            }
            self.drain(jni);
            next = (next + DRAIN).max(Instant::now());
        }
        // Timers first: no new signal once they are gone.
        self.timers.clear();
    }

    /// Gives a timer to every thread that has none, and drops the timers
    /// of threads that ended.
    fn refresh_timers(&mut self) {
        let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
            return;
        };
        let interval = Duration::from_micros(u64::from(self.opts.interval_us));
        let mut alive = HashSet::with_capacity(self.timers.len() + 8);
        for e in dir.flatten() {
            let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            alive.insert(tid);
            if self.timers.contains_key(&tid) || self.skipped.contains(&tid) {
                continue;
            }
            let comm =
                std::fs::read_to_string(format!("/proc/self/task/{tid}/comm")).unwrap_or_default();
            if tid == self.own_tid || comm.starts_with("sprig-") {
                self.skipped.insert(tid);
                continue;
            }
            match ThreadTimer::start(tid, interval) {
                Ok(t) => {
                    self.timers.insert(tid, t);
                }
                Err(_) => {
                    self.skipped.insert(tid);
                }
            }
        }
        self.timers.retain(|tid, _| alive.contains(tid));
        self.skipped.retain(|tid| alive.contains(tid));
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
        if taken.iter().any(|t| !self.envs.contains_key(&t.env)) {
            self.map_threads(jni);
        }
        let depth = self.opts.max_depth as usize;
        let cpu_ns = u64::from(self.opts.interval_us) * 1000;
        let mut cost_ns = 0u64;
        let mut samples = Vec::with_capacity(taken.len());
        for t in &taken {
            cost_ns = cost_ns.saturating_add(t.cost_ns);
            let thread = match self.envs.get(&t.env) {
                Some(EnvOf::Java(id)) => *id,
                Some(EnvOf::Own) => continue,
                None => {
                    self.unknown += 1;
                    continue;
                }
            };
            let frames = t
                .frames
                .iter()
                .take(depth)
                .map(|m| stacks::frame_id(self.jvmti, &mut self.frames, &self.stop, jni, *m))
                .collect();
            samples.push(StackSample {
                thread,
                state: SampledState::Running,
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
                        if name.starts_with("sprig-") {
                            self.envs.insert(env, EnvOf::Own);
                        } else {
                            self.envs.insert(env, EnvOf::Java(java_id));
                            if self.announced.insert(java_id) {
                                send(&self.stop, Message::SampledThread { java_id, name });
                            }
                        }
                    }
                }
                jni.delete_local(t);
            }
        });
    }
}
