//! Multi-slot records: payloads that do not fit one 16-byte [`Event`]
//! (an allocation's class, size and count; a wait's kind, object class
//! and duration).
//!
//! A record is a head event followed by its continuation slots, all in
//! the same segment, consecutive, published together:
//!
//! ```text
//! head:          ts = clock ticks, id = record kind, kind = EventKind::Record, aux = N
//! continuation:  N slots (1 ≤ N ≤ MAX_CONTINUATION), two 64-bit payload words each
//! ```
//!
//! Continuation slot `j` carries payload words `2j` (in the slot's `ts`)
//! and `2j + 1` (in `id | kind << 32 | aux << 48`), so its `kind` field is
//! payload, not an [`EventKind`]: a reader steps over a record by its
//! head's `aux`, whatever its record kind, and never reads a continuation
//! slot as an event. A record kind says how many of its words it uses;
//! the unused half of the last slot is zero.
//!
//! The producer writes every slot of a record, then publishes them with
//! one Release store of the segment's `committed` count
//! ([`Producer::push_record`](crate::ring::Producer::push_record)), so a
//! consumer's poll and a position reading never stop inside a record. A
//! record that does not fit what is left of the producer's segment goes
//! whole into the next one; the rest of the old segment stays unused. A
//! record is at most [`MAX_RECORD_SLOTS`] slots, the capacity of the
//! smallest segment, so it always fits a fresh one.
//!
//! [`Records`] reads a thread's events as the consumer delivers them:
//! each 16-byte event and each record whole.

use crate::event::{Event, EventKind};
use crate::ring::MIN_SEGMENT_BYTES;

/// Most slots of one record, head included: the capacity of the smallest
/// segment ([`MIN_SEGMENT_BYTES`]).
pub const MAX_RECORD_SLOTS: usize = 4;
/// Most continuation slots of one record.
pub const MAX_CONTINUATION: usize = MAX_RECORD_SLOTS - 1;
/// Most payload words of one record (two per continuation slot).
pub const MAX_RECORD_WORDS: usize = 2 * MAX_CONTINUATION;

const _: () = assert!(
    MAX_RECORD_SLOTS * std::mem::size_of::<Event>() + crate::ring::SEGMENT_HEADER_BYTES
        <= MIN_SEGMENT_BYTES as usize
);

/// Record kind (the head's `id`) of allocations: [`AllocRecord`], written
/// by the allocation probes (`--alloc`) into the allocating thread's
/// stream, so it belongs to the frame open at its place.
pub const RECORD_ALLOC: u32 = 1;
/// Record kind of a wait (monitor, park, sleep, GC): kind, object class
/// and duration ([`Wait`]), written by `--locks`.
pub const RECORD_WAIT: u32 = 2;

/// Record kind of an allocation sample (JVMTI SampledObjectAlloc) taken
/// inside a root context: [`SampledAlloc`], written by the allocating
/// thread into its own stream, so it belongs to the frame open then
/// (the code below the subgraph that allocated runs under it).
pub const RECORD_SAMPLED_ALLOC: u32 = 3;

/// One allocation sample, two to four payload words: `class | size << 32`
/// (`class` an id the agent names with an `AllocClass` message, `size`
/// the sampled object's bytes), `bytes_est`, the bytes of allocation
/// the sample stands for, with `--alloc=live` the object's JVMTI tag
/// (`LiveFreed` names it when the object is freed; 0 or absent: untagged),
/// and flags (bit 0: [`probed`](SampledAlloc::probed); absent: none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampledAlloc {
    pub class: u32,
    /// The sampled object's bytes (at most `u32::MAX`; larger is cut).
    pub size: u32,
    /// The bytes of allocation the sample stands for (its weight).
    pub bytes_est: u64,
    /// The object's tag (`--alloc=live`), 0 when untagged.
    pub tag: u64,
    /// The allocating frame (the sample's top Java frame) is a method the
    /// session's probes record: an allocation site the exact count sees
    /// too (unless the JIT removed the allocation), not code below the
    /// subgraph.
    pub probed: bool,
}

