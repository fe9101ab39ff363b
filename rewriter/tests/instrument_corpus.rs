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
fn check_jar(jar: &str, javas: &[&str], strict: bool) -> Option<(usize, usize)> {
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
    if class_files(&orig).is_empty() {
        println!("skipping {jar}: no classes");
        return None;
    }
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
            !strict || ok_before.len() > before.len() / 2,
            "most originals should verify"
        );
        result = (ok_before.len() - broken.len(), ok_before.len());
        if java == &javas[0] {
            negative_control(java, &tools, &inst, &tmp.path().join("broken"), &ok_before);
        }
    }
    Some(result)
}

/// The harness must notice a broken class: renaming the StackMapTable
/// attribute of a class (that verified) with branches makes it unverifiable.
fn negative_control(java: &str, tools: &Path, inst: &Path, broken_dir: &Path, ok: &[&String]) {
    // Version 50 classes fail over to the inference verifier: use 51+.
    let has_smt = |f: &Path| {
        let b = std::fs::read(f).unwrap();
        u16::from_be_bytes([b[6], b[7]]) >= 51 && b.windows(13).any(|w| w == b"StackMapTable")
    };
    let name_of = |f: &Path| {
        f.strip_prefix(inst)
            .unwrap()
            .to_string_lossy()
            .trim_end_matches(".class")
            .replace('/', ".")
    };
    let Some(victim) = class_files(inst)
        .into_iter()
        .find(|f| has_smt(f) && ok.contains(&&name_of(f)))
    else {
        return;
    };
    let mut b = std::fs::read(&victim).unwrap();
    let at = b.windows(13).position(|w| w == b"StackMapTable").unwrap();
    b[at + 12] = b'X';
    assert!(
        run(
            Command::new("cp").arg("-r").arg(inst).arg(broken_dir),
            Duration::from_secs(60)
        )
        .status
        .success()
    );
    std::fs::write(broken_dir.join(victim.strip_prefix(inst).unwrap()), &b).unwrap();
    let control = verify_dir(java, tools, broken_dir, tools);
    let verdict = &control[&name_of(&victim)];
    assert!(
        verdict.contains("VerifyError"),
        "negative control {} verified: {verdict:?}",
        name_of(&victim)
    );
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
    check_jar("/usr/share/java/guava.jar", &javas(), true);
}

#[test]
fn commons_and_guice_verify_after_instrumenting_every_method() {
    for jar in [
        "/usr/share/java/commons-lang3.jar",
        "/usr/share/java/guice.jar",
        "/usr/share/java/commons-io.jar",
    ] {
        check_jar(jar, &javas(), true);
    }
}

/// Every jar under /usr/share/java (symlinks skipped). Heavy: run with
/// `cargo test -p sprig-rewriter --test instrument_corpus -- --ignored --nocapture`.
#[test]
#[ignore = "heavy: every system jar"]
fn every_system_jar_verifies_after_instrumenting_every_method() {
    let mut jars: Vec<_> = std::fs::read_dir("/usr/share/java")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jar"))
        .collect();
    jars.sort();
    let (mut ok, mut total) = (0, 0);
    for jar in jars {
        if let Some((a, b)) = check_jar(&jar.display().to_string(), &javas(), false) {
            ok += a;
            total += b;
        }
    }
    println!("all system jars: {ok} of {total} classes verify after instrumentation");
}

/// Every class of a JDK runtime image outside `java.*` (which only the boot
/// loader may define), defined child-first by VerifyLoader from the image's
/// modules flattened into one directory. Heavy: run with
/// `cargo test --release -p sprig-rewriter --test instrument_corpus jdk_image -- --ignored --nocapture`.
fn check_jdk_image(jdk: &str) {
    let tmp = TempDir::new("jdkimg");
    let img = tmp.path().join("img");
    let flat = tmp.path().join("orig");
    let inst = tmp.path().join("inst");
    let tools = tmp.path().join("tools");
    for d in [&img, &flat, &tools] {
        std::fs::create_dir_all(d).unwrap();
    }
    let o = run(
        Command::new(format!("{jdk}/bin/jimage"))
            .arg("extract")
            .arg("--dir")
            .arg(&img)
            .arg(format!("{jdk}/lib/modules")),
        Duration::from_secs(300),
    );
    assert!(o.status.success());
    for m in std::fs::read_dir(&img).unwrap() {
        let m = m.unwrap().path();
        let o = run(
            Command::new("cp")
                .arg("-r")
                .arg(format!("{}/.", m.display()))
                .arg(&flat),
            Duration::from_secs(300),
        );
        assert!(o.status.success());
    }
    javac(
        "javac",
        &["--release", "11"],
        &[java_src("loader/VerifyLoader.java")],
        &tools,
    );
    let s = instrument_dir_filtered(
        &flat,
        &inst,
        &probe_set("sprig/test/Probe"),
        |_, _, _| 77_777,
        |n| !n.starts_with("java/"),
    );
    println!(
        "{jdk}: {} classes, {} methods instrumented, {} skipped",
        s.classes,
        s.instrumented,
        s.skipped.len()
    );
    for (m, why) in s.skipped.iter().take(20) {
        println!("  skipped {m}: {why}");
    }
    let java = format!("{jdk}/bin/java");
    let before = verify_dir(&java, &tools, &flat, &tools);
    let after = verify_dir(&java, &tools, &inst, &tools);
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
        "{java}: {} of {} classes verify after instrumentation",
        ok_before.len() - broken.len(),
        ok_before.len()
    );
    for (n, e) in broken.iter().take(20) {
        println!("  BROKEN {n}: {e}");
    }
    assert!(
        broken.is_empty(),
        "{} JDK classes no longer verify",
        broken.len()
    );
    assert!(ok_before.len() > 15_000);
}

#[test]
#[ignore = "heavy: a whole JDK image"]
fn jdk_17_image_verifies_after_instrumenting_every_method() {
    check_jdk_image("/usr/lib/jvm/java-17-openjdk-amd64");
}

#[test]
#[ignore = "heavy: a whole JDK image"]
fn jdk_25_image_verifies_after_instrumenting_every_method() {
    if !Path::new(JDK25).exists() {
        println!("skipping: JDK 25 not installed at {JDK25}");
        return;
    }
    check_jdk_image(JDK25);
}
