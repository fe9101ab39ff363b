//! Allocations (`--alloc`): what each calling context allocated, exactly,
//! counted by the allocation probes inside root contexts. A node keeps its
//! allocations per (site, level); the profile names each site (the method
//! and bytecode offset of the allocation instruction, the type it
//! allocates), so a node's allocations read by class and the hot-spot
//! table by site and class.

use super::Profile;
use super::tree::{Alloc, Node, SampledAllocs};

/// An allocation instruction of a profiled method.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllocSite {
    /// The method id it is in.
    pub method: u32,
    /// Its bytecode offset.
    pub bci: u32,
    /// The type it allocates, as a field descriptor (`Lpkg/C;`, `[I`).
    pub descriptor: String,
    /// Dimensions a `multianewarray` creates (1 for other arrays, 0 for
    /// objects).
    pub dims: u8,
}

/// One class's allocations (a node's, or a site's).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClassAllocs {
    /// The Java source name: `int[]`, `java.lang.String`, `pkg.Outer$Inner`.
    pub class: String,
    pub count: u64,
    pub bytes: u64,
    /// The heap sampler's view of the same class on the same node, when
    /// the profile has allocation samples to gauge it by
    /// ([`Profile::node_allocs_physical`]).
    pub physical: Option<Physical>,
}

/// What the JVM's heap sampler saw of a node's exact allocations of one
/// class: the logical allocations (the probes' count) against the
/// physical ones (the samples of that class taken while the node was the
/// open frame and at a probed method, the node's own sites, when the
/// profile tells them apart: [`Profile::probed_split`]). Where the exact bytes should have drawn many samples and
/// the estimate is far below them, the JIT likely removed the allocation
/// (escape analysis, scalar replacement): an inference from two
/// measurements, not something the JVM reports.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Physical {
    /// The samples of the class on the node, and the bytes they stand for.
    pub samples: u64,
    pub bytes_est: u64,
    /// The fewest samples the exact objects would have drawn had they all
    /// been allocated on the heap (from the interval's upper bound,
    /// [`Profile::sampling_gauge`]).
    pub expected_samples: f64,
    /// `expected_samples` is at least [`SCALAR_MIN_EXPECTED`] and the
    /// estimate is under [`SCALAR_MAX_SHARE`] of the exact bytes.
    pub likely_scalar_replaced: bool,
}

/// The samples the exact allocations must have been expected to draw
/// before their absence means anything: with 20 expected, a heap
/// allocation's estimate falls under a tenth of its bytes (2 samples or
/// fewer) with a chance under one in a million.
pub const SCALAR_MIN_EXPECTED: f64 = 20.0;
/// The share of the exact bytes under which the sampled estimate counts
/// as ~0.
pub const SCALAR_MAX_SHARE: f64 = 0.1;

/// Adds `count` objects of `bytes` at (`site`, `level`) to a node's list,
/// kept sorted by (site, level).
pub fn add_alloc(list: &mut Vec<Alloc>, site: u32, level: u8, count: u64, bytes: u64) {
    match list.binary_search_by_key(&(site, level), |a| (a.site, a.level)) {
        Ok(i) => {
            let a = &mut list[i];
            a.count = a.count.saturating_add(count);
            a.bytes = a.bytes.saturating_add(bytes);
        }
        Err(i) => list.insert(
            i,
            Alloc {
                site,
                level,
                count,
                bytes,
            },
        ),
    }
}

/// Adds `add`'s samples to a node's sampled list, kept sorted by class.
pub fn add_sampled(list: &mut Vec<SampledAllocs>, add: SampledAllocs) {
    match list.binary_search_by_key(&add.class, |a| a.class) {
        Ok(i) => {
            let a = &mut list[i];
            a.samples = a.samples.saturating_add(add.samples);
            a.bytes_est = a.bytes_est.saturating_add(add.bytes_est);
            a.probed_samples = a.probed_samples.saturating_add(add.probed_samples);
            a.probed_bytes_est = a.probed_bytes_est.saturating_add(add.probed_bytes_est);
        }
        Err(i) => list.insert(i, add),
    }
}

/// One class's allocation samples on a node: estimates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassSampled {
    /// The Java source name.
    pub class: String,
    pub samples: u64,
    pub bytes_est: u64,
    /// Of them, those at a probed method (`SampledAllocs::probed_samples`).
    pub probed_samples: u64,
    pub probed_bytes_est: u64,
}

/// The Java source name of a field descriptor with `level` leading `[`
/// taken off: `[I` is `int[]`, `[[Ljava/lang/String;` at level 1
/// `java.lang.String[]`, `Lpkg/Outer$Inner;` `pkg.Outer$Inner`. A
/// descriptor it cannot read is given back as it is.
pub fn java_type_name(descriptor: &str, level: u8) -> String {
    let mut d = descriptor;
    for _ in 0..level {
        match d.strip_prefix('[') {
            Some(rest) => d = rest,
            None => return descriptor.to_owned(),
        }
    }
    let dims = d.len() - d.trim_start_matches('[').len();
    let elem = &d[dims..];
    let base = match elem {
        "Z" => "boolean".to_owned(),
        "B" => "byte".to_owned(),
        "C" => "char".to_owned(),
        "S" => "short".to_owned(),
        "I" => "int".to_owned(),
        "J" => "long".to_owned(),
        "F" => "float".to_owned(),
        "D" => "double".to_owned(),
        _ => match elem.strip_prefix('L').and_then(|e| e.strip_suffix(';')) {
            Some(name) => name.replace('/', "."),
            None => return descriptor.to_owned(),
        },
    };
    format!("{base}{}", "[]".repeat(dims))
}

