//! Compiles the probe class (java/sprig/rt/Probe.java) and the calibration
//! class (Calib.java) with `javac --release 8` into OUT_DIR; the agent embeds
//! the class files with `include_bytes!`.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let sources = [
        PathBuf::from("java/sprig/rt/Probe.java"),
        PathBuf::from("java/sprig/rt/Calib.java"),
    ];
    for src in &sources {
        println!("cargo:rerun-if-changed={}", src.display());
    }
    println!("cargo:rerun-if-env-changed=JAVA_HOME");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let javac = match std::env::var_os("JAVA_HOME") {
        Some(home) if PathBuf::from(&home).join("bin/javac").is_file() => {
            PathBuf::from(home).join("bin/javac")
        }
        _ => PathBuf::from("javac"),
    };
    let result = Command::new(&javac)
        .args(["--release", "8", "-nowarn", "-Xlint:-options", "-d"])
        .arg(&out)
        .args(&sources)
        .output();
    match result {
        Err(e) => panic!(
            "sprig-agent needs a JDK's javac to compile {} (tried {}): {e}. \
             Install a JDK (9 or later) or set JAVA_HOME.",
            sources[0].display(),
            javac.display()
        ),
        Ok(o) if !o.status.success() => panic!(
            "javac failed on {}:\n{}{}",
            sources[0].display(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
        Ok(_) => {}
    }
    for name in ["Probe", "Calib"] {
        let class = out.join(format!("sprig/rt/{name}.class"));
        assert!(class.is_file(), "javac did not write {}", class.display());
    }
}
