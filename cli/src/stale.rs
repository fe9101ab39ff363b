//! Session directories left by a `sprig` that was killed: a killed process
//! never runs the cleanup that removes its `sprig-<uid>-<hex>` directory and
//! control socket, so the next `profile` or `run` removes what is provably
//! dead before it starts.
//!
//! Provably dead, and ours: a real directory (not a link) named
//! `sprig-<uid>-<12 hex digits>`, `<uid>` being our effective uid or root's
//! (root hands a session to the JVM's user), owned by our effective uid,
//! unchanged for [`MIN_AGE`], and either holding a `control.sock` that
//! refuses connections (a listening socket accepts them for as long as its
//! sprig lives, so a refusal means its process is gone) or empty (a
//! session's socket is made within milliseconds of its directory). Anything
//! else, another user's directory above all, is left alone.

use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sprig_wire::session::SOCKET_NAME;

/// How long a session directory must have been left unchanged before it is
/// judged: longer than a live sprig ever takes between making it and
/// listening on its socket.
pub const MIN_AGE: Duration = Duration::from_secs(10);

/// Removes the dead session directories of this user in `/tmp` and in
/// `$TMPDIR` (where `sprig run` makes its own). Returns how many went.
pub fn clean() -> usize {
    let mut bases = vec![PathBuf::from("/tmp")];
    let tmp = std::env::temp_dir();
    if !bases.contains(&tmp) {
        bases.push(tmp);
    }
    bases.iter().map(|b| clean_in(b, MIN_AGE)).sum()
}

/// Removes the dead session directories of this user directly under `base`
/// that have been unchanged for `min_age`. Returns how many went.
pub fn clean_in(base: &Path, min_age: Duration) -> usize {
    let Ok(entries) = fs::read_dir(base) else {
        return 0;
    };
    let me = sprig_wire::session::euid();
    entries
        .filter_map(Result::ok)
        .filter(|e| is_session_name(&e.file_name().to_string_lossy(), me))
        .filter(|e| is_dead(&e.path(), me, min_age))
        .filter(|e| fs::remove_dir_all(e.path()).is_ok())
        .count()
}

/// `sprig-<uid>-<12 lowercase hex digits>`, `<uid>` being `me` or root.
fn is_session_name(name: &str, me: u32) -> bool {
    let Some((uid, suffix)) = name
        .strip_prefix("sprig-")
        .and_then(|rest| rest.split_once('-'))
    else {
        return false;
    };
    let uid_ok = uid.parse::<u32>().is_ok_and(|u| u == me || u == 0)
        && uid.bytes().all(|b| b.is_ascii_digit());
    let suffix_ok = suffix.len() == 12
        && suffix
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    uid_ok && suffix_ok
}

/// Whether `dir` is a session directory of `me` whose sprig is gone.
fn is_dead(dir: &Path, me: u32, min_age: Duration) -> bool {
    let Ok(meta) = fs::symlink_metadata(dir) else {
        return false;
    };
    // A modification time ahead of this clock (a clock stepped back, a
    // timestamp taken from a finer clock than ours) counts as just now.
    let old_enough = meta
        .modified()
        .ok()
        .map(|m| m.elapsed().unwrap_or(Duration::ZERO))
        .is_some_and(|age| age >= min_age);
    if !meta.is_dir() || meta.uid() != me || !old_enough {
        return false;
    }
    let Ok(entries) = fs::read_dir(dir) else {
        return false;
    };
    let names: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    match names.as_slice() {
        [] => true,
        [only] if only == SOCKET_NAME => refuses(&dir.join(SOCKET_NAME), me),
        _ => false,
    }
}

