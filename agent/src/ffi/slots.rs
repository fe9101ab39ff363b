//! The slot table of sampled timing's Java probes: native memory that the
//! probe class reads and writes through `jdk.internal.misc.Unsafe`, and the
//! agent through the safe [`Slot`] handle here.
//!
//! Under sampled timing a probe inside a root context records with no
//! clock read, so its cost is the JNI call around the store (about 0.8 of
//! a `System.nanoTime()` a pair here). The probe class does the common
//! case in Java instead: it finds its thread's slot from the thread id (as
//! `Probe.INSIDE` does), checks that the slot is its thread's and open,
//! writes the 16-byte event into the ring segment the thread owns at the
//! slot's position, and publishes it with a release store of the segment's
//! `committed` count: exactly what the agent's producer does, in the same
//! segment at the same index, so the consumer and the position samples cannot tell
//! which path wrote an event, and one thread's events stay in order.
//!
//! # Layout (one process-wide mapping, never unmapped)
//!
//! ```text
//! [ SLOTS slots of 64 bytes ][ bitmap of MAX_IDS bits ]
//! slot: +0  owner     i64  the Java thread id while the slot is open;
//!                          FREE (0) or HELD (-1) otherwise
//!       +8  pos       i32  next event slot to write   } one 64-bit word
//!       +12 depth     i32  root-context depth         } for Java
//!       +16 cap       i32  event slots of the owned segment
//!       +24 slots     i64  address of event slot 0 of the owned segment;
//!                          its `committed` count is COMMITTED_BEFORE
//!                          bytes before it (the ring's segment header)
//! ```
//!
//! A bit of the bitmap says that a method id's probes record and its first
//! call is handled: the Java path may record it (anything else takes JNI).
//!
//! After the bitmap, the allocation probes' part (`--alloc`):
//!
//! ```text
//! [ ALLOC_SITES i32 ]  per allocation site id: 0 (the agent records it),
//!                      an object site's instance size once learned, or
//!                      array_site(k) for a one-dimension array site of
//!                      element type k (-1 - k: -1 to -9)
//! [ ARRAY_TYPES i64 ]  per array element type: base | scale << 16 |
//!                      (alignment - 1) << 32, learned once, 0 before
//! ```
//!
//! The probe class writes an allocation event itself when the word of
//! its site (and, for an array, its element type's layout) says what the
//! allocation weighs; the agent writes the words, the Java probes only
//! read them.
//!
//! # Who writes what
//!
//! A slot belongs to one thread from the moment it claims it (a CAS from
//! FREE, on the thread's first root entry of a sampled session) until the
//! thread ends; only that thread writes its fields, in Java or in the agent,
//! never both at once. The one exception is the session's end, when the
//! control thread turns every open slot HELD ([`close_all`]): Java checks
//! the owner before it reads anything else, and the fields it then reads
//! are still the thread's own, so no probe ever combines fields of two
//! writers. A probe that passed the check before the session ended writes
//! at most one event more, into the segment it owned: the ring's range is
//! pinned (`Region::from_fd_pinned`), private memory or the next session's
//! ring from then on, never memory the process gave back. Java checks the
//! position against the capacity it read from the same slot, so it never
//! writes outside that segment.
//!
//! The table itself is never freed: a Java probe holds its address in a
//! static final field for the life of the JVM.
//!
//! # Where it is mapped
//!
//! Below 2 GiB where the kernel allows it (`MAP_32BIT`, x86-64), anywhere
//! otherwise. C2 folds the static final address into every field access,
//! and an address that fits in 32 bits becomes the displacement of the
//! load or store itself instead of a 10-byte constant loaded into a
//! register first: a trivial instrumented method's C2 code shrank from
//! 936-968 to 840 bytes on JDK 17 and from 1,040 to 976 on JDK 25, and the
//! inlined entry probe's path from 196 to 161 bytes (docs/overhead.md).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering};

