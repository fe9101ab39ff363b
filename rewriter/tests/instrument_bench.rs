//! Throughput of `instrument` over a whole runtime image: every method of
//! every class (JDK 17 by default, extracted with `jimage`). Ignored by
//! default (heavy); run with
//! `cargo test --release -p sprig-rewriter --test instrument_bench -- --ignored --nocapture`.
//! `SPRIG_BENCH_JDK` picks another JDK home.
//!
//! Class bytes are read into memory and their method lists computed first;
//! the timed part is `instrument` alone, then again with `class_info`
//! (what a `sprig rewrite` of everything does per class).

mod instrument_util;

use std::process::Command;
use std::time::{Duration, Instant};

use instrument_util::*;
use sprig_rewriter::{SkipReason, Target, class_info, instrument};

#[test]
#[ignore = "heavy: instruments a whole JDK image"]
fn instrument_whole_jdk_image() {
    let jdk = std::env::var("SPRIG_BENCH_JDK")
        .unwrap_or_else(|_| "/usr/lib/jvm/java-17-openjdk-amd64".into());
    let tmp = TempDir::new("bench");
    let o = run(
        Command::new(format!("{jdk}/bin/jimage"))
            .arg("extract")
            .arg("--dir")
            .arg(tmp.path())
            .arg(format!("{jdk}/lib/modules")),
        Duration::from_secs(300),
    );
    assert!(o.status.success(), "jimage extract failed");
    let mut classes: Vec<(Vec<u8>, Vec<Target>)> = Vec::new();
    for f in class_files(tmp.path()) {
        if f.ends_with("module-info.class") {
            continue;
        }
        let bytes = std::fs::read(&f).unwrap();
        let info = class_info(&bytes).unwrap();
        let mut id = 0u32;
        let targets = info
            .methods
            .iter()
            .map(|m| {
                id = id.wrapping_add(48_271);
                Target {
                    name: m.name.clone(),
                    descriptor: m.descriptor.clone(),
                    id,
                    probes: 0,
                }
            })
            .collect();
        classes.push((bytes, targets));
    }
    let probes = [probe_set("sprig/rt/Probe")];
    let total_bytes: usize = classes.iter().map(|c| c.0.len()).sum();
    let total_methods: usize = classes.iter().map(|c| c.1.len()).sum();

    let t0 = Instant::now();
    let mut instrumented = 0usize;
    let mut skipped: Vec<String> = Vec::new();
    let mut out_bytes = 0usize;
    for (bytes, targets) in &classes {
        let r = instrument(bytes, targets, &probes).unwrap();
        instrumented += r.instrumented_count();
        out_bytes += r.bytes.len();
        for m in &r.methods {
            if let Err(e) = &m.result
                && !matches!(e, SkipReason::Native | SkipReason::Abstract)
            {
                skipped.push(format!("{}{}: {e}", m.name, m.descriptor));
            }
        }
    }
    let dt = t0.elapsed();

    let t1 = Instant::now();
    for (bytes, _) in &classes {
        let info = class_info(bytes).unwrap();
        let targets: Vec<Target> = info
            .methods
            .iter()
            .map(|m| Target {
                name: m.name.clone(),
                descriptor: m.descriptor.clone(),
                id: 1,
                probes: 0,
            })
            .collect();
        std::hint::black_box(instrument(bytes, &targets, &probes).unwrap());
    }
    let dt_all = t1.elapsed();

    let mb = total_bytes as f64 / 1e6;
    println!(
        "{jdk}: {} classes, {:.1} MB, {total_methods} methods requested, {instrumented} instrumented, {} skipped (not native/abstract)",
        classes.len(),
        mb,
        skipped.len()
    );
    for s in skipped.iter().take(30) {
        println!("  skipped {s}");
    }
    println!(
        "instrument: {dt:?} = {:.0} MB/s, {:.0} methods/s; output {:.1} MB (+{:.1}%)",
        mb / dt.as_secs_f64(),
        instrumented as f64 / dt.as_secs_f64(),
        out_bytes as f64 / 1e6,
        (out_bytes as f64 / total_bytes as f64 - 1.0) * 100.0
    );
    println!(
        "class_info + instrument: {dt_all:?} = {:.0} MB/s",
        mb / dt_all.as_secs_f64()
    );
    assert!(instrumented > 0);
    assert!(
        (skipped.len() as f64) < 0.001 * total_methods as f64,
        "skipped {} of {total_methods}",
        skipped.len()
    );
}
