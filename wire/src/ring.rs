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
//! ([`PROTOCOL_VERSION`]), the clock and its ticks per second, the sizes,
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
//! # Positions for sampling
//!
//! [`Region::positions`] reads, for every `OWNED` segment, its thread,
//! claim number and `committed` count, without consuming anything: a
//! sampler in the consumer's process stamps such a reading with a time and
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
//! [`EventKind::AdjustTime`] record just before the event that waited, so
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

use crate::clock;
use crate::control::{ClockKind, PROTOCOL_VERSION};
use crate::event::{Event, EventKind};
use crate::memfd;
use memmap2::MmapRaw;
use std::fs::{File, OpenOptions};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};
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
const EVENT_BYTES: usize = std::mem::size_of::<Event>();

const FREE: u32 = 0;
/// Taken by a producer that is still writing the segment header.
const CLAIMING: u32 = 1;
const OWNED: u32 = 2;
const FULL: u32 = 3;

/// The region header. Every field is atomic because the file is shared
/// with another process; the descriptive fields are written once by
/// [`Region::create`] and cached by both sides.
#[repr(C)]
pub struct Header {
    magic: AtomicU64,
    version: AtomicU32,
    header_bytes: AtomicU32,
    clock: AtomicU32,
    segment_bytes: AtomicU32,
    segments: AtomicU32,
    segment_header_bytes: AtomicU32,
    ticks_per_sec: AtomicU64,
    _pad0: [u8; 24],
    /// Bumped by the consumer at every poll.
    heartbeat: AtomicU64,
    /// Nonzero once the consumer said it is going away.
    consumer_gone: AtomicU32,
    _pad1: [u8; 52],
    /// Nonzero once a producer gave up (consumer gone or stalled).
    producers_dead: AtomicU32,
    _pad2: [u8; 4],
    /// Events producers could not write.
    lost_events: AtomicU64,
    _pad3: [u8; 48],
    /// Segment claim counter: each claimed segment takes the next number.
    claims: AtomicU64,
    _pad4: [u8; 56],
    /// Which segment each recent claim took: claim `k` writes
    /// [`claim_log_entry`]`(k, segment)` at entry `k % CLAIM_LOG` once the
    /// segment is `OWNED`, so a reader of positions learns of new claims
    /// without scanning every segment header ([`PositionReader`]).
    claim_log: [AtomicU64; CLAIM_LOG],
}

/// Entries of the header's claim log.
pub const CLAIM_LOG: usize = 256;

