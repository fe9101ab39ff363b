//! Call-edge bursts (`sprig sample --edges`; Arnold and Grove's
//! timer-triggered bursts of sampling at method entry): the classes the
//! sampled stacks name hold dormant probes, and every interval the
//! `sprig-edges` thread (`sources::edges`) opens a burst of `budget`
//! method entries. While a burst is open, `Probe.active` and every slot of
//! `Probe.INSIDE` let a plain probe call into the agent ([`burst_open`]
//! is the first check of `enter` and `fast_enter`); each entry takes one
//! of the budget and records its call edge: the instrumented method (the
//! callee) and the frame below it (the caller, whatever it is: JDK code
//! included), read from the thread's own stack (JVMTI GetStackTrace of the
//! current thread, a few frames). The entry that takes the last of the
//! budget lowers `Probe.active` again, so between bursts a dormant probe
//! costs its Java check only.
//!
//! Each burst also measures the time its samples stand for: from its
//! start to its last sample, less the time the sampling itself took (over
//! the number of threads that sampled in it), so that the rate of entries
//! is not slowed by the cost of recording them. That wall time holds the
//! waits of the sampled threads for a core (a burst opens while its
//! threads are off the CPU as often as not), so the rates rest on the
//! threads' CPU time instead: each sample after a thread's first in a
//! burst closes one interval of that thread, the CPU time it used from
//! the end of its previous sample to the start of this one (less the
//! reading of its CPU clock, [`clock_read_ns`]), counted with the edge the
//! sample names. Entries per CPU second are intervals over their CPU time,
//! whatever the threads waited. Each edge's intervals count at most
//! twice their median ([`clip`], at every [`drain`]): the code right after
//! a burst's samples runs with cold caches, and a few long intervals
//! held most of the bursts' CPU time.

use crate::ffi::{Jni, MethodId};
use crate::probe_class;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Entries left in the open burst; 0 when none is open.
static BUDGET: AtomicI64 = AtomicI64::new(0);
/// Bursts may run (a session with `EdgeProbes`).
static ON: AtomicBool = AtomicBool::new(false);
/// The open burst's number, start and the end of its last sample
/// (CLOCK_MONOTONIC ns).
static GENERATION: AtomicU64 = AtomicU64::new(0);
static STARTED: AtomicU64 = AtomicU64::new(0);
static LAST: AtomicU64 = AtomicU64::new(0);
/// The open burst's samples, the time they took and the threads that took
/// them.
static SAMPLES: AtomicU64 = AtomicU64::new(0);
static COST: AtomicU64 = AtomicU64::new(0);
static THREADS: AtomicU32 = AtomicU32::new(0);
/// The open burst's intervals (a thread's sample after its first in the
/// burst) and the CPU time they held, ns.
static INTERVALS: AtomicU64 = AtomicU64::new(0);
static INTERVAL_CPU: AtomicU64 = AtomicU64::new(0);
/// What one reading of the thread CPU clock adds to an interval, ns
/// (measured at [`begin`]).
static CLOCK_READ: AtomicU64 = AtomicU64::new(0);
/// The burst's own path between two sampled entries of a thread, ns
/// ([`calibrate_path`]; 0 unmeasured).
static PATH: AtomicU64 = AtomicU64::new(0);
/// [`calibrate_path`] runs: only its own thread's entries are sampled.
static CALIBRATING: AtomicBool = AtomicBool::new(false);
/// Sampled entries with no caller to name (a thread's outermost frame) or
/// lost to a busy table.
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// The method ids of `sprig.rt.Probe` (the frames above the callee).
const PROBE_FRAMES_MAX: usize = 64;
static PROBE_FRAMES: [AtomicUsize; PROBE_FRAMES_MAX] =
    [const { AtomicUsize::new(0) }; PROBE_FRAMES_MAX];
static PROBE_FRAMES_N: AtomicUsize = AtomicUsize::new(0);
/// Frames read from a thread's stack per sample: the probe's own frames
/// (the native, `enter`), the callee and its caller, and room for more.
const FRAMES: usize = 8;

