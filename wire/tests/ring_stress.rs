//! Ring stress tests: many producers through a small region with a slow
//! consumer (exact, ordered delivery; adjust-time equals measured waits),
//! and a consumer process killed mid-run (producers give up within the
//! bound and the region is dead).
//!
//! Size: 10 million events per thread. Release builds always run all of
//! them. Debug builds (unoptimised) run them too unless a 40 s budget runs
//! out first on a busy machine; then the producers stop early and the test
//! checks exactly what was pushed. Each test prints which size ran.

use sprig_wire::clock;
use sprig_wire::control::ClockKind;
use sprig_wire::event::{Event, EventKind};
use sprig_wire::ring::{Consumer, Dead, Producer, Region, RingConfig};
use sprig_wire::session::SessionDir;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

const EVENTS_PER_THREAD: u64 = 10_000_000;

/// Time after which a debug build stops its producers early
/// (`SPRIG_WIRE_STRESS_BUDGET_MS` overrides the 40 s).
fn time_budget() -> Option<Duration> {
    let ms = std::env::var("SPRIG_WIRE_STRESS_BUDGET_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40_000);
    cfg!(debug_assertions).then_some(Duration::from_millis(ms))
}

/// A marker payload that depends on both the thread and the sequence
/// number, so a stale or torn slot would not pass for the right event.
fn stamp(thread: u32, i: u64) -> u64 {
    (i << 8) ^ thread as u64 ^ 0x5bd1_e995_0000_0000
}

/// Threshold above which a producer logs a push's duration (ticks).
fn log_threshold(hz: u64) -> u64 {
    clock::duration_to_ticks(Duration::from_micros(2), hz)
}

struct ProducerLog {
    /// (sequence number, ticks spent inside that push) for slow pushes.
    slow: Vec<(u64, u64)>,
}

#[derive(Default, Clone)]
struct ThreadSeen {
    next: u64,
    /// (sequence number of the event that follows, adjust ticks).
    adjusts: Vec<(u64, u64)>,
    /// An AdjustTime seen and not yet followed by its event.
    pending_adjust: Option<u64>,
}

fn run_stress(threads: u32) {
    let n = EVENTS_PER_THREAD;
    let (kind, hz) = clock::choose(ClockKind::Tsc);
    let dir = SessionDir::create().unwrap();
    let cfg = RingConfig {
        segment_bytes: 16 << 10,
        segments: 16,
        clock: kind,
        ticks_per_sec: hz,
    };
    let region = Region::create(&dir.ring_path(), &cfg).unwrap();
    let cons_region = Region::open(&dir.ring_path()).unwrap();
    let started = Instant::now();
    let threshold = log_threshold(hz);
    let barrier = Arc::new(Barrier::new(threads as usize + 1));
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicUsize::new(0));
    let producers: Vec<_> = (0..threads)
        .map(|t| {
            let region = region.clone();
            let barrier = barrier.clone();
            let stop = stop.clone();
            let done = done.clone();
            thread::spawn(move || {
                let mut p = Producer::new(region, t, Duration::from_secs(10));
                let mut log = ProducerLog { slow: Vec::new() };
                barrier.wait();
                let mut pushed = n;
                for i in 0..n {
                    if i.is_multiple_of(1 << 16) && stop.load(Ordering::Relaxed) {
                        pushed = i;
                        break;
                    }
                    let ev = Event::new(EventKind::Marker, i as u32, stamp(t, i));
                    let t0 = clock::read(kind);
                    let r = p.push(ev);
                    let d = clock::read(kind).wrapping_sub(t0);
                    if r.is_err() {
                        panic!("thread {t}: region died at event {i}");
                    }
                    if d > threshold {
                        log.slow.push((i, d));
                    }
                }
                p.release();
                done.fetch_add(1, Ordering::Release);
                (log, pushed)
            })
        })
        .collect();

    // The deliberately slow consumer: starts late (so the region surely
    // fills and producers wait), and sleeps between polls, longer every
    // eighth time.
    let mut cons = Consumer::new(cons_region);
    let mut seen = vec![ThreadSeen::default(); threads as usize];
    let mut delivered = 0u64;
    let mut errors: Vec<String> = Vec::new();
    barrier.wait();
    thread::sleep(Duration::from_millis(50));
    let deadline = started + Duration::from_secs(240);
    let mut polls = 0u64;
    loop {
        if time_budget().is_some_and(|b| started.elapsed() > b) {
            stop.store(true, Ordering::Relaxed);
        }
        assert!(Instant::now() < deadline, "stress test ran over 240 s");
        // Loaded before the poll: a poll after every producer released its
        // last segment sees all events.
        let all_done = done.load(Ordering::Acquire) == threads as usize;
        let got = cons.poll(&mut |t, evs| {
            let Some(s) = seen.get_mut(t as usize) else {
                errors.push(format!("unknown thread {t}"));
                return;
            };
            for e in evs {
                match e.kind() {
                    Some(EventKind::AdjustTime) => {
                        if s.pending_adjust.replace(e.ts).is_some() {
                            errors.push(format!("thread {t}: two adjusts in a row"));
                        }
                    }
                    Some(EventKind::Marker) => {
                        if (e.id != s.next as u32 || e.ts != stamp(t, s.next)) && errors.len() < 10
                        {
                            errors.push(format!(
                                "thread {t}: expected event {} got id {} ts {:#x}",
                                s.next, e.id, e.ts
                            ));
                        }
                        if let Some(a) = s.pending_adjust.take() {
                            s.adjusts.push((s.next, a));
                        }
                        s.next += 1;
                        delivered += 1;
                    }
                    other => errors.push(format!("thread {t}: unexpected kind {other:?}")),
                }
            }
        });
        polls += 1;
        if all_done && got == 0 {
            break;
        }
        thread::sleep(Duration::from_micros(if polls.is_multiple_of(8) {
            2000
        } else {
            100
        }));
    }
    let results: Vec<(ProducerLog, u64)> =
        producers.into_iter().map(|h| h.join().unwrap()).collect();
    let elapsed = started.elapsed();
    assert!(errors.is_empty(), "{errors:#?}");
    let total: u64 = results.iter().map(|r| r.1).sum();
    assert_eq!(delivered, total, "every event arrives");
    let mode = match (cfg!(debug_assertions), total == n * threads as u64) {
        (false, _) => "release build, full size".to_string(),
        (true, true) => "debug build, full size".to_string(),
        (true, false) => format!("debug build, stopped by the time budget at {total} events"),
    };
    assert!(!region.is_dead());
    assert_eq!(region.lost_events(), 0);

    // Adjust-time against the waits the producers measured themselves.
    let mut sum_adjust = 0u64;
    let mut sum_measured = 0u64;
    let mut waits = 0usize;
    for (t, (s, (log, pushed))) in seen.iter().zip(&results).enumerate() {
        assert_eq!(s.next, *pushed, "thread {t} got all its events in order");
        if !cfg!(debug_assertions) {
            assert_eq!(*pushed, n);
        }
        assert!(s.pending_adjust.is_none());
        let mut slow = log.slow.iter().peekable();
        for &(i, a) in &s.adjusts {
            while slow.peek().is_some_and(|&&(j, _)| j < i) {
                slow.next();
            }
            let measured = match slow.peek() {
                Some(&&(j, d)) if j == i => d,
                // Not logged: that push took at most the threshold.
                _ => threshold,
            };
            assert!(
                a <= measured,
                "thread {t} event {i}: adjust {a} ticks exceeds the {measured} ticks the push took"
            );
            sum_adjust += a;
            sum_measured += measured;
            waits += 1;
        }
    }
    let slack = waits as u64 * clock::duration_to_ticks(Duration::from_micros(50), hz);
    let ms = |ticks: u64| clock::ticks_to_ns(ticks, hz) as f64 / 1e6;
    println!(
        "ring stress: {threads} producers, {total} events ({mode}), clock {kind:?} {hz} Hz, \
         {elapsed:?}, {polls} polls, {waits} waits, adjust {:.2} ms vs measured {:.2} ms",
        ms(sum_adjust),
        ms(sum_measured)
    );
    assert!(waits > 0, "the slow consumer must make producers wait");
    // The consumer starts 50 ms late: every producer waited at least that.
    assert!(
        ms(sum_adjust) >= 40.0 * threads as f64,
        "adjust total {:.2} ms too small",
        ms(sum_adjust)
    );
    assert!(sum_adjust <= sum_measured);
    assert!(
        sum_measured - sum_adjust <= sum_adjust / 10 + slack,
        "adjust {:.2} ms vs measured {:.2} ms",
        ms(sum_adjust),
        ms(sum_measured)
    );
}

