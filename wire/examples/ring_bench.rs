//! Ring benchmark: producer cost per event and consumer throughput.
//!
//! `cargo run --release -p sprig-wire --example ring_bench [-- --base /dev/shm]`
//!
//! - producer ns/event, 1 and 2 producer threads: each thread pushes a
//!   batch that fits in the region (so no waiting is measured), timed from
//!   a common start to its own end; the region's pages are touched by a
//!   warm-up round first, so page faults are not measured. Reported with
//!   precomputed timestamps (the push alone) and with an rdtsc per event
//!   (what a probe pays for push + clock).
//! - consumer events/s: one thread drains the region filled by the
//!   producer round, with a sink that reads every event (sums ids and
//!   timestamps), so the copy and the visit are measured, not just
//!   pointer bookkeeping.
//! - steady state: 1 producer pushes continuously while the consumer drains
//!   concurrently on the other core; reports producer ns/event including
//!   any backpressure waits, and the adjust-time total.
//!
//! Medians over repeats are printed, with min and max.

use sprig_wire::clock;
use sprig_wire::event::{Event, EventKind};
use sprig_wire::ring::{Consumer, Producer, Region, RingConfig};
use sprig_wire::session::SessionDir;
use std::path::PathBuf;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

const REPEATS: usize = 9;

fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn fmt3((med, min, max): (f64, f64, f64), unit: &str) -> String {
    format!("median {med:.2} {unit} (min {min:.2}, max {max:.2})")
}

/// Drains everything, returning (events, checksum).
fn drain(cons: &mut Consumer) -> (u64, u64) {
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
            return (n, sum);
        }
    }
}

/// One round: `threads` producers each push `per_thread` events. Returns
/// per-thread ns/event (median over threads' own times) and the consumer's
/// events/s for draining the result.
fn round(
    region: &Arc<Region>,
    producers: &mut Vec<Producer>,
    cons: &mut Consumer,
    per_thread: u64,
    with_tsc: bool,
) -> (f64, f64) {
    let threads = producers.len();
    let barrier = Arc::new(Barrier::new(threads));
    let taken: Vec<Producer> = std::mem::take(producers);
    let handles: Vec<_> = taken
        .into_iter()
        .map(|mut p| {
            let barrier = barrier.clone();
            thread::spawn(move || {
                barrier.wait();
                let t0 = Instant::now();
                if with_tsc {
                    for i in 0..per_thread {
                        let ev = Event::new(EventKind::MethodEntry, i as u32, clock::read_tsc());
                        if p.push(ev).is_err() {
                            panic!("ring died in the benchmark");
                        }
                    }
                } else {
                    for i in 0..per_thread {
                        let ev = Event::new(EventKind::MethodEntry, i as u32, i);
                        if p.push(ev).is_err() {
                            panic!("ring died in the benchmark");
                        }
                    }
                }
                let dt = t0.elapsed();
                // Hand the partial segment over so the drain frees it.
                p.release();
                (p, dt)
            })
        })
        .collect();
    let mut ns = Vec::new();
    for h in handles {
        let (p, dt) = h.join().expect("producer thread");
        ns.push(dt.as_nanos() as f64 / per_thread as f64);
        producers.push(p);
    }
    let t0 = Instant::now();
    let (n, sum) = drain(cons);
    let dt = t0.elapsed();
    std::hint::black_box(sum);
    assert_eq!(n, per_thread * threads as u64, "every event drained");
    assert!(!region.is_dead());
    (stats(ns).0, n as f64 / dt.as_secs_f64())
}

fn bench_threads(base: &std::path::Path, threads: usize) {
    let dir = SessionDir::create_in(base).expect("session dir");
    let region = Region::create(&dir.ring_path(), &config()).expect("region");
    let mut cons = Consumer::new(Region::open(&dir.ring_path()).expect("open"));
    let capacity = region.segment_capacity() as u64 * region.segments() as u64;
    // Leave a segment per thread of slack so no push ever waits.
    let per_thread =
        (capacity - (threads as u64 + 1) * region.segment_capacity() as u64) / threads as u64;
    let mut producers: Vec<Producer> = (0..threads)
        .map(|t| Producer::new(region.clone(), t as u32, Duration::from_secs(5)))
        .collect();
    for with_tsc in [false, true] {
        // Warm-up: touches every page of the region.
        round(&region, &mut producers, &mut cons, per_thread, with_tsc);
        let mut prod = Vec::new();
        let mut consv = Vec::new();
        for _ in 0..REPEATS {
            let (p, c) = round(&region, &mut producers, &mut cons, per_thread, with_tsc);
            prod.push(p);
            consv.push(c / 1e6);
        }
        let what = if with_tsc { "push+rdtsc" } else { "push      " };
        println!(
            "{threads} producer(s), {what}: {}  [{per_thread} events/thread/round]",
            fmt3(stats(prod), "ns/event")
        );
        if !with_tsc {
            println!(
                "consumer drain after {threads} producer(s): {}",
                fmt3(stats(consv), "M events/s")
            );
        }
    }
}

fn bench_steady(base: &std::path::Path) {
    let dir = SessionDir::create_in(base).expect("session dir");
    let region = Region::create(&dir.ring_path(), &config()).expect("region");
    let total: u64 = 100_000_000;
    let cons_region = Region::open(&dir.ring_path()).expect("open");
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let consumer = thread::spawn(move || {
        let mut cons = Consumer::new(cons_region);
        let mut n = 0u64;
        let mut adjust = 0u64;
        loop {
            let done = stop2.load(std::sync::atomic::Ordering::Acquire);
            let got = cons.poll(&mut |_, evs| {
                for e in evs {
                    if e.kind == EventKind::AdjustTime as u16 {
                        adjust += e.ts;
                    } else {
                        n += 1;
                    }
                }
            });
            if got == 0 {
                if done {
                    return (n, adjust);
                }
                std::hint::spin_loop();
            }
        }
    });
    let mut p = Producer::new(region.clone(), 0, Duration::from_secs(5));
    let t0 = Instant::now();
    for i in 0..total {
        p.push(Event::new(EventKind::MethodEntry, i as u32, i))
            .expect("ring died in the benchmark");
    }
    let dt = t0.elapsed();
    p.release();
    stop.store(true, std::sync::atomic::Ordering::Release);
    let (n, adjust) = consumer.join().expect("consumer");
    assert_eq!(n, total);
    println!(
        "steady state, 1 producer + concurrent consumer: {:.2} ns/event over {total} events, \
         adjust-time total {:.1} ms",
        dt.as_nanos() as f64 / total as f64,
        adjust as f64 / 1e6
    );
}

/// The default region, or `SPRIG_BENCH_SEGMENTS` segments of 64 KiB.
fn config() -> RingConfig {
    let mut cfg = RingConfig::default();
    if let Some(n) = std::env::var("SPRIG_BENCH_SEGMENTS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        cfg.segments = n;
    }
    cfg
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
    println!(
        "ring_bench: region {} x {} KiB in {}, {} repeats",
        config().segments,
        config().segment_bytes / 1024,
        base.display(),
        REPEATS
    );
    bench_threads(&base, 1);
    bench_threads(&base, 2);
    bench_steady(&base);
}
