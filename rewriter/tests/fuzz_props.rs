//! Property test over mutated real class files: `class_info`, `callees_all`,
//! `trivial_methods` and `instrument` return a value or an error on any input,
//! never panic.
//!
//! Seeds: the analysis test classes (compiled here with javac, current and
//! `--release 8`) and a few JDK 17 classes extracted from the runtime image.
//! Each case applies 1 to 4 random mutations (byte flips, u16 overwrites
//! that hit counts and constant-pool indices, truncations, insertions,
//! deletions) to one seed.
//!
//! `SPRIG_FUZZ_CASES` sets the number of cases (default 20,000);
//! `SPRIG_FUZZ_CASES=1000000 cargo test --release -p sprig-rewriter --test fuzz_props`
//! is the million-input run.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use sprig_rewriter::vocab::access::NO_CODE;
use sprig_rewriter::{ProbeSet, Target, callees_all, class_info, instrument, trivial_methods};

const JDK17: &str = "/usr/lib/jvm/java-17-openjdk-amd64";

/// A seed class: file name, bytes, and every method with code as a target.
type Seed = (String, Vec<u8>, Vec<Target>);

/// The seed classes.
fn seeds() -> &'static [Seed] {
    static SEEDS: OnceLock<Vec<Seed>> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-seeds");
        let _ = std::fs::remove_dir_all(&tmp);
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/analyze_java");
        let javac = |args: &[&str], file: &str, out: &Path| {
            let status = Command::new(format!("{JDK17}/bin/javac"))
                .args(args)
                .arg("-d")
                .arg(out)
                .arg(src.join(file))
                .status()
                .expect("javac runs");
            assert!(status.success(), "javac {file}");
        };
        let classes = tmp.join("classes");
        javac(&["-g"], "Calls.java", &classes);
        javac(&["--release", "8"], "Old.java", &classes);
        let image = tmp.join("jdk");
        let status = Command::new(format!("{JDK17}/bin/jimage"))
            .arg("extract")
            .arg("--dir")
            .arg(&image)
            .arg("--include")
            .arg("regex:/java.base/java/(util/ArrayList|lang/Integer|lang/invoke/LambdaMetafactory)\\.class")
            .arg(format!("{JDK17}/lib/modules"))
            .status()
            .expect("jimage runs");
        assert!(status.success(), "jimage extract");
        let mut files: Vec<PathBuf> = Vec::new();
        for dir in [classes, image.join("java.base/java/util"), image.join("java.base/java/lang")] {
            collect(&dir, &mut files);
        }
        files.sort();
        let seeds: Vec<_> = files
            .into_iter()
            .map(|p| {
                let bytes = std::fs::read(&p).unwrap();
                let info = class_info(&bytes).expect("seed parses");
                let targets = info
                    .methods
                    .iter()
                    .filter(|m| m.access & NO_CODE == 0)
                    .enumerate()
                    .map(|(i, m)| Target {
                        name: m.name.clone(),
                        descriptor: m.descriptor.clone(),
                        // Some ids above 32,767 and 65,535 to reach the wide-id paths.
                        id: (i as u32) * 40_000,
                        probes: 0,
                    })
                    .collect();
                (p.file_name().unwrap().to_string_lossy().into_owned(), bytes, targets)
            })
            .collect();
        assert!(seeds.len() >= 8, "seeds: {}", seeds.len());
        seeds
    })
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|e| e == "class") {
            out.push(p);
        }
    }
}

