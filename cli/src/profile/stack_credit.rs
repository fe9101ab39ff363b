//! Windows timing's stack samples onto the tree: each sample the agent's
//! stack sampler took of a thread inside a silent root call (the agent
//! sends no other under windows timing) is credited to the path of that
//! thread's tree its stack falls on. The outermost frame of a root method
//! (`--root`) opens the path; each frame below it toward the leaf adds a
//! step, a JDK frame folded into its caller unless `--include` names its
//! class, as the probes leave the JDK out. A frame of a method the probes
//! announced takes its method id, so samples fall on the nodes the
//! counted calls made; any other (no probe, such as a trivial getter)
//! gets an id of its own, and the builder makes nodes with samples and no
//! call where no counted call went. A method the probes announce only
//! later (revealed in a counting window after a silent one sampled it) must
//! not get a node of its own beside the one its counted calls make: a
//! sample with a frame of a method not announced yet is held until every
//! such method is announced, and what is still held at the session's end
//! is credited then, with ids of their own. A sample with no root frame in
//! its stack (cut at the sampler's depth, or taken between two root calls)
//! is not credited; nor is one whose leaf frames are sprig's own probes
//! (the roots' entry and exit natives, an inner probe's dormant check):
//! that time is sprig's, not the program's, and such samples are counted
//! apart (`in_probes`) with the samples not credited. The agent queues a
//! thread's `Thread` message while the sampler sends at once, so the
//! samples of a thread not named yet wait (their paths resolved) until it
//! is; those of a thread never named count as outside.

use std::collections::HashMap;

use sprig::pattern::excluded_by;
use sprig_callgraph::CctBuilder;
use sprig_callgraph::stacks::is_jdk_class;
use sprig_rewriter::pattern::MethodPattern;
use sprig_wire::Message;
use sprig_wire::control::StackSample;

/// First id handed to a sampled method without a probe id (probe ids of a
/// session stay far below).
const FIRST_FRAME_ID: u32 = 0xC000_0000;

type Key = (String, String, String);

/// Samples kept at most while their threads are not named yet.
const MAX_WAITING: usize = 100_000;
/// Samples held at most while some of their methods are not announced
/// (beyond, a sample is credited at once with ids of their own).
const MAX_HELD: usize = 100_000;

/// A sampled frame's method, as `FrameMethod` named it.
struct Frame {
    key: Key,
    /// Matches a `--root` pattern.
    root: bool,
    /// Folded into its caller (a JDK class `--include` does not name).
    folded: bool,
    /// A method of sprig's own (`sprig.*`): a sample whose leaf frame it is
    /// is not credited.
    sprig: bool,
    /// Its id when it has no probe id (handed out at its first use).
    own_id: Option<u32>,
}

/// The mapping of one session's stack samples.
pub(super) struct StackCredit {
    roots: Vec<MethodPattern>,
    include: Vec<String>,
    frames: HashMap<u32, Frame>,
    /// Probe method ids by (class, name, descriptor), from `Method`.
    probes: HashMap<Key, u32>,
    /// Java thread id -> sprig thread index, from `Thread`.
    threads: HashMap<u64, u32>,
    /// Paths of samples of threads not named yet, by Java thread id.
    waiting: HashMap<u64, Vec<Vec<u32>>>,
    waiting_count: usize,
    /// Samples (thread, frames from the root to the leaf) with a frame of
    /// a method not announced yet, and the methods they wait for.
    held: Vec<(u64, Vec<u32>)>,
    held_for: std::collections::HashSet<Key>,
    next_id: u32,
    /// Session clock ticks a sample is worth (the sampling interval).
    weight: u64,
    interval_us: u64,
    pub(super) credited: u64,
    pub(super) outside: u64,
    /// Samples whose leaf frames are sprig's probes (not credited).
    pub(super) in_probes: u64,
    /// The stack source the agent said it runs.
    pub(super) source: Option<sprig_wire::control::StackSource>,
    /// The timer's signals the agent's handler dropped outside silent
    /// root calls (`TimerOutside`).
    pub(super) dropped: u64,
    /// Original-bytes silence: the switches so far (`WindowSwitches`).
    pub(super) switches: Option<sprig_wire::control::WindowSwitches>,
    path: Vec<u32>,
}

impl StackCredit {
    /// `roots` and `include` as given on the command line (already
    /// validated), a sample every `interval_us`.
    pub(super) fn new(roots: &[String], include: &[String], interval_us: u64) -> StackCredit {
        StackCredit {
            roots: roots
                .iter()
                .filter_map(|r| MethodPattern::parse(r).ok())
                .collect(),
            include: include.to_vec(),
            frames: HashMap::new(),
            probes: HashMap::new(),
            threads: HashMap::new(),
            waiting: HashMap::new(),
            waiting_count: 0,
            held: Vec::new(),
            held_for: Default::default(),
            next_id: FIRST_FRAME_ID,
            weight: 0,
            interval_us,
            credited: 0,
            outside: 0,
            in_probes: 0,
            source: None,
            dropped: 0,
            switches: None,
            path: Vec::new(),
        }
    }

