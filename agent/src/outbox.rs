//! The only way to the CLI once a session has started: every message,
//! warning and error the agent sends goes through here. [`send`] writes
//! now (bounded by the socket's write timeout); [`post`] queues for the
//! control thread, which [`flush`]es the queue every tick (probes never
//! block on the socket).

use crate::sync::{lock, try_lock};
use sprig_wire::Message;
use sprig_wire::session::Channel;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Queued messages beyond this are dropped (a runaway thread count).
const LIMIT: usize = 1 << 16;

/// Sending handle of the current session (any thread may send).
static WRITER: Mutex<Option<Channel>> = Mutex::new(None);
/// Messages queued by probes (never blocked on the socket).
static QUEUE: Mutex<Vec<Message>> = Mutex::new(Vec::new());
/// Held while a flush sends what it took from the queue: a thread that
/// must know every queued message is out (VMDeath, before the process
/// ends) waits for it.
static FLUSHING: Mutex<()> = Mutex::new(());

/// Sends `msg` to the CLI now (bounded by the write timeout). Returns false
/// when there is no session or the send failed.
pub fn send(msg: Message) -> bool {
    let guard = lock(&WRITER);
    match guard.as_ref() {
        Some(ch) => ch.send(&msg).is_ok(),
        None => false,
    }
}

/// Queues `msg` for the control thread (for probes: never blocks on I/O).
pub fn post(msg: Message) {
    let mut q = lock(&QUEUE);
    if q.len() < LIMIT {
        q.push(msg);
    }
}

/// Sends every queued message (control thread).
pub fn flush() {
    let _flushing = lock(&FLUSHING);
    send_queued();
}

/// Sends every queued message, after waiting up to `bound` for a flush in
/// progress on another thread (whose messages, taken from the queue, would
/// otherwise still be unsent when this returns). For VMDeath: the process
/// may end as soon as its callback returns, and the messages the control
/// thread was still sending (a burst of thread announcements) were lost
/// with it. False when the other flush outlasted `bound` (then what is
/// queued is sent all the same).
pub fn flush_within(bound: Duration) -> bool {
    let deadline = Instant::now() + bound;
    loop {
        if let Some(_flushing) = try_lock(&FLUSHING) {
            send_queued();
            return true;
        }
        if Instant::now() >= deadline {
            send_queued();
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// One write for the whole queue (a burst of thread announcements is
/// thousands of messages).
fn send_queued() {
    let msgs = std::mem::take(&mut *lock(&QUEUE));
    if msgs.is_empty() {
        return;
    }
    if let Some(ch) = lock(&WRITER).as_ref() {
        let _ = ch.send_all(&msgs);
    }
}

/// A session starts sending on `writer`, with an empty queue.
pub fn begin_session(writer: Channel) {
    *lock(&WRITER) = Some(writer);
    lock(&QUEUE).clear();
}

/// Nothing more goes to the CLI (the session failed to start, or its
/// control thread panicked); the queue is kept for [`end_session`].
pub fn close() {
    *lock(&WRITER) = None;
}

/// The session is over: the writer dropped, the queue emptied.
pub fn end_session() {
    close();
    lock(&QUEUE).clear();
}