impl SampledAlloc {
    /// The record, its head at `ts`.
    pub fn record(&self, ts: u64) -> Option<RecordSlots> {
        let head = u64::from(self.class) | u64::from(self.size) << 32;
        let words = [head, self.bytes_est, self.tag, u64::from(self.probed)];
        let n = if self.probed {
            4
        } else if self.tag != 0 {
            3
        } else {
            2
        };
        RecordSlots::new(RECORD_SAMPLED_ALLOC, ts, &words[..n])
    }

    /// Reads a sample record; `None` for another kind or a short one.
    pub fn read(r: &Record<'_>) -> Option<SampledAlloc> {
        if r.kind != RECORD_SAMPLED_ALLOC {
            return None;
        }
        let w = r.word(0)?;
        Some(SampledAlloc {
            class: w as u32,
            size: (w >> 32) as u32,
            bytes_est: r.word(1)?,
            tag: r.word(2).unwrap_or(0),
            probed: r.word(3).unwrap_or(0) & 1 != 0,
        })
    }
}

/// What a thread waited for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WaitKind {
    /// Blocked entering a contended monitor (`synchronized`).
    Blocked = 1,
    /// In `Object.wait` on a monitor.
    Waiting = 2,
    /// Parked (`LockSupport.park*`: every `java.util.concurrent` lock).
    Parked = 3,
    /// In `Thread.sleep`.
    Sleeping = 4,
    /// Stopped by a garbage collection pause.
    Gc = 5,
}

impl WaitKind {
    pub const ALL: [WaitKind; 5] = [
        WaitKind::Blocked,
        WaitKind::Waiting,
        WaitKind::Parked,
        WaitKind::Sleeping,
        WaitKind::Gc,
    ];

    pub fn from_u8(v: u8) -> Option<WaitKind> {
        WaitKind::ALL.into_iter().find(|k| *k as u8 == v)
    }

    /// The kind as the JSON report names it.
    pub fn name(self) -> &'static str {
        match self {
            WaitKind::Blocked => "blocked",
            WaitKind::Waiting => "waiting",
            WaitKind::Parked => "parked",
            WaitKind::Sleeping => "sleeping",
            WaitKind::Gc => "gc",
        }
    }

    /// The row the tree shows for a wait of this kind on `class` (a
    /// binary name with dots; empty when unknown).
    pub fn row(self, class: &str) -> String {
        let class = if class.is_empty() { "?" } else { class };
        match self {
            WaitKind::Blocked => format!("(blocked on {class})"),
            WaitKind::Waiting => format!("(waiting on {class})"),
            WaitKind::Parked => format!("(parked: {class})"),
            WaitKind::Sleeping => "(sleeping)".to_owned(),
            WaitKind::Gc => "(GC pause)".to_owned(),
        }
    }
}

/// A wait of one thread, written at its end with its start: payload words
/// `kind | class << 32`, `start` (clock ticks), `ticks` (its length),
/// `owner` (a record of three words, written before owners were read,
/// reads as owner 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wait {
    pub kind: WaitKind,
    /// The class of the monitor or parked-on object: an id the agent
    /// names with a `WaitClass` message (0: none or unknown); at most
    /// [`WAIT_CLASS_MAX`].
    pub class: u32,
    pub start: u64,
    pub ticks: u64,
    /// Who held the monitor when a contended enter began: an id the agent
    /// names with a `WaitOwner` message (0: not read, or no owner then).
    pub owner: u32,
}

/// Largest class id of a wait (24 bits: the row ids of
/// [`wait_row_id`] hold it).
pub const WAIT_CLASS_MAX: u32 = (1 << 24) - 1;
/// First id of the wait rows' id range in the tree: method ids at or
/// above it are waits ([`wait_row`]), never a method the agent numbered.
pub const WAIT_ROW_BASE: u32 = 0xF000_0000;

/// The tree's id of the row of a wait of `kind` on class `class`.
pub fn wait_row_id(kind: WaitKind, class: u32) -> u32 {
    WAIT_ROW_BASE | (kind as u32) << 24 | (class & WAIT_CLASS_MAX)
}

