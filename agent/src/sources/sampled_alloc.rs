//! Sampled allocations (`--alloc-interval`): the JVM's heap sampler
//! (JVMTI `SetHeapSamplingInterval`, `SampledObjectAlloc`) sees every
//! allocation, in the JDK's code below the profiled subgraph too, which
//! the exact allocation probes of `--alloc` never see. The event is posted
//! on the allocating thread: a sample taken inside a root context becomes
//! one `RECORD_SAMPLED_ALLOC` record in that thread's own stream
//! (`probe::sampled_alloc`), so it lands on the frame open then, the
//! profiled method under which the unprofiled code allocated; the others
//! are counted and sent at the end (`SampledOutside`), and attributed to
//! the allocating thread's stack: the callback reads the thread's own
//! stack (JVMTI GetStackTrace on the current thread: no safepoint, at most
//! [`OUTSIDE_DEPTH`] frames) and adds the sample to the session's table of
//! (stack, class) -> samples and bytes, at most [`OUTSIDE_STACKS`] of
//! them (a sample beyond them, or whose stack cannot be read, is counted
//! as not kept). At the stop the table's methods get their frame ids from
//! the session's frame dictionary (`stacks::frame_ids`, `FrameMethod`)
//! and the table goes in batches as `SampledOutsideStacks`, all queued
//! after the `AllocClass` messages the callbacks queued. The measurement
//! knob `SPRIG_AGENT_FAULT=sampled-alloc-no-stacks` counts them only (the
//! baseline of `scripts/measure/outside-alloc-cost.sh`);
//! `sampled-alloc-cost` times each of them (CPU time) and says the mean.
//! The knob `sampled-alloc-duty` turns the heap sampler on in the even
//! turns of `sources::duty` and off in the odd ones, so that a benchmark
//! can set the iterations timed in either kind of turn against each
//! other in one session (`sprig-bench --only alloc-duty`).
//!
//! A sample inside a root context also says whether its allocating frame
//! (the thread's top Java frame, inlined frames counted, read with the
//! same one-frame walk of its own stack) is a method the session's probes
//! record: an allocation site the exact count sees too, rather than code
//! below the subgraph (`probed` in the record; the method's id is looked
//! up by name once per method and session, then kept by method id).
//!
//! What a sample stands for: HotSpot draws the bytes between two samples
//! of a thread from an exponential distribution of mean `interval`, so an
//! object of `size` bytes is sampled with probability
//! `1 - exp(-size / interval)`; the record carries `size` divided by that
//! probability (the Horvitz-Thompson estimate of the bytes its class
//! allocated there): about `interval` for a small object, about `size`
//! for an object much larger than the interval.
//!
//! The capability can be held by one JVMTI environment at a time (another
//! profiler's agent may hold it): the session checks it first and, when
//! it is not to be had, says so in one line and records exact allocations
//! only. The test hook `SPRIG_AGENT_FAULT=sampled-alloc-held` makes a
//! second environment take it just before the check, as another agent
//! would. Classes get ids of their own, named with `AllocClass` before the
//! first record that carries one (queued through `outbox::post`: a JVM
//! thread never waits on the socket).

