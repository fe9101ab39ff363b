//! The outputs the Java ecosystem reads, end to end: a real profile of a
//! fixture JVM written as pprof and read back by `go tool pprof`, and as
//! an HTML flame graph (and a differential one) opened in headless
//! Chromium. `scripts/setup.sh` installs Go and Chromium; without them the
//! cases that need them are skipped with a printed reason. And deep trees:
//! a real recursion 10,000 deep and crafted snapshots up to 200,000 deep
//! reported in every format within bounds of time, output and memory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;
use sprig_tests::{TempDir, fixture_classes, run_sprig, start_sprig, start_workload};

const LONG: Duration = Duration::from_secs(60);

/// Two snapshots of the `calls` scenario (200 and 300 root calls) of one
/// JVM, made once for all tests of this file.
struct Snapshots {
    _dir: TempDir,
    a: PathBuf,
    b: PathBuf,
}

fn snapshots() -> &'static Snapshots {
    static SNAPS: OnceLock<Snapshots> = OnceLock::new();
    SNAPS.get_or_init(|| {
        let jdk = sprig_tests::jdk17();
        let classes = fixture_classes(&jdk);
        let mut jvm = start_workload(&jdk, classes.path(), &[]);
        jvm.send("run calls 1 1");
        jvm.wait_for("done calls", LONG, |l| l.starts_with("done calls"));
        let dir = TempDir::new("outputs");
        let mut paths = Vec::new();
        for (i, n) in [(0, 200u32), (1, 300)] {
            let path = dir.path().join(format!("run{i}.sprig"));
            // Exact timing: the widths checked here need time in every
            // node, and these root calls are a few milliseconds in all,
            // which under sampled timing can hold no sample on a busy host.
            let mut p = start_sprig(
                jvm.pid(),
                // Every method: the frames checked include trivial leaves.
                &[
                    "--root",
                    "fixtures.Calls::root",
                    "--timing",
                    "exact",
                    "--keep-trivial",
                ],
                &path,
            );
            jvm.send(&format!("run calls {n} 2"));
            jvm.wait_for("done calls", LONG, |l| l.starts_with("done calls"));
            p.stop(&format!("JDK {}: {n} calls", jdk.major));
            paths.push(path);
        }
        let b = paths.pop().unwrap();
        let a = paths.pop().unwrap();
        Snapshots { _dir: dir, a, b }
    })
}

fn report(snapshot: &Path, args: &[&str]) -> String {
    let mut all = vec!["report", snapshot.to_str().unwrap()];
    all.extend_from_slice(args);
    let (code, out, err) = run_sprig(&all, LONG);
    assert_eq!(code, 0, "sprig {all:?}: {err}");
    out
}

/// Calls per method (`Class.method`) over every context of every thread.
fn json_calls(report: &Value) -> BTreeMap<String, u64> {
    let mut calls = BTreeMap::new();
    let mut stack: Vec<&Value> = Vec::new();
    for t in report["threads"].as_array().expect("threads") {
        stack.extend(t["roots"].as_array().expect("roots"));
    }
    while let Some(n) = stack.pop() {
        let name = format!(
            "{}.{}",
            n["class"].as_str().unwrap(),
            n["method"].as_str().unwrap()
        );
        *calls.entry(name).or_default() += n["calls"].as_u64().unwrap();
        stack.extend(n["children"].as_array().into_iter().flatten());
    }
    calls
}

/// Number of nodes of the merged tree in a JSON report made with --merged.
fn merged_nodes(report: &Value) -> usize {
    let mut stack: Vec<&Value> = report["merged"]["roots"]
        .as_array()
        .expect("merged roots")
        .iter()
        .collect();
    let mut n = 0;
    while let Some(v) = stack.pop() {
        n += 1;
        stack.extend(v["children"].as_array().into_iter().flatten());
    }
    n
}

fn tool(name: &str) -> Option<PathBuf> {
    let out = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .ok()?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && !path.is_empty()).then(|| PathBuf::from(path))
}

