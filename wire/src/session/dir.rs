//! The private session directory, `/tmp/sprig-<uid>-<random>`, and the
//! names inside it.
//!
//! Its part of the invariant that the directory stays root's and private
//! until the socket is bound: [`SessionDir::create_in`] makes it with
//! `mkdir` 0700 (which fails if the name exists), opens it `O_NOFOLLOW`
//! and checks and sets its mode through that descriptor;
//! [`SessionDir::adopt`] gives a file inside to the owner without following
//! a link and only while the directory is private; `hand_over`, called by
//! [`Listener::bind`](super::Listener::bind) as its last step, gives the
//! directory away through the descriptor.

use super::sys::euid;
use crate::control::AgentOptions;
use std::fs::{self, DirBuilder, File};
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Name of the control socket inside the session directory.
pub const SOCKET_NAME: &str = "control.sock";
/// Name of a ring file inside the session directory (tests and tools;
/// sessions pass the ring as a memfd instead).
pub const RING_NAME: &str = "ring";

/// Reads `n` random bytes from `/dev/urandom`.
fn random_bytes<const N: usize>() -> io::Result<[u8; N]> {
    let mut out = [0u8; N];
    File::open("/dev/urandom")?.read_exact(&mut out)?;
    Ok(out)
}

/// `bytes` as lower-case hex digits.
pub(super) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// A private session directory holding `control.sock` and `ring`. Dropping
/// it removes the directory and everything in it (best effort).
///
/// Root profiling another user's JVM ([`SessionDir::create_for_owner`])
/// must hand the directory to that user, whose agent connects to the
/// socket inside. The user then owns the directory and can rename, replace
/// or symlink anything in it, so root touches nothing in it by path after
/// the hand-over: every file is made and given its mode and owner while the
/// directory is still root's and private (0700, in a sticky `/tmp` the user
/// cannot rename it), owners are set without following links, and the
/// directory itself is given away last, through a descriptor opened when it
/// was made ([`Listener::bind`](super::Listener::bind) does that as its
/// last step). Removal goes through the descriptor too
/// ([`Listener`](super::Listener)'s drop) or through `remove_dir_all`,
/// which does not follow links.
#[derive(Debug)]
pub struct SessionDir {
    path: PathBuf,
    token: [u8; 16],
    /// The directory itself, opened `O_NOFOLLOW` right after `mkdir`.
    handle: File,
    /// The user the directory goes to, for [`SessionDir::create_for_owner`].
    owner: Option<(u32, u32)>,
    /// Set once the directory belongs to `owner`: from then on nothing is
    /// made in it.
    handed_over: AtomicBool,
}

impl SessionDir {
    /// Creates a fresh `/tmp/sprig-<uid>-<random>` directory, mode 0700.
    pub fn create() -> io::Result<SessionDir> {
        SessionDir::create_in(Path::new("/tmp"))
    }

