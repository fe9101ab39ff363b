//! The thread snapshots of `sprig threads`: at its start the source takes
//! `snapshots` snapshots, `gap_ms` apart, of every live Java thread and
//! sends each as one `ThreadDump` message; it holds nothing after.
//!
//! A snapshot: one JVMTI GetAllStackTraces (states and stacks, with each
//! frame's line where the class has a line number table), each thread's
//! name and daemon flag (GetThreadInfo), then its locks:
//!
//! - the monitors it holds, with the depth of the frame that entered
//!   each, the lock it waits for and that lock's owner, and the
//!   `java.util.concurrent` synchronizers it holds, from the JVM's own
//!   platform `ThreadMXBean` (`dumpAllThreads(true, true)`, called through
//!   JNI in the JVM: one safepoint for all threads; no JMX connector or
//!   MBean server is involved). JVMTI's own calls for these
//!   (GetOwnedMonitorStackDepthInfo, GetCurrentContendedMonitor) need
//!   capabilities HotSpot grants only to an agent loaded at the JVM's
//!   start, never to one attached later. A JVM without the
//!   `java.management` module gives none of these (said in a warning);
//! - for a parked thread, its park blocker (`LockSupport.getBlocker`
//!   through JNI) and, when the blocker is an
//!   `AbstractOwnableSynchronizer`, the thread that holds it exclusively
//!   (`getExclusiveOwnerThread`, protected but callable through JNI).
//!
//! A lock is named by its class and identity hash (what `ThreadMXBean`
//! reports), one index in the snapshot's lock list however many threads
//! name it. No class is redefined; every call is bounded (safepoint
//! operations, and Java methods that read fields). Every local reference
//! is made inside local frames popped at the end; an error about one
//! thread (one that ended meanwhile) leaves that fact out, only a failed
//! GetAllStackTraces fails the snapshot. sprig's own threads (`sprig-*`)
//! are left out.

use super::{Ending, Needs, Source};
use crate::env::Agent;
use crate::ffi::{
    Arg, Capabilities, FieldId, JavaMethod, Jni, Jvmti, Local, MethodId, Value, thread_state,
};
use crate::outbox;
use sprig_wire::Message;
use sprig_wire::clock;
use sprig_wire::control::{
    DumpedFrame, DumpedLock, DumpedThread, LockKind, LockRef, ThreadDump, ThreadsOptions,
};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Most snapshots one session takes.
pub const MAX_SNAPSHOTS: u32 = 10;
/// Longest gap between two snapshots, in ms.
pub const MAX_GAP_MS: u32 = 1000;
/// Deepest stack a snapshot takes.
pub const MAX_DEPTH: u32 = 2048;

/// The thread snapshots of one session.
pub struct Threads {
    opts: ThreadsOptions,
    /// The missing `ThreadMXBean` was said once.
    warned: bool,
}

impl Threads {
    pub const NEEDS: Needs = Needs {
        capabilities: Capabilities {
            line_numbers: true,
            ..Capabilities::NONE
        },
        events: &[],
        ring: false,
    };

    /// The snapshots `opts` asks for; `Err` (one line) for options out of
    /// range.
    pub fn new(opts: ThreadsOptions) -> Result<Threads, String> {
        if opts.snapshots == 0 || opts.snapshots > MAX_SNAPSHOTS {
            return Err(format!(
                "thread snapshots: {} snapshots out of range (1 to {MAX_SNAPSHOTS})",
                opts.snapshots
            ));
        }
        if opts.gap_ms > MAX_GAP_MS {
            return Err(format!(
                "thread snapshots: a gap of {} ms out of range (0 to {MAX_GAP_MS})",
                opts.gap_ms
            ));
        }
        if opts.max_depth == 0 || opts.max_depth > MAX_DEPTH {
            return Err(format!(
                "thread snapshots: depth of {} frames out of range (1 to {MAX_DEPTH})",
                opts.max_depth
            ));
        }
        Ok(Threads {
            opts,
            warned: false,
        })
    }
}

