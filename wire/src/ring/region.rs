//! [`Region`]: a mapped ring, created (a file, or a sealed memfd) or
//! opened and validated, mapped owned or pinned; its shared flags and
//! counters; its retirement. Its accesses to the mapping are in `raw`.

use super::layout::{
    EVENT_BYTES, HEADER_BYTES, Header, MAGIC, MAX_REGION_BYTES, RingConfig, RingError,
    SEGMENT_HEADER_BYTES, clock_code, clock_from_code,
};
use crate::control::{ClockKind, PROTOCOL_VERSION};
use crate::memfd;
use memmap2::MmapRaw;
use std::fs::{File, OpenOptions};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

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
    pub(super) base: *mut u8,
    len: usize,
    pub(super) segment_bytes: usize,
    pub(super) segments: u32,
    /// Event slots per segment.
    pub(super) capacity: u32,
    pub(super) clock: ClockKind,
    ticks_per_sec: u64,
    /// This process's view: set once any producer here gave up.
    pub(super) dead: AtomicBool,
    /// Set by [`Region::retire`]: the shared pages are gone.
    retired: AtomicBool,
    /// Events lost by producers in this process.
    lost_here: AtomicU64,
}

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
        let base = Region::map_pinned(&file, at, len)?;
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
        let h = Header::in_mapping(&head);
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

    #[inline]
    pub(super) fn is_retired(&self) -> bool {
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

    pub(super) fn count_lost(&self, n: u64) {
        self.lost_here.fetch_add(n, Ordering::Relaxed);
        if !self.is_retired() {
            self.header().lost_events.fetch_add(n, Ordering::Relaxed);
        }
    }

    pub(super) fn mark_dead(&self) {
        self.dead.store(true, Ordering::Release);
        if !self.is_retired() {
            self.header().producers_dead.store(1, Ordering::Release);
        }
    }

    /// Agent side, at detach: replaces the shared mapping in place with
    /// private zeroed memory, so a store already past its producer's check
    /// lands harmlessly and the file's pages are released; producers write
    /// nothing more and return [`Dead`](super::Dead) from their next push on (a pinned
    /// region's range may hold the next session's ring by then). The
    /// address range stays reserved until the last `Arc` drops. Idempotent.
    pub fn retire(&self) -> std::io::Result<()> {
        if self.retired.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.dead.store(true, Ordering::Release);
        Region::remap_private(self.base, self.len)
    }

    /// [`Region::retire`] for a pinned region, handing back its range for
    /// the next one: `Some` only to the call that retired it, when the
    /// region is pinned and the shared pages are gone.
    pub fn retire_pinned(&self) -> std::io::Result<Option<Spare>> {
        if self.retired.swap(true, Ordering::AcqRel) {
            return Ok(None);
        }
        self.dead.store(true, Ordering::Release);
        Region::remap_private(self.base, self.len)?;
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
