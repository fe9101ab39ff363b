//! A faster way to the probing thread's state than `thread_local!`.
//!
//! In a shared library, Rust reaches a `thread_local!` through
//! `__tls_get_addr` (the general-dynamic model): a call into the dynamic
//! linker on every access, about a tenth of what the JNI probe natives
//! spend in this library (`perf`, tenth session). Here one word per thread
//! in the initial-exec model holds the address of the thread's
//! `probe::STATE`; reading it is one load relative to `%fs`, with no call.
//!
//! An initial-exec variable puts this library's whole thread-local block
//! (256 bytes) in the static TLS area the C library reserves for libraries
//! loaded later (512 bytes by default in glibc 2.32 and later); the linker
//! marks the library `STATIC_TLS`, and loading it would fail only if other
//! such libraries had used that room up first.
//!
//! The word is set on the thread's first probe (from `STATE.try_with`) and
//! cleared when the thread's `ThreadState` is dropped, before the storage
//! goes away; after that every probe takes `try_with` again, which then
//! fails, as before.

use crate::probe::{STATE, ThreadState};

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod slot {
    use std::arch::{asm, global_asm};

    // One 8-byte, zero-initialised thread-local word, hidden (not
    // exported) so that objects of this library can name it across codegen
    // units.
    global_asm!(
        ".section .tbss.sprig_probe_state,\"awT\",@nobits",
        ".p2align 3",
        ".globl sprig_probe_state",
        ".hidden sprig_probe_state",
        ".type sprig_probe_state, @object",
        ".size sprig_probe_state, 8",
        "sprig_probe_state:",
        ".zero 8",
        ".text",
    );

    #[inline(always)]
    pub fn get() -> usize {
        let v: usize;
        // SAFETY: reads this thread's own `sprig_probe_state` word (initial
        // exec: its offset from the thread pointer is in the GOT); touches
        // no other memory and no flags.
        unsafe {
            asm!(
                "mov {v}, qword ptr [rip + sprig_probe_state@GOTTPOFF]",
                "mov {v}, qword ptr fs:[{v}]",
                v = out(reg) v,
                options(nostack, readonly, preserves_flags, pure),
            );
        }
        v
    }

    #[inline(always)]
    pub fn set(value: usize) {
        // SAFETY: writes this thread's own `sprig_probe_state` word and
        // nothing else.
        unsafe {
            asm!(
                "mov {t}, qword ptr [rip + sprig_probe_state@GOTTPOFF]",
                "mov qword ptr fs:[{t}], {value}",
                t = out(reg) _,
                value = in(reg) value,
                options(nostack, preserves_flags),
            );
        }
    }
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
mod slot {
    #[inline(always)]
    pub fn get() -> usize {
        0
    }
    #[inline(always)]
    pub fn set(_value: usize) {}
}

/// Runs `f` with the calling thread's probe state; `None` once the state
/// is gone (the thread is ending), like `STATE.try_with`.
#[inline(always)]
pub fn with_state<R>(f: impl FnOnce(&ThreadState) -> R) -> Option<R> {
    let p = slot::get();
    if p != 0 {
        // SAFETY: `p` is the address of this thread's `STATE`, stored below
        // by this thread; `forget_state` clears it when that value is
        // dropped, before its storage is released, so it is live here. It
        // is used on this thread only, as `try_with` would.
        return Some(f(unsafe { &*(p as *const ThreadState) }));
    }
    STATE
        .try_with(|s| {
            slot::set(s as *const ThreadState as usize);
            f(s)
        })
        .ok()
}

/// The thread's state is being dropped: no probe may reach it through the
/// slot any more.
pub fn forget_state() {
    slot::set(0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn address() -> usize {
        with_state(|s| s as *const ThreadState as usize).unwrap_or(0)
    }

    #[test]
    fn each_thread_reaches_its_own_state_through_the_slot() {
        let on_thread = || {
            assert_eq!(slot::get(), 0, "a new thread starts with an empty slot");
            let first = address();
            let expected = STATE.with(|s| s as *const ThreadState as usize);
            assert_eq!(first, expected);
            if cfg!(all(target_arch = "x86_64", target_os = "linux")) {
                assert_eq!(slot::get(), expected, "the first probe fills the slot");
            }
            assert_eq!(address(), expected);
            expected
        };
        let a = std::thread::spawn(on_thread).join().unwrap();
        let b = std::thread::spawn(on_thread).join().unwrap();
        let here = on_thread_main();
        assert_ne!(a, 0);
        assert_ne!(b, 0);
        assert_ne!(here, 0);
        // Two live threads never share a state (a and b may reuse one
        // another's memory: a ended before b started).
        let c = std::thread::spawn(address).join().unwrap();
        assert_ne!(c, here);
    }

    fn on_thread_main() -> usize {
        address()
    }

    /// What a thread-local dropped after `STATE` sees: the slot emptied
    /// and no state (1 + 2 when both hold).
    static SEEN_AFTER_DROP: AtomicUsize = AtomicUsize::new(0);

    struct Later;
    impl Drop for Later {
        fn drop(&mut self) {
            let mut seen = 1;
            if slot::get() == 0 && with_state(|_| ()).is_none() {
                seen += 2;
            }
            SEEN_AFTER_DROP.store(seen, Ordering::SeqCst);
        }
    }

    thread_local! {
        static LATER: Later = const { Later };
    }

    #[test]
    fn a_thread_ending_empties_the_slot_before_its_state_goes() {
        std::thread::spawn(|| {
            // Registered first, so dropped after `STATE` (thread-local
            // destructors run in reverse order of registration).
            LATER.with(|_| ());
            assert_ne!(address(), 0);
        })
        .join()
        .unwrap();
        assert_eq!(SEEN_AFTER_DROP.load(Ordering::SeqCst), 3);
    }
}
