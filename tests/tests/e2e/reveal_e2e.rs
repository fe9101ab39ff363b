//! Call-subgraph revelation end to end (Scheme B lazy and Scheme A eager):
//! a JVM running `reveal.Driver` (fixtures/src/reveal), `sprig profile` with
//! one root per scenario, and the exact call count of every node of the
//! calling context tree: static, virtual and interface calls, default
//! methods, a class loaded only after profiling started, lambdas and method
//! references run by JDK code, recursion and exceptions. Both schemes, with
//! the scenario classes loaded after the attach (cold) and before it (warm,
//! mirrored from JVMTI facts), must give exactly the same tree.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use sprig_tests::{Jdk, Proc, TempDir, every_jdk, fixture_classes, sprig_bin};

const LONG: Duration = Duration::from_secs(60);

/// Every root of the scenarios.
const ROOTS: [&str; 9] = [
    "reveal.Virtual::root",
    "reveal.Iface::root",
    "reveal.Late::root",
    "reveal.Lambdas::root",
    "reveal.Recur::root",
    "reveal.Exc::root",
    "reveal.Reflect::root",
    "reveal.Tokens::root",
    "reveal.Ranked::root",
];

/// Scenarios in the order they run (`early` before `late`: the late worker
/// class loads only when `late` runs, after the root's first call; the
/// unlinked worker, loaded at the driver's start, is linked only when
/// `unlinked` runs, last, so no revelation step follows its linking).
const SCENARIOS: [&str; 11] = [
    "virtual", "iface", "early", "late", "lambda", "recur", "throws", "reflect", "objects",
    "ranked", "unlinked",
];

/// Scenarios a warm session runs before the attach: not those whose point
/// is a class that has not been loaded (`late`) or linked (`unlinked`) yet.
fn warms(scenario: &str) -> bool {
    !matches!(scenario, "late" | "unlinked")
}

fn start_driver(jdk: &Jdk, classes: &Path) -> Proc {
    start_driver_with(jdk, classes, &[])
}

fn start_driver_with(jdk: &Jdk, classes: &Path, env: &[(&str, &str)]) -> Proc {
    let cwd = TempDir::new("reveal-cwd");
    let mut cmd = Command::new(jdk.java());
    cmd.current_dir(cwd.path())
        .envs(env.iter().copied())
        .arg("-cp")
        .arg(classes)
        .arg("reveal.Driver");
    let mut p = Proc::spawn(&format!("driver-jdk{}", jdk.major), cmd);
    p.cwd = Some(cwd);
    p.wait_for("ready", Duration::from_secs(30), |l| l.starts_with("ready"));
    p
}

fn run(jvm: &mut Proc, scenario: &str, n: u32, threads: u32) {
    jvm.send(&format!("run {scenario} {n} {threads}"));
    let done = format!("done {scenario} ");
    jvm.wait_for(&done, LONG, |l| l.starts_with(&done));
}

/// Says to leave sprig's default for trivial methods as it is: without
/// it, and without `--skip-trivial` or `--keep-trivial` in the options, a
/// session here gets `--keep-trivial`, as these tests check that every
/// method is revealed, trivial leaves included.
const DEFAULT_TRIVIAL: &str = "(sprig's default for trivial methods)";

/// `extra` as sprig gets it (see [`DEFAULT_TRIVIAL`]).
fn sprig_options<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let says = extra.iter().any(|a| {
        a.starts_with("--skip-trivial") || *a == "--keep-trivial" || *a == DEFAULT_TRIVIAL
    });
    let mut v: Vec<&str> = extra
        .iter()
        .copied()
        .filter(|a| *a != DEFAULT_TRIVIAL)
        .collect();
    if !says {
        v.push("--keep-trivial");
    }
    v
}

fn start_profile(pid: u32, out: &Path, extra: &[&str]) -> Proc {
    let mut cmd = Command::new(sprig_bin());
    cmd.arg("profile").arg(pid.to_string());
    for r in ROOTS {
        cmd.args(["--root", r]);
    }
    cmd.args(["--format", "json", "-o"])
        .arg(out)
        .args(sprig_options(extra));
    let mut p = Proc::spawn("sprig", cmd);
    // Cold: no root class is loaded yet, all roots stay armed.
    p.wait_for("sprig: profiling (or all roots armed)", LONG, |l| {
        l.starts_with("sprig: profiling") || l.contains("reveal.Exc::root matches no loaded class")
    });
    p
}

/// The tests start JVMs: one at a time on this file's share of the cores.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn stop_profile(mut sprig: Proc, out: &Path) -> Value {
    sprig.stop_and_json("reveal session", out)
}

/// Calls per CCT path (`Class.method > Class.method > ...`), summed over
/// every thread. Also checks that no node is incomplete.
fn paths(report: &Value) -> BTreeMap<String, u64> {
    fn walk(node: &Value, prefix: &str, out: &mut BTreeMap<String, u64>) {
        let class = node["class"].as_str().expect("class");
        let name = format!(
            "{}.{}",
            class.strip_prefix("reveal.").unwrap_or(class),
            node["method"].as_str().expect("method")
        );
        let path = if prefix.is_empty() {
            name
        } else {
            format!("{prefix} > {name}")
        };
        assert_eq!(node["incomplete"], 0, "incomplete frames at {path}");
        *out.entry(path.clone()).or_insert(0) += node["calls"].as_u64().expect("calls");
        for c in node["children"].as_array().into_iter().flatten() {
            walk(c, &path, out);
        }
    }
    let mut out = BTreeMap::new();
    for t in report["threads"].as_array().expect("threads") {
        for r in t["roots"].as_array().expect("roots") {
            walk(r, "", &mut out);
        }
    }
    out
}

