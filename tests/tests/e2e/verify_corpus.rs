//! The rewriter's main figure: instrument every non-native, non-abstract
//! method of every class of a corpus and check originals and instrumented
//! versions with HotSpot's verifier under `-Xverify:all`.
//!
//! How classes get verified (tests/verifier/SprigVerify.java): each class is
//! loaded (JDK classes from their module, application classes by a fresh
//! class loader), then handed to `Instrumentation.redefineClasses` with its
//! original bytes and with its instrumented bytes, then restored. HotSpot
//! verifies every class given to RedefineClasses when verification is on for
//! its loader; `-Xverify:all` turns on BytecodeVerificationLocal (boot
//! classes) and BytecodeVerificationRemote (the rest), and the test checks
//! both flags with -XX:+PrintFlagsFinal. JDK classes call probes in
//! `java.lang.SprigProbe`, patched into java.base, so instrumented code of any
//! module links while it is installed; application classes call
//! `sprig.rt.Probe`. A JDK class whose live version differs from the image
//! (JFR adds fields to jdk.internal.event classes as they load) cannot take
//! its image bytes back; outside java.* the harness then checks a fresh copy
//! defined by a child-first loader instead. HotSpot never verifies
//! java.lang.Object, Class, String and Throwable; the figures say so. Two
//! negative controls (a JDK class and an application
//! class with `max_stack` zeroed) must be rejected, or the run proves nothing.
//!
//! Corpus: by default java.base of the JDK 17 image (and of JDK 25's where
//! installed), every jar under /usr/share/java, and fixtures/. With
//! `SPRIG_FULL_CORPUS=1`, every module of each image.
//!
//! Figure: classes that verify after instrumentation ÷ classes whose
//! originals verify (goal 100%), and methods skipped with reasons (goal
//! below 0.1%).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sprig_rewriter::vocab::access::NO_CODE;
use sprig_rewriter::{ProbeSet, SkipReason, Target};
use sprig_tests::{Jdk, TempDir, javac, jdk17, jdk25, repo_root};

fn full_corpus() -> bool {
    std::env::var("SPRIG_FULL_CORPUS").is_ok_and(|v| v == "1")
}

/// What instrumenting one unit produced.
#[derive(Default)]
struct Prep {
    classes: usize,
    class_bytes: u64,
    /// Methods with code that were requested.
    requested: usize,
    instrumented: usize,
    /// Skip reason (normalised) -> (count, examples).
    skipped: BTreeMap<String, (usize, Vec<String>)>,
    /// Classes the rewriter refused as a whole, or could not read.
    class_errors: Vec<String>,
    /// Call sites callees_all found (it must read every class).
    call_sites: usize,
}

impl Prep {
    fn skipped_count(&self) -> usize {
        self.skipped.values().map(|v| v.0).sum()
    }

    fn skip(&mut self, reason: String, example: String, n: usize) {
        let e = self.skipped.entry(reason).or_default();
        e.0 += n;
        if e.1.len() < 5 {
            e.1.push(example);
        }
    }

    fn add(&mut self, o: &Prep) {
        self.classes += o.classes;
        self.class_bytes += o.class_bytes;
        self.requested += o.requested;
        self.instrumented += o.instrumented;
        self.call_sites += o.call_sites;
        for (k, (n, ex)) in &o.skipped {
            let e = self.skipped.entry(k.clone()).or_default();
            e.0 += n;
            for x in ex {
                if e.1.len() < 5 {
                    e.1.push(x.clone());
                }
            }
        }
        self.class_errors.extend(o.class_errors.iter().cloned());
    }
}

fn reason_key(r: &SkipReason) -> String {
    match r {
        SkipReason::TooLarge(_) => "code would exceed 65,535 bytes".into(),
        other => other.to_string(),
    }
}

/// One unit for the harness: a name, its kind and the two zips.
struct Unit {
    kind: &'static str,
    name: String,
    original: PathBuf,
    instrumented: PathBuf,
}

fn stored() -> zip::write::SimpleFileOptions {
    zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored)
}