use super::{Ending, Needs, Source};
use crate::env::Agent;
use crate::ffi::{Capabilities, Event, Jni, Jvmti, Local, MethodId};
use crate::outbox;
use crate::probe;
use sprig_wire::control::{OutsideStack, OutsideStacks};
use sprig_wire::{Message, clock};
use std::cell::Cell;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Whether a session's sampler runs (events may still come in for a
/// moment after it stopped).
static ON: AtomicBool = AtomicBool::new(false);
/// The interval of the running session, in bytes.
static INTERVAL: AtomicU32 = AtomicU32::new(0);
/// Samples outside every root context in this session, and their bytes.
static OUTSIDE: AtomicU64 = AtomicU64::new(0);
static OUTSIDE_BYTES: AtomicU64 = AtomicU64::new(0);
/// The session's last figures were queued ([`finish`]).
static FINISHED: AtomicBool = AtomicBool::new(false);
/// The classes named so far in this session: JVMTI signature -> id.
static CLASSES: Mutex<Option<HashMap<String, u32>>> = Mutex::new(None);
/// The top frames of samples inside root contexts whose method has a
/// session id: `MethodId::addr` -> id (whether the id records is asked
/// each time: a dormant method's probes may be switched on later).
static KNOWN: Mutex<Option<HashMap<usize, u32>>> = Mutex::new(None);
/// `MethodId::addr` of `java.lang.Object.clone()` (0: not known): a copy
/// is allocated in its native frame, on behalf of its caller.
static OBJECT_CLONE: AtomicUsize = AtomicUsize::new(0);
/// The stacks of the samples outside every root context in this session.
static TABLE: Mutex<Option<Outside>> = Mutex::new(None);
/// Whether samples outside every root context are kept by stack (not with
/// the measurement knob `sampled-alloc-no-stacks`: counted only, as the
/// cost's baseline).
static STACKS: AtomicBool = AtomicBool::new(true);
/// Measurement knob `sampled-alloc-cost`: the samples outside roots kept
/// by stack are timed (the calling thread's CPU time around the stack's
/// read and the table's update), and the stop says how many and their
/// mean in one warning.
static TIMED: AtomicBool = AtomicBool::new(false);
static TIMED_SAMPLES: AtomicU64 = AtomicU64::new(0);
static TIMED_NS: AtomicU64 = AtomicU64::new(0);
static TIMED_WALK_NS: AtomicU64 = AtomicU64::new(0);

/// Deepest stack kept for a sample outside every root context.
pub const OUTSIDE_DEPTH: usize = 64;
/// Most (stack, class) pairs kept in a session.
pub const OUTSIDE_STACKS: usize = 4096;
/// Stacks per `SampledOutsideStacks` message.
const BATCH: usize = 256;

/// The samples outside every root context by (stack, class): a key's hash
/// -> its entry (two keys of one hash: the second is not kept).
#[derive(Default)]
struct Outside {
    kept: HashMap<u64, Kept>,
    unkept: u64,
    unkept_bytes: u64,
}

/// One (stack, class) pair's samples.
struct Kept {
    class: u32,
    /// `MethodId::addr` of each frame, the leaf first.
    frames: Box<[usize]>,
    truncated: bool,
    samples: u64,
    bytes_est: u64,
}

impl Outside {
    /// Adds one sample of `bytes_est` to (`frames`, `class`).
    fn add(&mut self, class: u32, frames: &[usize], truncated: bool, bytes_est: u64) {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (class, truncated, frames).hash(&mut h);
        let key = h.finish();
        let full = self.kept.len() >= OUTSIDE_STACKS;
        match self.kept.get_mut(&key) {
            Some(k) if k.class == class && k.truncated == truncated && *k.frames == *frames => {
                k.samples = k.samples.saturating_add(1);
                k.bytes_est = k.bytes_est.saturating_add(bytes_est);
            }
            None if !full => {
                self.kept.insert(
                    key,
                    Kept {
                        class,
                        frames: frames.into(),
                        truncated,
                        samples: 1,
                        bytes_est,
                    },
                );
            }
            _ => self.not_kept(bytes_est),
        }
    }

    fn not_kept(&mut self, bytes_est: u64) {
        self.unkept = self.unkept.saturating_add(1);
        self.unkept_bytes = self.unkept_bytes.saturating_add(bytes_est);
    }
}

/// Test hook: the environment that holds the capability in place of
/// another agent, kept for the JVM's life.
static SQUATTER: OnceLock<Option<Jvmti>> = OnceLock::new();

/// The sampled allocation source of one session.
pub struct SampledAllocs {
    interval: u32,
    prime: bool,
    /// The turns' thread of `sampled-alloc-duty`.
    duty: Option<super::stacks::Running>,
}

impl SampledAllocs {
    pub const NEEDS: Needs = Needs {
        capabilities: Capabilities {
            sampled_object_alloc: true,
            ..Capabilities::NONE
        },
        events: &[Event::SampledObjectAlloc],
        ring: true,
    };

    pub const NAME: &'static str = "sampled allocations";