/// The exact tree for `n` runs of every scenario.
fn expected(n: u64) -> BTreeMap<String, u64> {
    let rows: &[(&str, u64)] = &[
        // virtual calls over a hierarchy; Cube.area calls super.area()
        ("Virtual.root", 1),
        ("Virtual.root > Shape.describe", 3),
        ("Virtual.root > Shape.describe > Circle.area", 1),
        ("Virtual.root > Shape.describe > Square.area", 1),
        ("Virtual.root > Shape.describe > Cube.area", 1),
        ("Virtual.root > Shape.describe > Cube.area > Square.area", 1),
        // interface calls; English inherits the default twice(), French overrides it
        ("Iface.root", 1),
        ("Iface.root > Greeter.twice", 1),
        ("Iface.root > Greeter.twice > English.greet", 2),
        ("Iface.root > French.twice", 1),
        ("Iface.root > French.twice > French.greet", 1),
        // early + late + unlinked runs; LateWorker loads after the root's
        // first call, UnlinkedWorker was loaded before the attach and is
        // linked after the root's first call
        ("Late.root", 3),
        ("Late.root > EarlyWorker.work", 1),
        ("Late.root > LateWorker.work", 1),
        ("Late.root > LateWorker.work > LateWorker.helper", 1),
        ("Late.root > UnlinkedWorker.work", 1),
        // a stream over 4 words (map + filter), a sort of 2, a Runnable in a FutureTask
        ("Lambdas.root", 1),
        ("Lambdas.root > Lambdas.shout", 4),
        ("Lambdas.root > Lambdas.lambda$root$0", 4),
        ("Lambdas.root > Lambdas.byLength", 1),
        ("Lambdas.root > Lambdas.lambda$root$1", 1),
        ("Lambdas.root > Lambdas.lambda$root$1 > Lambdas.bump", 1),
        // mutual recursion from 4 down to 0
        ("Recur.root", 1),
        ("Recur.root > Recur.even", 1),
        ("Recur.root > Recur.even > Recur.odd", 1),
        ("Recur.root > Recur.even > Recur.odd > Recur.even", 1),
        (
            "Recur.root > Recur.even > Recur.odd > Recur.even > Recur.odd",
            1,
        ),
        (
            "Recur.root > Recur.even > Recur.odd > Recur.even > Recur.odd > Recur.even",
            1,
        ),
        // level3 throws on every second call, through level2 and level1
        ("Exc.root", 1),
        ("Exc.root > Exc.level1", 1),
        ("Exc.root > Exc.level1 > Exc.level2", 1),
        ("Exc.root > Exc.level1 > Exc.level2 > Exc.level3", 1),
        ("Exc.root > Exc.after", 1),
        // reflection: Method.invoke of a static method, Constructor.newInstance,
        // Method.invoke of an instance method (the targets sit under the root)
        ("Reflect.root", 1),
        ("Reflect.root > Reflect.target", 1),
        ("Reflect.root > Reflect.<init>", 1),
        ("Reflect.root > Reflect.scaled", 1),
        // toString through Object and CharSequence (the second on a
        // String); hashCode and equals called back by a HashSet
        ("Tokens.root", 1),
        ("Tokens.root > Tokens$Key.<init>", 2),
        ("Tokens.root > Tokens$Key.hashCode", 2),
        ("Tokens.root > Tokens$Key.equals", 1),
        ("Tokens.root > Tokens$Key.toString", 1),
        // a JDK sort calling back compareTo, which no rule reaches: found
        // as it runs with a dormant probe (see `UNREACHED`)
        ("Ranked.root", 1),
        (UNREACHED, 1),
    ];
    tree(rows, n)
}

/// The one node no revelation rule reaches: it is recorded because its
/// class holds dormant probes, which reveal it as it runs inside the root
/// context. Sessions without dormant probes (`--scheme eager`,
/// `--no-dormant`) miss it.
const UNREACHED: &str = "Ranked.root > Ranked.compareTo";

/// Methods only the JDK callback rule reaches (a `HashSet` calling back
/// `hashCode` and `equals` of a key the root made). With dormant probes
/// the rule leaves a live class's callbacks to them, so these two are
/// revealed where they run, like [`UNREACHED`]; without dormant probes the
/// rule instruments them in advance.
const CALLED_BACK: [&str; 2] = ["Tokens$Key.hashCode", "Tokens$Key.equals"];

/// Whether a session with these options has dormant probes.
fn dormant(extra: &[&str]) -> bool {
    !extra.contains(&"--no-dormant") && !extra.contains(&"eager")
}

/// The methods of the scenarios that `--skip-trivial` can leave out, with
/// their bytecode length: short straight-line leaves (`return 3 * side *
/// side`, `return x + 1`, ...). `Exc.level3` is a leaf too, but it
/// allocates and throws.
const TRIVIAL: [(&str, u32); 10] = [
    ("Circle.area", 12),
    ("Square.area", 9),
    ("English.greet", 4),
    ("French.greet", 4),
    ("EarlyWorker.work", 4),
    ("LateWorker.helper", 4),
    ("UnlinkedWorker.work", 4),
    ("Exc.after", 4),
    ("Reflect.target", 4),
    ("Reflect.scaled", 7),
];

/// The byte bound of the trivial methods a session with `extra` leaves
/// out (0: none, as with `--keep-trivial`, which [`sprig_options`] adds
/// when `extra` says nothing; sprig's default is 16).
fn trivial_bound(extra: &[&str]) -> u32 {
    extra
        .iter()
        .find_map(|a| match a.strip_prefix("--skip-trivial") {
            Some("") => Some(16),
            Some(v) => v.strip_prefix('=').and_then(|v| v.parse().ok()),
            None if *a == DEFAULT_TRIVIAL => Some(16),
            None => None,
        })
        .unwrap_or(0)
}

/// The scenario methods left out at a byte bound.
fn trivial_at(bound: u32) -> Vec<&'static str> {
    TRIVIAL
        .iter()
        .filter(|(_, len)| *len <= bound)
        .map(|(name, _)| *name)
        .collect()
}

/// Calls per path from a table of (path, calls per run), for `n` runs.
fn tree(rows: &[(&str, u64)], n: u64) -> BTreeMap<String, u64> {
    rows.iter().map(|(p, k)| (p.to_string(), k * n)).collect()
}

/// [`expected`] without the nodes of the methods left out at `bound` (all
/// leaves, so no other node moves).
fn expected_at(n: u64, bound: u32) -> BTreeMap<String, u64> {
    let left_out = trivial_at(bound);
    expected(n)
        .into_iter()
        .filter(|(path, _)| {
            let last = path.rsplit(" > ").next().unwrap_or(path);
            !left_out.contains(&last)
        })
        .collect()
}

fn assert_tree(got: &BTreeMap<String, u64>, want: &BTreeMap<String, u64>, what: &str) {
    let show = |m: &BTreeMap<String, u64>| {
        m.iter()
            .map(|(p, c)| format!("  {c:>6}  {p}\n"))
            .collect::<String>()
    };
    assert_eq!(
        got,
        want,
        "{what}: tree differs\n got:\n{}want:\n{}",
        show(got),
        show(want)
    );
}

/// One session: optionally warm the scenarios before the attach, profile
/// with `extra` options, run every scenario `n` times, compare the tree.
/// Runs every scenario under a profile; returns the report's `stats`.
fn session(jdk: &Jdk, classes: &Path, warm: bool, extra: &[&str]) -> Value {
    session_with(jdk, classes, warm, extra, &[])
}