/// Writes `entries` (name, bytes) as the original zip and their instrumented
/// versions as the instrumented zip; returns the unit and what happened.
fn prepare_unit(
    kind: &'static str,
    name: &str,
    entries: impl Iterator<Item = (String, Vec<u8>)>,
    probes: &ProbeSet,
    next_id: &mut u32,
    dir: &Path,
) -> (Unit, Prep) {
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let original = dir.join(format!("{kind}-{safe}-orig.zip"));
    let instrumented = dir.join(format!("{kind}-{safe}-instr.zip"));
    let mut zo = zip::ZipWriter::new(std::io::BufWriter::new(
        fs::File::create(&original).unwrap(),
    ));
    let mut zi = zip::ZipWriter::new(std::io::BufWriter::new(
        fs::File::create(&instrumented).unwrap(),
    ));
    let mut prep = Prep::default();
    for (entry, bytes) in entries {
        let class_path = match kind {
            "jdk" => entry
                .split_once('/')
                .map(|x| x.1)
                .unwrap_or(&entry)
                .to_string(),
            _ => entry.clone(),
        };
        if !entry.ends_with(".class")
            || class_path.ends_with("module-info.class")
            || entry.starts_with("META-INF/")
        {
            continue;
        }
        prep.classes += 1;
        prep.class_bytes += bytes.len() as u64;
        let new = instrument_class(&entry, &bytes, probes, next_id, &mut prep);
        zo.start_file(entry.as_str(), stored()).unwrap();
        zo.write_all(&bytes).unwrap();
        zi.start_file(entry.as_str(), stored()).unwrap();
        zi.write_all(&new).unwrap();
    }
    zo.finish().unwrap().flush().unwrap();
    zi.finish().unwrap().flush().unwrap();
    (
        Unit {
            kind,
            name: name.to_string(),
            original,
            instrumented,
        },
        prep,
    )
}

/// Instruments every method with code; returns the new bytes (the original
/// ones when the class could not be instrumented at all).
fn instrument_class(
    entry: &str,
    bytes: &[u8],
    probes: &ProbeSet,
    next_id: &mut u32,
    prep: &mut Prep,
) -> Vec<u8> {
    let info = match sprig_rewriter::class_info(bytes) {
        Ok(i) => i,
        Err(e) => {
            prep.class_errors.push(format!("{entry}: class_info: {e}"));
            return bytes.to_vec();
        }
    };
    match sprig_rewriter::callees_all(bytes) {
        Ok(all) => prep.call_sites += all.iter().map(|m| m.2.len()).sum::<usize>(),
        Err(e) => prep.class_errors.push(format!("{entry}: callees_all: {e}")),
    }
    let targets: Vec<Target> = info
        .methods
        .iter()
        .filter(|m| m.access & NO_CODE == 0)
        .map(|m| {
            let id = *next_id;
            *next_id += 1;
            Target {
                name: m.name.clone(),
                descriptor: m.descriptor.clone(),
                id,
                probes: 0,
            }
        })
        .collect();
    prep.requested += targets.len();
    if targets.is_empty() {
        return bytes.to_vec();
    }
    // Allocation probes too (`--alloc`), so the verifier checks them.
    let mut sites = 0u32;
    let mut site = |_: &sprig_rewriter::AllocSite| {
        sites += 1;
        sites
    };
    let mut allocs = sprig_rewriter::Allocs {
        class: &probes.class,
        object: "alloc",
        array: "allocArray",
        array_length: Some("allocArrayLength"),
        site: &mut site,
    };
    match sprig_rewriter::instrument_full(
        bytes,
        &targets,
        std::slice::from_ref(probes),
        None,
        Some(&mut allocs),
    ) {
        Ok(done) => {
            for m in &done.methods {
                match &m.result {
                    Ok(()) => prep.instrumented += 1,
                    Err(r) => prep.skip(
                        reason_key(r),
                        format!("{}.{}{}: {r}", info.name, m.name, m.descriptor),
                        1,
                    ),
                }
            }
            done.bytes
        }
        Err(e) => {
            prep.class_errors.push(format!("{entry}: instrument: {e}"));
            prep.skip(
                "class rejected by instrument".into(),
                format!("{entry}: {e}"),
                targets.len(),
            );
            bytes.to_vec()
        }
    }
}

