//! Windows timing's stack samples onto the tree: each sample the agent's
//! stack sampler took of a thread inside a silent root call (the agent
//! sends no other under windows timing) is credited to the path of that
//! thread's tree its stack falls on. The outermost frame of a root method
//! (`--root`) opens the path; each frame below it toward the leaf adds a
//! step, a JDK frame folded into its caller unless `--include` names its
//! class, as the probes leave the JDK out. A frame of a method the probes
//! announced takes its method id, so samples fall on the nodes the
//! counted calls made; any other (no probe, such as a trivial getter, or
//! a method not revealed yet) gets an id of its own, and the builder
//! makes nodes with samples and no call where no counted call went. A
//! sample with no root frame in its stack (cut at the sampler's depth, or
//! taken between two root calls) is not credited. The agent queues a
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

/// A sampled frame's method, as `FrameMethod` named it.
struct Frame {
    key: Key,
    /// Matches a `--root` pattern.
    root: bool,
    /// Folded into its caller (a JDK class `--include` does not name).
    folded: bool,
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
    next_id: u32,
    /// Session clock ticks a sample is worth (the sampling interval).
    weight: u64,
    interval_us: u64,
    pub(super) credited: u64,
    pub(super) outside: u64,
    /// The stack source the agent said it runs.
    pub(super) source: Option<sprig_wire::control::StackSource>,
    /// The timer's signals the agent's handler dropped outside silent
    /// root calls (`TimerOutside`).
    pub(super) dropped: u64,
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
            next_id: FIRST_FRAME_ID,
            weight: 0,
            interval_us,
            credited: 0,
            outside: 0,
            source: None,
            dropped: 0,
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
                self.probes
                    .insert((class.clone(), name.clone(), descriptor.clone()), *id);
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
                let folded = !root
                    && (is_jdk_class(class) || class.starts_with("sprig."))
                    && excluded_by(class, &self.include).is_none();
                self.frames.insert(
                    *id,
                    Frame {
                        key: (class.clone(), name.clone(), descriptor.clone()),
                        root,
                        folded,
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
            _ => {}
        }
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
        let mut path = std::mem::take(&mut self.path);
        path.clear();
        for &f in s.frames[..=at].iter().rev() {
            if let Some(id) = self.method_id(f, builder) {
                path.push(id);
            }
        }
        match self.threads.get(&s.thread) {
            Some(&thread) => {
                builder.credit_stack(thread, &path, self.weight);
                self.credited += 1;
                self.path = path;
            }
            None if self.waiting_count < MAX_WAITING => {
                self.waiting_count += 1;
                self.waiting.entry(s.thread).or_default().push(path);
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
