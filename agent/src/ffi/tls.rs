//! A faster way to the probing thread's state than `thread_local!`.
//!
//! In a shared library, Rust reaches a `thread_local!` through
//! `__tls_get_addr` (the general-dynamic model): a call into the dynamic
//! linker on every access, about a tenth of what the JNI probe natives
//! spend in this library (`perf`, 2026-11-25, 3651a5f). Here one word per thread
//! in the initial-exec model holds the address of the thread's value of
//! one `thread_local!` (the probe runtime's state); reading it is one load
//! relative to `%fs`, with no call.
//!
//! An initial-exec variable puts this library's whole thread-local block
//! (256 bytes) in the static TLS area the C library reserves for libraries
//! loaded later (512 bytes by default in glibc 2.32 and later); the linker
//! marks the library `STATIC_TLS`, and loading it would fail only if other
//! such libraries had used that room up first.
//!
//! The word is set on the thread's first probe (from `try_with`) and
//! cleared when the thread's value is dropped ([`forget_state`]), before
//! the storage goes away; after that every probe takes `try_with` again,
//! which then fails, as before. The one word serves one `thread_local!`:
//! the first key that fills it owns it, and any other key is always
//! reached through `try_with`.

use std::any::TypeId;
use std::sync::OnceLock;
use std::thread::LocalKey;

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

/// The type of the values the slot holds, set by the first `with_state`.
/// A type, not the key's address: `thread_local!` declares its key as a
/// constant, so `&KEY` may be a different address at every use, and a
/// slot owned by one of them would send every other use to `try_with`
/// (a call into the dynamic linker per probe: 11 ns a probe on this
/// machine kind). Only one `thread_local!` of a given type may use the
/// slot (the probe runtime's state).
static OWNER: OnceLock<TypeId> = OnceLock::new();

/// Runs `f` with the calling thread's value of `key`; `None` once the value
/// is gone (the thread is ending), like `key.try_with`.
#[inline(always)]
pub fn with_state<T: 'static, R>(key: &'static LocalKey<T>, f: impl FnOnce(&T) -> R) -> Option<R> {
    let p = slot::get();
    if p != 0 && OWNER.get() == Some(&TypeId::of::<T>()) {
        // SAFETY: the slot is non-zero only after this thread stored the
        // address of its value of a key of type `T` below (the owner type
        // never changes once set, and it is `T`); `forget_state` clears it
        // when that value is dropped, before its storage is released, so
        // it is live here. It is used on this thread only, as `try_with`
        // would.
        return Some(f(unsafe { &*(p as *const T) }));
    }
    #[cfg(test)]
    tests::SLOW_PATH.with(|n| n.set(n.get() + 1));
    key.try_with(|s| {
        if *OWNER.get_or_init(TypeId::of::<T>) == TypeId::of::<T>() {
            slot::set(s as *const T as usize);
        }
        f(s)
    })
    .ok()
}

/// The thread's value is being dropped: no probe may reach it through the
/// slot any more.
pub fn forget_state() {
    slot::set(0);
}

/// Whether the slot holds values of type `T` (the first caller names it).
pub(super) fn owned_by<T: 'static>() -> bool {
    *OWNER.get_or_init(TypeId::of::<T>) == TypeId::of::<T>()
}

/// Points this thread's slot at `p`, a `T` of [`owned_by`]'s type that
/// stays alive until the slot is pointed elsewhere (a virtual thread's
/// state while it is mounted, see `vthreads`), or empties it (`0`): the
/// next probe then finds the thread's own value through `try_with`.
pub(super) fn point_at(p: usize) {
    slot::set(p);
}

/// What the slot holds now (0: nothing).
pub(super) fn pointed() -> usize {
    slot::get()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A stand-in for the probe runtime's state.
    struct ThreadState {
        _word: Cell<u64>,
    }

    impl Drop for ThreadState {
        fn drop(&mut self) {
            forget_state();
        }
    }

    thread_local! {
        static STATE: ThreadState = const { ThreadState { _word: Cell::new(0) } };
        static OTHER: u64 = const { 7 };
        /// Calls of `with_state` on this thread that went through `try_with`.
        pub(super) static SLOW_PATH: Cell<u32> = const { Cell::new(0) };
    }

    #[inline(never)]
    fn from_here() -> usize {
        with_state(&STATE, |s| s as *const ThreadState as usize).unwrap_or(0)
    }

    #[inline(never)]
    fn from_there() -> usize {
        with_state(&STATE, |s| std::ptr::from_ref(s) as usize).unwrap_or(0)
    }

    #[test]
    fn every_use_of_the_key_takes_the_slot_once_it_is_filled() {
        std::thread::spawn(|| {
            let a = from_here();
            let after_first = SLOW_PATH.with(Cell::get);
            for _ in 0..100 {
                assert_eq!(from_here(), a);
                assert_eq!(from_there(), a);
            }
            assert_eq!(
                SLOW_PATH.with(Cell::get),
                after_first,
                "a use of the same key went through try_with"
            );
        })
        .join()
        .unwrap();
    }

    fn address() -> usize {
        with_state(&STATE, |s| s as *const ThreadState as usize).unwrap_or(0)
    }

    #[test]
    fn a_second_key_never_reads_the_slot_of_the_first() {
        std::thread::spawn(|| {
            assert_ne!(address(), 0);
            assert_eq!(with_state(&OTHER, |v| *v), Some(7));
            assert_eq!(with_state(&OTHER, |v| *v), Some(7));
        })
        .join()
        .unwrap();
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
            if slot::get() == 0 && with_state(&STATE, |_| ()).is_none() {
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