/// Sets `max_stack` of every Code attribute to 0: a class the verifier must
/// reject (every method that pushes anything overflows the operand stack).
fn zero_max_stack(b: &[u8]) -> Vec<u8> {
    let mut out = b.to_vec();
    let u2 = |p: usize| u16::from_be_bytes([b[p], b[p + 1]]) as usize;
    let u4 = |p: usize| u32::from_be_bytes([b[p], b[p + 1], b[p + 2], b[p + 3]]) as usize;
    let count = u2(8);
    let mut p = 10;
    let mut utf8 = BTreeMap::new();
    let mut i = 1;
    while i < count {
        let tag = b[p];
        p += 1;
        match tag {
            1 => {
                let len = u2(p);
                utf8.insert(i, &b[p + 2..p + 2 + len]);
                p += 2 + len;
            }
            3 | 4 | 9 | 10 | 11 | 12 | 17 | 18 => p += 4,
            5 | 6 => {
                p += 8;
                i += 1;
            }
            7 | 8 | 16 | 19 | 20 => p += 2,
            15 => p += 3,
            t => panic!("tag {t}"),
        }
        i += 1;
    }
    p += 6;
    let interfaces = u2(p);
    p += 2 + 2 * interfaces;
    for members in 0..2 {
        let n = u2(p);
        p += 2;
        for _ in 0..n {
            p += 6;
            let attrs = u2(p);
            p += 2;
            for _ in 0..attrs {
                let name = u2(p);
                let len = u4(p + 2);
                if members == 1 && utf8.get(&name).is_some_and(|n| *n == b"Code") {
                    out[p + 6] = 0;
                    out[p + 7] = 0;
                }
                p += 6 + len;
            }
        }
    }
    out
}

/// The harness compiled into `dir`: (verify.jar, probe classpath dir, java.base patch dir).
fn build_harness(jdk: &Jdk, dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let src = repo_root().join("tests/verifier");
    let classes = dir.join("harness");
    let probe = dir.join("probe");
    let patch = dir.join("patch");
    for d in [&classes, &probe, &patch] {
        fs::create_dir_all(d).unwrap();
    }
    let run = |mut c: Command, what: &str| {
        let status = c.status().unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(status.success(), "{what} failed");
    };
    let mut c = Command::new(jdk.javac());
    c.args(["-nowarn", "--release", "17", "-d"])
        .arg(&classes)
        .arg(src.join("SprigVerify.java"));
    run(c, "javac SprigVerify");
    let mut c = Command::new(jdk.javac());
    c.args(["--release", "17", "-d"])
        .arg(&probe)
        .arg(src.join("probe/sprig/rt/Probe.java"));
    run(c, "javac Probe");
    let mut c = Command::new(jdk.javac());
    c.arg("--patch-module")
        .arg(format!("java.base={}", src.join("probe").display()))
        .arg("-d")
        .arg(&patch)
        .arg(src.join("probe/java/lang/SprigProbe.java"));
    run(c, "javac SprigProbe");
    let jar = dir.join("verify.jar");
    let mut c = Command::new(jdk.home.join("bin/jar"));
    c.arg("cfm")
        .arg(&jar)
        .arg(src.join("Manifest.txt"))
        .arg("-C")
        .arg(&classes)
        .arg(".");
    run(c, "jar");
    // javac --patch-module puts the class under <out>/java.base/ or <out>/ depending on the release.
    let patch_root = if patch.join("java.base").is_dir() {
        patch.join("java.base")
    } else {
        patch
    };
    (jar, probe, patch_root)
}

/// Per-unit verification outcome from the harness.
#[derive(Default, Debug)]
struct Verified {
    total: usize,
    loaded: usize,
    orig_ok: usize,
    instr_ok: usize,
    changed: usize,
    unchecked: usize,
    failures: Vec<String>,
    noload: Vec<String>,
    origfail: Vec<String>,
    /// JDK classes checked as child-first copies (live version differs from the image).
    retried: Vec<String>,
}

/// Asserts that `-Xverify:all` turns on verification for boot classes
/// (BytecodeVerificationLocal) and for the rest (BytecodeVerificationRemote).
fn check_verify_flags(jdk: &Jdk) {
    let out = Command::new(jdk.java())
        .args([
            "-XX:+UnlockDiagnosticVMOptions",
            "-Xverify:all",
            "-XX:+PrintFlagsFinal",
            "-version",
        ])
        .output()
        .expect("run java -XX:+PrintFlagsFinal");
    let text = String::from_utf8_lossy(&out.stdout);
    for flag in ["BytecodeVerificationLocal", "BytecodeVerificationRemote"] {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(flag))
            .unwrap_or_else(|| panic!("JDK {}: no {flag} in -XX:+PrintFlagsFinal", jdk.major));
        assert_eq!(
            line.split_whitespace().nth(3),
            Some("true"),
            "JDK {}: {line}",
            jdk.major
        );
    }
    println!(
        "JDK {}: -Xverify:all sets BytecodeVerificationLocal and BytecodeVerificationRemote",
        jdk.major
    );
}

