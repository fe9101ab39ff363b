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
//!
//! One file per concern, each lower file knowing nothing of the higher:
//!
//! - `sys`: the kernel calls ([`euid`], [`peer_cred`], descriptor passing,
//!   `unlinkat`); the only file here with `unsafe`.
//! - `dir`: [`SessionDir`], the names inside it ([`SOCKET_NAME`],
//!   [`RING_NAME`]), [`open_dir_nofollow`].
//! - `options`: the agent's option string
//!   ([`AgentOptions::format`](crate::AgentOptions::format) and
//!   [`AgentOptions::parse`](crate::AgentOptions::parse), [`OptionsError`]).
//! - `error`: [`SessionError`].
//! - `channel`: [`Channel`], the framing and the descriptors that come with
//!   a message.
//! - `handshake`: both halves of the handshake (the listener's, and the
//!   agent's [`connect`]).
//! - `listener`: [`Listener`] (bind, accept) and [`PeerExpectation`].
//!
//! When root profiles another user's JVM, the directory stays root's and
//! private until the socket is bound. Where each part of that lives:
//! `dir` makes the directory 0700 with `mkdir`, opens it without following
//! a link and checks it through that descriptor ([`SessionDir::create_in`]),
//! gives files inside to the owner without following links and only while
//! the directory is private ([`SessionDir::adopt`]), and gives the
//! directory away through the descriptor (`SessionDir::hand_over`);
//! `listener` binds the socket as the last thing made in the directory and
//! calls the hand-over as its last step ([`Listener::bind`]), and removes
//! the socket relative to the descriptor on drop (`sys::unlink_at`).

mod channel;
mod dir;
mod error;
mod handshake;
mod listener;
mod options;
#[allow(unsafe_code)]
mod sys;

pub use channel::Channel;
pub use dir::{RING_NAME, SOCKET_NAME, SessionDir, open_dir_nofollow};
pub use error::SessionError;
pub use handshake::connect;
pub use listener::{HELLO_TIMEOUT, Listener, PeerExpectation, VERIFIED_HELLO_TIMEOUT};
pub use options::OptionsError;
pub use sys::{PeerCred, euid, peer_cred};
