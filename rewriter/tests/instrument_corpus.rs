//! Quick self-check on real classes: every method of every class of a
//! system jar is instrumented, and each class whose original links under
//! `-Xverify:all` must still link after instrumentation.

mod instrument_util;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use instrument_util::*;

fn verify_dir(java: &str, loader: &Path, dir: &Path, probe: &Path) -> BTreeMap<String, String> {
    let cp = format!("{}:{}", loader.display(), probe.display());
    let o = run(
        Command::new(java)
            .args(["-Xverify:all", "-Xshare:off", "-cp", &cp, "VerifyLoader"])
            .arg(dir),
        Duration::from_secs(300),
    );
    assert!(
        o.status.success(),
        "VerifyLoader failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            let (st, rest) = l.split_once(' ')?;
            let (name, msg) = rest.split_once(' ').unwrap_or((rest, ""));
            Some((
                name.to_string(),
                if st == "OK" {
                    String::new()
                } else {
                    msg.to_string()
                },
            ))
        })
        .collect()
}

/// Instruments and verifies one jar; returns (verified after, verified before).
fn check_jar(jar: &str, javas: &[&str]) -> Option<(usize, usize)> {
    if !Path::new(jar).exists() {
        println!("skipping {jar}: not present");
        return None;
    }
    let tmp = TempDir::new("corpus");
    let orig = tmp.path().join("orig");
    let inst = tmp.path().join("inst");
    let tools = tmp.path().join("tools");
    std::fs::create_dir_all(&orig).unwrap();
    std::fs::create_dir_all(&tools).unwrap();
    let o = run(
        Command::new("unzip")
            .args(["-q", "-o", jar, "*.class", "-d"])
            .arg(&orig),
        Duration::from_secs(120),
    );
    assert!(o.status.success(), "unzip {jar}");
    javac(
        "javac",
        &["--release", "11"],
        &[
            java_src("loader/VerifyLoader.java"),
            java_src("probe/sprig/test/Probe.java"),
        ],
        &tools,
    );
    let s = instrument_dir(&orig, &inst, &probe_set("sprig/test/Probe"), {
        let mut n = 0u32;
        move |_, _, _| {
            n = n.wrapping_add(40_000);
            n
        }
    });
    let mb = s.bytes_in as f64 / 1e6;
    println!(
        "{jar}: {} classes, {} methods, {} instrumented, {} skipped, {:.1} MB in {:?} ({:.0} MB/s)",
        s.classes,
        s.methods,
        s.instrumented,
        s.skipped.len(),
        mb,
        s.elapsed,
        mb / s.elapsed.as_secs_f64()
    );
    for (m, why) in s.skipped.iter().take(20) {
        println!("  skipped {m}: {why}");
    }
    // Negative control: the harness must notice a broken class. Renaming the
    // StackMapTable attribute of a class with branches makes it unverifiable.
    let broken_dir = tmp.path().join("broken");
    let victim = class_files(&inst)
        .into_iter()
        .find(|f| {
            std::fs::read(f)
                .unwrap()
                .windows(13)
                .any(|w| w == b"StackMapTable")
        })
        .expect("a class with a StackMapTable");
    let rel = victim.strip_prefix(&inst).unwrap();
    let mut b = std::fs::read(&victim).unwrap();
    let at = b.windows(13).position(|w| w == b"StackMapTable").unwrap();
    b[at + 12] = b'X';
    assert!(
        run(
            Command::new("cp").arg("-r").arg(&inst).arg(&broken_dir),
            Duration::from_secs(60)
        )
        .status
        .success()
    );
    std::fs::write(broken_dir.join(rel), &b).unwrap();
    let victim_name = rel
        .to_string_lossy()
        .trim_end_matches(".class")
        .replace('/', ".");
    let control = verify_dir(javas[0], &tools, &broken_dir, &tools);
    let verdict = &control[&victim_name];
    assert!(
        verdict.contains("VerifyError"),
        "negative control {victim_name} verified: {verdict:?}"
    );

    let mut result = (0, 0);
    for java in javas {
        let before = verify_dir(java, &tools, &orig, &tools);
        let after = verify_dir(java, &tools, &inst, &tools);
        let ok_before: Vec<&String> = before
            .iter()
            .filter(|(_, e)| e.is_empty())
            .map(|(n, _)| n)
            .collect();
        let broken: Vec<(&String, &String)> = ok_before
            .iter()
            .filter_map(|n| after.get(*n).filter(|e| !e.is_empty()).map(|e| (*n, e)))
            .collect();
        println!(
            "{java}: {} of {} verify after instrumentation",
            ok_before.len() - broken.len(),
            ok_before.len()
        );
        for (n, e) in broken.iter().take(10) {
            println!("  BROKEN {n}: {e}");
        }
        assert!(
            broken.is_empty(),
            "{} classes of {jar} no longer verify under {java}",
            broken.len()
        );
        assert!(
            ok_before.len() > before.len() / 2,
            "most originals should verify"
        );
        result = (ok_before.len() - broken.len(), ok_before.len());
    }
    Some(result)
}

fn javas() -> Vec<&'static str> {
    let mut v = vec!["java"];
    if Path::new(JDK25).exists() {
        v.push(concat!("/usr/lib/jvm/temurin-25-jdk-amd64", "/bin/java"));
    } else {
        println!("JDK 25 not installed at {JDK25}: checking JDK 17 only");
    }
    v
}

#[test]
fn guava_verifies_after_instrumenting_every_method() {
    check_jar("/usr/share/java/guava.jar", &javas());
}

#[test]
fn commons_and_guice_verify_after_instrumenting_every_method() {
    for jar in [
        "/usr/share/java/commons-lang3.jar",
        "/usr/share/java/guice.jar",
        "/usr/share/java/commons-io.jar",
    ] {
        check_jar(jar, &javas());
    }
}
