//! Receiver checks before virtual and interface calls
//! (`instrument_guarded`): instrumented programs run exactly like the
//! originals under `-Xverify:all` (same output, exceptions and messages),
//! and each check sees every receiver of its call, once per call.

mod instrument_util;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use instrument_util::*;
use sprig_rewriter::{
    CallKind, Check, GuardSite, Guards, SkipReason, Target, callees, class_info, instrument_guarded,
};

const PROBE: &str = "sprig/test/Probe";

/// `ManyLocals`: a virtual call with two arguments in a method with over
/// 256 locals, so the check parks them with `wide` stores.
fn many_locals_source() -> String {
    let mut decl = String::new();
    let mut sum = String::from("0");
    for k in 0..300 {
        let _ = writeln!(decl, "        int v{k} = a.fail(0) + {k};");
        if k % 50 == 0 {
            let _ = write!(sum, " + v{k}");
        }
    }
    format!(
        "public class ManyLocals {{
    static long run(Guards.Acc a) {{
{decl}        String s = a.two(v299, \"x\");
        return {sum} + s.length() + a.wides(1L, 2.0, 3L);
    }}
}}
"
    )
}

/// Site ids handed out: id -> (class, method, callee name).
type SiteIds = HashMap<u32, (String, String, String)>;

/// Instruments every method of every class in `src` into `dst` with the
/// test probes and a check before each of its virtual and interface calls.
fn instrument_all(src: &Path, dst: &Path) -> (SiteIds, Vec<(String, SkipReason)>) {
    let probes = probe_set(PROBE);
    let mut sites = SiteIds::new();
    let mut skipped = Vec::new();
    let mut next_id = 10u32;
    for f in class_files(src) {
        let bytes = std::fs::read(&f).unwrap();
        let info = class_info(&bytes).unwrap();
        let mut targets = Vec::new();
        let mut guards = Vec::new();
        for m in &info.methods {
            targets.push(Target {
                name: m.name.clone(),
                descriptor: m.descriptor.clone(),
                id: next_id,
                probes: 0,
            });
            next_id += 1;
            let mut g = Vec::new();
            for c in callees(&bytes, &m.name, &m.descriptor).unwrap_or_default() {
                if matches!(
                    c.kind,
                    CallKind::Virtual | CallKind::Interface | CallKind::Static | CallKind::Special
                ) {
                    // Large site ids too, so the ldc form is exercised.
                    let id = if next_id.is_multiple_of(5) {
                        next_id + 100_000
                    } else {
                        next_id
                    };
                    next_id += 1;
                    sites.insert(id, (info.name.clone(), m.name.clone(), c.name.clone()));
                    // Receiver checks before virtual and interface calls,
                    // except `none` (a reach check, as before a call
                    // class hierarchy analysis resolves to one method).
                    let check = if matches!(c.kind, CallKind::Virtual | CallKind::Interface)
                        && c.name != "none"
                    {
                        Check::Receiver
                    } else {
                        Check::Reach
                    };
                    g.push(GuardSite {
                        offset: c.offset,
                        site: id,
                        check,
                    });
                }
            }
            guards.push(g);
        }
        let g = Guards {
            class: PROBE,
            method: "site",
            reach: "reach",
            sites: &guards,
        };
        let r = instrument_guarded(&bytes, &targets, std::slice::from_ref(&probes), Some(&g))
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for m in &r.methods {
            if let Err(e) = &m.result
                && !matches!(e, SkipReason::Native | SkipReason::Abstract)
            {
                skipped.push((
                    format!("{}.{}{}", info.name, m.name, m.descriptor),
                    e.clone(),
                ));
            }
        }
        let out = dst.join(f.strip_prefix(src).unwrap());
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        std::fs::write(&out, &r.bytes).unwrap();
    }
    (sites, skipped)
}

fn run_class(java: &str, cp: &str, main: &str) -> (String, String, Option<i32>) {
    let o = run(
        Command::new(java).args(["-Xverify:all", "-Xshare:off", "-cp", cp, main]),
        Duration::from_secs(120),
    );
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        o.status.code(),
    )
}