    /// A source sampling every `interval` bytes on average (not 0).
    ///
    /// HotSpot draws each thread's next sample point when it creates the
    /// thread and after each sample, with the interval set then (512 KiB
    /// unless set), and in a TLAB it samples from the thread's next TLAB
    /// refill on: a thread that lives when the sampler starts draws its
    /// first sample after about 512 KiB of its allocations (measured:
    /// `fixtures.Allocs`' 1,000 root calls under `sprig run` drew 207 to
    /// 611 of their 669 samples in 6 of 20 runs, 645-723 in the rest).
    /// With `prime` (a session that starts with the JVM, on the thread
    /// that runs `main`), [`prime_this_thread`] draws this thread's first
    /// sample from garbage, so `main` is sampled with the session's
    /// interval from its first allocation on (20 of 20 runs: 690-776 for
    /// the 730 of the fixture with its copies). An attached session does not allocate in a running JVM:
    /// its threads are sampled from their first sample on, which a thread
    /// that allocates much reaches soon (the guide says so).
    pub fn new(interval: u32, prime: bool) -> SampledAllocs {
        SampledAllocs {
            interval,
            prime,
            duty: None,
        }
    }

    /// The one line a session shows when the source cannot run.
    pub fn unavailable(why: &str) -> String {
        format!("--alloc-interval: no sampled allocations, exact allocations only ({why})")
    }
}

impl Source for SampledAllocs {
    fn name(&self) -> &'static str {
        SampledAllocs::NAME
    }

    fn needs(&self) -> Needs {
        SampledAllocs::NEEDS
    }

    fn check(&self, agent: &Agent) -> Result<(), String> {
        if crate::error::fault_named("sampled-alloc-held") {
            SQUATTER.get_or_init(|| {
                let env = agent.vm.new_jvmti().ok()?;
                env.add_capabilities(SampledAllocs::NEEDS.capabilities)
                    .ok()?;
                Some(env)
            });
        }
        let want = SampledAllocs::NEEDS.capabilities;
        match agent.jvmti.potential_capabilities() {
            Ok(have) if want.within(have) => Ok(()),
            Ok(_) => Err(
                "can_generate_sampled_object_alloc_events is held by another JVMTI environment \
                 or not offered by this JVM"
                    .into(),
            ),
            Err(e) => Err(format!("GetPotentialCapabilities: {e}")),
        }
    }

    fn start(&mut self, agent: &'static Agent, jni: Jni<'_>) -> Result<(), String> {
        *crate::sync::lock(&CLASSES) = Some(HashMap::new());
        *crate::sync::lock(&TABLE) = Some(Outside::default());
        *crate::sync::lock(&KNOWN) = Some(HashMap::new());
        STACKS.store(
            !crate::error::fault_named("sampled-alloc-no-stacks"),
            Ordering::Relaxed,
        );
        TIMED.store(
            crate::error::fault_named("sampled-alloc-cost"),
            Ordering::Relaxed,
        );
        TIMED_SAMPLES.store(0, Ordering::Relaxed);
        TIMED_NS.store(0, Ordering::Relaxed);
        TIMED_WALK_NS.store(0, Ordering::Relaxed);
        OUTSIDE.store(0, Ordering::Relaxed);
        OUTSIDE_BYTES.store(0, Ordering::Relaxed);
        FINISHED.store(false, Ordering::Release);
        let clone = jni.with_local_frame(4, |jni| {
            let object = jni.find_class("java/lang/Object").ok().flatten()?;
            jni.method_id(object, "clone", c"()Ljava/lang/Object;").ok()
        });
        OBJECT_CLONE.store(clone.map_or(0, |m| m.addr()), Ordering::Relaxed);
        let interval = i32::try_from(self.interval).unwrap_or(i32::MAX).max(1);
        agent
            .jvmti
            .set_heap_sampling_interval(interval)
            .map_err(|e| format!("SetHeapSamplingInterval({interval}): {e}"))?;
        INTERVAL.store(interval as u32, Ordering::Relaxed);
        ON.store(true, Ordering::Release);
        agent
            .jvmti
            .set_event(Event::SampledObjectAlloc, true)
            .map_err(|e| format!("cannot enable the SampledObjectAlloc event: {e}"))?;
        if crate::error::fault_named("sampled-alloc-duty") {
            super::duty::start(agent, "sprig-alloc-duty", &mut self.duty, move |_, on| {
                let _ = agent.jvmti.set_event(Event::SampledObjectAlloc, on);
            })?;
        }
        if self.prime && !prime_this_thread(jni) {
            outbox::post(Message::Warning(format!(
                "--alloc-interval: the main thread's first sample did not come within {} MiB \
                 of garbage; its first allocations may go unsampled",
                (PRIME_ARRAYS * PRIME_BYTES as usize) >> 20
            )));
        }
        Ok(())
    }

    fn stop(&mut self, agent: &'static Agent, jni: Jni<'_>, _ending: &mut Ending) {
        super::stacks::stop_thread(self.duty.take());
        finish(agent, jni, None);
    }
}

