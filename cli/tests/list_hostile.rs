//! `sprig list` and `sprig profile` against a process whose owner is
//! hostile: it maps a file named `libjvm.so` (so sprig takes it for a
//! HotSpot JVM and reads its files) and controls what sprig reads through
//! `/proc/PID/root`: a FIFO `release` file, a 400 MB PerfData file, a
//! `release` that links to a file only root may read. Each must cost sprig
//! at most a second and a few MiB, and no link is followed. As root the
//! fake JVM runs as nobody, as the hostile owner would.

mod attach_support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use attach_support::TempDir;

const NOBODY: u32 = 65534;
/// What `sprig list` may cost, whatever the processes it inspects hold.
const LIST_TIME: Duration = Duration::from_secs(1);
const LIST_MAX_RSS_KIB: u64 = 16 * 1024;
/// Bound for a hung sprig in these tests (then it is killed).
const KILL_AFTER_SECS: &str = "10";

/// Two small shared libraries any process can preload without effect: one
/// stands in for `libjvm.so`, the other is mapped under the PerfData file's
/// name.
fn harmless_libraries() -> Option<(PathBuf, PathBuf)> {
    let dirs = [
        "/lib/x86_64-linux-gnu",
        "/usr/lib/x86_64-linux-gnu",
        "/lib/aarch64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/lib64",
        "/usr/lib64",
    ];
    let find = |name: &str| {
        dirs.iter()
            .map(|d| Path::new(d).join(name))
            .find(|p| p.is_file())
    };
    Some((find("libutil.so.1")?, find("libanl.so.1")?))
}

/// How the fake JVM's `<java.home>/release` looks.
enum Release {
    /// A plain file holding `JAVA_VERSION="17.0.9"`.
    Regular,
    Fifo,
    /// A link to a root-only file that holds `JAVA_VERSION="66.6"`.
    LinkToSecret,
}

/// A process (sleep) that maps `<dir>/jdk/lib/server/libjvm.so` and
/// `<dir>/hsperfdata_x/<pid>`, which is `perf_size` bytes (sparse). Killed
/// on drop.
struct FakeJvm {
    child: Child,
    pid: u32,
    dir: TempDir,
}