fn javas() -> Vec<String> {
    let mut v = vec!["java".to_string()];
    if Path::new(JDK25).exists() {
        v.push(format!("{JDK25}/bin/java"));
    } else {
        println!("JDK 25 not installed at {JDK25}: running on JDK 17 only");
    }
    v
}

#[test]
fn guarded_programs_behave_like_the_originals_and_see_every_receiver() {
    let tmp = TempDir::new("guards");
    let (src, orig, inst, probe) = (
        tmp.path().join("src"),
        tmp.path().join("orig"),
        tmp.path().join("inst"),
        tmp.path().join("probe"),
    );
    for d in [&src, &orig, &inst, &probe] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(src.join("ManyLocals.java"), many_locals_source()).unwrap();
    std::fs::write(src.join("Big.java"), big_source()).unwrap();
    javac(
        "javac",
        &["-g", "--release", "17"],
        &[
            java_src("guards/Guards.java"),
            java_src("fixture/Main.java"),
            src.join("ManyLocals.java"),
            src.join("Big.java"),
        ],
        &orig,
    );
    compile_test_probe(&probe);
    let (sites, skipped) = instrument_all(&orig, &inst);
    // The one method too big for probes (see instrument_fixtures).
    assert!(
        matches!(skipped.as_slice(), [(m, SkipReason::TooLarge(_))] if m == "Big.huge(I)I"),
        "skipped: {skipped:?}"
    );
    assert!(sites.len() > 40, "only {} guarded calls", sites.len());
    let cp = format!("{}:{}", inst.display(), probe.display());
    for java in &javas() {
        for main in ["Guards", "Main"] {
            let (out0, err0, code0) = run_class(java, &orig.display().to_string(), main);
            let (out1, err1, code1) = run_class(java, &cp, main);
            let plain: Vec<&str> = out1
                .lines()
                .filter(|l| !l.starts_with("PROBE ") && !l.starts_with("SITE "))
                .collect();
            assert_eq!(
                plain.join("\n"),
                out0.trim_end(),
                "{main} under {java}: {err1}"
            );
            assert_eq!(err1, err0, "{main} under {java}: stderr differs");
            assert_eq!(code1, code0, "{main} under {java}");
            if main != "Guards" {
                assert!(out1.contains("SITE "), "no check ran in {main}");
                continue;
            }
            assert!(out0.contains("npe Cannot invoke"), "{out0}");
            // (caller, callee, receiver class) -> times seen.
            let mut seen: BTreeMap<(String, String, String), u64> = BTreeMap::new();
            for l in out1.lines().filter_map(|l| l.strip_prefix("SITE ")) {
                let v: Vec<&str> = l.split(' ').collect();
                let (class, method, callee) = &sites[&v[0].parse::<u32>().unwrap()];
                let key = (
                    format!("{class}.{method}"),
                    callee.clone(),
                    v[1].to_string(),
                );
                *seen.entry(key).or_default() += v[2].parse::<u64>().unwrap();
            }
            let get = |caller: &str, callee: &str, recv: &str| {
                seen.get(&(caller.to_string(), callee.to_string(), recv.to_string()))
                    .copied()
                    .unwrap_or(0)
            };
            // Interface calls over two classes, each receiver counted.
            assert_eq!(
                get("Guards.shapes", "area", "Guards$Circle"),
                2,
                "{seen:#?}"
            );
            assert_eq!(get("Guards.shapes", "area", "Guards$Square"), 1);
            assert_eq!(get("Guards.shapes", "size", "java.util.ArrayList"), 4);
            // Every shape of arguments.
            for callee in ["addLong", "addDouble", "two", "mixed", "wides"] {
                assert_eq!(get("Guards.main", callee, "Guards$Acc"), 1, "{callee}");
            }
            // A reach check before a virtual call: once per call, no receiver.
            assert_eq!(get("Guards.main", "none", "-"), 1);
            assert_eq!(get("Guards.main", "none", "Guards$Acc"), 0);
            // A null receiver reaches the check too; the call then throws.
            assert_eq!(get("Guards.main", "addLong", "null"), 1);
            assert_eq!(get("Guards.main", "fail", "Guards$Acc"), 5);
            assert_eq!(get("Guards$Derived.<init>", "area", "Guards$Square"), 1);
            assert_eq!(get("Guards$Derived.<init>", "wides", "Guards$Acc"), 1);
            assert_eq!(get("ManyLocals.run", "two", "Guards$Acc"), 1);
            assert_eq!(get("ManyLocals.run", "fail", "Guards$Acc"), 300);
            let lambda = seen
                .iter()
                .filter(|((c, m, r), _)| {
                    c == "Guards.main" && m == "applyAsInt" && r.contains("$$Lambda")
                })
                .map(|(_, n)| *n)
                .sum::<u64>();
            assert_eq!(lambda, 1, "{seen:#?}");
            assert_eq!(get("Guards.main", "clone", "[I"), 1);
            // Static and special calls: reach checks, once per call.
            assert_eq!(get("Guards.main", "shapes", "-"), 1);
            assert_eq!(get("Guards.main", "run", "-"), 1);
            // super(...) in a constructor, before `this` is initialised.
            assert_eq!(get("Guards$Derived.<init>", "<init>", "-"), 1);
            assert_eq!(get("Guards$Circle.<init>", "<init>", "-"), 2);
        }
    }
}

