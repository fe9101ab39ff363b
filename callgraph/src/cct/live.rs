//! The builder's live objects (`--alloc=live`): each tagged allocation
//! sample (its record carries the object's JVMTI tag) is kept by tag with
//! its context and class until the agent says the JVM freed it
//! (`LiveFreed`); after each garbage collection (`LiveGc`) the live
//! figures per context and class are kept as one point of a short series.
//!
//! A free may reach the CLI before the record of its sample (the two come
//! by different ways: the control socket and the ring), so a free of a
//! tag not seen yet is remembered and the sample, when it comes, is not
//! counted live. A tag never recorded stays in that set, which holds only
//! frees, never bytes: it changes no figure.

use crate::profile::live::{LiveFigures, LiveGc, LiveProfile, LiveRow, MAX_SERIES};
use std::collections::{HashMap, HashSet};

/// One tagged sample still live.
#[derive(Clone, Copy, Debug)]
struct Object {
    thread: u32,
    /// The builder's node (arena index) of the thread.
    node: u32,
    context: u32,
    class: u32,
    live: LiveFigures,
}

/// A tagged sample as its thread's stream delivered it.
#[derive(Clone, Debug)]
pub(crate) struct Tagged {
    pub(crate) tag: u64,
    /// The builder's node (arena index) open when the sample was taken.
    pub(crate) node: u32,
    /// The path of method ids to that node, root first.
    pub(crate) path: Vec<u32>,
    pub(crate) class: u32,
    /// The sampled object's bytes.
    pub(crate) size: u32,
    /// The bytes the sample stands for.
    pub(crate) bytes_est: u64,
}

/// Live objects by tag, and the series of figures per garbage collection.
#[derive(Clone, Debug, Default)]
pub struct LiveTable {
    objects: HashMap<u64, Object>,
    /// Frees of tags not recorded (yet).
    early: HashSet<u64>,
    contexts: Vec<Vec<u32>>,
    by_path: HashMap<Vec<u32>, u32>,
    /// Live figures per (context, class).
    rows: HashMap<(u32, u32), LiveFigures>,
    series: Vec<LiveGc>,
    lost_frees: u64,
    /// Whether any tagged sample or live message came (a session without
    /// `--alloc=live` has no live profile).
    seen: bool,
}

impl LiveTable {
    /// A tagged sample of thread `thread`.
    pub(crate) fn record(&mut self, thread: u32, t: Tagged) {
        self.seen = true;
        if t.tag == 0 || self.early.remove(&t.tag) {
            return;
        }
        let context = match self.by_path.get(&t.path) {
            Some(&c) => c,
            None => {
                let c = self.contexts.len() as u32;
                self.contexts.push(t.path.clone());
                self.by_path.insert(t.path, c);
                c
            }
        };
        let objects = if t.size == 0 {
            1
        } else {
            (t.bytes_est as f64 / f64::from(t.size)).round().max(1.0) as u64
        };
        let live = LiveFigures {
            bytes: t.bytes_est,
            objects,
            samples: 1,
        };
        let o = Object {
            thread,
            node: t.node,
            context,
            class: t.class,
            live,
        };
        if let Some(old) = self.objects.insert(t.tag, o) {
            // A tag seen twice: the first object's figures go.
            self.remove_figures(&old);
        }
        self.rows.entry((context, t.class)).or_default().add(&live);
    }

    fn remove_figures(&mut self, o: &Object) {
        if let Some(r) = self.rows.get_mut(&(o.context, o.class)) {
            r.sub(&o.live);
            if r.samples == 0 {
                self.rows.remove(&(o.context, o.class));
            }
        }
    }

    /// The JVM freed the objects of `tags`.
    pub fn free(&mut self, tags: &[u64], lost: u64) {
        self.seen = true;
        self.lost_frees = self.lost_frees.saturating_add(lost);
        for &tag in tags {
            match self.objects.remove(&tag) {
                Some(o) => self.remove_figures(&o),
                None => {
                    self.early.insert(tag);
                }
            }
        }
    }

    /// Garbage collection `gc` finished: the figures now are one point.
    pub fn mark_gc(&mut self, gc: u64) {
        self.seen = true;
        let point = LiveGc {
            gc,
            ..self.rows_now()
        };
        if self.series.len() >= MAX_SERIES {
            self.series.remove(0);
        }
        self.series.push(point);
    }

    fn rows_now(&self) -> LiveGc {
        let mut rows: Vec<LiveRow> = self
            .rows
            .iter()
            .filter(|(_, l)| l.samples > 0)
            .map(|(&(context, class), &live)| LiveRow {
                context,
                class,
                live,
            })
            .collect();
        rows.sort_by(|a, b| {
            b.live
                .bytes
                .cmp(&a.live.bytes)
                .then(a.context.cmp(&b.context))
                .then(a.class.cmp(&b.class))
        });
        let mut total = LiveFigures::default();
        for r in &rows {
            total.add(&r.live);
        }
        LiveGc {
            gc: self.series.last().map_or(0, |g| g.gc),
            total,
            rows,
        }
    }