#[test]
fn pprof_read_back_by_go_tool_pprof_has_the_exact_calls_of_the_json() {
    let Some(go) = tool("go") else {
        eprintln!(
            "SKIP pprof_read_back_by_go_tool_pprof: no `go` (scripts/setup.sh installs golang-go)"
        );
        return;
    };
    let snaps = snapshots();
    let json: Value = serde_json::from_str(&report(&snaps.a, &["--format", "json"])).unwrap();
    let expected = json_calls(&json);
    assert_eq!(expected["fixtures.Calls.root"], 400, "{expected:?}");
    let pb = snaps.a.with_extension("pb.gz");
    report(&snaps.a, &["--format", "pprof", "-o", pb.to_str().unwrap()]);
    // -traces prints each sample's value of the chosen type and its
    // stack, leaf first.
    let out = Command::new(&go)
        .args(["tool", "pprof", "-sample_index=calls", "-traces"])
        .arg(&pb)
        .env("HOME", std::env::temp_dir())
        .output()
        .expect("run go tool pprof");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "go tool pprof failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Blocks: "-----------+---" separators; in each, the first line holds
    // the sample's calls value and the leaf function.
    let mut calls: BTreeMap<String, u64> = BTreeMap::new();
    for block in text.split("-----------+-------------------------------------------------------") {
        let Some(first) = block
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with("thread:") && !l.contains(':'))
        else {
            continue;
        };
        let mut words = first.split_whitespace();
        let (Some(value), Some(func)) = (words.next(), words.next()) else {
            continue;
        };
        if let Ok(v) = value.parse::<u64>() {
            *calls.entry(func.to_owned()).or_default() += v;
        }
    }
    assert_eq!(calls, expected, "pprof -traces:\n{text}");
    // -raw names both sample types.
    let raw = Command::new(&go)
        .args(["tool", "pprof", "-raw"])
        .arg(&pb)
        .env("HOME", std::env::temp_dir())
        .output()
        .unwrap();
    let raw = String::from_utf8_lossy(&raw.stdout);
    assert!(
        raw.contains("time/nanoseconds[dflt] calls/count"),
        "time is the first and default sample type:\n{raw}"
    );
    // -top shows time without being asked for it.
    let top = Command::new(&go)
        .args(["tool", "pprof", "-top"])
        .arg(&pb)
        .env("HOME", std::env::temp_dir())
        .output()
        .unwrap();
    let top = String::from_utf8_lossy(&top.stdout);
    assert!(top.contains("Type: time"), "{top}");
}

/// The hosts of the URLs in a Chromium network log.
fn hosts(netlog: &str) -> std::collections::BTreeSet<String> {
    netlog
        .split("\"url\":\"")
        .skip(1)
        .filter_map(|u| {
            let u = &u[..u.find('"')?];
            let rest = u.split_once("://")?.1;
            Some(rest.split(['/', '?', ':']).next()?.to_owned())
        })
        .filter(|h| !h.is_empty())
        .collect()
}

