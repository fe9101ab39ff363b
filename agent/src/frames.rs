//! The frames running when a session attaches, and those left on a
//! replaced method version when it detaches.
//!
//! A class redefinition leaves every frame that is running one of the
//! class's methods on the method's old version. HotSpot deoptimizes such a
//! frame's compiled code at the redefinition and never compiles an old
//! method version again (its compiler refuses any method a redefinition
//! replaced, whether the new bytecodes equal the old ones or not), so a
//! loop that never returns runs interpreted for good: after the detach it
//! stays slower than before the attach. The agent therefore
//!
//! - notes at the attach which classes have methods on a thread's stack
//!   ([`begin_session`]), so that work ahead of need (dormant probes ahead)
//!   leaves those classes alone ([`running_class`]); and
//! - says at the detach which frames are left on an old version
//!   ([`left_on_old_versions`]): those whose method JVMTI calls obsolete
//!   (a redefinition changed its bytecodes while the frame ran: exact;
//!   such a frame was entered before the restore, and counts when it still
//!   runs a moment after it, so calls that were merely passing through
//!   instrumented code are not named), and those that ran through the
//!   session in a class sprig redefined without probes in their method
//!   (JVMTI does not call a method version obsolete when a redefinition
//!   kept its bytecodes, so this part is inferred: the same thread with
//!   the same frames outward from it at the attach and the detach).

use crate::ffi::{Jni, Jvmti, MethodId, ThreadStack};
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

/// Frames taken per thread (innermost first; a deeper stack loses its
/// outermost frames, where loops that never return usually sit). HotSpot
/// sets this many frames aside per thread while it takes the stacks
/// (16 bytes each: 16 KiB a thread).
const MAX_FRAMES: i32 = 1024;
/// At most this many frames are named in the warning.
const MAX_NAMED: usize = 12;

/// A frame's method: internal class name, method name, descriptor.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    pub class: String,
    pub name: String,
    pub descriptor: String,
}

/// One thread's stack, outermost frame first.
#[derive(Clone, Debug)]
struct Stack {
    thread: String,
    hash: i32,
    frames: Vec<Frame>,
}

/// What ran at the attach.
#[derive(Clone, Default)]
struct Attach {
    stacks: Vec<Stack>,
    /// The classes of their frames (internal names).
    classes: HashSet<String>,
    /// Methods of those classes the session gave probes.
    probed: HashSet<Frame>,
}

/// What ran at the attach (`None` between sessions).
static AT_ATTACH: Mutex<Option<Attach>> = Mutex::new(None);

/// A frame left on an old method version after the detach.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stale {
    pub thread: String,
    pub frame: Frame,
}

/// The session starts, before any class is redefined: notes every
/// thread's stack (the agent's own threads and classes left out).
pub fn begin_session(jvmti: &Jvmti, jni: Jni<'_>) {
    let stacks = stacks(jvmti, jni);
    let classes = stacks
        .iter()
        .flat_map(|t| t.frames.iter().map(|f| f.class.clone()))
        .collect();
    *crate::sync::lock(&AT_ATTACH) = Some(Attach {
        stacks,
        classes,
        probed: HashSet::new(),
    });
}

/// The session is over.
pub fn end_session() {
    *crate::sync::lock(&AT_ATTACH) = None;
}

/// Whether a method of class `internal` was running on some thread at the
/// attach.
pub fn running_class(internal: &str) -> bool {
    crate::sync::lock(&AT_ATTACH)
        .as_ref()
        .is_some_and(|a| a.classes.contains(internal))
}

/// The `run()` methods (`Runnable.run`, `Thread.run`: a thread's loop) on
/// a thread's stack at the attach, for revelation to spare: class
/// hierarchy analysis and the callback rule reach every loaded `run()`
/// from a `Runnable.run` call inside a root, and redefining a pool
/// thread's loop leaves it interpreted for good (a Jetty server: every
/// request dispatched through interpreted loops, and the JVM slower after
/// the detach than before the attach).
pub fn running_loops() -> Vec<Frame> {
    let guard = crate::sync::lock(&AT_ATTACH);
    let Some(a) = guard.as_ref() else {
        return Vec::new();
    };
    let loops: HashSet<&Frame> = a
        .stacks
        .iter()
        .flat_map(|t| t.frames.iter())
        .filter(|f| f.name == "run" && f.descriptor == "()V")
        .collect();
    loops.into_iter().cloned().collect()
}

/// The class file load hook gave probes to `name` (with `descriptor`) in
/// class `internal`: noted when the class ran at the attach.
pub fn note_probed(internal: &str, name: &str, descriptor: &str) {
    if let Some(a) = crate::sync::lock(&AT_ATTACH).as_mut()
        && a.classes.contains(internal)
    {
        a.probed.insert(Frame {
            class: internal.to_string(),
            name: name.to_string(),
            descriptor: descriptor.to_string(),
        });
    }
}

