//! [`Producer`]: one thread's writer. It claims a free segment (round the
//! region, see the module documentation), publishes each event, waits for
//! space when the ring is full (backpressure, with the wait written as an
//! `AdjustTime` record) and gives up when the consumer is gone. Its fast
//! path, the slot store, is in `raw` with the other accesses to the
//! mapping.

use super::layout::{CLAIM_LOG, CLAIMING, Dead, FREE, FULL, OWNED, VirtualCpu, claim_log_entry};
use super::region::Region;
use crate::clock;
use crate::event::{ADJUST_OPEN_FRAMES, Event, EventKind};
use crate::record::RecordSlots;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// One producer thread's handle. Not `Sync`: one per thread.
pub struct Producer {
    pub(super) region: Arc<Region>,
    thread: u32,
    wait_bound: Duration,
    /// Owned segment, or `NONE`.
    pub(super) seg: u32,
    pub(super) slots: *mut Event,
    /// The owned segment's `committed` count (dangling when none).
    pub(super) committed: *const AtomicU32,
    pub(super) pos: u32,
    /// Capacity of the owned segment; 0 when none is owned, so the next
    /// push takes the slow path.
    pub(super) cap: u32,
    /// Where the next claim scan starts.
    hint: u32,
    /// A virtual thread's CPU clock as last published
    /// ([`Producer::publish_cpu`]), written into each segment it claims.
    cpu: Option<VirtualCpu>,
}

const NONE: u32 = u32::MAX;

/// A producer's owned segment as raw addresses ([`Producer::window`]):
/// event slot `i` is at `slots + 16 * i` for `i < cap`, the next one to
/// write is `pos`, and `committed` is the address of the segment's
/// count, published with a Release store of the new length after each
/// event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub slots: usize,
    pub committed: usize,
    pub pos: u32,
    pub cap: u32,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("thread", &self.thread)
            .field("seg", &self.seg)
            .field("pos", &self.pos)
            .finish_non_exhaustive()
    }
}

impl Producer {
    /// A producer for thread index `thread` (unique among live producers of
    /// the region). `wait_bound` is how long it waits for space while the
    /// consumer's heartbeat does not move before the region is declared
    /// dead. No segment is claimed until the first push.
    pub fn new(region: Arc<Region>, thread: u32, wait_bound: Duration) -> Producer {
        let hint = thread % region.segments;
        Producer {
            region,
            thread,
            wait_bound,
            seg: NONE,
            slots: std::ptr::null_mut(),
            committed: std::ptr::null(),
            pos: 0,
            cap: 0,
            hint,
            cpu: None,
        }
    }

    pub fn thread(&self) -> u32 {
        self.thread
    }

    pub fn region(&self) -> &Arc<Region> {
        &self.region
    }

    /// Where this producer writes next, for a writer outside it that
    /// takes turns with it on the same thread (the agent's Java probes):
    /// `None` unless it owns a segment of a pinned region not retired.
    pub fn window(&self) -> Option<Window> {
        if self.seg == NONE || !self.region.is_pinned() || self.region.is_retired() {
            return None;
        }
        Some(Window {
            slots: self.slots as usize,
            committed: self.committed as usize,
            pos: self.pos,
            cap: self.cap,
        })
    }

    /// Takes up at slot `pos` of the owned segment, after another writer
    /// on this thread appended to it and published `committed = pos` (see
    /// [`Producer::window`]). Ignored unless `pos` lies between the
    /// producer's own position and the segment's capacity.
    pub fn resume_at(&mut self, pos: u32) {
        if self.seg != NONE && pos >= self.pos && pos <= self.cap {
            self.pos = pos;
        }
    }

    /// Publishes this (virtual) thread's CPU clock in the header of the
    /// segment it owns and of each it claims from now on, where position
    /// samples read it ([`StreamPosition::cpu`](super::StreamPosition)).
    pub fn publish_cpu(&mut self, cpu: VirtualCpu) {
        self.cpu = Some(cpu);
        if self.seg != NONE && !self.region.is_retired() {
            self.region.seg(self.seg).publish_cpu(cpu);
        }
    }

    /// Hands the current segment to the consumer (marks it FULL). The next
    /// push claims a new one. Called on drop; call it when the thread ends.
    pub fn release(&mut self) {
        if self.seg == NONE {
            return;
        }
        if !self.region.is_retired() {
            // `committed` is already published; FULL tells the consumer it
            // is final, and lets it free the segment after reading it.
            self.region
                .seg(self.seg)
                .state
                .store(FULL, Ordering::Release);
        }
        self.seg = NONE;
        self.slots = std::ptr::null_mut();
        self.committed = std::ptr::null();
        self.pos = 0;
        self.cap = 0;
    }

