//! Every access to the mapping, and the ring's only `unsafe`: the `mmap`
//! calls that map a pinned region and retire one, the header and segment
//! addresses, the producer's slot store on its fast path
//! ([`Producer::push`], [`Producer::try_push`]) and the consumer's copy out
//! ([`append_events`]). Each block says why it is sound.

use super::layout::{Dead, HEADER_BYTES, Header, SEGMENT_HEADER_BYTES, SegHeader};
use super::producer::{Producer, pack_rest};
use super::region::Region;
use crate::event::Event;
use crate::record::RecordSlots;
use memmap2::MmapRaw;
use std::fs::File;
use std::sync::atomic::{AtomicU32, Ordering};

// SAFETY: `base` points into `map`, which lives as long as the Region. All
// shared state behind it is accessed through atomics, except event slots,
// which are written only by the one producer owning the segment and read
// by the consumer only below a `committed` count it loaded with Acquire.
unsafe impl Send for Region {}
// SAFETY: see `Send`; no method hands out references to non-atomic memory.
unsafe impl Sync for Region {}

impl Region {
    #[inline]
    pub(super) fn header(&self) -> &Header {
        // SAFETY: the mapping is at least HEADER_BYTES long and page
        // aligned; Header is all atomics and padding (see `Send`).
        unsafe { &*(self.base as *const Header) }
    }

    /// Header of segment `i` (< `segments`).
    #[inline]
    pub(super) fn seg(&self, i: u32) -> &SegHeader {
        debug_assert!(i < self.segments);
        // SAFETY: i < segments (callers iterate 0..segments or use indices
        // they got from such a loop), so the 64-byte header lies inside the
        // mapping; segment_bytes is a multiple of 64, so it is aligned;
        // SegHeader is all atomics and padding.
        unsafe { &*(self.seg_ptr(i) as *const SegHeader) }
    }

    #[inline]
    pub(super) fn seg_ptr(&self, i: u32) -> *mut u8 {
        // SAFETY: HEADER_BYTES + i * segment_bytes < len for i < segments
        // (checked by RingConfig::validate when the region was mapped).
        unsafe {
            self.base
                .add(HEADER_BYTES + i as usize * self.segment_bytes)
        }
    }

    /// First event slot of segment `i`.
    #[inline]
    pub(super) fn slots(&self, i: u32) -> *mut Event {
        // SAFETY: as in `seg_ptr`; the slots follow the 64-byte header
        // inside the same segment and are 16-byte aligned.
        unsafe { self.seg_ptr(i).add(SEGMENT_HEADER_BYTES) as *mut Event }
    }

    /// Maps `len` bytes of `file` shared, every page present at once, at `at`
    /// (a [`Spare`]'s base, replacing its private pages) or, with `at` 0,
    /// wherever the kernel chooses.
    pub(super) fn map_pinned(file: &File, at: usize, len: usize) -> std::io::Result<*mut u8> {
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
                let _ = Region::remap_private(at as *mut u8, len);
            }
            return Err(e);
        }
        Ok(p.cast())
    }

    /// Replaces `len` bytes at `base` (a mapping we own) by private anonymous
    /// memory, atomically (MAP_FIXED).
    pub(super) fn remap_private(base: *mut u8, len: usize) -> std::io::Result<()> {
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
}

impl Header {
    /// The header at the start of a header-only mapping of a ring file.
    pub(super) fn in_mapping(head: &MmapRaw) -> &Header {
        // SAFETY: the mapping is HEADER_BYTES long (≥ size_of::<Header>()),
        // page aligned, and Header consists of atomics and padding only, so
        // concurrent writers cannot make the reference unsound.
        unsafe { &*(head.as_ptr() as *const Header) }
    }
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

/// Writes `item` into slots `i..i + item.len()` and publishes them all at
/// once: `committed = i + item.len()` with Release, so a consumer sees
/// the whole record or none of it.
///
/// # Safety
/// As for [`publish`], with `i + item.len()` at most the segment's
/// capacity.
#[inline(always)]
unsafe fn publish_all(slots: *mut Event, committed: *const AtomicU32, i: u32, item: &[Event]) {
    // SAFETY: guaranteed by the caller: the slots are inside the mapping
    // and no one else writes them; the consumer reads them only below a
    // count it loaded with Acquire, and this Release store orders the
    // slot writes before the new count. `item` is a local array, not in
    // the mapping, so the copy does not overlap.
    unsafe {
        std::ptr::copy_nonoverlapping(item.as_ptr(), slots.add(i as usize), item.len());
        (*committed).store(i + item.len() as u32, Ordering::Release);
    }
}

// SAFETY: the raw pointer points into the Region the Producer keeps alive
// through its Arc; the segment it points to is owned by this Producer, so
// moving the Producer to another thread moves the ownership along.
unsafe impl Send for Producer {}

impl Producer {
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

    /// Appends a multi-slot record (see [`crate::record`]): its slots are
    /// written into the owned segment and published with one Release
    /// store of the count, so no reader sees part of it. A record that
    /// does not fit what is left of the segment goes whole into the next
    /// one (claimed, or waited for, as by [`Producer::push`]); the rest of
    /// the old segment stays unused.
    #[inline]
    pub fn push_record(&mut self, rec: &RecordSlots) -> Result<(), Dead> {
        if self.try_push_record(rec) {
            return Ok(());
        }
        self.push_record_slow(rec)
    }

    /// Appends a record only if it fits what is left of the owned
    /// segment (never waits); false, having written nothing, otherwise.
    #[inline]
    pub fn try_push_record(&mut self, rec: &RecordSlots) -> bool {
        self.try_push_slots(rec.as_slice())
    }

    /// Appends slots that fit a fresh segment (an event or a record),
    /// claiming one when the owned segment has no room for them all.
    pub(super) fn push_slots(&mut self, item: &[Event]) -> Result<(), Dead> {
        if self.try_push_slots(item) {
            return Ok(());
        }
        self.append_slow(item)
    }

    fn try_push_slots(&mut self, item: &[Event]) -> bool {
        let n = item.len() as u32;
        if self.cap.saturating_sub(self.pos) >= n && n > 0 && !self.region.is_retired() {
            // SAFETY: pos + n ≤ cap means this producer owns segment `seg`
            // with `cap` slots at `slots` and its count at `committed`,
            // inside the mapping kept alive by `region`, which is not
            // retired.
            unsafe { publish_all(self.slots, self.committed, self.pos, item) };
            self.pos += n;
            true
        } else {
            false
        }
    }
}

/// Appends `n` published events out of the shared mapping to `out`.
pub(super) fn append_events(slots: *const Event, from: u32, n: usize, out: &mut Vec<Event>) {
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
    use super::super::tests::small;
    use super::*;
    use crate::event::EventKind;
    use crate::ring::{Consumer, RingConfig};
    use std::time::Duration;

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
}