impl Source for Threads {
    fn name(&self) -> &'static str {
        "threads"
    }

    fn needs(&self) -> Needs {
        Threads::NEEDS
    }

    /// Takes the snapshots and sends them.
    fn start(&mut self, agent: &'static Agent, jni: Jni<'_>) -> Result<(), String> {
        let tid = jni
            .thread_id_field()
            .ok_or("thread snapshots: cannot find java.lang.Thread's tid field")?;
        for i in 0..self.opts.snapshots {
            if i > 0 {
                std::thread::sleep(Duration::from_millis(u64::from(self.opts.gap_ms)));
            }
            let (dump, mx) = snapshot(agent.jvmti, jni, tid, self.opts.max_depth)?;
            if !mx && !self.warned {
                self.warned = true;
                outbox::send(Message::Warning(
                    "thread snapshots: this JVM's ThreadMXBean is not available (no \
                     java.management module?): no monitors, and only the \
                     java.util.concurrent locks parked threads wait for"
                        .into(),
                ));
            }
            outbox::send(Message::ThreadDump(dump));
        }
        Ok(())
    }

    /// Nothing runs after the start.
    fn stop(&mut self, _agent: &'static Agent, _jni: Jni<'_>, _ending: &mut Ending) {}
}

/// `java.util.concurrent`'s park blockers.
struct Juc<'a> {
    get_blocker: JavaMethod<'a>,
    synchronizer: Local<'a>,
    exclusive_owner: JavaMethod<'a>,
}

impl<'a> Juc<'a> {
    fn find(jni: Jni<'a>) -> Option<Juc<'a>> {
        let lock_support = jni
            .find_class("java/util/concurrent/locks/LockSupport")
            .ok()??;
        let get_blocker = jni
            .java_method(
                lock_support,
                "getBlocker",
                c"(Ljava/lang/Thread;)Ljava/lang/Object;",
                true,
            )
            .ok()?;
        let synchronizer = jni
            .find_class("java/util/concurrent/locks/AbstractOwnableSynchronizer")
            .ok()??;
        let exclusive_owner = jni
            .java_method(
                synchronizer,
                "getExclusiveOwnerThread",
                c"()Ljava/lang/Thread;",
                false,
            )
            .ok()?;
        Some(Juc {
            get_blocker,
            synchronizer,
            exclusive_owner,
        })
    }
}

/// The platform `ThreadMXBean` and the getters of what it returns.
struct Mx<'a> {
    bean: Local<'a>,
    dump_all: JavaMethod<'a>,
    thread_id: JavaMethod<'a>,
    lock_info: JavaMethod<'a>,
    lock_owner: JavaMethod<'a>,
    monitors: JavaMethod<'a>,
    synchronizers: JavaMethod<'a>,
    class_name: JavaMethod<'a>,
    hash: JavaMethod<'a>,
    depth: JavaMethod<'a>,
}

impl<'a> Mx<'a> {
    fn find(jni: Jni<'a>) -> Option<Mx<'a>> {
        let class = |name: &str| jni.find_class(name).ok().flatten();
        let factory = class("java/lang/management/ManagementFactory")?;
        let get_bean = jni
            .java_method(
                factory,
                "getThreadMXBean",
                c"()Ljava/lang/management/ThreadMXBean;",
                true,
            )
            .ok()?;
        let Ok(Value::Reference(Some(bean))) = jni.call(&get_bean, None, &[]) else {
            return None;
        };
        let mx_class = class("java/lang/management/ThreadMXBean")?;
        let info = class("java/lang/management/ThreadInfo")?;
        let lock = class("java/lang/management/LockInfo")?;
        let monitor = class("java/lang/management/MonitorInfo")?;
        let m = |c: Local<'a>, name: &str, sig: &std::ffi::CStr| {
            jni.java_method(c, name, sig, false).ok()
        };
        Some(Mx {
            bean,
            dump_all: m(
                mx_class,
                "dumpAllThreads",
                c"(ZZ)[Ljava/lang/management/ThreadInfo;",
            )?,
            thread_id: m(info, "getThreadId", c"()J")?,
            lock_info: m(info, "getLockInfo", c"()Ljava/lang/management/LockInfo;")?,
            lock_owner: m(info, "getLockOwnerId", c"()J")?,
            monitors: m(
                info,
                "getLockedMonitors",
                c"()[Ljava/lang/management/MonitorInfo;",
            )?,
            synchronizers: m(
                info,
                "getLockedSynchronizers",
                c"()[Ljava/lang/management/LockInfo;",
            )?,
            class_name: m(lock, "getClassName", c"()Ljava/lang/String;")?,
            hash: m(lock, "getIdentityHashCode", c"()I")?,
            depth: m(monitor, "getLockedStackDepth", c"()I")?,
        })
    }
}

