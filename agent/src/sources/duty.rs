//! The turns of the agent's measurement knobs (`SPRIG_AGENT_FAULT`
//! `sampled-alloc-duty`, `exact-alloc-duty`): a thread that switches one
//! thing on in the even turns of [`DUTY_ENV`] milliseconds (2,000 without
//! it) on `CLOCK_MONOTONIC`, `System.nanoTime()`'s clock, and off in the
//! odd ones, so that a benchmark (`sprig-bench --only alloc-duty`) can set
//! the iterations timed in either kind of turn against each other within
//! one session. The sources that have a knob start the thread and stop it
//! with themselves.

use super::stacks::{Running, start_thread};
use crate::env::Agent;
use crate::ffi::Jni;
use sprig_wire::clock;
use std::time::Duration;

/// The length of the knobs' turns, in milliseconds, from this environment
/// variable of the target JVM.
pub const DUTY_ENV: &str = "SPRIG_AGENT_ALLOC_DUTY_MS";

/// Turns when [`DUTY_ENV`] is unset or not a positive number.
const DEFAULT_TURN_MS: u64 = 2000;

/// Starts a knob's thread, named `name`, into `slot`: at each boundary of
/// a turn, `set(jni, true)` for an even turn and `set(jni, false)` for an
/// odd one, until the thread is stopped (`stacks::stop_thread`).
pub(super) fn start(
    agent: &'static Agent,
    name: &'static str,
    slot: &mut Option<Running>,
    mut set: impl FnMut(Jni<'_>, bool) + Send + 'static,
) -> Result<(), String> {
    let turn_ns = turn_ms(std::env::var(DUTY_ENV).ok().as_deref()) * 1_000_000;
    start_thread(agent, name, slot, move |_, stop| {
        Ok(move |jni: Jni<'_>| {
            let (lock, cvar) = &*stop;
            let mut stopped = crate::sync::lock(lock);
            while !*stopped {
                let now = clock::monotonic_ns();
                let turn = now / turn_ns;
                set(jni, turn.is_multiple_of(2));
                let left = Duration::from_nanos((turn + 1) * turn_ns - now);
                stopped = match cvar.wait_timeout(stopped, left) {
                    Ok((g, _)) => g,
                    Err(p) => p.into_inner().0,
                };
            }
        })
    })
}

/// A turn's length in milliseconds from [`DUTY_ENV`]'s value.
fn turn_ms(value: Option<&str>) -> u64 {
    value
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&ms| ms > 0)
        .unwrap_or(DEFAULT_TURN_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_is_the_variable_s_milliseconds_or_two_seconds() {
        assert_eq!(turn_ms(Some("20")), 20);
        assert_eq!(turn_ms(Some(" 500 ")), 500);
        for bad in [None, Some(""), Some("0"), Some("-5"), Some("2s")] {
            assert_eq!(turn_ms(bad), DEFAULT_TURN_MS, "{bad:?}");
        }
    }
}
