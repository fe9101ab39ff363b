//! Helpers shared by the instrumentation tests: javac/java discovery,
//! temp dirs, bounded child processes, and instrumenting whole directories.
#![allow(dead_code)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use sprig_rewriter::{ProbeSet, SkipReason, Target, class_info, instrument};

pub const JDK25: &str = "/usr/lib/jvm/temurin-25-jdk-amd64";

/// A directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "sprig-inst-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn java_src(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/java")
        .join(rel)
}

/// Runs a command with a time limit; panics (test failure) when it is exceeded.
pub fn run(cmd: &mut Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    let out_h = {
        let mut so = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            let mut v = Vec::new();
            std::io::Read::read_to_end(&mut so, &mut v).ok();
            v
        })
    };
    let err_h = {
        let mut se = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            let mut v = Vec::new();
            std::io::Read::read_to_end(&mut se, &mut v).ok();
            v
        })
    };
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Output {
                status,
                stdout: out_h.join().unwrap(),
                stderr: err_h.join().unwrap(),
            };
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} exceeded {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Compiles Java sources into `out` with the given extra javac options.
pub fn javac(javac: &str, opts: &[&str], srcs: &[PathBuf], out: &Path) {
    let mut c = Command::new(javac);
    c.args(opts).arg("-d").arg(out).args(srcs);
    let o = run(&mut c, Duration::from_secs(120));
    assert!(
        o.status.success(),
        "javac failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Compiles the test probe class (`sprig.test.Probe`, counting each probe
/// and check) into `out`, for JDK 8 and later.
pub fn compile_test_probe(out: &Path) {
    javac(
        "javac",
        &["--release", "8"],
        &[java_src("probe/sprig/test/Probe.java")],
        out,
    );
}

pub fn class_files(dir: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "class") {
                v.push(p);
            }
        }
    }
    v.sort();
    v
}

pub fn probe_set(class: &str) -> ProbeSet {
    ProbeSet {
        class: class.into(),
        entry: "entry".into(),
        exit: "exit".into(),
        entry_receiver: false,
    }
}

#[derive(Default, Debug)]
pub struct Summary {
    pub classes: usize,
    pub methods: usize,
    pub instrumented: usize,
    pub skipped: Vec<(String, SkipReason)>,
    pub bytes_in: usize,
    pub elapsed: Duration,
}

/// Instruments every method of every class under `src` into `dst`
/// (same relative paths); `id_of` picks each method's id.
pub fn instrument_dir(
    src: &Path,
    dst: &Path,
    probes: &ProbeSet,
    id_of: impl FnMut(&str, &str, &str) -> u32,
) -> Summary {
    instrument_dir_filtered(src, dst, probes, id_of, |_| true)
}

/// Like [`instrument_dir`]; classes whose internal name fails `keep` are
/// copied unchanged.
pub fn instrument_dir_filtered(
    src: &Path,
    dst: &Path,
    probes: &ProbeSet,
    mut id_of: impl FnMut(&str, &str, &str) -> u32,
    keep: impl Fn(&str) -> bool,
) -> Summary {
    let mut s = Summary::default();
    for f in class_files(src) {
        let rel = f.strip_prefix(src).unwrap();
        let bytes = std::fs::read(&f).unwrap();
        let out = dst.join(rel);
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        let rs = rel.to_string_lossy();
        if rs.starts_with("META-INF") || rs.ends_with("module-info.class") {
            continue;
        }
        let info = class_info(&bytes).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        if !keep(&info.name) {
            std::fs::write(&out, &bytes).unwrap();
            continue;
        }
        let targets: Vec<Target> = info
            .methods
            .iter()
            .map(|m| Target {
                name: m.name.clone(),
                descriptor: m.descriptor.clone(),
                id: id_of(&info.name, &m.name, &m.descriptor),
                probes: 0,
            })
            .collect();
        let t0 = Instant::now();
        let r = instrument(&bytes, &targets, std::slice::from_ref(probes))
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        s.elapsed += t0.elapsed();
        s.bytes_in += bytes.len();
        s.classes += 1;
        s.methods += r.methods.len();
        s.instrumented += r.instrumented_count();
        for m in &r.methods {
            if let Err(e) = &m.result
                && !matches!(e, SkipReason::Native | SkipReason::Abstract)
            {
                s.skipped.push((
                    format!("{}.{}{}", info.name, m.name, m.descriptor),
                    e.clone(),
                ));
            }
        }
        std::fs::write(&out, &r.bytes).unwrap();
    }
    s
}

/// Lines of `x += 1000;` (a 6-byte `wide iinc` each).
pub fn iincs(n: usize, var: &str) -> String {
    let mut s = String::new();
    for _ in 0..n {
        let _ = writeln!(s, "        {var} += 1000;");
    }
    s
}

/// `if (x == K) return -k;` lines: each adds an exit probe inside a loop body.
pub fn early_returns(n: usize) -> String {
    let mut s = String::new();
    for k in 1..=n {
        let _ = writeln!(s, "        if (x == {}) return -{k};", 7 + k);
    }
    s
}

/// Source of `Big`: methods whose code is near the 64 KB limit or whose
/// branches are near the 32 KB reach of 16-bit offsets.
pub fn big_source() -> String {
    format!(
        r#"public class Big {{
    /** 65,528 bytes of code: instrumentation would pass 65,535. */
    static int huge(int x) {{
{huge}        return x;
    }}
    /** 65,402 bytes: fits with probes. */
    static int nearHuge(int x) {{
{near}        return x;
    }}
    /** The backward goto of this loop no longer reaches after exit probes are added. */
    static int loopBig(int n) {{
        int x = 0;
        for (;;) {{
{loop_body}{loop_rets}            if (--n <= 0) return x;
            x++;
        }}
    }}
    /** javac ends this loop with a backward ifgt whose fall-through has no frame: trampoline. */
    static int loopCond(int n) {{
        int x = 0;
        for (;;) {{
{loop_body}{loop_rets}            if (--n <= 0) return x;
        }}
    }}
    /** Both the forward ifeq and the backward ifgt must be widened; a frame exists after each. */
    static int doWhileBig(int n, boolean a) {{
        int x = 0;
        if (a) {{
            do {{
{loop_body}{loop_rets}            }} while (--n > 0);
        }}
        return x;
    }}
    /** The loop's forward ifle has no frame after it: it goes through a trampoline. */
    static int whileBig(int n) {{
        int x = 0;
        while (n-- > 0) {{
{loop_body}{loop_rets}        }}
        return x;
    }}
    static String run() {{
        return "big " + huge(1) + " " + nearHuge(2) + " " + loopBig(3) + " " + doWhileBig(2, true) + " "
            + doWhileBig(2, false) + " " + whileBig(2) + " " + loopCond(2);
    }}
}}
"#,
        huge = iincs(10921, "x"),
        near = iincs(10900, "x"),
        loop_body = iincs(5440, "x"),
        loop_rets = early_returns(12),
    )
}
