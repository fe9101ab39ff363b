//! The pacing of the session loop: how long it pauses between two polls
//! of the ring, from how fast the last poll saw it fill.

use std::time::Duration;

/// Pause between ring polls while the consumer keeps up. Each poll frees
/// the segments it read, and a producer that took one of those at once
/// wrote into lines still in this process's cache (measured 2026-11):
/// polling less often was the first cure found (a 2 ms pause left the
/// probe pair ~3 ns dearer than 10 or 20 ms, and 12-28 ns dearer for a
/// whole profiling session in 13 of 96). Producers now take the oldest
/// free segment instead, which cures it at 2 ms too; the longer pause
/// stays because it costs nothing: at the probes' fastest one thread
/// writes about 12 MiB of ring in 10 ms, and the pause shortens when the
/// ring would fill faster.
const POLL_PAUSE: Duration = Duration::from_millis(10);
/// The pause is shortened so that, at the rate the last poll saw, the
/// producers fill at most this share of the ring (1/4) before the next
/// poll: many busy threads would otherwise fill it and wait.
const FILL_SHARE_PER_PAUSE: f64 = 0.25;
/// Shortest pause: below it the consumer polls again at once.
const MIN_POLL_PAUSE: Duration = Duration::from_millis(1);

/// How long the consumer waits before its next poll, after a poll that
/// delivered `n` events `since` the one before, on a ring of
/// `ring_events` slots; `None` when it is behind and must poll at once
/// (the poll delivered an eighth of the ring or more, or the producers
/// would fill a quarter of it within [`MIN_POLL_PAUSE`]).
pub(super) fn next_pause(n: usize, since: Duration, ring_events: usize) -> Option<Duration> {
    if n >= ring_events.div_ceil(8) {
        return None;
    }
    if n == 0 || since.is_zero() {
        return Some(POLL_PAUSE);
    }
    let rate = n as f64 / since.as_secs_f64();
    let fill = Duration::from_secs_f64(ring_events as f64 * FILL_SHARE_PER_PAUSE / rate);
    let pause = fill.min(POLL_PAUSE);
    (pause >= MIN_POLL_PAUSE).then_some(pause)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RING: usize = 2_000_000;

    #[test]
    fn a_quiet_ring_is_read_every_poll_pause() {
        assert_eq!(
            next_pause(0, Duration::from_millis(10), RING),
            Some(POLL_PAUSE)
        );
        assert_eq!(next_pause(0, Duration::ZERO, RING), Some(POLL_PAUSE));
        // One busy thread: 720,000 events in 10 ms fill a quarter of the
        // ring in ~7 ms.
        assert_eq!(
            next_pause(100_000, Duration::from_millis(10), RING),
            Some(POLL_PAUSE)
        );
        let p = next_pause(200_000, Duration::from_millis(4), RING).expect("a pause");
        assert_eq!(p, Duration::from_millis(10));
        let p = next_pause(200_000, Duration::from_millis(2), RING).expect("a pause");
        assert!((p.as_secs_f64() - 0.005).abs() < 1e-9, "{p:?}");
    }

    #[test]
    fn a_consumer_behind_polls_again_at_once() {
        // An eighth of the ring in one poll.
        assert_eq!(next_pause(RING / 8, Duration::from_millis(10), RING), None);
        // A rate that fills a quarter of the ring in under 1 ms.
        assert_eq!(next_pause(200_000, Duration::from_micros(300), RING), None);
    }
}