impl Profile {
    /// The class of the objects at (`site`, `level`), as Java source names
    /// it; `?` for a site the profile does not know.
    pub fn alloc_class(&self, site: u32, level: u8) -> String {
        match self.alloc_sites.get(&site) {
            Some(s) => java_type_name(&s.descriptor, level),
            None => format!("?site{site}"),
        }
    }

    /// A node's allocations by class, most bytes first (ties by name).
    pub fn node_allocs(&self, node: &Node) -> Vec<ClassAllocs> {
        let mut by: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
        for a in &node.allocs {
            let e = by.entry(self.alloc_class(a.site, a.level)).or_default();
            e.0 = e.0.saturating_add(a.count);
            e.1 = e.1.saturating_add(a.bytes);
        }
        let mut v: Vec<ClassAllocs> = by
            .into_iter()
            .map(|(class, (count, bytes))| ClassAllocs {
                class,
                count,
                bytes,
                physical: None,
            })
            .collect();
        v.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.class.cmp(&b.class)));
        v
    }

    /// An upper bound of the heap sampler's interval, in bytes, read from
    /// the samples themselves: each sample stands for at least the
    /// interval (`size / (1 - exp(-size / interval))`), so no node's
    /// bytes per sample of a class is below it, and one of small objects
    /// is close to it. `None` when the profile has no allocation sample
    /// (no sampling, or nothing to gauge by).
    pub fn sampling_gauge(&self) -> Option<u64> {
        let mut min: Option<u64> = None;
        let mut see = |samples: u64, bytes_est: u64| {
            if samples > 0 && bytes_est > 0 {
                let per = bytes_est / samples;
                min = Some(min.map_or(per, |m| m.min(per)));
            }
        };
        for t in &self.threads {
            for n in &t.tree.nodes {
                for a in &n.sampled_allocs {
                    see(a.samples, a.bytes_est);
                }
            }
        }
        if let Some((samples, bytes_est)) = self.sampled_outside {
            see(samples, bytes_est);
        }
        min
    }

    /// [`Self::node_allocs`] with each class's [`Physical`] view when
    /// `gauge` ([`Self::sampling_gauge`]) is known.
    pub fn node_allocs_physical(&self, node: &Node, gauge: Option<u64>) -> Vec<ClassAllocs> {
        let mut v = self.node_allocs(node);
        let Some(gauge) = gauge.filter(|&g| g > 0) else {
            return v;
        };
        let sampled = self.node_sampled(node);
        for a in &mut v {
            // The samples of the node's own allocation sites: not those of
            // the same class allocated below it, in code without probes
            // (a `Throwable`'s backtrace holds an `int[]` and a `long[]`).
            let (samples, bytes_est) =
                sampled
                    .iter()
                    .find(|s| s.class == a.class)
                    .map_or((0, 0), |s| match self.probed_split {
                        true => (s.probed_samples, s.probed_bytes_est),
                        false => (s.samples, s.bytes_est),
                    });
            a.physical = Some(physical(a.count, a.bytes, samples, bytes_est, gauge));
        }
        v
    }

    /// The Java source name of a sampled class id; `?classN` for one the
    /// profile does not know.
    pub fn sampled_class(&self, id: u32) -> String {
        match self.sampled_classes.get(&id) {
            Some(sig) => java_type_name(sig, 0),
            None => format!("?class{id}"),
        }
    }

    /// A node's allocation samples by class, most bytes first (ties by
    /// name).
    pub fn node_sampled(&self, node: &Node) -> Vec<ClassSampled> {
        let mut by: std::collections::BTreeMap<String, [u64; 4]> = Default::default();
        for a in &node.sampled_allocs {
            let e = by.entry(self.sampled_class(a.class)).or_default();
            let add = [a.samples, a.bytes_est, a.probed_samples, a.probed_bytes_est];
            for (x, y) in e.iter_mut().zip(add) {
                *x = x.saturating_add(y);
            }
        }
        let mut v: Vec<ClassSampled> = by
            .into_iter()
            .map(
                |(class, [samples, bytes_est, probed_samples, probed_bytes_est])| ClassSampled {
                    class,
                    samples,
                    bytes_est,
                    probed_samples,
                    probed_bytes_est,
                },
            )
            .collect();
        v.sort_by(|a, b| {
            b.bytes_est
                .cmp(&a.bytes_est)
                .then_with(|| a.class.cmp(&b.class))
        });
        v
    }

    /// Whether any node of any thread holds allocation samples.
    pub fn has_sampled(&self) -> bool {
        self.threads
            .iter()
            .any(|t| t.tree.nodes.iter().any(|n| !n.sampled_allocs.is_empty()))
    }

    /// Whether any node of any thread allocated something.
    pub fn has_allocs(&self) -> bool {
        self.threads
            .iter()
            .any(|t| t.tree.nodes.iter().any(|n| !n.allocs.is_empty()))
    }
}

