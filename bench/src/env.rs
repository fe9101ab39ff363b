//! Everything the runs need on this machine: the sprig binary (built if
//! missing), a JDK 17, Debian's H2, Jetty and Lucene jars, the JDK 17 sources, the
//! bench fixtures compiled, a scratch directory, and the machine line.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Jars of Debian's libjetty9-java and servlet API that the Jetty workload runs on.
const JETTY_JARS: [&str; 7] = [
    "jetty9-server.jar",
    "jetty9-servlet.jar",
    "jetty9-security.jar",
    "jetty9-http.jar",
    "jetty9-io.jar",
    "jetty9-util.jar",
    "servlet-api.jar",
];
const H2_JAR: &str = "h2.jar";
/// Jars of Debian's liblucene4.10-java that the Lucene workload runs on
/// (optional: the workload is skipped, saying why, without them).
pub const LUCENE_JARS: [&str; 2] = [
    "lucene-core-4.10.4.jar",
    "lucene-analyzers-common-4.10.4.jar",
];
/// The Lucene workload's driver class, compiled only with [`LUCENE_JARS`].
const LUCENE_SOURCE: &str = "LuceneWork.java";
const SHARE_JAVA: &str = "/usr/share/java";

pub struct Env {
    pub repo: PathBuf,
    pub sprig: PathBuf,
    pub jdk: PathBuf,
    pub jdk_version: String,
    /// Run-time class path of the bench fixtures.
    pub classpath: String,
    /// Why the Lucene workload cannot run (a jar missing); None when it can.
    pub lucene_missing: Option<String>,
    pub scratch: Scratch,
    pub machine: serde_json::Value,
}