    /// Tries to take a FREE segment; never in a retired region, whose
    /// range may hold the next session's ring (a producer that waited for
    /// space through the retirement).
    fn claim(&mut self) -> bool {
        let r = &*self.region;
        if r.is_retired() {
            return false;
        }
        let n = r.segments;
        for k in 0..n {
            let i = (self.hint + k) % n;
            let h = r.seg(i);
            if h.state.load(Ordering::Relaxed) == FREE
                && h.state
                    .compare_exchange(FREE, CLAIMING, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                // Acquire above pairs with the consumer's Release store of
                // FREE: its reads of the old events are done.
                h.thread.store(self.thread, Ordering::Relaxed);
                // Release: a consumer that reads the counter past this
                // claim (Acquire) also sees every segment this producer
                // claimed before, as OWNED or FULL (see `Consumer::poll`).
                let k = r.header().claims.fetch_add(1, Ordering::AcqRel);
                h.seq.store(k, Ordering::Relaxed);
                h.committed.store(0, Ordering::Relaxed);
                h.init_cpu(self.cpu);
                h.state.store(OWNED, Ordering::Release);
                // After OWNED (Release): a reader that finds the entry
                // (Acquire) finds the segment owned, or later states.
                r.header().claim_log[(k % CLAIM_LOG as u64) as usize]
                    .store(claim_log_entry(k, i), Ordering::Release);
                self.seg = i;
                self.slots = r.slots(i);
                self.committed = &h.committed;
                self.pos = 0;
                self.cap = r.capacity;
                // The next claim scans from the next segment on: round the
                // region, the oldest free segment, out of the consumer's
                // cache (see the module documentation).
                self.hint = (i + 1) % n;
                return true;
            }
        }
        false
    }

    fn is_region_dead(&self) -> bool {
        let r = &*self.region;
        r.dead.load(Ordering::Acquire) || r.is_retired() || {
            let h = r.header();
            h.producers_dead.load(Ordering::Acquire) != 0
                || h.consumer_gone.load(Ordering::Acquire) != 0
        }
    }

    fn die(&mut self) -> Result<(), Dead> {
        self.release();
        self.region.mark_dead();
        self.region.count_lost(1);
        Err(Dead)
    }

    #[cold]
    #[inline(never)]
    pub(super) fn push_slow(&mut self, ts: u64, rest: u64) -> Result<(), Dead> {
        let ev = unpack(ts, rest);
        self.append_slow(&[ev])
    }

    /// [`Producer::push_record`] when the record does not fit what is
    /// left of the owned segment.
    #[cold]
    #[inline(never)]
    pub(super) fn push_record_slow(&mut self, rec: &RecordSlots) -> Result<(), Dead> {
        self.append_slow(rec.as_slice())
    }

    /// Appends `item` (one event, or a record's slots) whole to a fresh
    /// segment: releases the owned one, claims another, waiting for space
    /// when the ring is full.
    pub(super) fn append_slow(&mut self, item: &[Event]) -> Result<(), Dead> {
        if self.is_region_dead() {
            return self.die();
        }
        self.release();
        if self.claim() {
            return self.append(item);
        }
        // Ring full: wait for the consumer.
        let clock = self.region.clock;
        let t0 = clock::read(clock);
        let start = Instant::now();
        let mut beat = self.region.heartbeat_value();
        let mut beat_seen = start;
        let mut round = 0u32;
        loop {
            if round < 64 {
                for _ in 0..32 {
                    std::hint::spin_loop();
                }
            } else if round < 80 {
                std::thread::yield_now();
            } else {
                // 20 µs, doubling up to 1 ms.
                let step = 20u64 << (round - 80).min(6);
                std::thread::sleep(Duration::from_micros(step.min(1000)));
            }
            round = round.saturating_add(1);
            if self.claim() {
                let waited = clock::read(clock).saturating_sub(t0);
                // The fresh segment has at least 4 slots: an event fits
                // after the wait's record; a record of 4 slots goes whole
                // into the segment after, right after it in the stream. A
                // record's wait is charged to the frames open now (its
                // reader steps over it to the next event).
                let aux = if item.len() > 1 {
                    ADJUST_OPEN_FRAMES
                } else {
                    0
                };
                self.push(Event::new(EventKind::AdjustTime, 0, waited).with_aux(aux))?;
                return self.append(item);
            }
            if self.is_region_dead() {
                return self.die();
            }
            let now = Instant::now();
            let b = self.region.heartbeat_value();
            if b != beat {
                beat = b;
                beat_seen = now;
            } else if now.duration_since(beat_seen) >= self.wait_bound {
                return self.die();
            }
        }
    }

    /// Appends an event or a record's slots (at most
    /// [`MAX_RECORD_SLOTS`](crate::record::MAX_RECORD_SLOTS), so always
    /// fits a fresh segment).
    fn append(&mut self, item: &[Event]) -> Result<(), Dead> {
        match item {
            [ev] => self.push(*ev),
            slots => self.push_slots(slots),
        }
    }
}

#[inline(always)]
pub(super) fn pack_rest(ev: &Event) -> u64 {
    ev.id as u64 | (ev.kind as u64) << 32 | (ev.aux as u64) << 48
}

#[inline(always)]
fn unpack(ts: u64, rest: u64) -> Event {
    Event {
        ts,
        id: rest as u32,
        kind: (rest >> 32) as u16,
        aux: (rest >> 48) as u16,
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        self.release();
    }
}