/// How long after the restore a frame on an obsolete method version must
/// still run to be named.
const STILL_RUNNING: std::time::Duration = std::time::Duration::from_millis(200);

/// After the restore: the frames now running an old version of their
/// method (see the module's docs). `redefined`: the classes the session
/// redefined (internal names).
pub fn left_on_old_versions(
    jvmti: &Jvmti,
    jni: Jni<'_>,
    redefined: &HashSet<String>,
) -> Vec<Stale> {
    let (before, probed) = crate::sync::lock(&AT_ATTACH)
        .as_ref()
        .map(|a| (a.stacks.clone(), a.probed.clone()))
        .unwrap_or_default();
    let look = || {
        let (now, obsolete) = stacks_now(jvmti, jni);
        stale_frames(&before, &now, &obsolete, redefined, &probed)
    };
    let first = look();
    if first.is_empty() {
        return first;
    }
    // Calls passing through instrumented code at the restore are gone
    // a moment later; what runs still is named.
    std::thread::sleep(STILL_RUNNING);
    look()
}

/// Every thread's stack now (outermost first) with, per frame, whether its
/// method is obsolete.
fn stacks_now(jvmti: &Jvmti, jni: Jni<'_>) -> (Vec<Stack>, Vec<Vec<bool>>) {
    let mut obsolete = Vec::new();
    let now = jni.with_local_frame(64, |jni| {
        let raw = jvmti.all_stack_traces(&jni, MAX_FRAMES).unwrap_or_default();
        let mut names = Names::default();
        raw.into_iter()
            .filter_map(|t| {
                let marks: Vec<bool> = t
                    .frames
                    .iter()
                    .rev()
                    .map(|m| jvmti.is_method_obsolete(*m).unwrap_or(false))
                    .collect();
                let stack = names.stack(jvmti, jni, &t)?;
                obsolete.push(marks);
                Some(stack)
            })
            .collect::<Vec<Stack>>()
    });
    (now, obsolete)
}

/// [`left_on_old_versions`] once the stacks are read: `obsolete[i][j]`
/// says whether frame `j` (outermost first) of `now[i]` runs an obsolete
/// method; `probed`, which methods running at the attach got probes.
fn stale_frames(
    before: &[Stack],
    now: &[Stack],
    obsolete: &[Vec<bool>],
    redefined: &HashSet<String>,
    probed: &HashSet<Frame>,
) -> Vec<Stale> {
    let mut out: Vec<Stale> = Vec::new();
    let mut push = |thread: &str, frame: &Frame| {
        let s = Stale {
            thread: thread.to_string(),
            frame: frame.clone(),
        };
        if !out.contains(&s) {
            out.push(s);
        }
    };
    for (i, t) in now.iter().enumerate() {
        let marks = obsolete.get(i).map_or(&[][..], |v| &v[..]);
        // Frames the thread kept from the attach to now: the common outer
        // part of both stacks.
        let kept = before
            .iter()
            .find(|b| b.hash == t.hash && b.thread == t.thread)
            .map_or(0, |b| {
                b.frames
                    .iter()
                    .zip(&t.frames)
                    .take_while(|(x, y)| x == y)
                    .count()
            });
        for (j, f) in t.frames.iter().enumerate() {
            let gone_old = marks.get(j).copied().unwrap_or(false);
            let kept_unprobed = j < kept && redefined.contains(&f.class) && !probed.contains(f);
            if gone_old || kept_unprobed {
                push(&t.thread, f);
            }
        }
    }
    out
}

/// The warning naming `stale` (`None` when there is none).
pub fn warning(stale: &[Stale]) -> Option<String> {
    if stale.is_empty() {
        return None;
    }
    let mut named: Vec<String> = stale
        .iter()
        .take(MAX_NAMED)
        .map(|s| {
            format!(
                "thread \"{}\": {}::{}",
                s.thread,
                s.frame.class.replace('/', "."),
                s.frame.name
            )
        })
        .collect();
    if stale.len() > MAX_NAMED {
        named.push(format!("and {} more", stale.len() - MAX_NAMED));
    }
    let n = stale.len();
    Some(format!(
        "{n} running frame{} left on an old version of {} method, which HotSpot never \
         compiles again: {}. sprig redefined the class while the frame ran, so a loop there \
         runs interpreted, slower than before the attach, until the frame returns (new \
         calls run the current version at full speed)",
        if n == 1 { " is" } else { "s are" },
        if n == 1 { "its" } else { "their" },
        named.join(", "),
    ))
}

/// Method names resolved once per call.
#[derive(Default)]
struct Names {
    known: HashMap<MethodIdKey, Option<Frame>>,
}

/// A method id as a map key.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct MethodIdKey(usize);