thread_local! {
    /// [`prime_this_thread`]'s state on this thread: 0 not priming, 1
    /// priming (the next sample is garbage's), 2 the sample came.
    static PRIMING: Cell<u8> = const { Cell::new(0) };
}

/// Arrays [`prime_this_thread`] may allocate, each [`PRIME_BYTES`] long:
/// small beside any heap, so that none can fail for want of room.
const PRIME_ARRAYS: usize = 1024;
const PRIME_BYTES: i32 = 64 << 10;

/// Allocates garbage on the calling thread until the heap sampler takes
/// a sample of it (not recorded), so that the thread's next sample point
/// is drawn with the session's interval; at most [`PRIME_ARRAYS`] arrays
/// of [`PRIME_BYTES`] (the point drawn with 512 KiB's mean lies beyond
/// 64 MiB once in e^128). Whether the sample came.
fn prime_this_thread(jni: Jni<'_>) -> bool {
    PRIMING.with(|p| p.set(1));
    for _ in 0..PRIME_ARRAYS {
        if let Some(a) = jni.new_array(2, PRIME_BYTES) {
            jni.delete_local(a);
        }
        if PRIMING.with(Cell::get) == 2 {
            break;
        }
    }
    PRIMING.with(|p| p.replace(0)) == 2
}

/// The VM is dying (`session`'s VMDeath handler, on the thread the VM
/// delivers it to): the samples outside every root context, their totals
/// and stacks, are queued now, naming the stacks' frames for at most
/// [`VM_DEATH_BOUND`] (the stacks left then are counted as not kept), for
/// the handler's flush; the process may end before the session's
/// teardown stops the source. Nothing when no sampler runs.
pub fn at_vm_death(agent: &'static Agent, jni: Jni<'_>) {
    if ON.load(Ordering::Acquire) {
        finish(agent, jni, Some(Instant::now() + VM_DEATH_BOUND));
    }
}

/// Longest the VMDeath handler spends naming the stacks outside roots.
const VM_DEATH_BOUND: Duration = Duration::from_millis(200);

/// The sampler off and the session's last figures queued, once per
/// session (at VMDeath or at the stop, whichever comes first); stacks are
/// named until `deadline`.
fn finish(agent: &'static Agent, jni: Jni<'_>, deadline: Option<Instant>) {
    ON.store(false, Ordering::Release);
    if FINISHED.swap(true, Ordering::AcqRel) {
        return;
    }
    let _ = agent.jvmti.set_event(Event::SampledObjectAlloc, false);
    outbox::post(Message::SampledOutside {
        samples: OUTSIDE.swap(0, Ordering::Relaxed),
        bytes_est: OUTSIDE_BYTES.swap(0, Ordering::Relaxed),
    });
    if TIMED.load(Ordering::Relaxed) {
        let n = TIMED_SAMPLES.load(Ordering::Relaxed);
        let ns = TIMED_NS.load(Ordering::Relaxed);
        let walk = TIMED_WALK_NS.load(Ordering::Relaxed);
        outbox::post(Message::Warning(format!(
            "sampled-alloc-cost: {n} samples outside roots kept by stack, {ns} ns of CPU time \
                 in all ({} ns each reading the stack), {} ns each",
            walk / n.max(1),
            ns / n.max(1)
        )));
    }
    let table = crate::sync::lock(&TABLE).take();
    if let Some(table) = table {
        send_stacks(agent.jvmti, jni, table, deadline);
    }
    *crate::sync::lock(&CLASSES) = None;
    *crate::sync::lock(&KNOWN) = None;
}

/// The bytes of allocation a sample of an object of `size` bytes stands
/// for, with samples every `interval` bytes on average: `size` over the
/// chance that the sampler picks such an object.
pub fn weight(size: u64, interval: u32) -> u64 {
    let interval = f64::from(interval.max(1));
    if size == 0 {
        return interval as u64;
    }
    let s = size as f64;
    let p = -(-s / interval).exp_m1();
    if p <= 0.0 {
        return interval as u64;
    }
    (s / p).round() as u64
}