impl FakeJvm {
    fn start(tag: &str, release: Release, perf_size: u64) -> Option<FakeJvm> {
        let Some((jvm_lib, perf_lib)) = harmless_libraries() else {
            eprintln!("skipped: no libutil.so.1 and libanl.so.1 to preload");
            return None;
        };
        let dir = TempDir::new(tag);
        let server = dir.0.join("jdk/lib/server");
        fs::create_dir_all(&server).unwrap();
        fs::create_dir_all(dir.0.join("hsperfdata_x")).unwrap();
        for d in ["jdk", "jdk/lib", "jdk/lib/server", "hsperfdata_x"] {
            fs::set_permissions(dir.0.join(d), fs::Permissions::from_mode(0o755)).unwrap();
        }
        fs::copy(&jvm_lib, server.join("libjvm.so")).unwrap();
        let release_path = dir.0.join("jdk/release");
        match release {
            Release::Regular => fs::write(&release_path, "JAVA_VERSION=\"17.0.9\"\n").unwrap(),
            Release::Fifo => {
                let ok = Command::new("mkfifo")
                    .arg(&release_path)
                    .status()
                    .unwrap()
                    .success();
                assert!(ok, "mkfifo");
            }
            Release::LinkToSecret => {
                let secret = dir.0.join("secret");
                fs::write(&secret, "JAVA_VERSION=\"66.6\"\n").unwrap();
                fs::set_permissions(&secret, fs::Permissions::from_mode(0o600)).unwrap();
                std::os::unix::fs::symlink(&secret, &release_path).unwrap();
            }
        }
        let d = dir.0.display();
        let as_owner = if attach_support::is_root("fake JVM as nobody") {
            format!("setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups")
        } else {
            String::new()
        };
        // `$$` is the PID the process keeps through every exec.
        let script = format!(
            "cp {perf} {d}/hsperfdata_x/$$ && truncate -s {perf_size} {d}/hsperfdata_x/$$ && \
             exec {as_owner} env LD_PRELOAD={d}/jdk/lib/server/libjvm.so:{d}/hsperfdata_x/$$ sleep 60",
            perf = perf_lib.display()
        );
        let child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id();
        let fake = FakeJvm { child, pid, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let maps = fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
            if maps.contains("libjvm.so") && maps.contains(&format!("hsperfdata_x/{pid}")) {
                return Some(fake);
            }
            assert!(Instant::now() < deadline, "the fake JVM did not start");
            thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for FakeJvm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = &self.dir;
    }
}

/// What one sprig command cost.
struct Run {
    elapsed: Duration,
    /// Peak resident set of sprig in KiB, when /usr/bin/time can tell.
    max_rss_kib: Option<u64>,
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs sprig with `args`, killed after `KILL_AFTER_SECS`, measuring its
/// time and peak memory.
fn run_sprig(args: &[&str]) -> Run {
    let sprig = env!("CARGO_BIN_EXE_sprig");
    let time = Path::new("/usr/bin/time");
    let mut cmd = if time.is_file() {
        let mut c = Command::new(time);
        c.args(["-f", "sprig-max-rss-kib=%M", "timeout", "-s", "KILL"]);
        c
    } else {
        eprintln!("note: no /usr/bin/time: peak memory not measured");
        let mut c = Command::new("timeout");
        c.args(["-s", "KILL"]);
        c
    };
    cmd.arg(KILL_AFTER_SECS).arg(sprig).args(args);
    let started = Instant::now();
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    let elapsed = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let max_rss_kib = stderr
        .lines()
        .find_map(|l| l.strip_prefix("sprig-max-rss-kib=")?.trim().parse().ok());
    let stderr = stderr
        .lines()
        .filter(|l| !l.starts_with("sprig-max-rss-kib=") && !l.starts_with("Command "))
        .collect::<Vec<_>>()
        .join("\n");
    Run {
        elapsed,
        max_rss_kib,
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr,
    }
}

/// The `sprig list` row of `pid`, split into its columns.
fn row_of(stdout: &str, pid: u32) -> Option<Vec<String>> {
    stdout.lines().find_map(|l| {
        let cols: Vec<String> = l.split_whitespace().map(str::to_owned).collect();
        (cols.first()? == &pid.to_string()).then_some(cols)
    })
}

fn assert_cheap(what: &str, run: &Run) {
    eprintln!(
        "{what}: sprig list took {:.3} s, peak resident {:?} KiB",
        run.elapsed.as_secs_f64(),
        run.max_rss_kib
    );
    assert_eq!(
        run.code,
        Some(0),
        "{what}: sprig list failed or was killed after {KILL_AFTER_SECS} s (code {:?}, {:.1} s)\nstdout:\n{}\nstderr:\n{}",
        run.code,
        run.elapsed.as_secs_f64(),
        run.stdout,
        run.stderr
    );
    assert!(
        run.elapsed <= LIST_TIME,
        "{what}: sprig list took {:.2} s",
        run.elapsed.as_secs_f64()
    );
    if let Some(kib) = run.max_rss_kib {
        assert!(
            kib <= LIST_MAX_RSS_KIB,
            "{what}: sprig list peaked at {} KiB resident (at most {LIST_MAX_RSS_KIB})",
            kib
        );
    }
}

#[test]
fn fifo_release_costs_list_at_most_a_second() {
    let Some(fake) = FakeJvm::start("list-fifo", Release::Fifo, 1 << 16) else {
        return;
    };
    let run = run_sprig(&["list"]);
    assert_cheap("FIFO release", &run);
    let row = row_of(&run.stdout, fake.pid)
        .unwrap_or_else(|| panic!("no row for PID {} in\n{}", fake.pid, run.stdout));
    assert_eq!(row[2], "?", "no version from a FIFO: {row:?}");
}

#[test]
fn huge_perfdata_costs_list_a_few_mib() {
    let Some(fake) = FakeJvm::start("list-huge", Release::Regular, 400 << 20) else {
        return;
    };
    let run = run_sprig(&["list"]);
    assert_cheap("400 MB PerfData", &run);
    let row = row_of(&run.stdout, fake.pid)
        .unwrap_or_else(|| panic!("no row for PID {} in\n{}", fake.pid, run.stdout));
    // Not PerfData: the version comes from the release file.
    assert_eq!(row[2], "17.0.9", "{row:?}");
}

#[test]
fn linked_release_is_not_followed() {
    let Some(fake) = FakeJvm::start("list-link", Release::LinkToSecret, 1 << 16) else {
        return;
    };
    let run = run_sprig(&["list"]);
    assert_cheap("linked release", &run);
    let row = row_of(&run.stdout, fake.pid)
        .unwrap_or_else(|| panic!("no row for PID {} in\n{}", fake.pid, run.stdout));
    assert_eq!(
        row[2], "?",
        "sprig followed the link to a root-only file: {row:?}"
    );
    assert!(!run.stdout.contains("66.6"), "{}", run.stdout);
}

#[test]
fn fifo_release_does_not_hang_profile() {
    let Some(fake) = FakeJvm::start("profile-fifo", Release::Fifo, 400 << 20) else {
        return;
    };
    let pid = fake.pid.to_string();
    let run = run_sprig(&["profile", &pid, "--root", "a.B::c", "--attach-timeout", "1"]);
    // Not a JVM that answers: sprig must say so within its attach timeout,
    // not hang on the FIFO.
    assert!(
        run.code.is_some_and(|c| c != 0 && c != 137),
        "sprig profile did not fail cleanly (code {:?}, {:.1} s): {}",
        run.code,
        run.elapsed.as_secs_f64(),
        run.stderr
    );
    assert!(
        run.elapsed < Duration::from_secs(5),
        "sprig profile took {:.1} s: {}",
        run.elapsed.as_secs_f64(),
        run.stderr
    );
    if let Some(kib) = run.max_rss_kib {
        assert!(
            kib <= 4 * LIST_MAX_RSS_KIB,
            "sprig profile peaked at {kib} KiB"
        );
    }
    eprintln!("sprig profile: {}", run.stderr.trim());
}
