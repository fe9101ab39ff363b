//! Files another user controls, reached through directory handles.
//!
//! Root reads and removes files in directories a JVM's owner controls: its
//! `java.home` and PerfData file through `/proc/PID/root`, the attach
//! trigger and socket in its working directory and its `/tmp`. Going by
//! path there would follow whatever links the owner put in the way, block
//! on a FIFO, or read a file of any size. Here every step is taken from a
//! directory handle: each component is opened without following a link
//! (`O_NOFOLLOW`, `..` refused), a file is opened only once it is known to
//! be a regular file, and reads are capped.

use std::ffi::OsStr;
use std::fs::{self, File};
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path};

use crate::sys;

/// A directory, held open (`O_PATH`): what is done through it happens in
/// that directory, wherever its path leads later.
#[derive(Debug)]
pub struct Dir(OwnedFd);

impl Dir {
    /// Opens the directory at `path`, following links on the way: for a
    /// path sprig chose, such as `/proc/PID/root` or `/proc/PID/cwd` (links
    /// the kernel resolves to the process's own directory).
    pub fn open(path: &Path) -> io::Result<Dir> {
        let file = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(path)?;
        Ok(Dir(file.into()))
    }

    /// The directory `rel` below this one, one component at a time, none
    /// of them a link. An absolute `rel` is taken relative to this
    /// directory too (`/tmp` under a JVM's root); `..` is refused.
    pub fn walk(&self, rel: &Path) -> io::Result<Dir> {
        let mut dir: Option<Dir> = None;
        for part in rel.components() {
            let name = match part {
                Component::RootDir | Component::CurDir => continue,
                Component::Normal(name) => name,
                Component::ParentDir | Component::Prefix(_) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "a path with `..` in a directory another user controls",
                    ));
                }
            };
            let here = dir.as_ref().unwrap_or(self);
            let fd = sys::openat(
                here.0.as_fd(),
                name,
                libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                0,
            )?;
            dir = Some(Dir(fd));
        }
        match dir {
            Some(d) => Ok(d),
            None => Ok(Dir(self.0.try_clone()?)),
        }
    }

    /// What the entry `name` is, without following it if it is a link;
    /// `None` when there is no such entry.
    pub fn entry(&self, name: &OsStr) -> io::Result<Option<fs::Metadata>> {
        match sys::openat(self.0.as_fd(), name, libc::O_PATH | libc::O_NOFOLLOW, 0) {
            Ok(fd) => Ok(Some(File::from(fd).metadata()?)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// At most `cap` bytes from the start of the regular file `name`. A
    /// link, a FIFO, a device or a directory is refused without being
    /// opened for reading.
    pub fn read_file(&self, name: &OsStr, cap: u64) -> io::Result<Vec<u8>> {
        let handle = sys::openat(self.0.as_fd(), name, libc::O_PATH | libc::O_NOFOLLOW, 0)?;
        let meta = File::from(handle.try_clone()?).metadata()?;
        if !meta.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a regular file",
            ));
        }
        // Reopen that very file for reading through the handle (the name
        // may have been replaced since); O_NONBLOCK so that nothing waits.
        let file = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
            .open(format!("/proc/self/fd/{}", handle.as_raw_fd()))?;
        let opened = file.metadata()?;
        if !opened.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a regular file",
            ));
        }
        let mut buf = Vec::with_capacity(usize::try_from(meta.len().min(cap)).unwrap_or(0));
        file.take(cap).read_to_end(&mut buf)?;
        Ok(buf)
    }

    /// Creates the file `name` (it must not exist; a link there counts as
    /// existing) with `mode`, for writing.
    pub fn create_new(&self, name: &OsStr, mode: u32) -> io::Result<File> {
        let fd = sys::openat(
            self.0.as_fd(),
            name,
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW,
            mode,
        )?;
        Ok(File::from(fd))
    }

    /// Removes the entry `name` of this directory (never what a link there
    /// points to).
    pub fn unlink(&self, name: &OsStr) -> io::Result<()> {
        sys::unlinkat(self.0.as_fd(), name)
    }
}

/// At most `cap` bytes of the regular file at `path` inside `root` (a
/// process's `/proc/PID/root`), reached without following a link anywhere
/// below `root`.
pub fn read_in_root(root: &Path, path: &Path, cap: u64) -> io::Result<Vec<u8>> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    let parent = path.parent().unwrap_or(Path::new("/"));
    Dir::open(root)?.walk(parent)?.read_file(name, cap)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn temp(tag: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("sprig-beneath-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(p.join("a/b")).unwrap();
        p
    }

    #[test]
    fn reads_capped_regular_files_and_refuses_links_on_the_way() {
        let root = temp("read");
        fs::write(root.join("a/b/f"), b"0123456789").unwrap();
        assert_eq!(
            read_in_root(&root, Path::new("/a/b/f"), 4).unwrap(),
            b"0123"
        );
        assert_eq!(
            read_in_root(&root, Path::new("a/b/f"), 100).unwrap(),
            b"0123456789"
        );
        symlink(root.join("a/b"), root.join("a/l")).unwrap();
        symlink(root.join("a/b/f"), root.join("a/b/g")).unwrap();
        for bad in ["/a/l/f", "/a/b/g", "/a/b/../b/f", "/a/b"] {
            assert!(
                read_in_root(&root, Path::new(bad), 100).is_err(),
                "{bad} was read"
            );
        }
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn entries_unlink_and_create_stay_in_the_directory() {
        let root = temp("unlink");
        let outside = root.join("outside");
        fs::write(&outside, b"x").unwrap();
        let dir = Dir::open(&root).unwrap().walk(Path::new("a/b")).unwrap();
        symlink(&outside, root.join("a/b/link")).unwrap();
        let meta = dir.entry(OsStr::new("link")).unwrap().unwrap();
        assert!(meta.file_type().is_symlink());
        assert!(dir.entry(OsStr::new("none")).unwrap().is_none());
        // A link at the name is an existing entry, not followed.
        assert!(dir.create_new(OsStr::new("link"), 0o600).is_err());
        dir.unlink(OsStr::new("link")).unwrap();
        assert!(outside.exists(), "unlink followed the link");
        dir.create_new(OsStr::new("new"), 0o600).unwrap();
        assert!(root.join("a/b/new").is_file());
        // The handle stays on its directory when the path moves.
        fs::rename(root.join("a/b"), root.join("a/moved")).unwrap();
        fs::create_dir(root.join("a/b")).unwrap();
        fs::write(root.join("a/b/new"), b"decoy").unwrap();
        dir.unlink(OsStr::new("new")).unwrap();
        assert!(root.join("a/b/new").exists(), "removed by path");
        assert!(!root.join("a/moved/new").exists());
        fs::remove_dir_all(&root).unwrap();
    }
}