#[derive(Clone, Debug)]
enum Mutation {
    Flip { at: usize, xor: u8 },
    SetU16 { at: usize, value: u16 },
    Truncate { keep: usize },
    Insert { at: usize, bytes: Vec<u8> },
    Delete { at: usize, len: usize },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    // Positions are taken modulo the current length when applied.
    prop_oneof![
        4 => (any::<usize>(), 1..=255u8).prop_map(|(at, xor)| Mutation::Flip { at, xor }),
        3 => (any::<usize>(), prop_oneof![0..16u16, any::<u16>(), Just(0xFFFF)])
            .prop_map(|(at, value)| Mutation::SetU16 { at, value }),
        1 => any::<usize>().prop_map(|keep| Mutation::Truncate { keep }),
        1 => (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        1 => (any::<usize>(), 1..16usize).prop_map(|(at, len)| Mutation::Delete { at, len }),
    ]
}

fn apply(mut b: Vec<u8>, muts: &[Mutation]) -> Vec<u8> {
    for m in muts {
        let n = b.len().max(1);
        match m {
            Mutation::Flip { at, xor } => {
                if !b.is_empty() {
                    b[at % n] ^= xor;
                }
            }
            Mutation::SetU16 { at, value } => {
                if b.len() >= 2 {
                    let i = at % (b.len() - 1);
                    b[i..i + 2].copy_from_slice(&value.to_be_bytes());
                }
            }
            Mutation::Truncate { keep } => b.truncate(keep % n),
            Mutation::Insert { at, bytes } => {
                let i = at % (b.len() + 1);
                b.splice(i..i, bytes.iter().copied());
            }
            Mutation::Delete { at, len } => {
                let i = at % n;
                let end = (i + len).min(b.len());
                if i < end {
                    b.drain(i..end);
                }
            }
        }
    }
    b
}

/// How many inputs class_info accepted and instrument accepted: the run is
/// only meaningful if mutated inputs get past the header.
static PARSED: AtomicUsize = AtomicUsize::new(0);
static INSTRUMENTED: AtomicUsize = AtomicUsize::new(0);

fn cases() -> u32 {
    std::env::var("SPRIG_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

/// Runs the three entry points on one input. Panics propagate to proptest,
/// which reports the failing mutation list.
fn check(seed: usize, muts: &[Mutation]) -> Result<(), TestCaseError> {
    let (_, original, targets) = &seeds()[seed];
    let bytes = apply(original.clone(), muts);
    let probes = [ProbeSet {
        class: "sprig/rt/Probe".into(),
        entry: "enter".into(),
        exit: "exit".into(),
        entry_receiver: false,
    }];
    let info = class_info(&bytes);
    let _ = callees_all(&bytes);
    let _ = trivial_methods(&bytes, 16);
    // The seed's own targets reach deep into the code even when names moved.
    let result = instrument(&bytes, targets, &probes);
    if result.is_ok() {
        INSTRUMENTED.fetch_add(1, Ordering::Relaxed);
    }
    if info.is_ok() {
        PARSED.fetch_add(1, Ordering::Relaxed);
    }
    if let Ok(info) = &info {
        let mine: Vec<Target> = info
            .methods
            .iter()
            .take(64)
            .enumerate()
            .map(|(i, m)| Target {
                name: m.name.clone(),
                descriptor: m.descriptor.clone(),
                id: i as u32,
                probes: 0,
            })
            .collect();
        let _ = instrument(&bytes, &mine, &probes);
        // Nothing selected: the input comes back unchanged.
        if let Ok(same) = instrument(&bytes, &[], &probes) {
            prop_assert!(
                same.bytes == bytes,
                "instrument with no targets changed the class"
            );
        }
        // A readable input instrumented is still readable.
        if let Ok(done) = &result {
            prop_assert!(
                class_info(&done.bytes).is_ok(),
                "instrumented output unreadable: {:?}",
                class_info(&done.bytes).err()
            );
        }
    }
    Ok(())
}

#[test]
fn mutated_classes_never_panic() {
    let n = seeds().len();
    let cases = cases();
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let start = Instant::now();
    let strategy = (0..n, proptest::collection::vec(mutation(), 1..=4));
    let result = runner.run(&strategy, |(seed, muts)| check(seed, &muts));
    let secs = start.elapsed().as_secs_f64();
    let parsed = PARSED.load(Ordering::Relaxed);
    let instrumented = INSTRUMENTED.load(Ordering::Relaxed);
    println!(
        "fuzz_props: {cases} mutated inputs over {n} seed classes in {secs:.1} s; \
         class_info accepted {parsed}, instrument accepted {instrumented}"
    );
    if let Err(e) = result {
        panic!("{e}");
    }
    // A large share of the mutants must get past the header, or the run
    // only exercises the first few bytes.
    assert!(
        parsed as u64 * 20 > u64::from(cases),
        "only {parsed} of {cases} mutants parsed"
    );
    assert!(
        instrumented as u64 * 20 > u64::from(cases),
        "only {instrumented} of {cases} mutants instrumented"
    );
}

/// The seeds themselves: analysis and instrumentation succeed.
#[test]
fn seeds_instrument_cleanly() {
    let probes = [ProbeSet {
        class: "sprig/rt/Probe".into(),
        entry: "enter".into(),
        exit: "exit".into(),
        entry_receiver: false,
    }];
    for (name, bytes, targets) in seeds() {
        callees_all(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let done = instrument(bytes, targets, &probes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            done.instrumented_count(),
            targets.len(),
            "{name}: {:?}",
            done.methods
        );
    }
}