/// A claim log entry: `(k + 1) << 20 | segment` (0: never written).
fn claim_log_entry(k: u64, segment: u32) -> u64 {
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
struct SegHeader {
    /// FREE, CLAIMING, OWNED or FULL.
    state: AtomicU32,
    /// The owning producer's thread index.
    thread: AtomicU32,
    /// Claim number: orders one thread's segments.
    seq: AtomicU64,
    /// Events written and published in this segment.
    committed: AtomicU32,
    _pad: [u8; 44],
}

const _: () = assert!(std::mem::size_of::<SegHeader>() == SEGMENT_HEADER_BYTES);

fn clock_code(c: ClockKind) -> u32 {
    match c {
        ClockKind::Tsc => 1,
        ClockKind::Monotonic => 2,
        ClockKind::ThreadCpu => 3,
    }
}

fn clock_from_code(v: u32) -> Option<ClockKind> {
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
    fn validate(&self) -> Result<u64, RingError> {
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

/// How a region is mapped.
enum Mapping {
    /// Unmaps the range (shared, or private after `retire`) on drop.
    Owned(#[allow(dead_code)] MmapRaw),
    /// Mapped at a range this process never unmaps ([`Region::from_fd_pinned`]);
    /// `reserved` bytes from the base belong to it (at least the region's).
    Pinned { reserved: usize },
}

/// An address range a retired pinned region leaves behind: mapped private
/// and writable for the rest of the process, never unmapped, to be used by
/// the next pinned region ([`Region::from_fd_pinned`]). Not `Clone`: one
/// region at a time owns it.
#[derive(Debug)]
pub struct Spare {
    base: usize,
    len: usize,
}

/// A mapped ring file. Shared between the producers of one process (or
/// the consumer) through `Arc`.
pub struct Region {
    /// The mapping: unmapped on drop, or pinned (never unmapped).
    map: Mapping,
    base: *mut u8,
    len: usize,
    segment_bytes: usize,
    segments: u32,
    /// Event slots per segment.
    capacity: u32,
    clock: ClockKind,
    ticks_per_sec: u64,
    /// This process's view: set once any producer here gave up.
    dead: AtomicBool,
    /// Set by [`Region::retire`]: the shared pages are gone.
    retired: AtomicBool,
    /// Events lost by producers in this process.
    lost_here: AtomicU64,
}

// SAFETY: `base` points into `map`, which lives as long as the Region. All
// shared state behind it is accessed through atomics, except event slots,
// which are written only by the one producer owning the segment and read
// by the consumer only below a `committed` count it loaded with Acquire.
unsafe impl Send for Region {}
// SAFETY: see `Send`; no method hands out references to non-atomic memory.
unsafe impl Sync for Region {}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region")
            .field("len", &self.len)
            .field("segment_bytes", &self.segment_bytes)
            .field("segments", &self.segments)
            .field("clock", &self.clock)
            .field("ticks_per_sec", &self.ticks_per_sec)
            .finish_non_exhaustive()
    }
}

impl Region {
    /// Creates the ring file at `path` (mode 0600, must not exist) and maps
    /// it.
    pub fn create(path: &Path, cfg: &RingConfig) -> Result<Arc<Region>, RingError> {
        let len = cfg.validate()?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)?;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        file.set_len(len)?;
        Region::init(&file, cfg, len)
    }

    /// Creates the ring in anonymous shared memory, a memfd sealed against
    /// shrinking and growing, and maps it; returns the region and the
    /// descriptor to hand to the other side ([`Region::from_fd`], e.g. over
    /// the control socket with [`crate::session::Channel::send_with_fd`]).
    ///
    /// Unlike a file in a directory, the memory is never written back to a
    /// disk (on a disk-backed `/tmp`, writeback write-protects the ring's
    /// pages every few seconds and the probes' next stores take page
    /// faults), and the seals mean no peer can truncate it under a mapping
    /// (SIGBUS).
    pub fn create_memfd(cfg: &RingConfig) -> Result<(Arc<Region>, OwnedFd), RingError> {
        let len = cfg.validate()?;
        let fd = memfd::create("sprig-ring")?;
        let file = File::from(fd);
        file.set_len(len)?;
        memfd::seal_size(&file)?;
        let region = Region::init(&file, cfg, len)?;
        Ok((region, OwnedFd::from(file)))
    }

    /// Maps a ring received as a descriptor (see [`Region::create_memfd`]),
    /// validating it like [`Region::open`]; the descriptor must carry the
    /// size seals, so the sender cannot truncate it under this mapping.
    pub fn from_fd(fd: OwnedFd) -> Result<Arc<Region>, RingError> {
        memfd::check_size_sealed(&fd)?;
        Region::open_file(File::from(fd))
    }

    /// Maps a ring received as a descriptor, like [`Region::from_fd`], at
    /// an address range this process never unmaps: inside `spare` (what
    /// the previous pinned region left, [`Region::retire_pinned`]) when the
    /// ring fits there, else at a new range (and the old one stays private
    /// and unused for good). For the agent, whose probes may write into
    /// the ring from code that no lock or safepoint can wait for (Java
    /// stores through raw addresses): a write that comes after the session
    /// retired the ring lands in private memory, or in the next session's
    /// ring at the same place, never in memory the process gave back.
    pub fn from_fd_pinned(fd: OwnedFd, spare: Option<Spare>) -> Result<Arc<Region>, RingError> {
        memfd::check_size_sealed(&fd)?;
        let file = File::from(fd);
        let cfg = Region::read_config(&file)?;
        let len = cfg.validate()? as usize;
        let (at, reserved) = match spare {
            Some(s) if s.len >= len => (s.base, s.len),
            _ => (0, len),
        };
        let base = map_pinned(&file, at, len)?;
        Ok(Arc::new(Region::with_mapping(
            Mapping::Pinned { reserved },
            base,
            &cfg,
            len,
        )))
    }

    /// Whether the region is mapped at a range never unmapped.
    pub fn is_pinned(&self) -> bool {
        matches!(self.map, Mapping::Pinned { .. })
    }

    /// Writes the header of a fresh (zeroed) ring of `len` bytes in `file`
    /// and maps it.
    fn init(file: &File, cfg: &RingConfig, len: u64) -> Result<Arc<Region>, RingError> {
        let region = Region::map(file, cfg, len as usize)?;
        let h = region.header();
        h.version.store(PROTOCOL_VERSION, Ordering::Relaxed);
        h.header_bytes.store(HEADER_BYTES as u32, Ordering::Relaxed);
        h.clock.store(clock_code(cfg.clock), Ordering::Relaxed);
        h.segment_bytes.store(cfg.segment_bytes, Ordering::Relaxed);
        h.segments.store(cfg.segments, Ordering::Relaxed);
        h.segment_header_bytes
            .store(SEGMENT_HEADER_BYTES as u32, Ordering::Relaxed);
        h.ticks_per_sec.store(cfg.ticks_per_sec, Ordering::Relaxed);
        // The file is fresh (zeroed): every segment is FREE, counters 0.
        h.magic.store(MAGIC, Ordering::Release);
        Ok(Arc::new(region))
    }

    /// Opens and maps an existing ring file, validating its header against
    /// the file length and this build's layout.
    pub fn open(path: &Path) -> Result<Arc<Region>, RingError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)?;
        Region::open_file(file)
    }

    fn open_file(file: File) -> Result<Arc<Region>, RingError> {
        let cfg = Region::read_config(&file)?;
        let len = cfg.validate()?;
        Ok(Arc::new(Region::map(&file, &cfg, len as usize)?))
    }

    /// Reads and checks the header of a ring file against the file length
    /// and this build's layout.
    fn read_config(file: &File) -> Result<RingConfig, RingError> {
        let file_len = file.metadata()?.len();
        if file_len < HEADER_BYTES as u64 {
            return Err(RingError::Layout(format!(
                "file of {file_len} bytes is shorter than the header"
            )));
        }
        if file_len > MAX_REGION_BYTES {
            return Err(RingError::Layout(format!(
                "file of {file_len} bytes is too large"
            )));
        }
        // Read the header through a header-only mapping first.
        let head = memmap2::MmapOptions::new()
            .len(HEADER_BYTES)
            .map_raw_read_only(file)?;
        // SAFETY: the mapping is HEADER_BYTES long (≥ size_of::<Header>()),
        // page aligned, and Header consists of atomics and padding only, so
        // concurrent writers cannot make the reference unsound.
        let h = unsafe { &*(head.as_ptr() as *const Header) };
        if h.magic.load(Ordering::Acquire) != MAGIC {
            return Err(RingError::BadMagic);
        }
        let version = h.version.load(Ordering::Relaxed);
        if version != PROTOCOL_VERSION {
            return Err(RingError::BadVersion {
                found: version,
                expected: PROTOCOL_VERSION,
            });
        }
        if h.header_bytes.load(Ordering::Relaxed) as usize != HEADER_BYTES
            || h.segment_header_bytes.load(Ordering::Relaxed) as usize != SEGMENT_HEADER_BYTES
        {
            return Err(RingError::Layout("header sizes do not match".into()));
        }
        let clock_raw = h.clock.load(Ordering::Relaxed);
        let cfg = RingConfig {
            segment_bytes: h.segment_bytes.load(Ordering::Relaxed),
            segments: h.segments.load(Ordering::Relaxed),
            clock: clock_from_code(clock_raw)
                .ok_or_else(|| RingError::Layout(format!("unknown clock code {clock_raw}")))?,
            ticks_per_sec: h.ticks_per_sec.load(Ordering::Relaxed),
        };
        drop(head);
        let len = cfg.validate()?;
        if len != file_len {
            return Err(RingError::Layout(format!(
                "header describes {len} bytes but the file has {file_len}"
            )));
        }
        Ok(cfg)
    }

    /// Maps `len` bytes of `file`, every page present at once
    /// (`MAP_POPULATE`): a probe should not take a page fault to write an
    /// event (anonymous shared memory comes in 4 KiB pages here, a fault
    /// for every 256 events), so both sides pay for the pages when the
    /// session starts instead (for the default 32 MiB, measured here: about
    /// 25 ms in the CLI before the attach, 5 ms on the agent's thread).
    fn map(file: &File, cfg: &RingConfig, len: usize) -> Result<Region, RingError> {
        let map = memmap2::MmapOptions::new()
            .len(len)
            .populate()
            .map_raw(file)?;
        let base = map.as_mut_ptr();
        Ok(Region::with_mapping(Mapping::Owned(map), base, cfg, len))
    }

    fn with_mapping(map: Mapping, base: *mut u8, cfg: &RingConfig, len: usize) -> Region {
        Region {
            map,
            base,
            len,
            segment_bytes: cfg.segment_bytes as usize,
            segments: cfg.segments,
            capacity: ((cfg.segment_bytes as usize - SEGMENT_HEADER_BYTES) / EVENT_BYTES) as u32,
            clock: cfg.clock,
            ticks_per_sec: cfg.ticks_per_sec,
            dead: AtomicBool::new(false),
            retired: AtomicBool::new(false),
            lost_here: AtomicU64::new(0),
        }
    }

    #[inline]
    fn header(&self) -> &Header {
        // SAFETY: the mapping is at least HEADER_BYTES long and page
        // aligned; Header is all atomics and padding (see `Send`).
        unsafe { &*(self.base as *const Header) }
    }

    /// Header of segment `i` (< `segments`).
    #[inline]
    fn seg(&self, i: u32) -> &SegHeader {
        debug_assert!(i < self.segments);
        // SAFETY: i < segments (callers iterate 0..segments or use indices
        // they got from such a loop), so the 64-byte header lies inside the
        // mapping; segment_bytes is a multiple of 64, so it is aligned;
        // SegHeader is all atomics and padding.
        unsafe { &*(self.seg_ptr(i) as *const SegHeader) }
    }

    #[inline]
    fn seg_ptr(&self, i: u32) -> *mut u8 {
        // SAFETY: HEADER_BYTES + i * segment_bytes < len for i < segments
        // (checked by RingConfig::validate when the region was mapped).
        unsafe {
            self.base
                .add(HEADER_BYTES + i as usize * self.segment_bytes)
        }
    }

    /// First event slot of segment `i`.
    #[inline]
    fn slots(&self, i: u32) -> *mut Event {
        // SAFETY: as in `seg_ptr`; the slots follow the 64-byte header
        // inside the same segment and are 16-byte aligned.
        unsafe { self.seg_ptr(i).add(SEGMENT_HEADER_BYTES) as *mut Event }
    }

    pub fn clock(&self) -> ClockKind {
        self.clock
    }

    pub fn ticks_per_sec(&self) -> u64 {
        self.ticks_per_sec
    }

    /// Number of segments.
    pub fn segments(&self) -> u32 {
        self.segments
    }

    /// Events one segment holds.
    pub fn segment_capacity(&self) -> u32 {
        self.capacity
    }

    /// Bytes of the mapping.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a region has at least two segments.
    pub fn is_empty(&self) -> bool {
        false
    }

    fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Acquire)
    }

    /// The consumer's heartbeat counter.
    pub fn heartbeat_value(&self) -> u64 {
        self.header().heartbeat.load(Ordering::Acquire)
    }

    /// Consumer side: tells producers to stop waiting; they give up at
    /// their next wait and the region becomes dead.
    pub fn mark_consumer_gone(&self) {
        self.header().consumer_gone.store(1, Ordering::Release);
    }

    /// Whether the consumer said it is gone.
    pub fn consumer_gone(&self) -> bool {
        self.header().consumer_gone.load(Ordering::Acquire) != 0
    }

    /// Whether producers gave up (in this process, or as the shared header
    /// says), or the region was retired.
    pub fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Acquire)
            || self.is_retired()
            || self.header().producers_dead.load(Ordering::Acquire) != 0
    }

    /// Events producers could not write: the shared count, or this
    /// process's own once the region is retired.
    pub fn lost_events(&self) -> u64 {
        let here = self.lost_here.load(Ordering::Relaxed);
        if self.is_retired() {
            return here;
        }
        self.header().lost_events.load(Ordering::Relaxed).max(here)
    }

    fn count_lost(&self, n: u64) {
        self.lost_here.fetch_add(n, Ordering::Relaxed);
        if !self.is_retired() {
            self.header().lost_events.fetch_add(n, Ordering::Relaxed);
        }
    }

    fn mark_dead(&self) {
        self.dead.store(true, Ordering::Release);
        if !self.is_retired() {
            self.header().producers_dead.store(1, Ordering::Release);
        }
    }

    /// Agent side, at detach: replaces the shared mapping in place with
    /// private zeroed memory, so a store already past its producer's check
    /// lands harmlessly and the file's pages are released; producers write
    /// nothing more and return [`Dead`] from their next push on (a pinned
    /// region's range may hold the next session's ring by then). The
    /// address range stays reserved until the last `Arc` drops. Idempotent.
    pub fn retire(&self) -> std::io::Result<()> {
        if self.retired.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.dead.store(true, Ordering::Release);
        remap_private(self.base, self.len)
    }

    /// [`Region::retire`] for a pinned region, handing back its range for
    /// the next one: `Some` only to the call that retired it, when the
    /// region is pinned and the shared pages are gone.
    pub fn retire_pinned(&self) -> std::io::Result<Option<Spare>> {
        if self.retired.swap(true, Ordering::AcqRel) {
            return Ok(None);
        }
        self.dead.store(true, Ordering::Release);
        remap_private(self.base, self.len)?;
        Ok(match self.map {
            Mapping::Pinned { reserved } => Some(Spare {
                base: self.base as usize,
                len: reserved,
            }),
            Mapping::Owned(_) => None,
        })
    }
}