/// The kind and class id of a wait row's id; `None` for a method's id.
pub fn wait_row(id: u32) -> Option<(WaitKind, u32)> {
    if id < WAIT_ROW_BASE {
        return None;
    }
    let kind = WaitKind::from_u8(((id >> 24) & 0xF) as u8)?;
    Some((kind, id & WAIT_CLASS_MAX))
}

impl Wait {
    /// The record, with its head at `ts` (the end of the wait).
    pub fn record(&self, ts: u64) -> Option<RecordSlots> {
        if self.class > WAIT_CLASS_MAX {
            return None;
        }
        RecordSlots::new(
            RECORD_WAIT,
            ts,
            &[
                self.kind as u64 | (self.class as u64) << 32,
                self.start,
                self.ticks,
                u64::from(self.owner),
            ],
        )
    }

    /// Reads a wait record; `None` for another kind or a damaged one.
    pub fn read(r: &Record<'_>) -> Option<Wait> {
        if r.kind != RECORD_WAIT {
            return None;
        }
        let w0 = r.word(0)?;
        let class = (w0 >> 32) as u32;
        if class > WAIT_CLASS_MAX {
            return None;
        }
        Some(Wait {
            kind: WaitKind::from_u8(w0 as u8)?,
            class,
            start: r.word(1)?,
            ticks: r.word(2)?,
            owner: r.word(3).map_or(0, |w| w as u32),
        })
    }
}

/// The payload of a [`RECORD_ALLOC`] record, two words:
/// `site | level << 32 | count << 40` and `bytes`. `site` is an
/// `AllocSite` id; `level` the dimension of a `multianewarray` the objects
/// are at (0: the outermost array, or the object or array the site
/// allocates), all of the class the site's descriptor names with `level`
/// leading `[` taken off; `count` objects (at most [`AllocRecord::MAX_COUNT`])
/// of `bytes` in all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocRecord {
    pub site: u32,
    pub level: u8,
    pub count: u32,
    pub bytes: u64,
}

impl AllocRecord {
    /// Most objects one record counts.
    pub const MAX_COUNT: u32 = (1 << 24) - 1;

    /// The record's payload words (`count` cut to [`Self::MAX_COUNT`]).
    pub fn words(&self) -> [u64; 2] {
        let count = u64::from(self.count.min(Self::MAX_COUNT));
        [
            u64::from(self.site) | u64::from(self.level) << 32 | count << 40,
            self.bytes,
        ]
    }

    /// Reads an allocation record; `None` for another kind or a short one.
    pub fn read(r: &Record<'_>) -> Option<AllocRecord> {
        if r.kind != RECORD_ALLOC {
            return None;
        }
        let w = r.word(0)?;
        Some(AllocRecord {
            site: w as u32,
            level: (w >> 32) as u8,
            count: (w >> 40) as u32,
            bytes: r.word(1)?,
        })
    }
}

/// A record encoded into its slots, ready for
/// [`Producer::push_record`](crate::ring::Producer::push_record).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordSlots {
    slots: [Event; MAX_RECORD_SLOTS],
    len: u8,
}

impl RecordSlots {
    /// Encodes a record of kind `kind` at time `ts` carrying `words`;
    /// `None` when there are no words or more than [`MAX_RECORD_WORDS`].
    pub fn new(kind: u32, ts: u64, words: &[u64]) -> Option<RecordSlots> {
        if words.is_empty() || words.len() > MAX_RECORD_WORDS {
            return None;
        }
        let n = words.len().div_ceil(2);
        let mut slots = [Event::default(); MAX_RECORD_SLOTS];
        slots[0] = Event::new(EventKind::Record, kind, ts).with_aux(n as u16);
        for (j, pair) in words.chunks(2).enumerate() {
            let hi = pair.get(1).copied().unwrap_or(0);
            slots[1 + j] = Event {
                ts: pair[0],
                id: hi as u32,
                kind: (hi >> 32) as u16,
                aux: (hi >> 48) as u16,
            };
        }
        Some(RecordSlots {
            slots,
            len: (1 + n) as u8,
        })
    }

