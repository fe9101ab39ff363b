//! Snapshot files: round trip, damaged input never panics, deep trees.

mod common;

use sprig_callgraph::cct::snapshot::SNAPSHOT_MAGIC;
use sprig_callgraph::report::Format;
use sprig_callgraph::{CctBuilder, Profile, RenderOptions, SnapshotError};
use sprig_wire::event::{Event, EventKind};

fn bytes(p: &Profile) -> Vec<u8> {
    let mut v = Vec::new();
    p.write_snapshot(&mut v).expect("write to memory");
    v
}

/// The version 10 file of a profile without live objects, allocation
/// samples nor windows timing: a version 13 file (of such a profile, the
/// bytes of version 11) without the live and windows flags (u8 0 each)
/// before the end marker.
fn downgrade_to_v10(v13: &[u8]) -> Vec<u8> {
    let mut v = v13.to_vec();
    assert_eq!(v[8..12], 13u32.to_le_bytes());
    v[8..12].copy_from_slice(&10u32.to_le_bytes());
    let end = v.len() - 8;
    assert_eq!(&v[end..], b"SPRIGEND");
    assert_eq!(v[end - 2..end], [0, 0], "live objects or windows timing");
    v.drain(end - 2..end);
    v
}

/// The version 9 file of a profile without contended monitors' owners: a
/// version 10 file without the owner count of each node and the owners'
/// count at the end.
fn downgrade_to_v9(v10: &[u8]) -> Vec<u8> {
    let mut v = v10.to_vec();
    assert_eq!(v[8..12], 10u32.to_le_bytes());
    v[8..12].copy_from_slice(&9u32.to_le_bytes());
    let end = v.len() - 8;
    assert_eq!(&v[end..], b"SPRIGEND");
    // owners (u32 0), sampled classes (u32 0), no samples outside (u8 0)
    assert_eq!(v[end - 9..end], [0u8; 9], "owners or sampled allocations");
    v.drain(end - 9..end);
    let u32_at = |v: &[u8], at: usize| u32::from_le_bytes(v[at..at + 4].try_into().unwrap());
    let u64_at = |v: &[u8], at: usize| u64::from_le_bytes(v[at..at + 8].try_into().unwrap());
    let mut at = 8 + 4 + 8;
    at += 4 + u32_at(&v, at) as usize;
    at += 4;
    at += 4 + u32_at(&v, at) as usize;
    at += 4 + u32_at(&v, at) as usize; // the command (v8)
    at += 5 * 8 + 1 + 16;
    at += 6 * 8;
    if v[at] == 1 {
        at += 1;
        let kinds = u32_at(&v, at);
        at += 4;
        for _ in 0..kinds {
            at += 4 + u32_at(&v, at) as usize + 8;
        }
        at += 9 * 8;
    } else {
        at += 1;
    }
    at += 8 + 1; // reset, timing
    let methods = u32_at(&v, at);
    at += 4;
    for _ in 0..methods {
        at += 4;
        for _ in 0..3 {
            at += 4 + u32_at(&v, at) as usize;
        }
    }
    let threads = u32_at(&v, at);
    at += 4;
    for _ in 0..threads {
        at += 4 + 8;
        at += 4 + u32_at(&v, at) as usize;
        at += 5 * 8 + 5 * 8 + 8;
        at += 4;
        let nodes = u64_at(&v, at);
        at += 8;
        for _ in 0..nodes {
            at += 4 + 4 * 8 + 3 * 8 + 2 * 8;
            at += if v[at] == 1 {
                1 + 4 * 8 + 4 + 12 * u32_at(&v, at + 1 + 32) as usize
            } else {
                1
            };
            at += 4 + 21 * u32_at(&v, at) as usize;
            assert_eq!(u32_at(&v, at), 0, "a node with owners");
            assert_eq!(u32_at(&v, at + 4), 0, "a node with sampled allocations");
            v.drain(at..at + 8);
            at += 4;
        }
    }
    v
}

/// The version 8 file of a profile: a version 9 file without the cost
/// block at the end (a flag byte, and the figures when `cost`).
fn downgrade_to_v8(v9: &[u8], cost: bool) -> Vec<u8> {
    let mut v = v9.to_vec();
    assert_eq!(v[8..12], 9u32.to_le_bytes());
    v[8..12].copy_from_slice(&8u32.to_le_bytes());
    let end = v.len() - 8;
    assert_eq!(&v[end..], b"SPRIGEND");
    let block = if cost { 1 + 4 + 4 * 8 } else { 1 };
    assert_eq!(v[end - block], u8::from(cost), "the cost flag");
    v.drain(end - block..end);
    v
}

