//! What the thread snapshots say: each thread's state in
//! `java.lang.Thread.State`'s words, the locks it waits for and holds,
//! and the deadlocks.
//!
//! The waits-for graph has an edge from a thread to the thread that holds
//! the lock it waits for: a monitor it is blocked entering (JVMTI state
//! BLOCKED_ON_MONITOR_ENTER, the monitor's owner known) or a
//! `java.util.concurrent` synchronizer it is parked on (its exclusive
//! owner known). A thread waits for one lock at most, so every cycle is
//! found by following edges. A deadlock is a cycle; `Object.wait`, a
//! timed park or a shared lock form none (as for
//! `ThreadMXBean.findDeadlockedThreads`).
//!
//! The agent reads the locks thread by thread after the stacks, so one
//! snapshot of threads that move can show a cycle that never existed
//! (a thread seen waiting for a lock another took after it). A deadlock
//! does not move: a cycle counts only when every snapshot shows it, the
//! same threads waiting for the same locks (by class and identity hash).

use std::collections::{HashMap, HashSet};

use sprig_wire::control::{DumpedLock, DumpedThread, LockKind, LockRef, ThreadDump};

/// JVMTI thread state bits (`JVMTI_THREAD_STATE_*`).
pub mod bits {
    pub const ALIVE: u32 = 0x0001;
    pub const TERMINATED: u32 = 0x0002;
    pub const RUNNABLE: u32 = 0x0004;
    pub const WAITING_INDEFINITELY: u32 = 0x0010;
    pub const WAITING_WITH_TIMEOUT: u32 = 0x0020;
    pub const SLEEPING: u32 = 0x0040;
    pub const IN_OBJECT_WAIT: u32 = 0x0100;
    pub const PARKED: u32 = 0x0200;
    pub const BLOCKED_ON_MONITOR_ENTER: u32 = 0x0400;
    pub const IN_NATIVE: u32 = 0x40_0000;
}

/// A thread's `java.lang.Thread.State` name, from its JVMTI state bits.
pub fn state_name(state: u32) -> &'static str {
    use bits::*;
    if state & ALIVE == 0 {
        if state & TERMINATED != 0 {
            "TERMINATED"
        } else {
            "NEW"
        }
    } else if state & BLOCKED_ON_MONITOR_ENTER != 0 {
        "BLOCKED"
    } else if state & RUNNABLE != 0 {
        "RUNNABLE"
    } else if state & WAITING_WITH_TIMEOUT != 0 {
        "TIMED_WAITING"
    } else if state & WAITING_INDEFINITELY != 0 {
        "WAITING"
    } else {
        "RUNNABLE"
    }
}

/// Why a thread waits or where it runs, from its JVMTI state bits:
/// `sleeping`, `parked`, `object_wait`, `native`, or `None`.
pub fn why(state: u32) -> Option<&'static str> {
    use bits::*;
    if state & SLEEPING != 0 {
        Some("sleeping")
    } else if state & PARKED != 0 {
        Some("parked")
    } else if state & IN_OBJECT_WAIT != 0 {
        Some("object_wait")
    } else if state & RUNNABLE != 0 && state & IN_NATIVE != 0 {
        Some("native")
    } else {
        None
    }
}

/// Whether a thread with these state bits waits to enter its contended
/// monitor (not in `Object.wait` on it).
pub fn blocked(state: u32) -> bool {
    state & bits::BLOCKED_ON_MONITOR_ENTER != 0
}

/// What a thread waits for in the waits-for graph: the lock and the
/// thread that holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wait {
    pub lock: LockRef,
    pub owner: u64,
}

/// The edge out of `t`, if it has one.
pub fn waits_for(dump: &ThreadDump, t: &DumpedThread) -> Option<Wait> {
    let lock_of = |i: LockRef| dump.locks.get(i as usize);
    if blocked(t.state)
        && let Some(i) = t.contended
        && let Some(owner) = lock_of(i).and_then(|l| l.owner)
        && owner != t.java_id
    {
        return Some(Wait { lock: i, owner });
    }
    if t.state & bits::PARKED != 0
        && let Some(i) = t.parked_on
        && let Some(l) = lock_of(i)
        && l.kind == LockKind::Synchronizer
        && let Some(owner) = l.owner
        && owner != t.java_id
    {
        return Some(Wait { lock: i, owner });
    }
    None
}

