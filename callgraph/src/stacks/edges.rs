//! Call-edge frequencies from the agent's bursts (`sprig sample --edges`;
//! Arnold and Grove's timer-triggered bursts of sampling at method entry).
//!
//! Every burst samples the next method entries into the probed classes
//! after its timer fired, each one edge (caller, callee), and measures
//! the time those entries took to happen (less what recording them cost).
//! Over the run, each sampled entry stands for `1 / effective_s` calls a
//! second, so an edge's calls per second are estimated as
//!
//! ```text
//! calls_per_s_est(edge) = samples(edge) / effective_s
//! ```
//!
//! (the entries that were sampled but could not be named are left out
//! of the edges and of nothing else). The estimate is of the calls into
//! the probed classes while the bursts ran; a method called only in
//! moments the bursts never fall into is missed, as with any sampling.
//!
//! Methods are named `pkg.Class::method` (overloads together), as
//! `--root` takes them, so edges compare with `sprig profile`'s exact
//! parent-child counts ([`exact_edges`]) by Arnold and Grove's overlap
//! ([`edge_overlap`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use sprig_wire::control::{EdgeMethod, EdgeSamples};

use crate::profile::Profile;

/// `pkg.Class::method`.
pub fn edge_name(m: &EdgeMethod) -> String {
    format!("{}::{}", m.class, m.name)
}

/// The call edges sampled over a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EdgeProfile {
    /// (caller, callee) -> sampled entries.
    pub edges: BTreeMap<(String, String), u64>,
    pub bursts: u64,
    /// Entries sampled (named or not).
    pub samples: u64,
    pub effective_ns: u64,
    pub cost_ns: u64,
    pub dropped: u64,
    /// Classes and methods that held the dormant probes.
    pub classes: u32,
    pub methods: u32,
    /// Whether the agent said it probed them (`EdgeProbed`).
    pub probed: bool,
}

/// One edge of the report.
#[derive(Clone, Debug, PartialEq)]
pub struct EdgeRow {
    pub caller: String,
    pub callee: String,
    pub samples: u64,
    pub calls_per_s_est: f64,
}

impl EdgeProfile {
    /// Adds one `EdgeSamples` message.
    pub fn add(&mut self, m: &EdgeSamples) {
        self.bursts += u64::from(m.bursts);
        self.samples += m.samples;
        self.effective_ns += m.effective_ns;
        self.cost_ns += m.cost_ns;
        self.dropped += m.dropped;
        for e in &m.edges {
            *self
                .edges
                .entry((edge_name(&e.caller), edge_name(&e.callee)))
                .or_default() += u64::from(e.samples);
        }
    }

    /// Sampled entries that name an edge.
    pub fn named(&self) -> u64 {
        self.edges.values().sum()
    }

    /// Calls per second one sampled entry stands for; `None` before any
    /// burst's time was measured.
    pub fn calls_per_sample_per_s(&self) -> Option<f64> {
        (self.effective_ns > 0).then_some(1e9 / self.effective_ns.max(1) as f64)
    }

    /// The edges, most sampled first (then by name).
    pub fn rows(&self) -> Vec<EdgeRow> {
        let k = self.calls_per_sample_per_s().unwrap_or(0.0);
        let mut rows: Vec<EdgeRow> = self
            .edges
            .iter()
            .map(|((a, b), &n)| EdgeRow {
                caller: a.clone(),
                callee: b.clone(),
                samples: n,
                calls_per_s_est: n as f64 * k,
            })
            .collect();
        rows.sort_by(|x, y| {
            y.samples
                .cmp(&x.samples)
                .then_with(|| x.caller.cmp(&y.caller))
                .then_with(|| x.callee.cmp(&y.callee))
        });
        rows
    }

    /// Each edge's share of the named samples.
    pub fn shares(&self) -> HashMap<(String, String), f64> {
        shares_of(&self.edges)
    }

    /// Estimated calls per second at and below `root` (`pkg.Class::method`):
    /// the calls into `root` and along every edge out of a method the
    /// edges reach from it (a method reached also from elsewhere counts
    /// whole: an upper side of the calls below the root, where the
    /// activations were a lower bound). `None` when no edge names `root`.
    pub fn calls_per_s_under(&self, root: &str) -> Option<f64> {
        let k = self.calls_per_sample_per_s()?;
        if !self.edges.keys().any(|(a, b)| a == root || b == root) {
            return None;
        }
        let mut reach: BTreeSet<&str> = BTreeSet::new();
        reach.insert(root);
        let mut frontier = vec![root];
        while let Some(m) = frontier.pop() {
            for (a, b) in self.edges.keys() {
                if a == m && reach.insert(b.as_str()) {
                    frontier.push(b.as_str());
                }
            }
        }
        let n: u64 = self
            .edges
            .iter()
            .filter(|((a, b), _)| b == root || reach.contains(a.as_str()))
            .map(|(_, &n)| n)
            .sum();
        Some(n as f64 * k)
    }
}

