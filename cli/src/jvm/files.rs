//! The files of a JVM that its owner controls, read through its root
//! (`/proc/PID/root`) with [`crate::beneath`]: `release` under its
//! `java.home` and its PerfData file. No link is followed, only a regular
//! file is read, nothing blocks, and reads are capped.

use std::path::Path;

use super::perfdata::PerfStrings;
use crate::beneath;

/// HotSpot's PerfData file is 32 KiB by default (`-XX:PerfDataMemorySize`);
/// its strings sit at the start, and no more than this is read.
const PERFDATA_CAP: u64 = 1 << 20;
/// A JDK's `release` file is well under a KiB; `JAVA_VERSION` is near the
/// top.
const RELEASE_CAP: u64 = 16 << 10;

/// `JAVA_VERSION` from `<java.home>/release`, read through the JVM's root
/// (no link followed, a regular file only, at most [`RELEASE_CAP`]).
pub(super) fn release_version(root: &Path, home: &Path) -> Option<String> {
    let bytes = beneath::read_in_root(root, &home.join("release"), RELEASE_CAP).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    text.lines().find_map(|l| {
        let v = l.strip_prefix("JAVA_VERSION=")?.trim().trim_matches('"');
        (!v.is_empty()).then(|| v.to_owned())
    })
}

/// The PerfData strings in `path` (a path inside the JVM's root), read
/// without following a link, from a regular file only, at most
/// [`PERFDATA_CAP`].
pub(super) fn read_perfdata(root: &Path, path: &Path) -> Option<PerfStrings> {
    PerfStrings::parse(&beneath::read_in_root(root, path, PERFDATA_CAP).ok()?).ok()
}

/// Files a hostile JVM owner controls, under a directory standing in for
/// `/proc/PID/root`.
#[cfg(test)]
mod tests {
    use super::super::perfdata;
    use super::*;
    use std::fs;
    use std::os::unix::fs::{PermissionsExt, symlink};
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    struct Root(PathBuf);

    impl Root {
        fn new(tag: &str) -> Root {
            static NEXT: AtomicU32 = AtomicU32::new(0);
            let n = NEXT.fetch_add(1, Ordering::SeqCst);
            let path = std::env::temp_dir()
                .join(format!("sprig-jvm-files-{tag}-{}-{n}", std::process::id()));
            let _ = fs::remove_dir_all(&path);
            fs::create_dir_all(path.join("jdk")).unwrap();
            fs::create_dir_all(path.join("tmp/hsperfdata_x")).unwrap();
            Root(path)
        }
    }

    impl Drop for Root {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn perfdata(version: &str) -> Vec<u8> {
        perfdata::tests::buffer(&[(
            "java.property.java.version",
            b'B',
            perfdata::tests::padded(version, 16),
        )])
    }

    #[test]
    fn release_is_read_only_as_a_regular_file_without_links() {
        let root = Root::new("release");
        let r = &root.0;
        fs::write(
            r.join("jdk/release"),
            "IMPLEMENTOR=x\nJAVA_VERSION=\"17.0.9\"\n",
        )
        .unwrap();
        assert_eq!(
            release_version(r, Path::new("/jdk")).as_deref(),
            Some("17.0.9")
        );
        // A link to a file only root may read, at the last component.
        fs::write(r.join("secret"), "JAVA_VERSION=\"66.6\"\n").unwrap();
        fs::set_permissions(r.join("secret"), fs::Permissions::from_mode(0o600)).unwrap();
        fs::remove_file(r.join("jdk/release")).unwrap();
        symlink(r.join("secret"), r.join("jdk/release")).unwrap();
        assert_eq!(release_version(r, Path::new("/jdk")), None);
        // A link on the way there.
        fs::create_dir(r.join("other")).unwrap();
        fs::write(r.join("other/release"), "JAVA_VERSION=\"66.6\"\n").unwrap();
        symlink(r.join("other"), r.join("linked-jdk")).unwrap();
        assert_eq!(release_version(r, Path::new("/linked-jdk")), None);
        // `..` does not climb out of the root.
        fs::create_dir_all(r.join("inner/jdk")).unwrap();
        assert_eq!(
            release_version(&r.join("inner"), Path::new("/jdk/../../other")),
            None
        );
        // Not a file.
        fs::create_dir(r.join("dir-jdk")).unwrap();
        fs::create_dir(r.join("dir-jdk/release")).unwrap();
        assert_eq!(release_version(r, Path::new("/dir-jdk")), None);
    }

    #[test]
    fn fifo_release_does_not_block() {
        let root = Root::new("fifo");
        let fifo = root.0.join("jdk/release");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let r = root.0.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(release_version(&r, Path::new("/jdk")));
        });
        let got = rx.recv_timeout(Duration::from_secs(2));
        if got.is_err() {
            // Release the reader stuck in open(2) before failing.
            let _ = fs::OpenOptions::new().write(true).open(&fifo);
        }
        assert_eq!(
            got,
            Ok(None),
            "reading a FIFO release blocked (or read something)"
        );
    }

    #[test]
    fn perfdata_is_read_only_as_a_regular_file_without_links() {
        let root = Root::new("perf");
        let r = &root.0;
        let mapped = Path::new("/tmp/hsperfdata_x/7");
        fs::write(r.join("tmp/hsperfdata_x/7"), perfdata("17.0.9")).unwrap();
        let got = read_perfdata(r, mapped).expect("a plain PerfData file");
        assert_eq!(got.get("java.property.java.version"), Some("17.0.9"));

        fs::write(r.join("elsewhere"), perfdata("66.6")).unwrap();
        fs::remove_file(r.join("tmp/hsperfdata_x/7")).unwrap();
        symlink(r.join("elsewhere"), r.join("tmp/hsperfdata_x/7")).unwrap();
        assert!(read_perfdata(r, mapped).is_none(), "followed a link");

        fs::create_dir(r.join("tmp/real")).unwrap();
        fs::write(r.join("tmp/real/7"), perfdata("66.6")).unwrap();
        symlink(r.join("tmp/real"), r.join("tmp/hsperfdata_y")).unwrap();
        assert!(
            read_perfdata(r, Path::new("/tmp/hsperfdata_y/7")).is_none(),
            "followed a directory link"
        );
    }

    #[test]
    fn oversized_perfdata_still_parses_from_its_start() {
        let root = Root::new("big");
        let r = &root.0;
        let path = r.join("tmp/hsperfdata_x/7");
        fs::write(&path, perfdata("17.0.9")).unwrap();
        // 400 MB, sparse: HotSpot's file is 32 KiB; what follows the
        // live part is not read.
        fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(400 << 20)
            .unwrap();
        let got = read_perfdata(r, Path::new("/tmp/hsperfdata_x/7")).expect("parsed");
        assert_eq!(got.get("java.property.java.version"), Some("17.0.9"));
    }
}
