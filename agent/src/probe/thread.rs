//! A thread's life in a session: the thread-local state and how a probe
//! reaches it, the registration at its first root entry (index,
//! producer, slot, `ThreadStart`), the reset of a stale generation's
//! state, `ThreadEnd` when the thread ends, and calibration's private
//! ring.

use super::ring::{GENERATION, PARK_BUDGET, PARKED, REGION, SAMPLED, VIRTUAL, WAIT_BOUND_MS};
use super::state::ThreadState;
use crate::ffi::Jni;
use crate::ffi::slots;
use crate::probe_class;
use crate::threads;
use sprig_wire::ring::{Producer, Region, VirtualCpu};
use sprig_wire::{ClockKind, Event, EventKind};
use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Runs `f` with the calling thread's probe state (through the `ffi::tls`
/// slot); `None` once the thread is ending.
#[inline(always)]
pub(super) fn with_state<R>(f: impl FnOnce(&ThreadState) -> R) -> Option<R> {
    crate::ffi::with_state(&STATE, f)
}

impl ThreadState {
    /// Forgets a stale generation's state.
    #[cold]
    pub(super) fn reset(&self, generation: u64) {
        self.close_slot();
        self.set_depth(0);
        self.slot.set(None);
        if let Ok(mut p) = self.producer.try_borrow_mut()
            && let Some(mut old) = p.take()
        {
            old.release();
        }
        self.generation.set(generation);
        self.set_depth(0);
        self.disabled.set(false);
        self.next_burst.set(0);
        self.in_burst.set(false);
        for w in &self.wait_since {
            w.set(0);
        }
        self.wait_class.set(0);
        for o in &self.wait_owner {
            o.set(0);
        }
        self.silent.set(0);
        self.silent_word.store(0, Ordering::Release);
        self.silent_timed.set(false);
    }
}

impl Drop for ThreadState {
    /// The thread is ending: close its stream with `ThreadEnd`.
    fn drop(&mut self) {
        crate::ffi::forget_state();
        self.close_slot();
        if let Some(slot) = self.owned_slot.take() {
            slot.free();
        }
        if !self.current() {
            return;
        }
        if let Ok(mut p) = self.producer.try_borrow_mut()
            && let Some(p) = p.as_mut()
        {
            let _ = p.push(Event::new(
                EventKind::ThreadEnd,
                self.index.get(),
                self.now(),
            ));
            p.release();
        }
    }
}

thread_local! {
    static STATE: ThreadState = const { ThreadState::new() };
    /// Calibration only: a private ring this thread records into instead of
    /// the session's, so its events never reach the CLI while taking the
    /// same probe path (see `with_private_ring`).
    static PRIVATE_RING: RefCell<Option<Arc<Region>>> = const { RefCell::new(None) };
}

/// Runs `f` with the calling thread's probes recording into `region`
/// instead of the session's ring, as thread index 0 and without a `Thread`
/// message (probe calibration). The thread's probe state is forgotten
/// before and after, so it holds no producer of `region` afterwards.
pub fn with_private_ring<R>(region: Arc<Region>, f: impl FnOnce() -> R) -> R {
    forget_thread_state();
    let _ = PRIVATE_RING.try_with(|p| *p.borrow_mut() = Some(region));
    let out = f();
    let _ = PRIVATE_RING.try_with(|p| p.borrow_mut().take());
    forget_thread_state();
    out
}

fn forget_thread_state() {
    let _ = with_state(|s| s.reset(GENERATION.load(Ordering::Acquire)));
}

