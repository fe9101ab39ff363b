//! Windows timing (`SessionOptions::windows`): the probes count in
//! counting windows and are silent in the others. The window a root call
//! enters in decides for the whole call: a root entry in a silent window
//! opens a *silent* root context, which raises neither `Probe.active` nor
//! the thread's slot of `Probe.INSIDE`, so every probe inside takes the
//! path it takes outside root contexts (a load and a branch) and records
//! nothing; only the root's own entry and exit record, with their
//! timestamps (`SilentRootEntry`, `SilentRootExit`), which time every
//! silent root call.
//!
//! The stack sampler switches the windows (`set_silent`) and sends a
//! thread's stack sample only when the thread was inside a silent root
//! context both before and after the round's stack walk: each open silent
//! root context marks its Java thread id in `OWNER`/`SEQ` (an odd
//! sequence number while open), which the sampler reads before and after
//! the walk (`marks`, `inside_before_and_after`). The window stays silent
//! through the round, so any root call the thread entered in between is
//! silent too: at the walk the thread was in a silent root call, or
//! between two (its stack then holds no root frame and the CLI credits
//! nothing). Root calls much shorter than a walk end and begin again
//! between the two reads; the sequence number is not compared, so their
//! samples still count.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

/// The session runs windows timing.
static WINDOWS: AtomicBool = AtomicBool::new(false);
/// A silent window is on: root entries open silent root contexts.
static SILENT: AtomicBool = AtomicBool::new(false);
/// The cost tail runs: root entries open silent root contexts.
static TAIL: AtomicBool = AtomicBool::new(false);
/// The cost tail's warm-up: silent root contexts open without recording
/// (the JIT recompiles the code that deoptimised when the probes' paths
/// switched; calls timed meanwhile measured up to four times their
/// recorded latency on `fixtures.Calls::root`).
static TAIL_WARMING: AtomicBool = AtomicBool::new(false);
/// The start of a silent window in which the JIT settles
/// (`WindowOptions::settle_ms`): silent root contexts opened now are timed
/// but open no silent word and no mark, so no stack sample is taken of
/// them.
static SETTLING: AtomicBool = AtomicBool::new(false);
/// Root calls the current counting window may still count
/// (`WindowOptions::counting_calls`; `NO_QUOTA`: no bound): a root entry
/// that finds it spent opens a silent root context, so a window of
/// `CALLS` counts exactly `CALLS` root calls.
static QUOTA: AtomicI64 = AtomicI64::new(NO_QUOTA);
const NO_QUOTA: i64 = i64::MAX;

/// Silent root calls closed since the cost tail's warm-up ended.
static TAIL_CLOSED: AtomicU64 = AtomicU64::new(0);

const SLOTS: usize = 1 << 12;
const MASK: u64 = SLOTS as u64 - 1;

/// Per Java-thread-id slot: the owner's id (0: free) and a sequence number,
/// odd while the owner is inside a silent root context. A thread whose
/// slot another thread holds is not marked: its samples are not credited.
static OWNER: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
static SEQ: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];

/// A session begins (`on`: with windows timing): counting first, every
/// mark cleared.
pub(super) fn begin_session(on: bool) {
    SILENT.store(false, Ordering::SeqCst);
    SETTLING.store(false, Ordering::SeqCst);
    QUOTA.store(NO_QUOTA, Ordering::SeqCst);
    end_tail();
    for (o, s) in OWNER.iter().zip(&SEQ) {
        o.store(0, Ordering::Relaxed);
        s.store(0, Ordering::Relaxed);
    }
    WINDOWS.store(on, Ordering::SeqCst);
}

/// The session ends: no root entry opens a silent root context any more.
pub(super) fn end_session() {
    WINDOWS.store(false, Ordering::SeqCst);
    SILENT.store(false, Ordering::SeqCst);
    SETTLING.store(false, Ordering::SeqCst);
    end_tail();
}

/// Whether a root entry now opens a silent root context.
#[inline]
pub(super) fn silent_now() -> bool {
    if TAIL.load(Ordering::Relaxed) {
        return true;
    }
    if !WINDOWS.load(Ordering::Relaxed) {
        return false;
    }
    SILENT.load(Ordering::Relaxed)
        || (QUOTA.load(Ordering::Relaxed) != NO_QUOTA && QUOTA.fetch_sub(1, Ordering::AcqRel) <= 0)
}

/// A counting window opens that may count `calls` root calls (0: as many
/// as enter in it).
pub fn set_quota(calls: u32) {
    let q = if calls == 0 {
        NO_QUOTA
    } else {
        i64::from(calls)
    };
    QUOTA.store(q, Ordering::SeqCst);
}

/// The cost tail begins: from now on to the session's end every root
/// entry opens a silent root context, and the silent root calls that
/// close are counted.
pub fn begin_tail() {
    TAIL_CLOSED.store(0, Ordering::SeqCst);
    TAIL_WARMING.store(true, Ordering::SeqCst);
    TAIL.store(true, Ordering::SeqCst);
}

