//! Multi-slot records through a real ring: interleaved with 16-byte
//! events, at every offset of a segment, they come out in order and
//! whole; a record never crosses a segment end; a reader steps over a
//! record of a kind it does not know exactly.

use proptest::prelude::*;
use sprig_wire::event::{Event, EventKind};
use sprig_wire::record::{Item, MAX_RECORD_WORDS, RecordSlots, Records};
use sprig_wire::ring::{Consumer, Producer, Region, RingConfig, Run};
use sprig_wire::session::SessionDir;
use std::sync::Arc;
use std::time::Duration;

/// What a producer writes: a 16-byte event or a record.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Written {
    Event(u32),
    Record { kind: u32, ts: u64, words: Vec<u64> },
}

/// A ring of `segments` segments of `cap` events each (`cap` a multiple
/// of 4: segments are whole cache lines).
fn ring(cap: u32, segments: u32) -> (SessionDir, Arc<Region>, Consumer) {
    let dir = SessionDir::create().unwrap();
    let cfg = RingConfig {
        segment_bytes: 64 + 16 * cap,
        segments,
        ..RingConfig::default()
    };
    let r = Region::create(&dir.ring_path(), &cfg).unwrap();
    let cons = Consumer::new(Region::open(&dir.ring_path()).unwrap());
    (dir, r, cons)
}

/// Words whose continuation slots, read as events, look like method
/// entries and exits (kind 1 and 2 in bits 32..48 of the odd words).
fn words(seed: u64, n: usize) -> Vec<u64> {
    (0..n as u64)
        .map(|i| {
            let kind = 1 + (seed + i) % 2;
            (seed * 1000 + i) | kind << 32 | (seed & 0xffff) << 48
        })
        .collect()
}

fn write(p: &mut Producer, w: &Written) {
    match w {
        Written::Event(id) => p
            .push(Event::new(EventKind::Marker, *id, u64::from(*id)))
            .unwrap(),
        Written::Record { kind, ts, words } => p
            .push_record(&RecordSlots::new(*kind, *ts, words).unwrap())
            .unwrap(),
    }
}

/// Decodes one delivered slice on its own: a record split over two
/// slices shows as a cut head and stray slots, not as the record. The
/// producer's waits for space (`AdjustTime`) are left out.
fn decode(events: &[Event], out: &mut Vec<Written>) {
    for item in Records::new(events) {
        out.push(match item {
            Item::Event(e) if e.kind == EventKind::AdjustTime as u16 => continue,
            Item::Event(e) => {
                assert_eq!(e.kind, EventKind::Marker as u16, "a stray slot: {e:?}");
                Written::Event(e.id)
            }
            Item::Record(r) => {
                let n = 2 * r.slots.len();
                Written::Record {
                    kind: r.kind,
                    ts: r.ts,
                    words: r.words().take(n).collect(),
                }
            }
            Item::Cut { head, have } => panic!("a record cut at a slice's end: {head:?}, {have}"),
        });
    }
}

/// What the reader gives back for `w`: the words padded to whole slots.
fn padded(w: &Written) -> Written {
    match w {
        Written::Record { kind, ts, words } => {
            let mut words = words.clone();
            if !words.len().is_multiple_of(2) {
                words.push(0);
            }
            Written::Record {
                kind: *kind,
                ts: *ts,
                words,
            }
        }
        e => e.clone(),
    }
}

/// Every length of record after every number of events, so records
/// start at every offset of segments of 4, 8 and 12 slots; the consumer
/// polls after each item.
#[test]
fn events_and_records_of_every_length_come_out_in_order_and_whole() {
    for cap in [4, 8, 12] {
        let (_d, r, mut cons) = ring(cap, 3);
        let mut p = Producer::new(r, 3, Duration::from_secs(1));
        let mut written = Vec::new();
        let mut id = 0;
        for before in 0..cap {
            for n in 1..=MAX_RECORD_WORDS {
                for _ in 0..before {
                    written.push(Written::Event(id));
                    id += 1;
                }
                written.push(Written::Record {
                    kind: 40 + n as u32,
                    ts: u64::from(id) << 20,
                    words: words(u64::from(id), n),
                });
            }
        }
        let mut got = Vec::new();
        for w in &written {
            write(&mut p, w);
            cons.poll(&mut |t, evs| {
                assert_eq!(t, 3);
                decode(evs, &mut got)
            });
        }
        let want: Vec<Written> = written.iter().map(padded).collect();
        assert_eq!(got, want, "segments of {cap} slots");
    }
}

