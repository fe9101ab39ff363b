//! Allocation records (`--alloc`) in the builder and the model: each lands
//! on the frame open at its place in the thread's stream, per site and
//! level; the JSON report lists a node's allocations by class with Java
//! source names, snapshots carry them, and the stack formats weigh by
//! bytes or objects.

use sprig_callgraph::profile::Metric;
use sprig_callgraph::report::Format;
use sprig_callgraph::{CctBuilder, Profile, RenderOptions};
use sprig_wire::Message;
use sprig_wire::event::{Event, EventKind};
use sprig_wire::record::{AllocRecord, RECORD_ALLOC, RecordSlots};

fn alloc(site: u32, level: u8, count: u32, bytes: u64) -> Vec<Event> {
    let rec = AllocRecord {
        site,
        level,
        count,
        bytes,
    };
    RecordSlots::new(RECORD_ALLOC, 0, &rec.words())
        .unwrap()
        .as_slice()
        .to_vec()
}

/// One object of `bytes` at `site`, as the probe class's Java path writes
/// it: one `Alloc` event, the bytes where a clock reading would be.
fn one(site: u32, bytes: u64) -> Event {
    Event::new(EventKind::Alloc, site, bytes)
}

fn site(id: u32, method: u32, descriptor: &str, dims: u8) -> Message {
    Message::AllocSite {
        id,
        method,
        bci: id * 10,
        descriptor: descriptor.into(),
        dims,
    }
}

fn profile() -> Profile {
    profile_k(1)
}

/// [`profile`] with `k` times the `int[]` bytes in `work`.
fn profile_k(k: u64) -> Profile {
    let mut b = CctBuilder::new(1_000_000_000);
    b.set_method(1, "p.Main", "root", "()V");
    b.set_method(2, "p.Main", "work", "()V");
    b.apply_message(&site(1, 1, "Lp/Main$Point;", 0));
    b.apply_message(&site(2, 2, "[I", 1));
    b.apply_message(&site(3, 2, "[[J", 2));
    let mut evs = Vec::new();
    // outside a root context: not counted
    evs.extend(alloc(1, 0, 1, 24));
    for call in 0..2u64 {
        let t = call * 100;
        evs.push(Event::new(EventKind::RootEntry, 1, t + 1));
        evs.extend(alloc(1, 0, 1, 24));
        evs.push(Event::new(EventKind::MethodEntry, 2, t + 2));
        evs.extend(alloc(2, 0, k as u32, 56 * k));
        evs.extend(alloc(3, 0, 1, 32));
        evs.extend(alloc(3, 1, 3, 120));
        evs.push(Event::new(EventKind::MethodExit, 2, t + 3));
        evs.push(one(1, 24));
        evs.push(Event::new(EventKind::RootExit, 1, t + 4));
    }
    // Batches cut inside a record change nothing.
    let (a, b2) = evs.split_at(evs.len() / 2 + 1);
    b.process(0, a);
    b.process(0, b2);
    b.finish()
}

#[test]
fn records_land_on_the_open_frame_by_site_and_level() {
    let p = profile();
    let tree = &p.threads[0].tree;
    let root = &tree.nodes[tree.roots[0] as usize];
    let work = &tree.nodes[root.children[0] as usize];
    let by = |n| {
        p.node_allocs(n)
            .into_iter()
            .map(|c| (c.class, c.count, c.bytes))
            .collect::<Vec<_>>()
    };
    assert_eq!(by(root), vec![("p.Main$Point".to_string(), 4, 96)]);
    assert_eq!(
        by(work),
        vec![
            ("long[]".to_string(), 6, 240),
            ("int[]".to_string(), 2, 112),
            ("long[][]".to_string(), 2, 64),
        ]
    );
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("1 allocation records outside a root context")),
        "{:?}",
        p.warnings
    );
    // Weights: bytes and objects, own and total.
    let w = p.weights(tree, Metric::Bytes);
    assert_eq!((w[0].own, w[0].total), (96, 96 + 240 + 112 + 64));
    let w = p.weights(tree, Metric::Objects);
    assert_eq!((w[0].own, w[0].total), (4, 4 + 10));
    // The merged tree adds them up too.
    let m = p.merged();
    assert_eq!(p.node_allocs(&m.tree.nodes[1]).len(), 3);
}

