//! Arnold and Grove's overlap of two profiles: with each method's share
//! of its profile's self time (or self samples), the sum over methods of
//! the smaller of its two shares. 100% for the same distribution, 0% for
//! profiles with no method in common.

use std::collections::BTreeMap;

use crate::profile::{Metric, Profile};

/// A method (`pkg.Class::method`) and its self weight in one profile.
pub type MethodShare = (String, f64);

/// The overlap of two profiles.
#[derive(Clone, Debug, PartialEq)]
pub struct Overlap {
    /// In percent, 0..=100.
    pub percent: f64,
    /// Every method of either profile with its share in each (0..1), the
    /// largest difference first (then by name).
    pub methods: Vec<(String, f64, f64)>,
}

/// The overlap of `a` and `b` (weights need not be normalised; methods
/// listed twice add up; negative and non-finite weights count as 0).
pub fn overlap(a: &[MethodShare], b: &[MethodShare]) -> Overlap {
    let shares = |v: &[MethodShare]| -> BTreeMap<String, f64> {
        let mut m: BTreeMap<String, f64> = BTreeMap::new();
        for (k, w) in v {
            let w = if w.is_finite() && *w > 0.0 { *w } else { 0.0 };
            *m.entry(k.clone()).or_default() += w;
        }
        let sum: f64 = m.values().sum();
        if sum > 0.0 {
            m.values_mut().for_each(|w| *w /= sum);
        }
        m
    };
    let (sa, sb) = (shares(a), shares(b));
    let mut keys: Vec<&String> = sa.keys().chain(sb.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut sum = 0.0;
    let mut methods = Vec::new();
    for k in keys {
        let x = sa.get(k).copied().unwrap_or(0.0);
        let y = sb.get(k).copied().unwrap_or(0.0);
        sum += x.min(y);
        methods.push((k.clone(), x, y));
    }
    methods.sort_by(|p, q| {
        (q.1 - q.2)
            .abs()
            .total_cmp(&(p.1 - p.2).abs())
            .then_with(|| p.0.cmp(&q.0))
    });
    Overlap {
        percent: (sum * 100.0).clamp(0.0, 100.0),
        methods,
    }
}

impl Profile {
    /// Each method's self time (`pkg.Class::method`, all threads; JDK-fold
    /// and truncation pseudo-frames included as named), for [`overlap`].
    pub fn method_self_shares(&self) -> Vec<MethodShare> {
        let mut out = Vec::new();
        for t in &self.threads {
            let w = self.weights(&t.tree, Metric::Time);
            for (i, n) in t.tree.nodes.iter().enumerate() {
                if let Some(x) = w.get(i)
                    && x.own > 0
                {
                    out.push((self.method(n.method).frame(), x.own as f64));
                }
            }
        }
        out
    }
}