/// Runs the harness on `units` with `jdk`; returns results by unit name.
fn verify(jdk: &Jdk, units: &[Unit], dir: &Path, timeout: Duration) -> BTreeMap<String, Verified> {
    check_verify_flags(jdk);
    let (jar, probe, patch) = build_harness(&jdk17(), dir);
    let job = dir.join(format!("job-{}.txt", jdk.major));
    let mut text = String::new();
    for u in units {
        text.push_str(&format!(
            "{}\t{}\t{}\t{}\n",
            u.kind,
            u.name,
            u.original.display(),
            u.instrumented.display()
        ));
    }
    fs::write(&job, text).unwrap();
    let out_path = dir.join(format!("verify-{}.out", jdk.major));
    let err_path = dir.join(format!("verify-{}.err", jdk.major));
    let mut child = Command::new(jdk.java())
        .args([
            "-Xverify:all",
            "-Xmx3g",
            "-Xss4m",
            "-XX:-UsePerfData",
            "--add-modules",
            "ALL-SYSTEM",
        ])
        .arg(format!("--patch-module=java.base={}", patch.display()))
        .arg(format!("-javaagent:{}", jar.display()))
        .arg("-cp")
        .arg(format!("{}:{}", jar.display(), probe.display()))
        .arg("sprigverify.SprigVerify")
        .arg(&job)
        .stdout(Stdio::from(fs::File::create(&out_path).unwrap()))
        .stderr(Stdio::from(fs::File::create(&err_path).unwrap()))
        .spawn()
        .expect("start java");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "verifier harness on JDK {} timed out after {timeout:?}",
                jdk.major
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stderr = fs::read_to_string(&err_path).unwrap_or_default();
    let mut results: BTreeMap<String, Verified> = BTreeMap::new();
    let mut java = None;
    let mut done = false;
    for line in BufReader::new(fs::File::open(&out_path).unwrap()).lines() {
        let line = line.unwrap();
        let mut words = line.splitn(4, ' ');
        let tag = words.next().unwrap_or("");
        let unit = words.next().unwrap_or("").to_string();
        let rest = format!(
            "{} {}",
            words.next().unwrap_or(""),
            words.next().unwrap_or("")
        );
        match tag {
            "JAVA" => java = Some(line.clone()),
            "DONE" => done = true,
            "UNIT" => {
                let v = results.entry(unit).or_default();
                for kv in rest.split_whitespace() {
                    let Some((k, n)) = kv.split_once('=') else {
                        continue;
                    };
                    let n: usize = n.parse().unwrap();
                    match k {
                        "total" => v.total = n,
                        "loaded" => v.loaded = n,
                        "orig_ok" => v.orig_ok = n,
                        "instr_ok" => v.instr_ok = n,
                        "changed" => v.changed = n,
                        "unchecked" => v.unchecked = n,
                        _ => {}
                    }
                }
            }
            "FAIL" | "RESTOREFAIL" => results.entry(unit).or_default().failures.push(rest),
            "NOLOAD" => results.entry(unit).or_default().noload.push(rest),
            "ORIGFAIL" => results.entry(unit).or_default().origfail.push(rest),
            "RETRIED" => results.entry(unit).or_default().retried.push(rest),
            "ERROR" => panic!("harness: {line}"),
            _ => {}
        }
    }
    assert!(
        status.success() && done,
        "harness on JDK {} failed ({status}): {stderr}",
        jdk.major
    );
    println!(
        "JDK {}: harness ran on {}",
        jdk.major,
        java.unwrap_or_default()
    );
    results
}

