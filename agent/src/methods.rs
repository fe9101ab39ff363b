//! Method ids of the session and first-call tracking.
//!
//! Ids are assigned per (class, name, descriptor) and announced to the CLI
//! with a `Method` message before any probe carrying them can run. A global
//! bitmap records which ids have been entered at least once; the first call
//! of a method is where Scheme B revelation hooks in (`probe`, `reveal`).
//!
//! A second bitmap says which ids are *active*. A class sprig redefines
//! gets probes in all its methods, but only the revealed ones are active;
//! the others' probes stay dormant (they return before recording anything)
//! until revelation reaches them, which then costs no redefinition. Ids
//! are announced to the CLI when they become active.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Ids at or above this are still profiled but not tracked for first calls.
pub const MAX_TRACKED: u32 = 1 << 20;
const WORDS: usize = (MAX_TRACKED / 64) as usize;

static CALLED: [AtomicU64; WORDS] = [const { AtomicU64::new(0) }; WORDS];
static CALLED_COUNT: AtomicU64 = AtomicU64::new(0);
static ACTIVE: [AtomicU64; WORDS] = [const { AtomicU64::new(0) }; WORDS];

type Key = (String, String, String);

struct Table {
    ids: HashMap<Key, u32>,
    next: u32,
    /// Ids announced to the CLI (a `Method` message was sent).
    announced: HashSet<u32>,
}

static TABLE: Mutex<Option<Table>> = Mutex::new(None);

/// Forgets every id and first call (a new session).
pub fn reset() {
    let mut t = TABLE.lock().unwrap_or_else(|p| p.into_inner());
    *t = Some(Table {
        ids: HashMap::new(),
        next: 1,
        announced: HashSet::new(),
    });
    for w in CALLED.iter().chain(&ACTIVE) {
        w.store(0, Ordering::Relaxed);
    }
    CALLED_COUNT.store(0, Ordering::Relaxed);
}

/// The id of a method (`class` dotted), and whether it was just assigned
/// (the caller then announces it).
pub fn id_for(class: &str, name: &str, descriptor: &str) -> (u32, bool) {
    let mut guard = TABLE.lock().unwrap_or_else(|p| p.into_inner());
    let t = guard.get_or_insert_with(|| Table {
        ids: HashMap::new(),
        next: 1,
        announced: HashSet::new(),
    });
    let key = (class.to_string(), name.to_string(), descriptor.to_string());
    if let Some(&id) = t.ids.get(&key) {
        return (id, false);
    }
    let id = t.next;
    t.next = t.next.wrapping_add(1);
    t.ids.insert(key, id);
    (id, true)
}

/// Marks `id` announced; true the first time (the caller sends `Method`).
pub fn mark_announced(id: u32) -> bool {
    let mut guard = TABLE.lock().unwrap_or_else(|p| p.into_inner());
    match guard.as_mut() {
        Some(t) => t.announced.insert(id),
        None => true,
    }
}

/// Makes the probes of `id` record from now on.
pub fn activate(id: u32) {
    if id < MAX_TRACKED {
        ACTIVE[(id / 64) as usize].fetch_or(1u64 << (id % 64), Ordering::Release);
    }
}

/// Whether the probes of `id` record. Ids past the bitmap always do (they
/// are never handed out dormant).
#[inline]
pub fn is_active(id: u32) -> bool {
    id >= MAX_TRACKED
        || ACTIVE[(id / 64) as usize].load(Ordering::Acquire) & (1u64 << (id % 64)) != 0
}

/// Records that `id` was entered; cheap when it was entered before.
/// Returns true for the first entry of `id` in this session (exactly one
/// thread sees true), where Scheme B reveals the callees of `id`.
#[inline]
pub fn mark_called(id: u32) -> bool {
    if id >= MAX_TRACKED {
        return false;
    }
    let word = &CALLED[(id / 64) as usize];
    let bit = 1u64 << (id % 64);
    if word.load(Ordering::Relaxed) & bit != 0 {
        return false;
    }
    if word.fetch_or(bit, Ordering::AcqRel) & bit == 0 {
        first_call();
        return true;
    }
    false
}

/// Whether `id` needs no first-call handling any more: entered before in
/// this session, or not tracked. Never changes the bitmap.
#[inline]
pub fn was_called(id: u32) -> bool {
    if id >= MAX_TRACKED {
        return true;
    }
    CALLED[(id / 64) as usize].load(Ordering::Relaxed) & (1u64 << (id % 64)) != 0
}

#[cold]
fn first_call() {
    CALLED_COUNT.fetch_add(1, Ordering::Relaxed);
}

/// Methods entered at least once in this session.
pub fn called_count() -> u64 {
    CALLED_COUNT.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_first_calls() {
        reset();
        let (a, new_a) = id_for("p.A", "run", "()V");
        let (b, new_b) = id_for("p.A", "run", "(I)V");
        let (a2, new_a2) = id_for("p.A", "run", "()V");
        assert!(new_a && new_b && !new_a2);
        assert_eq!(a, a2);
        assert_ne!(a, b);
        assert_eq!(called_count(), 0);
        mark_called(a);
        mark_called(a);
        mark_called(b);
        mark_called(MAX_TRACKED + 5);
        assert_eq!(called_count(), 2);
        reset();
        assert_eq!(called_count(), 0);
        mark_called(a);
        assert_eq!(called_count(), 1);
    }

    #[test]
    fn ids_start_dormant_and_are_announced_once() {
        reset();
        let (a, _) = id_for("p.B", "run", "()V");
        assert!(!is_active(a));
        assert!(is_active(MAX_TRACKED + 1));
        activate(a);
        assert!(is_active(a));
        assert!(mark_announced(a));
        assert!(!mark_announced(a));
        reset();
        assert!(!is_active(a));
        assert!(mark_announced(a));
    }
}
