//! Position samples, sampled timing's clock: a thread of the `sprig`
//! process that, every `--interval` (jittered), reads where each profiled
//! thread is in its event stream (the committed count of the ring segment
//! it owns) and turns each reading into a [`PositionSample`] for the CCT
//! builder. Nothing runs in the JVM for it: the probes inside a root
//! context read no clock, and the time between two readings goes to the
//! node the thread had open.
//!
//! A sample's weight is the wall-clock ticks since the previous reading
//! (`--clock wall`), or the thread's CPU time since its previous sample,
//! from `/proc/<pid>/task/<tid>/schedstat` (`--clock cpu`: time the thread
//! spent waiting counts nowhere). A virtual thread has no kernel thread of
//! its own: the agent publishes its clock in its segment's header
//! ([`VirtualCpu`](sprig_wire::ring::VirtualCpu), read with its position),
//! its carrier's CPU time plus a base while it is mounted, the base alone
//! while it is not.
//!
//! Ordering contract with the builder (see `CctBuilder::add_samples`): a
//! sample must reach the builder before the events past its position. The
//! position samples' thread reads positions and queues the samples under one lock; the
//! session loop reads the ring first, then takes the queue and adds it,
//! then processes what it read. A reading taken after the ring was read
//! points at or past what was read, so it is never behind.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use sprig_callgraph::PositionSample;
use sprig_wire::ClockKind;
use sprig_wire::clock;
use sprig_wire::ring::{PositionReader, Region, StreamPosition};

/// What the position samples' thread and the session loop share.
#[derive(Default)]
struct Shared {
    queue: Vec<PositionSample>,
    /// sprig thread index -> kernel thread id (for CPU time).
    tids: HashMap<u32, u32>,
    /// Readings taken.
    ticks: u64,
}

/// The position samples' thread; stopped and joined on drop.
pub(super) struct PositionSamples {
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

/// How a sample is weighed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Weight {
    /// Wall-clock ticks of the region's clock since the last reading.
    Wall,
    /// The thread's CPU time since its last sample (nanoseconds; the
    /// region's clock is then the thread CPU clock, in nanoseconds).
    Cpu { pid: u32 },
}

impl PositionSamples {
    /// Starts sampling `region` every `interval` (jittered by ±50%).
    pub(super) fn start(
        region: Arc<Region>,
        interval: Duration,
        weight: Weight,
    ) -> PositionSamples {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let handle = {
            let shared = shared.clone();
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("sprig-positions".into())
                .spawn(move || run(&region, interval, weight, &shared, &stop))
                .ok()
        };
        PositionSamples {
            shared,
            stop,
            handle,
        }
    }

    /// The kernel thread id of sprig thread `index` (from the agent's
    /// `Thread` message).
    pub(super) fn set_tid(&self, index: u32, tid: u32) {
        lock(&self.shared).tids.insert(index, tid);
    }

    /// The samples taken since the last call.
    pub(super) fn take(&self) -> Vec<PositionSample> {
        std::mem::take(&mut lock(&self.shared).queue)
    }

    /// Readings taken so far.
    #[cfg(test)]
    pub(super) fn readings(&self) -> u64 {
        lock(&self.shared).ticks
    }
}