/// Chromium's DOM of `page` after its script ran, with a screenshot, and
/// the hosts the page made Chromium contact beyond those Chromium contacts
/// by itself on a blank page; `None` (with a printed reason) without
/// Chromium.
fn chromium_dom(page: &Path, shot: &Path) -> Option<(String, Vec<String>)> {
    let Some(chromium) = tool("chromium").or_else(|| tool("chromium-browser")) else {
        eprintln!("SKIP: no chromium (scripts/setup.sh installs Debian's chromium)");
        return None;
    };
    let profile = TempDir::new("chromium");
    let netlog = profile.path().join("netlog.json");
    let flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,700",
    ];
    let page_url = format!("file://{}", page.display());
    let run = |extra: &[String], url: &str| {
        let out = Command::new("timeout")
            .arg("120")
            .arg(&chromium)
            .args(flags)
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .args(extra)
            .arg(url)
            .output()
            .expect("run chromium");
        assert!(
            out.status.success(),
            "chromium: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    run(&[format!("--screenshot={}", shot.display())], &page_url);
    assert!(shot.exists(), "no screenshot");
    let net = |url: &str| {
        let dom = run(
            &[
                "--dump-dom".to_owned(),
                format!("--log-net-log={}", netlog.display()),
            ],
            url,
        );
        let log = std::fs::read_to_string(&netlog).unwrap_or_default();
        let _ = std::fs::remove_file(&netlog);
        (dom, hosts(&log))
    };
    let (_, own) = net("about:blank");
    let (dom, contacted) = net(&page_url);
    let extra = contacted.difference(&own).cloned().collect();
    Some((dom, extra))
}

/// (total, width) of every frame in a DOM dump, and the SVG's width.
fn frames(dom: &str) -> (Vec<(u64, f64)>, f64) {
    let attr = |s: &str, k: &str| -> String {
        let at = s
            .find(&format!(" {k}=\""))
            .unwrap_or_else(|| panic!("{k} in {s}"))
            + k.len()
            + 3;
        s[at..at + s[at..].find('"').unwrap()].to_owned()
    };
    let svg_at = dom.find("<svg").expect("an svg");
    let svg_width: f64 = attr(&dom[svg_at..], "width").parse().unwrap();
    let f = dom
        .split("<g class=\"f")
        .skip(1)
        .filter(|g| !g.starts_with(" h") && !g.contains("class=\"f h"))
        .map(|g| {
            let rect = &g[g.find("<rect").unwrap()..];
            (
                attr(g, "data-t").parse().unwrap(),
                attr(rect, "width").parse().unwrap(),
            )
        })
        .collect();
    (f, svg_width)
}

fn artifacts() -> PathBuf {
    let dir = sprig_tests::repo_root().join("target/test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_flame_graph_has_a_frame_per_node_as_wide_as_its_time_and_makes_no_request() {
    let snaps = snapshots();
    let json: Value =
        serde_json::from_str(&report(&snaps.a, &["--format", "json", "--merged"])).unwrap();
    let nodes = merged_nodes(&json);
    assert!(nodes >= 4, "{json}");
    let page = snaps.a.with_extension("html");
    report(
        &snaps.a,
        &["--format", "flamegraph", "-o", page.to_str().unwrap()],
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains("<script src") && !html.contains("<link"));
    let shot = artifacts().join("flamegraph.png");
    let Some((dom, requests)) = chromium_dom(&page, &shot) else {
        return;
    };
    let (f, svg_width) = frames(&dom);
    assert_eq!(f.len(), nodes, "a frame per node of the merged tree");
    let total = f[0].0 as f64;
    assert!(total > 0.0);
    for (t, w) in &f {
        let expected = *t as f64 / total * svg_width;
        assert!(
            (w - expected).abs() < 0.01 + expected * 1e-6,
            "frame of {t} ns is {w} wide, expected {expected} of {svg_width}"
        );
    }
    assert!(
        requests.is_empty(),
        "the page made Chromium contact {requests:?}"
    );
    std::fs::copy(&page, artifacts().join("flamegraph.html")).unwrap();
}

/// A chain of methods of enterprise-length names, as a snapshot: the
/// flame graph's call tree cuts them off at the pane's edge unless asked
/// for whole names (the checkbox, or `#whole-names` in the address).
fn long_names_snapshot(dir: &Path) -> PathBuf {
    use sprig_callgraph::profile::{MethodInfo, Node, ThreadProfile, Tree};
    let mut p = sprig_callgraph::Profile::new(1_000_000_000);
    let classes = [
        "org.example.enterprise.platform.services.orders.internal.OrderProcessingService",
        "org.example.enterprise.platform.services.orders.internal.validation.OrderValidationPipeline",
        "org.example.enterprise.platform.services.inventory.client.InventoryReservationClient",
        "org.example.enterprise.platform.persistence.jdbc.pool.ConnectionPoolManager",
    ];
    let methods = [
        "handleIncomingOrder",
        "validateEveryLine",
        "reserveStock",
        "borrowConnection",
    ];
    let mut t = Tree::default();
    let mut parent = None;
    for (i, (c, m)) in classes.iter().zip(methods).enumerate() {
        let id = i as u32 + 1;
        p.methods
            .insert(id, MethodInfo::new(c, m, "(Ljava/lang/String;)V"));
        let node = Node {
            method: id,
            calls: 1,
            total_ticks: 1_000_000 * (4 - i as u64),
            ..Node::default()
        };
        parent = Some(t.push(parent, node));
    }
    t.recount();
    p.threads.push(ThreadProfile {
        index: 0,
        name: "http-nio-8080-exec-1".into(),
        tree: t,
        ..ThreadProfile::default()
    });
    let path = dir.join("long-names.sprig");
    let mut f = std::fs::File::create(&path).unwrap();
    p.write_snapshot(&mut f).unwrap();
    path
}

#[test]
fn the_flame_graph_tree_shows_whole_names_on_demand() {
    let dir = TempDir::new("long-names");
    let snap = long_names_snapshot(dir.path());
    let page = dir.path().join("long-names.html");
    report(
        &snap,
        &["--format", "flamegraph", "-o", page.to_str().unwrap()],
    );
    let html = std::fs::read_to_string(&page).unwrap();
    // Every tree line carries its whole name as a tooltip.
    assert!(
        html.contains("title=\"org.example.enterprise.platform.persistence.jdbc.pool.ConnectionPoolManager.borrowConnection"),
        "no whole-name tooltip in the tree"
    );
    let Some((dom, _)) = chromium_dom(&page, &artifacts().join("flamegraph-long-names.png")) else {
        return;
    };
    assert!(
        !dom.contains("<main class=\"whole\""),
        "whole names off by default"
    );
    let whole = dir.path().join("long-names-whole.html");
    std::fs::copy(&page, &whole).unwrap();
    let shot = artifacts().join("flamegraph-long-names-whole.png");
    let url_page = PathBuf::from(format!("{}#whole-names", whole.display()));
    let Some((dom, _)) = chromium_dom(&url_page, &shot) else {
        return;
    };
    assert!(
        dom.contains("<main class=\"whole\""),
        "whole names on with #whole-names"
    );
    std::fs::copy(&page, artifacts().join("flamegraph-long-names.html")).unwrap();
}

#[test]
fn a_diff_flame_graph_of_two_snapshots_colours_what_changed() {
    let snaps = snapshots();
    let (code, html, err) = run_sprig(
        &[
            "diff",
            snaps.a.to_str().unwrap(),
            snaps.b.to_str().unwrap(),
            "--format",
            "flamegraph",
        ],
        LONG,
    );
    assert_eq!(code, 0, "{err}");
    let page = snaps.a.with_extension("diff.html");
    std::fs::write(&page, &html).unwrap();
    // 2 x 200 -> 2 x 300 root calls: the root is redder by calls.
    let root = &html[html
        .find("data-n=\"fixtures.Calls.root")
        .expect("root frame")..];
    assert!(
        root.contains("calls 400 → 600 (+200)"),
        "{}",
        &root[..400.min(root.len())]
    );
    assert!(
        root.contains("data-fc=\"rgb(255,"),
        "{}",
        &root[..400.min(root.len())]
    );
    let shot = artifacts().join("flamegraph-diff.png");
    let Some((dom, _)) = chromium_dom(&page, &shot) else {
        return;
    };
    let (f, _) = frames(&dom);
    assert!(f.len() >= 4, "{dom}");
}

// Deep trees: a report's cost is bounded by the tree's size and the
// maximum stack depth (`--max-stack`, 2,048 frames by default), whatever
// the depth of the tree, for a real recursion and for a crafted snapshot.

/// The default maximum stack depth of the stack formats.
const MAX_STACK: usize = 2048;
/// Peak RSS allowed to one `sprig report` of a deep tree (200,000 nodes
/// take ~100 MiB: the tree, its merge over threads, the derived times;
/// a node carries its allocations and wait rows since `--alloc` and
/// `--locks`).
const RSS_LIMIT_KIB: u64 = 128 << 10;
/// Peak RSS allowed to one `sprig diff` of a deep tree with itself (two
/// trees, their merges and the comparison; a compared node carries exact,
/// sampled and live allocation figures since the allocation diff, and the
/// 200,000-deep diff's text read 229 MiB on a CI run). Linear in the
/// depth: a quadratic renderer would need hundreds of GiB.
const DIFF_RSS_LIMIT_KIB: u64 = 288 << 10;
/// Output allowed to one report of a deep tree (2,048 nested frames of
/// ~20 bytes each, in ~2,048 lines, make ~45 MB of collapsed stacks).
const OUTPUT_LIMIT: u64 = 64 << 20;
/// Wall time allowed to one report of a deep tree: `diff --format
/// flamegraph` of the 200,000-deep snapshot took 19.6 s at load average 12
/// beside other builds, a few seconds on a quiet host; a renderer
/// quadratic in the depth would take hours.
const REPORT_TIME: Duration = Duration::from_secs(60);

/// What one bounded `sprig` run gave.
struct Bounded {
    /// Exit code (`None`: killed, or stopped by the output limit).
    code: Option<i32>,
    /// Bytes written to stdout (reading stops past [`OUTPUT_LIMIT`]).
    bytes: u64,
    /// The output itself, up to [`OUTPUT_LIMIT`].
    out: Vec<u8>,
    /// Peak resident set size, from `/usr/bin/time -f %M`.
    max_rss_kib: u64,
    elapsed: Duration,
    stderr: String,
}

impl Bounded {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.out).into_owned()
    }
    /// Asserts the run finished fast, small and under `rss_kib` of peak
    /// RSS; `what` names it.
    fn assert_bounded(&self, what: &str, rss_kib: u64) {
        assert_eq!(
            self.code,
            Some(0),
            "{what}: exit {:?} after {:?}, {} bytes out, {} KiB peak RSS; stderr: {}",
            self.code,
            self.elapsed,
            self.bytes,
            self.max_rss_kib,
            self.stderr
        );
        assert!(
            self.elapsed < REPORT_TIME,
            "{what}: took {:?}",
            self.elapsed
        );
        assert!(
            self.bytes <= OUTPUT_LIMIT,
            "{what}: {} bytes of output",
            self.bytes
        );
        assert!(
            self.max_rss_kib < rss_kib,
            "{what}: peak RSS {} KiB (limit {rss_kib} KiB)",
            self.max_rss_kib
        );
    }
}