/// A directory removed on drop unless `keep` (set when a run failed, so its
/// logs stay for the user).
pub struct Scratch {
    pub path: PathBuf,
    pub keep: bool,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

pub struct Options {
    pub setup: bool,
    pub sprig: Option<PathBuf>,
    pub jdk: Option<PathBuf>,
}

pub fn repo_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

fn run(cmd: &mut Command, what: &str) -> Result<String> {
    let out = cmd.output().with_context(|| format!("running {what}"))?;
    if !out.status.success() {
        bail!(
            "{what} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The sprig binary next to this one, built with cargo when missing or when asked.
fn find_sprig(repo: &Path, given: Option<PathBuf>) -> Result<PathBuf> {
    if let Some(p) = given {
        if !p.is_file() {
            bail!("--sprig {}: no such file", p.display());
        }
        return Ok(p);
    }
    let me = std::env::current_exe().context("locating sprig-bench")?;
    let dir = me.parent().context("sprig-bench has no directory")?;
    // Always ask cargo: a no-op when up to date, a rebuild when sources changed.
    eprintln!("sprig-bench: cargo build --release -p sprig -p sprig-agent");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    run(
        Command::new(cargo).current_dir(repo).args([
            "build",
            "--release",
            "-p",
            "sprig",
            "-p",
            "sprig-agent",
        ]),
        "cargo build of sprig",
    )?;
    let sprig = dir.join("sprig");
    if !sprig.is_file() || !dir.join("libsprig_agent.so").is_file() {
        bail!(
            "{} or libsprig_agent.so missing after the build (is CARGO_TARGET_DIR the same for both?)",
            sprig.display()
        );
    }
    Ok(sprig)
}

fn jdk_version(home: &Path) -> String {
    std::fs::read_to_string(home.join("release"))
        .ok()
        .and_then(|r| {
            r.lines().find(|l| l.starts_with("JAVA_VERSION=")).map(|l| {
                l.trim_start_matches("JAVA_VERSION=")
                    .trim_matches('"')
                    .to_owned()
            })
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The JDK 17 sources: `SPRIG_BENCH_SRC_ZIP`, the JDK's own lib/src.zip, or
/// the copy scripts/setup.sh --bench keeps in the cache.
pub fn src_zip(jdk: &Path) -> Result<PathBuf> {
    if let Ok(p) = std::env::var("SPRIG_BENCH_SRC_ZIP") {
        return Ok(PathBuf::from(p));
    }
    let own = jdk.join("lib/src.zip");
    if std::fs::metadata(&own).is_ok() {
        return Ok(own);
    }
    let cache = cache_dir().join("jdk17-src.zip");
    if cache.is_file() {
        return Ok(cache);
    }
    bail!(
        "no JDK 17 sources: {} is missing (Debian ships it in openjdk-17-source); \
         run bash scripts/setup.sh --bench, or set SPRIG_BENCH_SRC_ZIP",
        own.display()
    )
}

fn cache_dir() -> PathBuf {
    if let Ok(x) = std::env::var("XDG_CACHE_HOME")
        && !x.is_empty()
    {
        return PathBuf::from(x).join("sprig-bench");
    }
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".to_owned());
    PathBuf::from(home).join(".cache/sprig-bench")
}

/// Extracts the entries under `prefix` (e.g. `java.base/java/util/concurrent/atomic/`)
/// into `dest`; returns how many `.java` files were written.
pub fn extract(zip_path: &Path, prefix: &str, dest: &Path) -> Result<usize> {
    let file = std::fs::File::open(zip_path).with_context(|| format!("{}", zip_path.display()))?;
    let mut zip = zip::ZipArchive::new(file).with_context(|| format!("{}", zip_path.display()))?;
    let mut n = 0;
    for i in 0..zip.len() {
        let mut entry = zip.by_index(i)?;
        let Some(name) = entry.enclosed_name() else {
            continue;
        };
        let name_str = name.to_string_lossy().into_owned();
        if !name_str.starts_with(prefix) || entry.is_dir() || !name_str.ends_with(".java") {
            continue;
        }
        let out = dest.join(&name);
        if let Some(parent) = out.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let mut f = std::fs::File::create(&out)?;
        std::io::copy(&mut entry, &mut f)?;
        n += 1;
    }
    if n == 0 {
        bail!("{} holds no .java files under {prefix}", zip_path.display());
    }
    Ok(n)
}

fn java_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for e in std::fs::read_dir(dir).with_context(|| format!("{}", dir.display()))? {
        let p = e?.path();
        if p.is_dir() {
            java_files(&p, out)?;
        } else if p.extension().is_some_and(|x| x == "java") {
            out.push(p);
        }
    }
    out.sort();
    Ok(())
}

fn machine_line(jdk_used: &str) -> serde_json::Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .unwrap_or("unknown")
        .trim()
        .to_owned();
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_owned();
    let load = std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ");
    let clocksource =
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .unwrap_or_default()
            .trim()
            .to_owned();
    let jdks: Vec<String> = std::fs::read_dir("/usr/lib/jvm")
        .map(|rd| {
            let mut v: Vec<String> = rd
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| !p.is_symlink() && p.join("release").is_file())
                .map(|p| jdk_version(&p))
                .collect();
            v.sort();
            v.dedup();
            v
        })
        .unwrap_or_default();
    serde_json::json!({
        "nproc": nproc, "cpu": cpu, "kernel": kernel, "loadavg_at_start": load,
        "clocksource": clocksource, "jdk_used": jdk_used, "jdks_installed": jdks,
    })
}

impl Env {
    pub fn prepare(opts: Options) -> Result<Env> {
        let repo = repo_root();
        if opts.setup {
            eprintln!("sprig-bench: bash scripts/setup.sh --bench");
            let status = Command::new("bash")
                .current_dir(&repo)
                .args(["scripts/setup.sh", "--bench"])
                .status()
                .context("running scripts/setup.sh --bench")?;
            if !status.success() {
                bail!("scripts/setup.sh --bench failed ({status})");
            }
        }
        let sprig = find_sprig(&repo, opts.sprig)?;
        let jdk = opts
            .jdk
            .unwrap_or_else(|| PathBuf::from("/usr/lib/jvm/java-17-openjdk-amd64"));
        if !jdk.join("bin/javac").is_file() {
            bail!(
                "no JDK at {} (run bash scripts/setup.sh --bench)",
                jdk.display()
            );
        }
        let jdk_version = jdk_version(&jdk);
        let mut jars = vec![Path::new(SHARE_JAVA).join(H2_JAR)];
        jars.extend(JETTY_JARS.iter().map(|j| Path::new(SHARE_JAVA).join(j)));
        if let Some(missing) = jars.iter().find(|j| !j.is_file()) {
            bail!(
                "{} is missing: run bash scripts/setup.sh --bench (installs libh2-java, libjetty9-java)",
                missing.display()
            );
        }
        let lucene: Vec<PathBuf> = LUCENE_JARS
            .iter()
            .map(|j| Path::new(SHARE_JAVA).join(j))
            .collect();
        let lucene_missing = lucene.iter().find(|j| !j.is_file()).map(|j| {
            format!(
                "{} is missing: run bash scripts/setup.sh --bench (installs liblucene4.10-java)",
                j.display()
            )
        });
        if lucene_missing.is_none() {
            jars.extend(lucene);
        }
        let scratch = Scratch {
            path: std::env::temp_dir().join(format!("sprig-bench-{}", std::process::id())),
            keep: false,
        };
        std::fs::create_dir_all(scratch.path.join("logs"))?;
        let jar_cp = jars
            .iter()
            .map(|j| j.display().to_string())
            .collect::<Vec<_>>()
            .join(":");
        // Compile the fixtures (stubs only on the compile-time class path).
        let fixtures = repo.join("fixtures/bench");
        let stubs = scratch.path.join("stubs");
        let classes = scratch.path.join("classes");
        let javac = jdk.join("bin/javac");
        let mut stub_src = Vec::new();
        java_files(&fixtures.join("stubs"), &mut stub_src)?;
        run(
            Command::new(&javac).arg("-d").arg(&stubs).args(&stub_src),
            "javac (probe stub)",
        )?;
        let mut src = Vec::new();
        java_files(&fixtures.join("src"), &mut src)?;
        if lucene_missing.is_some() {
            src.retain(|p| !p.ends_with(LUCENE_SOURCE));
        }
        run(
            Command::new(&javac)
                .args(["-nowarn", "-d"])
                .arg(&classes)
                .arg("-cp")
                .arg(format!("{}:{jar_cp}", stubs.display()))
                .args(&src),
            "javac (bench fixtures)",
        )?;
        // The accuracy fixtures the end-to-end tests use (`accuracy`).
        let mut acc = Vec::new();
        java_files(&repo.join("fixtures/src/accuracy"), &mut acc)?;
        run(
            Command::new(&javac)
                .args(["-nowarn", "-d"])
                .arg(&classes)
                .args(&acc),
            "javac (accuracy fixtures)",
        )?;
        let classpath = format!("{}:{jar_cp}", classes.display());
        let machine = machine_line(&jdk_version);
        Ok(Env {
            repo,
            sprig,
            jdk,
            jdk_version,
            classpath,
            lucene_missing,
            scratch,
            machine,
        })
    }

    pub fn java(&self) -> PathBuf {
        self.jdk.join("bin/java")
    }

    pub fn logs(&self) -> PathBuf {
        self.scratch.path.join("logs")
    }
}