/// Class entries of an extracted JDK image: (module/pkg/Name.class, bytes),
/// for the given modules (all when `None`), sorted.
fn image_entries(root: &Path, modules: Option<&[&str]>) -> Vec<(String, PathBuf)> {
    fn walk(dir: &Path, rel: &str, out: &mut Vec<(String, PathBuf)>) {
        let mut entries: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let r = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            if p.is_dir() {
                walk(&p, &r, out);
            } else if r.ends_with(".class") {
                out.push((r, p));
            }
        }
    }
    let mut mods: Vec<String> = fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .filter(|m| modules.is_none_or(|want| want.contains(&m.as_str())))
        .collect();
    mods.sort();
    let mut out = Vec::new();
    for m in mods {
        walk(&root.join(&m), &m, &mut out);
    }
    out
}

/// The image of `jdk` extracted once into the cargo target's temp dir.
fn extracted_image(jdk: &Jdk) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("jimage-{}", jdk.major));
    let marker = dir.join(".complete");
    if !marker.exists() {
        let _ = fs::remove_dir_all(&dir);
        let status = Command::new(jdk.home.join("bin/jimage"))
            .arg("extract")
            .arg("--dir")
            .arg(&dir)
            .arg(jdk.home.join("lib/modules"))
            .status()
            .expect("run jimage");
        assert!(
            status.success(),
            "jimage extract failed for JDK {}",
            jdk.major
        );
        fs::write(&marker, "").unwrap();
    }
    dir
}

