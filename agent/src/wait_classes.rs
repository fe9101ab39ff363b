//! The JDK's park and sleep methods with `--locks`' wait probes in
//! (`sprig.rt.Waits`): the class file load hook's answer for
//! `LockSupport` and `Thread` while the lock source wants them
//! ([`class_file`], [`PROBED`]), and the profiled classes' calls of a
//! native `Thread.sleep(long)` sent to `Waits.sleep` ([`redirect_sleep`],
//! [`REDIRECT_SLEEP`]). The lock source (`sources::locks`) sets both and
//! binds `Waits`' natives; `instrument` asks here, below it.

use crate::outbox;
use sprig_rewriter::vocab::access::{ACC_STATIC, NO_CODE};
use sprig_rewriter::{ProbeSet, Target};
use sprig_wire::{Message, WaitKind};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

/// The JDK's park and sleep methods carry the wait probes (set by the
/// source's start before it retransforms them, cleared by its stop
/// before it puts them back).
pub static PROBED: AtomicBool = AtomicBool::new(false);

/// The classes the probes rewrite call `Waits.sleep` for
/// `Thread.sleep(long)` (native on this JDK: it cannot carry the probes).
/// Set before the probes' source starts ([`prepare`]), cleared by the
/// lock source's stop.
pub static REDIRECT_SLEEP: AtomicBool = AtomicBool::new(false);

/// Internal name of the class of the wait probes.
pub const WAITS_CLASS: &str = "sprig/rt/Waits";

/// The classes whose methods get the wait probes.
pub const LOCK_SUPPORT: &str = "java/util/concurrent/locks/LockSupport";
pub const THREAD: &str = "java/lang/Thread";

/// Whether the classes the probes rewrite now call `Waits.sleep` for
/// `Thread.sleep(long)`.
pub fn redirects_sleep() -> bool {
    REDIRECT_SLEEP.load(Ordering::Acquire)
}

/// `Thread.sleep(long)`'s calls in a class the probes rewrote go to
/// `Waits.sleep` while [`redirects_sleep`]; `bytes` as they were when
/// the class calls no such method or cannot be changed.
pub fn redirect_sleep(bytes: Vec<u8>) -> Vec<u8> {
    if !redirects_sleep() {
        return bytes;
    }
    match sprig_rewriter::redirect_static(&bytes, THREAD, "sleep", "(J)V", WAITS_CLASS) {
        Ok(Some(b)) => b,
        _ => bytes,
    }
}

/// The wait kind of each probe call (the probes' id).
pub const PARKED: u32 = WaitKind::Parked as u32;
pub const SLEEPING: u32 = WaitKind::Sleeping as u32;

/// The two probe pairs of `Waits`: the park methods with a blocker get
/// it (`parkOn`), the others their kind (`begin`).
fn wait_probe_sets() -> &'static [ProbeSet] {
    static SETS: OnceLock<[ProbeSet; 2]> = OnceLock::new();
    SETS.get_or_init(|| {
        let set = |entry: &str, entry_receiver| ProbeSet {
            class: WAITS_CLASS.to_string(),
            entry: entry.to_string(),
            exit: "end".to_string(),
            entry_receiver,
        };
        [set("parkOn", true), set("begin", false)]
    })
}

/// The class file load hook's answer for `LockSupport` and `Thread`
/// while the wait probes are wanted: `Some` with the new bytes (`None`
/// inside when nothing could be instrumented), `None` for any other
/// class or when they are not wanted.
pub fn class_file(name: &str, bytes: &[u8]) -> Option<Option<Vec<u8>>> {
    if (name != LOCK_SUPPORT && name != THREAD) || !PROBED.load(Ordering::Acquire) {
        return None;
    }
    let targets = wait_targets(name, bytes);
    if targets.is_empty() {
        return Some(None);
    }
    let out = match sprig_rewriter::instrument(bytes, &targets, wait_probe_sets()) {
        Ok(out) => out,
        Err(e) => {
            outbox::send(Message::Warning(format!(
                "--locks: {} could not be instrumented ({e}): its waits are not recorded",
                name.replace('/', ".")
            )));
            return Some(None);
        }
    };
    for m in out.methods.iter().filter(|m| m.result.is_err()) {
        outbox::send(Message::Warning(format!(
            "--locks: {}.{}{} could not be instrumented ({:?}): its waits are not recorded",
            name.replace('/', "."),
            m.name,
            m.descriptor,
            m.result
        )));
    }
    Some(Some(out.bytes))
}

/// The methods of `LockSupport` or `Thread` (as `bytes` declare them)
/// that get the wait probes.
fn wait_targets(name: &str, bytes: &[u8]) -> Vec<Target> {
    let Ok(info) = sprig_rewriter::class_info(bytes) else {
        return Vec::new();
    };
    let has_code = |n: &str, d: &str| {
        info.methods.iter().any(|m| {
            m.name == n
                && m.descriptor == d
                && m.access & NO_CODE == 0
                && m.access & ACC_STATIC != 0
        })
    };
    let target = |n: &str, d: &str, id: u32, probes: usize| Target {
        name: n.to_string(),
        descriptor: d.to_string(),
        id,
        probes,
    };
    let mut out = Vec::new();
    if name == LOCK_SUPPORT {
        for (n, d) in [
            ("park", "(Ljava/lang/Object;)V"),
            ("parkNanos", "(Ljava/lang/Object;J)V"),
            ("parkUntil", "(Ljava/lang/Object;J)V"),
        ] {
            if has_code(n, d) {
                out.push(target(n, d, PARKED, 0));
            }
        }
        for (n, d) in [
            ("park", "()V"),
            ("parkNanos", "(J)V"),
            ("parkUntil", "(J)V"),
        ] {
            if has_code(n, d) {
                out.push(target(n, d, PARKED, 1));
            }
        }
    } else if has_code("sleepNanos", "(J)V") {
        // JDK 21+: every sleep goes through it.
        out.push(target("sleepNanos", "(J)V", SLEEPING, 1));
    } else if has_code("sleep", "(J)V") {
        out.push(target("sleep", "(J)V", SLEEPING, 1));
    } else if has_code("sleep", "(JI)V") {
        // `sleep(long)` is native: `sleep(long, int)` calls it.
        out.push(target("sleep", "(JI)V", SLEEPING, 1));
    }
    out
}
