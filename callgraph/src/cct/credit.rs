//! Credits to the node open at a position in a thread's stream: the one
//! way the builder attributes an observation made beside the event stream
//! (today the position samples of sampled timing, and a reset's marks).
//! An observation names the place in the thread's stream it was made at
//! (segment claim number, events of that segment published); it waits in
//! the thread's [`Pending`] queue until the stream is processed up to that
//! place, and is then credited to the frame open there.

use sprig_wire::ring::StreamPosition;

/// A place in a thread's stream: (claim number of the segment, events of
/// that segment published). Places order as the stream does.
pub(super) type Place = (u64, u32);

/// An observation not yet matched with its thread's stream.
#[derive(Clone, Copy, Debug)]
pub(super) struct Credit {
    pub(super) place: Place,
    /// Session clock ticks when it was made (places it against a reset).
    pub(super) ts: u64,
    pub(super) weight: u64,
    /// A reset's mark ([`CctBuilder::mark_reset`](super::CctBuilder::mark_reset)):
    /// places the reset, carries no time and is not a sample.
    pub(super) mark: bool,
}

/// Where an observation goes against the stream's position.
pub(super) enum Placed {
    /// The stream is past its place: too late to credit.
    Late,
    /// The stream stands exactly at its place: credit it now.
    Now,
    /// The stream has not reached its place: kept until it does.
    Kept,
}

/// A thread's observations ahead of its stream; sorted by place unless
/// `dirty`.
#[derive(Clone, Debug, Default)]
pub(super) struct Pending {
    queue: Vec<Credit>,
    dirty: bool,
}

impl Pending {
    /// Places `c` against the stream standing at `pos` (`None`: no run
    /// seen yet), keeping it when the stream has not reached it.
    pub(super) fn place(&mut self, pos: Option<Place>, c: Credit) -> Placed {
        match pos {
            Some(p) if c.place < p => Placed::Late,
            // (the kept ones all lie further on: the order of credits does
            // not matter, each goes to the frame open at its place)
            Some(p) if c.place == p => Placed::Now,
            _ => {
                if self.queue.last().is_some_and(|l| l.place > c.place) {
                    self.dirty = true;
                }
                self.queue.push(c);
                Placed::Kept
            }
        }
    }

    /// Place of the first kept observation (`None` when there is none).
    pub(super) fn next(&mut self) -> Option<Place> {
        if self.dirty {
            self.queue.sort_by_key(|c| c.place);
            self.dirty = false;
        }
        self.queue.first().map(|c| c.place)
    }

    /// Takes every kept observation at or before `pos`, in stream order.
    pub(super) fn take_due(&mut self, pos: Place) -> Vec<Credit> {
        if self.next().is_none_or(|k| k > pos) {
            return Vec::new();
        }
        let due = self.queue.partition_point(|c| c.place <= pos);
        self.queue.drain(..due).collect()
    }

    /// Forgets the observations made before `at` (a reset).
    pub(super) fn forget_before(&mut self, at: u64) {
        self.queue.retain(|c| c.ts >= at);
    }

    /// Drops every kept observation; returns how many there were.
    pub(super) fn drop_all(&mut self) -> u64 {
        let n = self.queue.len() as u64;
        self.queue.clear();
        n
    }
}

/// A reading of a thread's place in its event stream, for sampled timing:
/// "at time `ts`, thread `thread` had published `index` events of the
/// segment it claimed with number `claim`" (a
/// [`StreamPosition`] read by [`sprig_wire::ring::Region::positions`]),
/// worth `weight` ticks of the session clock: the wall time since the
/// previous position reading, or the thread's CPU time since then,
/// converted to the session clock's ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PositionSample {
    pub thread: u32,
    pub claim: u64,
    pub index: u32,
    /// Session clock ticks at the reading (places the sample against a
    /// reset, [`CctBuilder::reset_at`](super::CctBuilder::reset_at)).
    pub ts: u64,
    pub weight: u64,
}

impl PositionSample {
    /// The sample of one position read at `ts`, worth `weight` ticks.
    pub fn at(pos: StreamPosition, ts: u64, weight: u64) -> PositionSample {
        PositionSample {
            thread: pos.thread,
            claim: pos.claim,
            index: pos.committed,
            ts,
            weight,
        }
    }
}