    /// The head and its continuation slots, as they go into the segment.
    pub fn as_slice(&self) -> &[Event] {
        &self.slots[..self.len as usize]
    }
}

/// How many slots the item that starts with `head` takes: 1 for a 16-byte
/// event, 1 + its continuation slots for a record's head.
#[inline]
pub fn span(head: &Event) -> usize {
    if head.kind == EventKind::Record as u16 {
        1 + head.aux as usize
    } else {
        1
    }
}

/// A record read whole out of a thread's stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// The head's clock ticks.
    pub ts: u64,
    /// The record kind (the head's `id`), such as [`RECORD_ALLOC`].
    pub kind: u32,
    /// The continuation slots.
    pub slots: &'a [Event],
}

impl Record<'_> {
    /// Payload word `i` (two per continuation slot), `None` past the end.
    pub fn word(&self, i: usize) -> Option<u64> {
        let s = self.slots.get(i / 2)?;
        Some(if i.is_multiple_of(2) {
            s.ts
        } else {
            s.id as u64 | (s.kind as u64) << 32 | (s.aux as u64) << 48
        })
    }

    /// Every payload word, the unused half of the last slot included.
    pub fn words(&self) -> impl Iterator<Item = u64> + '_ {
        (0..2 * self.slots.len()).filter_map(|i| self.word(i))
    }
}