/// Slots: the probe class takes the thread id modulo this (its
/// `INSIDE` array has as many).
pub const SLOTS: usize = 1 << 12;
/// Bytes of one slot (one cache line).
const SLOT_BYTES: usize = 64;
/// Method ids the bitmap covers (`methods::MAX_TRACKED`).
pub const MAX_IDS: u32 = 1 << 20;
const MAP_WORDS: usize = (MAX_IDS / 64) as usize;
/// Allocation site ids the table has a word for (`allocs::SITE_CAP`).
pub const ALLOC_SITES: usize = 1 << 18;
/// Array element types the table has a layout for (`allocs`' codes).
pub const ARRAY_TYPES: usize = 16;
/// The word of a one-dimension array site whose elements are of type
/// `k` (`allocs::element_code`): `-1 - k`, so any negative word is an
/// array site (a probe class an older sprig defined takes only -1, the
/// reference arrays, for one, and leaves the others to the agent).
pub fn array_site(k: u8) -> i32 {
    -1 - i32::from(k)
}
const SITES_AT: usize = SLOTS * SLOT_BYTES + MAP_WORDS * 8;
const LAYOUTS_AT: usize = SITES_AT + ALLOC_SITES * 4;
const TABLE_BYTES: usize = LAYOUTS_AT + ARRAY_TYPES * 8;

const FREE: i64 = 0;
const HELD: i64 = -1;

#[repr(C, align(64))]
#[derive(Debug)]
struct RawSlot {
    owner: AtomicI64,
    pos: AtomicI32,
    depth: AtomicI32,
    cap: AtomicI32,
    _pad0: i32,
    slots: AtomicI64,
    _pad1: [u8; 32],
}

const _: () = assert!(std::mem::size_of::<RawSlot>() == SLOT_BYTES);
const _: () = assert!(std::mem::offset_of!(RawSlot, pos) == 8);
const _: () = assert!(std::mem::offset_of!(RawSlot, depth) == 12);
const _: () = assert!(std::mem::offset_of!(RawSlot, cap) == 16);
const _: () = assert!(std::mem::offset_of!(RawSlot, slots) == 24);

/// Bytes from a segment's event slot 0 back to its `committed` count (the
/// probe class computes the address; a segment laid out otherwise is
/// never opened to it).
pub const COMMITTED_BEFORE: usize = 48;

/// The mapping flag that asks for an address below 2 GiB (see the module
/// documentation); none where the platform has no such flag.
#[cfg(target_arch = "x86_64")]
const LOW: libc::c_int = libc::MAP_32BIT;
#[cfg(not(target_arch = "x86_64"))]
const LOW: libc::c_int = 0;

/// The table's base address (0: it could not be mapped).
static TABLE: OnceLock<usize> = OnceLock::new();

/// The table's address, mapping it the first time; `None` when it cannot
/// be mapped (then no Java path).
pub fn table() -> Option<usize> {
    let base = *TABLE.get_or_init(|| {
        // SAFETY: a fresh private anonymous mapping at an address the
        // kernel chooses (below 2 GiB with MAP_32BIT); nothing else refers
        // to it yet. It is never unmapped.
        let map = |extra: libc::c_int| unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                TABLE_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | extra,
                -1,
                0,
            )
        };
        let mut p = map(LOW);
        if p == libc::MAP_FAILED {
            p = map(0);
        }
        if p == libc::MAP_FAILED { 0 } else { p as usize }
    });
    (base != 0).then_some(base)
}

fn raw(index: usize) -> Option<&'static RawSlot> {
    let base = table()?;
    if index >= SLOTS {
        return None;
    }
    // SAFETY: the table is mapped for the life of the process, zeroed or
    // written only through these atomics (and by Java at the same offsets,
    // with the same widths); index < SLOTS keeps the slot inside it, and
    // the mapping is page aligned, so each 64-byte slot is aligned.
    Some(unsafe { &*((base + index * SLOT_BYTES) as *const RawSlot) })
}

fn map_word(word: usize) -> Option<&'static AtomicU64> {
    let base = table()?;
    if word >= MAP_WORDS {
        return None;
    }
    // SAFETY: as in `raw`: the bitmap follows the slots inside the
    // never-unmapped table, word < MAP_WORDS, 8-byte aligned.
    Some(unsafe { &*((base + SLOTS * SLOT_BYTES + word * 8) as *const AtomicU64) })
}

fn site_word(id: usize) -> Option<&'static AtomicI32> {
    let base = table()?;
    if id >= ALLOC_SITES {
        return None;
    }
    // SAFETY: as in `raw`: the site words follow the bitmap inside the
    // never-unmapped table, id < ALLOC_SITES, 4-byte aligned.
    Some(unsafe { &*((base + SITES_AT + id * 4) as *const AtomicI32) })
}

