//! The FFM `fast_*` functions (critical downcalls, JDK 22+): the common
//! cases of the natives, without JNI; anything else returns `FAST_SLOW`
//! and the probe class calls the JNI native (a garbage collection pause
//! to write first included).

use super::burst::burst_due_inside;
use super::ring::PROFILING;
use super::thread::with_state;
use super::wait::gc_due;
use crate::methods;
use sprig_wire::{Event, EventKind};
use std::sync::atomic::Ordering;

/// A fast probe recorded what it had to (or had nothing to record).
pub const FAST_DONE: i32 = 0;
/// A fast probe did nothing: the Java side calls the JNI native instead.
pub const FAST_SLOW: i32 = 1;

/// Nothing to record here: done, unless this library runs no session (an
/// older copy of the agent bound the probe class's fast path in an earlier
/// attach), in which case the JNI native, bound to the current library,
/// decides.
#[inline(always)]
fn fast_nothing() -> i32 {
    if PROFILING.load(Ordering::Relaxed) {
        FAST_DONE
    } else {
        FAST_SLOW
    }
}

/// Fast `enter` (FFM critical downcall, JDK 22+): the common case of
/// `enter`; a first call (revelation needs JNI and JVMTI) and a full
/// segment (claiming one may wait) go to the JNI path.
#[inline]
pub fn fast_enter(id: u32) -> i32 {
    if super::edges::burst_open() {
        // a call-edge burst reads the stack: JNI
        return FAST_SLOW;
    }
    with_state(|s| {
        let d = s.depth();
        if d == 0 {
            return fast_nothing();
        }
        if s.busy.get() || !s.current() {
            return fast_nothing();
        }
        if gc_due(s) {
            return FAST_SLOW;
        }
        if !methods::is_active(id) {
            // A dormant method running inside a root context is revealed
            // on the JNI path (once).
            return if methods::dormant_entry_refused(id) {
                fast_nothing()
            } else {
                FAST_SLOW
            };
        }
        if !methods::was_called(id) {
            return FAST_SLOW;
        }
        if !s.try_push(Event::new(EventKind::MethodEntry, id, s.inner_now())) {
            return FAST_SLOW;
        }
        s.set_depth(d + 1);
        FAST_DONE
    })
    .unwrap_or(FAST_SLOW)
}

/// Fast `exit`: as `exit`, a full segment goes to the JNI path.
#[inline]
pub fn fast_exit(id: u32) -> i32 {
    with_state(|s| {
        let d = s.depth();
        if d <= 1 || s.busy.get() || !s.current() || !methods::is_active(id) {
            return fast_nothing();
        }
        if gc_due(s) {
            return FAST_SLOW;
        }
        let ts = s.inner_now();
        if ts >= s.next_burst.get() && burst_due_inside(s, ts) {
            // a burst inside a long root call: JNI calls it
            return FAST_SLOW;
        }
        if !s.try_push(Event::new(EventKind::MethodExit, id, ts)) {
            return FAST_SLOW;
        }
        s.set_depth(d - 1);
        FAST_DONE
    })
    .unwrap_or(FAST_SLOW)
}

/// Fast `rootEnter`: only a root nested in an open root context (a plain
/// entry); opening a root context (registration, publishing
/// `Probe.active`) takes the JNI path.
#[inline]
pub fn fast_root_enter(id: u32) -> i32 {
    with_state(|s| {
        if s.busy.get() {
            return fast_nothing();
        }
        let d = s.depth();
        if d == 0 || !s.current() || !methods::was_called(id) || gc_due(s) {
            return FAST_SLOW;
        }
        if !s.try_push(Event::new(EventKind::MethodEntry, id, s.inner_now())) {
            return FAST_SLOW;
        }
        s.set_depth(d + 1);
        FAST_DONE
    })
    .unwrap_or(FAST_SLOW)
}

/// Fast `rootExit`: only a root nested in an open root context (a plain
/// exit); closing a root context (lowering `Probe.active` when it is the
/// last one) takes the JNI path.
#[inline]
pub fn fast_root_exit(id: u32) -> i32 {
    with_state(|s| {
        let d = s.depth();
        if d == 0 && s.silent.get() > 0 {
            // a silent root context's exit (windows timing)
            return FAST_SLOW;
        }
        if d == 0 || s.busy.get() || !s.current() {
            return fast_nothing();
        }
        if d == 1 || gc_due(s) || !s.try_push(Event::new(EventKind::MethodExit, id, s.inner_now()))
        {
            return FAST_SLOW;
        }
        s.set_depth(d - 1);
        FAST_DONE
    })
    .unwrap_or(FAST_SLOW)
}
