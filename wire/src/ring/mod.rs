//! Shared-memory event ring: many producer threads (probes inside the JVM),
//! one consumer (the sprig CLI, another process), no lock and no atomic
//! read-modify-write per event.
//!
//! # Layout
//!
//! One file in the private session directory, mapped shared by both
//! processes:
//!
//! ```text
//! [ header: 4096 bytes ][ segment 0 ][ segment 1 ] ... [ segment N-1 ]
//! segment = [ segment header: 64 bytes ][ event slot 0 ] ... (16 bytes each)
//! ```
//!
//! The [`Header`] carries the magic, the layout version
//! ([`PROTOCOL_VERSION`](crate::PROTOCOL_VERSION)), the clock and its ticks per second, the sizes,
//! and the shared counters (consumer heartbeat, consumer-gone and
//! producers-dead flags, lost events, segment claim counter) on their own
//! cache lines. Every shared field is an atomic; the only plain shared
//! memory is the event slots.
//!
//! # Why segments
//!
//! A producer thread owns one segment at a time, so a push is a plain
//! 16-byte store into its own slot followed by a `Release` store of the
//! segment's `committed` count: no lock, no CAS, no contended cache line
//! (JFluid's per-thread buffers, published record by record instead of in
//! batches). Only when its segment is full does it mark it `FULL` and claim
//! a `FREE` one with one CAS. Each claim takes a number from the header's
//! claim counter, so a thread's segments are ordered by that number even
//! if a thread index is reused by a later [`Producer`]. A producer scans
//! for a free segment from the one after the segment it claimed last
//! (the first time, from its thread index), so it goes round the region
//! and takes the segment the consumer freed longest ago. Taking the one
//! freed last instead (still in the consumer's cache, the scan starting
//! from the thread index every time, before 7b5e15b) made every store into
//! it fetch the line from the consumer's core: the probe pair cost ~3 ns
//! more, and in about one profiling session in seven on this machine kind
//! 12-28 ns more for the whole session (docs/event-ring.md).
//!
//! The consumer scans the segment headers, sorts the visible (`OWNED` or
//! `FULL`) segments by (thread, claim number) and reads each from its own
//! cursor up to `committed` (`Acquire`). Partially filled segments are thus
//! visible at once (live view, final drain) with no flush. A `FULL`
//! segment read to its end goes back to `FREE` (`Release`), which is the
//! only way segments are recycled, so a thread's unread segments never
//! disappear before the consumer has seen them: per-thread order is exact.
//!
//! # Records over 16 bytes
//!
//! [`Producer::push_record`] appends a multi-slot record
//! ([`crate::record`]): every slot written, then one Release store of
//! `committed`, so a reader sees all of it or none; a record that does
//! not fit what is left of the owned segment goes whole into the next.
//!
//! # Positions for position samples
//!
//! [`Region::positions`] reads, for every `OWNED` segment, its thread,
//! claim number and `committed` count, without consuming anything: a
//! thread in the consumer's process stamps such a reading with a time and
//! a weight and hands it to the CCT builder, which matches it against the
//! [`Run`]s that [`Consumer::poll_runs`] delivers (thread, claim number and
//! index of each slice's first event). A producer that owns no segment
//! (it waits for space, or never pushed) has no position. Each claim also
//! leaves its segment's index in the header's claim log, so that a
//! [`PositionReader`] reading every millisecond reads the owned segments'
//! headers only, not all of them.
//!
//! # Backpressure
//!
//! With no `FREE` segment a producer waits: it spins briefly, yields, then
//! sleeps in growing steps up to 1 ms, retrying the claim. The ticks it
//! waited (in the region's clock) go into the new segment as an
//! [`EventKind::AdjustTime`](crate::EventKind::AdjustTime) record just before the event that waited, so
//! the CCT builder can subtract them. The wait gives up when the consumer
//! set the consumer-gone flag, or when the consumer's heartbeat (bumped by
//! every [`Consumer::poll`]) has not moved for the producer's wait bound:
//! the region is then dead, the producer counts the event as lost, and
//! every later push on any producer returns [`Dead`] at once.
//!
//! # Trust
//!
//! Both sides validate what they read from the shared file: [`Region::open`]
//! checks the header against the file length and caches every size, so
//! later header changes by a buggy or hostile peer cannot move any access
//! out of the mapping; the consumer clamps `committed` to the segment
//! capacity and copies events out before handing them to its sink. Events
//! themselves are data to validate (kinds, ids), never trusted.
//!
//! One thing validation cannot stop: a peer that may write the file may
//! also truncate it, and touching a mapped page past the new end raises
//! SIGBUS. Sessions therefore use [`Region::create_memfd`]: anonymous
//! shared memory sealed against shrinking and growing, passed to the agent
//! as a descriptor ([`Region::from_fd`] insists on the seals). The path
//! based [`Region::create`] and [`Region::open`] remain for tools and tests.
//!
//! # Retirement
//!
//! At the end of a session the agent retires its region
//! ([`Region::retire_pinned`]): the shared pages become private memory in
//! place, and the next session's ring may be mapped at the same range. A
//! producer of a retired region writes nothing more: `push` and `try_push`
//! check the flag on their fast path, a producer waiting for space claims
//! nothing, and [`Producer::window`] hands out no window. Otherwise a late
//! event and its count would land in a segment of the next ring that
//! belongs to another producer.
//!
//! # Files
//!
//! `layout` (the header, the segment header, the sizes, [`RingConfig`] and
//! the errors), `region` ([`Region`]: creating, opening and mapping a
//! ring, its flags and counters, retirement), `producer` ([`Producer`]:
//! claims, the wait for space), `consumer` ([`Consumer`]: the polls),
//! `positions` ([`Region::positions`], [`PositionReader`] and the claim
//! log), and `raw`: every access to the mapping, the only `unsafe` of the
//! ring (the `mmap` calls, the header and segment addresses, the
//! producer's slot stores in [`Producer::push`], [`Producer::try_push`]
//! and [`Producer::push_record`],
//! the consumer's copy out).

mod consumer;
mod layout;
mod positions;
mod producer;
#[allow(unsafe_code)]
mod raw;
mod region;

pub use consumer::{Consumer, Run};
pub use layout::{
    CLAIM_LOG, Dead, HEADER_BYTES, Header, MAGIC, MAX_REGION_BYTES, MAX_SEGMENT_BYTES,
    MAX_SEGMENTS, MIN_SEGMENT_BYTES, RingConfig, RingError, SEGMENT_HEADER_BYTES, VirtualCpu,
};
pub use positions::{PositionReader, StreamPosition};
pub use producer::{Producer, Window};
pub use region::{Region, Spare};

#[cfg(test)]
mod tests;