impl Drop for PositionSamples {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn lock(m: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A small xorshift generator for the jitter (no need for more).
struct Jitter(u64);

impl Jitter {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// `interval` times a factor uniform in [0.5, 1.5).
    fn around(&mut self, interval: Duration) -> Duration {
        let f = 0.5 + (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        interval.mul_f64(f)
    }
}

fn run(
    region: &Region,
    interval: Duration,
    weight: Weight,
    shared: &Mutex<Shared>,
    stop: &AtomicBool,
) {
    let wall = match region.clock() {
        ClockKind::ThreadCpu => ClockKind::Monotonic,
        c => c,
    };
    let seed = clock::read(ClockKind::Monotonic) | 1;
    let mut jitter = Jitter(seed);
    let mut positions: Vec<StreamPosition> = Vec::new();
    // Reads the owned segments' headers, and learns of claims from the
    // ring's claim log (see PositionReader).
    let mut reader = PositionReader::default();
    let mut last = clock::read(wall);
    // CPU time per thread index at its previous sample.
    let mut cpu_last: HashMap<u32, u64> = HashMap::new();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(jitter.around(interval));
        let mut s = lock(shared);
        positions.clear();
        reader.read(region, &mut positions);
        let now = clock::read(wall);
        let wall_weight = now.saturating_sub(last);
        last = now;
        s.ticks += 1;
        for &pos in &positions {
            let w = match weight {
                Weight::Wall => wall_weight,
                Weight::Cpu { pid } => {
                    let cpu = match pos.cpu {
                        // A virtual thread: its own clock, which its
                        // carriers' CPU clocks make up (VirtualCpu).
                        Some(v) if v.carrier == 0 => v.base,
                        Some(v) => match thread_cpu_ns(pid, v.carrier) {
                            Some(c) => v.at(c),
                            None => continue,
                        },
                        None => {
                            let Some(&tid) = s.tids.get(&pos.thread) else {
                                continue;
                            };
                            let Some(cpu) = thread_cpu_ns(pid, tid) else {
                                continue;
                            };
                            cpu
                        }
                    };
                    // A virtual thread's clock may read a little behind
                    // its last reading (`schedstat` brings a running
                    // carrier's figure up to date at the kernel's ticks,
                    // while the agent read the exact clock at the
                    // unmount): its base stays the highest reading, so
                    // that no time is counted twice.
                    let keep = match (pos.cpu, cpu_last.get(&pos.thread)) {
                        (Some(_), Some(&b)) => cpu.max(b),
                        _ => cpu,
                    };
                    let before = cpu_last.insert(pos.thread, keep);
                    match before {
                        Some(b) => cpu.saturating_sub(b),
                        // The first reading of a thread only sets its base.
                        None => continue,
                    }
                }
            };
            let ts = if weight == Weight::Wall { now } else { 0 };
            s.queue.push(PositionSample::at(pos, ts, w));
        }
    }
}

/// Nanoseconds thread `tid` of process `pid` has run, from the first field
/// of its `schedstat`.
pub(crate) fn thread_cpu_ns(pid: u32, tid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat")).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_jitter_stays_within_half_an_interval_either_way() {
        let mut j = Jitter(42);
        let i = Duration::from_millis(10);
        let mut lo = Duration::MAX;
        let mut hi = Duration::ZERO;
        for _ in 0..10_000 {
            let d = j.around(i);
            lo = lo.min(d);
            hi = hi.max(d);
        }
        assert!(lo >= Duration::from_millis(5) && lo < Duration::from_micros(5_100));
        assert!(hi < Duration::from_millis(15) && hi > Duration::from_micros(14_900));
    }

    #[test]
    fn this_threads_cpu_time_is_read_and_grows() {
        let pid = std::process::id();
        let tid: u32 = std::fs::read_link("/proc/thread-self")
            .ok()
            .and_then(|p| p.file_name()?.to_str()?.parse().ok())
            .expect("tid");
        let a = thread_cpu_ns(pid, tid).expect("schedstat");
        // 30 ms on the CPU, whatever the optimiser makes of the loop: the
        // kernel brings a running thread's figure up to date at its ticks.
        let t0 = std::time::Instant::now();
        let mut x = 0u64;
        while t0.elapsed() < Duration::from_millis(30) {
            for i in 0..10_000u64 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
            }
        }
        let b = thread_cpu_ns(pid, tid).unwrap();
        assert!(b > a, "{a} -> {b}");
        assert_eq!(thread_cpu_ns(pid, u32::MAX), None);
    }