/// The edges sampled since the last drain: (caller, callee) method ids'
/// addresses and how many entries went along each, with the intervals
/// they closed and those intervals' CPU time.
static EDGES: Mutex<Option<HashMap<(usize, usize), EdgeAcc>>> = Mutex::new(None);
/// Intervals kept per edge between two drains for [`clip`] (the rest
/// count in the tally only).
const KEPT: usize = 1024;
/// An interval counts at most this many times its edge's median
/// ([`clip`]).
const CLIP: u64 = 2;

/// One edge's tally since the last drain, and its intervals (the first
/// [`KEPT`]).
#[derive(Default)]
struct EdgeAcc {
    tally: EdgeTally,
    kept: Vec<u64>,
}

/// One edge's sampled entries, the intervals they closed, the intervals'
/// CPU time in ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EdgeTally {
    pub samples: u32,
    pub intervals: u32,
    pub cpu_ns: u64,
}

thread_local! {
    /// The burst this thread last sampled in.
    static SEEN: Cell<u64> = const { Cell::new(0) };
    /// The thread's CPU clock at the end of its last sample, ns.
    static LAST_CPU: Cell<u64> = const { Cell::new(0) };
    /// On the thread that runs [`calibrate_path`]: its intervals.
    static PATH_INTERVALS: RefCell<Option<Vec<u64>>> = const { RefCell::new(None) };
}

/// One burst, closed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Burst {
    pub samples: u64,
    /// The time its samples stand for (module docs), ns.
    pub effective_ns: u64,
    pub cost_ns: u64,
    /// Its intervals and their CPU time (module docs), ns.
    pub intervals: u64,
    pub interval_cpu_ns: u64,
}

/// The median cost of one reading of the thread CPU clock, as an
/// interval between two samples holds it, ns.
pub fn clock_read_ns() -> u64 {
    let mut d: Vec<u64> = (0..65)
        .map(|_| {
            let a = sprig_wire::clock::thread_cpu_ns();
            let b = sprig_wire::clock::thread_cpu_ns();
            b.saturating_sub(a)
        })
        .collect();
    d.sort_unstable();
    d[d.len() / 2]
}
/// Whether a burst is open: the first check of the entry probes' native
/// paths (one relaxed load).
#[inline(always)]
pub fn burst_open() -> bool {
    BUDGET.load(Ordering::Relaxed) > 0
}

/// Bursts may begin (the classes hold their dormant probes now); `probe`
/// names the probe class's methods, the frames a probe has above the
/// method it is in.
pub fn begin(probe: &[MethodId]) {
    let n = probe.len().min(PROBE_FRAMES_MAX);
    for (slot, m) in PROBE_FRAMES.iter().zip(probe) {
        slot.store(m.addr(), Ordering::Relaxed);
    }
    PROBE_FRAMES_N.store(n, Ordering::Release);
    *crate::sync::lock(&EDGES) = Some(HashMap::new());
    DROPPED.store(0, Ordering::Relaxed);
    PATH.store(0, Ordering::Relaxed);
    CLOCK_READ.store(clock_read_ns(), Ordering::Relaxed);
    ON.store(true, Ordering::Release);
}

/// No more bursts: the open one is closed (its figures dropped) and
/// `Probe.active` and `Probe.INSIDE` lowered.
pub fn end(jni: Jni<'_>) {
    ON.store(false, Ordering::Release);
    BUDGET.store(0, Ordering::Release);
    probe_class::set_counting(jni, false);
    probe_class::set_active_for_bursts(jni, false);
    probe_class::set_inside_all(jni, false);
    *crate::sync::lock(&EDGES) = None;
}

