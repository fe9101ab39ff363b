//! A session's begin and end for the probes: every per-session static
//! set in one place, and every probe silenced at once at the end.

use super::active::{ACTIVE_THREADS, NOT_SEEN, SETTLE_SEEN, publish};
use super::burst::BURST_EVERY;
use super::ring::{
    GENERATION, LOST, NATIVE_INNER, PARK_BUDGET, PARKED, PROFILING, REGION, RING_DEAD, SAMPLED,
    VIRTUAL, WAIT_BOUND_MS, native_inner_events,
};
use crate::ffi::Jni;
use crate::ffi::slots;
use crate::probe_class;
use sprig_wire::control::Timing;
use sprig_wire::ring::Region;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// A session starts recording into `region`.
pub fn begin_session(
    jni: Jni<'_>,
    region: Arc<Region>,
    wait_bound_ms: u32,
    timing: Timing,
    windows: bool,
) {
    super::windows::begin_session(windows);
    let followed = crate::env::get().is_some_and(|a| {
        let (followed, why) = crate::ffi::vthreads::follow(&a.vm);
        if let Some(why) = why {
            crate::outbox::post(sprig_wire::Message::Warning(format!(
                "virtual threads cannot be followed in this JVM ({why}): root calls on them are \
                 not profiled"
            )));
        }
        followed
    });
    VIRTUAL.store(followed, Ordering::Relaxed);
    PARKED.store(0, Ordering::Relaxed);
    PARK_BUDGET.store(region.segments() / 2, Ordering::Relaxed);
    *crate::sync::write(&REGION) = Some(region);
    NATIVE_INNER.store(0, Ordering::Relaxed);
    SAMPLED.store(timing == Timing::Sampled, Ordering::Relaxed);
    WAIT_BOUND_MS.store(wait_bound_ms.max(1), Ordering::Relaxed);
    LOST.store(0, Ordering::Relaxed);
    RING_DEAD.store(false, Ordering::Release);
    ACTIVE_THREADS.store(0, Ordering::SeqCst);
    SETTLE_SEEN.store(NOT_SEEN, Ordering::Relaxed);
    BURST_EVERY.store(0, Ordering::Relaxed);
    GENERATION.fetch_add(1, Ordering::AcqRel);
    PROFILING.store(true, Ordering::SeqCst);
    publish(jni);
    probe_class::set_on(jni, true);
}

/// The session ends: every probe is silenced at once (`Probe.on` and
/// `Probe.active` go to 0 and every thread state becomes stale).
pub fn end_session(jni: Jni<'_>) {
    BURST_EVERY.store(0, Ordering::Relaxed);
    super::windows::end_session();
    PROFILING.store(false, Ordering::Release);
    GENERATION.fetch_add(1, Ordering::SeqCst);
    // After the generation: a thread opening its slot either sees the new
    // generation or has its slot closed here (`Slot::open`).
    slots::close_all();
    if SAMPLED.load(Ordering::Relaxed) && probe_class::debug_on() {
        eprintln!(
            "sprig agent: sampled timing: {} events inside root contexts written natively",
            native_inner_events()
        );
    }
    probe_class::set_on(jni, false);
    publish(jni);
}