/// What the `ThreadMXBean` says of one thread's locks.
#[derive(Default)]
struct MxThread {
    /// The lock it waits for (class, identity hash), and its owner.
    waits_for: Option<(String, i32)>,
    owner: Option<u64>,
    /// The monitors it holds, with the depth of the frame that entered
    /// each.
    monitors: Vec<(String, i32, i32)>,
    /// The synchronizers it holds.
    synchronizers: Vec<(String, i32)>,
}

/// A `LockInfo`'s class name and identity hash.
fn lock_key<'a>(jni: Jni<'a>, mx: &Mx<'_>, info: Local<'_>) -> Option<(String, i32)> {
    let name = match jni.call(&mx.class_name, Some(info), &[]) {
        Ok(Value::Reference(Some(s))) => {
            let text = jni.string(s);
            jni.delete_local(s);
            text?
        }
        _ => return None,
    };
    match jni.call(&mx.hash, Some(info), &[]) {
        Ok(Value::Int(h)) => Some((name, h)),
        _ => None,
    }
}

fn long_of(jni: Jni<'_>, m: &JavaMethod<'_>, obj: Local<'_>) -> Option<i64> {
    match jni.call(m, Some(obj), &[]) {
        Ok(Value::Long(v)) => Some(v),
        _ => None,
    }
}

/// Every thread's locks, by Java id, from one `dumpAllThreads(true, true)`.
fn mx_threads(jni: Jni<'_>, mx: &Mx<'_>) -> HashMap<u64, MxThread> {
    let mut out = HashMap::new();
    jni.with_local_frame(64, |jni| {
        let Ok(Value::Reference(Some(infos))) = jni.call(
            &mx.dump_all,
            Some(mx.bean),
            &[Arg::Boolean(true), Arg::Boolean(true)],
        ) else {
            return;
        };
        for n in 0..jni.object_array_len(infos) {
            let Some(info) = jni.object_array_get(infos, n) else {
                continue;
            };
            jni.with_local_frame(32, |jni| {
                let Some(id) = long_of(jni, &mx.thread_id, info) else {
                    return;
                };
                let mut t = MxThread::default();
                if let Ok(Value::Reference(Some(lock))) = jni.call(&mx.lock_info, Some(info), &[]) {
                    t.waits_for = lock_key(jni, mx, lock);
                }
                t.owner = long_of(jni, &mx.lock_owner, info)
                    .filter(|o| *o >= 0)
                    .map(|o| o as u64);
                if let Ok(Value::Reference(Some(arr))) = jni.call(&mx.monitors, Some(info), &[]) {
                    for k in 0..jni.object_array_len(arr) {
                        let Some(m) = jni.object_array_get(arr, k) else {
                            continue;
                        };
                        let depth = match jni.call(&mx.depth, Some(m), &[]) {
                            Ok(Value::Int(d)) => d,
                            _ => -1,
                        };
                        if let Some((class, hash)) = lock_key(jni, mx, m) {
                            t.monitors.push((class, hash, depth));
                        }
                        jni.delete_local(m);
                    }
                }
                if let Ok(Value::Reference(Some(arr))) =
                    jni.call(&mx.synchronizers, Some(info), &[])
                {
                    for k in 0..jni.object_array_len(arr) {
                        let Some(s) = jni.object_array_get(arr, k) else {
                            continue;
                        };
                        if let Some(key) = lock_key(jni, mx, s) {
                            t.synchronizers.push(key);
                        }
                        jni.delete_local(s);
                    }
                }
                out.insert(id as u64, t);
            });
            jni.delete_local(info);
        }
    });
    out
}

/// The locks a snapshot names.
#[derive(Default)]
struct Locks {
    index: HashMap<(String, i32), LockRef>,
    locks: Vec<DumpedLock>,
}

impl Locks {
    /// The index of the lock of class `class` and identity hash `hash`,
    /// added as a `kind` lock the first time; its owner set to `owner`
    /// unless one is known.
    fn add(&mut self, class: String, hash: i32, kind: LockKind, owner: Option<u64>) -> LockRef {
        let i = *self.index.entry((class.clone(), hash)).or_insert_with(|| {
            self.locks.push(DumpedLock {
                class,
                hash,
                kind,
                owner: None,
            });
            (self.locks.len() - 1) as LockRef
        });
        let lock = &mut self.locks[i as usize];
        if lock.owner.is_none() {
            lock.owner = owner;
        }
        i
    }
}

