//! Ring file creation and validation: modes, exclusive creation, hostile
//! headers and hostile segment contents give errors or clamped reads,
//! never a panic or an access outside the mapping.

use sprig_wire::PROTOCOL_VERSION;
use sprig_wire::control::ClockKind;
use sprig_wire::event::{Event, EventKind};
use sprig_wire::ring::{Consumer, Dead, Producer, Region, RingConfig, RingError};
use sprig_wire::session::SessionDir;
use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

fn cfg() -> RingConfig {
    RingConfig {
        segment_bytes: 4096,
        segments: 4,
        clock: ClockKind::Tsc,
        ticks_per_sec: 2_600_000_000,
    }
}

fn poke(path: &Path, offset: u64, bytes: &[u8]) {
    let mut f = OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(offset)).unwrap();
    f.write_all(bytes).unwrap();
}

/// A fresh valid ring file in its own session directory.
fn fresh() -> (SessionDir, std::path::PathBuf) {
    let dir = SessionDir::create().unwrap();
    let p = dir.ring_path();
    drop(Region::create(&p, &cfg()).unwrap());
    (dir, p)
}

#[test]
fn created_0600_exclusive_and_reopened_with_the_same_facts() {
    let dir = SessionDir::create().unwrap();
    let p = dir.ring_path();
    let r = Region::create(&p, &cfg()).unwrap();
    let meta = std::fs::metadata(&p).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(meta.len(), 4096 + 4 * 4096);
    assert!(matches!(Region::create(&p, &cfg()), Err(RingError::Io(_))));
    let o = Region::open(&p).unwrap();
    assert_eq!(o.clock(), ClockKind::Tsc);
    assert_eq!(o.ticks_per_sec(), 2_600_000_000);
    assert_eq!(o.segments(), 4);
    assert_eq!(o.segment_capacity(), (4096 - 64) / 16);
    assert_eq!(o.len(), r.len());
    assert!(!o.is_dead());
    assert_eq!(o.lost_events(), 0);
}

#[test]
fn symlinked_ring_is_refused() {
    let (dir, p) = fresh();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&p, &link).unwrap();
    assert!(matches!(Region::open(&link), Err(RingError::Io(_))));
    let target = dir.path().join("elsewhere");
    std::os::unix::fs::symlink(&target, dir.path().join("newlink")).unwrap();
    assert!(Region::create(&dir.path().join("newlink"), &cfg()).is_err());
    assert!(!target.exists(), "create must not follow a planted symlink");
}

#[test]
fn hostile_headers_are_errors() {
    // (offset, bytes, what the error must be)
    type Check = fn(&RingError) -> bool;
    let cases: Vec<(u64, Vec<u8>, Check)> = vec![
        (0, b"NOTARING".to_vec(), |e| {
            matches!(e, RingError::BadMagic)
        }),
        (8, (PROTOCOL_VERSION + 1).to_le_bytes().to_vec(), |e| {
            matches!(e, RingError::BadVersion { found, expected }
                if *found == PROTOCOL_VERSION + 1 && *expected == PROTOCOL_VERSION)
        }),
        (12, 8192u32.to_le_bytes().to_vec(), |e| {
            matches!(e, RingError::Layout(_))
        }),
        (16, 9u32.to_le_bytes().to_vec(), |e| {
            matches!(e, RingError::Layout(_))
        }),
        // Segment size not a multiple of 64, too small, huge.
        (20, 4100u32.to_le_bytes().to_vec(), |e| {
            matches!(e, RingError::Layout(_))
        }),
        (20, 64u32.to_le_bytes().to_vec(), |e| {
            matches!(e, RingError::Layout(_))
        }),
        (20, u32::MAX.to_le_bytes().to_vec(), |e| {
            matches!(e, RingError::Layout(_))
        }),
        // More segments than the file holds; zero; absurd.
        (24, 5u32.to_le_bytes().to_vec(), |e| {
            matches!(e, RingError::Layout(_))
        }),
        (24, 0u32.to_le_bytes().to_vec(), |e| {
            matches!(e, RingError::Layout(_))
        }),
        (24, u32::MAX.to_le_bytes().to_vec(), |e| {
            matches!(e, RingError::Layout(_))
        }),
        (28, 32u32.to_le_bytes().to_vec(), |e| {
            matches!(e, RingError::Layout(_))
        }),
        (32, 0u64.to_le_bytes().to_vec(), |e| {
            matches!(e, RingError::Layout(_))
        }),
    ];
    for (offset, bytes, check) in cases {
        let (_dir, p) = fresh();
        poke(&p, offset, &bytes);
        match Region::open(&p) {
            Err(e) => assert!(check(&e), "offset {offset}: wrong error {e}"),
            Ok(_) => panic!("offset {offset}: hostile header accepted"),
        }
    }
}

