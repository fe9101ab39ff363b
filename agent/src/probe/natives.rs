//! The JNI natives of `sprig.rt.Probe`: entry and exit, root entry and
//! exit (opening and closing root contexts), and `Natives`, which binds
//! them with the revelation natives and the fast path for `ffi`.

use super::active::{close_root_context, open_root_context, publish};
use super::burst::{BURST_EVERY, burst_due_inside, mid_root_burst};
use super::edges;
use super::fast::{FAST_SLOW, fast_enter, fast_exit, fast_root_enter, fast_root_exit};
use super::revelation::{SITE_AGAIN, check_first_call, enter_dormant, reflect, site};
use super::ring::{GENERATION, PROFILING};
use super::thread::{enter_virtual, register, with_state};
use super::wait::{gc_catch_up, gc_due, gc_seen_now};
use super::windows;
use crate::ffi::Jni;
use crate::{allocs, methods};
use sprig_wire::record::RECORD_ALLOC;
use sprig_wire::{AllocRecord, Event, EventKind, RecordSlots};
use std::sync::atomic::Ordering;

/// `root_exit`: this call did not close the root context.
pub const ROOT_NESTED: i32 = 0;
/// `root_exit`: this call closed the thread's root context.
pub const ROOT_CLOSED: i32 = 1;
/// `root_exit`: the thread is due for a calibration burst before it
/// closes its root context. Nothing is recorded; the probe class runs
/// `Calibration.burst` (a few dozen calls of the instrumented empty
/// method) and calls `nRootExit` again, which closes the context. The CCT
/// builder measures the probes from those calls, on this thread right
/// after the root's own code, and takes the burst out of the profile
/// (wire `CALIBRATION_EMPTY_ID`). Only for a probe class that says it
/// does so (`probe_class::bursts_available`): an older one would take
/// the value for a closed context.
pub const ROOT_BURST_FIRST: i32 = 3;

/// The natives of `sprig.rt.Probe`, as `ffi` binds them.
pub struct Natives;

impl crate::ffi::ProbeNatives for Natives {
    const SITE_AGAIN: i32 = SITE_AGAIN;
    const FAST_SLOW: i32 = FAST_SLOW;

    #[inline(always)]
    fn enter(id: u32, jni: Jni<'_>) {
        enter(id, jni)
    }
    #[inline(always)]
    fn exit(id: u32, jni: Jni<'_>) {
        exit(id, jni)
    }
    #[inline(always)]
    fn root_enter(id: u32, jni: Jni<'_>) -> bool {
        root_enter(id, jni)
    }
    #[inline(always)]
    fn root_exit(id: u32, jni: Jni<'_>) -> i32 {
        root_exit(id, jni)
    }
    fn reflect(jni: Jni<'_>, method: crate::ffi::Local<'_>) -> bool {
        reflect(jni, method)
    }
    fn site(jni: Jni<'_>, site_id: u32, receiver: Option<crate::ffi::Local<'_>>) -> i32 {
        site(jni, site_id, receiver)
    }
    fn alloc(jni: Jni<'_>, object: crate::ffi::Local<'_>, site: u32) {
        alloc(jni, object, site)
    }
    fn alloc_length(jni: Jni<'_>, length: u32, site: u32) {
        alloc_length(jni, length, site)
    }
    fn copy(jni: Jni<'_>, object: crate::ffi::Local<'_>, site: u32) -> i32 {
        copy(jni, object, site)
    }
    #[inline(always)]
    fn fast_enter(id: u32) -> i32 {
        fast_enter(id)
    }
    #[inline(always)]
    fn fast_exit(id: u32) -> i32 {
        fast_exit(id)
    }
    #[inline(always)]
    fn fast_root_enter(id: u32) -> i32 {
        fast_root_enter(id)
    }
    #[inline(always)]
    fn fast_root_exit(id: u32) -> i32 {
        fast_root_exit(id)
    }
    fn enter_virtual(jni: Jni<'_>) -> bool {
        enter_virtual(jni)
    }
}

