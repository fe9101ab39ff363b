//! `sprig sample` on real JVMs (JDK 17, and JDK 25 where installed), on
//! `fixtures.Shares`: a worker in `heavy` 70% and in `light` 30% of its
//! time under `work`, and a thread blocked on a monitor. The inclusive
//! shares come out within 5 points, the blocked thread counts in the wall
//! view and not in the CPU view, `--suggest-roots` names `work`, and the
//! JVM runs on with no class redefined. It needs the agent's stack
//! sampler (the `StackSamples` messages).

use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use sprig_tests::{Jdk, Proc, fixture_classes, run_sprig, test_jdks};

const CLASS: &str = "fixtures.Shares";

/// Starts the fixture with HotSpot logging every class redefinition.
fn start_shares(jdk: &Jdk, classes: &std::path::Path) -> Proc {
    let mut cmd = Command::new(jdk.java());
    cmd.arg("-Xlog:redefine+class*=info")
        .arg("-cp")
        .arg(classes)
        .arg(CLASS);
    let mut p = Proc::spawn(&format!("shares-jdk{}", jdk.major), cmd);
    p.wait_for("ready", Duration::from_secs(30), |l| l == "ready");
    p
}

/// `sprig sample PID --duration 3 --format json` with `extra`; the report.
fn sample(jvm: &Proc, extra: &[&str]) -> Value {
    let pid = jvm.pid().to_string();
    let mut args = vec![
        "sample",
        &pid,
        "--duration",
        "3",
        "--format",
        "json",
        "--interval",
        "5",
        "--quiet",
    ];
    args.extend_from_slice(extra);
    let (code, out, err) = run_sprig(&args, Duration::from_secs(60));
    assert_eq!(code, 0, "sprig {args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}\n{err}"))
}

/// A method's (self, total) samples in the report, (0, 0) when absent.
fn counts(report: &Value, method: &str) -> (u64, u64) {
    report["methods"]
        .as_array()
        .expect("methods")
        .iter()
        .find(|m| m["class"] == CLASS && m["method"] == method)
        .map_or((0, 0), |m| {
            (m["self"].as_u64().unwrap(), m["total"].as_u64().unwrap())
        })
}

fn thread<'r>(report: &'r Value, name: &str) -> &'r Value {
    report["threads"]
        .as_array()
        .expect("threads")
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no thread {name}: {}", report["threads"]))
}

#[test]
fn sample_finds_known_shares_the_blocked_thread_and_the_root() {
    for jdk in test_jdks("sample_finds_known_shares_the_blocked_thread_and_the_root") {
        let classes = fixture_classes(&jdk);
        let mut jvm = start_shares(&jdk, classes.path());

        // The CPU view (the default), with suggestions.
        let cpu = sample(&jvm, &["--suggest-roots", "5"]);
        let (_, work) = counts(&cpu, "work");
        let (_, heavy) = counts(&cpu, "heavy");
        let (_, light) = counts(&cpu, "light");
        assert!(
            work >= 300,
            "JDK {}: {work} samples in work: {cpu}",
            jdk.major
        );
        for (name, n, want) in [("heavy", heavy, 0.70), ("light", light, 0.30)] {
            let share = n as f64 / work as f64;
            assert!(
                (share - want).abs() <= 0.05,
                "JDK {}: {name} holds {share:.3} of work's samples, not {want} within 5 points ({n} of {work})",
                jdk.major
            );
        }
        assert_eq!(
            counts(&cpu, "waitForLock"),
            (0, 0),
            "JDK {}: the blocked thread in the CPU view",
            jdk.major
        );
        assert_eq!(thread(&cpu, "shares-blocked")["cpu_samples"], 0);
        let roots: Vec<&str> = cpu["suggested_roots"]
            .as_array()
            .expect("suggested_roots")
            .iter()
            .map(|r| r["root"].as_str().unwrap())
            .collect();
        assert!(
            roots.contains(&"fixtures.Shares::work"),
            "JDK {}: suggested {roots:?}",
            jdk.major
        );
        assert!(
            roots.iter().all(|r| !r.starts_with("java.")
                && !r.starts_with("jdk.")
                && *r != "fixtures.Shares::main"),
            "JDK {}: suggested {roots:?}",
            jdk.major
        );
        let w = cpu["suggested_roots"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["root"] == "fixtures.Shares::work")
            .unwrap();
        let cmd = w["command"].as_str().unwrap();
        assert_eq!(
            cmd,
            format!("sprig profile {} --root 'fixtures.Shares::work'", jvm.pid())
        );

        // The wall view: the blocked thread is there, in every round.
        let wall = sample(&jvm, &["--clock", "wall"]);
        let (_, blocked) = counts(&wall, "waitForLock");
        let rounds = wall["rounds"].as_u64().unwrap();
        assert!(
            blocked * 10 >= rounds * 9,
            "JDK {}: waitForLock in {blocked} of {rounds} rounds: {wall}",
            jdk.major
        );
        let t = thread(&wall, "shares-blocked");
        assert!(t["wall_samples"].as_u64().unwrap() >= blocked);
        assert_eq!(t["cpu_samples"], 0);

        // The JVM runs on, and no class was ever redefined.
        jvm.send("ping");
        jvm.wait_for("pong", Duration::from_secs(10), |l| l.starts_with("pong "));
        let log = jvm.stdout();
        assert!(
            !log.contains("redefine,class"),
            "JDK {}: HotSpot logged a redefinition:\n{log}",
            jdk.major
        );
    }
}
