//! The agent library a JVM is asked to load: a copy of the installed one
//! that nothing ever writes again, named by its content.
//!
//! A JVM keeps the agent library mapped until it exits, and loads code from
//! the file as it needs it. Writing over that file in place (`cp` onto an
//! installed sprig, or a rebuild: the linker rewrites the same file, which
//! cargo then links into `target/`) changes or truncates the pages under
//! the running agent, and the JVM dies (SIGBUS) the next time it runs one
//! of them. So sprig hands the JVM a copy in
//! `/tmp/sprig-agents-<euid>/libsprig_agent-<hash>.so`: a new build gets a
//! new name, and a file of that name never changes once it is there.
//!
//! The name follows the content, so every session of the same build
//! loads the same path, and the JVM's dynamic linker hands back the
//! library it has already (one agent per build in a JVM, as when the
//! installed path is loaded directly).
//!
//! The directory is ours (effective uid), a real directory and writable by
//! no one else, or it is not used: a JVM of another user that root
//! profiles loads whatever is there. Copies untouched for [`KEEP`] are
//! removed when a new one is made (a rebuild makes a new one each time): a
//! JVM that loaded one keeps its mapping, and a later session of that
//! build writes the same name again, which the JVM's dynamic linker
//! matches by name to the library it holds.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use sprig_wire::session::open_dir_nofollow;

use super::library::AGENT_LIBRARY;

/// Copies not used for this long are removed when a new one is made:
/// longer than any attach takes between making its copy and the JVM
/// opening it.
pub const KEEP: Duration = Duration::from_secs(3600);

/// Why the installed library is loaded as it is, without a copy.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    #[error("{path} is not a directory of user {uid} closed to others ({why})")]
    UnsafeDir {
        path: PathBuf,
        uid: u32,
        why: &'static str,
    },
    #[error("{path} is on a file system mounted noexec")]
    NoExec { path: PathBuf },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
}

fn io_err(context: String) -> impl FnOnce(io::Error) -> PinError {
    move |source| PinError::Io { context, source }
}

/// The directory of copies for effective uid `uid` under `base` (`/tmp`).
pub fn dir_in(base: &Path, uid: u32) -> PathBuf {
    base.join(format!("sprig-agents-{uid}"))
}

/// Makes (or finds) the copy of `installed` in `dir_in(base, uid)`, `uid`
/// being this process's effective uid, and returns its path.
pub fn pin_in(base: &Path, uid: u32, installed: &Path) -> Result<PathBuf, PinError> {
    let dir = dir_in(base, uid);
    ensure_dir(&dir, uid)?;
    if mounted_noexec(&dir) {
        return Err(PinError::NoExec { path: dir });
    }
    let bytes =
        fs::read(installed).map_err(io_err(format!("cannot read {}", installed.display())))?;
    let stem = AGENT_LIBRARY.trim_end_matches(".so");
    let path = dir.join(format!("{stem}-{:016x}.so", content_hash(&bytes)));
    if holds(&path, uid, bytes.len()) {
        // In use: keep it from being pruned as old.
        if let Ok(f) = File::options().write(true).open(&path) {
            let _ = f.set_modified(SystemTime::now());
        }
        return Ok(path);
    }
    // Written under a private name, then renamed: a JVM never sees half a
    // file, and a copy that was wrong is replaced by a new file, not
    // rewritten (a JVM may have it mapped).
    let tmp = dir.join(format!(
        ".{stem}-{}-{:x}.tmp",
        std::process::id(),
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
    ));
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(&tmp)
        .and_then(|mut f| {
            f.set_permissions(fs::Permissions::from_mode(0o644))?;
            f.write_all(&bytes)?;
            f.sync_all()
        })
        .and_then(|()| fs::rename(&tmp, &path));
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(io_err(format!("cannot write {}", path.display()))(e));
    }
    prune(&dir, &path, KEEP);
    Ok(path)
}

/// Creates `dir` (0755) or checks the one there: a real directory owned
/// by `uid` that no one else may write to. Checked and opened to readers
/// through a handle opened without following a link, as the session
/// directory is, so both act on the directory found.
fn ensure_dir(dir: &Path, uid: u32) -> Result<(), PinError> {
    match DirBuilder::new().mode(0o755).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io_err(format!("cannot create {}", dir.display()))(e)),
    }
    let unsafe_dir = |why| PinError::UnsafeDir {
        path: dir.to_owned(),
        uid,
        why,
    };
    let handle = match open_dir_nofollow(dir) {
        Ok(h) => h,
        // A link fails as ELOOP or, opened as a directory, ENOTDIR.
        Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
            let link = fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink());
            return Err(unsafe_dir(if link {
                "a symbolic link"
            } else {
                "not a directory"
            }));
        }
        Err(e) => return Err(io_err(format!("cannot open {}", dir.display()))(e)),
    };
    let meta = handle
        .metadata()
        .map_err(io_err(format!("cannot inspect {}", dir.display())))?;
    if meta.uid() != uid {
        return Err(unsafe_dir("owned by another user"));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(unsafe_dir("writable by group or others"));
    }
    // The umask may have taken the bits a JVM of another user needs to
    // enter it (root profiling that user's JVM).
    if meta.mode() & 0o755 != 0o755 {
        handle
            .set_permissions(fs::Permissions::from_mode(0o755))
            .map_err(io_err(format!("cannot open {} to readers", dir.display())))?;
    }
    Ok(())
}

