//! `--locks` on real JVMs (JDK 17 and 25): the waits of a root's threads
//! as their own rows under the node that waited, with the monitor's class,
//! the kind of wait and its time, against what the fixture measures
//! itself (`fixtures/src/fixtures/Locks.java`): contended monitors,
//! `Object.wait`, `ReentrantLock` parks, `Thread.sleep`, `System.gc()`, and
//! a method that spins, collects, sleeps and parks, whose own time plus
//! waits and GC pause is its wall time; the owner of a contended monitor
//! and of a `ReentrantLock` a park waited for (the thread and where it
//! held it) and the lock view.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use sprig_tests::{Jdk, Proc, TempDir, fixture_classes, run_sprig, sprig_bin};

const LONG: Duration = Duration::from_secs(60);
/// How long the fixture's other thread holds the monitor, and how long
/// the producer waits before it notifies (ms).
const HOLD_MS: u64 = 300;

/// The node at `path` (`Class.method` from a root down, class names with
/// `fixtures.` cut) in any thread of a JSON report.
fn node_at<'a>(report: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let name = |n: &Value| {
        format!(
            "{}.{}",
            n["class"]
                .as_str()
                .unwrap_or("")
                .trim_start_matches("fixtures."),
            n["method"].as_str().unwrap_or("")
        )
    };
    for t in report["threads"].as_array()? {
        let mut level: Vec<&Value> = t["roots"].as_array()?.iter().collect();
        let mut found = None;
        for (i, want) in path.iter().enumerate() {
            let n = level.iter().find(|n| name(n) == *want)?;
            if i + 1 == path.len() {
                found = Some(*n);
            } else {
                level = n["children"].as_array()?.iter().collect();
            }
        }
        if found.is_some() {
            return found;
        }
    }
    None
}

/// The fixture's own figure `key NS` from its output.
fn measured(p: &Proc, key: &str) -> u64 {
    p.stdout()
        .lines()
        .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {key} line:\n{}", p.transcript()))
}

fn within(got: u64, want: u64, share: f64) -> bool {
    (got as f64 - want as f64).abs() <= share * want as f64
}

/// The contention entry of `node` for `monitor` and `kind`, with a row
/// for it among the node's children (whose time is the entry's, in exact
/// timing).
fn contention<'a>(node: &'a Value, monitor: &str, kind: &str, report: &Value) -> &'a Value {
    let exact = report["timing"] == "exact";
    let entry = node["contention"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["monitor"] == monitor && c["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} on {monitor} at {node}\n{report}"));
    let row = match kind {
        "blocked" => format!("(blocked on {monitor})"),
        "waiting" => format!("(waiting on {monitor})"),
        "parked" => format!("(parked: {monitor})"),
        "sleeping" => "(sleeping)".to_owned(),
        _ => unreachable!(),
    };
    assert!(
        node["children"].as_array().into_iter().flatten().any(
            |c| c["method"] == row.as_str() && (!exact || c["total_ns"] == entry["blocked_ns"])
        ),
        "no row {row} with the entry's time under {node}"
    );
    entry
}

#[test]
fn waits_land_under_the_node_that_waited() {
    for jdk in sprig_tests::test_jdks("waits_land_under_the_node_that_waited") {
        waits_land_under_the_node_that_waited_on(&jdk, "exact");
    }
}

/// Under sampled timing (the default) the waits are the same rows; the
/// samples the method got while it waited move to them. GC pauses are
/// left out (exact timing only).
#[test]
fn waits_land_under_the_node_that_waited_sampled() {
    for jdk in sprig_tests::test_jdks("waits_land_under_the_node_that_waited_sampled") {
        waits_land_under_the_node_that_waited_on(&jdk, "sampled");
    }
}