impl crate::ffi::vthreads::VirtualState for ThreadState {
    /// Counted out of `PARKED` if it was counted in this session. Under
    /// `--clock cpu` its clock goes on from where it stopped at the
    /// unmount, on this carrier's CPU clock.
    fn mounted(&self) {
        if self.clock.get() == ClockKind::ThreadCpu {
            let carrier = sprig_wire::clock::read(ClockKind::ThreadCpu);
            self.shift
                .set(self.cpu_at_unmount.get().wrapping_sub(carrier));
            self.publish_cpu(crate::ffi::gettid(), self.shift.get());
        }
        let g = self.parked.replace(0);
        if g != 0 && g == GENERATION.load(Ordering::Acquire) {
            PARKED.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Keeps the segment while fewer than `PARK_BUDGET` virtual threads
    /// do; otherwise hands it to the consumer (the Java path's position
    /// taken up first): the next event after the thread mounts again
    /// claims a new one, and its stream stays in order (the consumer reads
    /// a thread's segments in claim order). Under `--clock cpu` its clock
    /// is kept for the next mount: the carrier's CPU time while it is
    /// unmounted is not its own.
    fn unmounted(&self) {
        if self.clock.get() == ClockKind::ThreadCpu {
            self.cpu_at_unmount.set(self.now());
            self.publish_cpu(0, self.cpu_at_unmount.get());
        }
        if self.busy.get() || !self.current() {
            return;
        }
        let owns = self
            .producer
            .try_borrow()
            .ok()
            .is_some_and(|p| p.as_ref().is_some_and(|p| p.window().is_some()));
        if !owns {
            return;
        }
        let budget = PARK_BUDGET.load(Ordering::Relaxed);
        if PARKED.fetch_add(1, Ordering::Relaxed) < budget {
            self.parked.set(self.generation.get());
            return;
        }
        PARKED.fetch_sub(1, Ordering::Relaxed);
        self.close_slot();
        if let Ok(mut p) = self.producer.try_borrow_mut()
            && let Some(p) = p.as_mut()
        {
            p.release();
        }
    }
}

impl ThreadState {
    /// Under `--clock cpu`, a virtual thread's clock in its segment's
    /// header, where the CLI's position samples read it (a virtual thread
    /// has no kernel thread whose CPU time they could read): its carrier's
    /// kernel thread id and its shift while mounted (`carrier` the
    /// current thread's), its clock at the unmount while unmounted
    /// (`carrier` 0). Only a state of this session's that no probe on this
    /// thread is using.
    fn publish_cpu(&self, carrier: u32, base: u64) {
        if !self.virtual_thread.get() || !self.current() {
            return;
        }
        if let Ok(mut p) = self.producer.try_borrow_mut()
            && let Some(p) = p.as_mut()
        {
            p.publish_cpu(VirtualCpu { carrier, base });
        }
    }
}

/// `Probe.nVirtual`, before a root probe on a virtual thread: this
/// carrier's probes use the virtual thread's own state from now on (made
/// the first time), and follow it to every carrier it mounts on. False when
/// this session does not profile roots on virtual threads (the probe class
/// then counts the root call as skipped).
pub(super) fn enter_virtual(jni: Jni<'_>) -> bool {
    if !VIRTUAL.load(Ordering::Relaxed) {
        return false;
    }
    crate::ffi::vthreads::adopt::<ThreadState>(&jni, || {
        let s = Box::new(ThreadState::new());
        s.virtual_thread.set(true);
        s
    })
}

/// First root entry of this thread in this session: index, producer,
/// `ThreadStart`, and the `Thread` message.
#[cold]
#[inline(never)]
pub(super) fn register(s: &ThreadState, jni: Jni<'_>) -> bool {
    let private = PRIVATE_RING.try_with(|p| p.borrow().clone()).ok().flatten();
    let is_private = private.is_some();
    let region = match private {
        Some(r) => Some(r),
        None => match REGION.read() {
            Ok(r) => r.clone(),
            Err(_) => None,
        },
    };
    let Some(region) = region else {
        return false;
    };
    s.busy.set(true);
    let index = if is_private { 0 } else { threads::next_index() };
    s.index.set(index);
    let clock_kind = region.clock();
    s.clock.set(clock_kind);
    // The stream's clock starts as this thread's (a virtual thread's
    // carrier's, under `--clock cpu`) from here on.
    s.shift.set(0);
    s.tsc.set(clock_kind == ClockKind::Tsc);
    // The private ring (the calibration) is always timed.
    s.untimed
        .set(!is_private && SAMPLED.load(Ordering::Relaxed));
    let bound = Duration::from_millis(u64::from(WAIT_BOUND_MS.load(Ordering::Relaxed)));
    let java = !is_private && s.untimed.get() && region.is_pinned() && probe_class::java_path();
    *s.producer.borrow_mut() = Some(Producer::new(region, index, bound));
    if s.virtual_thread.get() && clock_kind == ClockKind::ThreadCpu {
        // Mounted on this carrier, its clock the carrier's (shift 0).
        s.publish_cpu(crate::ffi::gettid(), 0);
    }
    if !is_private {
        let is_virtual = s.virtual_thread.get();
        let java_id = threads::announce(jni, index, is_virtual);
        s.java_id.set(java_id);
        if is_virtual {
            s.sample_key.store(java_id, Ordering::Release);
        }
    }
    if java {
        use_slot(s);
    }
    s.push(Event::new(EventKind::ThreadStart, index, s.now()));
    s.busy.set(false);
    true
}

/// Lets the probe class record this thread's events in Java from now on
/// (sampled timing): its slot, claimed the first time, holds the depth.
/// A thread whose slot another thread holds stays on the native path.
pub(super) fn use_slot(s: &ThreadState) {
    let id = s.java_id.get();
    if s.owned_slot.get().is_none() && id > 0 {
        s.owned_slot.set(slots::claim(id));
    }
    if let Some(slot) = s.owned_slot.get() {
        let d = s.depth.get();
        s.slot.set(Some(slot));
        s.set_depth(d);
    }
}

/// Windows timing's filter for the CPU-timer's signal handler: the silent
/// word of every thread's probe state under this session's tag, and the
/// state's sample key (a virtual thread's Java id; `None` when the handler
/// cannot reach the state through the `ffi::tls` word).
pub fn silent_filter() -> Option<crate::ffi::agct::SilentFilter> {
    let tag = (GENERATION.load(Ordering::SeqCst) & 0xffff_ffff) as u32;
    crate::ffi::agct::SilentFilter::for_state::<ThreadState>(
        std::mem::offset_of!(ThreadState, silent_word),
        std::mem::offset_of!(ThreadState, sample_key),
        tag,
    )
}