/// Opens a burst of `budget` entries at `now_ns` (the `sprig-edges`
/// thread, every interval, after [`close_burst`]).
pub fn open_burst(jni: Jni<'_>, budget: u32, now_ns: u64) {
    if !ON.load(Ordering::Acquire) || budget == 0 {
        return;
    }
    GENERATION.fetch_add(1, Ordering::AcqRel);
    STARTED.store(now_ns, Ordering::Release);
    LAST.store(now_ns, Ordering::Release);
    SAMPLES.store(0, Ordering::Relaxed);
    COST.store(0, Ordering::Relaxed);
    THREADS.store(0, Ordering::Relaxed);
    INTERVALS.store(0, Ordering::Relaxed);
    INTERVAL_CPU.store(0, Ordering::Relaxed);
    BUDGET.store(i64::from(budget), Ordering::Release);
    // Under the probe class's write lock, from the budget: a sampler that
    // lowers it for the burst before cannot leave this one closed.
    lower_or_raise(jni);
}

/// Closes the open burst at `now_ns`: its figures, `None` when none was
/// open since the last close.
pub fn close_burst(jni: Jni<'_>, now_ns: u64) -> Option<Burst> {
    if STARTED.load(Ordering::Acquire) == 0 {
        return None;
    }
    let left = BUDGET.swap(0, Ordering::AcqRel);
    if left > 0 {
        lower_or_raise(jni);
    }
    let started = STARTED.swap(0, Ordering::AcqRel);
    // A budget used up ends at its last sample; one left ends now.
    let end = if left > 0 {
        now_ns
    } else {
        LAST.load(Ordering::Acquire)
    };
    let span = end.saturating_sub(started);
    let cost = COST.swap(0, Ordering::AcqRel);
    let threads = u64::from(THREADS.swap(0, Ordering::AcqRel).max(1));
    Some(Burst {
        samples: SAMPLES.swap(0, Ordering::AcqRel),
        effective_ns: span.saturating_sub(cost / threads),
        cost_ns: cost,
        intervals: INTERVALS.swap(0, Ordering::AcqRel),
        interval_cpu_ns: INTERVAL_CPU.swap(0, Ordering::AcqRel),
    })
}

/// One counting window, closed: the entries the probes counted in Java
/// while it was open, and how long it was open (wall time, ns).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counted {
    pub entries: u64,
    pub ns: u64,
}

/// A counting window of `length` between two bursts (the `sprig-edges`
/// thread, after [`close_burst`]): `Probe.active` at -1, so that every
/// entry probe adds one to its thread's counter in Java and calls
/// nothing, then back to 0. The rate of entries is taken where they run:
/// the bursts' own path, a call into the agent per entry, is hundreds of
/// times the gap between the entries of call-dense code and no
/// calibration of it took it out reliably (the rates came out 0.5-0.6 of
/// the count on one host, 0.8-1.3 on another). `None` while a burst is
/// open, bursts are off, or the probe class cannot count (no `COUNTS`
/// array: [`probe_class::ensure_counts`] at the bursts' start). `buf`:
/// the copy of the counters, kept by the caller between windows.
pub fn count_window(jni: Jni<'_>, length: Duration, buf: &mut Vec<i64>) -> Option<Counted> {
    if !ON.load(Ordering::Acquire) || burst_open() {
        return None;
    }
    let before = probe_class::counted(jni, buf)?;
    probe_class::set_counting(jni, true);
    let t0 = sprig_wire::clock::monotonic_ns();
    std::thread::sleep(length);
    let t1 = sprig_wire::clock::monotonic_ns();
    probe_class::set_counting(jni, false);
    let after = probe_class::counted(jni, buf)?;
    // Two threads sharing a slot (thread ids 4,096 apart) can lose each
    // other's increments; a slot never counts down otherwise.
    Some(Counted {
        entries: after.wrapping_sub(before).max(0) as u64,
        ns: t1.saturating_sub(t0),
    })
}

/// `Probe.active` as the budget says: raised while a burst is open.
fn lower_or_raise(jni: Jni<'_>) {
    probe_class::set_active_for_bursts(jni, BUDGET.load(Ordering::Acquire) > 0);
}