fn dir_entries(root: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        let mut entries: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(root, &p, out);
            } else if p.extension().is_some_and(|e| e == "class") {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.push((rel, fs::read(&p).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out
}

fn jar_entries(path: &Path) -> Vec<(String, Vec<u8>)> {
    let mut z = zip::ZipArchive::new(fs::File::open(path).unwrap()).unwrap();
    let mut out = Vec::new();
    for i in 0..z.len() {
        let mut e = z.by_index(i).unwrap();
        if e.is_file() && e.name().ends_with(".class") {
            let mut b = Vec::new();
            std::io::Read::read_to_end(&mut e, &mut b).unwrap();
            out.push((e.name().to_string(), b));
        }
    }
    out
}

/// Every distinct jar under /usr/share/java (symlinked aliases once).
fn system_jars() -> Vec<PathBuf> {
    let mut seen = BTreeSet::new();
    let mut jars: Vec<PathBuf> = fs::read_dir("/usr/share/java")
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    jars.sort();
    jars.into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jar"))
        .filter_map(|p| fs::canonicalize(&p).ok())
        .filter(|p| seen.insert(p.clone()))
        .collect()
}

/// A group of units checked together, with one line of figures.
struct Group {
    title: String,
    prep: Prep,
    verified: Verified,
}

fn summarize(
    title: &str,
    units: &[&str],
    preps: &BTreeMap<String, Prep>,
    results: &BTreeMap<String, Verified>,
) -> Group {
    let mut prep = Prep::default();
    let mut v = Verified::default();
    for u in units {
        if let Some(p) = preps.get(*u) {
            prep.add(p);
        }
        let r = results
            .get(*u)
            .unwrap_or_else(|| panic!("no harness result for unit {u}"));
        v.total += r.total;
        v.loaded += r.loaded;
        v.orig_ok += r.orig_ok;
        v.instr_ok += r.instr_ok;
        v.changed += r.changed;
        v.unchecked += r.unchecked;
        v.failures
            .extend(r.failures.iter().map(|f| format!("{u}: {f}")));
        v.noload
            .extend(r.noload.iter().map(|f| format!("{u}: {f}")));
        v.origfail
            .extend(r.origfail.iter().map(|f| format!("{u}: {f}")));
        v.retried
            .extend(r.retried.iter().map(|f| format!("{u}: {f}")));
    }
    Group {
        title: title.to_string(),
        prep,
        verified: v,
    }
}

fn pct(a: usize, b: usize) -> f64 {
    if b == 0 {
        100.0
    } else {
        100.0 * a as f64 / b as f64
    }
}

fn report(g: &Group) {
    let (p, v) = (&g.prep, &g.verified);
    println!("== {}", g.title);
    println!(
        "  classes {} ({:.1} MB), loaded {}, originals verify {}, instrumented verify {}/{} = {:.3}% ({} changed, {} bootstrap classes HotSpot never verifies)",
        v.total,
        p.class_bytes as f64 / 1e6,
        v.loaded,
        v.orig_ok,
        v.instr_ok,
        v.orig_ok,
        pct(v.instr_ok, v.orig_ok),
        v.changed,
        v.unchecked
    );
    println!(
        "  methods with code {}, instrumented {}, skipped {} = {:.4}%; call sites {}",
        p.requested,
        p.instrumented,
        p.skipped_count(),
        pct(p.skipped_count(), p.requested),
        p.call_sites
    );
    for (reason, (n, examples)) in &p.skipped {
        println!("    skipped {n}: {reason}");
        for e in examples {
            println!("      e.g. {e}");
        }
    }
    let show = |what: &str, list: &[String]| {
        if !list.is_empty() {
            println!("  {what}: {}", list.len());
            for l in list.iter().take(8) {
                println!("    {}", l.chars().take(300).collect::<String>());
            }
        }
    };
    show(
        "JDK classes checked as child-first copies (their live version differs)",
        &v.retried,
    );
    show("not loadable (excluded)", &v.noload);
    show("originals rejected (excluded)", &v.origfail);
    show("class-level rewriter errors", &p.class_errors);
    show("INSTRUMENTED CLASSES THAT FAIL VERIFICATION", &v.failures);
}

#[test]
fn verify_corpus() {
    let started = Instant::now();
    let full = full_corpus();
    let work = TempDir::new("verify-corpus");
    println!(
        "verify corpus: {}",
        if full {
            "FULL (SPRIG_FULL_CORPUS=1): every module of each JDK image, every jar under /usr/share/java, fixtures"
        } else {
            "SAMPLE: java.base of each JDK image, every jar under /usr/share/java, fixtures (SPRIG_FULL_CORPUS=1 for every module)"
        }
    );
    let app_probes = ProbeSet {
        class: "sprig/rt/Probe".into(),
        entry: "enter".into(),
        exit: "exit".into(),
        entry_receiver: false,
    };
    let jdk_probes = ProbeSet {
        class: "java/lang/SprigProbe".into(),
        entry: "enter".into(),
        exit: "exit".into(),
        entry_receiver: false,
    };
    let mut next_id: u32 = 1;
    let mut groups = Vec::new();
    let mut jdks = vec![jdk17()];
    jdks.extend(jdk25("verify_corpus"));
    for jdk in &jdks {
        let t0 = Instant::now();
        let image = extracted_image(jdk);
        let modules: Option<&[&str]> = if full { None } else { Some(&["java.base"]) };
        let entries = image_entries(&image, modules);
        let mut by_module: BTreeMap<String, Vec<(String, PathBuf)>> = BTreeMap::new();
        for (name, path) in entries {
            let module = name.split('/').next().unwrap().to_string();
            by_module.entry(module).or_default().push((name, path));
        }
        let dir = work.path().join(format!("jdk{}", jdk.major));
        fs::create_dir_all(&dir).unwrap();
        let mut units = Vec::new();
        let mut preps = BTreeMap::new();
        for (module, files) in &by_module {
            let iter = files.iter().map(|(n, p)| (n.clone(), fs::read(p).unwrap()));
            let (unit, prep) = prepare_unit("jdk", module, iter, &jdk_probes, &mut next_id, &dir);
            units.push(unit);
            preps.insert(module.clone(), prep);
        }
        // Application classes verified by the same JVM: fixtures compiled by this JDK,
        // and on JDK 17 every system jar.
        let fixtures = TempDir::new("verify-fixtures");
        javac(jdk, &repo_root().join("fixtures/src"), fixtures.path(), &[]);
        javac(
            jdk,
            &repo_root().join("fixtures/demo"),
            fixtures.path(),
            &[],
        );
        let (unit, prep) = prepare_unit(
            "app",
            "fixtures",
            dir_entries(fixtures.path()).into_iter(),
            &app_probes,
            &mut next_id,
            &dir,
        );
        units.push(unit);
        preps.insert("fixtures".into(), prep);
        let mut jar_names = Vec::new();
        if jdk.major == 17 {
            for jar in system_jars() {
                let name = jar.file_name().unwrap().to_string_lossy().into_owned();
                let (unit, prep) = prepare_unit(
                    "app",
                    &name,
                    jar_entries(&jar).into_iter(),
                    &app_probes,
                    &mut next_id,
                    &dir,
                );
                units.push(unit);
                preps.insert(name.clone(), prep);
                jar_names.push(name);
            }
        }
        // Negative controls: one JDK class and one fixture class the verifier must reject.
        let control_jdk = "java.base/java/util/ArrayList.class".to_string();
        let list = fs::read(image.join(&control_jdk)).unwrap();
        let bad = zero_max_stack(&list);
        let (mut unit, _) = prepare_unit(
            "jdk",
            "control-jdk",
            std::iter::once((control_jdk.clone(), list)),
            &jdk_probes,
            &mut 0,
            &dir,
        );
        let mut w = zip::ZipWriter::new(fs::File::create(&unit.instrumented).unwrap());
        w.start_file(control_jdk.as_str(), stored()).unwrap();
        w.write_all(&bad).unwrap();
        w.finish().unwrap();
        unit.name = "control-jdk".into();
        units.push(unit);
        let fixture = dir_entries(fixtures.path())
            .into_iter()
            .next()
            .expect("a fixture class");
        let bad = zero_max_stack(&fixture.1);
        let (unit, _) = prepare_unit(
            "app",
            "control-app",
            std::iter::once(fixture.clone()),
            &app_probes,
            &mut 0,
            &dir,
        );
        let mut w = zip::ZipWriter::new(fs::File::create(&unit.instrumented).unwrap());
        w.start_file(fixture.0.as_str(), stored()).unwrap();
        w.write_all(&bad).unwrap();
        w.finish().unwrap();
        units.push(unit);
        let prep_secs = t0.elapsed().as_secs_f64();

        let t1 = Instant::now();
        let timeout = Duration::from_secs(if full { 1800 } else { 600 });
        let results = verify(jdk, &units, work.path(), timeout);
        println!(
            "JDK {}: instrumented in {prep_secs:.1} s, verified in {:.1} s",
            jdk.major,
            t1.elapsed().as_secs_f64()
        );
        for control in ["control-jdk", "control-app"] {
            let r = results.get(control).expect("control ran");
            assert_eq!(
                (r.orig_ok, r.instr_ok, r.failures.len()),
                (1, 0, 1),
                "JDK {}: negative control {control} was not rejected, so verification is not on: {r:?}",
                jdk.major
            );
            assert!(
                r.failures[0].contains("VerifyError"),
                "{control}: {:?}",
                r.failures
            );
        }
        let modules: Vec<&str> = by_module.keys().map(String::as_str).collect();
        let title = if full {
            "all modules".to_string()
        } else {
            "java.base".to_string()
        };
        groups.push(summarize(
            &format!("JDK {} runtime image ({title})", jdk.major),
            &modules,
            &preps,
            &results,
        ));
        groups.push(summarize(
            &format!("fixtures compiled by JDK {}", jdk.major),
            &["fixtures"],
            &preps,
            &results,
        ));
        if !jar_names.is_empty() {
            let names: Vec<&str> = jar_names.iter().map(String::as_str).collect();
            groups.push(summarize(
                &format!("{} jars under /usr/share/java on JDK 17", names.len()),
                &names,
                &preps,
                &results,
            ));
        }
    }
    for g in &groups {
        report(g);
    }
    let mut total = Prep::default();
    let (mut orig_ok, mut instr_ok) = (0, 0);
    for g in &groups {
        total.add(&g.prep);
        orig_ok += g.verified.orig_ok;
        instr_ok += g.verified.instr_ok;
    }
    println!(
        "TOTAL: instrumented classes verify {instr_ok}/{orig_ok} = {:.3}%; methods skipped {}/{} = {:.4}%; {:.0} s",
        pct(instr_ok, orig_ok),
        total.skipped_count(),
        total.requested,
        pct(total.skipped_count(), total.requested),
        started.elapsed().as_secs_f64()
    );
    for g in &groups {
        assert!(g.verified.orig_ok > 0, "{}: no original verified", g.title);
        assert!(
            g.verified.failures.is_empty(),
            "{}: {} instrumented classes fail verification",
            g.title,
            g.verified.failures.len()
        );
        assert_eq!(g.verified.instr_ok, g.verified.orig_ok, "{}", g.title);
        assert!(
            g.prep.class_errors.is_empty(),
            "{}: {} classes the rewriter rejected",
            g.title,
            g.prep.class_errors.len()
        );
    }
    assert!(total.instrumented > 0);
    assert!(
        (total.skipped_count() as f64) < 0.001 * total.requested as f64,
        "skipped {} of {} methods: over 0.1%",
        total.skipped_count(),
        total.requested
    );
}