/// [`session`] with `env` in the target JVM's environment. A session that
/// another test of this binary ran alike (the same JDK, classes, warmth,
/// options and environment) is not run again: its checks passed, and its
/// stats are returned.
fn session_with(
    jdk: &Jdk,
    classes: &Path,
    warm: bool,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Value {
    static DONE: std::sync::Mutex<BTreeMap<String, Value>> = std::sync::Mutex::new(BTreeMap::new());
    let key = format!(
        "{} {} {warm} {extra:?} {env:?}",
        jdk.home.display(),
        classes.display()
    );
    let ran = DONE
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&key)
        .cloned();
    if let Some(stats) = ran {
        return stats;
    }
    let stats = run_session(jdk, classes, warm, extra, env);
    DONE.lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key, stats.clone());
    stats
}

/// [`session_with`], run.
fn run_session(
    jdk: &Jdk,
    classes: &Path,
    warm: bool,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Value {
    const N: u32 = 7;
    let mut jvm = start_driver_with(jdk, classes, env);
    if warm {
        for s in SCENARIOS.iter().filter(|s| warms(s)) {
            run(&mut jvm, s, 200, 1);
        }
    }
    let out_dir = TempDir::new("reveal-out");
    let out = out_dir.path().join("report.json");
    let sprig = start_profile(jvm.pid(), &out, extra);
    for s in SCENARIOS {
        run(&mut jvm, s, N, 1);
    }
    let report = stop_profile(sprig, &out);
    let what = format!("JDK {} warm={warm} {extra:?}", jdk.major);
    let left_out = trivial_at(trivial_bound(extra)).len();
    let mut want = expected_at(u64::from(N), trivial_bound(extra));
    if !dormant(extra) {
        want.remove(UNREACHED);
    }
    assert_tree(&paths(&report), &want, &what);
    let warnings = report["warnings"].to_string();
    assert!(
        !warnings.contains("revelation is not available"),
        "{what}: {warnings}"
    );
    assert!(!warnings.contains("revelation: "), "{what}: {warnings}");
    let stats = &report["stats"];
    // Revelation counters are part of the stats, not a warning.
    let rev = &stats["revelation"];
    let by_edge: u64 = rev["revealed_by"]
        .as_object()
        .unwrap_or_else(|| panic!("{what}: no revelation stats: {stats}"))
        .values()
        .map(|v| v.as_u64().expect("count"))
        .sum();
    // ... plus Method.invoke and Constructor.newInstance, watched for the
    // reflective calls, less the trivial methods left out.
    let trivial = rev["trivial_skipped"].as_u64().expect("trivial_skipped");
    assert_eq!(
        Some(by_edge + 2),
        stats["instrumented_methods"].as_u64().map(|n| n + trivial),
        "{what}: methods by edge kind must add up to the instrumented ones: {stats}"
    );
    // Every trivial method the scenarios call, none else: the other
    // methods revelation reaches either call further or are constructors
    // (which call their super constructor).
    assert_eq!(trivial, left_out as u64, "{what}: {rev}");
    println!(
        "{what}: {} instrumented, {} dormant, {} activated in place, {} batches",
        stats["instrumented_methods"],
        rev["dormant"],
        rev["activated_in_place"],
        stats["redefinition_batches"]
    );
    assert!(rev["reflective_sites"].as_u64() >= Some(2), "{what}: {rev}");
    assert!(
        rev["revealed_by"]["root"].as_u64() >= Some(1),
        "{what}: {rev}"
    );
    assert!(rev["scanned"].as_u64() >= Some(1), "{what}: {rev}");
    assert!(
        stats["redefinition_batches"].as_u64() >= Some(1),
        "{what}: {stats}"
    );
    let called = stats["called_methods"].as_u64().expect("called");
    let instrumented = stats["instrumented_methods"]
        .as_u64()
        .expect("instrumented");
    // 40 distinct methods run (LateWorker.work/helper, UnlinkedWorker.work,
    // the four of Reflect, the five of Tokens and the two of Ranked
    // included); the trivial ones are not seen, nor, without dormant
    // probes, Ranked.compareTo.
    let unseen = left_out as u64 + u64::from(!dormant(extra));
    assert_eq!(called, 40 - unseen, "{what}: called methods");
    // Revealed as it ran, with dormant probes: Ranked.compareTo and the
    // two callbacks, and no other method the rules should have reached.
    let entered = rev["revealed_by"]["entered"].as_u64().unwrap_or(0);
    let expect_entered = if dormant(extra) {
        1 + CALLED_BACK.len() as u64
    } else {
        0
    };
    assert_eq!(entered, expect_entered, "{what}: {rev}");
    if !dormant(extra) {
        assert!(
            rev["revealed_by"]["callback"].as_u64() >= Some(CALLED_BACK.len() as u64),
            "{what}: {rev}"
        );
    }
    assert!(instrumented >= called, "{what}: {instrumented} < {called}");
    jvm.send("exit");
    let _ = jvm.wait_exit(Duration::from_secs(10));
    stats.clone()
}

#[test]
fn lazy_reveals_the_subgraph_with_exact_counts() {
    let _serial = serial();
    for jdk in every_jdk("lazy_reveals_the_subgraph_with_exact_counts") {
        let classes = fixture_classes(&jdk);
        let dormant = session(&jdk, classes.path(), false, &[]);
        session(&jdk, classes.path(), true, &[]);
        // The same tree when every revelation redefines its class again,
        // less the callback no rule reaches (Ranked.compareTo), which only
        // a dormant probe finds.
        let redefining = session(&jdk, classes.path(), false, &["--no-dormant"]);
        let n = |s: &Value, k: &str| s[k].as_u64().unwrap_or(0);
        let rev = |s: &Value, k: &str| s["revelation"][k].as_u64().unwrap_or(u64::MAX);
        // Classes redefined for some methods hold probes in the others,
        // and later revelations in them needed no redefinition.
        assert!(rev(&dormant, "dormant") >= 1, "{dormant}");
        assert!(rev(&dormant, "activated_in_place") >= 1, "{dormant}");
        assert_eq!(rev(&redefining, "dormant"), 0, "{redefining}");
        assert_eq!(rev(&redefining, "activated_in_place"), 0, "{redefining}");
        // Dormant probes are not counted as instrumented; the methods
        // revealed as they ran are. Without dormant probes the callback
        // rule instruments every override of a JDK method in the live
        // classes (Tokens$Key's three, the shapes' toString, ...), called
        // or not; with them, only those that ran: fewer in all, though the
        // dormant session also instruments Ranked.compareTo, which the
        // other misses (44 against 45 on 2026-11-26, c6f4c8e).
        println!(
            "JDK {}: instrumented {} with dormant probes, {} without",
            jdk.major,
            n(&dormant, "instrumented_methods"),
            n(&redefining, "instrumented_methods")
        );
        assert!(
            n(&dormant, "instrumented_methods") < n(&redefining, "instrumented_methods"),
            "instrumented: {} with dormant probes, {} without",
            n(&dormant, "instrumented_methods"),
            n(&redefining, "instrumented_methods")
        );
        assert!(
            n(&dormant, "redefinition_batches") < n(&redefining, "redefinition_batches"),
            "batches: {} with dormant probes, {} without",
            n(&dormant, "redefinition_batches"),
            n(&redefining, "redefinition_batches")
        );
    }
}

/// `--skip-trivial`: the same tree less the trivial leaves, whether their
/// classes load after the attach (the load hook sees their bytes) or
/// before it (the first redefinition does), in both schemes; and so by
/// default, with no option.
#[test]
fn skip_trivial_leaves_out_exactly_the_trivial_leaves() {
    let _serial = serial();
    for jdk in every_jdk("skip_trivial_leaves_out_exactly_the_trivial_leaves") {
        let classes = fixture_classes(&jdk);
        session(&jdk, classes.path(), false, &[DEFAULT_TRIVIAL]);
        session(&jdk, classes.path(), false, &["--skip-trivial"]);
        session(&jdk, classes.path(), true, &["--skip-trivial"]);
        session(
            &jdk,
            classes.path(),
            true,
            &["--skip-trivial", "--scheme", "eager"],
        );
        // At 4 bytes only `return x + 1` and the like go: the area()
        // methods (9 and 12 bytes) and scaled() (7) are back in the tree.
        session(&jdk, classes.path(), false, &["--skip-trivial=4"]);
    }
}

#[test]
fn eager_gives_the_same_tree() {
    let _serial = serial();
    for jdk in every_jdk("eager_gives_the_same_tree") {
        let classes = fixture_classes(&jdk);
        let _ = session(&jdk, classes.path(), false, &["--scheme", "eager"]);
        let _ = session(&jdk, classes.path(), true, &["--scheme", "eager"]);
    }
}

/// `--virtual-calls receiver`: virtual and interface calls revealed by
/// the receivers a check before each call sees give the same tree with
/// the same exact counts, loaded classes and classes loaded later alike,
/// and instrument no more methods than class hierarchy analysis (fewer
/// here: the fixture's hierarchies have overrides no root call reaches).
#[test]
fn receiver_checks_give_the_same_tree_with_fewer_methods() {
    let _serial = serial();
    for jdk in every_jdk("receiver_checks_give_the_same_tree_with_fewer_methods") {
        let classes = fixture_classes(&jdk);
        let receiver = ["--virtual-calls", "receiver"];
        let n = |s: &Value| s["instrumented_methods"].as_u64().unwrap_or(0);
        let cold = session(&jdk, classes.path(), false, &receiver);
        let warm = session(&jdk, classes.path(), true, &receiver);
        let hierarchy = session(&jdk, classes.path(), false, &[]);
        println!(
            "JDK {}: instrumented {} / {} (receiver, cold / warm), {} (hierarchy)",
            jdk.major,
            n(&cold),
            n(&warm),
            n(&hierarchy)
        );
        assert!(n(&cold) < n(&hierarchy), "{cold} / {hierarchy}");
        assert!(n(&warm) < n(&hierarchy), "{warm} / {hierarchy}");
        session(
            &jdk,
            classes.path(),
            true,
            &["--virtual-calls", "receiver", "--skip-trivial"],
        );
        session(
            &jdk,
            classes.path(),
            false,
            &["--virtual-calls", "receiver", "--no-dormant"],
        );
    }
}

/// The target's stderr once the agent has printed its end-of-session debug
/// lines (`SPRIG_AGENT_DEBUG`, last the list of instrumented methods never
/// called); then the target is told to exit.
fn debug_lines_at_end(jvm: &mut Proc, what: &str) -> String {
    let end = "instrumented methods never called";
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !jvm.stderr().contains(end) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let err = jvm.stderr();
    jvm.send("exit");
    let _ = jvm.wait_exit(Duration::from_secs(10));
    assert!(
        err.contains(end),
        "{what}: no list of uncalled methods:\n{err}"
    );
    err
}

/// The instrumented methods a session never saw called, as the agent
/// lists them on the target's stderr when `SPRIG_AGENT_DEBUG` is set
/// (`pkg/Class::name(descriptor)`), after the `objects` scenario ran.
fn uncalled_after_objects(jdk: &Jdk, classes: &Path, extra: &[&str]) -> Vec<String> {
    let mut jvm = start_driver_with(jdk, classes, &[("SPRIG_AGENT_DEBUG", "1")]);
    let out_dir = TempDir::new("reveal-out");
    let out = out_dir.path().join("objects.json");
    let sprig = start_profile(jvm.pid(), &out, extra);
    run(&mut jvm, "objects", 3, 1);
    let got = paths(&stop_profile(sprig, &out));
    assert_eq!(
        got.get("Tokens.root > Tokens$Key.toString"),
        Some(&3),
        "{extra:?}: {got:#?}"
    );
    let err = debug_lines_at_end(&mut jvm, &format!("{extra:?}"));
    err.lines()
        .filter_map(|l| l.strip_prefix("sprig agent: uncalled "))
        .map(|l| l.split(' ').next().unwrap_or(l).to_string())
        .collect()
}

/// `toString`, `hashCode` and `equals` called through JDK types (an
/// `Object`, a `CharSequence`, a `HashSet` calling back): with receiver
/// checks only the receivers' methods get probes, not the overrides of
/// every loaded class (`Tokens$Unused`), which class hierarchy analysis
/// instruments; the tree is exact either way.
#[test]
fn receiver_checks_watch_object_methods_called_on_jdk_types() {
    let _serial = serial();
    for jdk in every_jdk("receiver_checks_watch_object_methods_called_on_jdk_types") {
        let classes = fixture_classes(&jdk);
        let unused = |list: &[String]| {
            list.iter()
                .filter(|m| m.starts_with("reveal/Tokens$Unused::"))
                .cloned()
                .collect::<Vec<_>>()
        };
        let hierarchy = uncalled_after_objects(&jdk, classes.path(), &[]);
        let receiver =
            uncalled_after_objects(&jdk, classes.path(), &["--virtual-calls", "receiver"]);
        println!(
            "JDK {}: {} instrumented methods never called with hierarchy analysis, {} with receiver checks",
            jdk.major,
            hierarchy.len(),
            receiver.len()
        );
        assert!(
            unused(&hierarchy)
                .contains(&"reveal/Tokens$Unused::toString()Ljava/lang/String;".to_string()),
            "hierarchy analysis reaches every toString: {hierarchy:#?}"
        );
        assert_eq!(unused(&receiver), Vec::<String>::new(), "{receiver:#?}");
        assert!(receiver.len() < hierarchy.len(), "{receiver:#?}");
    }
}

/// A reflective call of a target the session has handed to the revealer
/// before returns at once: of the 150 reflective calls of 50 root calls
/// (three distinct targets: a static method, a constructor, an instance
/// method), only the first of each target is named through JVMTI; the tree
/// still counts every call.
#[test]
fn reflective_targets_seen_before_are_not_looked_up_again() {
    let _serial = serial();
    for jdk in every_jdk("reflective_targets_seen_before_are_not_looked_up_again") {
        let classes = fixture_classes(&jdk);
        let (got, err) = debug_session(
            &jdk,
            classes.path(),
            ("reveal.Reflect::root", "reflect", 50),
            &[],
        );
        assert_eq!(
            got.get("Reflect.root > Reflect.target"),
            Some(&50),
            "{got:#?}"
        );
        assert_eq!(
            got.get("Reflect.root > Reflect.scaled"),
            Some(&50),
            "{got:#?}"
        );
        let line = err
            .lines()
            .find_map(|l| l.strip_prefix("sprig agent: reflective calls: "))
            .unwrap_or_else(|| panic!("no reflective calls line:\n{err}"));
        let n: Vec<u64> = line
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|w| w.parse().ok())
            .collect();
        let (named, cached) = (n[0], n[1]);
        println!("JDK {}: reflective calls: {line}", jdk.major);
        assert!(named <= 6, "JDK {}: {line}", jdk.major);
        // (the first root call may run before reflection is watched)
        assert!(named + cached >= 147, "JDK {}: {line}", jdk.major);
    }
}

