//! Allocation probes (`instrument_full` with `Allocs`): instrumented
//! programs run exactly like the originals under `-Xverify:all`, and each
//! probe sees every allocation its instruction made, once, with the class
//! it allocated (a `multianewarray` of two dimensions or more: the array,
//! its class and length), or for an array of one dimension its length
//! only (the probe never gets that array); an allocation that throws
//! records nothing.

mod instrument_util;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use instrument_util::*;
use sprig_rewriter::{AllocSite, Allocs, SkipReason, Target, class_info, instrument_full};

const PROBE: &str = "sprig/test/Probe";

/// Site ids handed out: id -> (class.method, the site).
type SiteIds = HashMap<u32, (String, AllocSite)>;

fn instrument_all(src: &Path, dst: &Path) -> SiteIds {
    let probes = probe_set(PROBE);
    let mut sites = SiteIds::new();
    let mut next_id = 10u32;
    for f in class_files(src) {
        let bytes = std::fs::read(&f).unwrap();
        let info = class_info(&bytes).unwrap();
        let mut targets = Vec::new();
        let mut names = HashMap::new();
        for m in &info.methods {
            targets.push(Target {
                name: m.name.clone(),
                descriptor: m.descriptor.clone(),
                id: next_id,
                probes: 0,
            });
            names.insert(next_id, format!("{}.{}", info.name, m.name));
            next_id += 1;
        }
        let mut site = |s: &AllocSite| {
            // Large ids too, so the ldc form of the site id is exercised.
            let id = if next_id.is_multiple_of(3) {
                next_id + 100_000
            } else {
                next_id
            };
            next_id += 1;
            sites.insert(id, (names[&s.method].clone(), s.clone()));
            id
        };
        let mut allocs = Allocs {
            class: PROBE,
            object: "alloc",
            array: "allocArray",
            array_length: Some("allocArrayLength"),
            site: &mut site,
        };
        let r = instrument_full(
            &bytes,
            &targets,
            std::slice::from_ref(&probes),
            None,
            Some(&mut allocs),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for m in &r.methods {
            if let Err(e) = &m.result {
                assert!(
                    matches!(e, SkipReason::Native | SkipReason::Abstract)
                        || (info.name == "Big" && matches!(e, SkipReason::TooLarge(_))),
                    "{}.{}: {e}",
                    info.name,
                    m.name
                );
            }
        }
        let out = dst.join(f.strip_prefix(src).unwrap());
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        std::fs::write(&out, &r.bytes).unwrap();
    }
    sites
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

#[test]
fn allocation_probes_see_every_allocation_once_and_change_nothing_else() {
    let tmp = TempDir::new("allocs");
    let (src, orig, inst, probe) = (
        tmp.path().join("src"),
        tmp.path().join("orig"),
        tmp.path().join("inst"),
        tmp.path().join("probe"),
    );
    for d in [&src, &orig, &inst, &probe] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(src.join("Big.java"), big_source()).unwrap();
    javac(
        "javac",
        &["-g", "--release", "17"],
        &[
            java_src("allocs/Allocs.java"),
            java_src("fixture/Main.java"),
            src.join("Big.java"),
        ],
        &orig,
    );
    compile_test_probe(&probe);
    let sites = instrument_all(&orig, &inst);
    let mut javas = vec!["java".to_string()];
    if Path::new(JDK25).exists() {
        javas.push(format!("{JDK25}/bin/java"));
    } else {
        println!("SKIP JDK 25: not installed at {JDK25}");
    }
    let cp = format!("{}:{}", inst.display(), probe.display());
    for java in &javas {
        for main in ["Allocs", "Main"] {
            let (out0, err0, code0) = run_class(java, &orig.display().to_string(), main);
            let (out1, err1, code1) = run_class(java, &cp, main);
            let plain: Vec<&str> = out1
                .lines()
                .filter(|l| !l.starts_with("PROBE ") && !l.starts_with("ALLOC "))
                .collect();
            assert_eq!(
                plain.join("\n"),
                out0.trim_end(),
                "{main} under {java}: {err1}"
            );
            assert_eq!(err1, err0, "{main} under {java}: stderr differs");
            assert_eq!(code1, code0, "{main} under {java}");
            if main != "Allocs" {
                assert!(out1.contains("ALLOC "), "no allocation probe ran in {main}");
                continue;
            }
            // (method, descriptor, class seen, length) -> allocations
            let mut seen: BTreeMap<(String, String, String, String), u64> = BTreeMap::new();
            for l in out1.lines().filter_map(|l| l.strip_prefix("ALLOC ")) {
                let v: Vec<&str> = l.split(' ').collect();
                let (method, s) = &sites[&v[0].parse::<u32>().unwrap()];
                let len = if v.len() == 4 { v[2] } else { "-" };
                let n: u64 = v[v.len() - 1].parse().unwrap();
                *seen
                    .entry((
                        method.clone(),
                        s.descriptor.clone(),
                        v[1].to_string(),
                        len.to_string(),
                    ))
                    .or_default() += n;
            }
            let get = |m: &str, d: &str, c: &str, len: &str| {
                seen.get(&(m.into(), d.into(), c.into(), len.into()))
                    .copied()
                    .unwrap_or(0)
            };
            // A `new` that is a loop's branch target: once per iteration.
            assert_eq!(
                get("Allocs.loop", "LAllocs$Point;", "Allocs$Point", "-"),
                3,
                "{seen:#?}"
            );
            // Arrays with their lengths (one dimension: the length only,
            // class "length"); the method runs twice.
            assert_eq!(get("Allocs.arrays", "[I", "length", "7"), 2);
            assert_eq!(
                get("Allocs.arrays", "[Ljava/lang/String;", "length", "3"),
                2
            );
            assert_eq!(get("Allocs.arrays", "[[[I", "[[[I", "4"), 2);
            // An array's clone() as the allocation it is: the new array and
            // its copy (a two-dimension array's copy is its outer array).
            // A primitive array's copy by its length; a reference array's
            // passed as it is (its class may be an array of a subtype).
            assert_eq!(get("Allocs.arrays", "[D", "length", "5"), 4, "{seen:#?}");
            assert_eq!(
                get("Allocs.arrays", "[Ljava/lang/Object;", "length", "6"),
                2
            );
            assert_eq!(
                get(
                    "Allocs.arrays",
                    "[Ljava/lang/Object;",
                    "[Ljava.lang.Object;",
                    "6"
                ),
                2
            );
            // the multianewarray and the copy of what it made
            assert_eq!(get("Allocs.arrays", "[[J", "[[J", "2"), 4);
            // a generic T[]'s clone() names Object[]: the copy is a String[]
            assert_eq!(
                get(
                    "Allocs.copyOf",
                    "[Ljava/lang/Object;",
                    "[Ljava.lang.String;",
                    "3"
                ),
                2
            );
            // Each branch of a conditional once.
            assert_eq!(get("Allocs.arrays", "[B", "length", "11"), 1);
            assert_eq!(get("Allocs.arrays", "[C", "length", "13"), 1);
            // In a constructor, before and after super(...).
            assert_eq!(
                get(
                    "Allocs$Labelled.<init>",
                    "LAllocs$Point;",
                    "Allocs$Point",
                    "-"
                ),
                1
            );
            assert_eq!(
                get(
                    "Allocs$Labelled.<init>",
                    "Ljava/lang/String;",
                    "java.lang.String",
                    "-"
                ),
                1
            );
            // The object exists when its constructor throws.
            assert_eq!(get("Allocs.main", "LAllocs$Bad;", "Allocs$Bad", "-"), 1);
            assert_eq!(
                get(
                    "Allocs$Bad.<init>",
                    "Ljava/lang/IllegalStateException;",
                    "java.lang.IllegalStateException",
                    "-"
                ),
                1
            );
            // A `new` whose class fails to initialise and a negative
            // length allocate nothing: no probe runs.
            let at = |m: &str, d: &str| {
                seen.iter()
                    .filter(|((sm, sd, _, _), _)| sm == m && sd == d)
                    .map(|(_, n)| *n)
                    .sum::<u64>()
            };
            assert_eq!(at("Allocs.main", "LAllocs$NoInit;"), 0, "{seen:#?}");
            assert!(
                sites
                    .values()
                    .any(|(m, s)| m == "Allocs.main" && s.descriptor == "LAllocs$NoInit;")
            );
            let negative: Vec<_> = sites
                .iter()
                .filter(|(_, (m, s))| m == "Allocs.main" && s.descriptor == "[I")
                .collect();
            assert_eq!(negative.len(), 1, "{negative:?}");
            assert_eq!(at("Allocs.main", "[I"), 0);
            // Inside a lambda.
            assert_eq!(
                get(
                    "Allocs.lambda$main$0",
                    "LAllocs$Point;",
                    "Allocs$Point",
                    "-"
                ),
                1
            );
            // An instance's Object.clone(): a copy of this class, and of a
            // subclass that inherits the copying method (the probe gets
            // the copy); a class that is not Cloneable copies nothing.
            assert_eq!(
                get(
                    "Allocs$Copyable.copy",
                    "LAllocs$Copyable;",
                    "Allocs$Copyable",
                    "-"
                ),
                1,
                "{seen:#?}"
            );
            assert_eq!(
                get(
                    "Allocs$Copyable.copy",
                    "LAllocs$Copyable;",
                    "Allocs$Wider",
                    "-"
                ),
                2,
                "{seen:#?}"
            );
            assert_eq!(at("Allocs$NotCloneable.copy", "LAllocs$NotCloneable;"), 0);
            assert!(
                sites
                    .values()
                    .any(|(m, s)| m == "Allocs$NotCloneable.copy" && s.clone)
            );
            // multianewarray's dimensions (two sites), and the clone of a
            // two-dimension array a copy (0)
            let mut dims: Vec<u8> = sites
                .values()
                .filter(|(m, _)| m == "Allocs.arrays")
                .filter(|(_, s)| s.descriptor.starts_with("[["))
                .map(|(_, s)| s.dims)
                .collect();
            dims.sort_unstable();
            assert_eq!(dims, [0, 2, 2]);
        }
    }
}
