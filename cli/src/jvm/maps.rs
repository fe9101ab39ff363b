//! What /proc/PID/maps shows of a JVM: which VM library it runs (HotSpot
//! or OpenJ9), its `java.home`, and the PerfData file it has mapped. The
//! file is read line by line, keeping only the lines that matter.

use std::ffi::OsStr;
use std::fs;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// /proc/PID/maps lines sprig keeps (the JVM library and the PerfData
/// file take a few each).
const MAPS_KEPT_LINES: usize = 256;

#[derive(Debug, PartialEq, Eq)]
pub(super) enum VmLibrary {
    HotSpot(PathBuf),
    OpenJ9,
    None,
}

/// Which JVM library /proc/PID/maps shows. OpenJ9 ships a `libjvm.so` shim
/// too, so its own `libj9vm` decides first.
pub(super) fn vm_library(maps: &str) -> VmLibrary {
    let mut hotspot = None;
    for path in maps.lines().filter_map(map_path) {
        let file = path.rsplit('/').next().unwrap_or(path);
        if file.starts_with("libj9vm") {
            return VmLibrary::OpenJ9;
        }
        if file == "libjvm.so" && hotspot.is_none() {
            hotspot = Some(PathBuf::from(path));
        }
    }
    hotspot.map_or(VmLibrary::None, VmLibrary::HotSpot)
}

/// `.../lib/server/libjvm.so` (and JDK 8's `.../jre/lib/amd64/server/`) →
/// the directory holding `lib`.
pub(super) fn java_home_of(libjvm: &Path) -> Option<PathBuf> {
    libjvm
        .ancestors()
        .find(|a| a.file_name() == Some(OsStr::new("lib")))
        .and_then(Path::parent)
        .map(Path::to_owned)
}

/// The PerfData file the JVM has mapped (`/tmp/hsperfdata_<user>/<ns_pid>`
/// as the JVM sees it): this JVM's own file, never a stale one left by a
/// dead JVM that had the same PID, and none with -XX:-UsePerfData.
pub(super) fn perfdata_in_maps(maps: &str, ns_pid: u32) -> Option<PathBuf> {
    let name = ns_pid.to_string();
    maps.lines().filter_map(map_path).find_map(|path| {
        let (dir, file) = path.rsplit_once('/')?;
        let dir_name = dir.rsplit('/').next()?;
        (file == name && dir_name.starts_with("hsperfdata_")).then(|| PathBuf::from(path))
    })
}

/// The lines of /proc/PID/maps that [`vm_library`] and
/// [`perfdata_in_maps`] look at (`libjvm.so`, `libj9vm*`, `hsperfdata_*`),
/// read line by line: a process can map tens of thousands of files.
pub(super) fn read_maps(path: &Path) -> io::Result<String> {
    let mut kept = String::new();
    let mut count = 0;
    let mut reader = BufReader::new(fs::File::open(path)?);
    let mut bytes = Vec::new();
    loop {
        bytes.clear();
        // A maps line is at most a path (PATH_MAX) and ~100 bytes.
        let n = (&mut reader).take(8 << 10).read_until(b'\n', &mut bytes)?;
        if n == 0 {
            break;
        }
        let line = String::from_utf8_lossy(&bytes);
        let relevant = map_path(line.trim_end_matches('\n')).is_some_and(|p| {
            let (dir, file) = p.rsplit_once('/').unwrap_or(("", p));
            file == "libjvm.so"
                || file.starts_with("libj9vm")
                || dir
                    .rsplit('/')
                    .next()
                    .is_some_and(|d| d.starts_with("hsperfdata_"))
        });
        if relevant && count < MAPS_KEPT_LINES {
            kept.push_str(line.trim_end_matches('\n'));
            kept.push('\n');
            count += 1;
        }
    }
    Ok(kept)
}

/// The path of a /proc/PID/maps line (which may contain spaces), without
/// the ` (deleted)` mark of an unlinked file; None for anonymous memory and
/// for unlinked files.
fn map_path(line: &str) -> Option<&str> {
    // address perms offset dev inode path
    let mut rest = line;
    for _ in 0..5 {
        rest = rest.trim_start();
        rest = &rest[rest.find(' ')?..];
    }
    let path = rest.trim_start();
    (path.starts_with('/') && !path.ends_with(" (deleted)")).then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_hotspot_and_openj9_in_maps() {
        let hs = "7f00-7f10 r-xp 00000000 08:01 123 /usr/lib/jvm/jdk-17/lib/server/libjvm.so\n\
                  7f10-7f20 r--p 00000000 08:01 124 /usr/lib/x86_64-linux-gnu/libc.so.6\n";
        assert_eq!(
            vm_library(hs),
            VmLibrary::HotSpot("/usr/lib/jvm/jdk-17/lib/server/libjvm.so".into())
        );
        let j9 = format!("{hs}7f30-7f40 r-xp 0 08:01 9 /opt/j9/lib/default/libj9vm29.so\n");
        assert_eq!(vm_library(&j9), VmLibrary::OpenJ9);
        assert_eq!(
            vm_library("7f00-7f10 r-xp 0 08:01 1 /usr/bin/sleep\n7f [vdso]\n"),
            VmLibrary::None
        );
        // A file merely named like the library in a path component is not it.
        assert_eq!(
            vm_library("7f00-7f10 r-xp 0 08:01 1 /data/libjvm.so.txt\n"),
            VmLibrary::None
        );
    }

    #[test]
    fn map_paths_with_spaces_and_deleted_files() {
        assert_eq!(
            map_path("7f00-7f10 r-xp 00000000 08:01 123     /opt/my jdk/lib/server/libjvm.so"),
            Some("/opt/my jdk/lib/server/libjvm.so")
        );
        assert_eq!(map_path("7f00-7f10 rw-p 00000000 00:00 0 "), None);
        assert_eq!(map_path("7ffd-7ffe rw-p 00000000 00:00 0    [stack]"), None);
        assert_eq!(
            map_path("7f00-7f10 rw-s 00000000 08:01 9 /tmp/hsperfdata_root/42 (deleted)"),
            None
        );
        assert_eq!(map_path("garbage"), None);
        assert_eq!(
            vm_library("7f00-7f10 r-xp 0 08:01 1 /opt/my jdk/lib/server/libjvm.so\n"),
            VmLibrary::HotSpot("/opt/my jdk/lib/server/libjvm.so".into())
        );
    }

    #[test]
    fn perfdata_file_is_the_mapped_one() {
        let maps = "7f00-7f10 r-xp 0 08:01 1 /jdk/lib/server/libjvm.so\n\
                    7f20-7f30 rw-s 0 08:01 2 /tmp/hsperfdata_app/7\n";
        assert_eq!(
            perfdata_in_maps(maps, 7),
            Some(PathBuf::from("/tmp/hsperfdata_app/7"))
        );
        assert_eq!(perfdata_in_maps(maps, 8), None);
        assert_eq!(
            perfdata_in_maps("7f20-7f30 rw-s 0 08:01 2 /data/7\n", 7),
            None
        );
    }

    #[test]
    fn java_home_from_library_path() {
        assert_eq!(
            java_home_of(Path::new("/usr/lib/jvm/jdk-17/lib/server/libjvm.so")),
            Some(PathBuf::from("/usr/lib/jvm/jdk-17"))
        );
        assert_eq!(
            java_home_of(Path::new("/opt/jdk8/jre/lib/amd64/server/libjvm.so")),
            Some(PathBuf::from("/opt/jdk8/jre"))
        );
        assert_eq!(java_home_of(Path::new("libjvm.so")), None);
    }
}
