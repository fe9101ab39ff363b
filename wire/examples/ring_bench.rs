//! Ring benchmark: producer cost per event and consumer throughput.
//!
//! `cargo run --release -p sprig-wire --example ring_bench [-- --base DIR]`
//! (`DIR` defaults to /tmp, where sessions live; try /dev/shm to compare).
//!
//! What is measured (medians over rounds, with min and max):
//!
//! - **producer, warm**: 1 or 2 producer threads each push a batch of
//!   events (together 1 MiB of records) between two barriers; then the
//!   main thread drains the ring. This is the steady state where the
//!   consumer keeps up. Producers go round the ring, so they write into
//!   the segments freed longest ago; before 7b5e15b they took the ones the
//!   drain had just freed, still in the draining CPU's cache, and paid
//!   4.5 ns per event here instead of 1.2 (docs/event-ring.md).
//!   Shown for the push alone (precomputed timestamps) and with an `rdtsc`
//!   per event (what a probe pays for clock + push).
//! - **producer, cold**: the same with batches that fill the whole default
//!   region (32 MiB), so every record goes to memory that is not in cache.
//! - **consumer**: the drain after each round, single thread, with a sink
//!   that reads every event (sums ids and timestamps): events/s.
//! - **concurrent**: 1 producer pushes 100 M events while the consumer
//!   drains on another thread at the same time (napping 100 µs whenever a
//!   poll found less than a segment's worth; the CLI pauses longer, see
//!   `POLL_PAUSE` in cli/src/profile.rs); producer
//!   ns/event in total, and net of the time it spent waiting for space
//!   (the adjust-time records it wrote), and its own CPU time per event
//!   (which leaves out time it was preempted on a busy machine).
//!
//! Each thread times itself with `Instant` around its whole batch, so the
//! per-event figures include the loop and the segment switches.

use sprig_wire::clock;
use sprig_wire::event::{Event, EventKind};
use sprig_wire::ring::{Consumer, Producer, Region, RingConfig};
use sprig_wire::session::SessionDir;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

fn summary(mut v: Vec<f64>) -> String {
    v.sort_by(|a, b| a.total_cmp(b));
    format!(
        "median {:8.2} (min {:.2}, max {:.2})",
        v[v.len() / 2],
        v[0],
        v[v.len() - 1]
    )
}

/// Drains everything visible, reading every event. Returns the count.
fn drain(cons: &mut Consumer) -> u64 {
    let mut n = 0u64;
    let mut sum = 0u64;
    loop {
        let got = cons.poll(&mut |_, evs| {
            for e in evs {
                sum = sum.wrapping_add(e.ts ^ e.id as u64);
            }
            n += evs.len() as u64;
        });
        if got == 0 {
            std::hint::black_box(sum);
            return n;
        }
    }
}

#[inline(never)]
fn push_batch(p: &mut Producer, n: u64, with_tsc: bool) {
    if with_tsc {
        for i in 0..n {
            let ev = Event::new(EventKind::MethodEntry, i as u32, clock::read_tsc());
            p.push(ev).expect("the ring died in the benchmark");
        }
    } else {
        for i in 0..n {
            let ev = Event::new(EventKind::MethodEntry, i as u32, i);
            p.push(ev).expect("the ring died in the benchmark");
        }
    }
}

struct Rounds {
    producer_ns: Vec<f64>,
    consumer_meps: Vec<f64>,
}

/// `threads` persistent producers push `per_thread` events per round;
/// the main thread drains after each round. The first `warmup` rounds are
/// not recorded (they fault the pages in).
fn rounds(
    base: &Path,
    threads: usize,
    per_thread: u64,
    rounds: usize,
    warmup: usize,
    with_tsc: bool,
) -> Rounds {
    let dir = SessionDir::create_in(base).expect("session dir");
    let region = Region::create(&dir.ring_path(), &RingConfig::default()).expect("region");
    let capacity = region.segment_capacity() as u64 * region.segments() as u64;
    assert!(
        per_thread * threads as u64 + (threads as u64 + 1) * region.segment_capacity() as u64
            <= capacity,
        "a round must fit in the region: no waiting is measured here"
    );
    let mut cons = Consumer::new(Region::open(&dir.ring_path()).expect("open"));
    let start = Arc::new(Barrier::new(threads + 1));
    let end = Arc::new(Barrier::new(threads + 1));
    let total_rounds = rounds + warmup;
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let region = region.clone();
            let (start, end) = (start.clone(), end.clone());
            thread::spawn(move || {
                let mut p = Producer::new(region, t as u32, Duration::from_secs(10));
                let mut ns = Vec::with_capacity(total_rounds);
                for _ in 0..total_rounds {
                    start.wait();
                    let t0 = Instant::now();
                    push_batch(&mut p, per_thread, with_tsc);
                    ns.push(t0.elapsed().as_nanos() as f64 / per_thread as f64);
                    // Hand over the partial segment so the drain frees it.
                    p.release();
                    end.wait();
                }
                ns
            })
        })
        .collect();
    let mut consumer_meps = Vec::new();
    for r in 0..total_rounds {
        start.wait();
        end.wait();
        let t0 = Instant::now();
        let n = drain(&mut cons);
        let dt = t0.elapsed();
        assert_eq!(n, per_thread * threads as u64, "every event drained");
        if r >= warmup {
            consumer_meps.push(n as f64 / dt.as_secs_f64() / 1e6);
        }
    }
    let mut producer_ns = Vec::new();
    for h in handles {
        let ns = h.join().expect("producer thread");
        producer_ns.extend_from_slice(&ns[warmup..]);
    }
    assert!(!region.is_dead());
    Rounds {
        producer_ns,
        consumer_meps,
    }
}