/// The version 7 file of a profile of platform threads without
/// allocations: a version 8 file without the command in the target, the
/// virtual-thread count of each thread, the allocation count of each node and the allocation sites'
/// count at the end.
fn downgrade_to_v7(v8: &[u8]) -> Vec<u8> {
    let mut v = v8.to_vec();
    assert_eq!(v[8..12], 8u32.to_le_bytes());
    v[8..12].copy_from_slice(&7u32.to_le_bytes());
    let u32_at = |v: &[u8], at: usize| u32::from_le_bytes(v[at..at + 4].try_into().unwrap());
    let u64_at = |v: &[u8], at: usize| u64::from_le_bytes(v[at..at + 8].try_into().unwrap());
    let mut at = 8 + 4 + 8;
    at += 4 + u32_at(&v, at) as usize;
    at += 4;
    at += 4 + u32_at(&v, at) as usize;
    let command = 4 + u32_at(&v, at) as usize;
    v.drain(at..at + command);
    at += 5 * 8 + 1 + 16;
    at += 6 * 8;
    if v[at] == 1 {
        at += 1;
        let kinds = u32_at(&v, at);
        at += 4;
        for _ in 0..kinds {
            at += 4 + u32_at(&v, at) as usize + 8;
        }
        at += 9 * 8;
    } else {
        at += 1;
    }
    at += 8 + 1; // reset, timing
    let methods = u32_at(&v, at);
    at += 4;
    for _ in 0..methods {
        at += 4;
        for _ in 0..3 {
            at += 4 + u32_at(&v, at) as usize;
        }
    }
    let threads = u32_at(&v, at);
    at += 4;
    for _ in 0..threads {
        at += 4 + 8;
        at += 4 + u32_at(&v, at) as usize;
        at += 5 * 8 + 5 * 8;
        assert_eq!(u64_at(&v, at), 0, "a thread standing for virtual threads");
        v.drain(at..at + 8);
        at += 4;
        let nodes = u64_at(&v, at);
        at += 8;
        for _ in 0..nodes {
            at += 4 + 4 * 8 + 3 * 8 + 2 * 8;
            at += if v[at] == 1 {
                1 + 4 * 8 + 4 + 12 * u32_at(&v, at + 1 + 32) as usize
            } else {
                1
            };
            assert_eq!(u32_at(&v, at), 0, "a node with allocations");
            v.drain(at..at + 4);
            at += 4;
        }
    }
    let warnings = u32_at(&v, at);
    at += 4;
    for _ in 0..warnings {
        at += 4 + u32_at(&v, at) as usize;
    }
    assert_eq!(u32_at(&v, at), 0, "allocation sites");
    v.drain(at..at + 4);
    v
}

/// The version 6 file of the same profile: a version 7 file without the
/// timing byte, the sample counts of each thread (5 u64) and the samples
/// and latency histogram of each node.
fn downgrade_to_v6(v7: &[u8]) -> Vec<u8> {
    let mut v = v7.to_vec();
    assert_eq!(v[8..12], 7u32.to_le_bytes());
    v[8..12].copy_from_slice(&6u32.to_le_bytes());
    let u32_at = |v: &[u8], at: usize| u32::from_le_bytes(v[at..at + 4].try_into().unwrap());
    let u64_at = |v: &[u8], at: usize| u64::from_le_bytes(v[at..at + 8].try_into().unwrap());
    // magic(8) version(4) ticks(8) clock(str) pid(4) jvm(str) stats(5*8) calibration(1+16)
    let mut at = 8 + 4 + 8;
    at += 4 + u32_at(&v, at) as usize;
    at += 4;
    at += 4 + u32_at(&v, at) as usize;
    at += 5 * 8 + 1 + 16;
    // agent block (6 u64, the revelation flag and its block)
    at += 6 * 8;
    if v[at] == 1 {
        at += 1;
        let kinds = u32_at(&v, at);
        at += 4;
        for _ in 0..kinds {
            at += 4 + u32_at(&v, at) as usize + 8;
        }
        at += 9 * 8;
    } else {
        at += 1;
    }
    at += 8; // reset
    v.remove(at); // timing
    let methods = u32_at(&v, at);
    at += 4;
    for _ in 0..methods {
        at += 4;
        for _ in 0..3 {
            at += 4 + u32_at(&v, at) as usize;
        }
    }
    let threads = u32_at(&v, at);
    at += 4;
    for _ in 0..threads {
        at += 4 + 8;
        at += 4 + u32_at(&v, at) as usize;
        at += 5 * 8; // bursts
        v.drain(at..at + 5 * 8); // sample counts
        at += 4;
        let nodes = u64_at(&v, at);
        at += 8;
        for _ in 0..nodes {
            at += 4 + 4 * 8 + 3 * 8;
            let latency = if v[at + 16] == 1 {
                1 + 4 * 8 + 4 + 12 * u32_at(&v, at + 16 + 1 + 32) as usize
            } else {
                1
            };
            v.drain(at..at + 16 + latency);
            at += 4;
        }
    }
    v
}