fn waits_land_under_the_node_that_waited_on(jdk: &Jdk, timing: &str) {
    let classes = fixture_classes(jdk);
    let tmp = TempDir::new("locks");
    let out = tmp.path().join("locks.sprig");
    let mut cmd = Command::new(sprig_bin());
    cmd.args([
        "run",
        "--locks",
        "--timing",
        timing,
        "--root",
        "fixtures.Locks::blockedRoot",
        "--root",
        "fixtures.Locks::waitRoot",
        "--root",
        "fixtures.Locks::gcRoot",
        "--root",
        "fixtures.Locks::parkRoot",
        "--root",
        "fixtures.Locks::sleepRoot",
        "--root",
        "fixtures.Locks::mixedRoot",
        "-o",
    ])
    .arg(&out)
    .arg("--")
    .arg(jdk.java())
    .arg("-Xlog:gc")
    .arg("-cp")
    .arg(classes.path())
    .arg("fixtures.Locks")
    .arg(HOLD_MS.to_string());
    let mut p = Proc::spawn("sprig-run-locks", cmd);
    let status = p.wait_exit(LONG).expect("sprig run ends with the JVM");
    assert!(status.success(), "{status}\n{}", p.transcript());
    let blocked = measured(&p, "blocked ");
    let waited = measured(&p, "waited ");
    let snapshot = out.to_str().unwrap();
    let (code, json, err) = run_sprig(&["report", snapshot, "--format", "json"], LONG);
    assert_eq!(code, 0, "{err}");
    let report: Value = serde_json::from_str(&json).unwrap();

    let enter = node_at(&report, &["Locks.blockedRoot", "Locks.enter"])
        .unwrap_or_else(|| panic!("no blockedRoot > enter:\n{report}"));
    let c = contention(enter, "fixtures.Locks$Mon", "blocked", &report);
    assert_eq!(c["count"], 1, "{enter}");
    let got_blocked = c["blocked_ns"].as_u64().unwrap();
    assert!(
        within(got_blocked, blocked, 0.10),
        "JDK {}: blocked {got_blocked} ns against {blocked} ns measured by the fixture\n{enter}",
        jdk.major
    );
    // The node's self time is its own work, not the wait.
    let own = enter["self_ns"].as_u64().unwrap();
    assert!(
        own < blocked / 10,
        "self {own} ns of {blocked} ns blocked\n{enter}"
    );
    let (code, text, err) = run_sprig(&["report", snapshot], LONG);
    assert_eq!(code, 0, "{err}");
    owner_named(jdk, &report, c, &text);

    let consume = node_at(&report, &["Locks.waitRoot", "Locks.consume"])
        .unwrap_or_else(|| panic!("no waitRoot > consume:\n{report}"));
    let c = contention(consume, "fixtures.Locks$Box", "waiting", &report);
    assert_eq!(c["count"], 1, "{consume}");
    let got = c["blocked_ns"].as_u64().unwrap();
    assert!(
        within(got, waited, 0.10),
        "JDK {}: waited {got} ns against {waited} ns measured by the fixture\n{consume}",
        jdk.major
    );
    let own = consume["self_ns"].as_u64().unwrap();
    assert!(
        own < waited / 10,
        "self {own} ns of {waited} ns waiting\n{consume}"
    );

    // A ReentrantLock another thread holds: the lock() parks, on the
    // lock's synchronizer (AQS), under the node that called lock() (or
    // the JDK's lock methods below it, when revelation instruments them).
    let parked = measured(&p, "parked ");
    let lock_it = node_at(&report, &["Locks.parkRoot", "Locks.lockIt"])
        .unwrap_or_else(|| panic!("no parkRoot > lockIt:\n{report}"));
    let got_parked = waits_below(lock_it, "parked", SYNC, &report);
    assert!(
        within(got_parked, parked, 0.10),
        "JDK {}: parked {got_parked} ns against {parked} ns measured by the fixture\n{lock_it}",
        jdk.major
    );
    park_owner_named(jdk, &report, lock_it, &text);
    // Thread.sleep: a (sleeping) row under the node that slept.
    let slept = measured(&p, "slept ");
    let nap = node_at(&report, &["Locks.sleepRoot", "Locks.nap"])
        .unwrap_or_else(|| panic!("no sleepRoot > nap:\n{report}"));
    let got_slept = waits_below(nap, "sleeping", "", &report);
    assert!(
        within(got_slept, slept, 0.10),
        "JDK {}: slept {got_slept} ns against {slept} ns measured by the fixture\n{nap}",
        jdk.major
    );
    let own = nap["self_ns"].as_u64().unwrap();
    assert!(
        own < slept / 10,
        "self {own} ns of {slept} ns asleep\n{nap}"
    );

    if timing != "exact" {
        eprintln!(
            "JDK {} sampled: blocked {got_blocked} of {blocked} ns, waited {got} of {waited} ns, \
             parked {got_parked} of {parked} ns, slept {got_slept} of {slept} ns",
            jdk.major
        );
        return;
    }
    // One method that spins HOLD ms, calls System.gc(), sleeps and parks:
    // its own time plus its waits and its GC pause is its wall time within
    // 2%, its own time the spin, and its wall time the fixture's.
    let mixed = measured(&p, "mixed ");
    let root =
        node_at(&report, &["Locks.mixedRoot"]).unwrap_or_else(|| panic!("no mixedRoot:\n{report}"));
    let total = root["total_ns"].as_u64().unwrap();
    let own = root["self_ns"].as_u64().unwrap();
    let waits: u64 = root["contention"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["blocked_ns"].as_u64().unwrap())
        .sum();
    let below = waits_below(root, "parked", SYNC, &report);
    let slept_mixed = waits_below(root, "sleeping", "", &report);
    // Its System.gc(): a (GC pause) row, among the waits of the 2% check.
    let gc_mixed: u64 = root["contention"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["kind"] == "gc")
        .map(|c| c["blocked_ns"].as_u64().unwrap())
        .sum();
    assert!(
        below > 0 && slept_mixed > 0 && gc_mixed > 0,
        "mixedRoot parked {below} ns, slept {slept_mixed} ns, GC pause {gc_mixed} ns\n{root}"
    );
    assert!(
        within(own + waits, total, 0.02),
        "JDK {}: self {own} + waits {waits} ns against mixedRoot's {total} ns\n{root}",
        jdk.major
    );
    assert!(
        within(total, mixed, 0.02),
        "JDK {}: mixedRoot {total} ns against {mixed} ns measured by the fixture\n{root}",
        jdk.major
    );
    let spin = Duration::from_millis(HOLD_MS).as_nanos() as u64;
    assert!(
        within(own, spin, 0.10),
        "JDK {}: mixedRoot's self {own} ns against its {spin} ns spin\n{root}",
        jdk.major
    );
    // System.gc() in a root: the pause is a `(GC pause)` row under it.
    let gc = measured(&p, "gc ");
    let (pause, all_pauses) = logged_pauses(&p);
    let root =
        node_at(&report, &["Locks.gcRoot"]).unwrap_or_else(|| panic!("no gcRoot:\n{report}"));
    let row = root["children"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["method"] == "(GC pause)")
        .unwrap_or_else(|| panic!("no (GC pause) under gcRoot: {root}"));
    let in_row = row["total_ns"].as_u64().unwrap();
    assert!(
        in_row as f64 >= 0.9 * pause as f64 && in_row as f64 <= 1.1 * all_pauses as f64,
        "JDK {}: (GC pause) {in_row} ns against the JVM's pause of {pause} ns ({all_pauses} ns \
         all pauses)\n{root}",
        jdk.major
    );
    assert!(in_row <= gc, "(GC pause) {in_row} ns, System.gc() {gc} ns");
    assert_eq!(root["contention"][0]["kind"], "gc", "{root}");
    eprintln!(
        "JDK {}: blocked {got_blocked} of {blocked} ns, waited {got} of {waited} ns, \
         GC pause {in_row} of {pause} ns (System.gc() {gc} ns), parked {got_parked} of \
         {parked} ns, slept {got_slept} of {slept} ns, mixedRoot {total} ns (self {own} + \
         waits {waits}) of {mixed} ns",
        jdk.major
    );
}