/// An allocation was sampled on the calling thread (`session`'s
/// `VmEvents`); inside a root context with `--alloc=live` the object is
/// tagged (`live::tag`); outside every root context it goes into the
/// table by the thread's stack.
pub fn on_sample(jvmti: &Jvmti, jni: Jni<'_>, object: Local<'_>, class: Local<'_>, size: u64) {
    if PRIMING.with(|p| p.get() == 1 && p.replace(2) == 1) {
        return;
    }
    if !ON.load(Ordering::Acquire) {
        return;
    }
    let est = weight(size, INTERVAL.load(Ordering::Relaxed));
    let tag = || super::live::tag(jvmti, object);
    let probed = || top_frame_probed(jvmti, jni);
    if !probe::sampled_alloc(size, est, || class_id(jvmti, class), tag, probed) {
        OUTSIDE.fetch_add(1, Ordering::Relaxed);
        OUTSIDE_BYTES.fetch_add(est, Ordering::Relaxed);
        if !STACKS.load(Ordering::Relaxed) {
            return;
        }
        if TIMED.load(Ordering::Relaxed) {
            let t0 = clock::thread_cpu_ns();
            outside_stack(jvmti, jni, class, est);
            let ns = clock::thread_cpu_ns().saturating_sub(t0);
            TIMED_SAMPLES.fetch_add(1, Ordering::Relaxed);
            TIMED_NS.fetch_add(ns, Ordering::Relaxed);
        } else {
            outside_stack(jvmti, jni, class, est);
        }
    }
}

/// Whether the calling thread's top Java frame is a method whose probes
/// record in this session (false when it cannot be read); under
/// `Object.clone()`, which copies for its caller, the caller's frame.
fn top_frame_probed(jvmti: &Jvmti, jni: Jni<'_>) -> bool {
    let Ok((frames, n)) = jvmti.own_frames::<2>(&jni) else {
        return false;
    };
    let clone = OBJECT_CLONE.load(Ordering::Relaxed);
    let top = match frames[0] {
        Some(m) if clone != 0 && m.addr() == clone && n > 1 => frames[1],
        f => f.filter(|_| n > 0),
    };
    let Some(m) = top else {
        return false;
    };
    let kept = crate::sync::lock(&KNOWN)
        .as_ref()
        .and_then(|k| k.get(&m.addr()).copied());
    let id = match kept {
        Some(id) => id,
        None => {
            let Some(id) = session_id(jvmti, jni, m) else {
                return false;
            };
            if let Some(k) = crate::sync::lock(&KNOWN).as_mut() {
                k.insert(m.addr(), id);
            }
            id
        }
    };
    crate::methods::is_active(id)
}

/// The session's id of method `m`, if it has one (looked up by its
/// class's binary name, name and descriptor).
fn session_id(jvmti: &Jvmti, jni: Jni<'_>, m: MethodId) -> Option<u32> {
    let class = jvmti.method_declaring_class(&jni, m).ok()?;
    let sig = jvmti.class_signature(class);
    jni.delete_local(class);
    let class = super::stacks::binary_name(&sig.ok()?);
    let (name, descriptor) = jvmti.method_name(m).ok()?;
    crate::methods::known_id(&class, &name, &descriptor)
}

/// Adds a sample outside every root context to the table by the calling
/// thread's stack (one frame more than kept tells a cut stack).
fn outside_stack(jvmti: &Jvmti, jni: Jni<'_>, class: Local<'_>, est: u64) {
    let timed = TIMED.load(Ordering::Relaxed);
    let t0 = if timed { clock::thread_cpu_ns() } else { 0 };
    let walked = jvmti.own_frames::<{ OUTSIDE_DEPTH + 1 }>(&jni);
    if timed {
        TIMED_WALK_NS.fetch_add(clock::thread_cpu_ns().saturating_sub(t0), Ordering::Relaxed);
    }
    let class = class_id(jvmti, class);
    let mut table = crate::sync::lock(&TABLE);
    let Some(table) = table.as_mut() else {
        return;
    };
    match walked {
        Ok((frames, n)) if n > 0 && class != 0 => {
            let mut addrs = [0usize; OUTSIDE_DEPTH];
            let mut kept = 0;
            for m in frames[..n.min(OUTSIDE_DEPTH)].iter().flatten() {
                addrs[kept] = m.addr();
                kept += 1;
            }
            table.add(class, &addrs[..kept], n > OUTSIDE_DEPTH, est);
        }
        _ => table.not_kept(est),
    }
}