impl Drop for Region {
    /// A pinned region is retired (its shared pages released), never
    /// unmapped; an owned one is unmapped by its `MmapRaw`.
    fn drop(&mut self) {
        if self.is_pinned() {
            let _ = self.retire();
        }
    }
}

/// Maps `len` bytes of `file` shared, every page present at once, at `at`
/// (a [`Spare`]'s base, replacing its private pages) or, with `at` 0,
/// wherever the kernel chooses.
fn map_pinned(file: &File, at: usize, len: usize) -> std::io::Result<*mut u8> {
    use std::os::fd::AsRawFd;
    let fixed = if at == 0 { 0 } else { libc::MAP_FIXED };
    // SAFETY: with MAP_FIXED, [at, at+len) lies inside a Spare: a range
    // this process mapped for a retired pinned region and never unmaps,
    // which no live Region uses (a Spare is handed out once, by the call
    // that retired its region); replacing it is atomic. Without it the
    // kernel picks a free range. `file` is a live descriptor of at least
    // `len` bytes (checked by `read_config`, and sealed).
    let p = unsafe {
        libc::mmap(
            at as *mut libc::c_void,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_POPULATE | fixed,
            file.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        let e = std::io::Error::last_os_error();
        if at != 0 {
            // A failed MAP_FIXED may have dropped part of the range: map it
            // private again, so nothing else moves in there.
            let _ = remap_private(at as *mut u8, len);
        }
        return Err(e);
    }
    Ok(p.cast())
}

/// Replaces `len` bytes at `base` (a mapping we own) by private anonymous
/// memory, atomically (MAP_FIXED).
fn remap_private(base: *mut u8, len: usize) -> std::io::Result<()> {
    // SAFETY: [base, base+len) is exactly the range of the region's own
    // mapping, which lives until the Region drops; MAP_FIXED replaces it
    // atomically, so other threads always see mapped, writable memory there.
    let p = unsafe {
        libc::mmap(
            base.cast(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Writes event `ev` into slot `i` and publishes it: `committed = i + 1`
/// with Release, so a consumer that loads the count with Acquire sees the
/// slot's contents.
///
/// # Safety
/// `slots` and `committed` must belong to a segment owned by the caller,
/// inside a live mapping, and `i` must be below that segment's capacity.
#[inline(always)]
unsafe fn publish(slots: *mut Event, committed: *const AtomicU32, i: u32, ev: Event) {
    // SAFETY: guaranteed by the caller: the slot is inside the mapping and
    // no one else writes it; the consumer reads it only below a count it
    // loaded with Acquire, and this Release store orders the slot write
    // before the new count.
    unsafe {
        slots.add(i as usize).write(ev);
        (*committed).store(i + 1, Ordering::Release);
    }
}

/// One producer thread's handle. Not `Sync`: one per thread.
pub struct Producer {
    region: Arc<Region>,
    thread: u32,
    wait_bound: Duration,
    /// Owned segment, or `NONE`.
    seg: u32,
    slots: *mut Event,
    /// The owned segment's `committed` count (dangling when none).
    committed: *const AtomicU32,
    pos: u32,
    /// Capacity of the owned segment; 0 when none is owned, so the next
    /// push takes the slow path.
    cap: u32,
    /// Where the next claim scan starts.
    hint: u32,
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

// SAFETY: the raw pointer points into the Region the Producer keeps alive
// through its Arc; the segment it points to is owned by this Producer, so
// moving the Producer to another thread moves the ownership along.
unsafe impl Send for Producer {}

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
        }
    }

    pub fn thread(&self) -> u32 {
        self.thread
    }

    pub fn region(&self) -> &Arc<Region> {
        &self.region
    }

    /// Appends one event. The common case is a slot store and a Release
    /// store of the segment's count.
    ///
    /// Once the region is retired, nothing: [`Dead`], with the event
    /// counted lost in this process only. A pinned region's range may hold
    /// the next session's ring by then (see [`Region::from_fd_pinned`]),
    /// where this producer's segment belongs to another producer.
    #[inline]
    pub fn push(&mut self, ev: Event) -> Result<(), Dead> {
        if self.pos < self.cap && !self.region.is_retired() {
            // SAFETY: pos < cap means this producer owns segment `seg`,
            // whose slot array is `slots` with `cap` slots and whose count
            // is `committed`, inside the mapping kept alive by `region`;
            // not retired, so the range still holds that region's pages.
            unsafe { publish(self.slots, self.committed, self.pos, ev) };
            self.pos += 1;
            Ok(())
        } else {
            // Passed as two words so the hot path can keep the event in
            // registers (a 16-byte struct argument would go through memory).
            self.push_slow(ev.ts, pack_rest(&ev))
        }
    }

    /// Appends one event only if it fits the segment this producer owns
    /// (a slot store and a Release store of the count); returns false,
    /// having written nothing, when a new segment must be claimed first
    /// (which may wait: see [`Producer::push`]), or the region is retired.
    #[inline]
    pub fn try_push(&mut self, ev: Event) -> bool {
        if self.pos < self.cap && !self.region.is_retired() {
            // SAFETY: as in `push`: pos < cap means this producer owns
            // segment `seg` with `cap` slots at `slots` and its count at
            // `committed`, inside the mapping kept alive by `region`, which
            // is not retired.
            unsafe { publish(self.slots, self.committed, self.pos, ev) };
            self.pos += 1;
            true
        } else {
            false
        }
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
    fn push_slow(&mut self, ts: u64, rest: u64) -> Result<(), Dead> {
        let ev = unpack(ts, rest);
        if self.is_region_dead() {
            return self.die();
        }
        self.release();
        if self.claim() {
            return self.push(ev);
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
                // The fresh segment has at least 4 slots: both fit.
                self.push(Event::new(EventKind::AdjustTime, 0, waited))?;
                return self.push(ev);
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
}

#[inline(always)]
fn pack_rest(ev: &Event) -> u64 {
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

/// How far one producer has written: thread `thread` had published
/// `committed` events of the segment it claimed with number `claim` when
/// [`Region::positions`] read it. Matched against [`Run`]s, this says
/// which event of a thread's stream was the last before the reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StreamPosition {
    pub thread: u32,
    pub claim: u64,
    pub committed: u32,
}

impl Region {
    /// Appends to `out` the position of every producer that owns a segment
    /// now (`OWNED`; a producer waiting for a free segment owns none, and a
    /// thread that never pushed has none). For a sampler outside the
    /// producers' process: it reads segment headers only, with `Acquire`
    /// loads, writes nothing to the shared file and takes nothing from the
    /// consumer, so it may run on any thread beside the [`Consumer`].
    ///
    /// `committed` is clamped to the segment capacity. A header is read
    /// twice (state and claim number before and after the other fields)
    /// and left out when the segment changed owner in between, or when its
    /// claim number was never handed out (a damaged header); a position is
    /// data to validate like an event (its claim may name no segment the
    /// consumer ever delivers).
    pub fn positions(&self, out: &mut Vec<StreamPosition>) {
        if self.is_retired() {
            return;
        }
        let start = out.len();
        out.extend((0..self.segments).filter_map(|i| self.position_in(i)));
        // Read after the headers: a claim made while they were read counts.
        let handed_out = self.header().claims.load(Ordering::Acquire);
        keep_handed_out(out, start, handed_out);
    }

    /// The position of the producer owning segment `i`, `None` when none
    /// owns it or its owner changed while it was read (see
    /// [`Region::positions`]; the caller checks the claim number).
    fn position_in(&self, i: u32) -> Option<StreamPosition> {
        let h = self.seg(i);
        if h.state.load(Ordering::Acquire) != OWNED {
            return None;
        }
        let claim = h.seq.load(Ordering::Acquire);
        let thread = h.thread.load(Ordering::Acquire);
        let committed = h.committed.load(Ordering::Acquire).min(self.capacity);
        if h.state.load(Ordering::Acquire) != OWNED || h.seq.load(Ordering::Acquire) != claim {
            return None;
        }
        Some(StreamPosition {
            thread,
            claim,
            committed,
        })
    }
}

/// Leaves out of `out[start..]` the positions whose claim number was never
/// handed out (not below `handed_out`: a damaged header).
fn keep_handed_out(out: &mut Vec<StreamPosition>, start: usize, handed_out: u64) {
    let mut kept = start;
    for j in start..out.len() {
        if out[j].claim < handed_out {
            out[kept] = out[j];
            kept += 1;
        }
    }
    out.truncate(kept);
}

/// Reads the producers' positions as [`Region::positions`] does, for a
/// sampler that reads them every millisecond, in time that grows with the
/// producers and their claims, not with the ring's size. A segment becomes
/// owned only by a claim, and each claim leaves its segment's index in the
/// header's claim log once the segment is owned; so the reader keeps the
/// segments it saw owned, reads only their headers, and adds those of the
/// claims counted since its last read from the log. A claim whose entry is
/// not written yet (its producer is between taking the number and
/// publishing the segment) is looked up again at the next read. It scans
/// every header only at its first read, and when the log has gone round
/// since (more than [`CLAIM_LOG`] claims between two reads).
///
/// An idle session's `sprig` process took 1.2% of a core with the default
/// 32 MiB ring when every read scanned every header; with
/// `--ring-mib 1024` (16,384 segments) 22.3%, and 4.8% when it scanned
/// only after a claim (2026-11-27, quiet host). Under Jetty's 2,300 claims
/// a second that still meant a scan at nearly every read: with the 1 GiB
/// ring `sprig` took 13.7-13.8 ms of CPU a Jetty iteration, and 5.8-6.2 ms
/// with the claim log, as with the default ring (docs/event-ring.md).
#[derive(Debug, Default)]
pub struct PositionReader {
    /// Segments seen owned, in index order.
    owned: Vec<u32>,
    /// The next claim number to look up in the log; `None` before the
    /// first read.
    next: Option<u64>,
    /// Claims counted whose log entry was not written yet.
    pending: Vec<u64>,
    /// Full scans so far (for tests and figures).
    pub full_scans: u64,
}

/// Claims looked up again after a full scan: a claim counted before the
/// scan may have published its segment as owned only after the scan
/// passed it.
const SCAN_OVERLAP: u64 = 64;

/// Claims pending at most before the reader scans instead.
const MAX_PENDING: usize = 1024;

impl PositionReader {
    /// Appends the positions of the producers owning a segment now.
    pub fn read(&mut self, region: &Region, out: &mut Vec<StreamPosition>) {
        if region.is_retired() {
            return;
        }
        let start = out.len();
        let claims = region.header().claims.load(Ordering::Acquire);
        let followed = match self.next {
            Some(next) => self.follow_log(region, next, claims),
            None => false,
        };
        if followed {
            self.next = Some(claims);
            self.owned.retain(|&i| match region.position_in(i) {
                Some(p) => {
                    out.push(p);
                    true
                }
                None => false,
            });
        } else {
            self.full_scans += 1;
            self.owned.clear();
            self.pending.clear();
            for i in 0..region.segments {
                if let Some(p) = region.position_in(i) {
                    self.owned.push(i);
                    out.push(p);
                }
            }
            self.next = Some(claims.saturating_sub(SCAN_OVERLAP));
        }
        // As in `Region::positions`: read after the headers.
        let handed_out = region.header().claims.load(Ordering::Acquire);
        keep_handed_out(out, start, handed_out);
    }

    /// Adds to `owned` the segments of the pending claims and of claims
    /// `next..claims`; false when the log no longer holds one of them (a
    /// full scan is due).
    fn follow_log(&mut self, region: &Region, next: u64, claims: u64) -> bool {
        if claims.saturating_sub(next) > CLAIM_LOG as u64 {
            return false;
        }
        let mut pending = std::mem::take(&mut self.pending);
        let mut ok = true;
        pending.retain(|&k| match self.look_up(region, k) {
            Lookup::Found => false,
            Lookup::NotYet => true,
            Lookup::Gone => {
                ok = false;
                false
            }
        });
        for k in next..claims.max(next) {
            match self.look_up(region, k) {
                Lookup::Found => {}
                Lookup::NotYet => pending.push(k),
                Lookup::Gone => ok = false,
            }
        }
        self.pending = pending;
        ok && self.pending.len() <= MAX_PENDING
    }

    /// Claim `k`'s log entry, its segment added to `owned` when found.
    fn look_up(&mut self, region: &Region, k: u64) -> Lookup {
        let e = region.header().claim_log[(k % CLAIM_LOG as u64) as usize].load(Ordering::Acquire);
        let written = (e >> 20).wrapping_sub(1);
        if e == 0 || written < k {
            return Lookup::NotYet;
        }
        if written > k {
            return Lookup::Gone;
        }
        // The index is data from the other process: checked like any.
        let i = (e & ((1 << 20) - 1)) as u32;
        if i < region.segments
            && let Err(at) = self.owned.binary_search(&i)
        {
            self.owned.insert(at, i);
        }
        Lookup::Found
    }
}

/// What the claim log says of one claim.
enum Lookup {
    /// Its segment was added (or is known already).
    Found,
    /// Its entry is not written yet.
    NotYet,
    /// A later claim wrote over its entry.
    Gone,
}

/// Appends `n` published events out of the shared mapping to `out`.
fn append_events(slots: *const Event, from: u32, n: usize, out: &mut Vec<Event>) {
    out.reserve(n);
    let start = out.len();
    // SAFETY: `slots` is a segment's slot array and from + n ≤ its
    // capacity (the caller clamps `committed` to the capacity). Those slots
    // were published with a Release store the caller loaded with Acquire,
    // and their producer does not write them again until the segment is
    // freed by this consumer. The destination is the vector's spare
    // capacity, at least `n` events after the reserve, and does not
    // overlap the mapping; `Event` is plain old data, so the copied bytes
    // make `n` initialised events and the length may cover them.
    unsafe {
        std::ptr::copy_nonoverlapping(slots.add(from as usize), out.as_mut_ptr().add(start), n);
        out.set_len(start + n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp_path(name: &str) -> (crate::session::SessionDir, std::path::PathBuf) {
        let dir = crate::session::SessionDir::create().unwrap();
        let p = dir.path().join(name);
        (dir, p)
    }

    fn small() -> RingConfig {
        RingConfig {
            segment_bytes: 128,
            segments: 4,
            ..RingConfig::default()
        }
    }

    #[test]
    fn single_thread_in_order_with_partial_segments() {
        let (_d, p) = tmp_path("ring");
        let r = Region::create(&p, &small()).unwrap();
        assert_eq!(r.segment_capacity(), 4);
        let mut prod = Producer::new(r.clone(), 7, Duration::from_secs(1));
        let mut cons = Consumer::new(Region::open(&p).unwrap());
        let mut got = Vec::new();
        for i in 0..3 {
            prod.push(Event::new(EventKind::Marker, i, i as u64))
                .unwrap();
        }
        // Partially filled segment is visible without a flush.
        let n = cons.poll(&mut |t, evs| {
            assert_eq!(t, 7);
            got.extend_from_slice(evs)
        });
        assert_eq!(n, 3);
        for i in 3..14 {
            prod.push(Event::new(EventKind::Marker, i, i as u64))
                .unwrap();
        }
        cons.poll(&mut |_, evs| got.extend_from_slice(evs));
        let ids: Vec<u32> = got.iter().map(|e| e.id).collect();
        assert_eq!(ids, (0..14).collect::<Vec<_>>());
        // Nothing new: nothing delivered.
        assert_eq!(cons.poll(&mut |_, _| panic!("no events expected")), 0);
    }

    #[test]
    fn poll_into_appends_what_poll_runs_delivers() {
        // Two rings fed alike: one read with poll_runs, one with poll_into
        // (appending to what the buffers already hold).
        let mut seen = Vec::new();
        for into in [false, true] {
            let (_d, p) = tmp_path("ring");
            let r = Region::create(&p, &small()).unwrap();
            let mut a = Producer::new(r.clone(), 5, Duration::from_secs(1));
            let mut b = Producer::new(r.clone(), 2, Duration::from_secs(1));
            let mut cons = Consumer::new(Region::open(&p).unwrap());
            let ev = |i: u32| Event::new(EventKind::Marker, i, u64::from(i) * 7);
            let mut got: Vec<(Run, Vec<Event>)> = Vec::new();
            let mut runs = vec![(
                Run {
                    thread: 9,
                    claim: 9,
                    start: 9,
                },
                0..1,
            )];
            let mut events = vec![ev(999)];
            for round in 0..3u32 {
                for i in 0..5 {
                    a.push(ev(round * 10 + i)).unwrap();
                }
                b.push(ev(100 + round)).unwrap();
                let n = if into {
                    let (r0, e0) = (runs.len(), events.len());
                    let n = cons.poll_into(&mut runs, &mut events);
                    assert_eq!(events.len() - e0, n);
                    for (run, range) in &runs[r0..] {
                        got.push((*run, events[range.clone()].to_vec()));
                    }
                    n
                } else {
                    cons.poll_runs(&mut |run, evs| got.push((run, evs.to_vec())))
                };
                assert_eq!(n, 6, "round {round}");
            }
            // What the buffers held before is kept.
            assert_eq!(events[0], ev(999));
            seen.push(got);
        }
        assert_eq!(seen[0], seen[1]);
        assert!(seen[0].len() >= 6);
    }

    #[test]
    fn runs_name_claim_and_start_and_positions_match_them() {
        let (_d, p) = tmp_path("ring");
        let r = Region::create(&p, &small()).unwrap();
        let mut a = Producer::new(r.clone(), 5, Duration::from_secs(1));
        let mut b = Producer::new(r.clone(), 2, Duration::from_secs(1));
        let mut cons = Consumer::new(Region::open(&p).unwrap());
        let mut pos = Vec::new();
        // Nothing pushed: no segment owned, no position.
        cons.positions(&mut pos);
        assert!(pos.is_empty());
        let ev = |i: u32| Event::new(EventKind::Marker, i, u64::from(i));
        for i in 0..2 {
            a.push(ev(i)).unwrap();
        }
        b.push(ev(100)).unwrap();
        cons.positions(&mut pos);
        pos.sort_by_key(|p| p.thread);
        assert_eq!(
            pos,
            vec![
                StreamPosition {
                    thread: 2,
                    claim: 1,
                    committed: 1
                },
                StreamPosition {
                    thread: 5,
                    claim: 0,
                    committed: 2
                }
            ]
        );
        let mut runs = Vec::new();
        cons.poll_runs(&mut |run, evs| runs.push((run, evs.iter().map(|e| e.id).collect())));
        let expect = |thread, claim, start, ids: &[u32]| {
            (
                Run {
                    thread,
                    claim,
                    start,
                },
                ids.to_vec(),
            )
        };
        assert_eq!(
            runs,
            vec![expect(2, 1, 0, &[100]), expect(5, 0, 0, &[0, 1])]
        );
        // Reading positions consumed nothing; polling did not change them.
        let mut again = Vec::new();
        cons.positions(&mut again);
        again.sort_by_key(|p| p.thread);
        assert_eq!(again, pos);
        // Thread 5 fills its segment (capacity 4) and goes on in a new one:
        // the full one is not a position any more, the new one is.
        for i in 2..6 {
            a.push(ev(i)).unwrap();
        }
        runs.clear();
        cons.poll_runs(&mut |run, evs| runs.push((run, evs.iter().map(|e| e.id).collect())));
        assert_eq!(
            runs,
            vec![expect(5, 0, 2, &[2, 3]), expect(5, 2, 0, &[4, 5])]
        );
        pos.clear();
        cons.positions(&mut pos);
        pos.retain(|p| p.thread == 5);
        assert_eq!(
            pos,
            vec![StreamPosition {
                thread: 5,
                claim: 2,
                committed: 2
            }]
        );
        // A released segment is FULL, not owned: thread 2 has no position.
        b.release();
        pos.clear();
        cons.positions(&mut pos);
        assert!(pos.iter().all(|p| p.thread != 2), "{pos:?}");
        // `poll` still hands the same events, by thread only.
        a.push(ev(6)).unwrap();
        let mut got = Vec::new();
        cons.poll(&mut |t, evs| got.extend(evs.iter().map(|e| (t, e.id))));
        assert_eq!(got, vec![(5, 6)]);
    }

    #[test]
    fn positions_are_clamped_and_skip_damaged_claims() {
        let (_d, p) = tmp_path("ring");
        let r = Region::create(&p, &small()).unwrap();
        let mut a = Producer::new(r.clone(), 1, Duration::from_secs(1));
        a.push(Event::default()).unwrap();
        let seg = a.seg;
        // A hostile peer writes a count past the capacity: clamped.
        r.seg(seg).committed.store(1000, Ordering::Release);
        let mut pos = vec![StreamPosition {
            thread: 9,
            claim: 77,
            committed: 3,
        }];
        r.positions(&mut pos);
        assert_eq!(pos.len(), 2, "{pos:?}");
        // What the caller had in `out` stays.
        assert_eq!(pos[0].claim, 77);
        assert_eq!(pos[1].committed, r.segment_capacity());
        // A claim number never handed out: left out.
        r.seg(seg).seq.store(1 << 40, Ordering::Release);
        pos.clear();
        r.positions(&mut pos);
        assert!(pos.is_empty(), "{pos:?}");
    }

    #[test]
    fn the_position_reader_follows_claims_in_the_log_and_sees_what_positions_sees() {
        let (_d, p) = tmp_path("ring");
        let r = Region::create(&p, &small()).unwrap();
        let mut reader = PositionReader::default();
        let read = |reader: &mut PositionReader| {
            let mut v = Vec::new();
            reader.read(&r, &mut v);
            let mut w = Vec::new();
            r.positions(&mut w);
            assert_eq!(v, w, "the reader and a full scan agree");
            v
        };
        // One scan at the first read, none after it.
        assert!(read(&mut reader).is_empty());
        assert!(read(&mut reader).is_empty());
        assert_eq!(reader.full_scans, 1);
        let mut a = Producer::new(r.clone(), 1, Duration::from_secs(1));
        a.push(Event::default()).unwrap();
        // A claim: found in the log.
        assert_eq!(read(&mut reader)[0].committed, 1);
        assert_eq!(read(&mut reader).len(), 1);
        // Events without a claim: only the owned segment is read.
        a.push(Event::default()).unwrap();
        let v = read(&mut reader);
        assert_eq!((v.len(), v[0].thread, v[0].committed), (1, 1, 2));
        // A second producer claims: seen at the next read.
        let mut b = Producer::new(r.clone(), 2, Duration::from_secs(1));
        b.push(Event::default()).unwrap();
        assert_eq!(read(&mut reader).len(), 2);
        // A producer that lets its segment go drops out.
        drop(b);
        let v = read(&mut reader);
        assert_eq!((v.len(), v[0].thread), (1, 1));
        // A full segment and the next claim: the thread's new segment.
        let cap = r.segment_capacity();
        for _ in 0..cap {
            a.push(Event::default()).unwrap();
        }
        let v = read(&mut reader);
        assert_eq!((v.len(), v[0].thread, v[0].committed), (1, 1, 2));
        assert_eq!(reader.full_scans, 1);
    }

    #[test]
    fn the_position_reader_waits_for_a_claims_entry_and_scans_when_the_log_went_round() {
        let (_d, p) = tmp_path("ring");
        let r = Region::create(&p, &small()).unwrap();
        let mut reader = PositionReader::default();
        let mut v = Vec::new();
        reader.read(&r, &mut v);
        assert!(v.is_empty());
        // A claim counted whose producer has not published its segment
        // yet: no position, and the claim stays pending.
        let h = r.header();
        let k = h.claims.fetch_add(1, Ordering::AcqRel);
        reader.read(&r, &mut v);
        assert!(v.is_empty());
        assert_eq!(reader.pending, vec![k]);
        // Published: found at the next read, with no scan.
        let s = r.seg(3);
        s.thread.store(9, Ordering::Relaxed);
        s.seq.store(k, Ordering::Relaxed);
        s.committed.store(2, Ordering::Relaxed);
        s.state.store(OWNED, Ordering::Release);
        h.claim_log[k as usize % CLAIM_LOG].store(claim_log_entry(k, 3), Ordering::Release);
        reader.read(&r, &mut v);
        assert_eq!(
            v,
            vec![StreamPosition {
                thread: 9,
                claim: k,
                committed: 2
            }]
        );
        assert!(reader.pending.is_empty());
        assert_eq!(reader.full_scans, 1);
        // An entry naming no segment of the region is ignored.
        let k2 = h.claims.fetch_add(1, Ordering::AcqRel);
        h.claim_log[k2 as usize % CLAIM_LOG].store(claim_log_entry(k2, 1 << 19), Ordering::Release);
        v.clear();
        reader.read(&r, &mut v);
        assert_eq!(v.len(), 1);
        // More claims between two reads than the log holds: a full scan,
        // which still finds every owned segment.
        h.claims.fetch_add(CLAIM_LOG as u64 + 1, Ordering::AcqRel);
        let s = r.seg(1);
        s.thread.store(7, Ordering::Relaxed);
        s.seq.store(k2 + 5, Ordering::Relaxed);
        s.state.store(OWNED, Ordering::Release);
        v.clear();
        reader.read(&r, &mut v);
        assert_eq!(reader.full_scans, 2);
        let mut w = Vec::new();
        r.positions(&mut w);
        assert_eq!((v.len(), &v), (2, &w));
    }

    #[test]
    fn claims_go_round_the_region_to_the_oldest_free_segment() {
        let (_d, p) = tmp_path("ring");
        let r = Region::create(&p, &small()).unwrap();
        let n = r.segments();
        let cap = r.segment_capacity();
        let mut prod = Producer::new(r.clone(), 2, Duration::from_secs(1));
        let mut cons = Consumer::new(Region::open(&p).unwrap());
        let mut owned = Vec::new();
        // The consumer reads (and frees) every full segment at once, so
        // the segment the producer just left is always free again; the
        // producer still moves on, round the region from its thread index.
        for i in 0..(2 * n * cap) {
            prod.push(Event::new(EventKind::Marker, i, u64::from(i)))
                .unwrap();
            if owned.last() != Some(&prod.seg) {
                owned.push(prod.seg);
            }
            cons.poll(&mut |_, _| {});
        }
        let expected: Vec<u32> = (0..2 * n).map(|k| (2 + k) % n).collect();
        assert_eq!(owned, expected);
    }

    #[test]
    fn try_push_only_fills_the_owned_segment() {
        let (_d, p) = tmp_path("ring");
        let r = Region::create(&p, &small()).unwrap();
        let mut prod = Producer::new(r.clone(), 3, Duration::from_secs(1));
        let mut cons = Consumer::new(Region::open(&p).unwrap());
        let ev = |i: u32| Event::new(EventKind::Marker, i, u64::from(i));
        // No segment yet: nothing written, the caller must push.
        assert!(!prod.try_push(ev(0)));
        prod.push(ev(0)).unwrap();
        // Capacity 4: three more fit, the fifth needs a new segment.
        for i in 1..4 {
            assert!(prod.try_push(ev(i)));
        }
        assert!(!prod.try_push(ev(4)));
        prod.push(ev(4)).unwrap();
        assert!(prod.try_push(ev(5)));
        let mut got = Vec::new();
        cons.poll(&mut |t, evs| {
            assert_eq!(t, 3);
            got.extend_from_slice(evs)
        });
        let ids: Vec<u32> = got.iter().map(|e| e.id).collect();
        assert_eq!(ids, (0..6).collect::<Vec<_>>());
    }

    #[test]
    fn full_ring_then_dead_without_consumer() {
        let (_d, p) = tmp_path("ring");
        let r = Region::create(&p, &small()).unwrap();
        let mut prod = Producer::new(r.clone(), 0, Duration::from_millis(50));
        for i in 0..16 {
            prod.push(Event::new(EventKind::Marker, i, 0)).unwrap();
        }
        let t0 = Instant::now();
        assert_eq!(prod.push(Event::new(EventKind::Marker, 16, 0)), Err(Dead));
        let waited = t0.elapsed();
        assert!(waited >= Duration::from_millis(50), "{waited:?}");
        assert!(waited < Duration::from_secs(2), "{waited:?}");
        assert!(r.is_dead());
        assert_eq!(prod.push(Event::default()), Err(Dead));
        assert_eq!(r.lost_events(), 2);
        // The consumer still gets everything written before.
        let mut cons = Consumer::new(Region::open(&p).unwrap());
        assert!(cons.region().is_dead());
        assert_eq!(cons.region().lost_events(), 2);
        assert_eq!(cons.poll(&mut |_, _| {}), 16);
    }

    #[test]
    fn consumer_gone_flag_stops_waiting_at_once() {
        let (_d, p) = tmp_path("ring");
        let r = Region::create(&p, &small()).unwrap();
        let mut prod = Producer::new(r.clone(), 0, Duration::from_secs(30));
        for _ in 0..16 {
            prod.push(Event::default()).unwrap();
        }
        Region::open(&p).unwrap().mark_consumer_gone();
        let t0 = Instant::now();
        assert_eq!(prod.push(Event::default()), Err(Dead));
        assert!(t0.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn retire_makes_pushes_harmless() {
        let (_d, p) = tmp_path("ring");
        let r = Region::create(&p, &small()).unwrap();
        let mut prod = Producer::new(r.clone(), 0, Duration::from_secs(30));
        prod.push(Event::default()).unwrap();
        let other = Region::open(&p).unwrap();
        r.retire().unwrap();
        r.retire().unwrap();
        // Every push from now on is refused, counted lost in this process
        // (a store already past the check lands in private memory:
        // `pinned_regions_reuse_their_range`).
        for _ in 0..3 {
            assert_eq!(prod.push(Event::new(EventKind::Marker, 99, 0)), Err(Dead));
            assert!(!prod.try_push(Event::new(EventKind::Marker, 99, 0)));
        }
        assert!(r.is_dead());
        assert_eq!(r.lost_events(), 3);
        // The other mapping of the file never saw the retired writes.
        let mut cons = Consumer::new(other);
        let mut got = Vec::new();
        cons.poll(&mut |_, evs| got.extend_from_slice(evs));
        assert_eq!(got, vec![Event::default()]);
    }

    /// A writer outside the producer (the agent's Java probes) appending
    /// through the window, then the producer taking up after it: one
    /// stream, in order, as the consumer reads it.
    #[test]
    fn an_outside_writer_takes_turns_with_the_producer() {
        let (cons_side, fd) = Region::create_memfd(&small()).unwrap();
        let r = Region::from_fd_pinned(fd, None).unwrap();
        let mut prod = Producer::new(r.clone(), 2, Duration::from_secs(1));
        assert_eq!(prod.window(), None);
        prod.push(Event::new(EventKind::Marker, 0, 0)).unwrap();
        let w = prod.window().unwrap();
        assert_eq!((w.pos, w.cap), (1, 4));
        let ev = Event::new(EventKind::Marker, 1, 0);
        // SAFETY: slot `pos` < `cap` of the segment the producer owns, in
        // the live pinned mapping; `committed` is its count.
        unsafe {
            ((w.slots + 16 * w.pos as usize) as *mut Event).write(ev);
            (*(w.committed as *const AtomicU32)).store(w.pos + 1, Ordering::Release);
        }
        // Out of range: ignored.
        prod.resume_at(9);
        prod.resume_at(w.pos + 1);
        for i in 2..6 {
            prod.push(Event::new(EventKind::Marker, i, 0)).unwrap();
        }
        let mut cons = Consumer::new(cons_side);
        let mut got = Vec::new();
        cons.poll(&mut |t, evs| {
            assert_eq!(t, 2);
            got.extend(evs.iter().map(|e| e.id));
        });
        assert_eq!(got, (0..6).collect::<Vec<_>>());
    }

    /// A pinned region's range outlives it: after retiring, a late write
    /// lands in private memory, and the next pinned region of the same
    /// size or smaller is mapped at the same address.
    #[test]
    fn pinned_regions_reuse_their_range() {
        let (first_cons, fd) = Region::create_memfd(&small()).unwrap();
        let a = Region::from_fd_pinned(fd, None).unwrap();
        let mut prod = Producer::new(a.clone(), 0, Duration::from_secs(1));
        prod.push(Event::new(EventKind::Marker, 7, 0)).unwrap();
        let w = prod.window().unwrap();
        let base = a.base as usize;
        let spare = a
            .retire_pinned()
            .unwrap()
            .expect("the retiring call gets the range");
        assert!(a.retire_pinned().unwrap().is_none());
        // SAFETY: the pinned range stays mapped (private now) for good.
        unsafe { ((w.slots + 16) as *mut Event).write(Event::new(EventKind::Marker, 8, 0)) };
        drop(prod);
        drop(a);
        let mut got = Vec::new();
        Consumer::new(first_cons).poll(&mut |_, evs| got.extend(evs.iter().map(|e| e.id)));
        assert_eq!(got, vec![7]);
        let (second_cons, fd) = Region::create_memfd(&small()).unwrap();
        let b = Region::from_fd_pinned(fd, Some(spare)).unwrap();
        assert_eq!(b.base as usize, base);
        let mut prod = Producer::new(b.clone(), 1, Duration::from_secs(1));
        prod.push(Event::new(EventKind::Marker, 9, 0)).unwrap();
        let mut got = Vec::new();
        Consumer::new(second_cons).poll(&mut |_, evs| got.extend(evs.iter().map(|e| e.id)));
        assert_eq!(got, vec![9]);
        // A larger ring does not fit: mapped elsewhere.
        let spare = b.retire_pinned().unwrap().unwrap();
        let big = RingConfig {
            segments: 64,
            ..small()
        };
        let (_c, fd) = Region::create_memfd(&big).unwrap();
        let c = Region::from_fd_pinned(fd, Some(spare)).unwrap();
        assert_ne!(c.base as usize, base);
        assert!(c.is_pinned() && b.is_pinned());
    }

    #[test]
    fn config_validation() {
        let (_d, p) = tmp_path("ring");
        for cfg in [
            RingConfig {
                segment_bytes: 100,
                ..small()
            },
            RingConfig {
                segment_bytes: 64,
                ..small()
            },
            RingConfig {
                segments: 1,
                ..small()
            },
            RingConfig {
                ticks_per_sec: 0,
                ..small()
            },
            RingConfig {
                segment_bytes: MAX_SEGMENT_BYTES,
                segments: MAX_SEGMENTS,
                ..small()
            },
        ] {
            assert!(
                matches!(Region::create(&p, &cfg), Err(RingError::Layout(_))),
                "{cfg:?}"
            );
            assert!(!p.exists());
        }
        Region::create(&p, &small()).unwrap();
        // O_EXCL: never reuse an existing file.
        assert!(matches!(
            Region::create(&p, &small()),
            Err(RingError::Io(_))
        ));
    }
}
