//! Per-call latency of root methods in bounded memory: a log-linear
//! histogram (exact below 128 ticks, then 128 buckets per power of two)
//! with the exact count, sum, minimum and maximum beside it.
//!
//! A bucket holding `v >= 128` spans `[lo, lo + lo/128)` at most, and a
//! quantile reports the middle of its bucket, so a quantile is off by at
//! most 1/256 (0.4%) of its value, whatever the number of calls. A
//! histogram holds at most 7,424 buckets and only the ones used are stored.
//! Histograms add up bucket by bucket ([`Latency::merge`]): threads merged
//! in a view, or a snapshot re-read, give the same quantiles as one
//! histogram fed all the calls.

use std::collections::BTreeMap;

/// Bits of the sub-bucket index: 2^7 = 128 buckets per power of two.
const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS;
/// One past the largest bucket index (values up to `u64::MAX`).
pub const BUCKETS: u32 = ((64 - SUB_BITS + 1) as u64 * SUB) as u32;

/// The bucket of value `v`.
pub fn bucket_of(v: u64) -> u32 {
    if v < SUB {
        return v as u32;
    }
    let e = 63 - v.leading_zeros(); // >= SUB_BITS
    let sub = (v >> (e - SUB_BITS)) - SUB;
    ((e - SUB_BITS + 1) as u64 * SUB + sub) as u32
}

/// Lowest value of bucket `i` and its width.
pub fn bucket_bounds(i: u32) -> (u64, u64) {
    let i = u64::from(i);
    if i < SUB {
        return (i, 1);
    }
    let e = (i / SUB) as u32 + SUB_BITS - 1;
    let sub = i % SUB;
    let shift = e - SUB_BITS;
    ((SUB + sub) << shift, 1u64 << shift)
}

/// Latencies of the complete calls of one root node, in clock ticks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Latency {
    /// Calls recorded.
    pub count: u64,
    /// Sum of the recorded values (saturating).
    pub sum: u64,
    /// Smallest and largest value (0 when empty).
    pub min: u64,
    pub max: u64,
    /// Bucket index -> calls, only buckets with calls.
    buckets: BTreeMap<u32, u64>,
}

impl Latency {
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Adds one call of `v` ticks.
    pub fn record(&mut self, v: u64) {
        if self.count == 0 {
            self.min = v;
            self.max = v;
        } else {
            self.min = self.min.min(v);
            self.max = self.max.max(v);
        }
        self.count += 1;
        self.sum = self.sum.saturating_add(v);
        *self.buckets.entry(bucket_of(v)).or_insert(0) += 1;
    }

    /// Adds every call of `o`.
    pub fn merge(&mut self, o: &Latency) {
        if o.count == 0 {
            return;
        }
        if self.count == 0 {
            self.min = o.min;
            self.max = o.max;
        } else {
            self.min = self.min.min(o.min);
            self.max = self.max.max(o.max);
        }
        self.count = self.count.saturating_add(o.count);
        self.sum = self.sum.saturating_add(o.sum);
        for (&b, &n) in &o.buckets {
            let e = self.buckets.entry(b).or_insert(0);
            *e = e.saturating_add(n);
        }
    }

