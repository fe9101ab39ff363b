//! Compiles the probe class into OUT_DIR; the agent embeds the class files
//! with `include_bytes!`:
//! - `jni/sprig/rt/Probe.class` from java/sprig/rt/Probe.java for
//!   Java 17 (JNI natives only; used on JDK 17–21), required,
//!   and beside it `jni/sprig/rt/Calibration.class` (probe calibration, every JDK)
//!   `jni/sprig/rt/Session.class` (the JVM's one session, every JDK)
//!   and `jni/sprig/rt/Waits.class` (the wait probes of `--locks`, every JDK);
//! - `ffm/sprig/rt/Probe.class` from java22/sprig/rt/Probe.java with
//!   Java 22 (FFM critical downcalls first; used on JDK 22+),
//!   when a javac 22 or later is found (`SPRIG_JAVAC22`, `JAVA_HOME`, `javac`
//!   on the PATH, /usr/lib/jvm/*). Without one (or with
//!   `SPRIG_JAVAC22=none`) an empty file is written and the agent uses the
//!   JNI class on every JDK.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let src = PathBuf::from("java/sprig/rt/Probe.java");
    let calib = PathBuf::from("java/sprig/rt/Calibration.java");
    let claim = PathBuf::from("java/sprig/rt/Session.java");
    let waits = PathBuf::from("java/sprig/rt/Waits.java");
    let src22 = PathBuf::from("java22/sprig/rt/Probe.java");
    println!("cargo:rerun-if-changed={}", src.display());
    println!("cargo:rerun-if-changed={}", calib.display());
    println!("cargo:rerun-if-changed={}", claim.display());
    println!("cargo:rerun-if-changed={}", waits.display());
    println!("cargo:rerun-if-changed={}", src22.display());
    println!("cargo:rerun-if-env-changed=JAVA_HOME");
    println!("cargo:rerun-if-env-changed=SPRIG_JAVAC22");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let javac = match std::env::var_os("JAVA_HOME") {
        Some(home) if PathBuf::from(&home).join("bin/javac").is_file() => {
            PathBuf::from(home).join("bin/javac")
        }
        _ => PathBuf::from("javac"),
    };
    let jni_out = out.join("jni");
    if let Err(why) = compile(&javac, "11", &jni_out, &[&src, &calib, &claim, &waits]) {
        panic!(
            "sprig-agent needs a JDK's javac to compile {}: {why}. \
             Install a JDK (17 or later) or set JAVA_HOME.",
            src.display()
        );
    }
    let ffm_class = out.join("ffm/sprig/rt/Probe.class");
    let _ = std::fs::remove_file(&ffm_class);
    let built = javac22().is_some_and(|j| match compile(&j, "22", &out.join("ffm"), &[&src22, &calib]) {
        Ok(()) => true,
        Err(why) => {
            println!(
                "cargo:warning=the JDK 22+ probe class was not built ({why}); the agent uses JNI probes on every JDK"
            );
            false
        }
    });
    // Integration tests read this to know which class JDK 22+ gets.
    println!("cargo:rustc-env=SPRIG_FFM_PROBE={}", u8::from(built));
    if !built {
        std::fs::create_dir_all(ffm_class.parent().expect("has a parent"))
            .expect("create OUT_DIR/ffm");
        std::fs::write(&ffm_class, b"").expect("write the empty JDK 22+ class marker");
    }
}

fn compile(javac: &Path, release: &str, out: &Path, sources: &[&Path]) -> Result<(), String> {
    // Not `--release`: the probe class uses `jdk.internal.misc.Unsafe`
    // (sampled timing's Java path), which only the JDK's own modules show;
    // the agent exports the package to the class at run time.
    let o = Command::new(javac)
        .args(["-source", release, "-target", release])
        .args(["--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED"])
        .args(["-nowarn", "-Xlint:-options", "-d"])
        .arg(out)
        .args(sources)
        .output()
        .map_err(|e| format!("{}: {e}", javac.display()))?;
    if !o.status.success() {
        return Err(format!(
            "javac failed:\n{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    for src in sources {
        let stem = src.file_stem().and_then(|s| s.to_str()).unwrap_or("?");
        let class = out.join(format!("sprig/rt/{stem}.class"));
        if !class.is_file() {
            return Err(format!("javac did not write {}", class.display()));
        }
    }
    Ok(())
}

/// The feature version `javac -version` reports (`javac 25.0.3` → 25).
fn javac_version(javac: &Path) -> Option<u32> {
    let o = Command::new(javac).arg("-version").output().ok()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let v = text.split_whitespace().nth(1)?;
    v.split(['.', '-', '+']).next()?.parse().ok()
}

/// A javac that can compile for release 22 (`SPRIG_JAVAC22=none`: none,
/// as on a machine with only JDK 17).
fn javac22() -> Option<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(j) = std::env::var_os("SPRIG_JAVAC22") {
        if j == "none" {
            return None;
        }
        candidates.push(PathBuf::from(j));
    }
    if let Some(home) = std::env::var_os("JAVA_HOME") {
        candidates.push(PathBuf::from(home).join("bin/javac"));
    }
    candidates.push(PathBuf::from("javac"));
    if let Ok(dir) = std::fs::read_dir("/usr/lib/jvm") {
        let mut homes: Vec<PathBuf> = dir.flatten().map(|e| e.path()).collect();
        homes.sort();
        candidates.extend(homes.into_iter().map(|h| h.join("bin/javac")));
    }
    candidates
        .into_iter()
        .find(|j| javac_version(j).is_some_and(|v| v >= 22))
}
