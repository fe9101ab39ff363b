//! Live objects (`--alloc=live`): what the tagged allocation samples that
//! the JVM has not freed stand for, per allocation context (the path of
//! method ids from the root to the node that was open) and class, after
//! each garbage collection and at the end. Every figure is an estimate:
//! a live sample counts the bytes (and objects) its allocation sample
//! stands for, scaled as the sampled bytes are.

use std::collections::BTreeMap;

/// Live bytes and objects of one context and class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct LiveFigures {
    /// The bytes the live samples stand for.
    pub bytes: u64,
    /// The objects the live samples stand for.
    pub objects: u64,
    /// Live samples.
    pub samples: u64,
}

impl LiveFigures {
    pub fn add(&mut self, o: &LiveFigures) {
        self.bytes = self.bytes.saturating_add(o.bytes);
        self.objects = self.objects.saturating_add(o.objects);
        self.samples = self.samples.saturating_add(o.samples);
    }

    pub fn sub(&mut self, o: &LiveFigures) {
        self.bytes = self.bytes.saturating_sub(o.bytes);
        self.objects = self.objects.saturating_sub(o.objects);
        self.samples = self.samples.saturating_sub(o.samples);
    }
}

/// One row: a context (index into [`LiveProfile::contexts`]), a class (a
/// sampled class id, `Profile::sampled_classes`) and its live figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LiveRow {
    pub context: u32,
    pub class: u32,
    pub live: LiveFigures,
}

/// The live objects after one garbage collection.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LiveGc {
    /// Collections finished in the session when this was taken.
    pub gc: u64,
    /// Every row, summed.
    pub total: LiveFigures,
    /// Rows with live bytes, most bytes first.
    pub rows: Vec<LiveRow>,
}

/// The live objects of a session.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LiveProfile {
    /// Allocation contexts: each a path of method ids, root first.
    pub contexts: Vec<Vec<u32>>,
    /// After each garbage collection the CLI heard of, oldest first (the
    /// last [`MAX_SERIES`]).
    pub series: Vec<LiveGc>,
    /// At the end (or now, in a live view), most bytes first.
    pub now: LiveGc,
    /// Per node, (thread index, node id) -> live figures of every class.
    pub nodes: BTreeMap<(u32, u32), LiveFigures>,
    /// Frees the agent could not queue (their objects stay counted live).
    pub lost_frees: u64,
}

/// GC points kept in [`LiveProfile::series`].
pub const MAX_SERIES: usize = 64;

/// GC points the growth column looks back over.
pub const GROWTH_SPAN: usize = 3;

impl LiveProfile {
    /// The growth of one row's live bytes over the last [`GROWTH_SPAN`]
    /// garbage collections (from the point that many back, or the first,
    /// to now); `None` with fewer than two points.
    pub fn growth(&self, context: u32, class: u32) -> Option<i64> {
        let first = self.series.len().saturating_sub(GROWTH_SPAN + 1);
        let then = self.series.get(first)?;
        let bytes_at = |g: &LiveGc| {
            g.rows
                .iter()
                .find(|r| r.context == context && r.class == class)
                .map_or(0, |r| r.live.bytes)
        };
        let now = bytes_at(&self.now) as i64;
        Some(now - bytes_at(then) as i64)
    }
}