#[test]
fn two_producers_slow_consumer() {
    run_stress(2);
}

#[test]
fn eight_producers_slow_consumer() {
    run_stress(8);
}

const CHILD_ENV: &str = "SPRIG_RING_TEST_CHILD_RING";

/// The consumer side when this test binary runs as the child: consume
/// forever (bounded to 60 s), say "ready" once events flow.
fn child_consumer(ring: &str) -> ! {
    let region = Region::open(std::path::Path::new(ring)).expect("child opens the ring");
    let mut cons = Consumer::new(region);
    let mut total = 0u64;
    let mut said = false;
    let start = Instant::now();
    cons.poll(&mut |_, _| {});
    println!("polling");
    while start.elapsed() < Duration::from_secs(60) {
        total += cons.poll(&mut |_, _| {}) as u64;
        if !said && total >= 100_000 {
            println!("ready {total}");
            said = true;
        }
        thread::sleep(Duration::from_micros(200));
    }
    std::process::exit(3);
}

/// Parent: producers push without end into a small region drained by a
/// child process; the child is killed with SIGKILL; every producer must
/// return `Dead` within the wait bound (plus the time to fill what is left
/// of the region), and the region must say it is dead.
#[test]
fn consumer_process_killed_mid_run() {
    if let Ok(ring) = std::env::var(CHILD_ENV) {
        child_consumer(&ring);
    }
    let bound = Duration::from_millis(300);
    let dir = SessionDir::create().unwrap();
    let cfg = RingConfig {
        segment_bytes: 4096,
        segments: 8,
        ..RingConfig::default()
    };
    let region = Region::create(&dir.ring_path(), &cfg).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "consumer_process_killed_mid_run",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir.ring_path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let stdout = child.stdout.take().unwrap();
    let mut child = Kill(child);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            // The harness prints "test <name> ... " on the same line.
            for word in ["polling", "ready"] {
                if line.contains(word) {
                    let _ = ready_tx.send(word);
                }
            }
        }
    });
    // Producers start once the child polls, so they never wait on a
    // consumer that is still starting up.
    let first = ready_rx.recv_timeout(Duration::from_secs(20));
    assert_eq!(
        first.as_deref(),
        Ok("polling"),
        "child consumer did not start"
    );

    let stop = Arc::new(AtomicBool::new(false));
    let producers: Vec<_> = (0..2u32)
        .map(|t| {
            let region = region.clone();
            let stop = stop.clone();
            thread::spawn(move || {
                let mut p = Producer::new(region, t, bound);
                let mut i = 0u64;
                // Bounded: 60 s at most even if nothing ever dies.
                let start = Instant::now();
                loop {
                    if let Err(Dead) = p.push(Event::new(EventKind::Marker, i as u32, i)) {
                        return Ok((i, Instant::now()));
                    }
                    i += 1;
                    if i.is_multiple_of(1 << 16) && start.elapsed() > Duration::from_secs(60) {
                        return Err(format!("thread {t}: never died"));
                    }
                    if stop.load(Ordering::Relaxed) {
                        return Err(format!("thread {t}: stopped"));
                    }
                }
            })
        })
        .collect();

    let ready = ready_rx.recv_timeout(Duration::from_secs(20));
    if ready.is_err() {
        stop.store(true, Ordering::Relaxed);
        for p in producers {
            let _ = p.join();
        }
        panic!("child consumer never became ready");
    }
    assert!(!region.is_dead(), "alive while the child consumes");
    child.0.kill().unwrap();
    let killed = Instant::now();
    child.0.wait().unwrap();
    let mut pushed = 0;
    for p in producers {
        let (events, died) = p.join().unwrap().unwrap();
        let after = died.saturating_duration_since(killed);
        println!("producer pushed {events} events, gave up {after:?} after the kill");
        assert!(
            after <= bound + Duration::from_secs(2),
            "gave up {after:?} after the kill, bound {bound:?}"
        );
        pushed += events;
    }
    assert!(pushed > 100_000);
    assert!(region.is_dead());
    assert!(
        region.lost_events() >= 2,
        "each producer lost its last event"
    );
    // Once dead, pushes fail at once.
    let mut late = Producer::new(region.clone(), 9, bound);
    let t0 = Instant::now();
    assert_eq!(late.push(Event::default()), Err(Dead));
    assert!(t0.elapsed() < Duration::from_millis(100));
}
