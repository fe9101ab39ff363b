//! Raw clocks read by probes, and how to convert their ticks.
//!
//! Probes store raw ticks in [`crate::Event::ts`]; the ring header names the
//! clock and its `ticks_per_sec` so the consumer converts them once.
//!
//! - [`ClockKind::Tsc`]: `rdtsc`, a few cycles per read. Only used when the
//!   CPU advertises an invariant TSC (`constant_tsc` and `nonstop_tsc`); its
//!   frequency is measured against `CLOCK_MONOTONIC` at session start.
//! - [`ClockKind::Monotonic`]: `CLOCK_MONOTONIC` in nanoseconds (vDSO).
//! - [`ClockKind::ThreadCpu`]: `CLOCK_THREAD_CPUTIME_ID` in nanoseconds.

use crate::control::ClockKind;
use std::time::{Duration, Instant};

/// Nanoseconds per second: the `ticks_per_sec` of the nanosecond clocks.
pub const NANOS_PER_SEC: u64 = 1_000_000_000;

/// Reads the time stamp counter. On other architectures than x86_64 this
/// falls back to `CLOCK_MONOTONIC` nanoseconds.
#[inline(always)]
pub fn read_tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc has no preconditions and touches no memory; every
        // x86_64 CPU implements it.
        #[allow(unused_unsafe)]
        unsafe {
            core::arch::x86_64::_rdtsc()
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        clock_ns(libc::CLOCK_MONOTONIC)
    }
}

/// Reads `clock` (a `CLOCK_*` id) in nanoseconds; 0 if the clock is not
/// available (never the case for the clocks used here on Linux).
#[inline]
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec owned by this frame;
    // clock_gettime writes only into it.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .wrapping_mul(NANOS_PER_SEC)
        .wrapping_add(ts.tv_nsec as u64)
}

/// `CLOCK_MONOTONIC` in nanoseconds.
#[inline]
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// `CLOCK_THREAD_CPUTIME_ID` of the calling thread in nanoseconds.
#[inline]
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Reads the clock `kind` in its raw ticks.
#[inline]
pub fn read(kind: ClockKind) -> u64 {
    match kind {
        ClockKind::Tsc => read_tsc(),
        ClockKind::Monotonic => monotonic_ns(),
        ClockKind::ThreadCpu => thread_cpu_ns(),
    }
}

/// Whether `/proc/cpuinfo` flags say the TSC ticks at a constant rate and
/// keeps ticking in deep C-states (`constant_tsc` and `nonstop_tsc`).
/// Always false on other architectures than x86_64.
pub fn tsc_is_invariant() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    match std::fs::read_to_string("/proc/cpuinfo") {
        Ok(text) => cpuinfo_says_invariant(&text),
        Err(_) => false,
    }
}

/// The flag check of [`tsc_is_invariant`] on a cpuinfo text: every `flags`
/// line (one per CPU) must carry both flags, and at least one must exist.
fn cpuinfo_says_invariant(cpuinfo: &str) -> bool {
    let mut seen = false;
    for line in cpuinfo.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        if key.trim() != "flags" {
            continue;
        }
        seen = true;
        let mut constant = false;
        let mut nonstop = false;
        for flag in value.split_ascii_whitespace() {
            constant |= flag == "constant_tsc";
            nonstop |= flag == "nonstop_tsc";
        }
        if !(constant && nonstop) {
            return false;
        }
    }
    seen
}

/// One bracketed reading: TSC and monotonic ns taken as close together as
/// possible; `width` is the monotonic ns the bracket took.
fn paired_reading() -> (u64, u64, u64) {
    let mut best = (0, 0, u64::MAX);
    for _ in 0..5 {
        let m0 = monotonic_ns();
        let t = read_tsc();
        let m1 = monotonic_ns();
        let width = m1.saturating_sub(m0);
        if width < best.2 {
            best = (t, m0 + width / 2, width);
        }
    }
    best
}

/// Measures the TSC frequency in ticks per second against `CLOCK_MONOTONIC`.
///
/// Takes five windows of ~6 ms each (≈30 ms in all), each bracketed by
/// the tightest of several paired readings, and returns the median rate, so
/// one preemption in a window does not skew the result. Returns
/// [`NANOS_PER_SEC`] on architectures without a TSC.
pub fn measure_tsc_hz() -> u64 {
    if !cfg!(target_arch = "x86_64") {
        return NANOS_PER_SEC;
    }
    const WINDOWS: usize = 5;
    const WINDOW: Duration = Duration::from_millis(6);
    let mut rates = Vec::with_capacity(WINDOWS);
    for _ in 0..WINDOWS {
        let (t0, m0, _) = paired_reading();
        let start = Instant::now();
        // Busy-wait rather than sleep: the thread stays on the CPU, so the
        // end reading is not delayed by a wake-up.
        while start.elapsed() < WINDOW {
            std::hint::spin_loop();
        }
        let (t1, m1, _) = paired_reading();
        let dt = t1.wrapping_sub(t0);
        let dm = m1.saturating_sub(m0);
        if dm > 0 && t1 > t0 {
            rates.push((dt as u128 * NANOS_PER_SEC as u128 / dm as u128) as u64);
        }
    }
    if rates.is_empty() {
        return NANOS_PER_SEC;
    }
    rates.sort_unstable();
    rates[rates.len() / 2]
}