/// A guard at an offset that is no invoke instruction, or a receiver
/// check before a static call (no receiver to copy), skips its method and
/// only that one; guard lists that do not match the targets are an error.
#[test]
fn a_guard_that_does_not_fit_its_instruction_skips_the_method() {
    let tmp = TempDir::new("guards-bad");
    let orig = tmp.path().join("orig");
    std::fs::create_dir_all(&orig).unwrap();
    let many = tmp.path().join("ManyLocals.java");
    std::fs::write(&many, many_locals_source()).unwrap();
    javac(
        "javac",
        &["--release", "17"],
        &[java_src("guards/Guards.java"), many],
        &orig,
    );
    let bytes = std::fs::read(orig.join("Guards.class")).unwrap();
    let calls = callees(&bytes, "main", "([Ljava/lang/String;)V").unwrap();
    let virt = calls.iter().find(|c| c.kind == CallKind::Virtual).unwrap();
    let target = |n: &str, d: &str| Target {
        name: n.into(),
        descriptor: d.into(),
        id: 1,
        probes: 0,
    };
    let targets = [
        target("main", "([Ljava/lang/String;)V"),
        target("<init>", "()V"),
    ];
    let stat = calls.iter().find(|c| c.kind == CallKind::Static).unwrap();
    let bad_sites = [0, virt.offset + 1, 1_000_000]
        .map(|offset| (offset, Check::Receiver))
        .into_iter()
        .chain([
            (virt.offset + 1, Check::Reach),
            (stat.offset, Check::Receiver),
        ]);
    for (offset, check) in bad_sites {
        let lists = [
            vec![GuardSite {
                offset,
                site: 7,
                check,
            }],
            vec![],
        ];
        let g = Guards {
            class: PROBE,
            method: "site",
            reach: "reach",
            sites: &lists,
        };
        let r = instrument_guarded(&bytes, &targets, &[probe_set(PROBE)], Some(&g)).unwrap();
        assert!(
            matches!(r.methods[0].result, Err(SkipReason::Unsupported(_))),
            "{:?}",
            r.methods[0]
        );
        assert_eq!(r.methods[1].result, Ok(()));
    }
    let lists = [vec![]];
    let g = Guards {
        class: PROBE,
        method: "site",
        reach: "reach",
        sites: &lists,
    };
    assert!(instrument_guarded(&bytes, &targets, &[probe_set(PROBE)], Some(&g)).is_err());
}