/// The cost tail's warm-up ends: silent root calls entered from now on
/// are timed and counted.
pub fn tail_warmed() {
    TAIL_CLOSED.store(0, Ordering::SeqCst);
    TAIL_WARMING.store(false, Ordering::SeqCst);
}

/// Whether a silent root context opened now records its entry and exit
/// (not in the cost tail's warm-up).
#[inline]
pub(super) fn silent_timed() -> bool {
    !TAIL_WARMING.load(Ordering::Relaxed)
}

/// The cost tail ends with the session; silent root calls still open
/// close as they would.
fn end_tail() {
    TAIL.store(false, Ordering::SeqCst);
    TAIL_WARMING.store(false, Ordering::SeqCst);
}

/// Silent root calls closed since the cost tail began.
pub fn tail_closed() -> u64 {
    TAIL_CLOSED.load(Ordering::Relaxed)
}

/// A silent root call closed: counted while the cost tail runs.
#[inline]
pub(super) fn silent_closed() {
    if TAIL.load(Ordering::Relaxed) {
        TAIL_CLOSED.fetch_add(1, Ordering::Relaxed);
    }
}

/// The sampler switches to a silent window (`true`) or a counting one.
pub fn set_silent(silent: bool) {
    SILENT.store(silent && WINDOWS.load(Ordering::Relaxed), Ordering::SeqCst);
}

/// A silent window's settling begins (`true`) or ends: silent root
/// contexts opened meanwhile are not sampled.
pub fn set_settling(settling: bool) {
    SETTLING.store(settling, Ordering::SeqCst);
}

/// Whether a silent root context opened now may be sampled (not while the
/// JIT settles after a switch).
#[inline]
pub(super) fn silent_sampled() -> bool {
    !SETTLING.load(Ordering::Relaxed)
}

/// Thread `java_id` opened a silent root context.
pub(super) fn mark_open(java_id: u64) {
    if java_id == 0 {
        return;
    }
    let k = (java_id & MASK) as usize;
    let owner = OWNER[k].load(Ordering::Acquire);
    if owner == java_id
        || (owner == 0
            && OWNER[k]
                .compare_exchange(0, java_id, Ordering::AcqRel, Ordering::Acquire)
                .is_ok())
    {
        let s = SEQ[k].load(Ordering::Relaxed);
        // odd: inside
        SEQ[k].store(s | 1, Ordering::Release);
    }
}

/// Thread `java_id` closed its silent root context.
pub(super) fn mark_close(java_id: u64) {
    if java_id == 0 {
        return;
    }
    let k = (java_id & MASK) as usize;
    if OWNER[k].load(Ordering::Acquire) == java_id {
        let s = SEQ[k].load(Ordering::Relaxed);
        // even and past every odd value taken while it was open
        SEQ[k].store((s | 1).wrapping_add(1), Ordering::Release);
        OWNER[k].store(0, Ordering::Release);
    }
}

/// The mark of thread `java_id`: `Some(sequence)` while it is inside a
/// silent root context.
pub fn mark(java_id: u64) -> Option<u64> {
    if java_id == 0 {
        return None;
    }
    let k = (java_id & MASK) as usize;
    let s = SEQ[k].load(Ordering::Acquire);
    (OWNER[k].load(Ordering::Acquire) == java_id && s & 1 == 1).then_some(s)
}

/// Every slot's mark, read before a round (`(owner, sequence)` per slot).
pub fn marks() -> Vec<(u64, u64)> {
    OWNER
        .iter()
        .zip(&SEQ)
        .map(|(o, s)| {
            let seq = s.load(Ordering::Acquire);
            (o.load(Ordering::Acquire), seq)
        })
        .collect()
}

/// Whether thread `java_id` was inside a silent root context in `before`
/// (from [`marks`]) and is inside one now.
pub fn inside_before_and_after(before: &[(u64, u64)], java_id: u64) -> bool {
    mark(java_id).is_some()
        && before
            .get((java_id & MASK) as usize)
            .is_some_and(|&(o, s)| o == java_id && s & 1 == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A counting window of `CALLS` counts exactly that many root entries:
    /// the next ones open silent root contexts until the next window.
    #[test]
    fn a_counting_window_with_a_quota_counts_exactly_that_many_root_calls() {
        begin_session(true);
        set_quota(3);
        let silent: Vec<bool> = (0..5).map(|_| silent_now()).collect();
        assert_eq!(silent, [false, false, false, true, true]);
        set_quota(0);
        assert!(
            (0..100).all(|_| !silent_now()),
            "no quota: every entry counts"
        );
        set_quota(2);
        set_silent(true);
        assert!(silent_now(), "a silent window is silent whatever the quota");
        set_silent(false);
        assert_eq!(
            [silent_now(), silent_now(), silent_now()],
            [false, false, true]
        );
        end_session();
        assert!(!silent_now());
    }
}