/// The heap sampler's view of `count` objects of `bytes` exactly
/// allocated, against `samples` standing for `bytes_est`, the interval at
/// most `gauge`: an object of size `s` is sampled with chance
/// `1 - exp(-s / interval)`, at least `1 - exp(-s / gauge)`.
pub fn physical(count: u64, bytes: u64, samples: u64, bytes_est: u64, gauge: u64) -> Physical {
    let expected_samples = if count == 0 || gauge == 0 {
        0.0
    } else {
        let size = bytes as f64 / count as f64;
        count as f64 * -(-size / gauge as f64).exp_m1()
    };
    Physical {
        samples,
        bytes_est,
        expected_samples,
        likely_scalar_replaced: expected_samples >= SCALAR_MIN_EXPECTED
            && (bytes_est as f64) < bytes as f64 * SCALAR_MAX_SHARE,
    }
}

/// The bytes a node's allocation samples stand for.
pub fn own_sampled(node: &Node) -> u64 {
    node.sampled_allocs
        .iter()
        .fold(0u64, |b, a| b.saturating_add(a.bytes_est))
}

/// Objects and bytes a node allocated itself.
pub fn own_allocs(node: &Node) -> (u64, u64) {
    node.allocs.iter().fold((0u64, 0u64), |(c, b), a| {
        (c.saturating_add(a.count), b.saturating_add(a.bytes))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_read_as_java_source_names() {
        assert_eq!(java_type_name("[I", 0), "int[]");
        assert_eq!(java_type_name("[[J", 0), "long[][]");
        assert_eq!(java_type_name("[[J", 1), "long[]");
        assert_eq!(java_type_name("Ljava/lang/String;", 0), "java.lang.String");
        assert_eq!(java_type_name("[Lpkg/Outer$Inner;", 0), "pkg.Outer$Inner[]");
        assert_eq!(java_type_name("[[[Lp/C;", 2), "p.C[]");
        assert_eq!(java_type_name("[Z", 0), "boolean[]");
        // More levels than dimensions, or no descriptor at all: as given.
        assert_eq!(java_type_name("[I", 2), "[I");
        assert_eq!(java_type_name("junk", 0), "junk");
    }

    #[test]
    fn exact_objects_the_sampler_should_have_seen_and_did_not_are_marked() {
        // 1,000,000 objects of 24 bytes, samples every 16 KiB: about
        // 1,464 samples expected had they been on the heap.
        let seen_none = physical(1_000_000, 24_000_000, 0, 0, 16_384);
        assert!(
            (seen_none.expected_samples - 1463.8).abs() < 0.5,
            "{seen_none:?}"
        );
        assert!(seen_none.likely_scalar_replaced);
        // A few samples (the interpreter's and C1's allocations before C2)
        // under a tenth: still marked.
        assert!(physical(1_000_000, 24_000_000, 100, 1_640_000, 16_384).likely_scalar_replaced);
        // Sampled near the exact bytes: allocated for real.
        let heap = physical(1_000_000, 24_000_000, 1_430, 23_440_000, 16_384);
        assert!(!heap.likely_scalar_replaced, "{heap:?}");
        // A tenth or more: not marked.
        assert!(!physical(1_000_000, 24_000_000, 147, 2_400_000, 16_384).likely_scalar_replaced);
        // Too few bytes to expect 20 samples: nothing said, even at 0.
        let few = physical(10_000, 240_000, 0, 0, 16_384);
        assert!(few.expected_samples < SCALAR_MIN_EXPECTED, "{few:?}");
        assert!(!few.likely_scalar_replaced);
        // Objects larger than the interval draw fewer samples than bytes
        // over the interval: 19 objects of 4 intervals each expect ~18.7.
        assert!(!physical(19, 19 * 65_536, 0, 0, 16_384).likely_scalar_replaced);
        assert!(physical(21, 21 * 65_536, 0, 0, 16_384).likely_scalar_replaced);
    }

    #[test]
    fn a_nodes_list_stays_sorted_and_adds_up() {
        let mut v = Vec::new();
        add_alloc(&mut v, 5, 0, 1, 16);
        add_alloc(&mut v, 2, 1, 3, 48);
        add_alloc(&mut v, 5, 0, 2, 32);
        add_alloc(&mut v, 2, 0, 1, 24);
        let keys: Vec<_> = v
            .iter()
            .map(|a| (a.site, a.level, a.count, a.bytes))
            .collect();
        assert_eq!(keys, vec![(2, 0, 1, 24), (2, 1, 3, 48), (5, 0, 3, 48)]);
    }
}
