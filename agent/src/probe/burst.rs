//! Calibration bursts: how often a thread's root call ends with one, and
//! the burst run at an exit inside a long root call.

use super::state::ThreadState;
use crate::ffi::Jni;
use std::sync::atomic::{AtomicU64, Ordering};

/// Clock ticks between two calibration bursts of one thread; 0 while no
/// burst may run (no calibration class in this JVM, or the agent's own
/// calibration is running).
pub(super) static BURST_EVERY: AtomicU64 = AtomicU64::new(0);

/// Lets root calls end with a calibration burst, one per thread every
/// `every_ticks` at most; 0 turns bursts off. Only once the calibration
/// class is defined (the probe class calls it) and while the agent's own
/// calibration is not running (its batches are root calls too).
pub fn set_burst_every(every_ticks: u64) {
    BURST_EVERY.store(every_ticks, Ordering::Relaxed);
}

/// Whether a thread inside a root context is due for a burst at an exit
/// inside it (`ts` past its next burst): bursts are on, and its root call
/// has run for a burst period already (a shorter one bursts as it
/// returns).
#[inline]
pub(super) fn burst_due_inside(s: &ThreadState, ts: u64) -> bool {
    let every = BURST_EVERY.load(Ordering::Relaxed);
    every != 0 && ts >= s.root_since.get().saturating_add(every)
}

/// A calibration burst inside a long root call, right after the exit just
/// recorded: the burst's calls run through the probes like any others
/// (the CCT builder recognises them at any depth and takes them out), by
/// a call of `Calibration.burst` from here. Anything it throws is cleared.
#[cold]
#[inline(never)]
pub(super) fn mid_root_burst(s: &ThreadState, ts: u64, jni: Jni<'_>) {
    let every = BURST_EVERY.load(Ordering::Relaxed);
    // Set first: the burst's own exits are not due.
    s.next_burst.set(ts.saturating_add(every));
    if let Some(class) = BURST_CLASS.get() {
        let _ = jni.call_static_void_int(class.as_local(), "burst", BURST_CALLS);
    }
}

/// Calls of the calibration class's empty method in a burst run from
/// [`mid_root_burst`] (the probe class's own bursts make `BURST_CALLS`).
pub(super) const BURST_CALLS: i32 = 32;

/// The calibration class, for [`mid_root_burst`]; set with the burst period.
pub(super) static BURST_CLASS: std::sync::OnceLock<crate::ffi::Global> = std::sync::OnceLock::new();

/// Keeps the calibration class for bursts inside long root calls (once per
/// JVM: the class is defined once).
pub fn set_burst_class(class: crate::ffi::Global) {
    let _ = BURST_CLASS.set(class);
}

/// Whether [`set_burst_class`] was called in this JVM.
pub fn has_burst_class() -> bool {
    BURST_CLASS.get().is_some()
}