/// The numbers of the agent's debug line that starts with `prefix`.
fn debug_numbers(err: &str, prefix: &str) -> (String, Vec<u64>) {
    let line = err
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no line {prefix:?}:\n{err}"));
    let n = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    (line.to_string(), n)
}

/// A caller that keeps its `Method` and `Constructor` objects (as Groovy's
/// `CachedMethod` and frameworks' handler tables do) costs the agent one
/// call per target and session: the probe class remembers the objects whose
/// targets were handed over, and their later calls stay in Java. Of the 150
/// reflective calls of 50 root calls through three kept objects, only the
/// first of each reaches the agent (named through JVMTI); none comes back
/// to its table of targets handed over. Without the Java-side check every
/// later call reached the agent (about 147 answered from its table).
#[test]
fn reflective_targets_kept_by_the_caller_stay_in_java() {
    let _serial = serial();
    for jdk in every_jdk("reflective_targets_kept_by_the_caller_stay_in_java") {
        let classes = fixture_classes(&jdk);
        let (got, err) = debug_session(
            &jdk,
            classes.path(),
            ("reveal.ReflectKept::root", "kept", 50),
            &[],
        );
        for callee in ["target", "scaled", "<init>"] {
            assert_eq!(
                got.get(&format!("ReflectKept.root > ReflectKept.{callee}")),
                Some(&50),
                "JDK {}: {got:#?}",
                jdk.major
            );
        }
        let (line, n) = debug_numbers(&err, "sprig agent: reflective calls: ");
        let (named, answered) = (n[0], n[1]);
        println!("JDK {}: reflective calls: {line}", jdk.major);
        assert!((3..=6).contains(&named), "JDK {}: {line}", jdk.major);
        assert!(answered <= 3, "JDK {}: {line}", jdk.major);
    }
}

