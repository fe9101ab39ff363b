//! Thread registry: a sprig thread index per Java thread per session, and
//! the `Thread` message that names it for the CLI.

use crate::env;
use crate::ffi::Jni;
use sprig_wire::Message;
use std::sync::atomic::{AtomicU32, Ordering};

static NEXT_INDEX: AtomicU32 = AtomicU32::new(0);

/// A session starts its numbering at 0.
pub fn begin_session() {
    NEXT_INDEX.store(0, Ordering::Relaxed);
}

/// Threads registered in this session.
pub fn count() -> u64 {
    u64::from(NEXT_INDEX.load(Ordering::Relaxed))
}

/// Assigns the calling thread its index.
pub fn next_index() -> u32 {
    NEXT_INDEX.fetch_add(1, Ordering::Relaxed)
}

/// Queues the `Thread` message for `index`: the Java thread's name and id
/// (JVMTI GetThreadInfo, `Thread.getId()`), then `VirtualThread` for a
/// virtual thread (whose kernel thread id is its carrier's of the moment:
/// none is sent), and returns the id (0 when it could not be read). Never
/// blocks on the socket: the control thread forwards the queue.
pub fn announce(jni: Jni<'_>, index: u32, is_virtual: bool) -> u64 {
    let (name, java_id) = jni.with_local_frame(8, |jni| {
        let Some(agent) = env::get() else {
            return (String::new(), 0);
        };
        match agent.jvmti.current_thread(&jni) {
            Ok((name, thread)) => {
                let id = jni.thread_id(thread).unwrap_or(0);
                (name, id)
            }
            Err(_) => (String::new(), 0),
        }
    });
    crate::outbox::post(Message::Thread {
        index,
        java_id,
        name,
        tid: if is_virtual { 0 } else { crate::ffi::gettid() },
    });
    if is_virtual {
        crate::outbox::post(Message::VirtualThread { index });
    }
    java_id
}