fn layout_word(k: usize) -> Option<&'static AtomicU64> {
    let base = table()?;
    if k >= ARRAY_TYPES {
        return None;
    }
    // SAFETY: as in `raw`: the layouts follow the site words inside the
    // never-unmapped table, k < ARRAY_TYPES, 8-byte aligned.
    Some(unsafe { &*((base + LAYOUTS_AT + k * 8) as *const AtomicU64) })
}

/// Sets what the Java allocation probes know of site `id` (see the module
/// documentation; 0: nothing, the agent records it).
pub fn set_alloc_site(id: u32, word: i32) {
    if let Some(w) = site_word(id as usize) {
        w.store(word, Ordering::Release);
    }
}

/// What the Java allocation probes know of site `id` (0: nothing).
pub fn alloc_site(id: u32) -> i32 {
    site_word(id as usize).map_or(0, |w| w.load(Ordering::Acquire))
}

/// Forgets every allocation site (a new session hands out its own ids).
pub fn clear_alloc_sites(below: u32) {
    for id in 0..(below as usize).min(ALLOC_SITES) {
        if let Some(w) = site_word(id) {
            w.store(0, Ordering::Relaxed);
        }
    }
}

/// The layout learned for arrays of element type `k` (0: none yet).
pub fn array_layout(k: usize) -> u64 {
    layout_word(k).map_or(0, |w| w.load(Ordering::Acquire))
}

/// Sets the layout of arrays of element type `k`, for the life of the
/// process (a JVM's layout does not change).
pub fn set_array_layout(k: usize, word: u64) {
    if let Some(w) = layout_word(k) {
        w.store(word, Ordering::Release);
    }
}

/// The slot of Java thread `java_id`, claimed for the calling thread
/// (held, not open yet); `None` when another thread holds it.
pub fn claim(java_id: u64) -> Option<Slot> {
    let s = raw((java_id as usize) & (SLOTS - 1))?;
    s.owner
        .compare_exchange(FREE, HELD, Ordering::AcqRel, Ordering::Relaxed)
        .ok()?;
    s.depth.store(0, Ordering::Relaxed);
    s.cap.store(0, Ordering::Relaxed);
    s.pos.store(0, Ordering::Relaxed);
    Some(Slot {
        raw: s,
        owner: java_id as i64,
    })
}

/// The session ends: every open slot is closed (HELD), so no Java probe
/// records into the session's ring from its next call on. Control thread.
pub fn close_all() {
    for i in 0..SLOTS {
        let Some(s) = raw(i) else {
            return;
        };
        let v = s.owner.load(Ordering::SeqCst);
        if v > 0 {
            // Fails only if the owner closed or freed it meanwhile.
            let _ = s
                .owner
                .compare_exchange(v, HELD, Ordering::SeqCst, Ordering::Relaxed);
        }
    }
}

/// Clears the bitmap (a new session: no id may be recorded in Java yet).
pub fn clear_ids() {
    for w in 0..MAP_WORDS {
        if let Some(word) = map_word(w) {
            word.store(0, Ordering::Relaxed);
        }
    }
}

/// Lets the Java probes record method `id` (active, first call handled).
pub fn allow_id(id: u32) {
    if id < MAX_IDS
        && let Some(w) = map_word((id / 64) as usize)
    {
        w.fetch_or(1 << (id % 64), Ordering::Release);
    }
}

/// The capacity of every segment a slot was ever opened onto (0 until the
/// first): see [`same_capacity`].
static CAPACITY: AtomicU32 = AtomicU32::new(0);

/// Whether a segment of `cap` events may be opened to the Java probes:
/// only one capacity ever is, for the life of the process. A Java probe
/// combines a slot's segment address and capacity; read by the slot's own
/// thread they always belong together, but a thread whose `getId()` a
/// subclass made answer another thread's id could pass that thread's
/// owner check and read a segment address of one session with the
/// capacity of the next. With one capacity for every segment ever opened,
/// any combination still bounds the write inside a segment of a pinned
/// ring: such a thread can spoil events, never memory outside the rings.
fn same_capacity(cap: u32) -> bool {
    match CAPACITY.compare_exchange(0, cap, Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => cap != 0,
        Err(first) => first == cap,
    }
}