/// A root that defines a class on every call (a fresh loader defines
/// `reveal.Plugin`, as a scripting engine compiling a script per unit
/// does): the class file load hook and the linking of each new class run
/// on the root's thread, and sprig instruments the class there. The agent
/// counts that time (its debug line) and sends it as adjust-time charged
/// to the frames open then, so the root's subtree holds at least all of it
/// as adjust-time: its charged time leaves it out.
#[test]
fn classes_defined_inside_a_root_are_charged_to_the_profiler() {
    let _serial = serial();
    for (jdk, timing) in every_jdk("classes_defined_inside_a_root_are_charged_to_the_profiler")
        .into_iter()
        .flat_map(|jdk| [(jdk.clone(), "exact"), (jdk, "sampled")])
    {
        let classes = fixture_classes(&jdk);
        let root = "reveal.Define::root";
        let (report, mut jvm) = armed_debug_session(
            &jdk,
            classes.path(),
            root,
            &["--timing", timing],
            &[],
            |jvm| run(jvm, "define", 20, 1),
        );
        let err = debug_lines_at_end(&mut jvm, root);
        let got = paths(&report);
        assert_eq!(got.get("Define.root"), Some(&20), "{got:#?}");
        assert_eq!(
            got.get("Define.root > Define.define"),
            Some(&20),
            "{got:#?}"
        );
        let (line, n) = debug_numbers(
            &err,
            "sprig agent: class loads and links inside root contexts: ",
        );
        let (events, charged_us) = (n[0], n[1]);
        // Each call defines a class and links it, at least.
        assert!(events >= 40, "JDK {}: {line}", jdk.major);
        let (mut adjust_ns, mut raw_ns, mut total_ns) = (0u64, 0u64, 0u64);
        for t in report["threads"].as_array().expect("threads") {
            for r in t["roots"].as_array().expect("roots") {
                if r["method"] == "root" {
                    adjust_ns += r["adjust_ns"].as_u64().expect("adjust_ns");
                    raw_ns += r["raw_total_ns"].as_u64().expect("raw_total_ns");
                    total_ns += r["total_ns"].as_u64().expect("total_ns");
                }
            }
        }
        println!(
            "JDK {} ({timing}): {line}; root: {raw_ns} ns measured, {adjust_ns} ns adjust-time, \
             {total_ns} ns charged",
            jdk.major
        );
        // Everything charged out on the root's thread is inside the root
        // (the clocks differ: the agent counts with its own, 10% slack).
        assert!(
            adjust_ns >= charged_us * 1000 * 9 / 10,
            "JDK {}: {line}; root adjust-time {adjust_ns} ns",
            jdk.major
        );
        // Under sampled timing the samples that fall in the profiler's
        // work are credited where they land: only exact timing's charged
        // time leaves the adjust-time out.
        if timing == "exact" {
            assert!(total_ns + adjust_ns <= raw_ns, "JDK {}", jdk.major);
        }
    }
}