/// Whether `socket` is a socket of `me` that nobody listens on.
fn refuses(socket: &Path, me: u32) -> bool {
    let is_ours =
        fs::symlink_metadata(socket).is_ok_and(|m| m.file_type().is_socket() && m.uid() == me);
    is_ours
        && matches!(
            UnixStream::connect(socket),
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    struct Base(PathBuf);

    impl Base {
        fn new(tag: &str) -> Base {
            let p = std::env::temp_dir().join(format!("sprig-stale-{tag}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&p);
            fs::create_dir(&p).unwrap();
            Base(p)
        }

        /// A session directory with a socket nobody listens on, as a
        /// killed sprig leaves it.
        fn dead(&self, name: &str) -> PathBuf {
            let dir = self.0.join(name);
            fs::create_dir(&dir).unwrap();
            drop(UnixListener::bind(dir.join(SOCKET_NAME)).unwrap());
            dir
        }
    }

    impl Drop for Base {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn me() -> u32 {
        sprig_wire::session::euid()
    }

    #[test]
    fn a_killed_sessions_directory_goes_and_a_live_one_stays() {
        let base = Base::new("live");
        let dead = base.dead(&format!("sprig-{}-0123456789ab", me()));
        let empty = base.0.join(format!("sprig-{}-ba9876543210", me()));
        fs::create_dir(&empty).unwrap();
        let live = base.0.join(format!("sprig-{}-00000000000f", me()));
        fs::create_dir(&live).unwrap();
        let _listening = UnixListener::bind(live.join(SOCKET_NAME)).unwrap();
        // Too young to judge: left for a later sprig.
        assert_eq!(clean_in(&base.0, Duration::from_secs(3600)), 0);
        assert!(dead.exists() && empty.exists());
        assert_eq!(clean_in(&base.0, Duration::ZERO), 2);
        assert!(!dead.exists());
        assert!(!empty.exists());
        assert!(live.join(SOCKET_NAME).exists());
    }

    #[test]
    fn a_directory_modified_in_the_future_counts_as_just_modified() {
        let base = Base::new("future");
        let dead = base.dead(&format!("sprig-{}-0123456789ab", me()));
        let ahead = std::time::SystemTime::now() + Duration::from_secs(600);
        fs::File::open(&dead).unwrap().set_modified(ahead).unwrap();
        assert!(fs::metadata(&dead).unwrap().modified().unwrap() > std::time::SystemTime::now());
        assert_eq!(clean_in(&base.0, Duration::from_secs(60)), 0);
        assert!(dead.exists());
        assert_eq!(clean_in(&base.0, Duration::ZERO), 1);
        assert!(!dead.exists());
    }

    #[test]
    fn what_is_not_a_session_directory_of_ours_stays() {
        let base = Base::new("others");
        let kept = [
            base.dead("sprig-x-0123456789ab"),
            base.dead(&format!("sprig-{}-0123456789", me())),
            base.dead(&format!("sprig-{}-0123456789AG", me())),
            base.dead(&format!("sprig-{}-0123456789ab-x", me())),
            base.dead(&format!("other-{}-0123456789ab", me())),
            base.dead(&format!("sprig-{}-0123456789ab", me().wrapping_add(4242))),
        ];
        // A directory with anything but a dead socket in it.
        let busy = base.dead(&format!("sprig-{}-aaaaaaaaaaaa", me()));
        fs::remove_file(busy.join(SOCKET_NAME)).unwrap();
        fs::write(busy.join("ring"), b"").unwrap();
        // A link to a dead session directory: the link is not a directory.
        let target = base.dead("target");
        let link = base.0.join(format!("sprig-{}-bbbbbbbbbbbb", me()));
        std::os::unix::fs::symlink(&target, &link).unwrap();
        // A plain file where the socket should be.
        let file = base.0.join(format!("sprig-{}-cccccccccccc", me()));
        fs::create_dir(&file).unwrap();
        fs::write(file.join(SOCKET_NAME), b"").unwrap();
        assert_eq!(clean_in(&base.0, Duration::ZERO), 0);
        for p in kept.iter().chain([&busy, &target, &file]) {
            assert!(p.exists(), "{}", p.display());
        }
        assert!(fs::symlink_metadata(&link).is_ok());
    }

    #[test]
    fn another_users_dead_session_stays() {
        if me() != 0 {
            eprintln!("note: another_users_dead_session_stays needs root: skipped");
            return;
        }
        let base = Base::new("user");
        // Root's name, handed to another user; and that user's own.
        for name in ["sprig-0-0123456789ab", "sprig-65534-0123456789ab"] {
            let dir = base.dead(name);
            std::os::unix::fs::lchown(dir.join(SOCKET_NAME), Some(65534), Some(65534)).unwrap();
            std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
        }
        assert_eq!(clean_in(&base.0, Duration::ZERO), 0);
        assert!(base.0.join("sprig-0-0123456789ab").exists());
        assert!(base.0.join("sprig-65534-0123456789ab").exists());
    }
}