#[test]
fn wrong_file_lengths_are_errors() {
    let (_dir, p) = fresh();
    let f = OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(4096 + 3 * 4096).unwrap();
    assert!(matches!(Region::open(&p), Err(RingError::Layout(_))));
    f.set_len(4096 + 5 * 4096).unwrap();
    assert!(matches!(Region::open(&p), Err(RingError::Layout(_))));
    f.set_len(100).unwrap();
    assert!(matches!(Region::open(&p), Err(RingError::Layout(_))));
    f.set_len(0).unwrap();
    assert!(matches!(Region::open(&p), Err(RingError::Layout(_))));
    drop(f);
    let dir = SessionDir::create().unwrap();
    assert!(matches!(
        Region::open(&dir.path().join("missing")),
        Err(RingError::Io(_))
    ));
}

#[test]
fn hostile_segment_headers_are_clamped() {
    let (_dir, p) = fresh();
    let region = Region::open(&p).unwrap();
    let cap = region.segment_capacity() as usize;
    // Every segment FULL with an absurd count, odd thread and seq.
    for i in 0..4u64 {
        let at = 4096 + i * 4096;
        poke(&p, at, &3u32.to_le_bytes()); // FULL
        poke(&p, at + 4, &(u32::MAX - i as u32).to_le_bytes());
        poke(&p, at + 8, &u64::MAX.to_le_bytes());
        poke(&p, at + 16, &u32::MAX.to_le_bytes());
    }
    let mut cons = Consumer::new(region.clone());
    let mut per_call = Vec::new();
    let n = cons.poll(&mut |_, evs| per_call.push(evs.len()));
    assert_eq!(n, 4 * cap, "reads are clamped to the segment capacity");
    assert!(per_call.iter().all(|&k| k <= cap));
    // The consumer freed them: a producer can use the ring again.
    let mut prod = Producer::new(region, 1, Duration::from_millis(100));
    for i in 0..(4 * cap) as u32 {
        prod.push(Event::new(EventKind::Marker, i, 0)).unwrap();
    }
    prod.release();
    let mut got = 0u32;
    cons.poll(&mut |t, evs| {
        assert_eq!(t, 1);
        for e in evs {
            assert_eq!(e.id, got);
            got += 1;
        }
    });
    assert_eq!(got as usize, 4 * cap);
}

#[test]
fn thread_index_reuse_keeps_order() {
    // A second producer with the same thread index (a thread that
    // detached and came back) continues after the first one's events.
    let (_dir, p) = fresh();
    let region = Region::open(&p).unwrap();
    let cap = region.segment_capacity();
    let mut a = Producer::new(region.clone(), 5, Duration::from_millis(100));
    for i in 0..cap + 3 {
        a.push(Event::new(EventKind::Marker, i, 0)).unwrap();
    }
    drop(a);
    let mut b = Producer::new(region.clone(), 5, Duration::from_millis(100));
    for i in cap + 3..2 * cap {
        b.push(Event::new(EventKind::Marker, i, 0)).unwrap();
    }
    let mut cons = Consumer::new(region);
    let mut next = 0;
    cons.poll(&mut |_, evs| {
        for e in evs {
            assert_eq!(e.id, next);
            next += 1;
        }
    });
    assert_eq!(next, 2 * cap);
}

/// The memfd ring is sealed: its size cannot change under a mapping, and
/// `from_fd` refuses a descriptor without those seals (a plain file, an
/// unsealed memfd).
#[test]
fn memfd_ring_is_sealed_and_unsealed_descriptors_are_refused() {
    use std::os::fd::OwnedFd;
    let (region, fd) = Region::create_memfd(&cfg()).unwrap();
    assert!(!region.is_empty());
    let file = std::fs::File::from(fd.try_clone().unwrap());
    for len in [0, region.len() as u64 * 2] {
        let e = file.set_len(len).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EPERM), "set_len({len}): {e}");
    }
    // The same memory mapped again through the descriptor.
    let again = Region::from_fd(fd).unwrap();
    assert_eq!(again.len(), region.len());

    let unsealed = sprig_wire::memfd::create("unsealed").unwrap();
    std::fs::File::from(unsealed.try_clone().unwrap())
        .set_len(region.len() as u64)
        .unwrap();
    assert!(matches!(Region::from_fd(unsealed), Err(RingError::Io(_))));

    let dir = SessionDir::create().unwrap();
    let p = dir.ring_path();
    drop(Region::create(&p, &cfg()).unwrap());
    let plain = OwnedFd::from(std::fs::File::open(&p).unwrap());
    assert!(matches!(Region::from_fd(plain), Err(RingError::Io(_))));
}