/// The Java path's one-object events and the agent's records of one
/// object each build the same profile; an event outside every root
/// context is counted with the records there.
#[test]
fn one_object_events_count_as_one_object_records_do() {
    let build = |as_events: bool| {
        let mut b = CctBuilder::new(1_000_000_000);
        b.set_method(1, "p.Main", "root", "()V");
        b.set_method(2, "p.Main", "work", "()V");
        b.apply_message(&site(1, 1, "Lp/Main$Point;", 0));
        b.apply_message(&site(2, 2, "[I", 1));
        let put = |evs: &mut Vec<Event>, s: u32, bytes: u64| {
            if as_events {
                evs.push(one(s, bytes));
            } else {
                evs.extend(alloc(s, 0, 1, bytes));
            }
        };
        let mut evs = Vec::new();
        put(&mut evs, 1, 24);
        for call in 0..3u64 {
            let t = call * 100;
            evs.push(Event::new(EventKind::RootEntry, 1, t + 1));
            put(&mut evs, 1, 24);
            evs.push(Event::new(EventKind::MethodEntry, 2, t + 2));
            put(&mut evs, 2, 16 + 4 * call);
            put(&mut evs, 2, 16);
            evs.push(Event::new(EventKind::MethodExit, 2, t + 3));
            evs.push(Event::new(EventKind::RootExit, 1, t + 4));
        }
        b.process(0, &evs);
        b.finish()
    };
    let (events, records) = (build(true), build(false));
    assert_eq!(events.threads, records.threads);
    let tree = &events.threads[0].tree;
    let root = &tree.nodes[tree.roots[0] as usize];
    let work = &tree.nodes[root.children[0] as usize];
    let classes = |n| {
        events
            .node_allocs(n)
            .into_iter()
            .map(|c| (c.class, c.count, c.bytes))
            .collect::<Vec<_>>()
    };
    assert_eq!(classes(root), vec![("p.Main$Point".to_string(), 3, 72)]);
    assert_eq!(classes(work), vec![("int[]".to_string(), 6, 16 * 6 + 12)]);
    assert!(
        events
            .warnings
            .iter()
            .any(|w| w.contains("1 allocation records outside a root context")),
        "{:?}",
        events.warnings
    );
}

