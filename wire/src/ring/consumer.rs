//! [`Consumer`]: the one reader. A poll reads every visible segment in
//! (thread, claim) order up to its published count and frees the full ones
//! read to their end; [`Run`] says where each slice comes from.

use super::layout::{FREE, FULL, OWNED};
use super::positions::StreamPosition;
use super::raw::append_events;
use super::region::Region;
use crate::event::Event;
use std::sync::Arc;
use std::sync::atomic::Ordering;

#[derive(Clone, Copy, Debug)]
struct Visible {
    thread: u32,
    seq: u64,
    index: u32,
    full: bool,
}

/// The one reader of a region (the CLI).
pub struct Consumer {
    region: Arc<Region>,
    /// Read position in each segment.
    pos: Vec<u32>,
    visible: Vec<Visible>,
    buf: Vec<Event>,
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

impl Consumer {
    /// The consumer of `region`; there must be only one per region.
    pub fn new(region: Arc<Region>) -> Consumer {
        let n = region.segments as usize;
        let cap = region.capacity as usize;
        Consumer {
            region,
            pos: vec![0; n],
            visible: Vec::with_capacity(n),
            buf: Vec::with_capacity(cap),
        }
    }

    pub fn region(&self) -> &Arc<Region> {
        &self.region
    }

    /// Tells waiting producers the consumer is alive.
    pub fn heartbeat(&self) {
        if !self.region.is_retired() {
            self.region
                .header()
                .heartbeat
                .fetch_add(1, Ordering::Release);
        }
    }

    /// Delivers every event visible now, each thread's in order, as slices
    /// `(thread index, events)`, frees the segments read to their end, and
    /// returns how many events it delivered. Bumps the heartbeat.
    pub fn poll(&mut self, sink: &mut dyn FnMut(u32, &[Event])) -> usize {
        self.poll_runs(&mut |run, events| sink(run.thread, events))
    }

    /// [`Consumer::poll`] telling the sink where each slice comes from: a
    /// [`Run`] names the thread, the segment's claim number and the index
    /// of the slice's first event in that segment, so a caller can match
    /// [`StreamPosition`]s (samples) against the stream. A thread's runs
    /// come in stream order: claim numbers rise, and within a claim each
    /// run starts where the previous one ended.
    pub fn poll_runs(&mut self, sink: &mut dyn FnMut(Run, &[Event])) -> usize {
        // Lent to the closure for the poll (empty in `self` meanwhile).
        let mut buf = std::mem::take(&mut self.buf);
        let n = self.poll_with(&mut |run, slots, from, n| {
            buf.clear();
            append_events(slots, from, n, &mut buf);
            sink(run, &buf);
        });
        self.buf = buf;
        n
    }

    /// [`Consumer::poll_runs`] into the caller's buffers: appends every
    /// event visible now to `events` and, for each slice, its [`Run`] and
    /// its range in `events` to `runs`. One copy out of the shared mapping
    /// and no other, for a caller that keeps the events before it
    /// processes them (sampled timing takes the samples in between).
    pub fn poll_into(
        &mut self,
        runs: &mut Vec<(Run, std::ops::Range<usize>)>,
        events: &mut Vec<Event>,
    ) -> usize {
        self.poll_with(&mut |run, slots, from, n| {
            let start = events.len();
            append_events(slots, from, n, events);
            runs.push((run, start..start + n));
        })
    }

    /// The poll itself: hands `deliver` each slice visible now as (run,
    /// the segment's slots, index of its first event, events), each
    /// thread's in order, then frees the segments read to their end.
    fn poll_with(&mut self, deliver: &mut dyn FnMut(Run, *const Event, u32, usize)) -> usize {
        self.heartbeat();
        let r = &*self.region;
        if r.is_retired() {
            return 0;
        }
        self.visible.clear();
        // Only segments claimed before this poll began. A producer can fill
        // a segment and claim the next one while the scan below runs: the
        // scan may then miss the first (its header was read while still
        // FREE) but see the second, and deliver a thread's events out of
        // order. Every segment claimed before `limit` was read stays OWNED or
        // FULL until this consumer frees it, and (Acquire here, Release on
        // the claim) is seen as such; later ones wait for the next poll.
        let limit = r.header().claims.load(Ordering::Acquire);
        for i in 0..r.segments {
            let h = r.seg(i);
            let state = h.state.load(Ordering::Acquire);
            if state == OWNED || state == FULL {
                self.visible.push(Visible {
                    thread: h.thread.load(Ordering::Relaxed),
                    seq: h.seq.load(Ordering::Relaxed),
                    index: i,
                    full: state == FULL,
                });
            }
        }
        // A claim number no producer has handed out yet (at or past the
        // counter read after the scan) is a damaged header: it is read and
        // freed like any other, never left to wedge the ring.
        let limit_end = r.header().claims.load(Ordering::Acquire);
        self.visible.retain(|v| v.seq < limit || v.seq >= limit_end);
        self.visible
            .sort_unstable_by_key(|v| (v.thread, v.seq, v.index));
        let mut delivered = 0;
        for v in &self.visible {
            let h = r.seg(v.index);
            // Loaded after the state: when the state was FULL this is final.
            let committed = h.committed.load(Ordering::Acquire).min(r.capacity);
            let pos = self.pos[v.index as usize];
            if committed > pos {
                let n = (committed - pos) as usize;
                let run = Run {
                    thread: v.thread,
                    claim: v.seq,
                    start: pos,
                };
                deliver(run, r.slots(v.index), pos, n);
                delivered += n;
                self.pos[v.index as usize] = committed;
            }
            if v.full {
                self.pos[v.index as usize] = 0;
                // Release: our reads of the slots happen before the next
                // owner's writes (it claims with Acquire).
                h.state.store(FREE, Ordering::Release);
            }
        }
        self.heartbeat();
        delivered
    }

    /// Where every producer stands now: see [`Region::positions`]. Reads
    /// only; consumes nothing.
    pub fn positions(&self, out: &mut Vec<StreamPosition>) {
        self.region.positions(out)
    }
}

/// Where a slice handed to [`Consumer::poll_runs`] comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Run {
    /// The producer's thread index.
    pub thread: u32,
    /// The segment's claim number (orders one thread's segments).
    pub claim: u64,
    /// Index in the segment of the slice's first event.
    pub start: u32,
}
