//! The private session directory, the control-socket listener (CLI side),
//! the connector (agent side) and the framed [`Channel`] between them.
//!
//! Security model: the control socket lives in a fresh directory
//! `/tmp/sprig-<uid>-<random>` created with mode 0700 (by `mkdir`, which
//! fails if the name exists, so nobody can pre-plant it); the socket inside
//! is 0600. The listener additionally checks the peer's credentials
//! (`SO_PEERCRED`: uid, and pid when known) and a 16-byte random token that
//! only the agent's option string carries; the agent checks that the
//! listener is the CLI process named in its options. The event ring is not
//! a file in that directory: the CLI creates it as a sealed memfd and hands
//! the descriptor to the agent with `Start` ([`Channel::send_with_fd`]), so
//! no other process can open it and neither side can resize it.

use crate::codec::{self, CodecError};
use crate::control::{AgentOptions, JvmInfo, Message, PROTOCOL_VERSION};
use std::fs::{self, DirBuilder, File};
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use thiserror::Error;

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

/// Effective uid of this process.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Credentials of the process at the other end of a Unix socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerCred {
    pub pid: u32,
    pub uid: u32,
    pub gid: u32,
}

/// Reads `SO_PEERCRED` of a connected Unix socket.
pub fn peer_cred(sock: &UnixStream) -> io::Result<PeerCred> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: the fd is a live socket borrowed from `sock`; `cred` and `len`
    // are valid for writes and `len` holds the size of `cred`, so the kernel
    // writes at most that many bytes.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    if len as usize != std::mem::size_of::<libc::ucred>() {
        return Err(io::Error::other("short SO_PEERCRED answer"));
    }
    Ok(PeerCred {
        pid: cred.pid as u32,
        uid: cred.uid,
        gid: cred.gid,
    })
}