/// What a snapshot remembers of each method.
struct MethodFacts {
    class: String,
    name: String,
    descriptor: String,
    lines: Vec<(i64, i32)>,
}

/// One snapshot of every live Java thread but sprig's own; whether the
/// `ThreadMXBean` answered.
fn snapshot(
    jvmti: Jvmti,
    jni: Jni<'_>,
    tid: FieldId,
    max_depth: u32,
) -> Result<(ThreadDump, bool), String> {
    let started = Instant::now();
    let time_ns = clock::monotonic_ns();
    let depth = max_depth as usize;
    jni.with_local_frame(512, |jni| {
        let juc = Juc::find(jni);
        let mx = Mx::find(jni);
        // Looking the classes up may leave a pending exception.
        jni.exception_clear();
        let depth_asked = i32::try_from(depth + 1).unwrap_or(i32::MAX);
        let stacks = jvmti
            .stacks_at(&jni, depth_asked)
            .map_err(|e| format!("thread snapshots: GetAllStackTraces failed: {e}"))?;
        let mut by_mx = mx
            .as_ref()
            .map(|mx| mx_threads(jni, mx))
            .unwrap_or_default();
        let mut methods: HashMap<MethodId, MethodFacts> = HashMap::new();
        let mut locks = Locks::default();
        let mut threads = Vec::with_capacity(stacks.len());
        for st in stacks {
            let (name, daemon) = jvmti.thread_info(&jni, st.thread).unwrap_or_default();
            if name.starts_with("sprig-") {
                jni.delete_local(st.thread);
                continue;
            }
            let java_id = jni.thread_id_by(st.thread, tid);
            let truncated = st.frames.len() > depth;
            let frames = st
                .frames
                .iter()
                .take(depth)
                .map(|(m, at)| frame(&jvmti, jni, &mut methods, *m, *at))
                .collect();
            let mxt = by_mx.remove(&java_id).unwrap_or_default();
            let owns = mxt
                .monitors
                .into_iter()
                .map(|(class, hash, at)| {
                    (locks.add(class, hash, LockKind::Monitor, Some(java_id)), at)
                })
                .collect();
            for (class, hash) in mxt.synchronizers {
                locks.add(class, hash, LockKind::Synchronizer, Some(java_id));
            }
            let on_monitor = thread_state::BLOCKED_ON_MONITOR_ENTER | thread_state::IN_OBJECT_WAIT;
            let contended = match &mxt.waits_for {
                Some((class, hash)) if st.state & on_monitor != 0 => {
                    let blocked = st.state & thread_state::BLOCKED_ON_MONITOR_ENTER != 0;
                    let owner = mxt.owner.filter(|_| blocked);
                    Some(locks.add(class.clone(), *hash, LockKind::Monitor, owner))
                }
                _ => None,
            };
            let parked_on = if st.state & thread_state::PARKED != 0 {
                juc.as_ref()
                    .and_then(|juc| parked_on(&jvmti, jni, juc, tid, &mut locks, st.thread))
                    .or_else(|| {
                        // The blocker as the ThreadMXBean saw it.
                        let (class, hash) = mxt.waits_for.clone()?;
                        let kind = if mxt.owner.is_some() {
                            LockKind::Synchronizer
                        } else {
                            LockKind::Blocker
                        };
                        Some(locks.add(class, hash, kind, mxt.owner))
                    })
            } else {
                None
            };
            jni.delete_local(st.thread);
            threads.push(DumpedThread {
                java_id,
                name,
                daemon,
                state: st.state,
                frames,
                truncated,
                owns,
                contended,
                parked_on,
            });
        }
        let dump = ThreadDump {
            time_ns,
            took_ns: u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX),
            threads,
            locks: locks.locks,
        };
        Ok((dump, mx.is_some()))
    })
}

