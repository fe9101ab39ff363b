//! The JDK itself, instrumented: every method of java.base and jdk.compiler
//! gets probes, the result is patched into a JVM running under
//! `-Xverify:all` (boot classes verified too), and javac compiles the
//! test's Java sources to exactly the same class files as an untouched JVM does.

mod instrument_util;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use instrument_util::*;

/// Packages the VM runs while it is still being created: a probe call
/// there crashes the JVM in genesis (before any agent could redefine a
/// class), so this test leaves them alone. At run time sprig redefines
/// classes only after VM init, where these are fine too.
const BOOTSTRAP: &[&str] = &["java/lang/", "jdk/internal/", "sun/"];

fn boot_check(jdk: &str) {
    let tmp = TempDir::new("boot");
    let img = tmp.path().join("img");
    let inst = tmp.path().join("inst");
    let tools = tmp.path().join("tools");
    for d in [&img, &inst, &tools] {
        std::fs::create_dir_all(d).unwrap();
    }
    let o = run(
        Command::new(format!("{jdk}/bin/jimage"))
            .args([
                "extract",
                "--include",
                "regex:/(java.base|jdk.compiler)/.*",
                "--dir",
            ])
            .arg(&img)
            .arg(format!("{jdk}/lib/modules")),
        Duration::from_secs(300),
    );
    assert!(
        o.status.success(),
        "jimage: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let mut id = 0u32;
    for module in ["java.base", "jdk.compiler"] {
        let s = instrument_dir_filtered(
            &img.join(module),
            &inst.join(module),
            &probe_set("sprig/test/BootProbe"),
            |_, _, _| {
                id = id.wrapping_add(1);
                id
            },
            |name| !BOOTSTRAP.iter().any(|p| name.starts_with(p)),
        );
        println!(
            "{jdk} {module}: {} classes, {} methods instrumented, {} skipped",
            s.classes,
            s.instrumented,
            s.skipped.len()
        );
        for (m, why) in &s.skipped {
            println!("  skipped {m}: {why}");
        }
        assert!(s.instrumented > 10_000);
    }
    let javac_bin = format!("{jdk}/bin/javac");
    let patch_src = tmp.path().join("bootsrc");
    std::fs::create_dir_all(patch_src.join("sprig/test")).unwrap();
    std::fs::copy(
        java_src("bootprobe/sprig/test/BootProbe.java"),
        patch_src.join("sprig/test/BootProbe.java"),
    )
    .unwrap();
    javac(
        &javac_bin,
        &[
            "--patch-module",
            &format!("java.base={}", patch_src.display()),
        ],
        &[patch_src.join("sprig/test/BootProbe.java")],
        &inst.join("java.base"),
    );
    // --patch-module puts module classes under <dir>/java.base/...; javac wrote sprig/test there.
    javac(
        &javac_bin,
        &[],
        &[java_src("boot/CompileWithProbes.java")],
        &tools,
    );

    let java = format!("{jdk}/bin/java");
    let compile = |patched: bool, out: &Path| {
        std::fs::create_dir_all(out).unwrap();
        let mut c = Command::new(&java);
        c.args(["-Xverify:all", "-Xshare:off"]);
        if patched {
            c.arg(format!(
                "--patch-module=java.base={}",
                inst.join("java.base").display()
            ));
            c.arg(format!(
                "--patch-module=jdk.compiler={}",
                inst.join("jdk.compiler").display()
            ));
            c.arg("--add-exports=java.base/sprig.test=jdk.compiler,ALL-UNNAMED");
        }
        c.arg("-cp")
            .arg(&tools)
            .arg("CompileWithProbes")
            .arg("-g")
            .arg("-d")
            .arg(out);
        c.args([
            java_src("loader/VerifyLoader.java"),
            java_src("probe/sprig/test/Probe.java"),
            java_src("boot/CompileWithProbes.java"),
        ]);
        let o = run(&mut c, Duration::from_secs(600));
        let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(
            o.status.success() && stdout.contains("javac rc 0"),
            "patched={patched}: {stdout}\n{stderr}"
        );
        assert!(!stderr.contains("VerifyError"), "{stderr}");
        stdout
    };
    let plain = compile(false, &tmp.path().join("out0"));
    let probed = compile(true, &tmp.path().join("out1"));
    assert!(plain.contains("javac rc 0"), "{plain}");
    assert!(plain.contains("probes 0 0"), "{plain}");
    assert!(
        probed.contains("javac rc 0\nprobes many many"),
        "probes must have run: {probed}"
    );
    let a = class_files(&tmp.path().join("out0"));
    let b = class_files(&tmp.path().join("out1"));
    assert_eq!(a.len(), b.len());
    assert!(a.len() >= 3);
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(
            std::fs::read(x).unwrap(),
            std::fs::read(y).unwrap(),
            "{} differs",
            x.display()
        );
    }
}

#[test]
fn instrumented_jdk_17_runs_javac_identically() {
    boot_check("/usr/lib/jvm/java-17-openjdk-amd64");
}

#[test]
fn instrumented_jdk_25_runs_javac_identically() {
    if !Path::new(JDK25).exists() {
        println!("skipping: JDK 25 not installed at {JDK25}");
        return;
    }
    boot_check(JDK25);
}