/// One item of a thread's stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Item<'a> {
    /// A 16-byte event (any kind but [`EventKind::Record`]).
    Event(&'a Event),
    /// A record, whole.
    Record(Record<'a>),
    /// A record head whose continuation slots run past the end of the
    /// slice (a damaged stream: the ring never delivers one so); the
    /// slots that are there.
    Cut { head: &'a Event, have: usize },
}

/// The items of a slice of one thread's events, in order: each event and
/// each record whole, a record of any kind stepped over exactly.
#[derive(Clone, Debug)]
pub struct Records<'a> {
    rest: &'a [Event],
}

impl<'a> Records<'a> {
    pub fn new(events: &'a [Event]) -> Records<'a> {
        Records { rest: events }
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Item<'a>;

    fn next(&mut self) -> Option<Item<'a>> {
        let (head, after) = self.rest.split_first()?;
        if head.kind != EventKind::Record as u16 {
            self.rest = after;
            return Some(Item::Event(head));
        }
        let n = head.aux as usize;
        if n > after.len() {
            self.rest = &[];
            return Some(Item::Cut {
                head,
                have: after.len(),
            });
        }
        let (slots, rest) = after.split_at(n);
        self.rest = rest;
        Some(Item::Record(Record {
            ts: head.ts,
            kind: head.id,
            slots,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_and_lengths_are_bounded() {
        assert_eq!(RecordSlots::new(RECORD_ALLOC, 5, &[]), None);
        assert_eq!(RecordSlots::new(RECORD_ALLOC, 5, &[1; 7]), None);
        for n in 1..=MAX_RECORD_WORDS {
            let words: Vec<u64> = (0..n as u64)
                .map(|i| u64::MAX - i * 0x0101_0101_0101)
                .collect();
            let r = RecordSlots::new(RECORD_WAIT, 99, &words).unwrap();
            assert_eq!(r.as_slice().len(), 1 + n.div_ceil(2));
            assert_eq!(span(&r.as_slice()[0]), r.as_slice().len());
            let items: Vec<Item> = Records::new(r.as_slice()).collect();
            let [Item::Record(rec)] = items[..] else {
                panic!("one record expected: {items:?}");
            };
            assert_eq!((rec.ts, rec.kind), (99, RECORD_WAIT));
            let mut got: Vec<u64> = rec.words().collect();
            if !n.is_multiple_of(2) {
                assert_eq!(got.pop(), Some(0));
            }
            assert_eq!(got, words);
        }
    }

    #[test]
    fn allocation_samples_round_trip() {
        for (tag, probed) in [0, 1, u64::MAX]
            .into_iter()
            .flat_map(|t| [(t, false), (t, true)])
        {
            let a = SampledAlloc {
                class: u32::MAX,
                size: 0x8000_0001,
                bytes_est: u64::MAX - 5,
                tag,
                probed,
            };
            let r = a.record(11).unwrap();
            // Untagged samples below the probed code keep their two words
            // (one slot).
            assert_eq!(r.as_slice().len(), if tag == 0 && !probed { 2 } else { 3 });
            let items: Vec<Item> = Records::new(r.as_slice()).collect();
            let [Item::Record(rec)] = items[..] else {
                panic!("one record expected: {items:?}");
            };
            assert_eq!(SampledAlloc::read(&rec), Some(a));
            assert_eq!(Wait::read(&rec), None);
            assert_eq!(AllocRecord::read(&rec), None);
        }
    }

    #[test]
    fn waits_round_trip_and_their_rows_are_apart_from_methods() {
        for kind in WaitKind::ALL {
            let w = Wait {
                kind,
                class: WAIT_CLASS_MAX,
                start: u64::MAX - 3,
                ticks: 12_345,
                owner: u32::MAX - 1,
            };
            let r = w.record(7).unwrap();
            let items: Vec<Item> = Records::new(r.as_slice()).collect();
            let [Item::Record(rec)] = items[..] else {
                panic!("one record expected: {items:?}");
            };
            assert_eq!(Wait::read(&rec), Some(w));
            let id = wait_row_id(kind, 77);
            assert_eq!(wait_row(id), Some((kind, 77)));
        }
        assert_eq!(wait_row(WAIT_ROW_BASE - 1), None);
        assert_eq!(wait_row(WAIT_ROW_BASE), None);
        let too_big = Wait {
            kind: WaitKind::Blocked,
            class: WAIT_CLASS_MAX + 1,
            start: 0,
            ticks: 0,
            owner: 0,
        };
        assert_eq!(too_big.record(0), None);
        // A wait of three words (no owner) reads as owner 0.
        let r = RecordSlots::new(
            RECORD_WAIT,
            3,
            &[WaitKind::Blocked as u64 | 5 << 32, 10, 20],
        )
        .unwrap();
        let items: Vec<Item> = Records::new(r.as_slice()).collect();
        let [Item::Record(rec)] = items[..] else {
            panic!("one record expected: {items:?}");
        };
        assert_eq!(Wait::read(&rec).map(|w| (w.class, w.owner)), Some((5, 0)));
    }

    #[test]
    fn a_head_cut_short_is_reported_not_read_past() {
        let r = RecordSlots::new(77, 1, &[1, 2, 3, 4, 5]).unwrap();
        let cut = &r.as_slice()[..2];
        let items: Vec<Item> = Records::new(cut).collect();
        assert_eq!(
            items,
            vec![Item::Cut {
                head: &cut[0],
                have: 1
            }]
        );
    }

    #[test]
    fn an_allocation_record_round_trips_and_its_count_is_capped() {
        let a = AllocRecord {
            site: u32::MAX - 3,
            level: 254,
            count: 12_345,
            bytes: u64::MAX - 7,
        };
        let r = RecordSlots::new(RECORD_ALLOC, 0, &a.words()).unwrap();
        assert_eq!(r.as_slice().len(), 2);
        let items: Vec<Item> = Records::new(r.as_slice()).collect();
        let [Item::Record(rec)] = items[..] else {
            panic!("one record expected: {items:?}");
        };
        assert_eq!(AllocRecord::read(&rec), Some(a));
        let big = AllocRecord {
            count: u32::MAX,
            ..a
        };
        let r = RecordSlots::new(RECORD_ALLOC, 0, &big.words()).unwrap();
        let Some(Item::Record(rec)) = Records::new(r.as_slice()).next() else {
            panic!("a record expected");
        };
        let back = AllocRecord::read(&rec).unwrap();
        assert_eq!(
            (back.site, back.level, back.count),
            (a.site, 254, AllocRecord::MAX_COUNT)
        );
        let w = RecordSlots::new(RECORD_WAIT, 0, &a.words()).unwrap();
        let Some(Item::Record(rec)) = Records::new(w.as_slice()).next() else {
            panic!("a record expected");
        };
        assert_eq!(AllocRecord::read(&rec), None);
    }
}