    /// Creates the session directory under `base` instead of `/tmp`. `base`
    /// must be absolute, UTF-8 and without a comma, so the agent option
    /// string carries it unambiguously.
    pub fn create_in(base: &Path) -> io::Result<SessionDir> {
        if !base.is_absolute() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "session base directory must be absolute",
            ));
        }
        match base.to_str() {
            Some(b) if !b.contains(',') => {}
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "session base directory must be UTF-8 without ','",
                ));
            }
        }
        let token = random_bytes::<16>()?;
        let uid = euid();
        for _ in 0..16 {
            let suffix = hex(&random_bytes::<6>()?);
            let path = base.join(format!("sprig-{uid}-{suffix}"));
            match DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
            let handle = match open_dir_nofollow(&path) {
                Ok(h) => h,
                Err(e) => {
                    let _ = fs::remove_dir(&path);
                    return Err(e);
                }
            };
            let dir = SessionDir {
                path,
                token,
                handle,
                owner: None,
                handed_over: AtomicBool::new(false),
            };
            // mkdir applied the umask, which may only have removed bits;
            // make the mode exactly 0700 and check what we created.
            let meta = dir.handle.metadata()?;
            if !meta.is_dir() || meta.uid() != uid {
                return Err(io::Error::other("session directory was replaced"));
            }
            dir.handle
                .set_permissions(fs::Permissions::from_mode(0o700))?;
            return Ok(dir);
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "could not find a free session directory name",
        ))
    }

    /// Like [`SessionDir::create`], for a session whose agent runs as
    /// `uid:gid` (root profiling another user's JVM). The directory stays
    /// root's and private while files are made in it; files made through
    /// [`SessionDir::adopt`] and [`Listener::bind`](super::Listener::bind) go to `uid:gid`, and
    /// [`Listener::bind`](super::Listener::bind) hands the directory over as its last step.
    pub fn create_for_owner(uid: u32, gid: u32) -> io::Result<SessionDir> {
        SessionDir::create_in_for_owner(Path::new("/tmp"), uid, gid)
    }

    /// [`SessionDir::create_for_owner`] under `base` (as
    /// [`SessionDir::create_in`]).
    pub fn create_in_for_owner(base: &Path, uid: u32, gid: u32) -> io::Result<SessionDir> {
        let me = euid();
        if me != 0 && uid != me {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("only root can make a session directory for uid {uid}"),
            ));
        }
        let mut dir = SessionDir::create_in(base)?;
        dir.owner = Some((uid, gid));
        Ok(dir)
    }

    /// Gives a file made inside the directory to the directory's owner when
    /// it was created with [`SessionDir::create_for_owner`]; no-op otherwise.
    /// The owner is set without following a link. Refused once the
    /// directory has been handed over: its contents are no longer ours.
    pub fn adopt(&self, file: &Path) -> io::Result<()> {
        let Some((uid, gid)) = self.owner else {
            return Ok(());
        };
        self.check_private()?;
        if file.parent() != Some(self.path.as_path()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "adopt takes a file directly inside the session directory",
            ));
        }
        std::os::unix::fs::lchown(file, Some(uid), Some(gid))
    }

    /// Fails once the directory belongs to its owner.
    pub(super) fn check_private(&self) -> io::Result<()> {
        if self.handed_over.load(Ordering::Acquire) {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "the session directory was already handed to its owner",
            ));
        }
        Ok(())
    }

    /// Gives the directory to its owner (no-op without one), through the
    /// descriptor opened when it was made. Called last, by
    /// [`Listener::bind`](super::Listener::bind).
    pub(super) fn hand_over(&self) -> io::Result<()> {
        if let Some((uid, gid)) = self.owner {
            std::os::unix::fs::fchown(&self.handle, Some(uid), Some(gid))?;
            self.handed_over.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// A second descriptor on the directory, for the listener, which removes
    /// the socket relative to it when dropped.
    pub(super) fn clone_handle(&self) -> io::Result<OwnedFd> {
        self.handle.as_fd().try_clone_to_owned()
    }

    /// The owner set by [`SessionDir::create_for_owner`].
    pub fn owner(&self) -> Option<(u32, u32)> {
        self.owner
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn socket_path(&self) -> PathBuf {
        self.path.join(SOCKET_NAME)
    }

    pub fn ring_path(&self) -> PathBuf {
        self.path.join(RING_NAME)
    }

    pub fn token(&self) -> [u8; 16] {
        self.token
    }

    /// The options the agent needs to find this session.
    pub fn agent_options(&self, cli_pid: u32) -> AgentOptions {
        AgentOptions {
            dir: self.path.clone(),
            token: self.token,
            cli_pid,
        }
    }
}

/// Opens a directory without following a link at its last component, so
/// that what is checked and changed through the handle is that directory
/// (`ELOOP` for a link, `ENOTDIR` for anything else that is not one).
pub fn open_dir_nofollow(path: &Path) -> io::Result<File> {
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

impl Drop for SessionDir {
    fn drop(&mut self) {
        // Does not follow a link at `path` or anywhere below it.
        let _ = fs::remove_dir_all(&self.path);
    }
}