/// `n` runs of one scenario under `sprig profile --root <root>` plus
/// `extra`, the root's class not loaded yet: the tree's call counts, and
/// the target's debug lines.
fn debug_session(
    jdk: &Jdk,
    classes: &Path,
    spec: (&str, &str, u32),
    extra: &[&str],
) -> (BTreeMap<String, u64>, String) {
    debug_session_with(jdk, classes, spec, extra, &[])
}

/// [`debug_session`] with `env` added to the target JVM's environment.
fn debug_session_with(
    jdk: &Jdk,
    classes: &Path,
    (root, scenario, n): (&str, &str, u32),
    extra: &[&str],
    env: &[(&str, &str)],
) -> (BTreeMap<String, u64>, String) {
    let (report, mut jvm) = armed_debug_session(jdk, classes, root, extra, env, |jvm| {
        run(jvm, scenario, n, 1)
    });
    let err = debug_lines_at_end(&mut jvm, &format!("{root} {extra:?}"));
    (paths(&report), err)
}

/// A session on a driver JVM (with `env` and the agent's debug lines) whose
/// root class is not loaded yet: `drive` runs once the root is armed, then
/// the session stops. The report, and the JVM still running.
fn armed_debug_session(
    jdk: &Jdk,
    classes: &Path,
    root: &str,
    extra: &[&str],
    env: &[(&str, &str)],
    drive: impl FnOnce(&mut Proc),
) -> (Value, Proc) {
    let mut env = env.to_vec();
    env.push(("SPRIG_AGENT_DEBUG", "1"));
    let mut jvm = start_driver_with(jdk, classes, &env);
    let out_dir = TempDir::new("reveal-out");
    let out = out_dir.path().join("debug.json");
    let mut cmd = Command::new(sprig_bin());
    cmd.arg("profile")
        .arg(jvm.pid().to_string())
        .args(["--root", root])
        .args(sprig_options(extra))
        .args(["--format", "json", "-o"])
        .arg(&out);
    let mut sprig = Proc::spawn("sprig", cmd);
    // The root is armed, and instrumented as its class loads.
    let armed = format!("{root} matches no loaded class");
    sprig.wait_for("the root armed", LONG, |l| l.contains(&armed));
    drive(&mut jvm);
    (stop_profile(sprig, &out), jvm)
}

/// Dormant probes given ahead (the default with dormant probes): at the
/// start every class the roots can reach gets dormant probes in a few
/// batches, so revelation switches methods on in place instead of
/// redefining class after class as the calls go deeper. Against the
/// target's `SPRIG_AGENT_NO_PREFETCH` (revelation as it goes): the same
/// exact tree ([`session`] checks it), fewer redefinition batches, more
/// methods switched on in place, and only called methods instrumented.
#[test]
fn dormant_probes_ahead_keep_the_tree_with_fewer_redefinitions() {
    let _serial = serial();
    for jdk in every_jdk("dormant_probes_ahead_keep_the_tree_with_fewer_redefinitions") {
        let classes = fixture_classes(&jdk);
        let ahead = session_with(&jdk, classes.path(), true, &[], &[]);
        let going = session_with(
            &jdk,
            classes.path(),
            true,
            &[],
            &[("SPRIG_AGENT_NO_PREFETCH", "1")],
        );
        let batches = |s: &Value| s["redefinition_batches"].as_u64().expect("batches");
        let in_place = |s: &Value| {
            s["revelation"]["activated_in_place"]
                .as_u64()
                .expect("activated_in_place")
        };
        let count = |s: &Value, k: &str| s[k].as_u64().expect("count");
        eprintln!(
            "JDK {}: batches {} ahead, {} as it goes; switched on in place {} and {}; \
             instrumented/called {}/{} and {}/{}",
            jdk.major,
            batches(&ahead),
            batches(&going),
            in_place(&ahead),
            in_place(&going),
            count(&ahead, "instrumented_methods"),
            count(&ahead, "called_methods"),
            count(&going, "instrumented_methods"),
            count(&going, "called_methods"),
        );
        assert!(
            batches(&ahead) < batches(&going),
            "JDK {}: {ahead}\n{going}",
            jdk.major
        );
        assert!(
            in_place(&ahead) > in_place(&going),
            "JDK {}: {ahead}\n{going}",
            jdk.major
        );
        // What class hierarchy analysis reaches stays dormant until it
        // runs: every instrumented method was called, but for the two
        // reflection entry points the session watches. As it goes, the
        // overrides it reaches get probes that record at once.
        assert_eq!(
            count(&ahead, "instrumented_methods"),
            count(&ahead, "called_methods") + 2,
            "JDK {}: {ahead}",
            jdk.major
        );
        assert!(
            count(&going, "instrumented_methods") > count(&ahead, "instrumented_methods"),
            "JDK {}: {ahead}\n{going}",
            jdk.major
        );
    }
}