/// Whether `path` is the copy: a regular file of `uid`, closed to other
/// writers, of `len` bytes. Its bytes are not read again: only `uid`
/// writes in the directory, and a copy appears whole, by rename, under
/// the name of its content; a shorter file (a disk that filled up) is
/// replaced.
fn holds(path: &Path, uid: u32, len: usize) -> bool {
    fs::symlink_metadata(path).is_ok_and(|meta| {
        meta.is_file() && meta.uid() == uid && meta.mode() & 0o022 == 0 && meta.len() == len as u64
    })
}

/// Removes the other copies in `dir` not touched for `keep`, and temporary
/// files left by a sprig that died while writing one.
fn prune(dir: &Path, keep_path: &Path, keep: Duration) {
    let stem = AGENT_LIBRARY.trim_end_matches(".so");
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let now = SystemTime::now();
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name();
        let name = name.to_string_lossy();
        let ours = (name.starts_with(&format!("{stem}-")) && name.ends_with(".so"))
            || (name.starts_with(&format!(".{stem}-")) && name.ends_with(".tmp"));
        if !ours || path == keep_path {
            continue;
        }
        let old = e
            .metadata()
            .ok()
            .filter(|m| m.is_file())
            .and_then(|m| m.modified().ok())
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|age| age >= keep);
        if old {
            let _ = fs::remove_file(&path);
        }
    }
}

/// A 64-bit name for the content, the same for every sprig binary (unlike
/// std's hasher, which may change between Rust releases): FNV-1a's
/// constants over 8-byte words, with a rotation to carry the high bits
/// down. Each step is a bijection of the state for a given word, so two
/// libraries that differ in one word always get different names; it reads
/// a 16 MB library in a few milliseconds, and in well under 100 ms in an
/// unoptimised build.
fn content_hash(bytes: &[u8]) -> u64 {
    const PRIME: u64 = 0x0100_0000_01b3;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ bytes.len() as u64;
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let w = <[u8; 8]>::try_from(w).map_or(0, u64::from_le_bytes);
        h = (h ^ w).wrapping_mul(PRIME).rotate_left(29);
    }
    for &b in words.remainder() {
        h = (h ^ u64::from(b)).wrapping_mul(PRIME);
    }
    h
}

/// Whether the file system holding `path` is mounted `noexec` (the
/// library could not be mapped executable there), from
/// `/proc/self/mountinfo`: the mount with the longest matching mount point.
fn mounted_noexec(path: &Path) -> bool {
    let Ok(text) = fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let path = fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    let mut best: Option<(usize, bool)> = None;
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        // id parent major:minor root mount-point options ...
        let (Some(point), Some(opts)) = (f.get(4), f.get(5)) else {
            continue;
        };
        let point = unescape(point);
        if !path.starts_with(&point) {
            continue;
        }
        let len = point.len();
        let noexec = opts.split(',').any(|o| o == "noexec");
        if best.is_none_or(|(l, _)| len >= l) {
            best = Some((len, noexec));
        }
    }
    best.is_some_and(|(_, noexec)| noexec)
}

