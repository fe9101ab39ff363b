//! The text report's unit tests.

use super::*;
use crate::profile::{MethodInfo, Node, Tree};

#[test]
fn control_characters_in_names_are_escaped() {
    // Every name comes from the JVM: a class, thread or JVM name with
    // terminal escape sequences must not reach the terminal raw.
    let mut p = Profile::new(1_000_000_000);
    p.target.jvm = "VM\u{1b}]0;title\u{7}".into();
    p.methods.insert(
        0,
        MethodInfo {
            class: "a.B\u{1b}[2J".into(),
            name: "run\u{9b}31m".into(),
            descriptor: "()V\u{7f}".into(),
        },
    );
    p.warnings.push("agent: class a.B\u{1b}[1m failed".into());
    let mut tree = Tree::default();
    tree.push(
        None,
        Node {
            method: 0,
            calls: 1,
            total_ticks: 1_000,
            ..Node::default()
        },
    );
    tree.recount();
    p.threads.push(ThreadProfile {
        virtual_threads: 0,
        index: 0,
        java_id: 1,
        name: "main\u{1b}[31m\r\n".into(),
        tree,
        ..ThreadProfile::default()
    });
    let opts = RenderOptions {
        merged: false,
        hot_spots: 5,
        back_traces: vec![0],
        ..RenderOptions::default()
    };
    for merged in [false, true] {
        let mut out = Vec::new();
        Text.render(
            &p,
            &RenderOptions {
                merged,
                ..opts.clone()
            },
            &mut out,
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
        assert!(text.contains("a.B\\x1b[2J.run\\u{9b}31m\n"), "{text}");
        assert!(text.contains("VM\\x1b]0;title\\x07"), "{text}");
        assert!(text.contains("a.B\\x1b[1m failed"), "{text}");
        if !merged {
            assert!(text.contains("thread \"main\\x1b[31m\\r\\n\""), "{text}");
        }
    }
}

/// Two threads, each with a method of a few ns under the probes (its
/// time `~`), an agent warning and a stream warning.
fn two_marked_threads() -> Profile {
    let mut p = Profile::new(1_000_000_000);
    p.target.pid = 7;
    p.target.jvm = "OpenJDK 17".into();
    p.stats.duration_ms = 10;
    p.stats.instrumented_methods = 2;
    p.stats.called_methods = 2;
    p.clock = "tsc".into();
    p.calibration = Some(crate::profile::Calibration::new(20.0, 10.0));
    p.methods.insert(1, MethodInfo::new("a.B", "root", "()V"));
    p.methods.insert(2, MethodInfo::new("a.B", "tiny", "()V"));
    p.warnings.push("agent: first class redefinition".into());
    p.warnings.push("thread 1: 1 frames were still open".into());
    for index in [1, 2] {
        let mut tree = Tree::default();
        let r = tree.push(
            None,
            Node {
                method: 1,
                calls: 1,
                total_ticks: 100_000,
                ..Node::default()
            },
        );
        tree.push(
            Some(r),
            Node {
                method: 2,
                calls: 4,
                total_ticks: 40,
                ..Node::default()
            },
        );
        tree.recount();
        p.threads.push(ThreadProfile {
            virtual_threads: 0,
            index,
            name: format!("t{index}"),
            tree,
            ..ThreadProfile::default()
        });
    }
    p
}

fn text_of(p: &Profile, opts: &RenderOptions) -> String {
    let mut out = Vec::new();
    Text.render(p, opts, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn the_trees_come_first_each_legend_once_and_the_internals_last() {
    let p = two_marked_threads();
    let text = text_of(&p, &RenderOptions::default());
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("sprig profile: pid 7, OpenJDK 17: 10 ms, exact timing"));
    assert!(lines[1].starts_with("probes: "), "{text}");
    assert_eq!(lines[2], "");
    assert!(lines[3].starts_with("thread \"t1\""), "{text}");
    // Two trees and the hot spots carry `~`; the legend comes once.
    assert_eq!(text.matches("~ more probe cost").count(), 1, "{text}");
    assert!(text.find("hot spots").unwrap() < text.find("~ more probe cost").unwrap());
    // Internals only in the one-line footer; each warning once.
    assert!(
        !text.contains("revelation") && !text.contains("  clock "),
        "{text}"
    );
    assert!(text.contains("session: 0 events (0 lost), 2 methods instrumented, 2 called"));
    assert_eq!(text.matches("first class redefinition").count(), 1);
    assert_eq!(text.matches("frames were still open").count(), 1);
    assert!(text.find("session: ").unwrap() < text.find("warnings:").unwrap());
}

#[test]
fn verbose_ends_with_every_figure_of_the_session() {
    let p = two_marked_threads();
    let text = text_of(
        &p,
        &RenderOptions {
            verbose: true,
            ..RenderOptions::default()
        },
    );
    for line in [
        "  duration     10 ms",
        "  clock        tsc (wall clock, 1000000000 ticks/s)",
        "  methods      2 instrumented, 2 called",
        "  calibration  t_I 20.000 ns, t_O 10.000 ns (probe cost subtracted per call)",
    ] {
        assert!(text.contains(line), "{line:?} missing:\n{text}");
    }
    assert!(text.find("hot spots").unwrap() < text.find("  duration ").unwrap());
    assert!(!text.contains("--verbose: every figure"));
}

/// One thread: `(parent, class, name, descriptor, calls, total ns,
/// samples, incomplete)` per node; sampled timing when any node has
/// samples (each worth its node's own time over its samples).
type Shape<'a> = (Option<u32>, &'a str, &'a str, &'a str, u64, u64, u64, u64);

fn shaped(shape: &[Shape]) -> Profile {
    let mut p = Profile::new(1_000_000_000);
    let mut tree = Tree::default();
    let mut samples = 0;
    for (i, &(parent, class, name, desc, calls, total, n, incomplete)) in shape.iter().enumerate() {
        p.methods
            .insert(i as u32, MethodInfo::new(class, name, desc));
        let kids: u64 = shape
            .iter()
            .filter(|s| s.0 == Some(i as u32))
            .map(|s| s.5)
            .sum();
        tree.push(
            parent,
            Node {
                method: i as u32,
                calls,
                total_ticks: total,
                samples: n,
                sampled_ticks: if n > 0 { total - kids } else { 0 },
                incomplete,
                ..Node::default()
            },
        );
        samples += n;
    }
    tree.recount();
    if samples > 0 {
        p.timing = Timing::Sampled;
    }
    p.threads.push(ThreadProfile {
        virtual_threads: 0,
        index: 1,
        name: "main".into(),
        tree,
        samples: crate::profile::SampleCounts {
            credited: samples,
            outside: 50,
            ..Default::default()
        },
        ..ThreadProfile::default()
    });
    p
}

fn tree_lines(text: &str) -> Vec<&str> {
    text.lines()
        .skip_while(|l| !l.contains("  method"))
        .skip(1)
        .take_while(|l| !l.is_empty() && !l.starts_with("  latency"))
        .collect()
}

#[test]
fn short_names_with_java_signatures_only_where_overloads_meet() {
    let p = shaped(&[
        (
            None,
            "com.acme.Service",
            "handle",
            "(Lcom/acme/Order;)V",
            1,
            9_000,
            0,
            0,
        ),
        (
            Some(0),
            "com.acme.Service",
            "handle",
            "(Ljava/lang/String;[I)V",
            2,
            4_000,
            0,
            0,
        ),
        (
            Some(0),
            "com.acme.Db",
            "query",
            "(IJ)Ljava/util/List;",
            3,
            3_000,
            0,
            0,
        ),
    ]);
    let text = text_of(&p, &RenderOptions::default());
    let lines = tree_lines(&text);
    assert!(
        lines[0].ends_with("  com.acme.Service.handle(Order)"),
        "{text}"
    );
    assert!(
        text.contains("com.acme.Service.handle(String, int[])"),
        "{text}"
    );
    assert!(
        lines.iter().any(|l| l.ends_with("- com.acme.Db.query")),
        "{text}"
    );
    assert!(
        !text.contains("(IJ)") && !text.contains("Lcom/acme"),
        "{text}"
    );
    let all = text_of(
        &p,
        &RenderOptions {
            signatures: true,
            ..RenderOptions::default()
        },
    );
    assert!(all.contains("com.acme.Db.query(int, long)"), "{all}");
}

#[test]
fn times_in_a_unit_that_fits_stated_in_the_header() {
    // A root of 420 ns a call: nanoseconds, not `0.000 ms`.
    let p = shaped(&[(None, "a.B", "tiny", "()V", 1, 420, 0, 0)]);
    let text = text_of(&p, &RenderOptions::default());
    assert!(text.contains("total ns"), "{text}");
    assert!(tree_lines(&text)[0].contains(" 420 "), "{text}");
    assert!(!text.contains("0.000"), "{text}");
    // 12.3 ms: milliseconds with three significant digits.
    let p = shaped(&[(None, "a.B", "slow", "()V", 1, 12_340_000, 0, 0)]);
    let text = text_of(&p, &RenderOptions::default());
    assert!(
        text.contains("total ms") && text.contains(" 12.3 "),
        "{text}"
    );
}

#[test]
fn a_node_without_samples_reads_dash_and_the_legend_explains_the_columns() {
    let p = shaped(&[
        (None, "a.B", "root", "()V", 1, 1_000_000, 10, 1),
        (Some(0), "a.B", "unseen", "()V", 1_896, 0, 0, 0),
    ]);
    let text = text_of(&p, &RenderOptions::default());
    let unseen = tree_lines(&text)
        .into_iter()
        .find(|l| l.ends_with("a.B.unseen"))
        .unwrap_or_else(|| panic!("{text}"));
    let figures: Vec<&str> = unseen.split_whitespace().collect();
    assert_eq!(&figures[..6], &["1896", "-", "-", "-", "-", "0"], "{text}");
    for explained in ["+/-", "samples", "[N incomplete]", "-  "] {
        assert_eq!(
            text.lines()
                .filter(|l| l.trim_start().starts_with(explained))
                .count(),
            1,
            "{explained:?} explained once:\n{text}"
        );
    }
}

#[test]
fn lines_fit_120_columns_cutting_the_package_never_the_method() {
    let class = "org.example.enterprise.platform.integration.persistence.internal.jdbc.\
                 PreparedStatementExecutor";
    let mut shape: Vec<Shape> = vec![(None, class, "executeQuery", "()V", 1, 100_000, 0, 0)];
    for d in 1..8u32 {
        shape.push((
            Some(d - 1),
            class,
            "executeQuery",
            "()V",
            1,
            100_000 - 1_000 * d as u64,
            0,
            0,
        ));
    }
    let p = shaped(&shape);
    let text = text_of(&p, &RenderOptions::default());
    for l in tree_lines(&text) {
        assert!(
            l.chars().count() <= 120,
            "{} columns: {l}",
            l.chars().count()
        );
        assert!(l.ends_with("PreparedStatementExecutor.executeQuery"), "{l}");
    }
    assert!(text.contains('…'), "{text}");
}

#[test]
fn the_header_says_what_the_probes_cost_each_root_call() {
    // Sampled timing, no calibration: the benchmark's probe pair, 1
    // root call making 99 more calls, 100 pairs a root call.
    let p = shaped(&[
        (None, "a.B", "root", "()V", 1, 10_000, 5, 0),
        (Some(0), "a.B", "leaf", "()V", 99, 5_000, 5, 0),
    ]);
    let text = text_of(&p, &RenderOptions::default());
    let header = text.lines().nth(1).unwrap();
    assert_eq!(
        header,
        "probes: about 800 ns a root call (100 calls x 8.0 ns a pair, benchmark); \
         root latencies include it (8.0% of them)"
    );

    // Exact timing with a calibration: its figure, subtracted.
    let mut p = shaped(&[
        (None, "a.B", "root", "()V", 1, 10_000, 0, 0),
        (Some(0), "a.B", "leaf", "()V", 99, 5_000, 0, 0),
    ]);
    p.calibration = Some(crate::profile::Calibration::new(20.0, 10.0));
    let text = text_of(&p, &RenderOptions::default());
    let header = text.lines().nth(1).unwrap();
    assert_eq!(
        header,
        "probes: about 3.00 µs a root call (100 calls x 30.0 ns a pair, calibration), \
         subtracted from times and latencies"
    );
}

#[test]
fn agent_warnings_shown_while_profiling_are_only_counted() {
    let p = two_marked_threads();
    let text = text_of(
        &p,
        &RenderOptions {
            agent_warnings_shown: true,
            ..RenderOptions::default()
        },
    );
    assert!(!text.contains("first class redefinition"), "{text}");
    assert!(text.contains("frames were still open"));
    assert!(text.contains("(1 more from the agent, printed above while profiling)"));
}

#[test]
fn windows_timing_says_so_in_the_header_the_probe_line_and_the_footer() {
    let mut p = shaped(&[
        (None, "a.B", "root", "()V", 1, 10_000, 5, 0),
        (Some(0), "a.B", "leaf", "()V", 99, 5_000, 5, 0),
    ]);
    p.stats.windows = Some(crate::profile::WindowFacts {
        counting_ms: 50,
        silent_ms: 950,
        interval_us: 5000,
        counted_root_calls: 1,
        silent_root_calls: 3,
        samples: 10,
        samples_outside: 2,
        source: None,
        samples_dropped: 0,
        samples_in_probes: 0,
        silence: sprig_wire::control::Silence::Dormant,
        switches: None,
    });
    let text = text_of(&p, &RenderOptions::default());
    let mut lines = text.lines();
    assert!(lines.next().unwrap().ends_with("windows timing"), "{text}");
    assert_eq!(
        lines.next().unwrap(),
        "probes: about 800 ns a root call (100 calls x 8.0 ns a pair, benchmark); counted \
         root calls only: the silent ones, and the latencies taken from them, do not pay it"
    );
    // the footer is wrapped to the width: read it unwrapped
    let unwrapped = text.replace("\n  ", " ");
    assert!(
        unwrapped.contains(
            "windows timing (50 ms counting, 950 ms silent): calls per counted root call (1 \
             counted, 3 silent; totals scaled x4.00 to every root call), times from 10 stack \
             samples of silent root calls (2 outside a root), latencies from silent windows"
        ),
        "{text}"
    );
    // the timer source: named, with the signals its handler dropped
    if let Some(w) = &mut p.stats.windows {
        w.source = Some(sprig_wire::control::StackSource::Timer);
        w.samples_dropped = 7;
    }
    let text = text_of(&p, &RenderOptions::default()).replace("\n  ", " ");
    assert!(
        text.contains(
            "times from 10 stack samples (CPU timer) of silent root calls (2 outside a root, 7 \
             dropped outside silent root calls)"
        ),
        "{text}"
    );
}

/// A root whose calls take a few hundred ns with one slow outlier: its
/// latency figures each read in their own unit, not `0.000` ms.
#[test]
fn sub_microsecond_latencies_read_in_their_own_units() {
    let mut p = Profile::new(1_000_000_000);
    p.methods.insert(0, MethodInfo::new("a.B", "run", "()V"));
    let mut latency = crate::profile::Latency::default();
    for _ in 0..1000 {
        latency.record(150);
    }
    latency.record(2_500_000);
    let mut tree = Tree::default();
    tree.push(
        None,
        Node {
            method: 0,
            calls: 1001,
            total_ticks: 2_650_000,
            latency: Some(Box::new(latency)),
            ..Node::default()
        },
    );
    p.threads.push(ThreadProfile {
        index: 0,
        name: "main".into(),
        tree,
        ..ThreadProfile::default()
    });
    let text = text_of(&p, &RenderOptions::default());
    let line = text
        .lines()
        .find(|l| l.starts_with("  latency"))
        .unwrap_or_else(|| panic!("no latency line:\n{text}"));
    assert!(
        line.contains("p50 1") && line.contains(" ns, ") && line.ends_with(" ms"),
        "{line}"
    );
    assert!(!line.contains("0.000"), "{line}");
}