fn shares_of(edges: &BTreeMap<(String, String), u64>) -> HashMap<(String, String), f64> {
    let all: u64 = edges.values().sum();
    if all == 0 {
        return HashMap::new();
    }
    edges
        .iter()
        .map(|(k, &n)| (k.clone(), n as f64 / all as f64))
        .collect()
}

/// The exact call edges of a profile (`sprig profile`'s calling context
/// trees): every parent-child pair of nodes, the child's calls, summed by
/// (caller, callee) method name, over every thread. A root's own calls
/// have no caller in the tree and are left out.
pub fn exact_edges(p: &Profile) -> BTreeMap<(String, String), u64> {
    let mut out: BTreeMap<(String, String), u64> = BTreeMap::new();
    let name = |id: u32| {
        let m = p.method(id);
        format!("{}::{}", m.class, m.name)
    };
    for t in &p.threads {
        for n in &t.tree.nodes {
            if n.is_wait() {
                continue;
            }
            for &c in &n.children {
                let Some(child) = t.tree.nodes.get(c as usize) else {
                    continue;
                };
                if child.calls == 0 || child.is_wait() {
                    continue;
                }
                *out.entry((name(n.method), name(child.method))).or_default() += child.calls;
            }
        }
    }
    out
}

/// Arnold and Grove's overlap of two edge profiles: Σ over edges of
/// min(share in `a`, share in `b`), 0..1.
pub fn edge_overlap(
    a: &BTreeMap<(String, String), u64>,
    b: &BTreeMap<(String, String), u64>,
) -> f64 {
    let (sa, sb) = (shares_of(a), shares_of(b));
    sa.iter()
        .map(|(k, &x)| sb.get(k).map_or(0.0, |&y| x.min(y)))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sprig_wire::control::EdgeCount;

    fn m(name: &str) -> EdgeMethod {
        EdgeMethod {
            class: "p.C".into(),
            name: name.into(),
            descriptor: "()V".into(),
        }
    }

    fn e(a: &str, b: &str, samples: u32) -> EdgeCount {
        EdgeCount {
            caller: m(a),
            callee: m(b),
            samples,
        }
    }

    #[test]
    fn rates_follow_the_bursts_effective_time_and_the_reach_of_a_root() {
        let mut p = EdgeProfile::default();
        // Two messages: 40 sampled entries over 2 ms of effective time.
        p.add(&EdgeSamples {
            bursts: 1,
            samples: 20,
            effective_ns: 1_000_000,
            cost_ns: 5,
            dropped: 0,
            edges: vec![e("r", "a", 5), e("a", "b", 15)],
        });
        p.add(&EdgeSamples {
            bursts: 1,
            samples: 20,
            effective_ns: 1_000_000,
            cost_ns: 5,
            dropped: 0,
            edges: vec![e("r", "a", 5), e("a", "b", 10), e("x", "y", 5)],
        });
        assert_eq!(p.named(), 40);
        let rows = p.rows();
        assert_eq!(
            (rows[0].caller.as_str(), rows[0].callee.as_str()),
            ("p.C::a", "p.C::b")
        );
        // 25 samples over 2 ms: 12,500 calls a second.
        assert!((rows[0].calls_per_s_est - 12_500.0).abs() < 1e-6);
        // Below a: a's 10 entries and its 25 calls of b.
        assert!((p.calls_per_s_under("p.C::a").unwrap() - 17_500.0).abs() < 1e-6);
        // Below r: r's callers' edges into r (none) and everything r reaches.
        assert!((p.calls_per_s_under("p.C::r").unwrap() - 17_500.0).abs() < 1e-6);
        assert_eq!(p.calls_per_s_under("p.C::z"), None);
        let mut exact = BTreeMap::new();
        exact.insert(("p.C::a".to_owned(), "p.C::b".to_owned()), 50);
        exact.insert(("p.C::r".to_owned(), "p.C::a".to_owned()), 20);
        // Shares 25/40, 10/40, 5/40 against 50/70, 20/70.
        let o = edge_overlap(&p.edges, &exact);
        assert!((o - (25.0 / 40.0 + 10.0 / 40.0)).abs() < 1e-9, "{o}");
    }
}