/// What [`drain`] hands over.
pub struct Drained {
    /// The edges, each interval's CPU time clipped ([`clip`]).
    pub edges: Vec<(MethodId, MethodId, EdgeTally)>,
    /// Entries dropped.
    pub dropped: u64,
    /// The CPU time the clipping took out of the edges' intervals, ns
    /// (the bursts' own sums of intervals hold it).
    pub clipped_ns: u64,
}

/// The edges sampled since the last drain, and the entries dropped.
pub fn drain() -> Drained {
    let taken = crate::sync::lock(&EDGES)
        .as_mut()
        .map(std::mem::take)
        .unwrap_or_default();
    let mut clipped_ns = 0u64;
    let edges = taken
        .into_iter()
        .map(|((a, b), mut acc)| {
            let cut = clip(&mut acc.kept, acc.tally.intervals);
            acc.tally.cpu_ns = acc.tally.cpu_ns.saturating_sub(cut);
            clipped_ns = clipped_ns.saturating_add(cut);
            (MethodId::from_addr(a), MethodId::from_addr(b), acc.tally)
        })
        .collect();
    Drained {
        edges,
        dropped: DROPPED.swap(0, Ordering::AcqRel),
        clipped_ns,
    }
}

/// The CPU time to take out of an edge's `intervals` intervals, of which
/// `kept` are the first (in any order; sorted here): every interval above
/// [`CLIP`] times their median counts at that bound, and the excess of the
/// kept ones stands for all `intervals` in proportion. A burst perturbs
/// the code that runs right after its samples (the first entries of a
/// burst find the probes' slow path and the code after it cold; an
/// interval in a burst's first entries held 5-12 µs against a median of
/// 0.5 µs: docs/stack-sampling.md, "Where the intervals' CPU time went"),
/// so a few long intervals held most of the bursts' CPU time, and the
/// rates came out about 3 times low.
pub fn clip(kept: &mut [u64], intervals: u32) -> u64 {
    if kept.is_empty() {
        return 0;
    }
    kept.sort_unstable();
    let median = kept[kept.len() / 2];
    let bound = median.saturating_mul(CLIP);
    let excess: u64 = kept
        .iter()
        .rev()
        .take_while(|&&x| x > bound)
        .map(|&x| x - bound)
        .sum();
    let n = kept.len() as u64;
    let all = u64::from(intervals).max(n);
    u64::try_from(u128::from(excess) * u128::from(all) / u128::from(n)).unwrap_or(u64::MAX)
}

fn is_probe_frame(m: MethodId) -> bool {
    let n = PROBE_FRAMES_N.load(Ordering::Acquire);
    PROBE_FRAMES[..n]
        .iter()
        .any(|f| f.load(Ordering::Relaxed) == m.addr())
}