    pub(super) fn interval_us(&self) -> u64 {
        self.interval_us
    }

    /// Takes what it needs from a control message, crediting the samples
    /// of a `StackSamples` to `builder`.
    pub(super) fn on_message(&mut self, msg: &Message, builder: &mut CctBuilder) {
        match msg {
            Message::Started { ticks_per_sec, .. } => {
                self.weight = (u128::from(*ticks_per_sec) * u128::from(self.interval_us)
                    / 1_000_000)
                    .try_into()
                    .unwrap_or(u64::MAX);
            }
            Message::Method {
                id,
                class,
                name,
                descriptor,
            } => {
                let key = (class.clone(), name.clone(), descriptor.clone());
                let waited = self.held_for.remove(&key);
                self.probes.insert(key, *id);
                if waited {
                    self.release(builder, false);
                }
            }
            Message::Thread { index, java_id, .. } => {
                self.threads.insert(*java_id, *index);
                for path in self.waiting.remove(java_id).unwrap_or_default() {
                    self.waiting_count -= 1;
                    builder.credit_stack(*index, &path, self.weight);
                    self.credited += 1;
                }
            }
            Message::FrameMethod {
                id,
                class,
                name,
                descriptor,
            } => {
                let root = self
                    .roots
                    .iter()
                    .any(|p| p.matches(class, name, descriptor));
                let sprig = class.starts_with("sprig.");
                let folded = !root
                    && (is_jdk_class(class) || sprig)
                    && excluded_by(class, &self.include).is_none();
                self.frames.insert(
                    *id,
                    Frame {
                        key: (class.clone(), name.clone(), descriptor.clone()),
                        root,
                        folded,
                        sprig,
                        own_id: None,
                    },
                );
            }
            Message::StackSamples { samples, .. } => {
                for s in samples {
                    self.credit(s, builder);
                }
            }
            Message::StackSource(source) => self.source = Some(*source),
            Message::TimerOutside { signals } => self.dropped = self.dropped.max(*signals),
            Message::WindowSwitches(s) => self.switches = Some(*s),
            _ => {}
        }
    }

    /// The session ends: credits what is still held, its methods never
    /// announced given ids of their own.
    pub(super) fn finish(&mut self, builder: &mut CctBuilder) {
        self.release(builder, true);
        self.held_for.clear();
    }

    /// Credits the held samples whose methods are all announced now
    /// (`all`: every held sample).
    fn release(&mut self, builder: &mut CctBuilder, all: bool) {
        let held = std::mem::take(&mut self.held);
        for (thread, frames) in held {
            if all || self.unannounced(&frames).next().is_none() {
                self.credit_frames(thread, &frames, builder);
            } else {
                self.held.push((thread, frames));
            }
        }
    }