/// `Probe.nAlloc`: an allocation at `site` (`allocs`), recorded inside a
/// root context only, as one `RECORD_ALLOC` record per level of it, into
/// the thread's stream, where it belongs to the frame open there.
pub fn alloc(jni: Jni<'_>, object: crate::ffi::Local<'_>, site: u32) {
    record_alloc(site, |jvmti, out| {
        allocs::weigh(jni, jvmti, site, object, out)
    });
}

/// `Probe.nCopy`: a copy made at `site` by `clone()` (or a
/// `multianewarray`'s array), recorded as [`alloc`] records it; returns
/// the site the Java path may record further copies of its class at
/// (`allocs::java_copy_site`), -1 for none.
pub fn copy(jni: Jni<'_>, object: crate::ffi::Local<'_>, site: u32) -> i32 {
    let mut at = None;
    record_alloc(site, |jvmti, out| {
        allocs::weigh(jni, jvmti, site, object, &mut |l| {
            if l.level == 0 {
                at = Some(l.site.unwrap_or(site));
            }
            out(l);
        })
    });
    at.and_then(|at| allocs::java_copy_site(site, at))
        .and_then(|at| i32::try_from(at).ok())
        .unwrap_or(-1)
}

/// `Probe.nAllocLength`: an allocation at `site` of a one-dimension array
/// of `length` elements, recorded as [`alloc`] records one.
pub fn alloc_length(jni: Jni<'_>, length: u32, site: u32) {
    record_alloc(site, |jvmti, out| {
        allocs::weigh_length(jni, jvmti, site, length, out)
    });
}

/// Records what `weigh` says an allocation at `site` made (it returns
/// whether only JNI could record it) on a thread inside a root context.
fn record_alloc(
    site: u32,
    weigh: impl FnOnce(&crate::ffi::Jvmti, &mut dyn FnMut(allocs::AllocLevel)) -> bool,
) {
    if !allocs::recording() {
        return;
    }
    let Some(agent) = crate::env::get() else {
        return;
    };
    let _ = with_state(|s| {
        if s.depth() == 0 || s.busy.get() || !s.current() {
            return;
        }
        let mut levels = Vec::new();
        let jni_only = weigh(&agent.jvmti, &mut |l| levels.push(l));
        if !jni_only && allocs::jni_learns_only() {
            return;
        }
        for l in levels {
            let rec = AllocRecord {
                site: l.site.unwrap_or(site),
                level: l.level,
                count: l.count,
                bytes: l.bytes,
            };
            if let Some(r) = RecordSlots::new(RECORD_ALLOC, 0, &rec.words())
                && s.current()
            {
                s.push_record(&r);
            }
        }
    });
}

/// `Probe.nEnter`: entry of an instrumented method.
#[inline]
pub fn enter(id: u32, jni: Jni<'_>) {
    if edges::burst_open() {
        edges::sample(jni);
        return;
    }
    let _ = with_state(|s| {
        if s.depth() == 0 {
            return;
        }
        if s.busy.get() || !s.current() {
            return;
        }
        if !methods::is_active(id) && !enter_dormant(s, id, jni) {
            return;
        }
        if gc_due(s) {
            gc_catch_up(s);
        }
        let ts = s.inner_now();
        s.set_depth(s.depth() + 1);
        if check_first_call(s, id, jni) {
            s.push(Event::new(EventKind::MethodEntry, id, ts));
        }
    });
}

/// `Probe.nExit`: normal or exceptional exit of an instrumented method.
/// In a root call that has run for longer than a burst period, the exit
/// that finds the thread due runs its calibration burst (see
/// [`mid_root_burst`]).
#[inline]
pub fn exit(id: u32, jni: Jni<'_>) {
    let _ = with_state(|s| {
        let d = s.depth();
        // At depth 1 only the root's own exit may close the context.
        if d <= 1 || s.busy.get() || !s.current() || !methods::is_active(id) {
            return;
        }
        if gc_due(s) {
            gc_catch_up(s);
        }
        let ts = s.inner_now();
        s.set_depth(d - 1);
        s.push(Event::new(EventKind::MethodExit, id, ts));
        if ts >= s.next_burst.get() && burst_due_inside(s, ts) {
            mid_root_burst(s, ts, jni);
        }
    });
}

