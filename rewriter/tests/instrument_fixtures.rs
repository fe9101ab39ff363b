//! Instrumented Java fixtures run exactly like the originals under
//! `-Xverify:all` (same stdout, stderr and exit status), and every probe
//! fires the expected number of times: normal returns, exceptions crossing
//! instrumented frames, constructors, switches, methods near 64 KB, big ids.

mod instrument_util;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use instrument_util::*;
use sprig_rewriter::SkipReason;

const PROBE: &str = "sprig/test/Probe";

fn ids() -> HashMap<(&'static str, &'static str), u32> {
    HashMap::from([
        (("Main", "ri"), 70_000),
        (("Main", "rl"), 0xFFFF_FFFF),
        (("Main", "rf"), 0x8000_0000),
        (("Main", "rd"), 300),
        (("Main", "ra"), 100),
        (("Main", "rv"), 3),
        (("Main", "early"), 0),
        (("Main", "spin"), 5),
        (("Main", "ts0"), 1),
        (("Main", "ts1"), 100_001),
        (("Main", "ts2"), 1001),
        (("Main", "ts3"), 101),
        (("Main", "ls0"), 2),
        (("Main", "ls1"), 102),
        (("Main", "ls2"), 1002),
        (("Main", "ls3"), 100_002),
    ])
}

/// Expected (entries == exits) per method; every other called method is
/// only checked for balance.
fn expected() -> Vec<(&'static str, &'static str, &'static str, u64)> {
    vec![
        ("Main", "ri", "(I)I", 1),
        ("Main", "rl", "(J)J", 1),
        ("Main", "rf", "(F)F", 1),
        ("Main", "rd", "(D)D", 1),
        ("Main", "ra", "(Ljava/lang/String;)Ljava/lang/String;", 1),
        ("Main", "rv", "()V", 3),
        ("Main", "early", "(I)I", 4),
        ("Main", "spin", "(I)I", 1),
        ("Main", "ts0", "(I)I", 5),
        ("Main", "ts1", "(II)I", 5),
        ("Main", "ts2", "(JI)I", 5),
        ("Main", "ts3", "(III)I", 5),
        ("Main", "ls0", "(I)I", 7),
        ("Main", "ls1", "(II)I", 5),
        ("Main", "ls2", "(JI)I", 5),
        ("Main", "ls3", "(III)I", 5),
        ("Main", "sw", "(Ljava/lang/String;)Ljava/lang/String;", 3),
        ("Main", "thrower", "(I)V", 8),
        ("Main", "catcher", "()I", 2),
        ("Main", "fin", "(I)I", 2),
        ("Main", "sync", "(I)I", 1),
        ("Main$Base", "<init>", "(I)V", 6),
        ("Main$Kid", "<init>", "(I)V", 4),
        ("Main$Kid", "<init>", "()V", 1),
        ("Main$Kid", "<init>", "(Ljava/lang/String;)V", 1),
        ("Main$Kid", "check", "(I)I", 7),
        ("Main$Uninit", "<init>", "(Ljava/lang/Object;)V", 3),
        ("Main", "mk", "(Z)Ljava/lang/Object;", 2),
        ("Main", "tryNew", "(Ljava/lang/Runnable;)V", 7),
        ("Main", "annotated", "(Ljava/lang/Object;)I", 2),
        ("Main", "deep", "(I)V", 3),
        ("Main", "main", "([Ljava/lang/String;)V", 1),
        ("Main", "<init>", "()V", 0),
        ("Big", "run", "()Ljava/lang/String;", 1),
        ("Big", "nearHuge", "(I)I", 1),
        ("Big", "loopBig", "(I)I", 1),
        ("Big", "doWhileBig", "(IZ)I", 2),
        ("Big", "whileBig", "(I)I", 1),
        ("Big", "loopCond", "(I)I", 1),
    ]
}

struct Prepared {
    _tmp: TempDir,
    orig: std::path::PathBuf,
    inst: std::path::PathBuf,
    probe: std::path::PathBuf,
    id_of: HashMap<(String, String, String), u32>,
    summary: Summary,
}