/// An entry while a burst is open: takes one of the budget and records the
/// edge into the method entered (`Probe.nEnter`'s first step). Never
/// waits: a busy table drops the sample.
#[cold]
#[inline(never)]
pub fn sample(jni: Jni<'_>) {
    let calibrating = CALIBRATING.load(Ordering::Acquire);
    if calibrating
        && !PATH_INTERVALS
            .try_with(|p| p.borrow().is_some())
            .unwrap_or(false)
    {
        // Another thread's entry while the path is measured: not sampled.
        return;
    }
    if BUDGET
        .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |b| {
            (b > 0).then_some(b.saturating_sub(1))
        })
        .is_err()
    {
        return;
    }
    let t0 = sprig_wire::clock::monotonic_ns();
    let c0 = sprig_wire::clock::thread_cpu_ns();
    let generation = GENERATION.load(Ordering::Acquire);
    // The CPU time since this thread's last sample in this burst, if any.
    let interval = SEEN
        .try_with(|s| {
            if s.get() != generation {
                s.set(generation);
                THREADS.fetch_add(1, Ordering::AcqRel);
                None
            } else {
                let last = LAST_CPU.try_with(Cell::get).unwrap_or(c0);
                Some(
                    c0.saturating_sub(last)
                        .saturating_sub(CLOCK_READ.load(Ordering::Relaxed)),
                )
            }
        })
        .ok()
        .flatten();
    let recorded = if calibrating {
        // The path's calibration: the interval is all there is to keep.
        // The frames are read and the table taken as a sample does (the
        // stack walk leaves the caches and the thread's state as the next
        // interval of a real sample finds them), nothing recorded.
        let frames =
            crate::env::get().and_then(|agent| agent.jvmti.own_frames::<FRAMES>(&jni).ok());
        std::hint::black_box(frames);
        drop(crate::sync::try_lock(&EDGES));
        if let Some(cpu) = interval {
            let _ = PATH_INTERVALS.try_with(|p| {
                if let Some(v) = p.borrow_mut().as_mut() {
                    v.push(cpu);
                }
            });
        }
        true
    } else {
        record_edge(jni, interval)
    };
    if !recorded {
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
    if let Some(cpu) = interval
        && !calibrating
    {
        INTERVALS.fetch_add(1, Ordering::AcqRel);
        INTERVAL_CPU.fetch_add(cpu, Ordering::AcqRel);
    }
    let _ = LAST_CPU.try_with(|c| c.set(sprig_wire::clock::thread_cpu_ns()));
    let t1 = sprig_wire::clock::monotonic_ns();
    SAMPLES.fetch_add(1, Ordering::AcqRel);
    COST.fetch_add(t1.saturating_sub(t0), Ordering::AcqRel);
    LAST.fetch_max(t1, Ordering::AcqRel);
    if !burst_open() {
        // The last of the budget: the probes go quiet until the next burst.
        lower_or_raise(jni);
    }
}

/// Records the edge into the method entered, read from the thread's own
/// top frames, with the interval its entry closed; `false` when the
/// caller could not be named or the table was busy.
fn record_edge(jni: Jni<'_>, interval: Option<u64>) -> bool {
    crate::env::get()
        .and_then(|agent| agent.jvmti.own_frames::<FRAMES>(&jni).ok())
        .and_then(|(frames, n)| {
            let mut it = frames[..n].iter().flatten().copied();
            let callee = it.by_ref().find(|&m| !is_probe_frame(m))?;
            let caller = it.next()?;
            Some((caller, callee))
        })
        .is_some_and(|(caller, callee)| {
            let Some(mut guard) = crate::sync::try_lock(&EDGES) else {
                return false;
            };
            match guard.as_mut() {
                Some(map) => {
                    let acc = map.entry((caller.addr(), callee.addr())).or_default();
                    let t = &mut acc.tally;
                    t.samples = t.samples.saturating_add(1);
                    if let Some(cpu) = interval {
                        t.intervals = t.intervals.saturating_add(1);
                        t.cpu_ns = t.cpu_ns.saturating_add(cpu);
                        if acc.kept.len() < KEPT {
                            acc.kept.push(cpu);
                        }
                    }
                    true
                }
                None => false,
            }
        })
}

/// Calls of the empty method per batch of [`calibrate_path`].
const PATH_BATCH: i32 = 256;
/// [`calibrate_path`] runs at least this many batches, then stops once
/// the fastest batch is not among the last [`PATH_SETTLED`] (the JIT is
/// done with the loop), after [`PATH_BATCHES`] or after [`PATH_BUDGET`].
const PATH_MIN_BATCHES: usize = 40;
const PATH_SETTLED: usize = 20;
const PATH_BATCHES: usize = 400;
const PATH_BUDGET: Duration = Duration::from_millis(1500);