fn render(p: &Profile, opts: &RenderOptions, f: Format) -> Vec<u8> {
    let mut v = Vec::new();
    f.renderer().render(p, opts, &mut v).unwrap();
    v
}

#[test]
fn every_script_round_trips_and_renders_the_same() {
    for path in common::scripts() {
        let s = common::load(&path);
        let data = bytes(&s.profile);
        assert_eq!(&data[..8], SNAPSHOT_MAGIC);
        let back = Profile::read_snapshot(&mut data.as_slice())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(back, s.profile, "{}", path.display());
        for f in [Format::Text, Format::Json, Format::Collapsed] {
            assert_eq!(
                render(&back, &s.opts, f),
                render(&s.profile, &s.opts, f),
                "{} {f:?}",
                path.display()
            );
        }
        // writing again gives the same bytes
        assert_eq!(bytes(&back), data);
    }
}

#[test]
fn truncated_snapshots_are_errors_not_panics() {
    let s = common::load(&common::data_dir().join("basic.events"));
    let data = bytes(&s.profile);
    for len in 0..data.len() {
        let r = Profile::read_snapshot(&mut &data[..len]);
        assert!(
            r.is_err(),
            "a snapshot cut at {len} of {} bytes was accepted",
            data.len()
        );
    }
    assert!(matches!(
        Profile::read_snapshot(&mut &b"NOTASNAPSHOT"[..]),
        Err(SnapshotError::BadMagic)
    ));
    let mut v2 = data.clone();
    v2[8] = 99;
    assert!(matches!(
        Profile::read_snapshot(&mut v2.as_slice()),
        Err(SnapshotError::UnsupportedVersion(99))
    ));
}