#[test]
fn json_snapshots_and_stack_formats_carry_them() {
    let p = profile();
    let opts = RenderOptions::default();
    let mut json = Vec::new();
    Format::Json
        .renderer()
        .render(&p, &opts, &mut json)
        .unwrap();
    let json = String::from_utf8(json).unwrap();
    assert!(
        json.contains(r#""allocations":[{"class":"p.Main$Point","count":4,"bytes":96}]"#),
        "{json}"
    );
    assert!(
        json.contains(r#"{"class":"long[]","count":6,"bytes":240}"#),
        "{json}"
    );
    let mut data = Vec::new();
    p.write_snapshot(&mut data).unwrap();
    let back = Profile::read_snapshot(&mut data.as_slice()).unwrap();
    assert_eq!(back, p);
    assert_eq!(back.alloc_sites.len(), 3);
    let collapsed = |weight| {
        let mut out = Vec::new();
        let o = RenderOptions {
            weight,
            ..RenderOptions::default()
        };
        Format::Collapsed
            .renderer()
            .render(&p, &o, &mut out)
            .unwrap();
        String::from_utf8(out).unwrap()
    };
    let bytes = collapsed(Metric::Bytes);
    assert!(bytes.lines().any(|l| l.ends_with(" 416")), "{bytes}");
    assert!(bytes.lines().any(|l| l.ends_with(" 96")), "{bytes}");
    let objects = collapsed(Metric::Objects);
    assert!(objects.lines().any(|l| l.ends_with(" 10")), "{objects}");
}

#[test]
fn a_diff_shows_which_context_allocates_more() {
    let (a, b) = (profile(), profile_k(3));
    let d = sprig_callgraph::diff(&a, &b);
    let work = d
        .nodes
        .iter()
        .find(|n| n.method.name == "work")
        .expect("work");
    assert_eq!(work.a.unwrap().alloc_bytes, 2 * (56 + 32 + 120));
    assert_eq!(work.b.unwrap().alloc_bytes, 2 * (3 * 56 + 32 + 120));
    assert_eq!(work.b.unwrap().alloc_objects, 2 * (3 + 1 + 3));
    let mut out = Vec::new();
    sprig_callgraph::report::diff::DiffText
        .render(&d, &RenderOptions::default(), &mut out)
        .unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("bytes change"), "{text}");
    // per root call: 208 -> 320 bytes in work
    let line = text.lines().find(|l| l.contains("work")).unwrap();
    let cols: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        cols[cols.len() - 5..cols.len() - 2],
        ["208", "320", "+112"],
        "{text}"
    );
}

/// [`profile_k`] with allocation samples and live objects on `work`:
/// `sampled` estimated bytes (in 4 samples of `java.lang.String`) and
/// `live` bytes at the last collection.
fn with_sampled_and_live(k: u64, sampled: u64, live: u64) -> Profile {
    use sprig_callgraph::profile::live::{LiveFigures, LiveProfile};
    use sprig_callgraph::profile::{SampledAllocs, Timing};
    let mut p = profile_k(k);
    p.timing = Timing::Exact;
    p.sampled_classes.insert(7, "java.lang.String".into());
    let tree = &mut p.threads[0].tree;
    let root = tree.roots[0];
    let work = tree.nodes[root as usize].children[0];
    tree.nodes[work as usize].sampled_allocs = vec![SampledAllocs {
        class: 7,
        samples: 4,
        bytes_est: sampled,
        ..Default::default()
    }];
    let mut l = LiveProfile::default();
    l.nodes.insert(
        (p.threads[0].index, work),
        LiveFigures {
            bytes: live,
            objects: 2,
            samples: 2,
        },
    );
    p.live = Some(l);
    // Through a snapshot: the diff reads what snapshots carry.
    let mut data = Vec::new();
    p.write_snapshot(&mut data).unwrap();
    Profile::read_snapshot(&mut data.as_slice()).unwrap()
}

