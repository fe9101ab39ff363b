//! SIGINT/SIGTERM → a flag the session loop polls. The CLI's only FFI.

use std::sync::atomic::{AtomicU32, Ordering};

static SIGNALS: AtomicU32 = AtomicU32::new(0);

extern "C" fn on_signal(_sig: libc::c_int) {
    // Only an atomic add: async-signal-safe.
    SIGNALS.fetch_add(1, Ordering::SeqCst);
}

/// Installs handlers for SIGINT and SIGTERM that count deliveries.
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: sigaction with a zeroed struct, an empty mask and a handler
        // that only touches an atomic; the struct outlives the call.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_signal as *const () as usize;
            act.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(sig, &act, std::ptr::null_mut());
        }
    }
}

/// How many SIGINT/SIGTERM arrived since start.
pub fn count() -> u32 {
    SIGNALS.load(Ordering::SeqCst)
}