    /// The keys of the methods of `frames` that take an id of their own
    /// now: named, not folded, not announced by the probes.
    fn unannounced<'a>(&'a self, frames: &'a [u32]) -> impl Iterator<Item = &'a Key> + 'a {
        frames.iter().filter_map(|f| {
            let m = self.frames.get(f)?;
            (!m.folded && !self.probes.contains_key(&m.key)).then_some(&m.key)
        })
    }

    /// Samples still waiting for their thread's name (counted as
    /// outside at the end).
    pub(super) fn unnamed(&self) -> u64 {
        self.waiting_count as u64
    }

    /// Credits one sample (frames leaf first).
    fn credit(&mut self, s: &StackSample, builder: &mut CctBuilder) {
        let outermost_root = s
            .frames
            .iter()
            .rposition(|f| self.frames.get(f).is_some_and(|m| m.root));
        let Some(at) = outermost_root else {
            self.outside += 1;
            return;
        };
        let in_probes = s
            .frames
            .first()
            .and_then(|f| self.frames.get(f))
            .is_some_and(|m| m.sprig && !m.root);
        if in_probes {
            self.in_probes += 1;
            return;
        }
        let frames = &s.frames[..=at];
        if self.held.len() < MAX_HELD && self.unannounced(frames).next().is_some() {
            let keys: Vec<Key> = self.unannounced(frames).cloned().collect();
            self.held_for.extend(keys);
            self.held.push((s.thread, frames.to_vec()));
            return;
        }
        self.credit_frames(s.thread, frames, builder);
    }

    /// Credits the sample of Java thread `thread` whose frames are
    /// `frames` (leaf first, the outermost root's last).
    fn credit_frames(&mut self, thread: u64, frames: &[u32], builder: &mut CctBuilder) {
        let mut path = std::mem::take(&mut self.path);
        path.clear();
        for &f in frames.iter().rev() {
            if let Some(id) = self.method_id(f, builder) {
                path.push(id);
            }
        }
        match self.threads.get(&thread) {
            Some(&thread) => {
                builder.credit_stack(thread, &path, self.weight);
                self.credited += 1;
                self.path = path;
            }
            None if self.waiting_count < MAX_WAITING => {
                self.waiting_count += 1;
                self.waiting.entry(thread).or_default().push(path);
            }
            None => self.outside += 1,
        }
    }

    /// The tree's method id of frame `f`, `None` when it folds into its
    /// caller (or was never named).
    fn method_id(&mut self, f: u32, builder: &mut CctBuilder) -> Option<u32> {
        let frame = self.frames.get_mut(&f)?;
        if frame.folded {
            return None;
        }
        if let Some(&id) = self.probes.get(&frame.key) {
            return Some(id);
        }
        if let Some(id) = frame.own_id {
            return Some(id);
        }
        let id = self.next_id;
        self.next_id = self.next_id.saturating_add(1);
        frame.own_id = Some(id);
        let (class, name, descriptor) = &frame.key;
        builder.set_method(id, class, name, descriptor);
        Some(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sprig_wire::control::SampledState;

    fn frame(id: u32, class: &str, name: &str) -> Message {
        Message::FrameMethod {
            id,
            class: class.into(),
            name: name.into(),
            descriptor: "()V".into(),
        }
    }

    fn sample(thread: u64, frames: &[u32]) -> Message {
        Message::StackSamples {
            time_ns: 0,
            cost_ns: 0,
            samples: vec![StackSample {
                thread,
                state: SampledState::Running,
                cpu_ns: 0,
                frames: frames.to_vec(),
                truncated: false,
            }],
        }
    }

    /// A builder and a credit with thread 7 named (index 1), the root
    /// `app.Main::root` announced as method 1, and `messages` applied.
    fn session(messages: &[Message]) -> (CctBuilder, StackCredit) {
        let mut b = CctBuilder::new(1_000_000_000);
        b.set_timing(sprig_callgraph::Timing::Sampled);
        b.set_windows(true);
        let mut c = StackCredit::new(&["app.Main::root".into()], &[], 1000);
        let base = [
            Message::Started {
                ticks_per_sec: 1_000_000_000,
                clock: sprig_wire::ClockKind::Monotonic,
            },
            Message::Thread {
                index: 1,
                java_id: 7,
                name: "main".into(),
                tid: 0,
            },
            method(1, "root"),
        ];
        for m in base.iter().chain(messages) {
            b.apply_message(m);
            c.on_message(m, &mut b);
        }
        (b, c)
    }

    fn method(id: u32, name: &str) -> Message {
        Message::Method {
            id,
            class: "app.Main".into(),
            name: name.into(),
            descriptor: "()V".into(),
        }
    }

    /// Thread 1's nodes as (method name, calls, samples), sorted.
    fn nodes(b: CctBuilder) -> Vec<(String, u64, u64)> {
        let p = b.finish();
        let Some(t) = p.threads.iter().find(|t| t.index == 1) else {
            return Vec::new();
        };
        let mut seen: Vec<(String, u64, u64)> = t
            .tree
            .nodes
            .iter()
            .map(|n| (p.methods[&n.method].name.clone(), n.calls, n.samples))
            .collect();
        seen.sort();
        seen
    }

    fn apply(b: &mut CctBuilder, c: &mut StackCredit, m: &Message) {
        b.apply_message(m);
        c.on_message(m, b);
    }

    #[test]
    fn a_sample_taken_before_its_method_is_announced_lands_on_the_announced_node() {
        let (mut b, mut c) = session(&[
            frame(10, "app.Main", "main"),
            frame(11, "app.Main", "root"),
            frame(12, "app.Main", "work"),
        ]);
        // `work` is revealed (announced) only after a silent window sampled it
        c.on_message(&sample(7, &[12, 11, 10]), &mut b);
        apply(&mut b, &mut c, &method(2, "work"));
        c.on_message(&sample(7, &[12, 11, 10]), &mut b);
        c.finish(&mut b);
        assert_eq!((c.credited, c.outside), (2, 0));
        assert_eq!(
            nodes(b),
            vec![("root".into(), 0, 0), ("work".into(), 0, 2)],
            "one node for `work`, holding both samples"
        );
    }

    #[test]
    fn a_sample_of_a_method_never_announced_is_credited_at_the_end() {
        let (mut b, mut c) = session(&[
            method(2, "work"),
            frame(10, "app.Main", "main"),
            frame(11, "app.Main", "root"),
            frame(12, "app.Main", "work"),
            frame(14, "app.Main", "getter"),
        ]);
        c.on_message(&sample(7, &[14, 12, 11, 10]), &mut b);
        c.on_message(&sample(7, &[12, 11, 10]), &mut b);
        c.finish(&mut b);
        assert_eq!((c.credited, c.outside), (2, 0));
        assert_eq!(
            nodes(b),
            vec![
                ("getter".into(), 0, 1),
                ("root".into(), 0, 0),
                ("work".into(), 0, 1),
            ]
        );
    }

    #[test]
    fn samples_in_sprigs_probes_are_dropped_and_counted() {
        let (mut b, mut c) = session(&[
            method(2, "work"),
            frame(10, "app.Main", "main"),
            frame(11, "app.Main", "root"),
            frame(12, "app.Main", "work"),
            frame(20, "sprig.rt.Probe", "nRootEnter"),
            frame(21, "sprig.rt.Probe", "rootEnter"),
            frame(22, "sprig.rt.Probe", "enter"),
        ]);
        // in the root's own entry probe (native under its Java side)
        c.on_message(&sample(7, &[20, 21, 11, 10]), &mut b);
        // in an inner method's dormant probe
        c.on_message(&sample(7, &[22, 12, 11, 10]), &mut b);
        // the program's own time
        c.on_message(&sample(7, &[12, 11, 10]), &mut b);
        c.finish(&mut b);
        assert_eq!((c.credited, c.in_probes, c.outside), (1, 2, 0));
        assert_eq!(
            nodes(b),
            vec![("root".into(), 0, 0), ("work".into(), 0, 1)],
            "no sample of sprig's probes lands on the root or on `work`"
        );
    }

    #[test]
    fn samples_fall_on_the_path_below_the_outermost_root() {
        let mut b = CctBuilder::new(1_000_000_000);
        b.set_timing(sprig_callgraph::Timing::Sampled);
        b.set_windows(true);
        let mut c = StackCredit::new(&["app.Main::root".into()], &[], 1000);
        for m in [
            Message::Started {
                ticks_per_sec: 1_000_000_000,
                clock: sprig_wire::ClockKind::Monotonic,
            },
            Message::Thread {
                index: 1,
                java_id: 7,
                name: "main".into(),
                tid: 0,
            },
            Message::Method {
                id: 1,
                class: "app.Main".into(),
                name: "root".into(),
                descriptor: "()V".into(),
            },
            Message::Method {
                id: 2,
                class: "app.Main".into(),
                name: "work".into(),
                descriptor: "()V".into(),
            },
            frame(10, "app.Main", "main"),
            frame(11, "app.Main", "root"),
            frame(12, "app.Main", "work"),
            frame(13, "java.util.ArrayList", "get"),
            frame(14, "app.Main", "getter"),
        ] {
            b.apply_message(&m);
            c.on_message(&m, &mut b);
        }
        // a thread not named yet: its sample waits for its name
        c.on_message(&sample(8, &[12, 11]), &mut b);
        assert_eq!((c.credited, c.unnamed()), (0, 1));
        let named = Message::Thread {
            index: 2,
            java_id: 8,
            name: "other".into(),
            tid: 0,
        };
        b.apply_message(&named);
        c.on_message(&named, &mut b);
        assert_eq!((c.credited, c.unnamed()), (1, 0));
        // leaf first: getter <- ArrayList.get <- work <- root <- main
        c.on_message(&sample(7, &[14, 13, 12, 11, 10]), &mut b);
        c.on_message(&sample(7, &[12, 11, 10]), &mut b);
        // no root frame: not credited
        c.on_message(&sample(7, &[12, 10]), &mut b);
        // `getter` is never announced: its sample is credited at the end
        assert_eq!((c.credited, c.outside), (2, 1));
        c.finish(&mut b);
        assert_eq!((c.credited, c.outside), (3, 1));
        let p = b.finish();
        let t = p.threads.iter().find(|t| t.index == 1).expect("thread 1");
        let name = |i: usize| p.methods[&t.tree.nodes[i].method].name.clone();
        let mut seen: Vec<(String, u64, u64)> = (0..t.tree.nodes.len())
            .map(|i| (name(i), t.tree.nodes[i].calls, t.tree.nodes[i].samples))
            .collect();
        seen.sort();
        assert_eq!(
            seen,
            vec![
                ("getter".into(), 0, 1),
                ("root".into(), 0, 0),
                ("work".into(), 0, 1),
            ]
        );
    }
}