/// The blocker class of a `ReentrantLock`'s park: its default (unfair)
/// synchronizer.
const SYNC: &str = "java.util.concurrent.locks.ReentrantLock$NonfairSync";

/// The time of the waits of `kind` on `monitor` (any for "") at `node` and
/// the nodes below it, each with its row ([`contention`]); panics when
/// there are none.
fn waits_below(node: &Value, kind: &str, monitor: &str, report: &Value) -> u64 {
    fn walk(n: &Value, kind: &str, monitor: &str, report: &Value, sum: &mut (u64, u32)) {
        for c in n["contention"].as_array().into_iter().flatten() {
            if c["kind"] == kind && (monitor.is_empty() || c["monitor"] == monitor) {
                let m = c["monitor"].as_str().unwrap_or("");
                let entry = contention(n, m, kind, report);
                sum.0 += entry["blocked_ns"].as_u64().unwrap();
                sum.1 += 1;
            }
        }
        for child in n["children"].as_array().into_iter().flatten() {
            walk(child, kind, monitor, report, sum);
        }
    }
    let mut sum = (0, 0);
    walk(node, kind, monitor, report, &mut sum);
    assert!(
        sum.1 > 0,
        "no {kind} wait on {monitor:?} at or below {node}\n{report}"
    );
    sum.0
}

