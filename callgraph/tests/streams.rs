//! Random event streams: the builder against a naive reference model on
//! well-formed streams, and arbitrary garbage that must never panic.

use sprig_callgraph::report::Format;
use sprig_callgraph::{CctBuilder, Profile, RenderOptions, Tree};
use sprig_wire::event::{Event, EventKind};
use std::collections::BTreeMap;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Per path (root first): (calls, total ticks, adjust ticks).
type Reference = BTreeMap<Vec<u32>, (u64, u64, u64)>;

/// A well-formed stream for one thread, and what the builder must make of it
/// computed the obvious way: a stack of (path, entry ts, adjust at entry).
fn balanced(rng: &mut Rng, roots: usize) -> (Vec<Event>, Reference) {
    let mut evs = Vec::new();
    let mut reference = Reference::new();
    let mut ts = 0u64;
    let mut adjust_sum = 0u64;
    for _ in 0..roots {
        let root = 1 + rng.below(2) as u32;
        let mut stack: Vec<(Vec<u32>, u64, u64)> = vec![(vec![root], ts, adjust_sum)];
        evs.push(Event::new(EventKind::RootEntry, root, ts));
        while let Some(top) = stack.last() {
            ts += rng.below(50);
            // Sometimes the probe of this event waits `a` ticks after its
            // timestamp: the ring writes AdjustTime just before the event,
            // and the wait is inside the frames open after the event.
            let wait = if rng.below(100) < 3 { rng.below(30) } else { 0 };
            if wait > 0 {
                evs.push(Event::new(EventKind::AdjustTime, 0, wait));
            }
            if rng.below(100) < 50 && stack.len() < 12 {
                // up to 20 distinct callees: wide nodes use the hash map
                let m = 1 + rng.below(20) as u32;
                let mut path = top.0.clone();
                path.push(m);
                stack.push((path, ts, adjust_sum));
                evs.push(Event::new(EventKind::MethodEntry, m, ts));
            } else {
                let (path, start, adj) = stack.pop().unwrap();
                let kind = if stack.is_empty() {
                    EventKind::RootExit
                } else {
                    EventKind::MethodExit
                };
                evs.push(Event::new(kind, *path.last().unwrap(), ts));
                let e = reference.entry(path).or_default();
                e.0 += 1;
                e.1 += ts - start;
                e.2 += adjust_sum - adj;
            }
            ts += wait;
            adjust_sum += wait;
        }
        ts += rng.below(100);
    }
    (evs, reference)
}

fn flatten(tree: &Tree) -> Reference {
    let mut out = Reference::new();
    let mut stack: Vec<(u32, Vec<u32>)> = tree.roots.iter().map(|&r| (r, Vec::new())).collect();
    while let Some((n, mut path)) = stack.pop() {
        let node = &tree.nodes[n as usize];
        path.push(node.method);
        let calls_below: u64 = node
            .children
            .iter()
            .map(|&c| tree.nodes[c as usize].calls)
            .sum();
        assert_eq!(node.child_calls, calls_below);
        assert!(
            out.insert(
                path.clone(),
                (node.calls, node.total_ticks, node.adjust_ticks)
            )
            .is_none(),
            "path {path:?} appears twice"
        );
        stack.extend(node.children.iter().map(|&c| (c, path.clone())));
    }
    out
}

#[test]
fn builder_matches_reference_model() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let mut wide_nodes = 0;
    for round in 0..200 {
        let threads = 1 + rng.below(3) as u32;
        let mut streams = Vec::new();
        for _ in 0..threads {
            let roots = 1 + rng.below(16) as usize;
            streams.push(balanced(&mut rng, roots));
        }
        // hand the streams over in random slices, threads interleaved
        let mut b = CctBuilder::new(1_000_000_000);
        let mut pos = vec![0usize; streams.len()];
        while pos.iter().zip(&streams).any(|(&p, s)| p < s.0.len()) {
            let t = rng.below(threads as u64) as usize;
            let len = rng.below(20) as usize;
            let end = (pos[t] + len).min(streams[t].0.len());
            b.process(t as u32 * 10, &streams[t].0[pos[t]..end]);
            pos[t] = end;
        }
        let p = b.finish();
        assert!(p.warnings.is_empty(), "round {round}: {:?}", p.warnings);
        assert_eq!(p.threads.len(), threads as usize);
        for (t, (_, reference)) in p.threads.iter().zip(&streams) {
            assert_eq!(&flatten(&t.tree), reference, "round {round}");
            wide_nodes += t.tree.nodes.iter().filter(|n| n.children.len() > 8).count();
            assert!(t.tree.nodes.iter().all(|n| n.incomplete == 0));
            // well-formed: exact = raw - adjust without calibration, and
            // totals add up (self + children's totals)
            let times = p.times(&t.tree);
            for (n, x) in t.tree.nodes.iter().zip(&times) {
                assert_eq!(x.total_ns, n.total_ticks - n.adjust_ticks);
                let kids: u64 = n.children.iter().map(|&c| times[c as usize].total_ns).sum();
                assert_eq!(x.total_ns, x.self_ns + kids);
            }
        }
    }
    // the builder indexes children in a hash map beyond 8: make sure that ran
    assert!(wide_nodes > 10, "only {wide_nodes} wide nodes");
}

fn garbage(rng: &mut Rng, n: usize) -> Vec<Event> {
    (0..n)
        .map(|_| {
            let kind = match rng.below(10) {
                0..=7 => 1 + rng.below(7) as u16,
                8 => rng.below(20) as u16,
                _ => u16::MAX,
            };
            let ts = match rng.below(20) {
                0 => u64::MAX - rng.below(10),
                1 => 0,
                _ => rng.below(1_000),
            };
            Event {
                ts,
                id: rng.below(5) as u32,
                kind,
                aux: rng.below(3) as u16,
            }
        })
        .collect()
}

#[test]
fn garbage_streams_never_panic() {
    let mut rng = Rng(0xdead_beef_cafe_f00d);
    for _ in 0..300 {
        let mut b = CctBuilder::new(rng.below(3) * 1_000_000_000);
        for _ in 0..rng.below(10) {
            let n = rng.below(200) as usize;
            let evs = garbage(&mut rng, n);
            b.process(rng.below(3) as u32, &evs);
            if rng.below(4) == 0 {
                // the live view counts open frames the way finish() closes them
                let live = b.snapshot();
                let closed = b.clone().finish();
                assert_eq!(live.threads, closed.threads);
            }
        }
        let p = b.finish();
        let opts = RenderOptions {
            min_percent: rng.below(3) as f64,
            max_depth: Some(rng.below(5) as usize),
            back_traces: vec![rng.below(5) as u32],
            merged: rng.below(2) == 0,
            ..RenderOptions::default()
        };
        for f in [Format::Text, Format::Json, Format::Collapsed] {
            let mut out = Vec::new();
            f.renderer().render(&p, &opts, &mut out).unwrap();
        }
        let mut snap = Vec::new();
        p.write_snapshot(&mut snap).unwrap();
        assert_eq!(Profile::read_snapshot(&mut snap.as_slice()).unwrap(), p);
        // self never exceeds the total
        for t in &p.threads {
            for x in p.times(&t.tree) {
                assert!(x.self_ns <= x.total_ns);
            }
        }
    }
}
