//! sprig's own CPU time in the target while it samples: its threads'
//! (`sprig-*`, from `/proc/PID/task/TID/schedstat`) and the whole
//! target's (`/proc/PID/stat`), read at the start of sampling and at
//! every turn of it; the last reading closes the window. With the signal
//! handler's time, which the agent sends with its rounds, this bounds
//! sampling's overhead from above: it needs no comparison of two runs'
//! throughputs, which windows of seconds do not resolve to 1%.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::profile::position_samples::thread_cpu_ns;

/// How often the target's threads are listed anew (sprig's threads are
/// few and start with the session; the readings in between read them).
const RELIST: Duration = Duration::from_secs(1);

/// The readings of one sampling window.
pub(super) struct Meter {
    pid: u32,
    /// sprig's threads: their CPU ns at the window's start (0 for a thread
    /// that started later) and at the last reading.
    threads: HashMap<u32, (u64, u64)>,
    listed_at: Option<Instant>,
    /// The target's CPU ns at the window's start and at the last reading.
    target: Option<(u64, u64)>,
}

impl Meter {
    pub(super) fn new(pid: u32) -> Meter {
        Meter {
            pid,
            threads: HashMap::new(),
            listed_at: None,
            target: None,
        }
    }

    /// One reading (the first opens the window).
    pub(super) fn read(&mut self) {
        let Some(target) = process_cpu_ns(self.pid) else {
            return;
        };
        let first = self.target.is_none();
        let t = self.target.get_or_insert((target, target));
        t.1 = target;
        if self.listed_at.is_none_or(|at| at.elapsed() >= RELIST) {
            self.listed_at = Some(Instant::now());
            for tid in sprig_threads(self.pid) {
                self.threads.entry(tid).or_insert_with(|| {
                    let at_start = if first {
                        thread_cpu_ns(self.pid, tid).unwrap_or(0)
                    } else {
                        0
                    };
                    (at_start, at_start)
                });
            }
        }
        for (tid, (_, last)) in self.threads.iter_mut() {
            // A thread that ended keeps its last reading.
            if let Some(ns) = thread_cpu_ns(self.pid, *tid) {
                *last = ns.max(*last);
            }
        }
    }

    /// sprig's threads' CPU ns and the target's over the window, once it
    /// has two readings.
    pub(super) fn window(&self) -> Option<(u64, u64)> {
        let (a, b) = self.target?;
        let threads = self
            .threads
            .values()
            .map(|(s, e)| e.saturating_sub(*s))
            .sum();
        Some((threads, b.saturating_sub(a)))
    }
}

/// The tids of the target's threads named `sprig-*`.
fn sprig_threads(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|tid| {
            std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
                .is_ok_and(|c| c.starts_with("sprig-"))
        })
        .collect()
}

/// The whole process's CPU time (user and system, every thread, those
/// that ended too), in ns at the clock tick's resolution.
fn process_cpu_ns(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command's closing parenthesis: state is field 3,
    // utime 14 and stime 15.
    let rest = &text[text.rfind(')')? + 1..];
    let mut f = rest.split_whitespace().skip(11);
    let utime: u64 = f.next()?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    let tick = 1_000_000_000 / sprig::clock_ticks_per_second().max(1);
    Some((utime + stime).saturating_mul(tick))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process_and_its_named_threads() {
        let me = std::process::id();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s = stop.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let spin = std::thread::Builder::new()
            .name("sprig-spin".into())
            .spawn(move || {
                // The thread names itself before it runs this.
                let _ = tx.send(());
                let mut x = 0u64;
                while !s.load(std::sync::atomic::Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                }
            })
            .expect("a thread");
        rx.recv().expect("the thread runs");
        let mut m = Meter::new(me);
        m.read();
        // Until the spinning thread has had 100 ms of a core (300 ms on a
        // quiet host; longer where the host is busy), at most 10 s.
        let start = Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(100));
            m.read();
            let (threads, _) = m.window().expect("a window");
            if threads >= 100_000_000 || start.elapsed() > Duration::from_secs(10) {
                break;
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        spin.join().expect("joined");
        let (threads, target) = m.window().expect("a window");
        assert!(
            threads >= 100_000_000 && target + 20_000_000 >= threads,
            "sprig-spin {threads} ns, the process {target} ns in {:?}",
            start.elapsed()
        );
    }
}