/// The System.gc() pause the JVM logged (`-Xlog:gc`: `... Pause Full
/// (System.gc()) ... 4.567ms`) and the sum of every pause it logged, in ns.
fn logged_pauses(p: &Proc) -> (u64, u64) {
    let ms = |l: &str| -> Option<u64> {
        let v: f64 = l.rsplit(' ').next()?.strip_suffix("ms")?.parse().ok()?;
        Some((v * 1e6) as u64)
    };
    let lines: Vec<String> = p
        .stdout()
        .lines()
        .filter(|l| l.contains("[gc]") && l.contains("Pause"))
        .map(str::to_owned)
        .collect();
    let pause = lines
        .iter()
        .filter(|l| l.contains("System.gc()"))
        .find_map(|l| ms(l))
        .unwrap_or_else(|| panic!("no System.gc() pause logged:\n{}", p.transcript()));
    (pause, lines.iter().filter_map(|l| ms(l)).sum())
}

/// Where the fixture's "holder" thread holds `Mon` while `enter` blocks:
/// `holdMon` > `sleepMs` (the JDK's sleep frames are left out).
const HOLDER_CONTEXT: &str = "fixtures.Locks.sleepMs < fixtures.Locks.holdMon";

/// The contended enter of `enter` (its contention entry `c`) names the
/// thread that held `Mon` and where: in the entry's `owners`, in the
/// top-level lock view (`locks`, whose totals are the sum of the per-node
/// rows of that monitor and kind) and in the text report's `held by`
/// line (`text`).
fn owner_named(jdk: &Jdk, report: &Value, c: &Value, text: &str) {
    let owners = c["owners"]
        .as_array()
        .unwrap_or_else(|| panic!("JDK {}: no owners in {c}", jdk.major));
    assert_eq!(owners.len(), 1, "{c}");
    let o = &owners[0];
    assert_eq!(o["thread"], "holder", "{c}");
    assert_eq!(o["context"], HOLDER_CONTEXT, "{c}");
    assert_eq!(o["waits"], 1, "{c}");
    assert_eq!(o["blocked_ns"], c["blocked_ns"], "{c}");

    // The lock view: the sum of the rows on Mon over every node.
    fn rows(n: &Value, sum: &mut (u64, u64)) {
        for e in n["contention"].as_array().into_iter().flatten() {
            if e["monitor"] == "fixtures.Locks$Mon" && e["kind"] == "blocked" {
                sum.0 += e["count"].as_u64().unwrap();
                sum.1 += e["blocked_ns"].as_u64().unwrap();
            }
        }
        for k in n["children"].as_array().into_iter().flatten() {
            rows(k, sum);
        }
    }
    let mut sum = (0, 0);
    for t in report["threads"].as_array().unwrap() {
        for r in t["roots"].as_array().unwrap() {
            rows(r, &mut sum);
        }
    }
    let lock = report["locks"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|l| l["monitor"] == "fixtures.Locks$Mon" && l["kind"] == "blocked")
        .unwrap_or_else(|| panic!("JDK {}: no Mon in locks: {}", jdk.major, report["locks"]));
    assert_eq!(
        (lock["waits"].as_u64(), lock["blocked_ns"].as_u64()),
        (Some(sum.0), Some(sum.1)),
        "{lock}"
    );
    let ctx: Vec<&str> = lock["waiters"][0]["context"]
        .as_array()
        .unwrap_or_else(|| panic!("{lock}"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        ctx,
        ["fixtures.Locks.enter", "fixtures.Locks.blockedRoot"],
        "{lock}"
    );
    assert_eq!(lock["owners"][0]["thread"], "holder", "{lock}");
    assert_eq!(lock["owners"][0]["context"], HOLDER_CONTEXT, "{lock}");

    let held = held_by(text, "(blocked on fixtures.Locks$Mon)");
    let want = format!("holder in {HOLDER_CONTEXT}");
    assert!(
        held.iter().any(|l| l.ends_with(&want)),
        "JDK {}: no `held by {want}` under Mon: {held:?}",
        jdk.major
    );
}

/// The `held by ...` lines (what follows `held by `) under the line of
/// wait row `row` in the waits table of the text report `text`.
fn held_by(text: &str, row: &str) -> Vec<String> {
    let table = text
        .split("waits: all threads")
        .nth(1)
        .unwrap_or_else(|| panic!("no waits table:\n{text}"));
    let at = table
        .find(row)
        .unwrap_or_else(|| panic!("no {row} in:\n{table}"));
    table[at..]
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with(' ') && !l.contains("  ("))
        .filter_map(|l| Some(l.split_once("held by ")?.1.trim_end().to_owned()))
        .collect()
}

