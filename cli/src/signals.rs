//! SIGINT/SIGTERM and SIGUSR1 → counters the session loop polls. The
//! binary's FFI (the library's is `sys.rs`).

use std::sync::atomic::{AtomicU32, Ordering};

static STOPS: AtomicU32 = AtomicU32::new(0);
static RESETS: AtomicU32 = AtomicU32::new(0);

extern "C" fn on_stop(_sig: libc::c_int) {
    // Only an atomic add: async-signal-safe.
    STOPS.fetch_add(1, Ordering::SeqCst);
}

extern "C" fn on_reset(_sig: libc::c_int) {
    // Only an atomic add: async-signal-safe.
    RESETS.fetch_add(1, Ordering::SeqCst);
}

/// Installs handlers that count deliveries: SIGINT and SIGTERM (stop),
/// SIGUSR1 (reset the results).
pub fn install() {
    let handlers: [(libc::c_int, extern "C" fn(libc::c_int)); 3] = [
        (libc::SIGINT, on_stop),
        (libc::SIGTERM, on_stop),
        (libc::SIGUSR1, on_reset),
    ];
    for (sig, handler) in handlers {
        // SAFETY: sigaction with a zeroed struct, an empty mask and a handler
        // that only touches an atomic; the struct outlives the call.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = handler as *const () as usize;
            act.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(sig, &act, std::ptr::null_mut());
        }
    }
}

/// How many SIGINT/SIGTERM arrived since start.
pub fn count() -> u32 {
    STOPS.load(Ordering::SeqCst)
}

/// How many SIGUSR1 arrived since start.
pub fn resets() -> u32 {
    RESETS.load(Ordering::SeqCst)
}