/// `Probe.nRootEnter`: entry of a root method. Returns whether it opened
/// a root context on this thread (the Java side counts open contexts per
/// thread-id slot in `Probe.INSIDE`).
#[inline]
pub fn root_enter(id: u32, jni: Jni<'_>) -> bool {
    with_state(|s| {
        if s.busy.get() {
            return false;
        }
        let generation = GENERATION.load(Ordering::Relaxed);
        if s.generation.get() != generation {
            s.reset(generation);
        }
        let n = s.silent.get();
        if n > 0 {
            // a root nested in a silent root context: silent too
            s.silent.set(n.saturating_add(1));
            return false;
        }
        let d = s.depth();
        if d > 0 {
            if gc_due(s) {
                gc_catch_up(s);
            }
            let ts = s.inner_now();
            s.set_depth(d + 1);
            if check_first_call(s, id, jni) {
                s.push(Event::new(EventKind::MethodEntry, id, ts));
            }
            return false;
        }
        if !PROFILING.load(Ordering::Acquire) || s.disabled.get() {
            return false;
        }
        if s.producer.borrow().is_none() && !register(s, jni) {
            s.disabled.set(true);
            return false;
        }
        if windows::silent_now() {
            // Windows timing, a silent window: the root's own probes time
            // the call; nothing inside records (no root context opens).
            s.silent.set(1);
            // While the JIT settles after a switch the call is timed but
            // neither sampler takes its stacks (closing an unopened word
            // or mark leaves it closed).
            if windows::silent_sampled() {
                s.silent_word_open();
                windows::mark_open(s.java_id.get());
            }
            // the cost tail's warm-up times nothing
            let timed = windows::silent_timed();
            s.silent_timed.set(timed);
            if timed {
                s.push(Event::new(EventKind::SilentRootEntry, id, s.now()));
            }
            return false;
        }
        open_root_context(jni);
        gc_seen_now(s);
        let ts = s.now();
        s.set_depth(1);
        s.root_since.set(ts);
        if check_first_call(s, id, jni) {
            s.push(Event::new(EventKind::RootEntry, id, ts));
        }
        true
    })
    .unwrap_or(false)
}

/// `Probe.nRootExit`: exit of a root method. Returns `ROOT_CLOSED` when
/// it closed this thread's root context, `ROOT_BURST_FIRST` when the
/// thread runs a calibration burst first, `ROOT_NESTED` otherwise. The
/// last thread out of a root context lowers `Probe.active` at once.
#[inline]
pub fn root_exit(id: u32, jni: Jni<'_>) -> i32 {
    with_state(|s| {
        let n = s.silent.get();
        if n > 0 && s.current() {
            s.silent.set(n - 1);
            if n == 1 {
                s.silent_word_close();
                windows::mark_close(s.java_id.get());
                if s.silent_timed.replace(false) {
                    s.push(Event::new(EventKind::SilentRootExit, id, s.now()));
                    windows::silent_closed();
                }
            }
            return ROOT_NESTED;
        }
        let d = s.depth();
        if d == 0 || s.busy.get() || !s.current() {
            return ROOT_NESTED;
        }
        if gc_due(s) {
            gc_catch_up(s);
        }
        let ts = s.now();
        if d == 1 {
            let every = BURST_EVERY.load(Ordering::Relaxed);
            if s.in_burst.replace(false) {
                // the burst ran: close now
            } else if every != 0 && ts >= s.next_burst.get() {
                s.next_burst.set(ts.saturating_add(every));
                s.in_burst.set(true);
                return ROOT_BURST_FIRST;
            }
            s.set_depth(0);
            s.push(Event::new(EventKind::RootExit, id, ts));
            if close_root_context() {
                publish(jni);
            }
            ROOT_CLOSED
        } else {
            s.set_depth(d - 1);
            let ts = if s.untimed.get() { 0 } else { ts };
            s.push(Event::new(EventKind::MethodExit, id, ts));
            ROOT_NESTED
        }
    })
    .unwrap_or(ROOT_NESTED)
}