/// Dormant probes ahead when no root's class is loaded at the start: the
/// agent's control thread gives them once the root's class loads (its
/// first call). `Fan.root` returns at once on its first run, then goes down
/// another of four branches on each run, each branch a class calling one
/// more (all loaded at the driver's start). Revealed as they run, the
/// second-level classes take a redefinition each, at their branch's first
/// run; given ahead, they are redefined together before the branches run,
/// and their methods are switched on in place. The tree is exact either way.
#[test]
fn dormant_probes_ahead_come_once_a_cold_root_loads() {
    const ROOT: &str = "reveal.Fan::root";
    const AHEAD: &str = "sprig agent: dormant probes ahead:";
    let _serial = serial();
    for jdk in every_jdk("dormant_probes_ahead_come_once_a_cold_root_loads") {
        let classes = fixture_classes(&jdk);
        let fan = |env: &[(&str, &str)]| {
            let prefetch = !env.iter().any(|(k, _)| *k == "SPRIG_AGENT_NO_PREFETCH");
            let mut given = None;
            let (report, mut jvm) =
                armed_debug_session(&jdk, classes.path(), ROOT, &[], env, |jvm| {
                    // Nothing to start from before the root's class loads.
                    assert!(
                        !jvm.stderr().contains(AHEAD),
                        "JDK {}: {}",
                        jdk.major,
                        jvm.stderr()
                    );
                    run(jvm, "fan", 1, 1);
                    if prefetch {
                        let deadline = std::time::Instant::now() + LONG;
                        while !jvm.stderr().contains(AHEAD) && std::time::Instant::now() < deadline
                        {
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        let err = jvm.stderr();
                        let line = err
                            .lines()
                            .find(|l| l.starts_with(AHEAD))
                            .unwrap_or_else(|| {
                                panic!("JDK {}: no dormant probes ahead:\n{err}", jdk.major)
                            })
                            .to_string();
                        given = Some(line);
                    }
                    run(jvm, "fan", 8, 1);
                });
            jvm.send("exit");
            let _ = jvm.wait_exit(Duration::from_secs(10));
            (paths(&report), report["stats"].clone(), given)
        };
        let (ahead, ahead_stats, line) = fan(&[]);
        let (going, going_stats, _) = fan(&[("SPRIG_AGENT_NO_PREFETCH", "1")]);
        let mut want = BTreeMap::from([("Fan.root".to_string(), 9)]);
        for (b, m) in [("A", "one"), ("B", "two"), ("C", "three"), ("D", "four")] {
            let first = format!("Fan.root > FanLinks${b}.{m}");
            want.insert(format!("{first} > FanLinks${b}2.leaf"), 2);
            want.insert(first, 2);
        }
        assert_tree(&ahead, &want, &format!("JDK {} ahead", jdk.major));
        assert_tree(&going, &want, &format!("JDK {} as it goes", jdk.major));
        let line = line.expect("line");
        let batches = |s: &Value| s["redefinition_batches"].as_u64().expect("batches");
        let in_place = |s: &Value| {
            s["revelation"]["activated_in_place"]
                .as_u64()
                .expect("activated_in_place")
        };
        eprintln!(
            "JDK {}: {line}; batches {} ahead, {} as it goes; switched on in place {} and {}",
            jdk.major,
            batches(&ahead_stats),
            batches(&going_stats),
            in_place(&ahead_stats),
            in_place(&going_stats)
        );
        // The four second-level classes at least (the first level may have
        // been revealed by the root's first call before the control thread
        // came to it).
        let classes_given: u64 = line
            .split(", ")
            .find_map(|p| p.strip_suffix(" classes"))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("JDK {}: {line}", jdk.major));
        assert!(classes_given >= 4, "JDK {}: {line}", jdk.major);
        assert!(
            batches(&ahead_stats) + 2 < batches(&going_stats),
            "JDK {}: {ahead_stats}\n{going_stats}",
            jdk.major
        );
        // The four leaves, switched on in place when their branch first ran
        // (the first level was revealed by the root's first call).
        assert!(
            in_place(&ahead_stats) >= 4,
            "JDK {}: {ahead_stats}",
            jdk.major
        );
        assert_eq!(
            in_place(&going_stats),
            0,
            "JDK {}: {going_stats}",
            jdk.major
        );
        for s in [&ahead_stats, &going_stats] {
            assert_eq!(s["called_methods"], 9, "JDK {}: {s}", jdk.major);
            assert_eq!(s["instrumented_methods"], 9, "JDK {}: {s}", jdk.major);
        }
    }
}

/// With receiver checks, a method that holds dormant probes carries the
/// checks of its call sites too, so revealing it later (in place, no
/// redefinition) reveals what it calls by the receivers it sees, as for a
/// method revealed at once. `Seldom.seldom` is first called on the root's
/// third call: the tree is exact from that call on either way, and its
/// `Shape.area` call instruments the receiver's method only, where class
/// hierarchy analysis at its first call also instruments `Hexagon.area`
/// (loaded, never called).
#[test]
fn a_method_revealed_late_reveals_its_calls_by_their_receivers() {
    let _serial = serial();
    for jdk in every_jdk("a_method_revealed_late_reveals_its_calls_by_their_receivers") {
        let classes = fixture_classes(&jdk);
        let want = tree(
            &[
                ("Seldom.root", 6),
                ("Seldom.root > Seldom.often", 6),
                ("Seldom.root > Seldom.seldom", 4),
                ("Seldom.root > Seldom.seldom > Circle.area", 4),
            ],
            1,
        );
        let hexagon = "sprig agent: uncalled reveal/Hexagon::area()I";
        let seldom = ("reveal.Seldom::root", "seldom", 6);
        let (got, err) = debug_session(
            &jdk,
            classes.path(),
            seldom,
            &["--virtual-calls", "receiver"],
        );
        assert_eq!(got, want, "JDK {} receiver:\n{err}", jdk.major);
        assert!(!err.contains(hexagon), "JDK {} receiver:\n{err}", jdk.major);
        // Class hierarchy analysis as revelation goes (no dormant probes
        // ahead, which would leave `Hexagon.area` dormant too).
        let (got, err) = debug_session_with(
            &jdk,
            classes.path(),
            seldom,
            &[],
            &[("SPRIG_AGENT_NO_PREFETCH", "1")],
        );
        assert_eq!(got, want, "JDK {} hierarchy:\n{err}", jdk.major);
        assert!(err.contains(hexagon), "JDK {} hierarchy:\n{err}", jdk.major);
    }
}

/// A watched call that sees more receiver classes taking turns than the
/// probe remembers stops calling into the agent after `MAX_REPEATS`
/// repeats; what it dispatches to is then left to the dormant probes of
/// the classes it can reach, each method revealed as a root context first
/// enters it, and a class loaded later that overrides the method gets them
/// as it loads. `Shape.describe` calls `area()` on a Circle, a Square and a
/// Cube in turn 40 times, then on an Octagon too (loaded only then) 40
/// times: the tree is exact, the Octagon's first call included, and
/// `Hexagon.area` (loaded, never called), which class hierarchy analysis
/// adds (as it does with `--no-dormant`), is not instrumented.
#[test]
fn a_call_with_receivers_taking_turns_is_left_to_dormant_probes() {
    let _serial = serial();
    for jdk in every_jdk("a_call_with_receivers_taking_turns_is_left_to_dormant_probes") {
        let classes = fixture_classes(&jdk);
        let turns = ("reveal.Virtual::root", "turns", 40);
        let (got, err) = debug_session(
            &jdk,
            classes.path(),
            turns,
            &["--virtual-calls", "receiver"],
        );
        // 40 times: one root call over the three shapes, one over the four.
        let want = tree(
            &[
                ("Virtual.root", 2),
                ("Virtual.root > Shape.describe", 7),
                ("Virtual.root > Shape.describe > Circle.area", 2),
                ("Virtual.root > Shape.describe > Square.area", 2),
                ("Virtual.root > Shape.describe > Cube.area", 2),
                ("Virtual.root > Shape.describe > Cube.area > Square.area", 2),
                ("Virtual.root > Shape.describe > Octagon.area", 1),
                (
                    "Virtual.root > Shape.describe > Octagon.area > Octagon.sides",
                    1,
                ),
            ],
            40,
        );
        assert_eq!(got, want, "JDK {}:\n{err}", jdk.major);
        assert!(
            err.contains("1 past 64 repeats") && err.contains("1 calls left to their entries"),
            "JDK {}: the area() call was not left to its entries:\n{err}",
            jdk.major
        );
        let hexagon = "sprig agent: uncalled reveal/Hexagon::area()I";
        assert!(!err.contains(hexagon), "JDK {}:\n{err}", jdk.major);
        // Without dormant probes the site goes to class hierarchy
        // analysis: the same tree, Hexagon.area instrumented.
        let (got, err) = debug_session(
            &jdk,
            classes.path(),
            turns,
            &["--virtual-calls", "receiver", "--no-dormant"],
        );
        assert_eq!(got, want, "JDK {} --no-dormant:\n{err}", jdk.major);
        assert!(
            err.contains("0 calls left to their entries") && err.contains(hexagon),
            "JDK {} --no-dormant:\n{err}",
            jdk.major
        );
    }
}

