//! Raw clocks read by probes. CONTRACT (implementation pending in issue 3):
//! - `pub fn read(kind: ClockKind) -> u64` raw ticks (rdtsc, or ns)
//! - `pub fn read_tsc() -> u64` (#[inline(always)])
//! - `pub fn tsc_is_invariant() -> bool` (cpuinfo constant_tsc + nonstop_tsc, clocksource)
//! - `pub fn measure_tsc_hz() -> u64` (against CLOCK_MONOTONIC)
//! - `pub fn choose(requested: ClockKind) -> (ClockKind, u64 ticks_per_sec)`
