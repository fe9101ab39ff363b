use super::revelation::{Charge, await_first_call, revealing};
use super::ring::{GENERATION, PROFILING, REGION, RING_DEAD, map_ring, retire_ring};
use super::state::ThreadState;
use crate::methods;
use sprig_wire::ring::{Consumer, Producer, Region, RingConfig};
use sprig_wire::{ClockKind, Event, EventKind};
use std::sync::atomic::Ordering;
use std::time::Duration;

fn small() -> RingConfig {
    RingConfig {
        segment_bytes: 64 + 8 * 16,
        segments: 4,
        clock: ClockKind::Monotonic,
        ticks_per_sec: 1_000_000_000,
    }
}

/// What the CLI reads from a ring now: (thread, event kinds).
fn read(cli: &mut Consumer) -> Vec<(u32, Vec<u16>)> {
    let mut got = Vec::new();
    cli.poll(&mut |t, evs| got.push((t, evs.iter().map(|e| e.kind).collect())));
    got
}

/// The session ends and the next one begins while a thread of the
/// first waits in the agent (a revelation, another thread's first
/// call): its late `AdjustTime` and entry, pushed through the producer
/// it captured before, must not land in the next session's ring (mapped
/// at the same range, where the same segment belongs to another
/// thread), nor end that session as if its ring had died.
#[test]
fn a_late_native_write_does_not_reach_the_next_sessions_ring() {
    // A session: this thread registered, its producer owns
    // segment 0 (thread index 0).
    let (_first_cons, fd) = Region::create_memfd(&small()).unwrap();
    let first = map_ring(fd).unwrap();
    *crate::sync::write(&REGION) = Some(first.clone());
    RING_DEAD.store(false, Ordering::SeqCst);
    PROFILING.store(true, Ordering::SeqCst);
    let s = ThreadState::new();
    s.generation.set(GENERATION.load(Ordering::SeqCst));
    *s.producer.borrow_mut() = Some(Producer::new(first, 0, Duration::from_secs(1)));
    s.push(Event::new(EventKind::ThreadStart, 0, 1));
    s.set_depth(1);

    // What the control threads do in the meantime: end the session,
    // retire its ring, map the next one at its range, begin; a thread
    // of the next session takes segment 0 again.
    let next_session = || {
        PROFILING.store(false, Ordering::SeqCst);
        GENERATION.fetch_add(1, Ordering::SeqCst);
        retire_ring().unwrap();
        let (cons, fd) = Region::create_memfd(&small()).unwrap();
        let next = map_ring(fd).unwrap();
        *crate::sync::write(&REGION) = Some(next.clone());
        GENERATION.fetch_add(1, Ordering::SeqCst);
        PROFILING.store(true, Ordering::SeqCst);
        let mut other = Producer::new(next, 0, Duration::from_secs(1));
        other
            .push(Event::new(EventKind::ThreadStart, 0, 2))
            .unwrap();
        (cons, other)
    };

    // `revealing`: the revelation outlives the session.
    let (cons, mut other) = revealing(&s, Charge::OpenFrames, || {
        let out = next_session();
        std::thread::sleep(Duration::from_millis(2));
        (true, out)
    });
    // `await_first_call`: another thread's first call is handled after
    // the next session began.
    let id = methods::RESERVED_FIRST - 7;
    assert_eq!(methods::claim_first_call(id), methods::FirstCall::Mine);
    let done = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        methods::first_call_done(id);
    });
    await_first_call(&s, id);
    done.join().unwrap();
    // An entry recorded after either wait (`enter`, `root_enter`).
    s.push(Event::new(EventKind::MethodEntry, 5, 3));

    // What the CLI reads of the next ring: the other thread's events
    // only, now and after it records again.
    let start = EventKind::ThreadStart as u16;
    let entry = EventKind::MethodEntry as u16;
    let mut cli = Consumer::new(cons);
    assert_eq!(read(&mut cli), vec![(0, vec![start])]);
    other
        .push(Event::new(EventKind::MethodEntry, 9, 4))
        .unwrap();
    drop(other);
    assert_eq!(read(&mut cli), vec![(0, vec![entry])]);
    assert!(
        !RING_DEAD.load(Ordering::SeqCst) && PROFILING.load(Ordering::SeqCst),
        "the late write ended the next session"
    );
    *crate::sync::write(&REGION) = None;
    PROFILING.store(false, Ordering::SeqCst);
}

/// The native writer's records: events and records of every length
/// pushed through a thread's state, a record never split (segments of 8
/// slots, records starting at every offset), read back in order and
/// whole.
#[test]
fn records_go_in_whole_beside_events() {
    use sprig_wire::RecordSlots;
    use sprig_wire::record::{Item, Records};
    let (cons_side, fd) = Region::create_memfd(&small()).unwrap();
    let region = Region::from_fd(fd).unwrap();
    let s = ThreadState::new();
    *s.producer.borrow_mut() = Some(Producer::new(region, 0, Duration::from_secs(1)));
    let mut cli = Consumer::new(cons_side);
    let mut want = Vec::new();
    let mut got = Vec::new();
    for i in 0..40u32 {
        let n = (i % 7) as usize;
        if n == 0 {
            s.push(Event::new(EventKind::Marker, i, 0));
        } else {
            let words: Vec<u64> = (0..n as u64).map(|w| u64::from(i) << 8 | w).collect();
            s.push_record(&RecordSlots::new(i, 0, &words).unwrap());
        }
        want.push((i, n.div_ceil(2)));
        cli.poll(&mut |_, evs| {
            for item in Records::new(evs) {
                got.push(match item {
                    Item::Event(e) => (e.id, 0),
                    Item::Record(r) => {
                        assert_eq!(r.word(0), Some(u64::from(r.kind) << 8));
                        (r.kind, r.slots.len())
                    }
                    Item::Cut { head, .. } => panic!("a record cut: {head:?}"),
                });
            }
        });
    }
    assert_eq!(got, want);
}

/// The silent word the CPU timer's handler reads: inside only between a
/// silent root context's open and close, under this session's tag, and a
/// new count at every open and close (a walk that straddled one is told
/// by the word changing).
#[test]
fn the_silent_word_says_inside_only_while_a_silent_root_context_is_open() {
    use crate::ffi::agct::SilentFilter;
    let s = ThreadState::new();
    let word = || s.silent_word.load(Ordering::Relaxed);
    let tag = (GENERATION.load(Ordering::Relaxed) & 0xffff_ffff) as u32;
    assert!(
        !SilentFilter::inside(tag, word()),
        "a new thread is outside"
    );
    let mut seen = vec![word()];
    for _ in 0..3 {
        s.silent_word_open();
        assert!(SilentFilter::inside(tag, word()), "open: inside");
        assert!(
            !SilentFilter::inside(tag.wrapping_add(1), word()),
            "another session's tag is outside"
        );
        seen.push(word());
        s.silent_word_close();
        assert!(!SilentFilter::inside(tag, word()), "closed: outside");
        seen.push(word());
    }
    let mut distinct = seen.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        seen.len(),
        "every open and close is a new word: {seen:x?}"
    );
}
