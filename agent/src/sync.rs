//! One way to take the agent's locks. A lock whose holder panicked (the
//! panic was caught at the FFI boundary) is taken all the same: what it
//! guards is plain bookkeeping that every holder leaves consistent between
//! statements, and the agent must go on serving the JVM.

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockWriteGuard, TryLockError};

/// Locks `m`, recovering from poisoning.
#[inline]
pub fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Locks `m` if it is free (a poisoned lock counts as free); `None` when
/// another thread holds it.
#[inline]
pub fn try_lock<T: ?Sized>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match m.try_lock() {
        Ok(g) => Some(g),
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

/// Write-locks `l`, recovering from poisoning.
#[inline]
pub fn write<T: ?Sized>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(PoisonError::into_inner)
}
