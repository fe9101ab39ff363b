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

use crate::ffi::slots;
use crate::outbox;
use crate::probe_class;
use crate::sync::lock;
use sprig_wire::Message;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Ids at or above this are still profiled but not tracked for first calls.
pub const MAX_TRACKED: u32 = 1 << 20;
/// Ids from here to `MAX_TRACKED` are never handed out to methods: the
/// probe calibration's own methods use them (`calibrate`).
pub const RESERVED_FIRST: u32 = MAX_TRACKED - 2;
/// Words of the bitmaps (and of the `LIVE` array of a probe class an older
/// sprig defined).
pub const WORDS: usize = (MAX_TRACKED / 64) as usize;
const _: () = assert!(WORDS == probe_class::LIVE_WORDS);

static CALLED: [AtomicU64; WORDS] = [const { AtomicU64::new(0) }; WORDS];
/// First calls claimed: the claiming thread reveals the callees, then sets
/// the `CALLED` bit; others entering meanwhile wait for it (bounded).
static CLAIMED: [AtomicU64; WORDS] = [const { AtomicU64::new(0) }; WORDS];
static CALLED_COUNT: AtomicU64 = AtomicU64::new(0);
static ACTIVE: [AtomicU64; WORDS] = [const { AtomicU64::new(0) }; WORDS];
/// Dormant ids entered inside a root context that could not be revealed
/// there: not tried again in this session.
static DORMANT_FAILED: [AtomicU64; WORDS] = [const { AtomicU64::new(0) }; WORDS];

type Key = (String, String, String);

struct Table {
    ids: HashMap<Key, u32>,
    next: u32,
    /// Ids announced to the CLI (a `Method` message was sent).
    announced: HashSet<u32>,
}

impl Table {
    fn new() -> Table {
        Table {
            ids: HashMap::new(),
            next: 1,
            announced: HashSet::new(),
        }
    }
}

static TABLE: Mutex<Option<Table>> = Mutex::new(None);

/// The bitmap word and bit of `id`; `None` for ids past the bitmaps.
#[inline]
fn slot(id: u32) -> Option<(usize, u64)> {
    (id < MAX_TRACKED).then(|| ((id / 64) as usize, 1u64 << (id % 64)))
}

/// Forgets every id and first call (a new session).
pub fn begin_session() {
    let mut t = lock(&TABLE);
    *t = Some(Table::new());
    for w in CALLED
        .iter()
        .chain(&ACTIVE)
        .chain(&CLAIMED)
        .chain(&DORMANT_FAILED)
    {
        w.store(0, Ordering::Relaxed);
    }
    CALLED_COUNT.store(0, Ordering::Relaxed);
    slots::clear_ids();
}

/// The id of a method (`class` dotted), and whether it was just assigned
/// (the caller then announces it).
pub fn id_for(class: &str, name: &str, descriptor: &str) -> (u32, bool) {
    let mut guard = lock(&TABLE);
    let t = guard.get_or_insert_with(Table::new);
    let key = (class.to_string(), name.to_string(), descriptor.to_string());
    if let Some(&id) = t.ids.get(&key) {
        return (id, false);
    }
    if t.next == RESERVED_FIRST {
        // Past the reserved ids: untracked ids (always recording, no
        // first-call revelation) for what a session assigns beyond.
        t.next = MAX_TRACKED;
    }
    let id = t.next;
    t.next = t.next.wrapping_add(1);
    t.ids.insert(key, id);
    (id, true)
}

/// The id of a method (`class` dotted) if the session assigned it one,
/// without assigning one.
pub fn known_id(class: &str, name: &str, descriptor: &str) -> Option<u32> {
    let guard = lock(&TABLE);
    let key = (class.to_string(), name.to_string(), descriptor.to_string());
    guard.as_ref()?.ids.get(&key).copied()
}

/// Marks `id` announced; true the first time (the caller sends `Method`).
pub fn mark_announced(id: u32) -> bool {
    let mut guard = lock(&TABLE);
    match guard.as_mut() {
        Some(t) => t.announced.insert(id),
        None => true,
    }
}

