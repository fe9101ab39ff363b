//! The active-thread count and `Probe.active`: threads inside a root
//! context, published to the probe class when the first one opens and
//! the last one closes, settled by the control thread as a backstop.

use super::ring::PROFILING;
use crate::ffi::Jni;
use crate::probe_class;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Threads currently inside a root context (low 32 bits, mirrored into
/// `Probe.active`) and root contexts opened so far (high 32 bits, wrapping):
/// one atomic add per root entry and exit keeps both.
pub(super) static ACTIVE_THREADS: AtomicU64 = AtomicU64::new(0);
const ONE_OPEN: u64 = 1 << 32;
/// Control thread only: the open count it saw with no thread inside a root
/// context while `Probe.active` was still raised (`NOT_SEEN` otherwise).
pub(super) static SETTLE_SEEN: AtomicU64 = AtomicU64::new(NOT_SEEN);
pub(super) const NOT_SEEN: u64 = u64::MAX;
/// How often the control thread looks at the count while `Probe.active` is
/// raised with no thread inside a root context: it lowers the field one to
/// two ticks later when no root context opened in between (socket read
/// timeouts round this up to the kernel's tick).
pub const SETTLE_TICK: Duration = Duration::from_millis(2);
/// Whether `Probe.active` was last written non-zero.
static PUBLISHED: AtomicBool = AtomicBool::new(false);

pub(super) fn open_root_context(jni: Jni<'_>) {
    // SeqCst pairs with `publish`: either this thread sees the flag
    // cleared and publishes itself, or it sees it set, when the field is
    // raised already and every later publish reads this count.
    ACTIVE_THREADS.fetch_add(1 + ONE_OPEN, Ordering::SeqCst);
    if !PUBLISHED.load(Ordering::SeqCst) {
        publish(jni);
    }
}

/// Leaving a root context counts down; true when no thread is inside one
/// any more, and the caller then lowers `Probe.active` (`publish`), so the
/// instrumented methods that run outside root contexts cost one load and a
/// branch again. (The field used to stay raised until no root context had
/// opened for a millisecond: on javac, whose partial root `Gen::genClass`
/// runs about once a millisecond, it never came down, and every
/// instrumented method called elsewhere paid the look at `Probe.INSIDE`.)
pub(super) fn close_root_context() -> bool {
    inside(ACTIVE_THREADS.fetch_sub(1, Ordering::SeqCst)) == 1
}

/// Root contexts opened so far in this session (wrapping at 2^32): what
/// windows timing's sampler counts a counting window's root calls by.
pub fn root_contexts_opened() -> u64 {
    ACTIVE_THREADS.load(Ordering::Relaxed) >> 32
}

/// Threads inside a counted root context now (a silent one raises no
/// count): what windows timing's original-bytes silence waits out before
/// it puts the classes back.
pub fn counted_root_contexts_open() -> i32 {
    inside(ACTIVE_THREADS.load(Ordering::SeqCst))
}

/// Threads inside a root context in a packed `ACTIVE_THREADS` value.
pub(super) fn inside(v: u64) -> i32 {
    v as u32 as i32
}

/// Writes `Probe.active` (under the probe class's write lock).
///
/// `PUBLISHED` is cleared before the count is read and set again only once
/// a non-zero value is in the field, so a thread that opens a root context
/// and skips publishing because it saw the flag set (`open_root_context`)
/// finds the field raised, and every later publish counts it until it
/// leaves. (Setting the flag before the field was written let a second
/// thread run its root body against a field still 0 for a few µs, and its
/// callees' probes recorded nothing: the reset test lost a call to `a`
/// while the two `leaf` calls inside it were recorded.)
pub(super) fn publish(jni: Jni<'_>) {
    probe_class::publish_active(
        jni,
        || {
            // A thread that saw the flag set before this store is counted
            // by the time `active_value` reads the count below.
            PUBLISHED.store(false, Ordering::SeqCst);
            active_value()
        },
        |v| PUBLISHED.store(v > 0, Ordering::SeqCst),
    );
}

/// Control thread, every tick: the backstop of the lowering at the close
/// of the last root context (`root_exit`), should a field be left raised
/// with no thread inside (every close to zero publishes after its count,
/// so this is defence, not a path the probes rely on): lowers
/// `Probe.active` to 0 once no thread has been inside a root context for a
/// whole tick (the open count did not move between two looks at a zero
/// count). Returns how long the control thread may wait before the next
/// look: `SETTLE_TICK` while the field is raised with no thread inside,
/// `None` (its own tick) otherwise.
pub fn settle_active(jni: Jni<'_>) -> Option<Duration> {
    let v = ACTIVE_THREADS.load(Ordering::SeqCst);
    if !PUBLISHED.load(Ordering::SeqCst) || inside(v) > 0 {
        SETTLE_SEEN.store(NOT_SEEN, Ordering::Relaxed);
        return None;
    }
    let opens = v >> 32;
    if SETTLE_SEEN.swap(opens, Ordering::Relaxed) == opens {
        SETTLE_SEEN.store(NOT_SEEN, Ordering::Relaxed);
        publish(jni);
        return None;
    }
    Some(SETTLE_TICK)
}

/// The value `Probe.active` should hold now.
pub(super) fn active_value() -> i32 {
    if PROFILING.load(Ordering::SeqCst) {
        inside(ACTIVE_THREADS.load(Ordering::SeqCst)).max(0)
    } else {
        0
    }
}