/// A mountinfo field with its octal escapes (`\040` for a space) undone.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let digits = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        if b[i] == b'\\'
            && let Some(d) = digits
        {
            out.push(
                d.iter()
                    .fold(0u8, |v, c| v.wrapping_mul(8).wrapping_add(c - b'0')),
            );
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "sprig-pin-test-{name}-{}-{}",
            std::process::id(),
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        DirBuilder::new().mode(0o700).create(&d).unwrap();
        d
    }

    /// Our effective uid: the owner of a directory we just made.
    fn uid() -> u32 {
        let d = scratch("uid");
        let u = fs::metadata(&d).unwrap().uid();
        fs::remove_dir(&d).unwrap();
        u
    }

    #[test]
    fn the_copy_keeps_its_bytes_when_the_installed_file_is_overwritten_in_place() {
        let base = scratch("overwrite");
        let installed = base.join(AGENT_LIBRARY);
        fs::write(&installed, b"build one").unwrap();
        let uid = uid();
        let first = pin_in(&base, uid, &installed).unwrap();
        assert_eq!(fs::read(&first).unwrap(), b"build one");
        assert_eq!(
            pin_in(&base, uid, &installed).unwrap(),
            first,
            "same content, same name"
        );
        let meta = fs::metadata(&first).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o644);
        let dir = fs::metadata(dir_in(&base, uid)).unwrap();
        assert_eq!(dir.mode() & 0o777, 0o755);
        let ino = meta.ino();

        // `cp` over the installed library: same file, new bytes.
        let mut f = OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&installed)
            .unwrap();
        f.write_all(b"build two, longer").unwrap();
        drop(f);
        let second = pin_in(&base, uid, &installed).unwrap();
        assert_ne!(second, first, "a new build gets a new name");
        assert_eq!(fs::read(&second).unwrap(), b"build two, longer");
        assert_eq!(
            fs::read(&first).unwrap(),
            b"build one",
            "the old copy is untouched"
        );
        assert_eq!(fs::metadata(&first).unwrap().ino(), ino);
        fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_short_copy_is_replaced_by_a_new_file() {
        let base = scratch("short");
        let installed = base.join(AGENT_LIBRARY);
        fs::write(&installed, b"the agent").unwrap();
        let uid = uid();
        let p = pin_in(&base, uid, &installed).unwrap();
        let ino = fs::metadata(&p).unwrap().ino();
        fs::write(&p, b"the ag").unwrap();
        assert_eq!(pin_in(&base, uid, &installed).unwrap(), p);
        assert_eq!(fs::read(&p).unwrap(), b"the agent");
        assert_ne!(
            fs::metadata(&p).unwrap().ino(),
            ino,
            "renamed into place, not rewritten"
        );
        fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_directory_others_may_write_or_a_link_is_refused() {
        let base = scratch("unsafe");
        let installed = base.join(AGENT_LIBRARY);
        fs::write(&installed, b"x").unwrap();
        let uid = uid();
        let dir = dir_in(&base, uid);
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
        let err = pin_in(&base, uid, &installed).unwrap_err().to_string();
        assert!(err.contains("writable by group or others"), "{err}");
        fs::remove_dir(&dir).unwrap();

        let elsewhere = base.join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &dir).unwrap();
        let err = pin_in(&base, uid, &installed).unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");
        assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);

        fs::remove_file(&dir).unwrap();
        fs::write(&dir, b"a file").unwrap();
        let err = pin_in(&base, uid, &installed).unwrap_err().to_string();
        assert!(err.contains("not a directory"), "{err}");

        fs::remove_file(&dir).unwrap();
        fs::create_dir(&dir).unwrap();
        let err = pin_in(&base, uid + 1, &installed);
        assert!(
            matches!(err, Err(PinError::UnsafeDir { .. })) || uid + 1 == 0,
            "a directory of another uid is refused"
        );
        fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn old_copies_and_dead_temporaries_are_pruned_the_current_one_kept() {
        let base = scratch("prune");
        let dir = base.join("d");
        fs::create_dir(&dir).unwrap();
        let stem = AGENT_LIBRARY.trim_end_matches(".so");
        let keep = dir.join(format!("{stem}-0000000000000001.so"));
        let old = dir.join(format!("{stem}-0000000000000002.so"));
        let tmp = dir.join(format!(".{stem}-77-1.tmp"));
        let other = dir.join("notes.txt");
        for p in [&keep, &old, &tmp, &other] {
            fs::write(p, b"x").unwrap();
        }
        prune(&dir, &keep, Duration::ZERO);
        assert!(keep.exists());
        assert!(!old.exists());
        assert!(!tmp.exists());
        assert!(other.exists(), "only sprig's files are touched");
        fs::write(&old, b"x").unwrap();
        prune(&dir, &keep, KEEP);
        assert!(old.exists(), "a recent copy stays");
        fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn the_name_follows_the_content_alone() {
        // Fixed values: another sprig binary names the same library alike.
        assert_eq!(content_hash(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(content_hash(b"abcdefgh"), content_hash(b"abcdefgh"));
        let a = b"0123456789abcdef0123456789abcdef-tail".to_vec();
        let mut seen = std::collections::HashSet::new();
        seen.insert(content_hash(&a));
        for i in 0..a.len() {
            let mut b = a.clone();
            b[i] ^= 0x80;
            assert!(seen.insert(content_hash(&b)), "byte {i}");
        }
        assert_ne!(content_hash(&a), content_hash(&a[..a.len() - 1]));
    }

    #[test]
    fn mount_points_are_unescaped() {
        assert_eq!(unescape("/mnt/a\\040b"), "/mnt/a b");
        assert_eq!(unescape("/plain"), "/plain");
        assert_eq!(unescape("/end\\04"), "/end\\04");
    }
}