/// Measures the burst's own path between two sampled entries of a thread
/// (module docs) on the calling thread, before any burst: batches of
/// `Calibration.burst(n)` (`class`: n calls of an instrumented empty
/// method) run with every entry of this thread sampled and nobody else's
/// (only this thread's slot of `Probe.INSIDE` open: the other threads'
/// probes stay in Java); each batch's median interval, and the fastest of
/// those (until the JIT has compiled the loop and the probe the batches are
/// slower, and a disturbance only slows a batch). `None` when no batch
/// could be measured. Kept for the bursts' messages ([`path_ns`]).
pub fn calibrate_path(jni: Jni<'_>, class: crate::ffi::Local<'_>) -> Option<u64> {
    if !ON.load(Ordering::Acquire) || BUDGET.load(Ordering::Acquire) > 0 {
        return None;
    }
    let agent = crate::env::get()?;
    let java_id = agent
        .jvmti
        .current_thread(&jni)
        .ok()
        .and_then(|(_, t)| jni.thread_id(t))?;
    PATH_INTERVALS
        .try_with(|p| *p.borrow_mut() = Some(Vec::with_capacity(PATH_BATCH as usize)))
        .ok()?;
    probe_class::set_inside_only(jni, java_id);
    CALIBRATING.store(true, Ordering::Release);
    BUDGET.store(i64::MAX / 2, Ordering::Release);
    lower_or_raise(jni);
    let start = Instant::now();
    let mut medians: Vec<u64> = Vec::new();
    loop {
        let n = medians.len();
        let fastest_at = medians
            .iter()
            .enumerate()
            .min_by_key(|(_, m)| **m)
            .map_or(0, |(i, _)| i);
        let settled = n >= PATH_MIN_BATCHES && fastest_at + PATH_SETTLED < n;
        if settled || n >= PATH_BATCHES || start.elapsed() >= PATH_BUDGET {
            break;
        }
        // The batch's first entry closes no interval: the call from the
        // agent into Java is not the path.
        GENERATION.fetch_add(1, Ordering::AcqRel);
        if jni
            .call_static_void_int(class, "burst", PATH_BATCH)
            .is_err()
        {
            break;
        }
        let mut v = PATH_INTERVALS
            .try_with(|p| p.borrow_mut().as_mut().map(std::mem::take))
            .ok()
            .flatten()
            .unwrap_or_default();
        if v.len() >= PATH_BATCH as usize / 2 {
            v.sort_unstable();
            medians.push(v[v.len() / 2]);
        }
    }
    BUDGET.store(0, Ordering::Release);
    lower_or_raise(jni);
    CALIBRATING.store(false, Ordering::Release);
    probe_class::set_inside_all(jni, true);
    let _ = PATH_INTERVALS.try_with(|p| p.borrow_mut().take());
    let _ = SEEN.try_with(|s| s.set(0));
    if probe_class::debug_on() {
        eprintln!(
            "sprig agent: call-edge bursts' path: {} batches in {:?}, medians {:?}",
            medians.len(),
            start.elapsed(),
            medians
        );
    }
    let path = medians.iter().copied().min()?;
    PATH.store(path, Ordering::Relaxed);
    Some(path)
}

/// The burst's own path measured by [`calibrate_path`], ns; 0 unmeasured.
pub fn path_ns() -> u64 {
    PATH.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::clip;

    #[test]
    fn clip_takes_out_what_lies_above_twice_the_median() {
        // Nine intervals of 500 ns and one of 10 µs (a burst's cold first
        // entries): the long one counts at 1 µs.
        let mut v = vec![500; 9];
        v.push(10_000);
        assert_eq!(clip(&mut v, 10), 9_000);
        // Intervals within twice their median keep their CPU time (two
        // modes, as `a -> b` after `a`'s entry and after `spin`).
        let mut v = vec![90, 90, 380, 380, 380, 700];
        assert_eq!(clip(&mut v, 6), 0);
    }

    #[test]
    fn clip_scales_the_excess_of_the_kept_intervals_to_all_of_them() {
        let mut v = vec![100, 100, 100, 1_200];
        // 1,000 ns above the bound among 4 kept, 12 intervals in all.
        assert_eq!(clip(&mut v, 12), 3_000);
        assert_eq!(clip(&mut [], 5), 0);
        assert_eq!(clip(&mut [7], 1), 0);
    }
}