/// A producer left over from a retired pinned ring (a probe that waited
/// through the end of its session) writes nothing more: the next session's
/// ring sits at the same range, and the late producer's segment there is
/// another producer's. Neither `push` nor `try_push` may store an event or
/// a count into it, and the refusal counts nowhere in the new ring.
#[test]
fn a_producer_of_a_retired_ring_writes_nothing_into_the_next_ring() {
    let small = RingConfig {
        segment_bytes: 64 + 8 * 16,
        segments: 4,
        clock: ClockKind::Monotonic,
        ticks_per_sec: 1_000_000_000,
    };
    let (_first_cons, fd) = Region::create_memfd(&small).unwrap();
    let a = Region::from_fd_pinned(fd, None).unwrap();
    let mut late = Producer::new(a.clone(), 0, Duration::from_secs(1));
    late.push(Event::new(EventKind::Marker, 1, 0)).unwrap();
    let late_slots = late.window().unwrap().slots;
    let spare = a.retire_pinned().unwrap().unwrap();

    let (next_cons, fd) = Region::create_memfd(&small).unwrap();
    let b = Region::from_fd_pinned(fd, Some(spare)).unwrap();
    // Thread index 0 again: the same segment at the same address.
    let mut next = Producer::new(b.clone(), 0, Duration::from_secs(1));
    for id in 100..103 {
        next.push(Event::new(EventKind::Marker, id, 0)).unwrap();
    }
    assert_eq!(
        next.window().unwrap().slots,
        late_slots,
        "precondition: the next ring's segment is where the late producer's was"
    );

    assert_eq!(late.push(Event::new(EventKind::Marker, 666, 0)), Err(Dead));
    assert!(!late.try_push(Event::new(EventKind::Marker, 667, 0)));
    assert_eq!(late.window(), None, "no window onto a retired ring");
    drop(late);
    next.push(Event::new(EventKind::Marker, 103, 0)).unwrap();

    let mut got = Vec::new();
    Consumer::new(next_cons)
        .poll(&mut |t, evs| got.push((t, evs.iter().map(|e| e.id).collect::<Vec<_>>())));
    assert_eq!(got, vec![(0, vec![100, 101, 102, 103])]);
    assert!(!b.is_dead());
    assert_eq!(b.lost_events(), 0);
}

/// A producer waiting for space when its pinned ring is retired (the ring
/// full, the session ending) gives up: it claims no segment of the next
/// session's ring, mapped at the same range meanwhile, and writes nothing
/// there.
#[test]
fn a_producer_waiting_on_a_retired_ring_claims_nothing_in_the_next_ring() {
    let two = RingConfig {
        segment_bytes: 64 + 4 * 16,
        segments: 2,
        clock: ClockKind::Monotonic,
        ticks_per_sec: 1_000_000_000,
    };
    let (_first_cons, fd) = Region::create_memfd(&two).unwrap();
    let a = Region::from_fd_pinned(fd, None).unwrap();
    let mut late = Producer::new(a.clone(), 0, Duration::from_secs(5));
    // Both segments: the next push waits for a consumer that never comes.
    for id in 0..8 {
        late.push(Event::new(EventKind::Marker, id, 0)).unwrap();
    }
    let waiting = std::thread::spawn(move || {
        let t0 = std::time::Instant::now();
        let r = late.push(Event::new(EventKind::Marker, 666, 0));
        (r, t0.elapsed())
    });
    std::thread::sleep(Duration::from_millis(100));
    let spare = a.retire_pinned().unwrap().unwrap();
    let (next_cons, fd) = Region::create_memfd(&two).unwrap();
    let b = Region::from_fd_pinned(fd, Some(spare)).unwrap();
    let (r, waited) = waiting.join().unwrap();
    assert_eq!(r, Err(Dead));
    assert!(waited < Duration::from_secs(4), "waited {waited:?}");
    let mut got = Vec::new();
    Consumer::new(next_cons).poll(&mut |t, evs| got.push((t, evs.to_vec())));
    assert_eq!(got, vec![], "the late producer wrote into the next ring");
    assert!(!b.is_dead());
    assert_eq!(b.lost_events(), 0);
}