/// Makes the probes of `id` record from now on; the Java copy of the bitmap
/// in a probe class an older sprig defined follows (its probes skip the
/// agent for dormant ids).
pub fn activate(id: u32) {
    if let Some((word, bit)) = slot(id) {
        ACTIVE[word].fetch_or(bit, Ordering::SeqCst);
        probe_class::publish_live_word(word, || ACTIVE[word].load(Ordering::Acquire));
        if CALLED[word].load(Ordering::SeqCst) & bit != 0 {
            slots::allow_id(id);
        }
    }
}

/// Switches the reserved calibration ids on and marks their first calls
/// done, so their probes run exactly the checks of a revealed method's.
pub fn reserve_calibration(ids: &[u32]) {
    for &id in ids {
        debug_assert!((RESERVED_FIRST..MAX_TRACKED).contains(&id));
        activate(id);
        first_call_done(id);
    }
}

/// Whether the probes of `id` record. Ids past the bitmap always do (they
/// are never handed out dormant).
#[inline]
pub fn is_active(id: u32) -> bool {
    slot(id).is_none_or(|(w, bit)| ACTIVE[w].load(Ordering::Acquire) & bit != 0)
}

/// Whether an entry of dormant `id` inside a root context was found not
/// to be revealable in this session ([`refuse_dormant_entry`]).
#[inline]
pub fn dormant_entry_refused(id: u32) -> bool {
    slot(id).is_some_and(|(w, bit)| DORMANT_FAILED[w].load(Ordering::Relaxed) & bit != 0)
}

/// Dormant `id` could not be revealed where it ran: its later entries
/// skip the attempt.
pub fn refuse_dormant_entry(id: u32) {
    if let Some((w, bit)) = slot(id) {
        DORMANT_FAILED[w].fetch_or(bit, Ordering::Relaxed);
    }
}

/// What an entry of `id` has to do about its first call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirstCall {
    /// Handled before (or `id` is not tracked): go on.
    Done,
    /// This thread makes the first call: reveal, then [`first_call_done`].
    Mine,
    /// Another thread is revealing it right now: wait for it
    /// ([`wait_first_call`]), or the callees may not hold probes yet.
    Pending,
}

/// Claims the first call of `id`; cheap once it was handled. Exactly one
/// thread gets `Mine` per session.
#[inline]
pub fn claim_first_call(id: u32) -> FirstCall {
    let Some((w, bit)) = slot(id) else {
        return FirstCall::Done;
    };
    if CALLED[w].load(Ordering::Acquire) & bit != 0 {
        return FirstCall::Done;
    }
    if CLAIMED[w].fetch_or(bit, Ordering::AcqRel) & bit == 0 {
        first_call();
        FirstCall::Mine
    } else if CALLED[w].load(Ordering::Acquire) & bit != 0 {
        FirstCall::Done
    } else {
        FirstCall::Pending
    }
}

/// The first call of `id` is handled: its callees hold their probes.
pub fn first_call_done(id: u32) {
    if let Some((w, bit)) = slot(id) {
        CALLED[w].fetch_or(bit, Ordering::SeqCst);
        // Either this or `activate` sees both bits (SeqCst on both sides):
        // the probe class's Java path may record `id` from now on.
        if ACTIVE[w].load(Ordering::SeqCst) & bit != 0 {
            slots::allow_id(id);
        }
    }
}