fn diff_text(d: &sprig_callgraph::ProfileDiff) -> String {
    let mut out = Vec::new();
    sprig_callgraph::report::diff::DiffText
        .render(
            d,
            &RenderOptions {
                diff_totals: true,
                width: 200,
                ..RenderOptions::default()
            },
            &mut out,
        )
        .unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn a_diff_shows_sampled_and_live_bytes_as_estimates() {
    let a = with_sampled_and_live(1, 40_000, 1_000);
    let b = with_sampled_and_live(3, 100_000, 5_000);
    let d = sprig_callgraph::diff(&a, &b);
    let node = |name: &str| d.nodes.iter().find(|n| n.method.name == name).unwrap();
    let (wa, wb) = (node("work").a.unwrap(), node("work").b.unwrap());
    assert_eq!((wa.sampled_bytes, wb.sampled_bytes), (40_000, 100_000));
    assert_eq!((wa.live_bytes, wb.live_bytes), (1_000, 5_000));
    // The root's subtree holds them too.
    let ra = node("root").a.unwrap();
    assert_eq!((ra.sampled_bytes, ra.live_bytes), (40_000, 1_000));
    let text = diff_text(&d);
    let head = text.lines().nth(1).unwrap();
    assert!(
        head.contains("exact") && head.contains("estimate"),
        "the text says which figures are exact and which are estimates:\n{text}"
    );
    let cols = text
        .lines()
        .find(|l| l.contains("~a sampled"))
        .unwrap_or_else(|| panic!("no sampled columns:\n{text}"));
    assert!(cols.contains("~a live"), "{text}");
    let work: Vec<&str> = text
        .lines()
        .find(|l| l.ends_with("work"))
        .unwrap()
        .split_whitespace()
        .collect();
    // ... exact a, b, change; sampled a, b, change; live a, b, change; tree, name.
    let n = work.len();
    assert_eq!(&work[n - 11..n - 8], ["416", "640", "+224"], "{text}");
    assert_eq!(&work[n - 8..n - 5], ["40000", "100000", "+60000"], "{text}");
    assert_eq!(&work[n - 5..n - 2], ["1000", "5000", "+4000"], "{text}");
    // Without samples or live objects on either side: the exact columns only.
    let plain = diff_text(&sprig_callgraph::diff(&profile(), &profile_k(2)));
    assert!(
        plain.contains("bytes change") && !plain.contains("sampled") && !plain.contains("live"),
        "{plain}"
    );
}

#[test]
fn a_diffs_stacks_weigh_by_exact_sampled_or_live_bytes() {
    use sprig_callgraph::cct::diff::DiffWeight;
    use sprig_callgraph::report::diff::DiffCollapsed;
    let a = with_sampled_and_live(1, 40_000, 1_000);
    let b = with_sampled_and_live(3, 100_000, 5_000);
    let collapsed = |w: DiffWeight| {
        let d = sprig_callgraph::diff(&a, &b).weighed_by(w);
        let mut out = Vec::new();
        DiffCollapsed
            .render(&d, &RenderOptions::default(), &mut out)
            .unwrap();
        String::from_utf8(out).unwrap()
    };
    let line = |out: &str, stack: &str| {
        out.lines()
            .find(|l| l.rsplitn(3, ' ').nth(2) == Some(stack))
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("no {stack}:\n{out}"))
    };
    let (root, work) = ("p.Main::root", "p.Main::root;p.Main::work");
    let bytes = collapsed("bytes".parse().unwrap());
    assert_eq!(line(&bytes, root), format!("{root} 96 96"), "{bytes}");
    assert_eq!(line(&bytes, work), format!("{work} 416 640"), "{bytes}");
    let objects = collapsed(DiffWeight::Objects);
    assert_eq!(line(&objects, work), format!("{work} 10 14"), "{objects}");
    let sampled = collapsed("sampled-bytes".parse().unwrap());
    assert_eq!(
        line(&sampled, work),
        format!("{work} 40000 100000"),
        "{sampled}"
    );
    assert!(!sampled.contains(&format!("{root} ")), "{sampled}");
    let live = collapsed("live-bytes".parse().unwrap());
    assert_eq!(line(&live, work), format!("{work} 1000 5000"), "{live}");
    // Time stays the default.
    let time = collapsed(DiffWeight::default());
    assert!(!time.contains(" 40000 "), "{time}");
    assert!("heap".parse::<DiffWeight>().is_err());
    // The flame graph: widths of b's bytes, the change in bytes.
    let d = sprig_callgraph::diff(&a, &b).weighed_by(DiffWeight::SampledBytes);
    let mut out = Vec::new();
    sprig_callgraph::report::flamegraph::DiffFlameGraph
        .render(&d, &RenderOptions::default(), &mut out)
        .unwrap();
    let html = String::from_utf8(out).unwrap();
    assert!(
        html.contains("widths: the second profile&#39;s sampled-bytes")
            || html.contains("widths: the second profile's sampled-bytes"),
        "{html}"
    );
    assert!(
        html.contains("~40000 → ~100000 bytes (+~60000 bytes, +150.0%)"),
        "{html}"
    );
}
