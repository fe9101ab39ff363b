//! Events per second the CCT builder consumes on one core.
//!
//! `cargo run --release -p sprig-callgraph --example builder_bench [events] [repeats] [diverse|FILE.sprig]`
//!
//! The stream is a simulated program, generated before timing starts:
//! 2,000 methods with 0-16 callees each (some wider than the builder's
//! sibling-list limit), callees picked with a skewed distribution so loops
//! call the same method again, a call-or-return random walk whose depth
//! averages a few levels with excursions to 60, a recursive method family
//! that goes up to 300 levels deep, an adjust-time record now and then, and
//! 4 threads whose events are handed over in chunks of 4,096 interleaved the
//! way the ring consumer delivers them. Each repeat builds a fresh CCT from
//! the whole stream (tree creation included); the median of the repeats is
//! reported, with and without `finish()`, and per CPU second of the
//! measuring thread (robust to other processes on the machine). Then the
//! cost of the reports on the resulting profile.
//!
//! `diverse` is the adversarial case: every call site picks a random
//! callee on every invocation, so nearly every call creates a new node.
//!
//! `FILE.sprig` (a snapshot, `sprig profile ... -o FILE.sprig`) replays the
//! shape of a real profile instead (`examples/data/jetty-server.sprig`:
//! Jetty's `Server::handle` on its 7 request threads, 342 nodes each, from
//! `scripts/measure/jetty-windows.sh`'s workload at the plateau), under sampled
//! timing (entries and exits at timestamp 0, roots timed): each thread
//! calls its roots in turn, and each call of a node makes its children's
//! calls in proportion to their counts, the children in turn (a loop body
//! calling each once a round), so a parent rarely calls the same child
//! twice in a row. The tree built is the snapshot's, with the same calls
//! per root call.

use sprig_callgraph::report::Format;
use sprig_callgraph::{CctBuilder, Profile, RenderOptions, Tree};
use sprig_wire::clock::thread_cpu_ns;
use sprig_wire::control::Timing;
use sprig_wire::event::{Event, EventKind};
use std::hint::black_box;
use std::time::Instant;

const METHODS: usize = 2_000;
const THREADS: u32 = 4;
const CHUNK: usize = 4_096;
const RECURSIVE: u32 = 7; // methods 0..RECURSIVE recurse into themselves

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }
}

/// A call site: callee, chance (per mille) it runs on an invocation, and
/// how many times in a row it runs (a loop).
type Site = (u32, u64, u32);

/// The static program: method `m` calls methods above `m` (so the call
/// graph is a DAG apart from the recursive methods), 15% are leaves, 10%
/// are wide (9-16 call sites), the rest have 1-6 sites.
fn program(rng: &mut Rng) -> Vec<Vec<Site>> {
    (0..METHODS as u32)
        .map(|m| {
            let n = if rng.chance(150) {
                0
            } else if rng.chance(100) {
                9 + rng.below(8)
            } else {
                1 + rng.below(6)
            };
            (0..n)
                .map(|_| {
                    let callee = if rng.chance(20) {
                        rng.below(RECURSIVE as u64) as u32
                    } else {
                        (m + 1 + rng.below(120) as u32).min(METHODS as u32 - 1)
                    };
                    let chance = 100 + rng.below(700);
                    let repeat = if rng.chance(600) {
                        1
                    } else if rng.chance(750) {
                        2 + rng.below(9) as u32
                    } else {
                        10 + rng.below(90) as u32
                    };
                    (callee, chance, repeat)
                })
                .collect()
        })
        .collect()
}

struct Frame {
    method: u32,
    /// The callees this invocation will call, in order.
    plan: Vec<u32>,
    next: usize,
}

/// Decides what one invocation of `m` at `depth` calls: each site runs
/// with its chance, scaled down below depth 12 and zero from depth 60; a
/// recursive method first calls itself `rec` more levels down.
fn plan(rng: &mut Rng, sites: &[Site], m: u32, depth: u64, rec: &[u32], diverse: bool) -> Vec<u32> {
    let mut p = Vec::new();
    if m < RECURSIVE {
        let left = rec.last().copied().unwrap_or(0);
        if left > 0 {
            p.push(m);
        }
    }
    let scale = if depth < 8 {
        40
    } else {
        48u64.saturating_sub(depth)
    };
    for &(callee, chance, repeat) in sites {
        if rng.below(1000 * 40) < chance * scale {
            for _ in 0..repeat {
                if diverse {
                    p.push(RECURSIVE + rng.below(METHODS as u64 - RECURSIVE as u64) as u32);
                } else {
                    p.push(callee);
                }
            }
        }
    }
    p
}