    /// A virtual thread's samples weigh what its published clock says,
    /// not any kernel thread's: unmounted, the base moves only when the
    /// agent publishes a new one; mounted, its carrier's CPU time counts.
    #[test]
    fn a_virtual_thread_is_weighed_by_its_published_clock() {
        use sprig_wire::event::{Event, EventKind};
        use sprig_wire::ring::{Producer, RingConfig, VirtualCpu};
        let (region, _fd) = Region::create_memfd(&RingConfig {
            segment_bytes: 4096,
            segments: 4,
            clock: ClockKind::ThreadCpu,
            ticks_per_sec: 1_000_000_000,
        })
        .unwrap();
        let mut p = Producer::new(region.clone(), 3, Duration::from_secs(1));
        p.publish_cpu(VirtualCpu {
            carrier: 0,
            base: 1_000_000,
        });
        p.push(Event::new(EventKind::Marker, 1, 0)).unwrap();
        let pid = std::process::id();
        let s = PositionSamples::start(
            region.clone(),
            Duration::from_millis(2),
            Weight::Cpu { pid },
        );
        let wait_readings = |n: u64| {
            let t0 = std::time::Instant::now();
            let from = s.readings();
            while s.readings() < from + n && t0.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(2));
            }
        };
        wait_readings(3);
        // Unmounted for a while: no weight, whatever time passes.
        let idle: u64 = s.take().iter().map(|x| x.weight).sum();
        assert_eq!(idle, 0);
        // It ran 3 ms elsewhere and unmounted again: 3 ms, exactly.
        p.publish_cpu(VirtualCpu {
            carrier: 0,
            base: 4_000_000,
        });
        wait_readings(3);
        let ran: u64 = s.take().iter().map(|x| x.weight).sum();
        assert_eq!(ran, 3_000_000);
        // Mounted on this thread, which spins 30 ms: about that much.
        let tid: u32 = std::fs::read_link("/proc/thread-self")
            .ok()
            .and_then(|p| p.file_name()?.to_str()?.parse().ok())
            .expect("tid");
        let now = thread_cpu_ns(pid, tid).unwrap();
        p.publish_cpu(VirtualCpu {
            carrier: tid,
            base: 4_000_000u64.wrapping_sub(now),
        });
        let t0 = std::time::Instant::now();
        let mut x = 0u64;
        while t0.elapsed() < Duration::from_millis(30) {
            for i in 0..10_000u64 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
            }
        }
        let spun = thread_cpu_ns(pid, tid).unwrap() - now;
        wait_readings(3);
        let mounted: u64 = s.take().iter().map(|x| x.weight).sum();
        assert!(
            mounted <= spun + 10_000_000 && mounted + 10_000_000 >= spun,
            "{mounted} ns weighed, {spun} ns spun"
        );
        drop(s);
        drop(p);
    }

    #[test]
    fn a_thread_inside_the_ring_is_sampled_at_its_position() {
        use sprig_wire::event::{Event, EventKind};
        use sprig_wire::ring::{Producer, RingConfig};
        let (region, _fd) = Region::create_memfd(&RingConfig {
            segment_bytes: 4096,
            segments: 4,
            clock: ClockKind::Monotonic,
            ticks_per_sec: 1_000_000_000,
        })
        .unwrap();
        let mut p = Producer::new(region.clone(), 3, Duration::from_secs(1));
        for i in 0..5 {
            p.push(Event::new(EventKind::Marker, i, 0)).unwrap();
        }
        let s = PositionSamples::start(region.clone(), Duration::from_millis(2), Weight::Wall);
        std::thread::sleep(Duration::from_millis(60));
        let samples = s.take();
        assert!(s.readings() >= 5, "{} readings", s.readings());
        assert!(!samples.is_empty());
        assert!(samples.iter().all(|x| x.thread == 3 && x.index == 5));
        // Weights are the wall time between readings: about the interval.
        let total: u64 = samples.iter().map(|x| x.weight).sum();
        assert!(
            total > 10_000_000,
            "{total} ns over {} samples",
            samples.len()
        );
        drop(p);
    }
}