    /// Whether the session has live objects (a tagged sample or a live
    /// message came).
    pub(crate) fn is_on(&self) -> bool {
        self.seen
    }

    /// Live bytes now, every context summed.
    pub fn live_bytes(&self) -> u64 {
        self.rows.values().map(|l| l.bytes).sum()
    }

    /// The live profile, its node figures keyed by (thread index, node
    /// id) through `node_id` (builder node -> tree node of that thread);
    /// `None` when the session had no live objects.
    pub(crate) fn profile(&self, node_id: impl Fn(u32, u32) -> Option<u32>) -> Option<LiveProfile> {
        if !self.seen {
            return None;
        }
        let mut nodes = std::collections::BTreeMap::new();
        for o in self.objects.values() {
            if let Some(id) = node_id(o.thread, o.node) {
                nodes
                    .entry((o.thread, id))
                    .or_insert_with(LiveFigures::default)
                    .add(&o.live);
            }
        }
        Some(LiveProfile {
            contexts: self.contexts.clone(),
            series: self.series.clone(),
            now: self.rows_now(),
            nodes,
            lost_frees: self.lost_frees,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tagged(tag: u64, node: u32, path: &[u32], class: u32, bytes_est: u64) -> Tagged {
        Tagged {
            tag,
            node,
            path: path.to_vec(),
            class,
            size: 16,
            bytes_est,
        }
    }

    #[test]
    fn a_freed_tag_removes_its_bytes() {
        let mut t = LiveTable::default();
        t.record(1, tagged(10, 2, &[1, 2], 7, 1000));
        t.record(1, tagged(11, 2, &[1, 2], 7, 500));
        t.record(1, tagged(12, 3, &[1, 3], 8, 300));
        assert_eq!(t.live_bytes(), 1800);
        t.free(&[11], 0);
        assert_eq!(t.live_bytes(), 1300);
        t.mark_gc(1);
        t.free(&[12], 0);
        t.mark_gc(2);
        let p = t.profile(|_, n| Some(n)).unwrap();
        assert_eq!(p.series.len(), 2);
        assert_eq!(p.series[0].total.bytes, 1300);
        assert_eq!(p.series[1].total.bytes, 1000);
        assert_eq!(p.now.rows.len(), 1, "{:?}", p.now);
        let r = p.now.rows[0];
        assert_eq!(
            (p.contexts[r.context as usize].clone(), r.class),
            (vec![1, 2], 7)
        );
        assert_eq!(r.live.bytes, 1000);
        // 1000 bytes of 16-byte objects
        assert_eq!(r.live.objects, 63);
        assert_eq!(p.nodes.get(&(1, 2)).map(|l| l.bytes), Some(1000));
        assert_eq!(p.nodes.get(&(1, 3)), None);
    }

    #[test]
    fn unknown_tags_are_ignored() {
        let mut t = LiveTable::default();
        t.record(1, tagged(10, 2, &[1, 2], 7, 1000));
        t.free(&[99, 98], 0);
        assert_eq!(t.live_bytes(), 1000);
        // An untagged sample is not live.
        t.record(1, tagged(0, 2, &[1, 2], 7, 1000));
        assert_eq!(t.live_bytes(), 1000);
        t.record(1, tagged(20, 2, &[1, 2], 7, 100));
        assert_eq!(t.live_bytes(), 1100);
    }

    #[test]
    fn a_free_before_its_record_is_not_counted_live() {
        let mut t = LiveTable::default();
        t.free(&[5], 0);
        t.record(1, tagged(5, 2, &[1, 2], 7, 1000));
        assert_eq!(t.live_bytes(), 0);
        // Once: the same tag again (a later session's) counts.
        t.record(1, tagged(5, 2, &[1, 2], 7, 1000));
        assert_eq!(t.live_bytes(), 1000);
    }

    #[test]
    fn growth_looks_back_over_the_last_collections() {
        let mut t = LiveTable::default();
        for gc in 1..=6u64 {
            t.record(1, tagged(gc, 2, &[1, 2], 7, 100));
            t.mark_gc(gc);
        }
        let p = t.profile(|_, n| Some(n)).unwrap();
        let r = p.now.rows[0];
        assert_eq!(r.live.bytes, 600);
        // From the point 3 collections back (300 bytes) to now.
        assert_eq!(p.growth(r.context, r.class), Some(300));
    }

    #[test]
    fn no_live_profile_without_live_objects() {
        assert!(LiveTable::default().profile(|_, n| Some(n)).is_none());
    }
}