impl Names {
    fn frame(&mut self, jvmti: &Jvmti, jni: Jni<'_>, m: MethodId) -> Option<Frame> {
        self.known
            .entry(MethodIdKey(m.addr()))
            .or_insert_with(|| {
                jni.with_local_frame(16, |jni| {
                    let (name, descriptor) = jvmti.method_name(m).ok()?;
                    let class = jvmti.method_declaring_class(&jni, m).ok()?;
                    let sig = jvmti.class_signature(class).ok()?;
                    let class = sprig_rewriter::vocab::names::descriptor_class(&sig)?.to_string();
                    Some(Frame {
                        class,
                        name,
                        descriptor,
                    })
                })
            })
            .clone()
    }

    /// A thread's stack, outermost first (`None` for the agent's own).
    fn stack(&mut self, jvmti: &Jvmti, jni: Jni<'_>, t: &ThreadStack) -> Option<Stack> {
        if t.name == "sprig-control" {
            return None;
        }
        let frames: Vec<Frame> = t
            .frames
            .iter()
            .rev()
            .map(|m| {
                self.frame(jvmti, jni, *m).unwrap_or(Frame {
                    class: String::new(),
                    name: String::new(),
                    descriptor: String::new(),
                })
            })
            .collect();
        Some(Stack {
            thread: t.name.clone(),
            hash: t.hash,
            frames,
        })
    }
}

/// Every thread's stack but the agent's own.
fn stacks(jvmti: &Jvmti, jni: Jni<'_>) -> Vec<Stack> {
    jni.with_local_frame(64, |jni| {
        let raw = jvmti.all_stack_traces(&jni, MAX_FRAMES).unwrap_or_default();
        let mut names = Names::default();
        raw.iter()
            .filter_map(|t| names.stack(jvmti, jni, t))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(class: &str, name: &str) -> Frame {
        Frame {
            class: class.into(),
            name: name.into(),
            descriptor: "()V".into(),
        }
    }

    fn stack(thread: &str, frames: &[(&str, &str)]) -> Stack {
        Stack {
            thread: thread.into(),
            hash: 7,
            frames: frames.iter().map(|(c, m)| f(c, m)).collect(),
        }
    }

    #[test]
    fn obsolete_frames_and_kept_unprobed_frames_of_redefined_classes_are_stale() {
        let redefined: HashSet<String> = ["a/Spin".to_string()].into();
        let none: HashSet<Frame> = HashSet::new();
        let no_class: HashSet<String> = HashSet::new();
        let before = [stack(
            "w",
            &[
                ("java/lang/Thread", "run"),
                ("a/Spin", "loop"),
                ("a/Spin", "root"),
            ],
        )];
        let now = [stack(
            "w",
            &[
                ("java/lang/Thread", "run"),
                ("a/Spin", "loop"),
                ("a/Spin", "mix"),
            ],
        )];
        let w_loop = Stale {
            thread: "w".into(),
            frame: f("a/Spin", "loop"),
        };
        // Kept since the attach in a redefined class, without probes.
        let got = stale_frames(&before, &now, &[vec![false; 3]], &redefined, &none);
        assert_eq!(got, vec![w_loop.clone()]);
        // With probes, only JVMTI's word counts.
        let probed: HashSet<Frame> = [f("a/Spin", "loop")].into();
        let got = stale_frames(&before, &now, &[vec![false; 3]], &redefined, &probed);
        assert!(got.is_empty(), "{got:?}");
        let got = stale_frames(
            &before,
            &now,
            &[vec![false, true, false]],
            &redefined,
            &probed,
        );
        assert_eq!(got, vec![w_loop.clone()]);
        // An obsolete frame counts whatever the attach saw.
        let got = stale_frames(&[], &now, &[vec![false, false, true]], &no_class, &none);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].frame, f("a/Spin", "mix"));
        // Another thread (or the same name with another identity) kept nothing.
        let mut other = now[0].clone();
        other.hash = 8;
        let got = stale_frames(&before, &[other], &[vec![false; 3]], &redefined, &none);
        assert!(got.is_empty(), "{got:?}");
        // Classes not redefined are never stale by inference.
        let got = stale_frames(&before, &before, &[vec![false; 3]], &no_class, &none);
        assert!(got.is_empty());
        // Recursion names a frame once.
        let deep = [stack("w", &[("a/Spin", "loop"), ("a/Spin", "loop")])];
        let got = stale_frames(&[], &deep, &[vec![true, true]], &no_class, &none);
        assert_eq!(got.len(), 1);
    }

    #[test]
    fn the_warning_names_each_frame_and_bounds_the_list() {
        assert_eq!(warning(&[]), None);
        let one = Stale {
            thread: "spin-same".into(),
            frame: f("fixtures/Spin", "loop"),
        };
        let w = warning(std::slice::from_ref(&one)).unwrap();
        assert!(
            w.starts_with("1 running frame is left on an old version"),
            "{w}"
        );
        assert!(
            w.contains("thread \"spin-same\": fixtures.Spin::loop"),
            "{w}"
        );
        let many = vec![one; MAX_NAMED + 3];
        let w = warning(&many).unwrap();
        assert!(w.contains("and 3 more"), "{w}");
        assert_eq!(w.matches("fixtures.Spin::loop").count(), MAX_NAMED);
    }
}