/// Where the fixture's "lock-holder" thread holds the `ReentrantLock`
/// while `lockIt` parks: in `keepLock` (sleeping in `sleepMs` below it,
/// or between two sleeps in `keepLock` itself).
const LOCK_HOLDER_FRAME: &str = "fixtures.Locks.keepLock";

/// The parks of `lock_it` on the `ReentrantLock`'s synchronizer name the
/// thread that held the lock when they began and where
/// (`getExclusiveOwnerThread` and its frames): in the contention entries'
/// `owners`, in the lock view (`locks`) and in the text report's
/// `held by` line under the park's row (`text`).
fn park_owner_named(jdk: &Jdk, report: &Value, lock_it: &Value, text: &str) {
    fn owners(n: &Value, out: &mut Vec<Value>, parks: &mut u64) {
        for e in n["contention"].as_array().into_iter().flatten() {
            if e["monitor"] == SYNC && e["kind"] == "parked" {
                *parks += e["count"].as_u64().unwrap();
                out.extend(e["owners"].as_array().into_iter().flatten().cloned());
            }
        }
        for k in n["children"].as_array().into_iter().flatten() {
            owners(k, out, parks);
        }
    }
    let (mut found, mut parks) = (Vec::new(), 0);
    owners(lock_it, &mut found, &mut parks);
    assert!(
        !found.is_empty(),
        "JDK {}: no owner of {parks} parks on {SYNC} at or below lockIt\n{lock_it}",
        jdk.major
    );
    for o in &found {
        assert_eq!(o["thread"], "lock-holder", "JDK {}: {o}", jdk.major);
        let ctx = o["context"].as_str().unwrap_or("");
        assert!(
            ctx.split(" < ").any(|f| f == LOCK_HOLDER_FRAME),
            "JDK {}: owner's context {ctx:?} without {LOCK_HOLDER_FRAME}\n{o}",
            jdk.major
        );
        assert!(o["waits"].as_u64().unwrap() >= 1, "{o}");
    }
    let lock = report["locks"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|l| l["monitor"] == SYNC && l["kind"] == "parked")
        .unwrap_or_else(|| panic!("JDK {}: no {SYNC} in locks: {}", jdk.major, report["locks"]));
    let first = &lock["owners"][0];
    assert_eq!(first["thread"], "lock-holder", "JDK {}: {lock}", jdk.major);
    assert!(
        first["context"]
            .as_str()
            .is_some_and(|c| c.contains(LOCK_HOLDER_FRAME)),
        "JDK {}: {lock}",
        jdk.major
    );
    let held = held_by(text, &format!("(parked: {SYNC})"));
    assert!(
        held.iter()
            .any(|l| l.starts_with("lock-holder in ") && l.contains(LOCK_HOLDER_FRAME)),
        "JDK {}: no `held by lock-holder in ..{LOCK_HOLDER_FRAME}..` under the park: {held:?}",
        jdk.major
    );
    eprintln!("JDK {}: parks on {SYNC} held by {held:?}", jdk.major);
}