/// Picks the clock to use for a `requested` one, with its ticks per second.
/// `Tsc` falls back to `Monotonic` when the TSC is not invariant (or the
/// measurement fails); the nanosecond clocks tick 1e9 times a second.
pub fn choose(requested: ClockKind) -> (ClockKind, u64) {
    match requested {
        ClockKind::Tsc if cfg!(target_arch = "x86_64") && tsc_is_invariant() => {
            let hz = measure_tsc_hz();
            // A TSC slower than 100 MHz means the measurement went wrong.
            if hz >= 100_000_000 {
                (ClockKind::Tsc, hz)
            } else {
                (ClockKind::Monotonic, NANOS_PER_SEC)
            }
        }
        ClockKind::Tsc | ClockKind::Monotonic => (ClockKind::Monotonic, NANOS_PER_SEC),
        ClockKind::ThreadCpu => (ClockKind::ThreadCpu, NANOS_PER_SEC),
    }
}

/// Converts `ticks` of a clock running at `ticks_per_sec` to nanoseconds
/// (saturating; 0 when `ticks_per_sec` is 0).
#[inline]
pub fn ticks_to_ns(ticks: u64, ticks_per_sec: u64) -> u64 {
    if ticks_per_sec == 0 {
        return 0;
    }
    let ns = ticks as u128 * NANOS_PER_SEC as u128 / ticks_per_sec as u128;
    u64::try_from(ns).unwrap_or(u64::MAX)
}

/// Converts a duration to ticks of a clock running at `ticks_per_sec`
/// (saturating).
#[inline]
pub fn duration_to_ticks(d: Duration, ticks_per_sec: u64) -> u64 {
    let t = d.as_nanos() * ticks_per_sec as u128 / NANOS_PER_SEC as u128;
    u64::try_from(t).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpuinfo_flags() {
        let both = "processor\t: 0\nflags\t\t: fpu tsc constant_tsc nonstop_tsc sse\n\
                    processor\t: 1\nflags\t\t: fpu constant_tsc nonstop_tsc\n";
        assert!(cpuinfo_says_invariant(both));
        let one_cpu_lacks = "flags : constant_tsc nonstop_tsc\nflags : constant_tsc\n";
        assert!(!cpuinfo_says_invariant(one_cpu_lacks));
        assert!(!cpuinfo_says_invariant("processor : 0\n"));
        // A flag that merely contains the name does not count.
        assert!(!cpuinfo_says_invariant(
            "flags : xconstant_tsc nonstop_tsc\n"
        ));
    }

    #[test]
    fn ns_clocks_advance() {
        let a = read(ClockKind::Monotonic);
        std::thread::sleep(Duration::from_millis(2));
        let b = read(ClockKind::Monotonic);
        assert!(b - a >= 2_000_000, "monotonic advanced {} ns", b - a);
        let c0 = read(ClockKind::ThreadCpu);
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(3) {
            std::hint::spin_loop();
        }
        let c1 = read(ClockKind::ThreadCpu);
        assert!(c1 > c0, "thread cpu clock did not advance");
    }

    #[test]
    fn tsc_rate_matches_monotonic() {
        let (kind, hz) = choose(ClockKind::Tsc);
        if kind != ClockKind::Tsc {
            assert_eq!(hz, NANOS_PER_SEC);
            eprintln!("TSC not invariant here: fell back to {kind:?}");
            return;
        }
        // Check the measured rate against an independent 50 ms window.
        let m0 = monotonic_ns();
        let t0 = read_tsc();
        std::thread::sleep(Duration::from_millis(50));
        let t1 = read_tsc();
        let m1 = monotonic_ns();
        let measured_ns = ticks_to_ns(t1 - t0, hz) as f64;
        let real_ns = (m1 - m0) as f64;
        let err = (measured_ns - real_ns).abs() / real_ns;
        assert!(err < 0.02, "tsc {hz} Hz is off by {:.3}%", err * 100.0);
    }

    #[test]
    fn conversions() {
        assert_eq!(ticks_to_ns(3_000_000_000, 3_000_000_000), NANOS_PER_SEC);
        assert_eq!(ticks_to_ns(5, 0), 0);
        assert_eq!(ticks_to_ns(u64::MAX, 1), u64::MAX);
        assert_eq!(
            duration_to_ticks(Duration::from_millis(2), 2_500_000_000),
            5_000_000
        );
        assert_eq!(
            choose(ClockKind::ThreadCpu),
            (ClockKind::ThreadCpu, NANOS_PER_SEC)
        );
        assert_eq!(
            choose(ClockKind::Monotonic),
            (ClockKind::Monotonic, NANOS_PER_SEC)
        );
    }
}