fn hex(bytes: &[u8]) -> String {
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
/// was made ([`Listener::bind`] does that as its last step). Removal goes
/// through the descriptor too ([`Listener`]'s drop) or through
/// `remove_dir_all`, which does not follow links.
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
    /// [`SessionDir::adopt`] and [`Listener::bind`] go to `uid:gid`, and
    /// [`Listener::bind`] hands the directory over as its last step.
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
    fn check_private(&self) -> io::Result<()> {
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
    /// [`Listener::bind`].
    fn hand_over(&self) -> io::Result<()> {
        if let Some((uid, gid)) = self.owner {
            std::os::unix::fs::fchown(&self.handle, Some(uid), Some(gid))?;
            self.handed_over.store(true, Ordering::Release);
        }
        Ok(())
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

/// Why an agent option string was refused.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum OptionsError {
    #[error("agent options: missing `{0}=`")]
    Missing(&'static str),
    #[error("agent options: `{0}` given twice")]
    Duplicate(String),
    #[error("agent options: unknown option `{0}`")]
    Unknown(String),
    #[error("agent options: `{0}` is not `key=value`")]
    NotKeyValue(String),
    #[error("agent options: dir must be an absolute path, got `{0}`")]
    BadDir(String),
    #[error("agent options: token must be 32 hex digits")]
    BadToken,
    #[error("agent options: cli must be a process id, got `{0}`")]
    BadPid(String),
}

impl AgentOptions {
    /// `dir=<abs path>,token=<32 hex>,cli=<pid>`.
    pub fn format(&self) -> String {
        format!(
            "dir={},token={},cli={}",
            self.dir.display(),
            hex(&self.token),
            self.cli_pid
        )
    }

    /// Parses what [`AgentOptions::format`] wrote. Keys may come in any
    /// order but each exactly once; unknown keys are refused.
    pub fn parse(s: &str) -> Result<AgentOptions, OptionsError> {
        let mut dir = None;
        let mut token = None;
        let mut cli = None;
        for part in s.split(',') {
            let Some((key, value)) = part.split_once('=') else {
                return Err(OptionsError::NotKeyValue(part.to_string()));
            };
            let slot_taken = match key {
                "dir" => dir.replace(value).is_some(),
                "token" => token.replace(value).is_some(),
                "cli" => cli.replace(value).is_some(),
                _ => return Err(OptionsError::Unknown(key.to_string())),
            };
            if slot_taken {
                return Err(OptionsError::Duplicate(key.to_string()));
            }
        }
        let dir = dir.ok_or(OptionsError::Missing("dir"))?;
        let token = token.ok_or(OptionsError::Missing("token"))?;
        let cli = cli.ok_or(OptionsError::Missing("cli"))?;
        let dir_path = PathBuf::from(dir);
        if !dir_path.is_absolute() || dir.contains('\0') {
            return Err(OptionsError::BadDir(dir.to_string()));
        }
        Ok(AgentOptions {
            dir: dir_path,
            token: parse_token(token).ok_or(OptionsError::BadToken)?,
            cli_pid: match cli.parse::<u32>() {
                Ok(p) if p > 0 && !cli.starts_with('+') => p,
                _ => return Err(OptionsError::BadPid(cli.to_string())),
            },
        })
    }

    /// The control socket of this session.
    pub fn socket_path(&self) -> PathBuf {
        self.dir.join(SOCKET_NAME)
    }

    /// The ring file of this session.
    pub fn ring_path(&self) -> PathBuf {
        self.dir.join(RING_NAME)
    }
}

fn parse_token(s: &str) -> Option<[u8; 16]> {
    let bytes = s.as_bytes();
    if bytes.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, pair) in bytes.chunks_exact(2).enumerate() {
        let hi = (pair[0] as char).to_digit(16)?;
        let lo = (pair[1] as char).to_digit(16)?;
        out[i] = (hi * 16 + lo) as u8;
    }
    Some(out)
}

/// Why a control connection failed.
#[derive(Debug, Error)]
pub enum SessionError {
    /// The peer closed the connection.
    #[error("the peer closed the control connection")]
    Closed,
    /// Nobody (acceptable) connected in time, or the peer did not answer.
    #[error("timed out after {0:?} waiting for the peer")]
    Timeout(Duration),
    /// A peer connected but sent no hello in time.
    #[error("the peer connected but sent no hello within {0:?}")]
    NoHello(Duration),
    /// The process at the other end is not the one expected.
    #[error("control socket peer is pid {} uid {}, expected {expected}", got.pid, got.uid)]
    WrongPeer { got: PeerCred, expected: String },
    #[error("the agent presented a wrong session token")]
    BadToken,
    #[error("protocol version mismatch: this side speaks {ours}, the peer speaks {theirs}")]
    VersionMismatch { ours: u32, theirs: u32 },
    /// The first frame was not the expected hello.
    #[error("expected {expected} as the first frame, got {got}")]
    Unexpected { expected: &'static str, got: String },
    /// The peer refused the handshake with an `Error` message.
    #[error("the peer refused the session: {0}")]
    Rejected(String),
    #[error(transparent)]
    Codec(CodecError),
    #[error("control socket: {0}")]
    Io(#[from] io::Error),
}

impl From<CodecError> for SessionError {
    fn from(e: CodecError) -> SessionError {
        match e {
            CodecError::Closed => SessionError::Closed,
            CodecError::Io(io) => SessionError::Io(io),
            other => SessionError::Codec(other),
        }
    }
}

impl SessionError {
    /// The peer is gone (clean close or connection reset).
    pub fn is_closed(&self) -> bool {
        match self {
            SessionError::Closed => true,
            SessionError::Io(e) => matches!(
                e.kind(),
                io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
            ),
            _ => false,
        }
    }
}

/// Whom [`Listener::accept`] waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerExpectation {
    /// The target JVM's pid, when known (always when attaching by pid).
    pub pid: Option<u32>,
    /// The uid the JVM runs as.
    pub uid: u32,
    /// The session token handed to the agent.
    pub token: [u8; 16],
}

/// The CLI side: a listening socket `control.sock` (mode 0600).
#[derive(Debug)]
pub struct Listener {
    inner: UnixListener,
    path: PathBuf,
    /// The session directory, to remove the socket without a path walk.
    dir: OwnedFd,
}

impl Listener {
    /// Binds `dir`'s control socket, mode 0600, and when the directory has
    /// an owner ([`SessionDir::create_for_owner`]) gives the socket and then
    /// the directory to that owner: binding is the last thing made in a
    /// session directory. The socket is made, and its mode and owner set,
    /// while the directory is still private to this process's user, so
    /// nobody can swap a link in for it; its owner is set without
    /// following links all the same.
    pub fn bind(dir: &SessionDir) -> io::Result<Listener> {
        dir.check_private()?;
        let path = dir.socket_path();
        let inner = UnixListener::bind(&path)?;
        let dir_fd = dir.handle.as_fd().try_clone_to_owned()?;
        let listener = Listener {
            inner,
            path,
            dir: dir_fd,
        };
        fs::set_permissions(&listener.path, fs::Permissions::from_mode(0o600))?;
        dir.adopt(&listener.path)?;
        dir.hand_over()?;
        listener.inner.set_nonblocking(true)?;
        Ok(listener)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Waits up to `timeout` for the expected agent and shakes hands.
    ///
    /// Connections from another uid, or another pid when `expect.pid` is
    /// given, are dropped and waiting goes on. The first frame must be an
    /// `AgentHello` with the session token and [`PROTOCOL_VERSION`]; the CLI
    /// answers `CliHello` and returns the channel and the JVM facts.
    ///
    /// When the pid is known and matches, the peer is the target JVM, so a
    /// wrong token, wrong version or malformed hello is returned as an error
    /// (the agent is told why first). When the pid is not known, any
    /// process of that uid could connect: one that does not send a valid
    /// hello within [`HELLO_TIMEOUT`] is dropped and waiting goes on, and
    /// its error is only returned if nobody better comes before the
    /// deadline. A version mismatch with the right token is always returned
    /// at once: that is our agent, only older or newer.
    ///
    /// The hello wait of a connected peer may run past `timeout` (by at most
    /// [`VERIFIED_HELLO_TIMEOUT`] or [`HELLO_TIMEOUT`]), so accepting in
    /// short slices never drops an agent in the middle of its handshake.
    pub fn accept(
        &self,
        expect: &PeerExpectation,
        timeout: Duration,
    ) -> Result<(Channel, JvmInfo), SessionError> {
        let deadline = Instant::now() + timeout;
        let mut last_err = None;
        loop {
            let stream = match self.inner.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        return Err(last_err.unwrap_or(SessionError::Timeout(timeout)));
                    }
                    std::thread::sleep(Duration::from_millis(2));
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            };
            stream.set_nonblocking(false)?;
            let cred = peer_cred(&stream)?;
            if cred.uid != expect.uid || expect.pid.is_some_and(|p| p != cred.pid) {
                // Not our agent: drop it and keep waiting.
                continue;
            }
            let verified = expect.pid.is_some();
            // Once a peer is connected it gets its own time for the hello,
            // even when `timeout` is nearly used up (callers may accept in
            // short slices): the target gets VERIFIED_HELLO_TIMEOUT, an
            // unverified peer HELLO_TIMEOUT.
            let remaining = deadline.saturating_duration_since(Instant::now());
            let hello_wait = if verified {
                remaining.max(VERIFIED_HELLO_TIMEOUT)
            } else {
                HELLO_TIMEOUT
            };
            match handshake(
                stream,
                &expect.token,
                hello_wait.max(Duration::from_millis(1)),
            ) {
                Ok(done) => return Ok(done),
                Err(e @ SessionError::VersionMismatch { .. }) => return Err(e),
                Err(e) if verified => return Err(e),
                Err(e) => last_err = Some(e),
            }
        }
    }
}

/// How long [`Listener::accept`] waits for the hello of a peer whose pid
/// it cannot check before it drops it and waits for another.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(1);

/// How long [`Listener::accept`] waits at least for the hello of the
/// expected pid once it has connected.
pub const VERIFIED_HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// The listener's half of the handshake on one accepted connection.
fn handshake(
    stream: UnixStream,
    expect_token: &[u8; 16],
    wait: Duration,
) -> Result<(Channel, JvmInfo), SessionError> {
    let mut ch = Channel::new(stream)?;
    ch.set_write_timeout(Some(wait))?;
    let first = ch.recv_timeout(wait)?.ok_or(SessionError::NoHello(wait))?;
    let Message::AgentHello {
        version,
        token,
        jvm,
    } = first
    else {
        return Err(SessionError::Unexpected {
            expected: "AgentHello",
            got: message_name(&first),
        });
    };
    if !tokens_equal(&token, expect_token) {
        let _ = ch.send(&Message::Error("wrong session token".into()));
        return Err(SessionError::BadToken);
    }
    if version != PROTOCOL_VERSION {
        let _ = ch.send(&Message::Error(format!(
            "protocol version mismatch: sprig speaks {PROTOCOL_VERSION}, the agent speaks {version}"
        )));
        return Err(SessionError::VersionMismatch {
            ours: PROTOCOL_VERSION,
            theirs: version,
        });
    }
    ch.send(&Message::CliHello {
        version: PROTOCOL_VERSION,
    })?;
    ch.set_write_timeout(None)?;
    Ok((ch, jvm))
}

impl Drop for Listener {
    fn drop(&mut self) {
        // Relative to the directory's descriptor: the directory may belong
        // to another user by now, who could have put a link where its path
        // was.
        let name = c"control.sock";
        debug_assert_eq!(name.to_bytes(), SOCKET_NAME.as_bytes());
        // SAFETY: `self.dir` is an open directory descriptor owned by this
        // listener and `name` is a NUL-terminated string that outlives the
        // call; unlinkat reads both and changes no memory of ours.
        unsafe {
            libc::unlinkat(self.dir.as_raw_fd(), name.as_ptr(), 0);
        }
    }
}

/// Constant-time comparison, so the token cannot be guessed byte by byte.
fn tokens_equal(a: &[u8; 16], b: &[u8; 16]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The variant name of a message, for error texts.
fn message_name(m: &Message) -> String {
    let dbg = format!("{m:?}");
    let end = dbg.find([' ', '(', '{']).unwrap_or(dbg.len());
    dbg[..end].to_string()
}

/// The agent side: connects to the session's socket, checks the listener
/// is the CLI process `opts.cli_pid` running as this user or root, sends
/// `AgentHello` with the token and waits for a `CliHello` of the same
/// protocol version.
pub fn connect(
    opts: &AgentOptions,
    jvm: JvmInfo,
    timeout: Duration,
) -> Result<Channel, SessionError> {
    let stream = UnixStream::connect(opts.socket_path())?;
    let cred = peer_cred(&stream)?;
    let me = euid();
    if cred.pid != opts.cli_pid || (cred.uid != me && cred.uid != 0) {
        return Err(SessionError::WrongPeer {
            got: cred,
            expected: format!("pid {} uid {me} or 0", opts.cli_pid),
        });
    }
    let mut ch = Channel::new(stream)?;
    ch.set_write_timeout(Some(timeout))?;
    ch.send(&Message::AgentHello {
        version: PROTOCOL_VERSION,
        token: opts.token,
        jvm,
    })?;
    let reply = ch
        .recv_timeout(timeout)?
        .ok_or(SessionError::Timeout(timeout))?;
    ch.set_write_timeout(None)?;
    match reply {
        Message::CliHello { version } if version == PROTOCOL_VERSION => Ok(ch),
        Message::CliHello { version } => Err(SessionError::VersionMismatch {
            ours: PROTOCOL_VERSION,
            theirs: version,
        }),
        Message::Error(text) => Err(SessionError::Rejected(text)),
        other => Err(SessionError::Unexpected {
            expected: "CliHello",
            got: message_name(&other),
        }),
    }
}

/// A framed, bidirectional control connection. [`Channel::try_clone`] gives
/// a second handle on the same socket so one thread can block in `recv`
/// while others `send`; sends from all clones are serialised so frames
/// never interleave.
#[derive(Debug)]
pub struct Channel {
    stream: UnixStream,
    write_lock: Arc<Mutex<()>>,
    /// Bytes received but not yet decoded (a partial frame survives a
    /// `recv_timeout` that timed out).
    rbuf: Vec<u8>,
    /// Descriptors received with the bytes (`SCM_RIGHTS`), oldest first.
    fds: Vec<OwnedFd>,
}

impl Channel {
    fn new(stream: UnixStream) -> io::Result<Channel> {
        Ok(Channel {
            stream,
            write_lock: Arc::new(Mutex::new(())),
            rbuf: Vec::new(),
            fds: Vec::new(),
        })
    }

    /// Sends one message with a descriptor attached (`SCM_RIGHTS` on the
    /// frame's bytes); the peer takes it with [`Channel::take_fd`] once it
    /// has received the message.
    pub fn send_with_fd(&self, msg: &Message, fd: BorrowedFd<'_>) -> Result<(), SessionError> {
        self.send_frame(msg, Some(fd))
    }

    /// The oldest descriptor received and not yet taken. Descriptors come
    /// with the bytes of the message they were sent with, so after that
    /// message has been received this returns its descriptor.
    pub fn take_fd(&mut self) -> Option<OwnedFd> {
        if self.fds.is_empty() {
            None
        } else {
            Some(self.fds.remove(0))
        }
    }

    /// Sends one message (one `write_all` under the channel's write lock).
    /// Blocks while the socket buffer is full; bound that with
    /// [`Channel::set_write_timeout`] on threads that must not stall.
    pub fn send(&self, msg: &Message) -> Result<(), SessionError> {
        self.send_frame(msg, None)
    }

    /// Encodes `msg` and writes the frame under the write lock, its first
    /// bytes with `fd` attached when there is one.
    fn send_frame(&self, msg: &Message, fd: Option<BorrowedFd<'_>>) -> Result<(), SessionError> {
        let frame = codec::encode(msg)?;
        let _guard = self
            .write_lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let sent = match fd {
            Some(fd) => send_fd(&self.stream, &frame, fd).map_err(closed_or_io)?,
            None => 0,
        };
        use std::io::Write;
        (&self.stream)
            .write_all(&frame[sent..])
            .map_err(closed_or_io)
    }

    /// Blocks until the next message arrives.
    pub fn recv(&mut self) -> Result<Message, SessionError> {
        loop {
            if let Some(m) = self.recv_inner(None)? {
                return Ok(m);
            }
        }
    }

    /// Waits up to `timeout` for the next message; `Ok(None)` on timeout.
    /// A closed peer is `Err(SessionError::Closed)`.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Option<Message>, SessionError> {
        let deadline = Instant::now() + timeout;
        self.recv_inner(Some(deadline))
    }

    fn recv_inner(&mut self, deadline: Option<Instant>) -> Result<Option<Message>, SessionError> {
        let mut chunk = [0u8; 8192];
        loop {
            if let Some((msg, used)) = codec::try_decode(&self.rbuf)? {
                self.rbuf.drain(..used);
                return Ok(Some(msg));
            }
            let wait = match deadline {
                None => None,
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Ok(None);
                    }
                    Some(left)
                }
            };
            self.stream.set_read_timeout(wait)?;
            match recv_with_fds(&self.stream, &mut chunk, &mut self.fds) {
                Ok(0) => {
                    return Err(if self.rbuf.is_empty() {
                        SessionError::Closed
                    } else {
                        SessionError::Codec(CodecError::Truncated {
                            got: self.rbuf.len(),
                            want: expected_len(&self.rbuf),
                        })
                    });
                }
                Ok(n) => self.rbuf.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    if deadline.is_some() {
                        continue; // the deadline check above decides
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                    return Err(SessionError::Closed);
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// A second handle on the same connection (for a reader thread). The
    /// clone starts with an empty receive buffer: read from one handle only.
    pub fn try_clone(&self) -> io::Result<Channel> {
        Ok(Channel {
            stream: self.stream.try_clone()?,
            write_lock: Arc::clone(&self.write_lock),
            rbuf: Vec::new(),
            fds: Vec::new(),
        })
    }

    /// Bounds how long a `send` may block on a peer that does not read.
    pub fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.stream.set_write_timeout(t)
    }

    /// Credentials of the peer process.
    pub fn peer(&self) -> io::Result<PeerCred> {
        peer_cred(&self.stream)
    }

    /// Shuts both directions down; a peer blocked in `recv` sees `Closed`.
    pub fn shutdown(&self) -> io::Result<()> {
        match self.stream.shutdown(std::net::Shutdown::Both) {
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
            other => other,
        }
    }
}

fn closed_or_io(e: io::Error) -> SessionError {
    if matches!(
        e.kind(),
        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
    ) {
        SessionError::Closed
    } else {
        SessionError::Io(e)
    }
}

/// Room for the control message of one descriptor (`CMSG_SPACE` of an
/// int, rounded up generously), in u64 words for alignment.
const CMSG_WORDS: usize = 8;
/// Most descriptors one receive accepts; more are closed at once.
const MAX_FDS: usize = 4;

/// A message header over one buffer (`iov`) with `cbuf` as the whole
/// control buffer; both must outlive every use of the header.
fn msghdr(iov: &mut libc::iovec, cbuf: &mut [u64]) -> libc::msghdr {
    // SAFETY: msghdr is plain data; zeroed is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(cbuf) as _;
    msg
}

/// `sendmsg` of (a first part of) `bytes` with `fd` attached; returns how
/// many bytes went out (at least one).
fn send_fd(stream: &UnixStream, bytes: &[u8], fd: BorrowedFd<'_>) -> io::Result<usize> {
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    let mut cbuf = [0u64; CMSG_WORDS];
    let mut msg = msghdr(&mut iov, &mut cbuf);
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) } as usize;
    assert!(space <= std::mem::size_of_val(&cbuf));
    msg.msg_controllen = space as _;
    // SAFETY: msg_control points at `cbuf`, which holds `space` bytes, so
    // CMSG_FIRSTHDR is non-null and the header and its int payload (at
    // CMSG_DATA, within CMSG_LEN(int) <= space) lie inside `cbuf`.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>(), fd.as_raw_fd());
    }
    loop {
        // SAFETY: the socket is live (borrowed from `stream`); `msg` points
        // at `iov` (over `bytes`) and `cbuf`, all alive for the call.
        let n = unsafe { libc::sendmsg(stream.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if n > 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// `recvmsg` into `buf`, keeping any descriptors that came along
/// (close-on-exec) in `fds`; returns the byte count like `read`.
fn recv_with_fds(stream: &UnixStream, buf: &mut [u8], fds: &mut Vec<OwnedFd>) -> io::Result<usize> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut cbuf = [0u64; CMSG_WORDS * MAX_FDS];
    let mut msg = msghdr(&mut iov, &mut cbuf);
    // SAFETY: the socket is live (borrowed from `stream`); `msg` points at
    // `iov` (over `buf`) and `cbuf`, both writable and alive for the call.
    let n = unsafe { libc::recvmsg(stream.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel filled `msg` and `cbuf`; CMSG_FIRSTHDR/NXTHDR walk
    // only headers inside msg_controllen, and each SCM_RIGHTS payload holds
    // (cmsg_len - CMSG_LEN(0)) / sizeof(int) descriptors now owned by us.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let payload = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let data = libc::CMSG_DATA(c).cast::<libc::c_int>();
                for i in 0..payload / std::mem::size_of::<libc::c_int>() {
                    let fd = std::ptr::read_unaligned(data.add(i));
                    let owned = OwnedFd::from_raw_fd(fd);
                    if fds.len() < MAX_FDS {
                        fds.push(owned);
                    }
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok(n as usize)
}

fn expected_len(buf: &[u8]) -> usize {
    match buf.first_chunk::<{ codec::PREFIX }>() {
        Some(p) => codec::PREFIX + u32::from_le_bytes(*p) as usize,
        None => codec::PREFIX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_round_trip() {
        let o = AgentOptions {
            dir: PathBuf::from("/tmp/sprig-1000-abcdef"),
            token: [0xab; 16],
            cli_pid: 4242,
        };
        let s = o.format();
        assert_eq!(
            s,
            "dir=/tmp/sprig-1000-abcdef,token=abababababababababababababababab,cli=4242"
        );
        assert_eq!(AgentOptions::parse(&s).unwrap(), o);
        // Any order is fine.
        let shuffled = "cli=4242,token=ABABABABABABABABABABABABABABABAB,dir=/tmp/sprig-1000-abcdef";
        assert_eq!(AgentOptions::parse(shuffled).unwrap(), o);
    }

    #[test]
    fn options_strict() {
        let tok = "00112233445566778899aabbccddeeff";
        let ok = format!("dir=/x,token={tok},cli=1");
        assert!(AgentOptions::parse(&ok).is_ok());
        let cases: Vec<(String, OptionsError)> = vec![
            (format!("token={tok},cli=1"), OptionsError::Missing("dir")),
            ("dir=/x,cli=1".into(), OptionsError::Missing("token")),
            (format!("dir=/x,token={tok}"), OptionsError::Missing("cli")),
            (
                format!("dir=/x,dir=/y,token={tok},cli=1"),
                OptionsError::Duplicate("dir".into()),
            ),
            (
                format!("dir=/x,token={tok},cli=1,foo=2"),
                OptionsError::Unknown("foo".into()),
            ),
            (
                format!("dir=/x,token={tok},cli=1,"),
                OptionsError::NotKeyValue(String::new()),
            ),
            (
                format!("dir=rel,token={tok},cli=1"),
                OptionsError::BadDir("rel".into()),
            ),
            (
                format!("dir=,token={tok},cli=1"),
                OptionsError::BadDir(String::new()),
            ),
            ("dir=/x,token=0011,cli=1".into(), OptionsError::BadToken),
            (
                format!("dir=/x,token={}zz,cli=1", &tok[..30]),
                OptionsError::BadToken,
            ),
            (
                format!("dir=/x,token={tok},cli=0"),
                OptionsError::BadPid("0".into()),
            ),
            (
                format!("dir=/x,token={tok},cli=-3"),
                OptionsError::BadPid("-3".into()),
            ),
            (
                format!("dir=/x,token={tok},cli=+3"),
                OptionsError::BadPid("+3".into()),
            ),
            (
                format!("dir=/x,token={tok},cli=99999999999"),
                OptionsError::BadPid("99999999999".into()),
            ),
            (String::new(), OptionsError::NotKeyValue(String::new())),
        ];
        for (input, want) in cases {
            assert_eq!(AgentOptions::parse(&input), Err(want), "input {input:?}");
        }
    }

    #[test]
    fn token_compare() {
        assert!(tokens_equal(&[1; 16], &[1; 16]));
        let mut b = [1; 16];
        b[15] = 2;
        assert!(!tokens_equal(&[1; 16], &b));
    }

    #[test]
    fn message_names() {
        assert_eq!(message_name(&Message::Detach), "Detach");
        assert_eq!(message_name(&Message::Warning("x".into())), "Warning");
        assert_eq!(message_name(&Message::CliHello { version: 1 }), "CliHello");
    }
}
