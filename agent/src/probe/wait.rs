//! Waits of a thread inside a root context (`--locks`): the start of a
//! wait is kept in the thread's state, and its end writes one wait record
//! (`sprig_wire::Wait`: kind, class of the monitor, start and length)
//! into the thread's own stream, where it lands on the frame open then,
//! the one that waited. A thread outside every root context, or whose
//! state belongs to another session, records nothing.
//!
//! Garbage collection pauses stop every thread at once and their events
//! may call no JNI: the pause is kept in a small table of the last
//! pauses, and each thread that was inside a root context writes it into
//! its own stream at its next probe (exact timing), under the frame it
//! was stopped in.

use super::ring::REGION;
use super::state::ThreadState;
use super::thread::with_state;
use sprig_wire::{ClockKind, SampledAlloc, Wait, WaitKind, clock};
use std::sync::atomic::{AtomicU64, Ordering};

/// The slot of `kind` in [`ThreadState::wait_since`].
fn slot(kind: WaitKind) -> usize {
    match kind {
        WaitKind::Blocked => 0,
        WaitKind::Waiting => 1,
        WaitKind::Parked => 2,
        WaitKind::Sleeping | WaitKind::Gc => 3,
    }
}

fn recording(s: &ThreadState) -> bool {
    s.depth() > 0 && !s.busy.get() && !s.disabled.get() && s.current()
}

/// The calling thread begins a wait of `kind`: its start is kept when it
/// is inside a root context of this session.
pub fn wait_begin(kind: WaitKind) {
    let _ = with_state(|s| {
        let at = if recording(s) { s.now() } else { 0 };
        s.wait_since[slot(kind)].set(at);
    });
}

/// The calling thread begins a contended monitor enter: as
/// [`wait_begin`], and when it is inside a root context the monitor's
/// owner is read now, after the start (it held the monitor when the wait
/// began; the reading is part of the wait), by what `owner` answers (an
/// id the CLI is told of, 0 for none), kept for the wait's record.
pub fn wait_begin_owned(kind: WaitKind, owner: impl FnOnce() -> u32) {
    let _ = with_state(|s| {
        let at = if recording(s) { s.now() } else { 0 };
        s.wait_since[slot(kind)].set(at);
        s.wait_owner[slot(kind)].set(if at == 0 { 0 } else { owner() });
    });
}

/// The calling thread begins a park or a sleep (`Waits`, the probes
/// `--locks` puts into the JDK's park and sleep methods): as
/// [`wait_begin`], and when the wait begins inside a root context the
/// class of the object it parks on is named now, before its start is
/// read (the blocker is an argument of the park method, gone at its
/// end), and the lock's owner after it, as [`wait_begin_owned`] reads a
/// monitor's (`owner`: an id the CLI is told of, 0 for none).
pub fn wait_begin_on(kind: WaitKind, class: impl FnOnce() -> u32, owner: impl FnOnce() -> u32) {
    let _ = with_state(|s| {
        let (at, owner) = if recording(s) {
            s.wait_class.set(class());
            let at = s.now();
            (at, owner())
        } else {
            (0, 0)
        };
        s.wait_since[slot(kind)].set(at);
        s.wait_owner[slot(kind)].set(owner);
    });
}

/// The park or sleep that [`wait_begin_on`] began ended: its record,
/// with the class named then, as [`wait_end`] writes it.
pub fn wait_end_on(kind: WaitKind) {
    let _ = with_state(|s| {
        let class = s.wait_class.replace(0);
        end_in(s, kind, || class);
    });
}

/// The calling thread's wait of `kind` ended: writes its record when the
/// wait began inside a root context and the thread is still in one,
/// naming the object's class by what `class` answers (an id the CLI is
/// told of; called only then, after the end was read: no JVM code runs
/// in it).
pub fn wait_end(kind: WaitKind, class: impl FnOnce() -> u32) {
    let _ = with_state(|s| end_in(s, kind, class));
}

fn end_in(s: &ThreadState, kind: WaitKind, class: impl FnOnce() -> u32) {
    let start = s.wait_since[slot(kind)].replace(0);
    let owner = s.wait_owner[slot(kind)].replace(0);
    if start == 0 || !recording(s) {
        return;
    }
    let end = s.now();
    let wait = Wait {
        kind,
        class: class(),
        start,
        ticks: end.saturating_sub(start),
        owner,
    };
    if let Some(rec) = wait.record(end) {
        s.push_record(&rec);
    }
}

