//! Time limits: work that may wait in the kernel for as long as a
//! process's owner wants (reading /proc/PID/maps waits for that process's
//! memory map lock) runs on a thread of its own, and is given up on when it
//! overruns.

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// Runs `work` on a thread of its own and waits for it at most `limit`
/// (`None` then). A thread that overruns is left behind: it waits in the
/// kernel, and ends with the process. Where no thread can be started, the
/// work runs here, without the limit.
pub(super) fn time_limited<T: Send + 'static>(
    limit: Duration,
    work: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    let work = std::sync::Arc::new(std::sync::Mutex::new(Some(work)));
    let theirs = std::sync::Arc::clone(&work);
    let spawned = thread::Builder::new()
        .name("sprig inspect".to_owned())
        .stack_size(256 << 10)
        .spawn(move || {
            let work = theirs.lock().ok().and_then(|mut w| w.take());
            if let Some(work) = work {
                let _ = tx.send(work());
            }
        });
    if spawned.is_err() {
        let work = work.lock().ok().and_then(|mut w| w.take())?;
        return Some(work());
    }
    rx.recv_timeout(limit).ok()
}
