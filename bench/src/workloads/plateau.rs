//! `--plateau`: windows of iterations until the JVM stops getting faster.

use super::iterate;
use crate::Ctx;
use crate::proc::Jvm;
use crate::stats::median;
use anyhow::Result;
use std::time::Duration;

/// Windows of five window medians compared by [`to_plateau`].
const PLATEAU_BLOCK: usize = 5;
/// At most this many windows in one [`to_plateau`].
const PLATEAU_MAX_WINDOWS: usize = 100;

/// With `--plateau`, runs windows of at least `k` iterations and at least
/// [`PLATEAU_WINDOW_MS`] until the JVM stops getting faster: the median of
/// the last [`PLATEAU_BLOCK`] window medians no more than 2% below the
/// median of the block before (at most [`PLATEAU_MAX_WINDOWS`] windows). A
/// single window's median moves by 5-15% from one to the next on this host
/// while the trend is far smaller, hence blocks; and windows of a few
/// iterations (`--quick`'s 6 of Jetty) made blocks so short that noise hid
/// the trend and the plateau was declared at 46 ms, far above 27-29.
/// Returns the iterations run (none without `--plateau`).
pub(super) fn to_plateau(ctx: &Ctx, jvm: &mut Jvm, k: usize, bound: Duration) -> Result<usize> {
    if !ctx.plateau {
        return Ok(0);
    }
    // One window of k first, to size the rest by the iteration time.
    let k0 = k.max(1);
    let first = median(&iterate(jvm, k0, bound)?);
    let k = k0.max((PLATEAU_WINDOW_MS / first.max(1e-3)).ceil() as usize);
    let mut medians = Vec::new();
    while medians.len() < PLATEAU_MAX_WINDOWS {
        medians.push(median(&iterate(jvm, k, bound)?));
        if plateau_reached(&medians) {
            break;
        }
    }
    Ok(k0 + medians.len() * k)
}

/// The shortest window [`to_plateau`] times, ms: about 40 Jetty iterations,
/// the window its recorded warm-up was read with.
const PLATEAU_WINDOW_MS: f64 = 1200.0;

/// Whether the last block of window medians is no more than 2% below the
/// block before it.
fn plateau_reached(medians: &[f64]) -> bool {
    let n = medians.len();
    if n < 2 * PLATEAU_BLOCK {
        return false;
    }
    let last = median(&medians[n - PLATEAU_BLOCK..]);
    let before = median(&medians[n - 2 * PLATEAU_BLOCK..n - PLATEAU_BLOCK]);
    last >= 0.98 * before
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plateau_is_two_blocks_of_windows_the_later_no_faster_by_2_pct() {
        // The warm-up of a Jetty JVM (window medians, ms, 2026-11-27).
        let jetty = [
            44.2, 36.8, 39.0, 38.7, 39.7, 39.4, 38.0, 32.6, 36.3, 33.0, 36.5, 31.8, 33.5, 30.6,
            29.6, 29.4, 27.4, 27.5, 27.6, 27.4, 26.8, 28.5, 27.5, 27.8, 28.6,
        ];
        let first = (1..=jetty.len()).find(|&n| plateau_reached(&jetty[..n]));
        assert_eq!(
            first,
            Some(24),
            "falling until the 20th window or so, flat from then on"
        );
        assert!(!plateau_reached(&jetty[..9]), "two whole blocks first");
        // Noise around a flat level is a plateau; a steady fall is not.
        let flat = [10.0, 11.0, 9.5, 10.4, 10.1, 9.8, 10.6, 9.9, 10.2, 10.3];
        assert!(plateau_reached(&flat));
        let falling: Vec<f64> = (0..10).map(|i| 20.0 - f64::from(i)).collect();
        assert!(!plateau_reached(&falling));
    }
}