/// A session leaves nothing behind that keeps a class from unloading: a
/// receiver the checks saw, of a class a loader of its own defined (and
/// sprig instrumented), unloads after the detach once the program drops
/// the loader; in both modes.
#[test]
fn a_class_seen_by_the_checks_unloads_after_the_detach() {
    let _serial = serial();
    let jdk = sprig_tests::jdk17();
    let classes = fixture_classes(&jdk);
    for extra in [&["--virtual-calls", "receiver"][..], &[]] {
        let mut jvm = start_driver(&jdk, classes.path());
        let out_dir = TempDir::new("reveal-out");
        let out = out_dir.path().join("plugin.json");
        let sprig = start_profile(jvm.pid(), &out, extra);
        jvm.send("plugin 5");
        jvm.wait_for("plugin", LONG, |l| l.starts_with("plugin "));
        let got = paths(&stop_profile(sprig, &out));
        // 5 root calls, twice() greeting twice each.
        assert_eq!(
            got.get("Iface.root > Greeter.twice > Plugin.greet"),
            Some(&10),
            "{extra:?}: {got:#?}"
        );
        jvm.send("unloaded");
        let line = jvm.wait_for("unloaded", LONG, |l| l.starts_with("unloaded "));
        assert_eq!(
            line, "unloaded true",
            "{extra:?}: the plugin's loader is still alive"
        );
        jvm.send("exit");
        let _ = jvm.wait_exit(Duration::from_secs(10));
    }
}

#[test]
fn roots_only_instruments_only_the_roots() {
    let _serial = serial();
    let jdk = sprig_tests::jdk17();
    let classes = fixture_classes(&jdk);
    let mut jvm = start_driver(&jdk, classes.path());
    let out_dir = TempDir::new("reveal-out");
    let out = out_dir.path().join("report.json");
    let sprig = start_profile(jvm.pid(), &out, &["--roots-only"]);
    run(&mut jvm, "virtual", 5, 1);
    let report = stop_profile(sprig, &out);
    let got = paths(&report);
    assert_eq!(got, BTreeMap::from([("Virtual.root".to_string(), 5)]));
    jvm.send("exit");
    let _ = jvm.wait_exit(Duration::from_secs(10));
}

/// Many threads make their first calls at once: every thread's stream stays
/// well formed and every count is exact (a thread entering a method whose
/// callees another thread is still instrumenting waits for it). A second
/// run, all revealed, is exact too.
#[test]
fn concurrent_first_calls() {
    concurrent(&[]);
}

/// The same with receiver checks: 8 threads reach each check at once, and
/// the second profiling session starts from the checks' memory cleared
/// (site ids are handed out anew).
#[test]
fn concurrent_first_calls_with_receiver_checks() {
    concurrent(&["--virtual-calls", "receiver"]);
}

fn concurrent(extra: &[&str]) {
    let _serial = serial();
    // JDK 17 takes the JNI probes, JDK 25 the FFM fast path, which hands
    // first calls and dormant entries to the JNI path.
    for jdk in every_jdk("concurrent first calls") {
        concurrent_on(&jdk, extra);
    }
}

fn concurrent_on(jdk: &Jdk, extra: &[&str]) {
    let classes = fixture_classes(jdk);
    let mut jvm = start_driver(jdk, classes.path());
    let out_dir = TempDir::new("reveal-out");
    let (cold, warm) = (
        out_dir.path().join("cold.json"),
        out_dir.path().join("warm.json"),
    );
    let sprig = start_profile(jvm.pid(), &cold, extra);
    // `unlinked`: 8 threads link the worker class at once (ClassPrepare on
    // one of them, the others wait for the JVM's class lock). `ranked`: 8
    // threads enter a dormant method inside their root contexts at once.
    for s in [
        "virtual", "iface", "lambda", "throws", "early", "ranked", "unlinked",
    ] {
        run(&mut jvm, s, 50, 8);
    }
    let report = stop_profile(sprig, &cold);
    let got = paths(&report);
    let want = expected(400);
    let mut scenario_want: BTreeMap<String, u64> = want
        .iter()
        .filter(|(p, _)| {
            ["Virtual.", "Iface.", "Lambdas.", "Exc.", "Ranked."]
                .iter()
                .any(|r| p.starts_with(r))
                || p.as_str() == "Late.root > EarlyWorker.work"
                || p.as_str() == "Late.root > UnlinkedWorker.work"
        })
        .map(|(p, n)| (p.clone(), *n))
        .collect();
    scenario_want.insert("Late.root".into(), 800);
    // A thread entering a method whose callees another thread is still
    // instrumenting waits for it: nothing is missed.
    assert_tree(
        &got,
        &scenario_want,
        "first profiling session, 8 threads at once",
    );
    // Attach again: the classes are loaded and were instrumented before.
    let sprig = start_profile(jvm.pid(), &warm, extra);
    run(&mut jvm, "virtual", 1, 1);
    run(&mut jvm, "virtual", 25, 8);
    let got = paths(&stop_profile(sprig, &warm));
    let want: BTreeMap<String, u64> = expected(201)
        .into_iter()
        .filter(|(p, _)| p.starts_with("Virtual."))
        .collect();
    assert_tree(&got, &want, "second profiling session");
    jvm.send("exit");
    let _ = jvm.wait_exit(Duration::from_secs(10));
}