/// The cycles of one snapshot's waits-for graph, each as the Java ids of
/// its threads in the order they wait (each waits for the next, the last
/// for the first), starting at the smallest id; the cycles in the order
/// of their first thread.
pub fn cycles(dump: &ThreadDump) -> Vec<Vec<u64>> {
    let edges: HashMap<u64, Wait> = dump
        .threads
        .iter()
        .filter_map(|t| waits_for(dump, t).map(|w| (t.java_id, w)))
        .collect();
    let mut done: HashSet<u64> = HashSet::new();
    let mut found = Vec::new();
    let mut starts: Vec<u64> = edges.keys().copied().collect();
    starts.sort_unstable();
    for start in starts {
        if done.contains(&start) {
            continue;
        }
        // Follow the edges until a thread seen before or one that waits
        // for nothing.
        let mut path: Vec<u64> = Vec::new();
        let mut on_path: HashMap<u64, usize> = HashMap::new();
        let mut at = start;
        loop {
            if done.contains(&at) {
                break;
            }
            if let Some(&i) = on_path.get(&at) {
                let mut cycle = path[i..].to_vec();
                let min = cycle
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, id)| **id)
                    .map_or(0, |(k, _)| k);
                cycle.rotate_left(min);
                found.push(cycle);
                break;
            }
            on_path.insert(at, path.len());
            path.push(at);
            match edges.get(&at) {
                Some(w) => at = w.owner,
                None => break,
            }
        }
        done.extend(path);
    }
    found.sort();
    found
}

/// What names a cycle across snapshots: each thread with the class and
/// identity hash of the lock it waits for.
fn cycle_key(dump: &ThreadDump, cycle: &[u64]) -> Vec<(u64, String, i32)> {
    cycle
        .iter()
        .map(|id| {
            let lock = dump
                .threads
                .iter()
                .find(|t| t.java_id == *id)
                .and_then(|t| waits_for(dump, t))
                .and_then(|w| dump.locks.get(w.lock as usize));
            (
                *id,
                lock.map(|l| l.class.clone()).unwrap_or_default(),
                lock.map_or(0, |l| l.hash),
            )
        })
        .collect()
}

/// The deadlocks: the cycles of the last snapshot that every snapshot
/// shows, the same threads waiting for the same locks.
pub fn deadlocks(dumps: &[ThreadDump]) -> Vec<Vec<u64>> {
    let Some(last) = dumps.last() else {
        return Vec::new();
    };
    let earlier: Vec<HashSet<Vec<(u64, String, i32)>>> = dumps[..dumps.len() - 1]
        .iter()
        .map(|d| cycles(d).iter().map(|c| cycle_key(d, c)).collect())
        .collect();
    cycles(last)
        .into_iter()
        .filter(|c| {
            let key = cycle_key(last, c);
            earlier.iter().all(|seen| seen.contains(&key))
        })
        .collect()
}

/// A lock's name in reports: `pkg.Class@1a2b3c4d` (its identity hash).
pub fn lock_name(lock: &DumpedLock) -> String {
    format!("{}@{:08x}", lock.class, lock.hash as u32)
}