fn thread_stream(program: &[Vec<Site>], seed: u64, events: usize, diverse: bool) -> Vec<Event> {
    let mut rng = Rng(seed);
    let mut out = Vec::with_capacity(events + 1_000);
    let mut stack: Vec<Frame> = Vec::new();
    // remaining recursion levels of the recursive calls on the stack
    let mut rec: Vec<u32> = Vec::new();
    let mut ts: u64 = 1_000;
    let root = RECURSIVE; // the first non-recursive method
    loop {
        ts += 1 + rng.below(20);
        let Some(top) = stack.last_mut() else {
            if out.len() >= events {
                break;
            }
            let p = plan(&mut rng, &program[root as usize], root, 0, &rec, diverse);
            stack.push(Frame {
                method: root,
                plan: p,
                next: 0,
            });
            out.push(Event::new(EventKind::RootEntry, root, ts));
            continue;
        };
        if top.next < top.plan.len() && out.len() < events {
            let callee = top.plan[top.next];
            let caller = top.method;
            top.next += 1;
            if callee < RECURSIVE {
                if callee == caller {
                    let left = rec.last().copied().unwrap_or(1);
                    rec.push(left.saturating_sub(1));
                } else {
                    rec.push(if rng.chance(30) {
                        rng.below(300)
                    } else {
                        rng.below(8)
                    } as u32);
                }
            }
            let depth = stack.len() as u64;
            let p = plan(
                &mut rng,
                &program[callee as usize],
                callee,
                depth,
                &rec,
                diverse,
            );
            stack.push(Frame {
                method: callee,
                plan: p,
                next: 0,
            });
            out.push(Event::new(EventKind::MethodEntry, callee, ts));
        } else {
            let m = top.method;
            stack.pop();
            if m < RECURSIVE {
                rec.pop();
            }
            let kind = if stack.is_empty() {
                EventKind::RootExit
            } else {
                EventKind::MethodExit
            };
            out.push(Event::new(kind, m, ts));
        }
        if rng.chance(1) && rng.chance(20) {
            out.push(Event::new(EventKind::AdjustTime, 0, 500));
        }
    }
    out
}

/// One call of `node` and everything under it, as the snapshot's counts
/// say one call makes: child `c` is called `c.calls / node.calls` times,
/// the remainder carried in `acc` to the next call of `node`.
fn replay_call(tree: &Tree, node: usize, acc: &mut [u64], out: &mut Vec<Event>) {
    let n = &tree.nodes[node];
    let calls = n.calls.max(1);
    let mut left: Vec<(usize, u64)> = n
        .children
        .iter()
        .map(|&c| {
            let c = c as usize;
            acc[c] += tree.nodes[c].calls;
            let k = acc[c] / calls;
            acc[c] -= k * calls;
            (c, k)
        })
        .collect();
    while left.iter().any(|&(_, k)| k > 0) {
        for (c, k) in &mut left {
            if *k > 0 {
                *k -= 1;
                out.push(Event::new(EventKind::MethodEntry, tree.nodes[*c].method, 0));
                replay_call(tree, *c, acc, out);
                out.push(Event::new(EventKind::MethodExit, tree.nodes[*c].method, 0));
            }
        }
    }
}