    /// The value below or at which a fraction `q` (0..=1) of the calls
    /// lie: the call of rank `ceil(q * count)` (at least 1), reported as
    /// the middle of its bucket and kept within `min..=max`. 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let q = if q.is_nan() { 0.0 } else { q.clamp(0.0, 1.0) };
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        if rank == 1 {
            return self.min;
        }
        if rank == self.count {
            return self.max;
        }
        let mut seen = 0u64;
        for (&b, &n) in &self.buckets {
            seen = seen.saturating_add(n);
            if seen >= rank {
                let (lo, width) = bucket_bounds(b);
                let mid = lo.saturating_add(width / 2);
                return mid.clamp(self.min, self.max);
            }
        }
        self.max
    }

    /// The used buckets, ascending: (bucket index, calls).
    pub fn buckets(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.buckets.iter().map(|(&b, &n)| (b, n))
    }

    /// Rebuilds a histogram from its parts (a snapshot); `None` when they
    /// do not fit together (bucket out of range, counts that do not add up
    /// to `count`, a minimum above the maximum or outside its bucket).
    pub fn from_parts(
        count: u64,
        sum: u64,
        min: u64,
        max: u64,
        buckets: impl IntoIterator<Item = (u32, u64)>,
    ) -> Option<Latency> {
        let mut l = Latency {
            count,
            sum,
            min,
            max,
            buckets: BTreeMap::new(),
        };
        let mut total = 0u64;
        for (b, n) in buckets {
            if b >= BUCKETS || n == 0 || l.buckets.insert(b, n).is_some() {
                return None;
            }
            total = total.checked_add(n)?;
        }
        if total != count {
            return None;
        }
        if count > 0 {
            let first = *l.buckets.keys().next()?;
            let last = *l.buckets.keys().next_back()?;
            if min > max || bucket_of(min) != first || bucket_of(max) != last {
                return None;
            }
        } else if min != 0 || max != 0 || sum != 0 {
            return None;
        }
        Some(l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_range_with_bounded_width() {
        let mut expect_lo = 0u64;
        for i in 0..BUCKETS {
            let (lo, w) = bucket_bounds(i);
            assert_eq!(lo, expect_lo, "bucket {i}");
            assert_eq!(bucket_of(lo), i);
            assert_eq!(bucket_of(lo + (w - 1)), i);
            // width at most lo/128 above the exact range
            if lo >= SUB {
                assert!(w * SUB <= lo, "bucket {i}: {lo} + {w}");
            }
            expect_lo = lo.wrapping_add(w);
        }
        assert_eq!(expect_lo, 0, "the last bucket ends at 2^64");
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    /// The brute-force quantile: the value of rank ceil(q * n).
    fn exact(sorted: &[u64], q: f64) -> u64 {
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1]
    }

    fn values(seed: u64, n: usize) -> Vec<u64> {
        // a spread of magnitudes: xorshift, then a random shift
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 20) >> (x % 40)
            })
            .collect()
    }

    #[test]
    fn quantiles_within_half_a_percent_of_brute_force() {
        for seed in [1u64, 7, 99, 12345] {
            for n in [1usize, 2, 3, 10, 1000, 20_000] {
                let v = values(seed, n);
                let mut h = Latency::default();
                for &x in &v {
                    h.record(x);
                }
                let mut s = v.clone();
                s.sort_unstable();
                assert_eq!(h.count, n as u64);
                assert_eq!(h.min, s[0]);
                assert_eq!(h.max, s[n - 1]);
                assert_eq!(h.sum, s.iter().sum::<u64>());
                for q in [0.0, 0.01, 0.5, 0.9, 0.99, 0.999, 1.0] {
                    let (got, want) = (h.quantile(q), exact(&s, q));
                    let err = got.abs_diff(want) as f64;
                    assert!(
                        err <= want as f64 / 256.0 + 0.5,
                        "seed {seed} n {n} q {q}: {got} vs {want}"
                    );
                }
            }
        }
        assert_eq!(Latency::default().quantile(0.5), 0);
    }

    #[test]
    fn merge_equals_one_histogram_of_everything() {
        let (a, b) = (values(3, 5000), values(5, 300));
        let (mut ha, mut hb, mut all) =
            (Latency::default(), Latency::default(), Latency::default());
        a.iter().for_each(|&x| ha.record(x));
        b.iter().for_each(|&x| hb.record(x));
        a.iter().chain(&b).for_each(|&x| all.record(x));
        let mut m = ha.clone();
        m.merge(&hb);
        assert_eq!(m, all);
        // merging into or from an empty histogram
        let mut e = Latency::default();
        e.merge(&ha);
        assert_eq!(e, ha);
        ha.merge(&Latency::default());
        assert_eq!(e, ha);
    }

    #[test]
    fn parts_round_trip_and_are_checked() {
        let mut h = Latency::default();
        for x in [5u64, 500, 5_000_000, 77] {
            h.record(x);
        }
        let back = Latency::from_parts(h.count, h.sum, h.min, h.max, h.buckets()).unwrap();
        assert_eq!(back, h);
        let b: Vec<_> = h.buckets().collect();
        assert!(Latency::from_parts(h.count + 1, h.sum, h.min, h.max, b.clone()).is_none());
        assert!(Latency::from_parts(h.count, h.sum, h.max, h.min, b.clone()).is_none());
        assert!(Latency::from_parts(1, 0, 0, 0, [(BUCKETS, 1)]).is_none());
        assert!(Latency::from_parts(2, 0, 3, 3, [(3, 1), (3, 1)]).is_none());
        assert_eq!(
            Latency::from_parts(0, 0, 0, 0, []),
            Some(Latency::default())
        );
    }
}
