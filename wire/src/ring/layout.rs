//! The ring's layout in the shared file: the region header and its claim
//! log, the segment header and its states, the sizes a region may have
//! ([`RingConfig`]), and the errors.

use crate::clock;
use crate::control::ClockKind;
use crate::event::Event;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};
use thiserror::Error;

/// `b"SPRIGRNG"` as a little-endian u64.
pub const MAGIC: u64 = u64::from_le_bytes(*b"SPRIGRNG");
/// Bytes reserved for the region header (one page).
pub const HEADER_BYTES: usize = 4096;
/// Bytes of each segment's header (one cache line).
pub const SEGMENT_HEADER_BYTES: usize = 64;
/// Smallest segment: the header and four events.
pub const MIN_SEGMENT_BYTES: u32 = (SEGMENT_HEADER_BYTES + 4 * EVENT_BYTES) as u32;
/// Largest segment accepted (64 MiB).
pub const MAX_SEGMENT_BYTES: u32 = 64 << 20;
/// Most segments accepted.
pub const MAX_SEGMENTS: u32 = 1 << 20;
/// Largest region accepted (16 GiB).
pub const MAX_REGION_BYTES: u64 = 16 << 30;
pub(super) const EVENT_BYTES: usize = std::mem::size_of::<Event>();

pub(super) const FREE: u32 = 0;
/// Taken by a producer that is still writing the segment header.
pub(super) const CLAIMING: u32 = 1;
pub(super) const OWNED: u32 = 2;
pub(super) const FULL: u32 = 3;

/// The region header. Every field is atomic because the file is shared
/// with another process; the descriptive fields are written once by
/// [`Region::create`](super::Region::create) and cached by both sides.
#[repr(C)]
pub struct Header {
    pub(super) magic: AtomicU64,
    pub(super) version: AtomicU32,
    pub(super) header_bytes: AtomicU32,
    pub(super) clock: AtomicU32,
    pub(super) segment_bytes: AtomicU32,
    pub(super) segments: AtomicU32,
    pub(super) segment_header_bytes: AtomicU32,
    pub(super) ticks_per_sec: AtomicU64,
    _pad0: [u8; 24],
    /// Bumped by the consumer at every poll.
    pub(super) heartbeat: AtomicU64,
    /// Nonzero once the consumer said it is going away.
    pub(super) consumer_gone: AtomicU32,
    _pad1: [u8; 52],
    /// Nonzero once a producer gave up (consumer gone or stalled).
    pub(super) producers_dead: AtomicU32,
    _pad2: [u8; 4],
    /// Events producers could not write.
    pub(super) lost_events: AtomicU64,
    _pad3: [u8; 48],
    /// Segment claim counter: each claimed segment takes the next number.
    pub(super) claims: AtomicU64,
    _pad4: [u8; 56],
    /// Which segment each recent claim took: claim `k` writes
    /// [`claim_log_entry`]`(k, segment)` at entry `k % CLAIM_LOG` once the
    /// segment is `OWNED`, so a reader of positions learns of new claims
    /// without scanning every segment header ([`PositionReader`]).
    pub(super) claim_log: [AtomicU64; CLAIM_LOG],
}

/// Entries of the header's claim log.
pub const CLAIM_LOG: usize = 256;

/// A claim log entry: `(k + 1) << 20 | segment` (0: never written).
pub(super) fn claim_log_entry(k: u64, segment: u32) -> u64 {
    (k.wrapping_add(1) << 20) | u64::from(segment)
}

const _: () = assert!(MAX_SEGMENTS == 1 << 20);
const _: () = assert!(std::mem::size_of::<Header>() <= HEADER_BYTES);
const _: () = assert!(std::mem::offset_of!(Header, heartbeat) == 64);
const _: () = assert!(std::mem::offset_of!(Header, producers_dead) == 128);
const _: () = assert!(std::mem::offset_of!(Header, claims) == 192);
const _: () = assert!(std::mem::offset_of!(Header, claim_log) == 256);

/// Header of one segment, one cache line.
#[repr(C)]
pub(super) struct SegHeader {
    /// FREE, CLAIMING, OWNED or FULL.
    pub(super) state: AtomicU32,
    /// The owning producer's thread index.
    pub(super) thread: AtomicU32,
    /// Claim number: orders one thread's segments.
    pub(super) seq: AtomicU64,
    /// Events written and published in this segment.
    pub(super) committed: AtomicU32,
    /// A virtual thread's CPU clock under `--clock cpu` ([`VirtualCpu`]):
    /// 0 when the owner published none (a platform thread), else even
    /// while `cpu_base` and `cpu_carrier` hold a whole publication and odd
    /// while the owner writes them (a sequence lock: one writer, the
    /// owner).
    pub(super) cpu_seq: AtomicU32,
    pub(super) cpu_base: AtomicU64,
    pub(super) cpu_carrier: AtomicU32,
    _pad: [u8; 28],
}

const _: () = assert!(std::mem::size_of::<SegHeader>() == SEGMENT_HEADER_BYTES);
const _: () = assert!(std::mem::offset_of!(SegHeader, committed) == 16);

/// A virtual thread's own CPU clock as its producer last published it in
/// its segment's header, for position samples weighed by CPU time
/// (`--clock cpu`): a virtual thread has no kernel thread of its own, so
/// its clock is its carrier's CPU clock plus `base` while it is mounted
/// (`carrier`, the carrier's kernel thread id) and `base` itself while it
/// is unmounted (`carrier` 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VirtualCpu {
    pub carrier: u32,
    pub base: u64,
}