fn prepare(release: &str) -> Prepared {
    let tmp = TempDir::new("fixture");
    let src = tmp.path().join("src");
    let orig = tmp.path().join("orig");
    let inst = tmp.path().join("inst");
    let probe = tmp.path().join("probe");
    for d in [&src, &orig, &inst, &probe] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(src.join("Big.java"), big_source()).unwrap();
    javac(
        "javac",
        &["-g", "--release", release],
        &[java_src("fixture/Main.java"), src.join("Big.java")],
        &orig,
    );
    compile_test_probe(&probe);
    let fixed = ids();
    let mut next = 1000u32;
    let mut id_of = HashMap::new();
    let summary = instrument_dir(&orig, &inst, &probe_set(PROBE), |c, m, d| {
        let id = fixed.get(&(c, m)).copied().unwrap_or_else(|| {
            next += 7;
            next
        });
        assert!(
            id_of
                .insert((c.to_string(), m.to_string(), d.to_string()), id)
                .is_none()
        );
        id
    });
    Prepared {
        _tmp: tmp,
        orig,
        inst,
        probe,
        id_of,
        summary,
    }
}

fn run_main(java: &str, cp: &str) -> (String, String, Option<i32>) {
    let o = run(
        Command::new(java).args(["-Xverify:all", "-Xshare:off", "-cp", cp, "Main"]),
        Duration::from_secs(120),
    );
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        o.status.code(),
    )
}

fn check(release: &str) {
    let p = prepare(release);
    let skipped: BTreeMap<String, SkipReason> = p.summary.skipped.iter().cloned().collect();
    assert!(
        matches!(skipped.get("Big.huge(I)I"), Some(SkipReason::TooLarge(n)) if *n > 65_535),
        "{skipped:?}"
    );
    assert_eq!(skipped.len(), 1, "unexpected skips: {skipped:?}");

    let mut javas = vec!["java".to_string()];
    if Path::new(JDK25).exists() {
        javas.push(format!("{JDK25}/bin/java"));
    } else {
        println!("JDK 25 not installed at {JDK25}: running on JDK 17 only");
    }
    for java in &javas {
        let (out0, err0, code0) = run_main(java, &p.orig.display().to_string());
        assert!(
            out0.contains("lambda 8 10"),
            "original run failed: {out0}\n{err0}"
        );
        assert!(
            err0.contains("UnsupportedOperationException: uncaught at depth"),
            "{err0}"
        );
        let cp = format!("{}:{}", p.inst.display(), p.probe.display());
        let (out1, err1, code1) = run_main(java, &cp);
        let (probe_lines, plain): (Vec<&str>, Vec<&str>) =
            out1.lines().partition(|l| l.starts_with("PROBE "));
        assert_eq!(
            plain.join("\n"),
            out0.trim_end(),
            "stdout differs under {java}; stderr: {err1}"
        );
        assert_eq!(
            err1, err0,
            "stderr (exceptions, line numbers) differs under {java}"
        );
        assert_eq!(code1, code0);

        let mut counts: HashMap<u32, (u64, u64)> = HashMap::new();
        for l in &probe_lines {
            let v: Vec<u64> = l.split(' ').skip(1).map(|x| x.parse().unwrap()).collect();
            counts.insert(u32::try_from(v[0]).unwrap(), (v[1], v[2]));
        }
        for (id, (e, x)) in &counts {
            assert_eq!(e, x, "id {id}: {e} entries but {x} exits under {java}");
        }
        for (c, m, d, n) in expected() {
            let id = p.id_of[&(c.to_string(), m.to_string(), d.to_string())];
            let got = counts.get(&id).copied().unwrap_or((0, 0));
            assert_eq!(got, (n, n), "{c}.{m}{d} (id {id:#x}) under {java}");
        }
        // Every lambda body ran: the twice lambda twice, the seven constructor ones once.
        let lambdas: Vec<u64> = p
            .id_of
            .iter()
            .filter(|((c, m, _), _)| c == "Main" && m.starts_with("lambda$"))
            .map(|(_, id)| counts.get(id).map_or(0, |c| c.0))
            .collect();
        assert_eq!(lambdas.len(), 8);
        assert_eq!(lambdas.iter().sum::<u64>(), 9);
    }
    javap_checks(&p);
}

