//! The calling context trees: nodes in an arena, per thread.

use super::latency::Latency;
use super::run::SampleCounts;

/// Index of a node inside a [`Tree`].
pub type NodeId = u32;

/// One calling context: a method reached through one path from a root.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Node {
    pub method: u32,
    /// Completed calls, including the ones closed artificially (`incomplete`).
    pub calls: u64,
    /// Measured ticks, summed over calls (exit minus entry timestamp).
    pub total_ticks: u64,
    /// Ticks of adjust-time (the profiler blocking the thread) inside these calls.
    pub adjust_ticks: u64,
    /// m: direct calls this node made (sum of its children's `calls`).
    pub child_calls: u64,
    /// Calls that never saw their exit (thread end, detach, lost events,
    /// mismatched exit): closed at the last known timestamp.
    pub incomplete: u64,
    /// The probe cost of those of these calls that ran after a calibration
    /// burst on their thread (the in-session calibration); the other calls
    /// are charged the session's calibration.
    pub recal: Recal,
    /// Children; every child index is greater than its parent's index.
    pub children: Vec<NodeId>,
    /// Sampled timing: samples that found the thread in this node's own
    /// code, and the sum of their weights in ticks (0 in exact mode).
    pub samples: u64,
    pub sampled_ticks: u64,
    /// Root nodes: the latency of each complete call (exit minus entry,
    /// minus the waits for the profiler inside, in exact mode minus the
    /// probe cost too); `None` on other nodes.
    pub latency: Option<Box<Latency>>,
    /// What the node's own code allocated (`--alloc`), by (site, level),
    /// sorted.
    pub allocs: Vec<Alloc>,
    /// A wait row of contended enters (`--locks`): who held the monitor
    /// when they began, by owner id, sorted; the waits whose owner was not
    /// read are not in it.
    pub owners: Vec<Owned>,
    /// The JVM's allocation samples taken while this node was the open
    /// frame (`--alloc-interval`): estimates of what its own code and the
    /// unprofiled code it called allocated, by class id, sorted.
    pub sampled_allocs: Vec<SampledAllocs>,
}

/// The contended enters of one wait row whose monitor one owner (thread
/// and context, `Profile::owners`) held: how many, and their ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Owned {
    pub owner: u32,
    pub count: u64,
    pub ticks: u64,
}

/// Adds `count` waits of `ticks` held by `owner` to a sorted list.
pub fn add_owned(v: &mut Vec<Owned>, owner: u32, count: u64, ticks: u64) {
    match v.binary_search_by_key(&owner, |o| o.owner) {
        Ok(i) => {
            v[i].count = v[i].count.saturating_add(count);
            v[i].ticks = v[i].ticks.saturating_add(ticks);
        }
        Err(i) => v.insert(
            i,
            Owned {
                owner,
                count,
                ticks,
            },
        ),
    }
}

/// The allocation samples of one class on one node: estimates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct SampledAllocs {
    /// A class id the profile names (`Profile::sampled_classes`).
    pub class: u32,
    pub samples: u64,
    /// The bytes of allocation the samples stand for.
    pub bytes_est: u64,
    /// Of them, the samples whose allocating frame was a method the
    /// probes record (an allocation site the exact count sees too), and
    /// the bytes they stand for.
    pub probed_samples: u64,
    pub probed_bytes_est: u64,
}

/// Objects one node allocated at one site and level: `level` dimensions
/// into the site's type (0 for the object or outermost array, 1.. for the
/// inner arrays of a `multianewarray`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Alloc {
    pub site: u32,
    pub level: u8,
    pub count: u64,
    pub bytes: u64,
}

impl Node {
    /// Whether this is a wait's row (`--locks`), not a method's: its
    /// `calls` count waits, `total_ticks` their length.
    pub fn is_wait(&self) -> bool {
        sprig_wire::wait_row(self.method).is_some()
    }
}

/// Units of [`Recal::inner`] and [`Recal::outer`] per clock tick.
pub const RECAL_UNIT: u64 = 256;

/// In-session probe cost of a node's calls, in 1/[`RECAL_UNIT`] ticks:
/// each call closed after its thread had measured the probes in a burst
/// adds that thread's current t_I and t_O.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Recal {
    /// Calls charged this way (at most the node's `calls`).
    pub calls: u64,
    /// Sum of t_I over those calls: taken out of the node's own time.
    pub inner: u64,
    /// Sum of t_O over those calls: taken out of the caller's own time.
    pub outer: u64,
}