/// Runs `sprig ARGS` with its peak RSS measured by `/usr/bin/time`, under an
/// address-space limit of 2 GiB (a report that grows with the square of the
/// depth then fails fast instead of taking the host's memory), killed
/// after twice [`REPORT_TIME`]; reading its stdout stops past
/// [`OUTPUT_LIMIT`] (sprig then fails on the closed pipe).
fn run_bounded(args: &[&str]) -> Bounded {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("ulimit -v 2097152; exec /usr/bin/time -f 'sprig-max-rss-kib %M' \"$0\" \"$@\"")
        .arg(sprig_tests::sprig_bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let start = std::time::Instant::now();
    let mut child = cmd.spawn().expect("spawn /usr/bin/time sprig");
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let mut bytes = 0u64;
        let mut buf = vec![0u8; 1 << 16];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            bytes += n as u64;
            if bytes > OUTPUT_LIMIT {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        (out, bytes)
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let pgid = child.id();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break Some(s);
        }
        if start.elapsed() > 2 * REPORT_TIME {
            let _ = Command::new("kill")
                .args(["-KILL", &format!("-{pgid}")])
                .status();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = start.elapsed();
    let (out, bytes) = reader.join().unwrap();
    let stderr = err_reader.join().unwrap();
    let max_rss_kib = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("sprig-max-rss-kib "))
        .next_back()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(u64::MAX);
    Bounded {
        code: status.and_then(|s| s.code()),
        bytes,
        out,
        max_rss_kib,
        elapsed,
        stderr,
    }
}

/// The string table of a gzipped pprof profile.
fn pprof_strings(gz: &[u8]) -> Vec<String> {
    sprig_callgraph::report::pprof::decode(gz)
        .expect("a pprof profile")
        .string_table
}

/// Renders `snapshot` in every format and asserts each is bounded; the
/// stack formats end a path that is deeper than [`MAX_STACK`] in the
/// marker `[truncated N frames]`, N = `depth - MAX_STACK`.
fn every_format_bounded(snapshot: &Path, depth: usize, what: &str) {
    let snap = snapshot.to_str().unwrap();
    let marker = format!("[truncated {} frames]", depth - MAX_STACK);
    for format in ["text", "json", "collapsed", "flamegraph", "pprof"] {
        let r = run_bounded(&["report", snap, "--format", format]);
        let what = format!("{what}: --format {format}");
        eprintln!(
            "{what}: {:?}, {} bytes, {} KiB peak RSS",
            r.elapsed, r.bytes, r.max_rss_kib
        );
        r.assert_bounded(&what, RSS_LIMIT_KIB);
        match format {
            "collapsed" => {
                let text = r.text();
                let lines: Vec<&str> = text.lines().collect();
                assert!(
                    lines.len() <= MAX_STACK + 1,
                    "{what}: {} lines",
                    lines.len()
                );
                let last = lines
                    .iter()
                    .find(|l| l.contains("[truncated "))
                    .unwrap_or_else(|| panic!("{what}: no truncation marker"));
                let frames: Vec<&str> = last.rsplit_once(' ').unwrap().0.split(';').collect();
                assert_eq!(frames.len(), MAX_STACK + 1, "{what}");
                assert_eq!(frames[MAX_STACK], marker, "{what}");
            }
            "flamegraph" => assert!(r.text().contains(&marker), "{what}: no {marker}"),
            "pprof" => assert!(
                pprof_strings(&r.out).contains(&marker),
                "{what}: no {marker} in the string table"
            ),
            _ => {}
        }
    }
    for format in ["text", "collapsed", "flamegraph"] {
        let r = run_bounded(&["diff", snap, snap, "--format", format]);
        let what = format!("{what}: diff --format {format}");
        eprintln!(
            "{what}: {:?}, {} bytes, {} KiB peak RSS",
            r.elapsed, r.bytes, r.max_rss_kib
        );
        r.assert_bounded(&what, DIFF_RSS_LIMIT_KIB);
        if format != "text" {
            assert!(r.text().contains(&marker), "{what}: no {marker}");
        }
    }
}

/// A snapshot of one thread whose tree is a single chain `depth` deep (a
/// crafted file: sprig never records such a tree by itself), each node
/// with 1 µs of its own.
fn crafted_chain(path: &Path, depth: usize) {
    use sprig_callgraph::profile::{MethodInfo, Node, ThreadProfile, Tree};
    let mut p = sprig_callgraph::Profile::new(1_000_000_000);
    p.methods
        .insert(1, MethodInfo::new("crafted.Deep", "down", "(I)I"));
    let mut tree = Tree::default();
    let mut parent = None;
    for i in 0..depth {
        let id = tree.push(
            parent,
            Node {
                method: 1,
                calls: 1,
                total_ticks: ((depth - i) as u64) * 1_000,
                ..Node::default()
            },
        );
        parent = Some(id);
    }
    tree.recount();
    p.threads.push(ThreadProfile {
        virtual_threads: 0,
        name: "main".into(),
        tree,
        ..ThreadProfile::default()
    });
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    p.write_snapshot(&mut f).unwrap();
    std::io::Write::flush(&mut f).unwrap();
}

#[test]
fn a_crafted_deep_snapshot_reports_in_every_format_bounded() {
    let dir = TempDir::new("crafted-deep");
    for depth in [10_000, 200_000] {
        let path = dir.path().join(format!("deep{depth}.sprig"));
        crafted_chain(&path, depth);
        every_format_bounded(&path, depth, &format!("crafted {depth} deep"));
    }
    // --max-stack moves the cut; 0 is refused in one line.
    let path = dir.path().join("deep10000.sprig");
    let snap = path.to_str().unwrap();
    let r = run_bounded(&[
        "report",
        snap,
        "--format",
        "collapsed",
        "--max-stack",
        "100",
    ]);
    r.assert_bounded("--max-stack 100", RSS_LIMIT_KIB);
    let text = r.text();
    assert_eq!(text.lines().count(), 101);
    assert!(
        text.lines()
            .last()
            .unwrap()
            .contains(";crafted.Deep::down;[truncated 9900 frames] "),
        "{}",
        text.lines().last().unwrap()
    );
    let (code, out, err) = run_sprig(&["report", snap, "--max-stack", "0"], LONG);
    assert_ne!(code, 0);
    assert!(out.is_empty());
    assert_eq!(err.trim(), "sprig: error: --max-stack must be at least 1");
}

#[test]
fn a_real_10k_deep_recursion_reports_in_every_format_bounded() {
    for jdk in sprig_tests::every_jdk("a_real_10k_deep_recursion_reports_in_every_format_bounded") {
        let classes = fixture_classes(&jdk);
        let mut jvm = start_workload(&jdk, classes.path(), &[]);
        // Loads fixtures.Calls before the attach.
        jvm.send("run deep 1 1");
        jvm.wait_for("done deep", LONG, |l| l.starts_with("done deep"));
        let dir = TempDir::new("deep10k");
        let path = dir.path().join("deep.sprig");
        let mut p = start_sprig(
            jvm.pid(),
            &["--root", "fixtures.Calls::deep", "--timing", "exact"],
            &path,
        );
        jvm.send("run deep10k 1 1");
        jvm.wait_for("done deep10k", LONG, |l| l.starts_with("done deep10k"));
        p.stop(&format!("JDK {}: deep10k", jdk.major));
        // deep(10000) down to deep(0): 10,001 nested calls.
        every_format_bounded(&path, 10_001, &format!("JDK {}: deep10k", jdk.major));
    }
}