/// Two events fill half a segment of 4; a record of 3 slots does not fit
/// the 2 left and goes whole into the next segment, from its first slot.
#[test]
fn a_record_that_would_cross_a_segment_end_goes_whole_into_the_next() {
    let (_d, r, mut cons) = ring(4, 4);
    let mut p = Producer::new(r, 0, Duration::from_secs(1));
    p.push(Event::new(EventKind::Marker, 1, 1)).unwrap();
    p.push(Event::new(EventKind::Marker, 2, 2)).unwrap();
    let rec = RecordSlots::new(9, 3, &[10, 11, 12, 13]).unwrap();
    assert_eq!(rec.as_slice().len(), 3);
    // It does not fit what is left: try_push_record writes nothing.
    assert!(!p.try_push_record(&rec));
    p.push_record(&rec).unwrap();
    p.push(Event::new(EventKind::Marker, 4, 4)).unwrap();
    let mut runs: Vec<(Run, Vec<Event>)> = Vec::new();
    cons.poll_runs(&mut |run, evs| runs.push((run, evs.to_vec())));
    let shape: Vec<(u64, u32, usize)> = runs
        .iter()
        .map(|(r, e)| (r.claim, r.start, e.len()))
        .collect();
    assert_eq!(shape, vec![(0, 0, 2), (1, 0, 4)]);
    assert_eq!(&runs[1].1[..3], rec.as_slice());
    assert_eq!(runs[1].1[3].id, 4);
    // A record that fits exactly the rest of a segment stays in it.
    p.push(Event::new(EventKind::Marker, 5, 5)).unwrap();
    assert!(p.try_push_record(&rec));
    let mut shape = Vec::new();
    cons.poll_runs(&mut |r, e| shape.push((r.claim, r.start, e.len())));
    assert_eq!(shape, vec![(2, 0, 4)]);
}

/// A full ring: the producer waits for space, writes the wait's
/// `AdjustTime` into the segment it gets, and the record of 4 slots that
/// does not fit after it goes whole into the next one.
#[test]
fn a_record_that_waited_for_space_follows_its_wait_whole() {
    let (_d, r, mut cons) = ring(4, 2);
    let mut p = Producer::new(r, 0, Duration::from_secs(5));
    for i in 0..8 {
        p.push(Event::new(EventKind::Marker, i, 0)).unwrap();
    }
    let rec = RecordSlots::new(6, 7, &[1, 2, 3, 4, 5, 6]).unwrap();
    assert_eq!(rec.as_slice().len(), 4);
    let writer = std::thread::spawn(move || {
        p.push_record(&rec).unwrap();
        p
    });
    std::thread::sleep(Duration::from_millis(30));
    let mut events = Vec::new();
    let mut runs = Vec::new();
    while !writer.is_finished() {
        cons.poll_runs(&mut |run, evs| {
            runs.push((run.claim, run.start, evs.len()));
            events.extend_from_slice(evs)
        });
    }
    drop(writer.join().unwrap());
    cons.poll_runs(&mut |run, evs| {
        runs.push((run.claim, run.start, evs.len()));
        events.extend_from_slice(evs)
    });
    assert_eq!(runs, vec![(0, 0, 4), (1, 0, 4), (2, 0, 1), (3, 0, 4)]);
    assert_eq!(events[8].kind, EventKind::AdjustTime as u16);
    assert!(events[8].ts > 0);
    // Charged to the frames open when it is read: the reader steps over
    // the record, not to the event after it.
    assert_eq!(events[8].aux, sprig_wire::event::ADJUST_OPEN_FRAMES);
    assert_eq!(&events[9..], rec.as_slice());
}

