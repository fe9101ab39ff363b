//! The one way a record is written into a thread's segment.
//!
//! Every native path (the JNI natives, the FFM `fast_*` functions, a
//! thread's first event, `AdjustTime` after revelation work) appends an
//! event with [`ThreadState::push`] (which waits, bounded, for a free
//! segment when the current one is full) or [`ThreadState::try_push`]
//! (which never waits: the FFM path then falls back to JNI). Both append
//! one 16-byte `sprig_wire::Event` (kind, aux, id, timestamp; see
//! `docs/event-ring.md`) through the thread's `Producer`, which stores it
//! at the segment's next index and publishes it with a release store of
//! the segment's `committed` count.
//!
//! A payload that does not fit 16 bytes (an allocation's class, size and
//! count; a wait's kind, object class and duration) goes in as a
//! multi-slot record with [`ThreadState::push_record`]: a head event of
//! kind `Record` and up to three continuation slots
//! (`sprig_wire::record`), written into the same segment and published
//! with one release store of `committed`, moved whole into the next
//! segment when it does not fit the current one. It takes turns with the
//! Java path as `push` does. The waits of `--locks` are written so
//! (`wait`), and the allocation probes (`natives::alloc`) write one per
//! allocation.
//!
//! The Java path (sampled timing, `agent/java*/sprig/rt/Probe.java`)
//! writes the same 16-byte record into the same segment without a native
//! call: the thread's slot of `ffi::slots` holds the segment's address,
//! capacity and next index while it is open, and the probe class stores
//! the event there and publishes it with the same release store of
//! `committed` (`docs/sampled-timing.md`). The two paths never write at
//! once: before a native write the producer takes up at the slot's
//! position ([`take_up`]), and after it the slot is opened again at the
//! new one ([`ThreadState::reopen`]); around revelation work the slot is
//! closed ([`ThreadState::close_slot`]), so Java code run there records
//! nothing.

use super::ring::{GENERATION, NATIVE_INNER, ring_dead};
use super::state::ThreadState;
use crate::ffi::slots::{Segment, Slot};
use sprig_wire::ring::Producer;
use sprig_wire::{Event, EventKind, RecordSlots};
use std::sync::atomic::Ordering;

impl ThreadState {
    #[inline(always)]
    pub(super) fn push(&self, ev: Event) {
        let mut p = self.producer.borrow_mut();
        if let Some(p) = p.as_mut() {
            if self.untimed.get() {
                count_native(ev);
            }
            let slot = self.slot.get();
            if let Some(slot) = slot {
                take_up(slot, p);
            }
            // A producer of an earlier session (its ring retired) refuses:
            // that is no news about this session's ring.
            if p.push(ev).is_err() && self.current() {
                ring_dead();
            }
            if let Some(slot) = slot {
                self.reopen(slot, p);
            }
        }
    }

    /// Appends a multi-slot record as [`ThreadState::push`] appends an
    /// event: waits, bounded, for a segment with room for all of it.
    pub(super) fn push_record(&self, rec: &RecordSlots) {
        let mut p = self.producer.borrow_mut();
        if let Some(p) = p.as_mut() {
            let slot = self.slot.get();
            if let Some(slot) = slot {
                take_up(slot, p);
            }
            if p.push_record(rec).is_err() && self.current() {
                ring_dead();
            }
            if let Some(slot) = slot {
                self.reopen(slot, p);
            }
        }
    }

    /// Appends `ev` only if it fits the producer's current segment (never
    /// waits); false when the caller must take the JNI path.
    #[inline(always)]
    pub(super) fn try_push(&self, ev: Event) -> bool {
        let Ok(mut p) = self.producer.try_borrow_mut() else {
            return false;
        };
        let Some(p) = p.as_mut() else {
            return false;
        };
        // Exact timing (no slot): the plain append, inlined into the
        // probes; the Java path's bookkeeping stays out of line.
        match self.slot.get() {
            None if !self.untimed.get() => p.try_push(ev),
            slot => self.try_push_sampled(slot, p, ev),
        }
    }

    /// [`ThreadState::try_push`] under sampled timing: takes up where the
    /// Java probes left the segment, appends, counts the native event and
    /// reopens the slot.
    #[inline(never)]
    pub(super) fn try_push_sampled(&self, slot: Option<Slot>, p: &mut Producer, ev: Event) -> bool {
        if let Some(slot) = slot {
            take_up(slot, p);
        }
        let done = p.try_push(ev);
        if done {
            if self.untimed.get() {
                count_native(ev);
            }
            if let Some(slot) = slot {
                self.reopen(slot, p);
            }
        }
        done
    }

    /// Opens the thread's slot onto the producer's segment when the Java
    /// probes may record (sampled timing, not busy, this generation, a
    /// segment owned), closes it otherwise.
    #[inline]
    pub(super) fn reopen(&self, slot: Slot, p: &Producer) {
        let generation = self.generation.get();
        match p.window() {
            Some(w) if !self.busy.get() && self.untimed.get() => {
                slot.open(
                    Segment {
                        slots: w.slots,
                        committed: w.committed,
                        pos: w.pos,
                        cap: w.cap,
                    },
                    || GENERATION.load(Ordering::SeqCst) == generation,
                );
            }
            _ => slot.close(),
        }
    }

    /// Closes the slot (the Java probes take the native path) after taking
    /// up where they left the segment.
    pub(super) fn close_slot(&self) {
        let Some(slot) = self.slot.get() else {
            return;
        };
        if let Ok(mut p) = self.producer.try_borrow_mut()
            && let Some(p) = p.as_mut()
        {
            take_up(slot, p);
        }
        slot.close();
    }

    /// Reopens the slot after [`ThreadState::close_slot`], if it may be.
    pub(super) fn reopen_slot(&self) {
        let Some(slot) = self.slot.get() else {
            return;
        };
        if let Ok(p) = self.producer.try_borrow()
            && let Some(p) = p.as_ref()
        {
            self.reopen(slot, p);
        }
    }
}

/// Counts an entry or exit inside a root context that the agent wrote
/// under sampled timing ([`native_inner_events`](super::ring::native_inner_events)).
#[inline(always)]
fn count_native(ev: Event) {
    if matches!(
        ev.kind(),
        Some(EventKind::MethodEntry | EventKind::MethodExit)
    ) {
        NATIVE_INNER.fetch_add(1, Ordering::Relaxed);
    }
}

/// Takes up the producer where the Java probes left its segment (the
/// slot's position, while it is open).
#[inline(always)]
fn take_up(slot: Slot, p: &mut Producer) {
    if slot.is_open() {
        p.resume_at(slot.pos());
    }
}
