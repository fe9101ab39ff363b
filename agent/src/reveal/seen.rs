//! The reflective targets this session has handed to the revealer
//! already, by `jmethodID`: a `Method.invoke` or `Constructor.newInstance`
//! of one of them inside a root context returns at once, without naming
//! the method through JVMTI, reading the clock or taking the revelation
//! lock. A fixed table of atomic words, open addressing, no lock: a table
//! too full only sends a target down the full path again, which is
//! correct, only slower.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

const SLOTS: usize = 1 << 12;
/// Slots looked at from a target's home slot before giving up.
const PROBES: usize = 8;

static TABLE: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];

/// Reflective calls answered from the table, and those that took the full
/// path, since the last [`take_counts`] (for the debug lines).
static HITS: AtomicU64 = AtomicU64::new(0);
static LOOKUPS: AtomicU64 = AtomicU64::new(0);

fn home(id: usize) -> usize {
    // jmethodIDs are pointers: drop the alignment bits, then mix.
    ((id as u64 >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - 12)) as usize
}

/// Whether `id` (a `jmethodID`'s address, never 0) was handed over this
/// session; counts the call either way.
pub(super) fn contains(id: usize) -> bool {
    let h = home(id);
    let hit = (0..PROBES).any(|i| TABLE[(h + i) % SLOTS].load(Ordering::Acquire) == id);
    if hit {
        HITS.fetch_add(1, Ordering::Relaxed);
    } else {
        LOOKUPS.fetch_add(1, Ordering::Relaxed);
    }
    hit
}

/// Remembers `id` as handed over.
pub(super) fn insert(id: usize) {
    if id == 0 {
        return;
    }
    let h = home(id);
    for i in 0..PROBES {
        let slot = &TABLE[(h + i) % SLOTS];
        match slot.compare_exchange(0, id, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return,
            Err(current) if current == id => return,
            Err(_) => {}
        }
    }
}

/// Forgets every target (a session begins or ends).
pub(super) fn clear() {
    for slot in &TABLE {
        slot.store(0, Ordering::Release);
    }
}

/// (answered from the table, full path) since the last call.
pub(super) fn take_counts() -> (u64, u64) {
    (
        HITS.swap(0, Ordering::Relaxed),
        LOOKUPS.swap(0, Ordering::Relaxed),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_is_found_once_inserted_and_forgotten_when_cleared() {
        // One test touches the shared table, so they cannot race.
        clear();
        let ids: Vec<usize> = (1..=2000usize).map(|i| 0x7f00_0000_0000 + i * 8).collect();
        for &id in &ids {
            assert!(!contains(id));
        }
        for &id in &ids {
            insert(id);
        }
        let found = ids.iter().filter(|&&id| contains(id)).count();
        // Half full: open addressing over 8 slots keeps nearly all.
        assert!(found >= 1990, "{found} of 2000");
        assert!(!contains(0x7f00_0000_0000 + 5000 * 8));
        insert(ids[0]);
        assert!(contains(ids[0]));
        let (hits, lookups) = take_counts();
        assert!(hits >= 1990 && lookups >= 2000, "{hits} {lookups}");
        clear();
        assert!(!contains(ids[0]));
    }
}