/// Sends the table: its frames named from the session's dictionary, then
/// the stacks in batches, every message queued (after the `AllocClass`
/// messages the callbacks queued), most bytes first.
fn send_stacks(jvmti: Jvmti, jni: Jni<'_>, mut table: Outside, deadline: Option<Instant>) {
    let mut kept: Vec<Kept> = table.kept.drain().map(|(_, k)| k).collect();
    kept.sort_by_key(|k| std::cmp::Reverse(k.bytes_est));
    let mut stacks = Vec::with_capacity(kept.len());
    for k in kept {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            table.unkept = table.unkept.saturating_add(k.samples);
            table.unkept_bytes = table.unkept_bytes.saturating_add(k.bytes_est);
            continue;
        }
        let methods: Vec<MethodId> = k.frames.iter().map(|&a| MethodId::from_addr(a)).collect();
        let frames = jni.with_local_frame(16, |jni| {
            super::stacks::frame_ids(jvmti, jni, &methods, &mut outbox::post)
        });
        stacks.push(OutsideStack {
            class: k.class,
            frames,
            truncated: k.truncated,
            samples: k.samples,
            bytes_est: k.bytes_est,
        });
    }
    let mut batches: Vec<Vec<OutsideStack>> = Vec::new();
    while stacks.len() > BATCH {
        let rest = stacks.split_off(BATCH);
        batches.push(std::mem::replace(&mut stacks, rest));
    }
    batches.push(stacks);
    for stacks in batches {
        outbox::post(Message::SampledOutsideStacks(OutsideStacks {
            stacks,
            unkept: table.unkept,
            unkept_bytes_est: table.unkept_bytes,
        }));
    }
}

/// The id of `class`, named to the CLI the first time; 0 when it cannot
/// be read.
fn class_id(jvmti: &Jvmti, class: Local<'_>) -> u32 {
    let Ok(sig) = jvmti.class_signature(class) else {
        return 0;
    };
    let mut classes = crate::sync::lock(&CLASSES);
    let Some(classes) = classes.as_mut() else {
        return 0;
    };
    if let Some(&id) = classes.get(&sig) {
        return id;
    }
    let id = classes.len() as u32 + 1;
    classes.insert(sig.clone(), id);
    outbox::post(Message::AllocClass { id, class: sig });
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_outside_table_adds_up_and_stays_bounded() {
        let mut t = Outside::default();
        t.add(1, &[10, 20], false, 100);
        t.add(1, &[10, 20], false, 50);
        t.add(2, &[10, 20], false, 7);
        t.add(1, &[10, 20], true, 9);
        t.add(1, &[10], false, 3);
        assert_eq!(t.kept.len(), 4);
        let k = t
            .kept
            .values()
            .find(|k| k.class == 1 && !k.truncated && *k.frames == [10, 20])
            .expect("kept");
        assert_eq!((k.samples, k.bytes_est), (2, 150));
        for i in 0..OUTSIDE_STACKS {
            t.add(3, &[i, i + 1], false, 1);
        }
        assert_eq!(t.kept.len(), OUTSIDE_STACKS);
        assert_eq!((t.unkept, t.unkept_bytes), (4, 4));
        // A pair kept before the table filled still adds up.
        t.add(2, &[10, 20], false, 1);
        assert_eq!(t.unkept, 4);
    }

    #[test]
    fn a_sample_stands_for_the_interval_or_the_object() {
        // Small objects: about one interval each.
        assert_eq!(weight(0, 16_384), 16_384);
        let w = weight(16, 16_384);
        assert!((16_384..16_400).contains(&w), "{w}");
        // An object of one interval: sampled with chance 1 - 1/e.
        let w = weight(16_384, 16_384);
        assert_eq!(w, (16_384.0 / (1.0 - (-1.0f64).exp())).round() as u64);
        // Much larger than the interval: itself.
        assert_eq!(weight(10 << 20, 16_384), 10 << 20);
    }
}