/// An allocation sample on the calling thread (`sources::sampled_alloc`):
/// when the thread is inside a root context of this session its record
/// goes into the thread's own stream, where it lands on the frame open
/// now; `class` names the object's class, `tag` tags the object
/// (`--alloc=live`; 0: untagged) and `probed` says whether the allocating
/// frame is a method the probes record, all called only then. False when
/// nothing was written: outside every root context, on a thread that
/// records nothing, or one caught in the middle of its own write (the
/// sample then counts as outside). Never waits for a lock of the probes.
pub fn sampled_alloc(
    size: u64,
    bytes_est: u64,
    class: impl FnOnce() -> u32,
    tag: impl FnOnce() -> u64,
    probed: impl FnOnce() -> bool,
) -> bool {
    with_state(|s| {
        if !recording(s) || s.producer.try_borrow_mut().is_err() {
            return false;
        }
        let sample = SampledAlloc {
            class: class(),
            size: u32::try_from(size).unwrap_or(u32::MAX),
            bytes_est,
            tag: tag(),
            probed: probed(),
        };
        match sample.record(s.now()) {
            Some(rec) => {
                s.push_record(&rec);
                true
            }
            None => false,
        }
    })
    .unwrap_or(false)
}

/// Garbage collection pauses kept for the threads to pick up.
const PAUSES: usize = 64;
/// Pauses finished so far (the threads compare it with the last they saw).
static GC_EPOCH: AtomicU64 = AtomicU64::new(0);
/// The clock when the pause under way began (0: none).
static GC_START: AtomicU64 = AtomicU64::new(0);
/// Pause `n` at `n % PAUSES`: its start and length, in the session's ticks.
static PAUSE_START: [AtomicU64; PAUSES] = [const { AtomicU64::new(0) }; PAUSES];
static PAUSE_TICKS: [AtomicU64; PAUSES] = [const { AtomicU64::new(0) }; PAUSES];

/// The session's wall clock, `None` without a ring or with a CPU clock
/// (a pause takes no CPU time of the threads it stops). Never blocks.
fn gc_clock() -> Option<ClockKind> {
    let region = REGION.try_read().ok()?;
    match region.as_ref()?.clock() {
        ClockKind::ThreadCpu => None,
        wall => Some(wall),
    }
}

/// A garbage collection pause begins (JVMTI GarbageCollectionStart, on
/// the VM's thread inside the pause: no JNI, no JVMTI, nothing that
/// blocks).
pub fn gc_start() {
    if let Some(kind) = gc_clock() {
        GC_START.store(clock::read(kind).max(1), Ordering::Relaxed);
    }
}

/// The pause ends: it is kept for the threads that were inside a root
/// context, which write it into their own streams at their next probe
/// ([`gc_catch_up`]).
pub fn gc_finish() {
    let start = GC_START.swap(0, Ordering::Relaxed);
    let Some(kind) = gc_clock() else { return };
    if start == 0 {
        return;
    }
    let end = clock::read(kind);
    let n = GC_EPOCH.load(Ordering::Relaxed);
    let slot = (n % PAUSES as u64) as usize;
    PAUSE_START[slot].store(start, Ordering::Relaxed);
    PAUSE_TICKS[slot].store(end.saturating_sub(start), Ordering::Relaxed);
    GC_EPOCH.store(n + 1, Ordering::Release);
}

/// Whether a pause finished since the thread last looked: the probe then
/// writes it ([`gc_catch_up`]) before its own event (the FFM path leaves
/// it to the JNI path). One relaxed load.
#[inline(always)]
pub(super) fn gc_due(s: &ThreadState) -> bool {
    GC_EPOCH.load(Ordering::Relaxed) != s.gc_seen.get()
}

/// The thread opens a root context: pauses before it are not its.
#[inline(always)]
pub(super) fn gc_seen_now(s: &ThreadState) {
    s.gc_seen.set(GC_EPOCH.load(Ordering::Relaxed));
}

/// Writes the pauses that finished since the thread last looked and
/// began inside its root context as `(GC pause)` waits. It is called by
/// the thread's first probe after a pause, before that probe's event: the
/// thread was stopped in the frame open then, which the record lands on.
/// Exact timing only: under sampled timing most probes write from Java
/// and the frame open at the next native write is not the one stopped.
#[cold]
#[inline(never)]
pub(super) fn gc_catch_up(s: &ThreadState) {
    let epoch = GC_EPOCH.load(Ordering::Acquire);
    let seen = s.gc_seen.replace(epoch);
    if s.untimed.get() || !recording(s) {
        return;
    }
    let since = s.root_since.get();
    for n in seen.max(epoch.saturating_sub(PAUSES as u64))..epoch {
        let slot = (n % PAUSES as u64) as usize;
        let start = PAUSE_START[slot].load(Ordering::Relaxed);
        let ticks = PAUSE_TICKS[slot].load(Ordering::Relaxed);
        if start < since {
            continue;
        }
        let wait = Wait {
            kind: WaitKind::Gc,
            class: 0,
            start,
            ticks,
            owner: 0,
        };
        if let Some(rec) = wait.record(start.saturating_add(ticks)) {
            s.push_record(&rec);
        }
    }
}
