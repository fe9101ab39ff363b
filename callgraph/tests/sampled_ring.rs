//! Sampled timing through a real ring: producers write sampled-mode
//! streams (inner events without time) into small segments, position sampling
//! reads `Region::positions` between pushes, the consumer's `poll_runs`
//! feeds `CctBuilder::process_run`. Every sample must land on the frame
//! its thread had open when the position was read.

use sprig_callgraph::{CctBuilder, PositionSample, Timing, Tree};
use sprig_wire::event::{Event, EventKind};
use sprig_wire::ring::{Consumer, Producer, Region, RingConfig};
use sprig_wire::session::SessionDir;
use std::collections::BTreeMap;
use std::time::Duration;

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// Sampled ticks per (thread, path from the root).
fn sampled_by_path(thread: u32, tree: &Tree, out: &mut BTreeMap<(u32, Vec<u32>), u64>) {
    let mut stack: Vec<(u32, Vec<u32>)> = tree
        .roots
        .iter()
        .map(|&r| (r, vec![tree.nodes[r as usize].method]))
        .collect();
    while let Some((i, path)) = stack.pop() {
        let n = &tree.nodes[i as usize];
        if n.sampled_ticks > 0 {
            *out.entry((thread, path.clone())).or_insert(0) += n.sampled_ticks;
        }
        for &c in &n.children {
            let mut p = path.clone();
            p.push(tree.nodes[c as usize].method);
            stack.push((c, p));
        }
    }
}

#[test]
fn every_sample_lands_on_the_frame_open_when_it_was_read() {
    for seed in [3u64, 17, 2024] {
        let dir = SessionDir::create().unwrap();
        let cfg = RingConfig {
            segment_bytes: 128, // 4 events a segment: runs cross segments often
            segments: 16,
            ..RingConfig::default()
        };
        let region = Region::create(&dir.path().join("ring"), &cfg).unwrap();
        let mut consumer = Consumer::new(region.clone());
        let threads = [4u32, 9];
        let mut producers: Vec<Producer> = threads
            .iter()
            .map(|&t| Producer::new(region.clone(), t, Duration::from_secs(5)))
            .collect();
        // the reference: each thread's open frames (method ids, root first)
        let mut stacks: Vec<Vec<u32>> = vec![Vec::new(); threads.len()];
        let mut expected: BTreeMap<(u32, Vec<u32>), u64> = BTreeMap::new();
        let mut outside = 0u64;
        let mut b = CctBuilder::new(1_000_000_000);
        b.set_timing(Timing::Sampled);
        let mut rng = Rng(seed);
        let mut ts = 1u64;
        let mut positions = Vec::new();
        let mut weight = 0u64;
        for _ in 0..3000 {
            let k = rng.below(threads.len() as u64) as usize;
            let stack = &mut stacks[k];
            let ev = match (stack.len(), rng.below(3)) {
                (0, _) => {
                    ts += 1 + rng.below(100);
                    stack.push(1);
                    Event::new(EventKind::RootEntry, 1, ts)
                }
                (1, 0) => {
                    ts += 1 + rng.below(100);
                    stack.pop();
                    Event::new(EventKind::RootExit, 1, ts)
                }
                (d, 1) if d < 6 => {
                    let m = 2 + rng.below(3) as u32;
                    stack.push(m);
                    Event::new(EventKind::MethodEntry, m, 0)
                }
                (d, _) if d > 1 => {
                    let m = stack.pop().unwrap();
                    Event::new(EventKind::MethodExit, m, 0)
                }
                _ => continue,
            };
            producers[k].push(ev).unwrap();
            if rng.below(3) == 0 {
                // position sampling: read every owned segment, weigh the reading
                positions.clear();
                region.positions(&mut positions);
                let mut samples = Vec::new();
                for p in &positions {
                    weight += 1;
                    let i = threads.iter().position(|&t| t == p.thread).unwrap();
                    if stacks[i].is_empty() {
                        outside += weight;
                    } else {
                        *expected.entry((p.thread, stacks[i].clone())).or_insert(0) += weight;
                    }
                    samples.push(PositionSample::at(*p, ts, weight));
                }
                // given before the poll that delivers the events past them
                b.add_samples(&samples);
            }
            if rng.below(2) == 0 {
                consumer.poll_runs(&mut |run, evs| b.process_run(run, evs));
            }
        }
        drop(producers);
        consumer.poll_runs(&mut |run, evs| b.process_run(run, evs));
        let p = b.finish();
        let mut got = BTreeMap::new();
        let mut got_outside = 0;
        for t in &p.threads {
            assert_eq!((t.samples.late, t.samples.unmatched), (0, 0), "seed {seed}");
            sampled_by_path(t.index, &t.tree, &mut got);
            got_outside += t.samples.outside_ticks;
        }
        assert!(expected.len() > 5, "seed {seed}: a varied test");
        assert_eq!(got, expected, "seed {seed}");
        assert_eq!(got_outside, outside, "seed {seed}");
    }
}