fn concurrent(base: &Path) {
    let dir = SessionDir::create_in(base).expect("session dir");
    let region = Region::create(&dir.ring_path(), &RingConfig::default()).expect("region");
    let total: u64 = 100_000_000;
    let cons_region = Region::open(&dir.ring_path()).expect("open");
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let consumer = thread::spawn(move || {
        let mut cons = Consumer::new(cons_region);
        let mut n = 0u64;
        let mut adjust = 0u64;
        loop {
            let done = stop2.load(Ordering::Acquire);
            let got = cons.poll(&mut |_, evs| {
                for e in evs {
                    if e.kind == EventKind::AdjustTime as u16 {
                        adjust += e.ts;
                    } else {
                        n += 1;
                    }
                }
            });
            if got == 0 && done {
                return (n, adjust);
            }
            // Like the CLI: drain what is there, then nap briefly instead
            // of spinning on the producer's cache lines.
            if got < 4096 {
                thread::sleep(Duration::from_micros(100));
            }
        }
    });
    let mut p = Producer::new(region.clone(), 0, Duration::from_secs(10));
    let t0 = Instant::now();
    let cpu0 = clock::thread_cpu_ns();
    push_batch(&mut p, total, false);
    let cpu = clock::thread_cpu_ns() - cpu0;
    let dt = t0.elapsed();
    p.release();
    stop.store(true, Ordering::Release);
    let (n, adjust_ns) = consumer.join().expect("consumer");
    assert_eq!(n, total);
    let per = dt.as_nanos() as f64 / total as f64;
    let net = (dt.as_nanos() as f64 - adjust_ns as f64) / total as f64;
    println!(
        "concurrent, 1 producer + 1 consumer thread: {per:.2} ns/event in total, \
         {net:.2} ns/event net of {:.1} ms waiting for space, \
         {:.2} ns/event of producer CPU time ({total} events)",
        adjust_ns as f64 / 1e6,
        cpu as f64 / total as f64
    );
}

fn main() {
    let mut base = PathBuf::from("/tmp");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--base" => base = PathBuf::from(args.next().expect("--base needs a directory")),
            other => {
                eprintln!("usage: ring_bench [--base DIR]   (unknown argument {other})");
                std::process::exit(2);
            }
        }
    }
    let cfg = RingConfig::default();
    let region_events = (cfg.segment_bytes as u64 - 64) / 16 * cfg.segments as u64;
    println!(
        "ring_bench: default region {} x {} KiB in {}; load average {}",
        cfg.segments,
        cfg.segment_bytes / 1024,
        base.display(),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    // What the clock costs by itself, to read the push+rdtsc lines.
    let mut tsc = Vec::new();
    for _ in 0..50 {
        let t0 = Instant::now();
        let mut x = 0u64;
        for _ in 0..100_000 {
            x = x.wrapping_add(clock::read_tsc());
        }
        std::hint::black_box(x);
        tsc.push(t0.elapsed().as_nanos() as f64 / 100_000.0);
    }
    println!(
        "rdtsc alone                          : {} ns/read",
        summary(tsc)
    );
    const WARM_EVENTS: u64 = 65_536; // 1 MiB of records per round
    for threads in [1usize, 2] {
        for with_tsc in [false, true] {
            let what = if with_tsc { "push+rdtsc" } else { "push" };
            let per = WARM_EVENTS / threads as u64;
            let r = rounds(&base, threads, per, 200, 20, with_tsc);
            println!(
                "producer warm, {threads} thread(s), {what:10}: {} ns/event",
                summary(r.producer_ns)
            );
            if !with_tsc {
                println!(
                    "consumer after warm rounds ({threads} producer(s)): {} M events/s",
                    summary(r.consumer_meps)
                );
            }
        }
    }
    for threads in [1usize, 2] {
        let per = (region_events - 4 * 4092) / threads as u64;
        let r = rounds(&base, threads, per, 7, 1, false);
        println!(
            "producer cold, {threads} thread(s), push      : {} ns/event",
            summary(r.producer_ns)
        );
        println!(
            "consumer after cold rounds ({threads} producer(s)): {} M events/s",
            summary(r.consumer_meps)
        );
    }
    concurrent(&base);
}