#[test]
fn damaged_snapshots_never_panic() {
    let s = common::load(&common::data_dir().join("unbalanced.events"));
    let data = bytes(&s.profile);
    let mut accepted = 0;
    for i in 8..data.len() {
        for x in [0x01u8, 0x80, 0xff] {
            let mut d = data.clone();
            d[i] ^= x;
            if let Ok(p) = Profile::read_snapshot(&mut d.as_slice()) {
                accepted += 1;
                // whatever was read must render
                for f in [Format::Text, Format::Json, Format::Collapsed] {
                    render(&p, &RenderOptions::default(), f);
                }
            }
        }
    }
    // flips inside numbers are undetectable, flips in lengths and counts are not
    assert!(accepted < 3 * (data.len() - 8));
    // a huge string length or node count does not allocate it up front
    let mut d = data.clone();
    // magic, version, ticks_per_sec, clock (empty string), pid
    let jvm_len_at = 8 + 4 + 8 + 4 + 4;
    d[jvm_len_at..jvm_len_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(Profile::read_snapshot(&mut d.as_slice()).is_err());
}

#[test]
fn deep_recursion_round_trips() {
    const DEPTH: u64 = 10_000;
    let mut evs = vec![Event::new(EventKind::RootEntry, 1, 0)];
    evs.extend((0..DEPTH).map(|i| Event::new(EventKind::MethodEntry, 2, 1 + i)));
    evs.extend((0..DEPTH).map(|i| Event::new(EventKind::MethodExit, 2, 1 + DEPTH + i)));
    evs.push(Event::new(EventKind::RootExit, 1, 2 * DEPTH + 1));
    let mut b = CctBuilder::new(1_000_000_000);
    b.set_method(1, "r.Main", "main", "([Ljava/lang/String;)V");
    b.set_method(2, "r.Main", "down", "(I)I");
    b.process(0, &evs);
    let p = b.finish();
    let data = bytes(&p);
    let back = Profile::read_snapshot(&mut data.as_slice()).unwrap();
    assert_eq!(back, p);
    assert_eq!(back.threads[0].tree.nodes.len() as u64, DEPTH + 1);
}

/// The agent's counters, revelation included, survive a snapshot; a
/// version 1 file (without them, nor the reset) still reads, with the counters at zero.
#[test]
fn agent_stats_round_trip_and_version_1_still_reads() {
    use sprig_callgraph::profile::RevealStats;
    let s = common::load(&common::scripts()[0]);
    let mut p = s.profile.clone();
    p.stats.instrumented_classes = 7;
    p.stats.failed_classes = 1;
    p.stats.threads = 3;
    p.stats.redefinition_batches = 4;
    p.stats.redefinition_ns = 12_345_678;
    p.stats.reveal_ns = 2_000_000;
    p.stats.reset_after_ms = 30_000;
    p.stats.reveal = Some(RevealStats {
        revealed_by: vec![("root".into(), 1), ("virtual".into(), 9)],
        scanned: 5,
        reachable: 12,
        reachable_unloaded: 2,
        classes_mirrored: 480,
        unmodifiable_skipped: 25,
        reflective_sites: 0,
        dormant: 40,
        activated_in_place: 3,
        trivial_skipped: 17,
    });
    p.stats.cost = Some(sprig_callgraph::CostFacts {
        method: 3,
        recorded_calls: 9_000,
        recorded_p50_ns: 91,
        silent_calls: 200,
        silent_p50_ns: 40,
    });
    let data = bytes(&p);
    let back = Profile::read_snapshot(&mut data.as_slice()).expect("read back");
    assert_eq!(back.stats, p.stats);
    let json = String::from_utf8(render(&back, &s.opts, Format::Json)).unwrap();
    assert!(
        json.contains(r#""redefinition_batches":4,"redefinition_ms":12.345678,"reveal_ms":2"#),
        "{json}"
    );
    assert!(
        json.contains(r#""revealed_by":{"root":1,"virtual":9}"#),
        "{json}"
    );
    // The session's figures are in the verbose footer.
    let verbose = RenderOptions {
        verbose: true,
        ..s.opts.clone()
    };
    let text = String::from_utf8(render(&back, &verbose, Format::Text)).unwrap();
    assert!(
        text.contains("redefined    7 classes in 4 batches, 12.3 ms"),
        "{text}"
    );
    assert!(
        text.contains("instrumented by edge: root 1, virtual 9"),
        "{text}"
    );
    assert!(
        text.contains("dormant      40 methods hold probes that never recorded"),
        "{text}"
    );
    assert!(
        text.contains("3 revealed later without a redefinition"),
        "{text}"
    );
    assert!(
        json.contains(r#""dormant":40,"activated_in_place":3,"trivial_skipped":17}"#),
        "{json}"
    );
    assert!(json.contains(r#""reset_after_ms":30000,"#), "{json}");
    assert!(
        text.contains(
            "trivial      17 methods left out (--skip-trivial): their time is in their callers' self time"
        ),
        "{text}"
    );
    assert!(
        text.contains("from a reset 30000 ms into profiling (what ran before is not counted)"),
        "{text}"
    );
    assert!(
        text.contains("lost), counted over the whole session"),
        "{text}"
    );

    // A version 6 file: no timing mode, samples or latency.
    let plain = bytes(&s.profile);
    let v10 = downgrade_to_v10(&plain);
    let old = Profile::read_snapshot(&mut v10.as_slice()).expect("version 10 reads");
    assert_eq!(old, s.profile);
    let v9 = downgrade_to_v9(&v10);
    let old = Profile::read_snapshot(&mut v9.as_slice()).expect("version 9 reads");
    assert_eq!(old, s.profile);
    let v8 = downgrade_to_v8(&v9, s.profile.stats.cost.is_some());
    let old = Profile::read_snapshot(&mut v8.as_slice()).expect("version 8 reads");
    let mut expected = s.profile.clone();
    expected.stats.cost = None;
    assert_eq!(old, expected);
    let v6 = downgrade_to_v6(&downgrade_to_v7(&v8));
    let old = Profile::read_snapshot(&mut v6.as_slice()).expect("version 6 reads");
    for t in &mut expected.threads {
        t.samples = Default::default();
        for n in &mut t.tree.nodes {
            n.latency = None;
            n.samples = 0;
            n.sampled_ticks = 0;
        }
    }
    assert!(
        s.profile.threads[0].tree.nodes[0].latency.is_some(),
        "the test file has latencies to leave out"
    );
    assert_eq!(old, expected);
    // A version 1 file: the same bytes without the agent block.
    let mut v1 = v6;
    v1[8..12].copy_from_slice(&1u32.to_le_bytes());
    // magic(8) version(4) ticks(8) clock(str) pid(4) jvm(str) stats(5*8) calibration(1+16)
    let str_len = |at: usize| u32::from_le_bytes(v1[at..at + 4].try_into().unwrap()) as usize;
    let mut at = 8 + 4 + 8;
    at += 4 + str_len(at);
    at += 4;
    at += 4 + str_len(at);
    at += 5 * 8 + 1 + 16;
    // agent block of a profile with no revelation: 6 u64 and a 0 flag;
    // then the reset (v4).
    v1.drain(at..at + 6 * 8 + 1 + 8);
    // The methods, then the threads: without the bursts (5 u64 a thread)
    // and the in-session probe cost (3 u64 a node) of version 6.
    let u32_at = |v: &[u8], at: usize| u32::from_le_bytes(v[at..at + 4].try_into().unwrap());
    let methods = u32_at(&v1, at);
    at += 4;
    for _ in 0..methods {
        at += 4;
        for _ in 0..3 {
            at += 4 + u32_at(&v1, at) as usize;
        }
    }
    let threads = u32_at(&v1, at);
    at += 4;
    for _ in 0..threads {
        at += 4 + 8;
        at += 4 + u32_at(&v1, at) as usize;
        v1.drain(at..at + 5 * 8);
        at += 4;
        let nodes = u64::from_le_bytes(v1[at..at + 8].try_into().unwrap());
        at += 8;
        for _ in 0..nodes {
            at += 4 + 4 * 8;
            v1.drain(at..at + 3 * 8);
            at += 4;
        }
    }
    let old = Profile::read_snapshot(&mut v1.as_slice()).expect("version 1 reads");
    for t in &mut expected.threads {
        t.bursts = Default::default();
        for n in &mut t.tree.nodes {
            n.recal = Default::default();
        }
    }
    assert_eq!(old, expected);
    let mut v14 = plain;
    v14[8..12].copy_from_slice(&14u32.to_le_bytes());
    assert!(matches!(
        Profile::read_snapshot(&mut v14.as_slice()),
        Err(SnapshotError::UnsupportedVersion(14))
    ));
}

/// The command that made a profile (`sprig run`) survives a snapshot and
/// names the re-rendered report; an older snapshot reads as `profile`.
#[test]
fn the_command_survives_a_snapshot() {
    let mut p = Profile::new(1_000_000_000);
    p.target.command = "run".into();
    let data = bytes(&p);
    let back = Profile::read_snapshot(&mut data.as_slice()).expect("reads");
    assert_eq!(back.target.command(), "run");
    let text = render(&back, &RenderOptions::default(), Format::Text);
    assert!(
        String::from_utf8_lossy(&text).starts_with("sprig run: pid "),
        "{}",
        String::from_utf8_lossy(&text)
    );
    assert_eq!(Profile::new(1).target.command(), "profile");
}

/// Windows timing's facts survive a snapshot (version 13): the report of
/// a snapshot says windows timing, its counted and silent root calls and
/// its scale, as the run's report did.
#[test]
fn windows_timing_survives_a_snapshot() {
    use sprig_callgraph::profile::WindowFacts;
    use sprig_wire::control::{Silence, StackSource, WindowSwitches};
    let mut p = Profile::new(1_000_000_000);
    p.timing = sprig_wire::control::Timing::Sampled;
    let facts = WindowFacts {
        counting_ms: 200,
        silent_ms: 4800,
        interval_us: 1000,
        counted_root_calls: 20,
        silent_root_calls: 4380,
        samples: 912,
        samples_outside: 7,
        source: Some(StackSource::Timer),
        samples_dropped: 31,
        samples_in_probes: 2,
        silence: Silence::Original,
        switches: Some(WindowSwitches {
            to_original: 5,
            to_instrumented: 4,
            classes: 660,
            failed: 1,
            ns: 350_000_000,
            max_ns: 137_000_000,
            cut: 1,
        }),
    };
    p.stats.windows = Some(facts);
    let before = render(&p, &RenderOptions::default(), Format::Text);
    let data = bytes(&p);
    let back = Profile::read_snapshot(&mut data.as_slice()).expect("reads");
    assert_eq!(back.stats.windows, Some(facts));
    let after = render(&back, &RenderOptions::default(), Format::Text);
    assert_eq!(
        String::from_utf8_lossy(&after),
        String::from_utf8_lossy(&before)
    );
    // And without them, none come back.
    p.stats.windows = None;
    let data = bytes(&p);
    let back = Profile::read_snapshot(&mut data.as_slice()).expect("reads");
    assert_eq!(back.stats.windows, None);
}