/// The park blocker of `thread`, and the exclusive owner of a blocker
/// that is an `AbstractOwnableSynchronizer`.
fn parked_on<'a>(
    jvmti: &Jvmti,
    jni: Jni<'a>,
    juc: &Juc<'a>,
    tid: FieldId,
    locks: &mut Locks,
    thread: Local<'_>,
) -> Option<LockRef> {
    let Ok(Value::Reference(Some(blocker))) =
        jni.call(&juc.get_blocker, None, &[Arg::Reference(Some(thread))])
    else {
        return None;
    };
    let synchronizer = jni.is_instance_of(blocker, juc.synchronizer);
    let class = match jni.object_class(blocker) {
        Some(c) => {
            let sig = jvmti.class_signature(c).unwrap_or_default();
            jni.delete_local(c);
            binary_name(&sig)
        }
        None => String::new(),
    };
    let hash = jvmti.object_hash(blocker).unwrap_or(0);
    let owner = if synchronizer {
        match jni.call(&juc.exclusive_owner, Some(blocker), &[]) {
            Ok(Value::Reference(Some(owner))) => {
                let id = jni.thread_id_by(owner, tid);
                jni.delete_local(owner);
                Some(id)
            }
            _ => None,
        }
    } else {
        None
    };
    jni.delete_local(blocker);
    let kind = if synchronizer {
        LockKind::Synchronizer
    } else {
        LockKind::Blocker
    };
    Some(locks.add(class, hash, kind, owner))
}

/// A frame: its method's names and the line of bytecode index `at`.
fn frame(
    jvmti: &Jvmti,
    jni: Jni<'_>,
    methods: &mut HashMap<MethodId, MethodFacts>,
    m: MethodId,
    at: i64,
) -> DumpedFrame {
    let facts = methods.entry(m).or_insert_with(|| {
        let class = match jvmti.method_declaring_class(&jni, m) {
            Ok(c) => {
                let sig = jvmti.class_signature(c).unwrap_or_default();
                jni.delete_local(c);
                binary_name(&sig)
            }
            Err(_) => String::new(),
        };
        let (name, descriptor) = jvmti
            .method_name(m)
            .unwrap_or_else(|_| ("<unknown>".into(), String::new()));
        MethodFacts {
            class,
            name,
            descriptor,
            lines: jvmti.line_numbers(m).unwrap_or_default(),
        }
    });
    DumpedFrame {
        class: facts.class.clone(),
        method: facts.name.clone(),
        descriptor: facts.descriptor.clone(),
        line: line_at(&facts.lines, at),
    }
}

/// The line of bytecode index `at` in a line number table: the entry
/// with the greatest start not past it; -2 in a native method (`at` is
/// -1), -1 when the table has none.
fn line_at(table: &[(i64, i32)], at: i64) -> i32 {
    if at < 0 {
        return -2;
    }
    table
        .iter()
        .filter(|(start, _)| *start <= at)
        .max_by_key(|(start, _)| *start)
        .map_or(-1, |(_, line)| *line)
}

/// The binary name, with dots, of the class of signature `sig`
/// (`Lpkg/Name;` -> `pkg.Name`); other signatures as they are.
fn binary_name(sig: &str) -> String {
    sig.strip_prefix('L')
        .and_then(|s| s.strip_suffix(';'))
        .unwrap_or(sig)
        .replace('/', ".")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_location_finds_its_line() {
        // The table's order is not the bytecode's.
        let table = [(0, 10), (12, 14), (5, 11)];
        assert_eq!(line_at(&table, 0), 10);
        assert_eq!(line_at(&table, 4), 10);
        assert_eq!(line_at(&table, 5), 11);
        assert_eq!(line_at(&table, 30), 14);
        assert_eq!(line_at(&table, -1), -2);
        assert_eq!(line_at(&[], 3), -1);
        assert_eq!(line_at(&[(4, 7)], 3), -1);
    }

    #[test]
    fn out_of_range_options_are_refused() {
        let ok = ThreadsOptions {
            snapshots: 2,
            gap_ms: 50,
            max_depth: 64,
        };
        assert!(Threads::new(ok).is_ok());
        for bad in [
            ThreadsOptions { snapshots: 0, ..ok },
            ThreadsOptions {
                snapshots: MAX_SNAPSHOTS + 1,
                ..ok
            },
            ThreadsOptions {
                gap_ms: MAX_GAP_MS + 1,
                ..ok
            },
            ThreadsOptions { max_depth: 0, ..ok },
        ] {
            let e = Threads::new(bad).err().expect("refused");
            assert!(
                e.starts_with("thread snapshots:") && !e.contains('\n'),
                "{e}"
            );
        }
    }
}