impl VirtualCpu {
    /// The virtual thread's clock, given its carrier's CPU clock now
    /// (ignored while it is unmounted).
    pub fn at(&self, carrier_cpu: u64) -> u64 {
        if self.carrier == 0 {
            self.base
        } else {
            carrier_cpu.wrapping_add(self.base)
        }
    }
}

impl SegHeader {
    /// Sets the publication of a segment no reader can see yet (before it
    /// is `OWNED`; the `Release` store of that state publishes it).
    pub(super) fn init_cpu(&self, cpu: Option<VirtualCpu>) {
        let (seq, carrier, base) = match cpu {
            Some(c) => (2, c.carrier, c.base),
            None => (0, 0, 0),
        };
        self.cpu_base.store(base, Ordering::Relaxed);
        self.cpu_carrier.store(carrier, Ordering::Relaxed);
        self.cpu_seq.store(seq, Ordering::Relaxed);
    }

    /// Publishes `cpu` in an owned segment (its owner only).
    pub(super) fn publish_cpu(&self, cpu: VirtualCpu) {
        let seq = self.cpu_seq.load(Ordering::Relaxed) & !1;
        self.cpu_seq.store(seq | 1, Ordering::Relaxed);
        fence(Ordering::Release);
        self.cpu_base.store(cpu.base, Ordering::Relaxed);
        self.cpu_carrier.store(cpu.carrier, Ordering::Relaxed);
        // Never back to 0 (none) once published.
        let next = match seq.wrapping_add(2) {
            0 => 2,
            n => n,
        };
        self.cpu_seq.store(next, Ordering::Release);
    }

    /// The owner's publication, `None` when there is none or the owner
    /// was writing it at each of a few tries.
    pub(super) fn read_cpu(&self) -> Option<VirtualCpu> {
        for _ in 0..4 {
            let s1 = self.cpu_seq.load(Ordering::Acquire);
            if s1 == 0 {
                return None;
            }
            let base = self.cpu_base.load(Ordering::Relaxed);
            let carrier = self.cpu_carrier.load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            if s1 & 1 == 0 && self.cpu_seq.load(Ordering::Relaxed) == s1 {
                return Some(VirtualCpu { carrier, base });
            }
            std::hint::spin_loop();
        }
        None
    }
}

pub(super) fn clock_code(c: ClockKind) -> u32 {
    match c {
        ClockKind::Tsc => 1,
        ClockKind::Monotonic => 2,
        ClockKind::ThreadCpu => 3,
    }
}

pub(super) fn clock_from_code(v: u32) -> Option<ClockKind> {
    match v {
        1 => Some(ClockKind::Tsc),
        2 => Some(ClockKind::Monotonic),
        3 => Some(ClockKind::ThreadCpu),
        _ => None,
    }
}

/// Sizes and clock of a new region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingConfig {
    /// Bytes per segment, header included: a multiple of 64, at least
    /// [`MIN_SEGMENT_BYTES`].
    pub segment_bytes: u32,
    /// Number of segments; at least 2.
    pub segments: u32,
    pub clock: ClockKind,
    pub ticks_per_sec: u64,
}

impl Default for RingConfig {
    /// 512 segments of 64 KiB (4,092 events each): 32 MiB, ~2 M events.
    fn default() -> RingConfig {
        RingConfig {
            segment_bytes: 64 << 10,
            segments: 512,
            clock: ClockKind::Monotonic,
            ticks_per_sec: clock::NANOS_PER_SEC,
        }
    }
}

impl RingConfig {
    /// Checks the sizes and returns the file length.
    pub(super) fn validate(&self) -> Result<u64, RingError> {
        let bad = |why: String| Err(RingError::Layout(why));
        if self.segment_bytes < MIN_SEGMENT_BYTES || self.segment_bytes > MAX_SEGMENT_BYTES {
            return bad(format!(
                "segment size {} outside {MIN_SEGMENT_BYTES}..={MAX_SEGMENT_BYTES}",
                self.segment_bytes
            ));
        }
        if !self.segment_bytes.is_multiple_of(64) {
            return bad(format!(
                "segment size {} is not a multiple of 64",
                self.segment_bytes
            ));
        }
        if self.segments < 2 || self.segments > MAX_SEGMENTS {
            return bad(format!(
                "segment count {} outside 2..={MAX_SEGMENTS}",
                self.segments
            ));
        }
        if self.ticks_per_sec == 0 {
            return bad("ticks_per_sec is 0".into());
        }
        let len = HEADER_BYTES as u64 + self.segment_bytes as u64 * self.segments as u64;
        if len > MAX_REGION_BYTES {
            return bad(format!("region of {len} bytes is too large"));
        }
        Ok(len)
    }
}

/// Why a region could not be created or opened.
#[derive(Debug, Error)]
pub enum RingError {
    #[error("ring file: {0}")]
    Io(#[from] std::io::Error),
    #[error("not a sprig ring file (bad magic)")]
    BadMagic,
    #[error("ring layout version {found}, this sprig speaks {expected}")]
    BadVersion { found: u32, expected: u32 },
    #[error("bad ring layout: {0}")]
    Layout(String),
}

/// The region is dead: the consumer is gone or stalled past the wait bound
/// (or the region was retired). The agent switches profiling off.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
#[error("the event ring is dead: the consumer is gone")]
pub struct Dead;
