//! Instruments every method with code of every class of a JDK runtime image
//! and reports throughput.
//!
//! `cargo run --release -p sprig-rewriter --example bench_jdk [-- JDK_HOME [THREADS]]`
//!
//! The image (`JDK_HOME/lib/modules`, default JDK 17) is extracted once with
//! `jimage extract` into a cache directory under the system temp dir, and all
//! class files are read into memory before timing starts, so the figures are
//! the rewriter's alone: `class_info` (to list the methods) plus `instrument`
//! with every non-native, non-abstract method selected. `callees_all` is timed
//! separately (revelation's cost). THREADS (default 1) splits the classes
//! between that many threads.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use sprig_rewriter::vocab::access::NO_CODE;
use sprig_rewriter::{ProbeSet, Target, callees_all, class_info, instrument};

const DEFAULT_JDK: &str = "/usr/lib/jvm/java-17-openjdk-amd64";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let jdk = PathBuf::from(args.first().map(String::as_str).unwrap_or(DEFAULT_JDK));
    let threads: usize = args.get(1).and_then(|t| t.parse().ok()).unwrap_or(1).max(1);
    if let Err(e) = run(&jdk, threads) {
        eprintln!("bench_jdk: {e}");
        std::process::exit(1);
    }
}

#[derive(Default)]
struct Tally {
    methods: usize,
    instrumented: usize,
    skipped: usize,
    class_errors: usize,
    out_bytes: usize,
    first_error: Option<String>,
}

fn run(jdk: &Path, threads: usize) -> Result<(), String> {
    let image = extract(jdk)?;
    let mut files = Vec::new();
    collect(&image, &mut files).map_err(|e| format!("listing {}: {e}", image.display()))?;
    files.sort();
    let classes: Vec<(PathBuf, Vec<u8>)> = files
        .into_iter()
        .map(|p| std::fs::read(&p).map(|b| (p, b)))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("reading classes: {e}"))?;
    let total_bytes: usize = classes.iter().map(|c| c.1.len()).sum();
    let mb = total_bytes as f64 / 1e6;
    println!(
        "JDK image {}: {} classes, {:.1} MB of class bytes; {threads} thread(s)",
        jdk.display(),
        classes.len(),
        mb
    );

    let probes = [ProbeSet {
        class: "sprig/rt/Probe".into(),
        entry: "enter".into(),
        exit: "exit".into(),
        entry_receiver: false,
    }];
    let chunk = classes.len().div_ceil(threads);
    let start = Instant::now();
    let tallies: Vec<Tally> = std::thread::scope(|s| {
        let handles: Vec<_> = classes
            .chunks(chunk.max(1))
            .map(|part| s.spawn(|| instrument_all(part, &probes)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("bench thread"))
            .collect()
    });
    let elapsed = start.elapsed();
    let mut t = Tally::default();
    for x in tallies {
        t.methods += x.methods;
        t.instrumented += x.instrumented;
        t.skipped += x.skipped;
        t.class_errors += x.class_errors;
        t.out_bytes += x.out_bytes;
        t.first_error = t.first_error.or(x.first_error);
    }
    report("class_info + instrument", elapsed, mb, t.methods);
    println!(
        "  methods with code {}, instrumented {}, skipped {}, classes rejected {}; output {:.1} MB (+{:.1}%)",
        t.methods,
        t.instrumented,
        t.skipped,
        t.class_errors,
        t.out_bytes as f64 / 1e6,
        100.0 * (t.out_bytes as f64 / total_bytes as f64 - 1.0)
    );
    if let Some(e) = &t.first_error {
        println!("  first rejected class: {e}");
    }

    let start = Instant::now();
    let mut sites = 0usize;
    for (_, bytes) in &classes {
        if let Ok(all) = callees_all(bytes) {
            sites += all.iter().map(|m| m.2.len()).sum::<usize>();
        }
    }
    report("callees_all (one thread)", start.elapsed(), mb, t.methods);
    println!("  call sites {sites}");
    let goal = if elapsed < Duration::from_secs(10) {
        "met"
    } else {
        "NOT met"
    };
    println!(
        "goal (whole image instrumented in < 10 s): {goal} ({:.2} s)",
        elapsed.as_secs_f64()
    );
    Ok(())
}

fn report(what: &str, d: Duration, mb: f64, methods: usize) {
    let s = d.as_secs_f64();
    println!(
        "{what}: {s:.2} s, {:.1} MB/s, {:.0} methods/s",
        mb / s,
        methods as f64 / s
    );
}

fn instrument_all(classes: &[(PathBuf, Vec<u8>)], probes: &[ProbeSet]) -> Tally {
    let mut t = Tally::default();
    let mut id = 0u32;
    for (path, bytes) in classes {
        let info = match class_info(bytes) {
            Ok(i) => i,
            Err(e) => {
                t.class_errors += 1;
                t.first_error
                    .get_or_insert_with(|| format!("{}: {e}", path.display()));
                continue;
            }
        };
        let targets: Vec<Target> = info
            .methods
            .iter()
            .filter(|m| m.access & NO_CODE == 0)
            .map(|m| {
                id = id.wrapping_add(1);
                Target {
                    name: m.name.clone(),
                    descriptor: m.descriptor.clone(),
                    id,
                    probes: 0,
                }
            })
            .collect();
        t.methods += targets.len();
        match instrument(bytes, &targets, probes) {
            Ok(done) => {
                let ok = done.instrumented_count();
                t.instrumented += ok;
                t.skipped += targets.len() - ok;
                t.out_bytes += done.bytes.len();
            }
            Err(e) => {
                t.class_errors += 1;
                t.skipped += targets.len();
                t.out_bytes += bytes.len();
                t.first_error
                    .get_or_insert_with(|| format!("{}: {e}", path.display()));
            }
        }
    }
    t
}

/// Extracts `jdk/lib/modules` once into a cache directory keyed by the
/// image's size and modification time.
fn extract(jdk: &Path) -> Result<PathBuf, String> {
    let modules = jdk.join("lib/modules");
    let meta = std::fs::metadata(&modules).map_err(|e| format!("{}: {e}", modules.display()))?;
    let stamp = meta
        .modified()
        .ok()
        .and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    let dir = std::env::temp_dir().join(format!("sprig-jimage-{}-{stamp}", meta.len()));
    let marker = dir.join(".complete");
    if !marker.exists() {
        let _ = std::fs::remove_dir_all(&dir);
        println!(
            "extracting {} into {} (once)",
            modules.display(),
            dir.display()
        );
        let status = Command::new(jdk.join("bin/jimage"))
            .arg("extract")
            .arg("--dir")
            .arg(&dir)
            .arg(&modules)
            .status()
            .map_err(|e| format!("running jimage: {e}"))?;
        if !status.success() {
            return Err(format!("jimage extract failed: {status}"));
        }
        std::fs::write(&marker, "").map_err(|e| e.to_string())?;
    }
    Ok(dir)
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            collect(&p, out)?;
        } else if p.extension().is_some_and(|e| e == "class") {
            out.push(p);
        }
    }
    Ok(())
}