/// One thread's slot: a handle the thread keeps while it lives.
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    raw: &'static RawSlot,
    owner: i64,
}

/// The owned segment a slot opens onto (from the producer).
#[derive(Clone, Copy, Debug)]
pub struct Segment {
    pub slots: usize,
    pub committed: usize,
    pub pos: u32,
    pub cap: u32,
}

impl Slot {
    #[inline(always)]
    fn raw(self) -> &'static RawSlot {
        self.raw
    }

    /// The thread's root-context depth.
    #[inline]
    pub fn depth(self) -> u32 {
        self.raw().depth.load(Ordering::Relaxed) as u32
    }

    #[inline]
    pub fn set_depth(self, d: u32) {
        self.raw().depth.store(d as i32, Ordering::Relaxed);
    }

    /// Whether the Java probes may write through this slot now.
    #[inline]
    pub fn is_open(self) -> bool {
        self.raw().owner.load(Ordering::Relaxed) == self.owner
    }

    /// Where the Java probes would write next (meaningful while open).
    #[inline]
    pub fn pos(self) -> u32 {
        self.raw().pos.load(Ordering::Relaxed) as u32
    }

    /// Opens the slot onto `seg`: the Java probes append there from `pos`.
    /// Returns false, leaving it closed, when `still_valid` (read after the
    /// slot opened) says the session ended meanwhile: either this sees the
    /// new session generation, or the end's [`close_all`] sees the slot open
    /// and closes it.
    pub fn open(self, seg: Segment, still_valid: impl FnOnce() -> bool) -> bool {
        let s = self.raw();
        if seg.cap > i32::MAX as u32
            || seg.pos > seg.cap
            || seg.slots.checked_sub(COMMITTED_BEFORE) != Some(seg.committed)
            || !same_capacity(seg.cap)
        {
            self.close();
            return false;
        }
        s.slots.store(seg.slots as i64, Ordering::Relaxed);
        s.cap.store(seg.cap as i32, Ordering::Relaxed);
        s.pos.store(seg.pos as i32, Ordering::Relaxed);
        s.owner.store(self.owner, Ordering::SeqCst);
        if still_valid() {
            true
        } else {
            self.close();
            false
        }
    }

    /// Closes the slot: the Java probes take the JNI path.
    #[inline]
    pub fn close(self) {
        let s = self.raw();
        if s.owner.load(Ordering::Relaxed) == self.owner {
            let _ = s
                .owner
                .compare_exchange(self.owner, HELD, Ordering::SeqCst, Ordering::Relaxed);
        }
    }

    /// The thread ends: the slot is free for another thread.
    pub fn free(self) {
        let s = self.raw();
        s.depth.store(0, Ordering::Relaxed);
        s.owner.store(FREE, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_table_lies_below_2_gib_so_its_addresses_are_displacements() {
        let base = table().expect("the table maps");
        assert!(
            base + TABLE_BYTES <= 1 << 31,
            "table at {base:#x}, {TABLE_BYTES} bytes"
        );
    }

    #[test]
    fn slots_are_claimed_once_and_open_only_while_valid() {
        let id = 4096 * 7 + 321;
        let a = claim(id).expect("free slot");
        assert!(claim(id + 4096).is_none(), "same slot, other thread");
        assert!(!a.is_open());
        let seg = Segment {
            slots: 0x1040,
            committed: 0x1010,
            pos: 3,
            cap: 8,
        };
        assert!(!a.open(seg, || false));
        assert!(!a.is_open());
        assert!(a.open(seg, || true));
        assert!(a.is_open() && a.pos() == 3);
        close_all();
        assert!(!a.is_open());
        assert!(!a.open(Segment { pos: 9, ..seg }, || true), "pos past cap");
        let elsewhere = Segment {
            committed: 0x1020,
            ..seg
        };
        assert!(!a.open(elsewhere, || true), "count not in the header");
        let other_size = Segment { cap: 16, ..seg };
        assert!(!a.open(other_size, || true), "another segment capacity");
        a.set_depth(2);
        assert_eq!(a.depth(), 2);
        a.free();
        let b = claim(id + 4096).expect("freed");
        assert_eq!(b.depth(), 0);
        b.free();
    }
}