/// The synchronizers `thread` holds, as far as the snapshot knows: those a
/// parked thread waits for whose exclusive owner it is.
pub fn owned_synchronizers(dump: &ThreadDump, thread: u64) -> Vec<LockRef> {
    (0..dump.locks.len() as LockRef)
        .filter(|i| {
            let l = &dump.locks[*i as usize];
            l.kind == LockKind::Synchronizer && l.owner == Some(thread)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bits::*;

    const BLOCKED: u32 = ALIVE | BLOCKED_ON_MONITOR_ENTER;
    const PARKED_STATE: u32 = ALIVE | WAITING_INDEFINITELY | PARKED;

    fn thread(id: u64, state: u32, contended: Option<u32>, parked_on: Option<u32>) -> DumpedThread {
        DumpedThread {
            java_id: id,
            name: format!("t{id}"),
            daemon: false,
            state,
            frames: Vec::new(),
            truncated: false,
            owns: Vec::new(),
            contended,
            parked_on,
        }
    }

    fn lock(kind: LockKind, hash: i32, owner: Option<u64>) -> DumpedLock {
        DumpedLock {
            class: "L".into(),
            hash,
            kind,
            owner,
        }
    }

    fn dump(threads: Vec<DumpedThread>, locks: Vec<DumpedLock>) -> ThreadDump {
        ThreadDump {
            time_ns: 0,
            took_ns: 0,
            threads,
            locks,
        }
    }

    /// Two monitors held crosswise; 3 waits on 2's cycle from outside.
    fn crossed() -> ThreadDump {
        dump(
            vec![
                thread(2, BLOCKED, Some(1), None),
                thread(1, BLOCKED, Some(0), None),
                thread(3, BLOCKED, Some(0), None),
            ],
            vec![
                lock(LockKind::Monitor, 10, Some(2)),
                lock(LockKind::Monitor, 11, Some(1)),
            ],
        )
    }

    #[test]
    fn a_cycle_of_monitors_is_found_once_from_its_smallest_id() {
        assert_eq!(cycles(&crossed()), vec![vec![1, 2]]);
    }

    #[test]
    fn parked_synchronizers_and_mixed_locks_form_cycles() {
        let d = dump(
            vec![
                thread(5, PARKED_STATE, None, Some(0)),
                thread(7, BLOCKED, Some(1), None),
                thread(9, PARKED_STATE, None, Some(2)),
            ],
            vec![
                lock(LockKind::Synchronizer, 1, Some(7)),
                lock(LockKind::Monitor, 2, Some(9)),
                lock(LockKind::Synchronizer, 3, Some(5)),
            ],
        );
        assert_eq!(cycles(&d), vec![vec![5, 7, 9]]);
    }

    #[test]
    fn waits_that_cannot_deadlock_form_no_edge() {
        // Object.wait on a monitor another holds, a park on a blocker that
        // is no synchronizer, a blocked thread whose owner is unknown, a
        // synchronizer its waiter owns.
        let d = dump(
            vec![
                thread(
                    1,
                    ALIVE | WAITING_INDEFINITELY | IN_OBJECT_WAIT,
                    Some(0),
                    None,
                ),
                thread(2, PARKED_STATE, None, Some(1)),
                thread(3, BLOCKED, Some(2), None),
                thread(4, PARKED_STATE, None, Some(3)),
            ],
            vec![
                lock(LockKind::Monitor, 1, Some(2)),
                lock(LockKind::Blocker, 2, Some(1)),
                lock(LockKind::Monitor, 3, None),
                lock(LockKind::Synchronizer, 4, Some(4)),
            ],
        );
        assert!(d.threads.iter().all(|t| waits_for(&d, t).is_none()));
        assert!(cycles(&d).is_empty());
    }

    #[test]
    fn a_chain_into_nothing_is_no_deadlock() {
        let d = dump(
            vec![
                thread(1, BLOCKED, Some(0), None),
                thread(2, BLOCKED, Some(1), None),
                thread(3, ALIVE | RUNNABLE, None, None),
            ],
            vec![
                lock(LockKind::Monitor, 1, Some(2)),
                lock(LockKind::Monitor, 2, Some(3)),
            ],
        );
        assert!(cycles(&d).is_empty());
        assert!(deadlocks(&[d]).is_empty());
    }

    #[test]
    fn a_cycle_counts_only_when_every_snapshot_shows_it() {
        let a = crossed();
        assert_eq!(deadlocks(&[a.clone(), a.clone()]), vec![vec![1, 2]]);
        // The first snapshot saw the threads elsewhere: a passing picture.
        let moved = dump(vec![thread(1, ALIVE | RUNNABLE, None, None)], Vec::new());
        assert!(deadlocks(&[moved, a.clone()]).is_empty());
        // The same threads, another lock: not the same cycle.
        let mut other = a.clone();
        other.locks[0].hash = 99;
        assert!(deadlocks(&[other, a]).is_empty());
    }

    #[test]
    fn states_read_as_java_names() {
        assert_eq!(state_name(BLOCKED), "BLOCKED");
        assert_eq!(state_name(PARKED_STATE), "WAITING");
        assert_eq!(why(PARKED_STATE), Some("parked"));
        let sleeping = ALIVE | WAITING_WITH_TIMEOUT | SLEEPING;
        assert_eq!(state_name(sleeping), "TIMED_WAITING");
        assert_eq!(why(sleeping), Some("sleeping"));
        assert_eq!(state_name(ALIVE | RUNNABLE | IN_NATIVE), "RUNNABLE");
        assert_eq!(why(ALIVE | RUNNABLE | IN_NATIVE), Some("native"));
        assert_eq!(
            why(ALIVE | WAITING_INDEFINITELY | IN_OBJECT_WAIT),
            Some("object_wait")
        );
        assert_eq!(state_name(TERMINATED), "TERMINATED");
    }

    #[test]
    fn owners_of_synchronizers_are_reported() {
        let d = dump(
            vec![],
            vec![
                lock(LockKind::Synchronizer, 1, Some(7)),
                lock(LockKind::Monitor, 2, Some(7)),
                lock(LockKind::Synchronizer, 3, Some(8)),
            ],
        );
        assert_eq!(owned_synchronizers(&d, 7), vec![0]);
        assert_eq!(lock_name(&d.locks[2]), "L@00000003");
    }
}
