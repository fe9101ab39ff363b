use super::layout::{CLAIM_LOG, OWNED, claim_log_entry};
use super::*;
use crate::event::{Event, EventKind};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

fn tmp_path(name: &str) -> (crate::session::SessionDir, std::path::PathBuf) {
    let dir = crate::session::SessionDir::create().unwrap();
    let p = dir.path().join(name);
    (dir, p)
}

pub(super) fn small() -> RingConfig {
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
                committed: 1,
                cpu: None,
            },
            StreamPosition {
                thread: 5,
                claim: 0,
                committed: 2,
                cpu: None,
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
            committed: 2,
            cpu: None,
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
        cpu: None,
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
            committed: 2,
            cpu: None,
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

#[test]
fn a_virtual_threads_cpu_clock_is_read_with_its_position_and_follows_its_claims() {
    let (_d, p) = tmp_path("ring");
    let r = Region::create(&p, &small()).unwrap();
    let mut platform = Producer::new(r.clone(), 1, Duration::from_secs(1));
    let mut virt = Producer::new(r.clone(), 2, Duration::from_secs(1));
    platform.push(Event::default()).unwrap();
    // Published before the first claim: the claim carries it.
    virt.publish_cpu(VirtualCpu {
        carrier: 77,
        base: 5,
    });
    virt.push(Event::default()).unwrap();
    let cpu_of = |thread: u32| {
        let mut pos = Vec::new();
        r.positions(&mut pos);
        let mut reader = PositionReader::default();
        let mut read = Vec::new();
        reader.read(&r, &mut read);
        let a = pos.iter().find(|p| p.thread == thread).map(|p| p.cpu);
        let b = read.iter().find(|p| p.thread == thread).map(|p| p.cpu);
        assert_eq!(a, b, "the scan and the reader agree");
        a.expect("a position")
    };
    assert_eq!(cpu_of(1), None, "a platform thread publishes none");
    assert_eq!(
        cpu_of(2),
        Some(VirtualCpu {
            carrier: 77,
            base: 5
        })
    );
    // Unmounted: the base alone; published in the owned segment at once.
    let unmounted = VirtualCpu {
        carrier: 0,
        base: 1_000,
    };
    virt.publish_cpu(unmounted);
    assert_eq!(cpu_of(2), Some(unmounted));
    assert_eq!(unmounted.at(123_456), 1_000);
    // Mounted on another carrier: its clock plus the base (wrapping: the
    // base may be "negative").
    let mounted = VirtualCpu {
        carrier: 9,
        base: 1_000u64.wrapping_sub(50_000),
    };
    assert_eq!(mounted.at(50_000), 1_000);
    assert_eq!(mounted.at(50_700), 1_700);
    virt.publish_cpu(mounted);
    // A released segment and a new claim: the new segment carries the
    // last publication.
    virt.release();
    virt.push(Event::default()).unwrap();
    assert_eq!(cpu_of(2), Some(mounted));
    // A segment the platform thread claims after a virtual thread held it
    // carries nothing of it.
    virt.release();
    let mut cons = Consumer::new(r.clone());
    for i in 0..40 {
        platform.push(Event::new(EventKind::Marker, i, 0)).unwrap();
        cons.poll(&mut |_, _| {});
    }
    assert_eq!(cpu_of(1), None);
}