/// Waits until the first call of `id` is handled, at most `bound`.
/// Returns whether it was.
#[cold]
pub fn wait_first_call(id: u32, bound: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + bound;
    let mut spins = 0u32;
    loop {
        if was_called(id) {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        spins += 1;
        if spins < 64 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
    }
}

/// Records that `id` was entered as a completed first call (tests).
#[cfg(test)]
fn mark_called(id: u32) -> bool {
    let mine = claim_first_call(id) == FirstCall::Mine;
    if mine {
        first_call_done(id);
    }
    mine
}

/// Whether `id` needs no first-call handling any more: entered before in
/// this session, or not tracked. Never changes the bitmap. Acquire: a
/// thread that waited for another's first call sees what it revealed.
#[inline]
pub fn was_called(id: u32) -> bool {
    slot(id).is_none_or(|(w, bit)| CALLED[w].load(Ordering::Acquire) & bit != 0)
}

#[cold]
fn first_call() {
    CALLED_COUNT.fetch_add(1, Ordering::Relaxed);
}

/// Methods entered at least once in this session.
pub fn called_count() -> u64 {
    CALLED_COUNT.load(Ordering::Relaxed)
}

/// Assigns (and announces, the first time) the id of a method, and makes
/// its probes record.
pub fn announce_method(class: &str, name: &str, descriptor: &str) -> u32 {
    let (id, _) = id_for(class, name, descriptor);
    if mark_announced(id) {
        outbox::send(Message::Method {
            id,
            class: class.to_string(),
            name: name.to_string(),
            descriptor: descriptor.to_string(),
        });
    }
    activate(id);
    id
}

/// The id of a method that gets dormant probes (not announced, not
/// active); `None` when ids have run past what can be dormant.
pub fn dormant_method(class: &str, name: &str, descriptor: &str) -> Option<u32> {
    let (id, _) = id_for(class, name, descriptor);
    (id < MAX_TRACKED).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tables are global: one test at a time.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn serial() -> std::sync::MutexGuard<'static, ()> {
        lock(&SERIAL)
    }

    #[test]
    fn ids_skip_the_calibration_ids() {
        let _s = serial();
        begin_session();
        if let Some(t) = TABLE.lock().unwrap().as_mut() {
            t.next = RESERVED_FIRST - 1;
        }
        let (a, _) = id_for("p.A", "x", "()V");
        let (b, _) = id_for("p.A", "y", "()V");
        let (c, _) = id_for("p.A", "z", "()V");
        assert_eq!(
            (a, b, c),
            (RESERVED_FIRST - 1, MAX_TRACKED, MAX_TRACKED + 1)
        );
        assert!(!is_active(RESERVED_FIRST) && !was_called(RESERVED_FIRST));
        reserve_calibration(&[RESERVED_FIRST, MAX_TRACKED - 1]);
        for id in [RESERVED_FIRST, MAX_TRACKED - 1] {
            assert!(is_active(id) && was_called(id));
            assert_eq!(claim_first_call(id), FirstCall::Done);
        }
        begin_session();
    }

    #[test]
    fn ids_and_first_calls() {
        let _s = serial();
        begin_session();
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
        begin_session();
        assert_eq!(called_count(), 0);
        mark_called(a);
        assert_eq!(called_count(), 1);
    }

    #[test]
    fn a_first_call_in_progress_makes_others_wait() {
        let _s = serial();
        begin_session();
        let (a, _) = id_for("p.C", "run", "()V");
        assert_eq!(claim_first_call(a), FirstCall::Mine);
        assert_eq!(claim_first_call(a), FirstCall::Pending);
        assert!(!wait_first_call(a, std::time::Duration::from_millis(5)));
        let waiter =
            std::thread::spawn(move || wait_first_call(a, std::time::Duration::from_secs(5)));
        std::thread::sleep(std::time::Duration::from_millis(20));
        first_call_done(a);
        assert!(waiter.join().unwrap());
        assert_eq!(claim_first_call(a), FirstCall::Done);
        assert_eq!(called_count(), 1);
    }

    #[test]
    fn ids_start_dormant_and_are_announced_once() {
        let _s = serial();
        begin_session();
        let (a, _) = id_for("p.B", "run", "()V");
        assert!(!is_active(a));
        assert!(is_active(MAX_TRACKED + 1));
        activate(a);
        assert!(is_active(a));
        assert!(mark_announced(a));
        assert!(!mark_announced(a));
        begin_session();
        assert!(!is_active(a));
        assert!(mark_announced(a));
    }
}