impl Recal {
    pub fn add(&mut self, o: &Recal) {
        self.calls = self.calls.saturating_add(o.calls);
        self.inner = self.inner.saturating_add(o.inner);
        self.outer = self.outer.saturating_add(o.outer);
    }
}

/// A thread's calibration bursts (see `sprig_wire::event::CALIBRATION_EMPTY_ID`):
/// how many were used and the probe pair (t_I + t_O) they measured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bursts {
    /// Bursts whose figures were used.
    pub used: u64,
    /// Bursts left out: disturbed (a wait, an unexpected event), too short,
    /// or measuring a pair under half or over four times the session's
    /// calibration (a first burst running in the interpreter).
    pub rejected: u64,
    /// The pair over the used bursts, in picoseconds.
    pub min_pair_ps: u64,
    pub median_pair_ps: u64,
    pub max_pair_ps: u64,
}

/// A forest of calling contexts stored in an arena.
///
/// Invariant (kept by every constructor in this crate): a child's index is
/// greater than its parent's, and each node has at most one parent. Walks
/// rely on it to work without recursion and skip children that break it, so
/// a hand-built tree that does not keep it gives odd numbers, never a panic
/// or an endless loop.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tree {
    pub nodes: Vec<Node>,
    pub roots: Vec<NodeId>,
}

impl Tree {
    /// Adds a node (as a root when `parent` is `None`) and returns its index.
    /// Does not update `child_calls`: call [`Tree::recount`] once done.
    pub fn push(&mut self, parent: Option<NodeId>, node: Node) -> NodeId {
        let id = self.nodes.len() as NodeId;
        self.nodes.push(node);
        match parent {
            Some(p) => {
                if let Some(parent) = self.nodes.get_mut(p as usize) {
                    parent.children.push(id);
                }
            }
            None => self.roots.push(id),
        }
        id
    }

    /// Recomputes `child_calls` of every node from its children (a wait's
    /// row is no call: no probe ran for it).
    pub fn recount(&mut self) {
        for i in 0..self.nodes.len() {
            let m = self.nodes[i]
                .children
                .iter()
                .filter_map(|&c| self.nodes.get(c as usize))
                .filter(|c| !c.is_wait())
                .map(|c| c.calls)
                .fold(0u64, u64::saturating_add);
            self.nodes[i].child_calls = m;
        }
    }

    /// Parent of each node (`None` for roots and for nodes only reachable
    /// through links that break the invariant).
    pub fn parents(&self) -> Vec<Option<NodeId>> {
        let mut parents = vec![None; self.nodes.len()];
        for (i, n) in self.nodes.iter().enumerate() {
            for &c in n.children.iter().filter(|&&c| c as usize > i) {
                if let Some(p) = parents.get_mut(c as usize) {
                    *p = Some(i as NodeId);
                }
            }
        }
        parents
    }

    /// Depth of each node, roots at 0.
    pub fn depths(&self) -> Vec<usize> {
        let mut depth = vec![0usize; self.nodes.len()];
        for i in 0..self.nodes.len() {
            let d = depth[i] + 1;
            for &c in self.nodes[i].children.iter().filter(|&&c| c as usize > i) {
                if let Some(x) = depth.get_mut(c as usize) {
                    *x = d;
                }
            }
        }
        depth
    }
}

/// One profiled thread.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadProfile {
    /// sprig's thread index (the ring segment).
    pub index: u32,
    /// `java.lang.Thread.getId()`, 0 when unknown.
    pub java_id: u64,
    pub name: String,
    pub tree: Tree,
    pub bursts: Bursts,
    /// Sampled timing: what became of this thread's samples.
    pub samples: SampleCounts,
    /// How many virtual threads this profile stands for: 0 for a platform
    /// thread, 1 for one virtual thread, N for N merged into one tree
    /// ([`crate::profile::Profile::group_virtual`]).
    pub virtual_threads: u64,
}

impl ThreadProfile {
    /// The thread's name, or `thread-<index>` when the agent gave none.
    pub fn display_name(&self) -> String {
        if self.name.is_empty() {
            format!("thread-{}", self.index)
        } else {
            self.name.clone()
        }
    }
}

/// Thread index used by [`Profile::merged`].
pub const MERGED_THREAD: u32 = u32::MAX;