/// Each thread of the snapshot calls its roots in turn until it has
/// `events` events (at least one root call).
fn snapshot_streams(p: &Profile, events: usize) -> Vec<Vec<Event>> {
    p.threads
        .iter()
        .filter(|t| !t.tree.roots.is_empty())
        .map(|t| {
            let mut out = Vec::with_capacity(events + 1_000);
            let mut acc = vec![0u64; t.tree.nodes.len()];
            let mut ts = 1_000u64;
            while out.len() < events {
                for &r in &t.tree.roots {
                    let m = t.tree.nodes[r as usize].method;
                    out.push(Event::new(EventKind::RootEntry, m, ts));
                    replay_call(&t.tree, r as usize, &mut acc, &mut out);
                    ts += 1_000;
                    out.push(Event::new(EventKind::RootExit, m, ts));
                }
            }
            out
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A bad argument: one line on stderr and exit status 2.
fn fail(why: String) -> ! {
    eprintln!("builder_bench: {why}");
    eprintln!("usage: builder_bench [events] [repeats] [diverse|FILE.sprig]");
    std::process::exit(2)
}

/// The positional number `what`, or `default` when it is not given.
fn number(arg: Option<String>, what: &str, default: usize) -> usize {
    match arg {
        None => default,
        Some(a) => {
            a.parse().ok().filter(|&n| n > 0).unwrap_or_else(|| {
                fail(format!("{what} must be a positive whole number, not {a:?}"))
            })
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let total = number(args.next(), "events", 16_000_000);
    let repeats = number(args.next(), "repeats", 9);
    let shape = args.next();
    if let Some(extra) = args.next() {
        fail(format!("unexpected argument {extra:?}"));
    }
    let diverse = shape.as_deref() == Some("diverse");
    let snapshot = shape.filter(|a| a != "diverse").map(|f| {
        if !f.ends_with(".sprig") {
            fail(format!("{f:?} is neither `diverse` nor a .sprig snapshot"));
        }
        let bytes = std::fs::read(&f).unwrap_or_else(|e| fail(format!("{f}: {e}")));
        Profile::read_snapshot(&mut bytes.as_slice()).unwrap_or_else(|e| fail(format!("{f}: {e}")))
    });
    let sampled = snapshot.is_some();

    let streams: Vec<Vec<Event>> = match &snapshot {
        Some(p) => snapshot_streams(p, total / p.threads.len().max(1)),
        None => {
            let mut rng = Rng(0x5eed_1234_abcd_ef01);
            let program = program(&mut rng);
            (0..THREADS)
                .map(|t| {
                    thread_stream(
                        &program,
                        0x9e37_79b9 + t as u64 * 7919,
                        total / THREADS as usize,
                        diverse,
                    )
                })
                .collect()
        }
    };
    // the consumer's delivery order: chunks of each thread in turn
    let mut batches: Vec<(u32, &[Event])> = Vec::new();
    let mut pos = vec![0usize; streams.len()];
    loop {
        let mut any = false;
        for (t, s) in streams.iter().enumerate() {
            if pos[t] < s.len() {
                let end = (pos[t] + CHUNK).min(s.len());
                batches.push((t as u32, &s[pos[t]..end]));
                pos[t] = end;
                any = true;
            }
        }
        if !any {
            break;
        }
    }
    let events: usize = streams.iter().map(Vec::len).sum();
    let (mut depth, mut depth_sum, mut entries) = (0u64, 0u64, 0u64);
    for e in &streams[0] {
        match e.kind() {
            Some(EventKind::RootEntry | EventKind::MethodEntry) => {
                depth += 1;
                depth_sum += depth;
                entries += 1;
            }
            Some(EventKind::RootExit | EventKind::MethodExit) => depth -= 1,
            _ => {}
        }
    }
    let mean_depth = depth_sum as f64 / entries.max(1) as f64;

    let mut process_rates = Vec::new();
    let mut cpu_rates = Vec::new();
    let mut full_rates = Vec::new();
    let mut nodes = 0;
    let mut max_depth = 0;
    let mut last = None;
    for _ in 0..repeats {
        let start = Instant::now();
        let cpu_start = thread_cpu_ns();
        let mut b = CctBuilder::new(1_000_000_000);
        if sampled {
            b.set_timing(Timing::Sampled);
        }
        for &(t, evs) in &batches {
            b.process(t, black_box(evs));
        }
        let processed = start.elapsed();
        let cpu = thread_cpu_ns().saturating_sub(cpu_start).max(1);
        cpu_rates.push(events as f64 * 1e9 / cpu as f64);
        let p = black_box(b.finish());
        let full = start.elapsed();
        process_rates.push(events as f64 / processed.as_secs_f64());
        full_rates.push(events as f64 / full.as_secs_f64());
        nodes = p.node_count();
        max_depth = p
            .threads
            .iter()
            .flat_map(|t| t.tree.depths())
            .max()
            .unwrap_or(0);
        if !p.warnings.is_empty() {
            eprintln!("unexpected warnings: {:?}", p.warnings);
        }
        last = Some(p);
    }
    println!(
        "stream: {events} events, {} threads, chunks of {CHUNK}{}; CCT: {nodes} nodes, max depth {}, mean call depth {mean_depth:.1}",
        streams.len(),
        if sampled { ", sampled timing" } else { "" },
        max_depth + 1
    );
    println!(
        "process(): median {:.1} million events/s over {repeats} repeats (min {:.1}, max {:.1})",
        median(process_rates.clone()) / 1e6,
        process_rates.iter().copied().fold(f64::INFINITY, f64::min) / 1e6,
        process_rates.iter().copied().fold(0.0, f64::max) / 1e6,
    );
    println!(
        "process(): median {:.1} million events per CPU second of this thread (robust to other load)",
        median(cpu_rates) / 1e6
    );
    println!(
        "process() + finish(): median {:.1} million events/s",
        median(full_rates) / 1e6
    );
    let Some(p) = last else { return };
    let opts = RenderOptions::default();
    for (name, format) in [
        ("text", Format::Text),
        ("json", Format::Json),
        ("collapsed", Format::Collapsed),
    ] {
        let mut out = Vec::new();
        let start = Instant::now();
        format
            .renderer()
            .render(&p, &opts, &mut out)
            .expect("render to memory");
        println!(
            "render {name}: {:.1} ms, {} bytes",
            start.elapsed().as_secs_f64() * 1e3,
            out.len()
        );
    }
    let mut snap = Vec::new();
    let start = Instant::now();
    p.write_snapshot(&mut snap).expect("write to memory");
    let written = start.elapsed();
    let start = Instant::now();
    let back = Profile::read_snapshot(&mut snap.as_slice()).expect("read back");
    let read = start.elapsed();
    assert!(back == p, "snapshot round trip");
    println!(
        "snapshot: {} bytes, write {:.1} ms, read {:.1} ms",
        snap.len(),
        written.as_secs_f64() * 1e3,
        read.as_secs_f64() * 1e3
    );
}