/// A record of a kind no reader knows, whose payload slots read as
/// events would be method entries and exits, is stepped over exactly:
/// the events around it come out, nothing else.
#[test]
fn a_record_of_an_unknown_kind_is_stepped_over_exactly() {
    let (_d, r, mut cons) = ring(8, 2);
    let mut p = Producer::new(r, 1, Duration::from_secs(1));
    p.push(Event::new(EventKind::Marker, 1, 1)).unwrap();
    p.push_record(&RecordSlots::new(0xdead_beef, 2, &words(7, 6)).unwrap())
        .unwrap();
    p.push(Event::new(EventKind::Marker, 3, 3)).unwrap();
    let mut events = Vec::new();
    cons.poll(&mut |_, evs| events.extend_from_slice(evs));
    assert_eq!(events.len(), 6);
    // The raw slots hold what looks like entries and exits.
    assert!(
        events[2..5]
            .iter()
            .any(|e| e.kind == EventKind::MethodEntry as u16)
    );
    let ids: Vec<u32> = Records::new(&events)
        .filter_map(|i| match i {
            Item::Event(e) => Some(e.id),
            _ => None,
        })
        .collect();
    assert_eq!(ids, vec![1, 3]);
}

/// A producer thread and a consumer thread at once: every poll, taken
/// while records are being written, stops between items, never inside a
/// record.
#[test]
fn a_concurrent_consumer_never_sees_part_of_a_record() {
    let (_d, r, mut cons) = ring(8, 8);
    let items: u32 = if cfg!(debug_assertions) {
        50_000
    } else {
        500_000
    };
    let producer = std::thread::spawn(move || {
        let mut p = Producer::new(r, 2, Duration::from_secs(10));
        for i in 0..items {
            let n = (i % 7) as usize;
            let w = if n == 0 {
                Written::Event(i)
            } else {
                Written::Record {
                    kind: 5,
                    ts: u64::from(i),
                    words: words(u64::from(i), n),
                }
            };
            write(&mut p, &w);
        }
    });
    let mut got = Vec::new();
    while !producer.is_finished() {
        cons.poll(&mut |_, evs| decode(evs, &mut got));
    }
    producer.join().unwrap();
    cons.poll(&mut |_, evs| decode(evs, &mut got));
    assert_eq!(got.len(), items as usize);
    for (i, w) in got.iter().enumerate() {
        let i = i as u32;
        let n = (i % 7) as usize;
        let want = if n == 0 {
            Written::Event(i)
        } else {
            padded(&Written::Record {
                kind: 5,
                ts: u64::from(i),
                words: words(u64::from(i), n),
            })
        };
        assert_eq!(*w, want);
    }
}

fn written() -> impl Strategy<Value = Written> {
    prop_oneof![
        any::<u32>().prop_map(Written::Event),
        (
            any::<u32>(),
            any::<u64>(),
            prop::collection::vec(any::<u64>(), 1..=MAX_RECORD_WORDS)
        )
            .prop_map(|(kind, ts, words)| Written::Record { kind, ts, words }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Any mix of events and records, any segment size, polls at any
    /// points: the reader gets back what was written, in order.
    #[test]
    fn any_mix_comes_out_as_written(
        cap in (1u32..5).prop_map(|k| 4 * k),
        items in prop::collection::vec((written(), any::<bool>()), 0..120),
    ) {
        let (_d, r, mut cons) = ring(cap, 256);
        let mut p = Producer::new(r, 0, Duration::from_secs(1));
        let mut got = Vec::new();
        for (w, poll) in &items {
            write(&mut p, w);
            if *poll {
                cons.poll(&mut |_, evs| decode(evs, &mut got));
            }
        }
        cons.poll(&mut |_, evs| decode(evs, &mut got));
        let want: Vec<Written> = items.iter().map(|(w, _)| padded(w)).collect();
        prop_assert_eq!(got, want);
    }
}