/// Structural checks with javap: widened branches, and type annotation
/// offsets that still point at the annotated instruction.
fn javap_checks(p: &Prepared) {
    let javap = |dir: &Path, class: &str| {
        let o = run(
            Command::new("javap")
                .args(["-c", "-v", "-p", "-cp"])
                .arg(dir)
                .arg(class),
            Duration::from_secs(60),
        );
        assert!(o.status.success());
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let method = |listing: &str, sig: &str| -> String {
        let start = listing
            .find(sig)
            .unwrap_or_else(|| panic!("{sig} not in javap output"));
        let rest = &listing[start..];
        let end = rest[1..]
            .find("\n  static ")
            .or_else(|| rest[1..].find("\n  public "))
            .unwrap_or(rest.len() - 1);
        rest[..end + 1].to_string()
    };
    let big0 = javap(&p.orig, "Big");
    let big1 = javap(&p.inst, "Big");
    for m in [
        "static int loopBig(int)",
        "static int doWhileBig(int, boolean)",
        "static int whileBig(int)",
        "static int loopCond(int)",
    ] {
        assert!(
            !method(&big0, m).contains("goto_w"),
            "{m} already had goto_w"
        );
        assert!(method(&big1, m).contains("goto_w"), "{m} was not widened");
    }
    let main1 = javap(&p.inst, "Main");
    let ann = method(&main1, "static int annotated(java.lang.Object)");
    let insn_at = |off: &str| -> String {
        let key = format!("\n        {off}: ");
        let i = ann
            .find(&key)
            .unwrap_or_else(|| panic!("no instruction at {off}:\n{ann}"));
        ann[i + key.len()..]
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    };
    let cast = ann
        .split("CAST, offset=")
        .nth(1)
        .expect("CAST annotation")
        .split(',')
        .next()
        .unwrap()
        .trim()
        .to_string();
    assert_eq!(insn_at(&cast), "checkcast", "{ann}");
    let lv = ann
        .split("LOCAL_VARIABLE, {start_pc=")
        .nth(1)
        .expect("LOCAL_VARIABLE annotation");
    let start = lv.split(',').next().unwrap().trim().to_string();
    insn_at(&start);
}

#[test]
fn fixtures_behave_and_count_exactly_release_17() {
    check("17");
}

#[test]
fn fixtures_behave_and_count_exactly_release_8() {
    check("8");
}

/// JDK 25 flexible constructor bodies: code (and a field write) before
/// `super(...)`, exceptions before, inside and after the super call.
#[test]
fn flexible_constructor_bodies_on_jdk_25() {
    if !Path::new(JDK25).exists() {
        println!("skipping: JDK 25 not installed at {JDK25}");
        return;
    }
    let tmp = TempDir::new("flex");
    let (orig, inst, probe) = (
        tmp.path().join("orig"),
        tmp.path().join("inst"),
        tmp.path().join("probe"),
    );
    for d in [&orig, &inst, &probe] {
        std::fs::create_dir_all(d).unwrap();
    }
    javac(
        &format!("{JDK25}/bin/javac"),
        &["--release", "25"],
        &[java_src("fixture25/Flex.java")],
        &orig,
    );
    compile_test_probe(&probe);
    let mut ids = HashMap::new();
    let s = instrument_dir(&orig, &inst, &probe_set(PROBE), |c, m, d| {
        let id = 10 + ids.len() as u32;
        ids.insert(format!("{c}.{m}{d}"), id);
        id
    });
    assert!(s.skipped.is_empty(), "{:?}", s.skipped);
    let java = format!("{JDK25}/bin/java");
    let go = |cp: String| {
        let o = run(
            Command::new(&java).args(["-Xverify:all", "-Xshare:off", "-cp", &cp, "Flex"]),
            Duration::from_secs(120),
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let plain = go(orig.display().to_string());
    assert_eq!(
        plain,
        "ok 2 3\ncaught negative\ncaught seven\ncaught base six\n"
    );
    let probed = go(format!("{}:{}", inst.display(), probe.display()));
    assert!(probed.starts_with(&plain), "{probed}");
    let count = |k: &str| format!("PROBE {} ", ids[k]);
    let line = |k: &str| {
        probed
            .lines()
            .find(|l| l.starts_with(&count(k)))
            .unwrap_or("")
            .to_string()
    };
    assert_eq!(
        line("Flex$Early.<init>(I)V"),
        format!("{}2 2", count("Flex$Early.<init>(I)V"))
    );
    assert_eq!(
        line("Flex$Base.<init>(I)V"),
        format!("{}3 3", count("Flex$Base.<init>(I)V"))
    );
    assert_eq!(
        line("Flex.attempt(I)V"),
        format!("{}4 4", count("Flex.attempt(I)V"))
    );
}
