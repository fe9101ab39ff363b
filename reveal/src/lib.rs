//! Call-subgraph revelation: which methods to instrument, and when.
//!
//! Pure logic over a mirror of the loaded classes ([`Hierarchy`]); the agent
//! feeds it class loads and first calls from its JVMTI callbacks (behind its
//! own mutex) and applies the redefinition batches it hands back.
//!
//! # Scheme B (lazy, the default)
//!
//! A method is *reachable* once a root pattern names it or a call site of a
//! reachable method that has run at least once can reach it; it is
//! *instrumented* once it is reachable, its class is loaded and
//! instrumentable ([`Filters`]) and it has bytecode. Call sites reach:
//!
//! - `invokestatic` / `invokespecial`: the declaration found by resolving
//!   upward from the owner ([`Hierarchy::resolve`]);
//! - `invokevirtual` / `invokeinterface`: the resolved declaration plus the
//!   method every loaded subtype of the owner selects
//!   ([`Hierarchy::virtual_targets`]); the call is remembered, so a subtype
//!   loaded later gets its selected method instrumented as it loads;
//! - `invokedynamic` (lambda and method-reference implementation methods) and
//!   method-handle constants: the named method, dispatched virtually when it
//!   is an overridable instance method.
//!
//! Calls whose owner is not loaded yet leave a placeholder node that is
//! resolved when the owner loads.
//!
//! # The JDK callback rule
//!
//! Filtered classes (the JDK by default) are not instrumented and not
//! scanned: their code is traversed for nothing. User code they call back
//! is found as follows:
//!
//! 1. Lambdas and method references handed to the JDK are revealed by the
//!    `invokedynamic` that creates them (edge kind `Dynamic`).
//! 2. A virtual or interface call from the subgraph on a JDK type
//!    (`comparator.compare(a, b)`) reaches the overrides in user classes like
//!    any virtual call.
//! 3. Objects handed to the JDK: a user class is *live* once one of its
//!    constructors or instance methods is reachable (its instances flow
//!    through the subgraph). Once the subgraph has called into filtered code
//!    at all (any call other than `Object.<init>`), every live class gets its
//!    overrides of methods declared by its filtered `java.*` supertypes
//!    marked reachable (edge kind `Callback`): `Comparator.compare`,
//!    `Runnable.run`, `Callable.call`, `Function.apply`,
//!    `Iterable.iterator`, `Comparable.compareTo`,
//!    `Object.equals/hashCode/toString`, … — `finalize` excepted (the
//!    finalizer thread never runs inside the root). Only `java.*` supertypes
//!    count ([`CALLBACK_TYPES`]): the class library is what takes objects
//!    and calls them back, while the other JDK packages are mostly API
//!    interfaces a program implements *and calls itself*
//!    (`javax.lang.model`, `com.sun.source` in javac), which rule 2 already
//!    covers. Counting them too instruments ~700 more never-called javac
//!    methods (6,557 instead of 5,859 for 3,969 called; see
//!    `tests/reveal_javac.rs`). With
//!    [`RevealConfig::live_callbacks_where_they_run`] (the agent's Scheme B
//!    with dormant probes) this rule marks nothing: a live class is
//!    redefined for its reachable methods, its callbacks hold dormant
//!    probes, and those the JDK calls inside a root context are revealed
//!    there ([`Revealer::on_entered`], edge kind `Entered`).
//!
//! 4. Objects created outside the subgraph and handed to the JDK from inside
//!    it (a comparator the caller of the root passes in): classes that
//!    implement a callback interface ([`CALLBACK_INTERFACES`]:
//!    `java.util.function.*`, `Comparator`, `Runnable`, `Callable`,
//!    `EventListener`) get their implementations of those interfaces marked
//!    whether live or not, once the subgraph calls into filtered code (and,
//!    being reachable, these make their class live for rule 3).
//!
//! Missed by design: JDK callbacks through other `java.*` types into objects
//! of a class none of whose constructors or instance methods is reachable in
//! the subgraph (e.g. `toString` of an object created before the root ran,
//! printed from inside it). Naming such methods as extra roots covers them.
//!
//! # What is never instrumented
//!
//! The JDK code sprig's own probes call ([`PROBES_CALL`]: `Thread.getId`,
//! `Unsafe`, the FFM downcall path of JDK 22+, ...) is neither a root nor
//! revealed, whatever the patterns and filters say: probes in it would
//! call themselves without end.
//!
//! # Reflection
//!
//! Call sites of `Method.invoke`, `Constructor.newInstance`,
//! `Class.newInstance` and `MethodHandle.invoke/invokeExact/
//! invokeWithArguments` inside the subgraph are reported in
//! [`Revealed::reflective_sites`]; when the agent learns the actual target
//! it calls [`Revealer::on_reflective_call`].
//!
//! # Scheme A (eager)
//!
//! [`Revealer::reveal_all`] scans every instrumented method transitively at
//! once (the caller supplies call sites per method); classes loaded later go
//! through the same [`Revealer::on_class_loaded`], which scans the new
//! methods of that class at once and reports whether methods of other
//! classes still wait for a `reveal_all`.
//!
//! # Protocol for the agent
//!
//! 1. Feed every class already loaded through [`Revealer::on_class_loaded`]
//!    (any order), then [`Revealer::add_root`] for each root.
//! 2. Lazy: apply [`Revealer::take_redefinitions`]. Eager: apply
//!    [`Revealer::reveal_all`].
//! 3. ClassFileLoadHook: [`Revealer::on_class_loaded`]; instrument the
//!    returned methods in the bytes being loaded; redefine
//!    [`LoadOutcome::redefine`] after the hook returns (from a service
//!    thread); in eager mode call `reveal_all` when `scan_pending`.
//! 4. First call of a method with `needs_first_call_check`:
//!    [`Revealer::on_first_call`] with the method's call sites (rewriter
//!    `callees` on its original bytes); redefine the returned batch.
//!
//! 5. Reflective sites in a batch: when the agent sees the target of such a
//!    call (e.g. by watching `Method.invoke`), [`Revealer::on_reflective_call`].
//!
//! Every batch lists *all* instrumented methods of each class (the agent
//! rewrites the original bytes), with [`Instrument::added`] set on the new
//! ones. Classes in a batch are sorted by name. The mirror counts a class as
//! loaded from its `on_class_loaded` on, so under concurrent loading a batch
//! can name a class whose load hook has returned but which the JVM has not
//! defined yet: the agent redefines it once it is prepared. Hidden classes
//! other than lambda proxies (which are recognised by name and never
//! instrumented) should not be passed in: they cannot be redefined.

#![forbid(unsafe_code)]

mod filter;
mod hierarchy;
mod probe_path;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::fmt;

use petgraph::Direction;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;
use sprig_rewriter::vocab::access::ACC_STATIC;
use sprig_rewriter::vocab::names::{binary_name, internal_name};
use sprig_rewriter::{CallKind, CallSite, Check, ClassInfo};

use sprig_rewriter::pattern::MethodPattern;

pub use filter::{
    CALLBACK_TYPES, ClassFilter, DEFAULT_EXCLUDES, FilterError, Filters, SPRIG_CLASSES,
};
pub use hierarchy::{Hierarchy, LoadedClass, has_code, is_virtual};
pub use probe_path::{PROBES_CALL, left_out_line, probe_entries_of, probes_call};

/// A method: internal class name, method name, descriptor.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MethodKey {
    pub class: String,
    pub name: String,
    pub descriptor: String,
}

impl MethodKey {
    pub fn new(class: &str, name: &str, descriptor: &str) -> MethodKey {
        MethodKey {
            class: class.to_string(),
            name: name.to_string(),
            descriptor: descriptor.to_string(),
        }
    }
}

impl fmt::Display for MethodKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}{}", self.class, self.name, self.descriptor)
    }
}

/// Dense id of an instrumented method, the value passed to the probes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MethodId(pub u32);

/// Why a method became reachable: the kind of the edge that first reached it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EdgeKind {
    /// Named by a root pattern.
    Root,
    Static,
    Special,
    Virtual,
    Interface,
    Dynamic,
    MethodHandle,
    /// Reported by the agent as the target of a reflective call.
    Reflective,
    /// An override in a live user class of a method of a filtered supertype
    /// (the JDK callback rule).
    Callback,
    /// Ran inside a root context with dormant probes: a method no rule
    /// reached, called on a path revelation does not see (JDK code calling
    /// back through a type the callback rule leaves out, say), revealed as
    /// it runs ([`Revealer::on_entered`]).
    Entered,
}

impl From<CallKind> for EdgeKind {
    fn from(kind: CallKind) -> EdgeKind {
        match kind {
            CallKind::Static => EdgeKind::Static,
            CallKind::Special => EdgeKind::Special,
            CallKind::Virtual => EdgeKind::Virtual,
            CallKind::Interface => EdgeKind::Interface,
            CallKind::Dynamic => EdgeKind::Dynamic,
            CallKind::MethodHandle => EdgeKind::MethodHandle,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scheme {
    #[default]
    Lazy,
    Eager,
}

/// How a [`Revealer`] filters and which scheme it follows.
#[derive(Clone, Debug, Default)]
pub struct RevealConfig {
    pub scheme: Scheme,
    /// Classes to instrument even though a default JDK exclusion names them.
    pub include: Vec<ClassFilter>,
    /// Classes never to instrument (wins over everything).
    pub exclude: Vec<ClassFilter>,
    /// The JDK callback rule leaves live classes alone: the agent gives
    /// every method of a class it redefines probes, dormant where no rule
    /// reached the method, and a dormant method that runs inside a root
    /// context is revealed there ([`Revealer::on_entered`]). A live class
    /// is one with a reachable constructor or instance method, so it is
    /// redefined, and what the JDK calls back of it is caught where it
    /// runs instead of instrumented in advance. Classes that are not live
    /// but implement a callback interface (rule 4) are marked as before:
    /// nothing else redefines them. Set by the agent for Scheme B with
    /// dormant probes.
    pub live_callbacks_where_they_run: bool,
}

impl RevealConfig {
    /// A configuration from pattern texts (`com.sun.tools.javac.**`).
    pub fn with_patterns(
        scheme: Scheme,
        include: &[&str],
        exclude: &[&str],
    ) -> Result<RevealConfig, FilterError> {
        let parse = |v: &[&str]| -> Result<Vec<ClassFilter>, FilterError> {
            v.iter().map(|t| ClassFilter::parse(t)).collect()
        };
        Ok(RevealConfig {
            scheme,
            include: parse(include)?,
            exclude: parse(exclude)?,
            live_callbacks_where_they_run: false,
        })
    }
}

/// One method to instrument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instrument {
    pub id: MethodId,
    pub name: String,
    pub descriptor: String,
    pub is_root: bool,
    /// Whether the method's first run must be reported through
    /// [`Revealer::on_first_call`] (lazy scheme, method with calls, not yet
    /// scanned).
    pub needs_first_call_check: bool,
    /// Not handed out in any earlier outcome or batch.
    pub added: bool,
}

/// All instrumented methods of one loaded class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassBatch {
    /// Internal name.
    pub class: String,
    /// Every class loader id that defined this name.
    pub loaders: Vec<u64>,
    pub methods: Vec<Instrument>,
}

/// A reflective call site inside the subgraph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReflectiveSite {
    pub caller: MethodId,
    pub site: CallSite,
}

/// What a revelation step asks the agent to do: redefine these already
/// loaded classes (one redefinition batch), and watch these reflective sites.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Revealed {
    pub classes: Vec<ClassBatch>,
    pub reflective_sites: Vec<ReflectiveSite>,
}

impl Revealed {
    pub fn is_empty(&self) -> bool {
        self.classes.is_empty() && self.reflective_sites.is_empty()
    }

    /// Number of methods newly instrumented by this batch.
    pub fn added(&self) -> usize {
        self.classes
            .iter()
            .flat_map(|c| &c.methods)
            .filter(|m| m.added)
            .count()
    }

    /// Folds a later batch into this one, so the agent can apply several
    /// revelation steps (e.g. first calls from several threads) in one
    /// redefinition: a later batch of a class supersedes the earlier one
    /// (it lists every instrumented method), keeping `added` on methods
    /// either batch added. Classes stay sorted by name.
    pub fn merge(&mut self, later: Revealed) {
        for batch in later.classes {
            match self
                .classes
                .binary_search_by(|c| c.class.as_str().cmp(&batch.class))
            {
                Ok(i) => {
                    let earlier = std::mem::replace(&mut self.classes[i], batch);
                    for m in &mut self.classes[i].methods {
                        m.added |= earlier.methods.iter().any(|e| e.id == m.id && e.added);
                    }
                }
                Err(i) => self.classes.insert(i, batch),
            }
        }
        self.reflective_sites.extend(later.reflective_sites);
    }
}

/// The result of [`Revealer::on_class_loaded`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadOutcome {
    /// Methods of the loading class to instrument in the bytes being loaded.
    pub methods: Vec<Instrument>,
    /// Other, already loaded classes that now need redefinition (rare: an
    /// inherited implementation became reachable through the new class).
    pub redefine: Revealed,
    /// Eager scheme: methods of other classes wait to be scanned; call
    /// [`Revealer::reveal_all`].
    pub scan_pending: bool,
}

/// Counters for the report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RevealStats {
    pub loaded_classes: usize,
    /// Methods handed out for instrumentation.
    pub instrumented: usize,
    /// Reachable methods, instrumented or not (placeholders included).
    pub reachable: usize,
    /// Reachable methods whose class is not loaded yet.
    pub reachable_unloaded: usize,
    /// Instrumented methods by the kind of edge that first reached them.
    pub revealed_by: BTreeMap<EdgeKind, usize>,
    /// Methods scanned (first calls in the lazy scheme, scans in the eager).
    pub scanned: usize,
    /// Non-empty redefinition batches handed out.
    pub redefinition_batches: usize,
    pub reflective_sites: usize,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RevealError {
    #[error("unknown method id {0:?}")]
    UnknownMethod(MethodId),
}

#[derive(Clone, Debug)]
struct NodeState {
    revealed_by: EdgeKind,
    is_root: bool,
    id: Option<MethodId>,
    scanned: bool,
    reported: bool,
}

/// A virtual or interface call seen in the subgraph, by owner and signature.
#[derive(Clone, Debug)]
struct VirtualCall {
    kind: EdgeKind,
    root: bool,
    callers: Vec<(NodeIndex, EdgeKind)>,
    targets: Vec<NodeIndex>,
}

/// The revelation state machine (see the module documentation).
///
/// ```
/// use sprig_rewriter::pattern::MethodPattern;
/// use sprig_reveal::{RevealConfig, Revealer};
/// use sprig_rewriter::{CallKind, CallSite, ClassInfo, MethodInfo};
///
/// let method = |name: &str, has_calls| MethodInfo {
///     name: name.into(),
///     descriptor: "()V".into(),
///     access: 0x0009, // public static
///     code_length: 4,
///     has_calls,
/// };
/// let class = |name: &str, methods| ClassInfo {
///     name: name.into(),
///     super_name: Some("java/lang/Object".into()),
///     interfaces: vec![],
///     access: 0x0001,
///     major_version: 61,
///     methods,
/// };
/// let mut rv = Revealer::new(RevealConfig::default());
/// rv.add_root(MethodPattern::parse("com.acme.Main::run").unwrap());
/// // ClassFileLoadHook of com/acme/Main: instrument `run`, with a first-call check.
/// let out = rv.on_class_loaded(class("com/acme/Main", vec![method("run", true)]), 1, Vec::new);
/// let run = &out.methods[0];
/// assert!(run.is_root && run.needs_first_call_check);
/// // `run` runs for the first time; it calls Util.help, whose class is not loaded yet.
/// let help = CallSite {
///     kind: CallKind::Static,
///     owner: "com/acme/Util".into(),
///     name: "help".into(),
///     descriptor: "()V".into(),
///     offset: 0,
/// };
/// let batch = rv.on_first_call(run.id, &[help]).unwrap();
/// assert!(batch.classes.is_empty());
/// // Util loads later: `help` is instrumented in its load, no redefinition.
/// let out = rv.on_class_loaded(class("com/acme/Util", vec![method("help", false)]), 1, Vec::new);
/// assert_eq!(out.methods[0].name, "help");
/// assert!(!out.methods[0].needs_first_call_check); // a leaf
/// ```
#[derive(Debug)]
pub struct Revealer {
    scheme: Scheme,
    filters: Filters,
    roots: Vec<MethodPattern>,
    /// Methods each root pattern matched in loaded classes so far.
    root_hits: Vec<usize>,
    hierarchy: Hierarchy,
    graph: DiGraph<MethodKey, EdgeKind>,
    nodes: HashMap<MethodKey, NodeIndex>,
    state: Vec<NodeState>,
    ids: Vec<NodeIndex>,
    by_class: HashMap<String, Vec<NodeIndex>>,
    instrumented_by_class: HashMap<String, Vec<NodeIndex>>,
    virtual_calls: HashMap<String, HashMap<(String, String), VirtualCall>>,
    live: HashSet<String>,
    /// Loaded classes implementing a callback interface.
    handed: Vec<String>,
    calls_filtered: bool,
    loading: Option<String>,
    dirty: BTreeSet<String>,
    scan_queue: VecDeque<NodeIndex>,
    scanning_all: bool,
    reflective: Vec<ReflectiveSite>,
    scanned: usize,
    batches: usize,
    reflective_count: usize,
    /// [`RevealConfig::live_callbacks_where_they_run`].
    live_callbacks_where_they_run: bool,
    /// [`Revealer::spare`]: methods no rule that guesses marks.
    spared: HashSet<MethodKey>,
    /// Spared methods a guessing rule reached.
    spared_reached: BTreeSet<MethodKey>,
}

impl Revealer {
    /// Whether a call site can be revealed by the receivers it sees
    /// ([`Revealer::on_dispatched_call`]) instead of by class hierarchy
    /// analysis: a virtual or interface call on a type the filters let be
    /// instrumented, or a call of `toString`, `hashCode` or `equals` on any
    /// type.
    ///
    /// Other calls on filtered (JDK) types keep class hierarchy analysis:
    /// what it reaches in user classes is also what the JDK calls back (a
    /// user `Location.getName()` that a JDK default method calls), which no
    /// check at a call site of the subgraph sees. `Object`'s three are the
    /// exception: class hierarchy analysis of `x.toString()` on an `Object`
    /// or `CharSequence` reaches the `toString` of every loaded class that
    /// has one (and makes each such class live, so the callback rule then
    /// adds its `equals`, `hashCode`, `run`, ...), while what the JDK calls
    /// back of these three, in the classes whose instances flow through the
    /// subgraph, the callback rule marks anyway.
    pub fn dispatch_watchable(&self, site: &CallSite) -> bool {
        matches!(site.kind, CallKind::Virtual | CallKind::Interface)
            && !site.owner.starts_with('[')
            && !is_reflective(site)
            && (self.filters.instrumentable(&site.owner) || is_object_method(site))
    }

    /// Whether a static or special call site can be revealed when it first
    /// runs ([`Revealer::on_call_site`]) instead of at its caller's first
    /// call: one into a class the filters let be instrumented (calls into
    /// filtered code must reach the callback rules at the first call).
    pub fn reach_watchable(&self, site: &CallSite) -> bool {
        matches!(site.kind, CallKind::Static | CallKind::Special)
            && !site.owner.starts_with('[')
            && self.filters.instrumentable(&site.owner)
    }

    /// The check a call site of an instrumented method gets when calls
    /// are revealed as they run (`--virtual-calls receiver`), `None` for a
    /// site revealed at its caller's first call:
    /// - [`Check::Receiver`] at a [dispatch-watchable](Revealer::dispatch_watchable)
    ///   site where the receiver's class can choose: class hierarchy
    ///   analysis finds two or more loaded methods, or the owner is not
    ///   loaded yet (unknown);
    /// - [`Check::Reach`] at a [reach-watchable](Revealer::reach_watchable)
    ///   site, and at a dispatch-watchable one with a single possible
    ///   target: no receiver to copy off the stack, and the first run
    ///   inside a root context reveals it ([`Revealer::on_call_site`], class
    ///   hierarchy analysis, which also instruments an override loaded
    ///   later).
    pub fn site_check(&self, site: &CallSite) -> Option<Check> {
        if self.reach_watchable(site) {
            return Some(Check::Reach);
        }
        if !self.dispatch_watchable(site) {
            return None;
        }
        let known = self.hierarchy.get(&site.owner).is_some();
        let targets = self
            .hierarchy
            .virtual_targets(&site.owner, &site.name, &site.descriptor);
        Some(if !known || targets.len() >= 2 {
            Check::Receiver
        } else {
            Check::Reach
        })
    }
}

/// A call of one of the overridable methods every class inherits from
/// `Object` and the class library calls back: `toString`, `hashCode`,
/// `equals`.
fn is_object_method(site: &CallSite) -> bool {
    matches!(
        (site.name.as_str(), site.descriptor.as_str()),
        ("toString", "()Ljava/lang/String;")
            | ("hashCode", "()I")
            | ("equals", "(Ljava/lang/Object;)Z")
    )
}

fn is_reflective(site: &CallSite) -> bool {
    matches!(
        (site.owner.as_str(), site.name.as_str()),
        ("java/lang/reflect/Method", "invoke")
            | ("java/lang/reflect/Constructor", "newInstance")
            | ("java/lang/Class", "newInstance")
            | ("java/lang/invoke/MethodHandle", "invoke")
            | ("java/lang/invoke/MethodHandle", "invokeExact")
            | ("java/lang/invoke/MethodHandle", "invokeWithArguments")
    )
}

impl Revealer {
    pub fn new(config: RevealConfig) -> Revealer {
        Revealer {
            scheme: config.scheme,
            filters: Filters::new(config.include, config.exclude),
            roots: Vec::new(),
            root_hits: Vec::new(),
            hierarchy: Hierarchy::new(),
            graph: DiGraph::new(),
            nodes: HashMap::new(),
            state: Vec::new(),
            ids: Vec::new(),
            by_class: HashMap::new(),
            instrumented_by_class: HashMap::new(),
            virtual_calls: HashMap::new(),
            live: HashSet::new(),
            handed: Vec::new(),
            calls_filtered: false,
            loading: None,
            dirty: BTreeSet::new(),
            scan_queue: VecDeque::new(),
            scanning_all: false,
            reflective: Vec::new(),
            scanned: 0,
            batches: 0,
            reflective_count: 0,
            live_callbacks_where_they_run: config.live_callbacks_where_they_run,
            spared: HashSet::new(),
            spared_reached: BTreeSet::new(),
        }
    }

    /// Methods that the rules which guess what a call may reach (class
    /// hierarchy analysis at a virtual or interface call, the callback
    /// rule) leave alone: a thread's loop that was running at the attach,
    /// which a redefinition of its class would leave interpreted for good.
    /// Evidence still marks them: a root, a static or special call, a
    /// receiver seen at a call site, an entry inside a root context.
    pub fn spare(&mut self, methods: impl IntoIterator<Item = MethodKey>) {
        self.spared.extend(methods);
    }

    /// The spared methods that a guessing rule reached and left alone: a
    /// call of one inside a root context is not seen.
    pub fn spared_reached(&self) -> impl Iterator<Item = &MethodKey> {
        self.spared_reached.iter()
    }

    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    pub fn hierarchy(&self) -> &Hierarchy {
        &self.hierarchy
    }

    /// The revealed call graph: reachable methods, caller → callee edges.
    pub fn graph(&self) -> &DiGraph<MethodKey, EdgeKind> {
        &self.graph
    }

    /// Whether methods of the class (internal name) may be instrumented.
    pub fn instrumentable(&self, class: &str) -> bool {
        self.filters.instrumentable(class)
    }

    /// The entries of [`PROBES_CALL`] that name methods with bytecode in
    /// loaded classes the filters let be instrumented (an `--include` of
    /// the JDK): code revelation could reach but leaves out, sorted.
    pub fn probe_path_included(&self) -> Vec<&'static str> {
        let mut out: Vec<&'static str> = self
            .hierarchy
            .classes()
            .filter(|c| self.filters.instrumentable(&c.name))
            .flat_map(|c| {
                probe_entries_of(&c.name)
                    .filter(|(_, p)| {
                        c.methods
                            .iter()
                            .any(|m| has_code(m) && p.matches_method(&m.name, &m.descriptor))
                    })
                    .map(|(t, _)| t)
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The method table: the method behind an id.
    pub fn method(&self, id: MethodId) -> Option<&MethodKey> {
        self.ids.get(id.0 as usize).map(|&n| &self.graph[n])
    }

    pub fn id_of(&self, key: &MethodKey) -> Option<MethodId> {
        self.nodes.get(key).and_then(|&n| self.state[n.index()].id)
    }

    pub fn is_reachable(&self, key: &MethodKey) -> bool {
        self.nodes.contains_key(key)
    }

    /// The kind of edge that first reached the method.
    pub fn revealed_by(&self, key: &MethodKey) -> Option<EdgeKind> {
        self.nodes
            .get(key)
            .map(|&n| self.state[n.index()].revealed_by)
    }

    /// Instrumented methods in id order.
    pub fn instrumented(&self) -> impl Iterator<Item = (MethodId, &MethodKey)> {
        self.ids
            .iter()
            .enumerate()
            .map(|(i, &n)| (MethodId(i as u32), &self.graph[n]))
    }

    /// Why a method is reachable: a shortest chain of revealed edges from a
    /// root (or from a method reached without a caller, such as a callback
    /// or a later class's override of a root) to it, as (method, kind of the
    /// edge that reached it) pairs, the start first. `None` when the method
    /// is not reachable.
    pub fn explain(&self, key: &MethodKey) -> Option<Vec<(MethodKey, EdgeKind)>> {
        let target = *self.nodes.get(key)?;
        // Breadth first backwards from the target until a node without
        // callers (a root, or one reached without a caller).
        let mut via: HashMap<NodeIndex, (NodeIndex, EdgeKind)> = HashMap::new();
        let mut queue = VecDeque::from([target]);
        let mut seen = HashSet::from([target]);
        let mut start = target;
        while let Some(n) = queue.pop_front() {
            let mut callers = self
                .graph
                .edges_directed(n, Direction::Incoming)
                .filter(|e| e.source() != n)
                .peekable();
            if callers.peek().is_none() || self.state[n.index()].is_root {
                start = n;
                break;
            }
            for e in callers {
                if seen.insert(e.source()) {
                    via.insert(e.source(), (n, *e.weight()));
                    queue.push_back(e.source());
                }
            }
        }
        let mut chain = vec![(
            self.graph[start].clone(),
            self.state[start.index()].revealed_by,
        )];
        let mut at = start;
        while let Some(&(next, kind)) = via.get(&at) {
            chain.push((self.graph[next].clone(), kind));
            at = next;
        }
        Some(chain)
    }

    pub fn stats(&self) -> RevealStats {
        let mut revealed_by = BTreeMap::new();
        for &n in &self.ids {
            *revealed_by
                .entry(self.state[n.index()].revealed_by)
                .or_insert(0) += 1;
        }
        RevealStats {
            loaded_classes: self.hierarchy.len(),
            instrumented: self.ids.len(),
            reachable: self.graph.node_count(),
            reachable_unloaded: self
                .graph
                .node_indices()
                .filter(|&n| !self.hierarchy.contains(&self.graph[n].class))
                .count(),
            revealed_by,
            scanned: self.scanned,
            redefinition_batches: self.batches,
            reflective_sites: self.reflective_count,
        }
    }

    /// Adds a root pattern and marks its methods in loaded classes; fetch the
    /// resulting batch with [`Revealer::take_redefinitions`] (lazy) or
    /// [`Revealer::reveal_all`] (eager). Roots are instrumented even in
    /// classes the default JDK exclusion names (not in excluded or sprig's
    /// classes, nor in what the probes call: [`PROBES_CALL`]). An abstract root method makes its implementations roots.
    pub fn add_root(&mut self, pattern: MethodPattern) {
        let classes: Vec<String> = match pattern.exact_class() {
            Some(c) => {
                let internal = internal_name(&c);
                if self.hierarchy.contains(&internal) {
                    vec![internal]
                } else {
                    Vec::new()
                }
            }
            None => self
                .hierarchy
                .classes()
                .filter(|c| pattern.matches_class(&binary_name(&c.name)))
                .map(|c| c.name.clone())
                .collect(),
        };
        let mut hits = 0;
        for class in classes {
            hits += self.mark_roots(&class, &pattern);
        }
        self.roots.push(pattern);
        self.root_hits.push(hits);
    }

    /// The root patterns with the number of methods each has matched in
    /// loaded classes so far (0: nothing loaded matches it yet — worth a
    /// warning that names the pattern).
    pub fn roots(&self) -> impl Iterator<Item = (&MethodPattern, usize)> {
        self.roots.iter().zip(self.root_hits.iter().copied())
    }

    /// Everything revealed since the last batch: classes to redefine and
    /// reflective sites to watch.
    pub fn take_redefinitions(&mut self) -> Revealed {
        let mut classes = Vec::new();
        for class in std::mem::take(&mut self.dirty) {
            if let Some(batch) = self.batch(&class) {
                classes.push(batch);
            }
        }
        if !classes.is_empty() {
            self.batches += 1;
        }
        Revealed {
            classes,
            reflective_sites: std::mem::take(&mut self.reflective),
        }
    }

    /// A class is being loaded (ClassFileLoadHook), or was loaded before the
    /// agent attached. Returns the methods of this class to instrument in its
    /// bytes: methods of root patterns, methods already reachable, and its
    /// implementations of reachable virtual calls on its supertypes.
    /// `callees` (call sites of every method of the class, as rewriter
    /// `callees_all` gives them) is called only in the eager scheme and only
    /// when the class has methods to instrument.
    pub fn on_class_loaded<F>(&mut self, info: ClassInfo, loader_id: u64, callees: F) -> LoadOutcome
    where
        F: FnOnce() -> Vec<(String, String, Vec<CallSite>)>,
    {
        let name = info.name.clone();
        let is_new = self.hierarchy.add_class(info, loader_id);
        if is_new {
            self.loading = Some(name.clone());
            self.class_arrived(&name);
            self.loading = None;
        }
        let mut scan_pending = false;
        if self.scheme == Scheme::Eager && is_new {
            let has_work = self
                .instrumented_by_class
                .get(&name)
                .is_some_and(|v| v.iter().any(|n| !self.state[n.index()].scanned));
            if has_work {
                let mut table: HashMap<(String, String), Vec<CallSite>> =
                    callees().into_iter().map(|(n, d, s)| ((n, d), s)).collect();
                // Scan this class's methods now (its bytes are at hand); the
                // methods of other classes wait for `reveal_all`.
                self.loading = Some(name.clone());
                self.scan(&mut |k: &MethodKey| {
                    if k.class == name {
                        table.remove(&(k.name.clone(), k.descriptor.clone()))
                    } else {
                        None
                    }
                });
                self.loading = None;
                scan_pending = !self.scan_queue.is_empty();
            }
        }
        let methods = self.instruments(&name);
        LoadOutcome {
            methods,
            redefine: self.take_redefinitions(),
            scan_pending,
        }
    }

    /// The first run of an instrumented method, with its call sites: marks
    /// the callees reachable and returns the methods of loaded classes that
    /// must now be instrumented. Repeated calls for one method are harmless.
    pub fn on_first_call(
        &mut self,
        id: MethodId,
        callees: &[CallSite],
    ) -> Result<Revealed, RevealError> {
        let &n = self
            .ids
            .get(id.0 as usize)
            .ok_or(RevealError::UnknownMethod(id))?;
        if !self.state[n.index()].scanned {
            self.scan_one(n, callees);
        }
        Ok(self.take_redefinitions())
    }

    /// The graph node of an instrumented method's id.
    fn node_of(&self, id: Option<MethodId>) -> Option<NodeIndex> {
        id.and_then(|id| self.ids.get(id.0 as usize).copied())
    }

    /// A reflective call from inside the subgraph reached `target`
    /// (dispatched virtually when it is an overridable instance method).
    pub fn on_reflective_call(&mut self, caller: Option<MethodId>, target: &MethodKey) -> Revealed {
        let from = self.node_of(caller);
        let declared = self
            .hierarchy
            .resolve(&target.class, &target.name, &target.descriptor);
        let overridable = declared
            .as_ref()
            .and_then(|k| self.hierarchy.declared(&k.class, &k.name, &k.descriptor))
            .is_some_and(is_virtual);
        if overridable {
            self.virtual_call(
                from,
                &target.class,
                &target.name,
                &target.descriptor,
                EdgeKind::Reflective,
                false,
            );
        } else {
            let key = declared.unwrap_or_else(|| target.clone());
            self.mark(key, EdgeKind::Reflective, from);
        }
        self.take_redefinitions()
    }

    /// A virtual or interface call from inside the subgraph was dispatched
    /// to `selected` (the method its receiver's class selects): marks that
    /// method only, not the other overrides the call site could reach.
    pub fn on_dispatched_call(
        &mut self,
        caller: Option<MethodId>,
        selected: &MethodKey,
    ) -> Revealed {
        let from = self.node_of(caller);
        let key = self
            .hierarchy
            .resolve(&selected.class, &selected.name, &selected.descriptor)
            .unwrap_or_else(|| selected.clone());
        // A receiver seen is evidence, not a guess.
        self.spared.remove(&key);
        self.spared_reached.remove(&key);
        self.mark(key, EdgeKind::Virtual, from);
        self.take_redefinitions()
    }

    /// A method holding dormant probes ran inside a root context: it is
    /// part of the subgraph whatever the rules say, so it is marked (with
    /// no caller edge) and instrumented, and its first call then reveals
    /// what it calls like any other's. Its class already holds its probes,
    /// so the batch normally only activates them.
    pub fn on_entered(&mut self, key: &MethodKey) -> Revealed {
        self.mark(key.clone(), EdgeKind::Entered, None);
        self.take_redefinitions()
    }

    /// One call site of instrumented method `caller`, revealed as its
    /// first call would (a virtual or interface one by class hierarchy
    /// analysis: every loaded override, and those of classes loaded later):
    /// a static or special site that runs for the first time, or a watched
    /// virtual site that saw too many receiver classes or one the mirror
    /// does not know.
    /// With no caller (one revelation has not reached), the site's targets
    /// are marked without an edge.
    pub fn on_call_site(&mut self, caller: Option<MethodId>, site: &CallSite) -> Revealed {
        let from = self.node_of(caller);
        self.call_site(from, site);
        self.take_redefinitions()
    }

    /// Scheme A: scans every instrumented method not scanned yet, and what it
    /// reaches, transitively, with call sites from `callees` (`None`: not
    /// available, the method stays unscanned). Returns everything to
    /// (re)define. Works in either scheme.
    pub fn reveal_all<F>(&mut self, mut callees: F) -> Revealed
    where
        F: FnMut(&MethodKey) -> Option<Vec<CallSite>>,
    {
        self.scanning_all = true;
        let pending: Vec<NodeIndex> = self
            .ids
            .iter()
            .copied()
            .filter(|n| !self.state[n.index()].scanned)
            .collect();
        self.scan_queue.extend(pending);
        self.scan(&mut callees);
        self.scanning_all = false;
        self.take_redefinitions()
    }

    // ---- internals ----

    /// Works the scan queue with call sites from `source`; nodes it has no
    /// call sites for stay queued.
    fn scan(&mut self, source: &mut dyn FnMut(&MethodKey) -> Option<Vec<CallSite>>) {
        let mut unavailable = Vec::new();
        while let Some(n) = self.scan_queue.pop_front() {
            if self.state[n.index()].scanned {
                continue;
            }
            match source(&self.graph[n]) {
                Some(sites) => self.scan_one(n, &sites),
                None => unavailable.push(n),
            }
        }
        self.scan_queue.extend(unavailable);
    }

    fn scan_one(&mut self, n: NodeIndex, sites: &[CallSite]) {
        self.state[n.index()].scanned = true;
        self.scanned += 1;
        for site in sites {
            self.call_site(Some(n), site);
        }
    }

    /// One call site of `caller` (`None`: a method revelation has not
    /// reached; its targets are then marked without an edge).
    fn call_site(&mut self, caller: Option<NodeIndex>, site: &CallSite) {
        if is_reflective(site)
            && let Some(id) = caller.and_then(|c| self.state[c.index()].id)
        {
            self.reflective_count += 1;
            self.reflective.push(ReflectiveSite {
                caller: id,
                site: site.clone(),
            });
        }
        let kind = EdgeKind::from(site.kind);
        let (owner, name, desc) = (&site.owner, &site.name, &site.descriptor);
        if self.dispatches(site) {
            self.virtual_call(caller, owner, name, desc, kind, false);
        } else {
            self.direct(caller, owner, name, desc, kind);
        }
    }

    /// Whether revelation takes a call site to every override of the named
    /// method (virtual and interface calls, and an `invokedynamic` or
    /// method handle naming a virtual method) rather than to the one
    /// method it resolves to.
    fn dispatches(&self, site: &CallSite) -> bool {
        let (owner, name, desc) = (&site.owner, &site.name, &site.descriptor);
        match site.kind {
            CallKind::Static | CallKind::Special => false,
            CallKind::Virtual | CallKind::Interface => true,
            CallKind::Dynamic | CallKind::MethodHandle => self
                .hierarchy
                .resolve(owner, name, desc)
                .and_then(|k| self.hierarchy.declared(&k.class, name, desc))
                .is_some_and(is_virtual),
        }
    }

    /// The methods revelation would mark for a call site, without marking
    /// them: what [`Self::direct`] resolves to, or every loaded override
    /// [`Self::virtual_call`] finds (and the named method while its owner
    /// is not loaded). None for a call on an array.
    pub fn site_targets(&self, site: &CallSite) -> Vec<MethodKey> {
        let (owner, name, desc) = (&site.owner, &site.name, &site.descriptor);
        if owner.starts_with('[') {
            return Vec::new();
        }
        if self.dispatches(site) {
            let mut targets = self.hierarchy.virtual_targets(owner, name, desc);
            if !self.hierarchy.contains(owner) {
                targets.push(MethodKey::new(owner, name, desc));
            }
            return targets;
        }
        let key = self
            .hierarchy
            .resolve(owner, name, desc)
            .unwrap_or_else(|| MethodKey::new(owner, name, desc));
        if key.class == "java/lang/Object" && name == "<init>" {
            Vec::new()
        } else {
            vec![key]
        }
    }

    /// A call with one target: resolve upward, or leave a placeholder when
    /// the owner is not loaded.
    fn direct(
        &mut self,
        caller: Option<NodeIndex>,
        owner: &str,
        name: &str,
        desc: &str,
        kind: EdgeKind,
    ) {
        if owner.starts_with('[') {
            self.note_filtered_call();
            return;
        }
        let key = self
            .hierarchy
            .resolve(owner, name, desc)
            .unwrap_or_else(|| MethodKey::new(owner, name, desc));
        if !(key.class == "java/lang/Object" && name == "<init>") {
            self.mark(key, kind, caller);
        }
    }

    fn virtual_call(
        &mut self,
        caller: Option<NodeIndex>,
        owner: &str,
        name: &str,
        desc: &str,
        kind: EdgeKind,
        root: bool,
    ) {
        if owner.starts_with('[') || !self.filters.instrumentable(owner) {
            self.note_filtered_call();
            if owner.starts_with('[') {
                return;
            }
        }
        let sig = (name.to_string(), desc.to_string());
        if let Some(call) = self
            .virtual_calls
            .get_mut(owner)
            .and_then(|calls| calls.get_mut(&sig))
        {
            // Known call: the targets are already reachable; add this caller.
            call.root |= root;
            if let Some(c) = caller
                && !call.callers.contains(&(c, kind))
            {
                call.callers.push((c, kind));
            }
            let targets = call.targets.clone();
            for t in targets {
                if let Some(c) = caller {
                    self.edge(c, t, kind);
                }
                if root {
                    self.set_root(t);
                }
            }
            return;
        }
        self.virtual_calls
            .entry(owner.to_string())
            .or_default()
            .insert(
                sig.clone(),
                VirtualCall {
                    kind,
                    root,
                    callers: caller.map(|c| (c, kind)).into_iter().collect(),
                    targets: Vec::new(),
                },
            );
        let mut targets = self.hierarchy.virtual_targets(owner, name, desc);
        if !self.hierarchy.contains(owner) {
            targets.push(MethodKey::new(owner, name, desc));
        }
        let mut marked = Vec::new();
        for t in targets {
            if let Some(n) = self.mark(t, kind, caller) {
                if root {
                    self.set_root(n);
                }
                marked.push(n);
            }
        }
        if let Some(call) = self
            .virtual_calls
            .get_mut(owner)
            .and_then(|calls| calls.get_mut(&sig))
        {
            call.targets.extend(marked);
        }
    }

    /// The subgraph called into filtered code: the callback rule applies to
    /// every live class, and every class implementing a callback interface,
    /// from now on.
    fn note_filtered_call(&mut self) {
        if self.calls_filtered {
            return;
        }
        self.calls_filtered = true;
        let mut live: Vec<String> = self.live.iter().cloned().collect();
        live.sort();
        for class in live {
            self.callbacks(&class);
        }
        for class in self.handed.clone() {
            if !self.live.contains(&class) {
                self.callbacks(&class);
            }
        }
    }

    fn make_live(&mut self, class: &str) {
        if self.live.contains(class) {
            return;
        }
        self.live.insert(class.to_string());
        if self.calls_filtered {
            self.callbacks(class);
        }
    }

    /// The callback rule for one loaded class: its overrides of methods of
    /// filtered `java.*` supertypes when the class is live, else only those
    /// of callback interfaces ([`CALLBACK_INTERFACES`]).
    fn callbacks(&mut self, class: &str) {
        let Some(loaded) = self.hierarchy.get(class) else {
            return;
        };
        if !self.filters.instrumentable(class) {
            return;
        }
        let live = self.live.contains(class);
        if live && self.live_callbacks_where_they_run {
            // Redefined for its reachable methods: its callbacks hold
            // dormant probes and are revealed where they run.
            return;
        }
        let filtered_supers: Vec<String> = self
            .hierarchy
            .supertypes(class)
            .into_iter()
            .skip(1)
            .filter(|s| {
                self.filters.calls_back(s) && (live || self.filters.is_callback_interface(s))
            })
            .collect();
        if filtered_supers.is_empty() {
            return;
        }
        let keys: Vec<MethodKey> = loaded
            .methods
            .iter()
            .filter(|m| is_virtual(m) && has_code(m) && m.name != "finalize")
            .filter(|m| {
                filtered_supers.iter().any(|s| {
                    self.hierarchy
                        .declared(s, &m.name, &m.descriptor)
                        .is_some_and(is_virtual)
                })
            })
            .map(|m| MethodKey::new(class, &m.name, &m.descriptor))
            .collect();
        for k in keys {
            self.mark(k, EdgeKind::Callback, None);
        }
    }

    /// Marks a method reachable (a no-op for filtered classes, which only
    /// note that the subgraph calls into filtered code, and for spared
    /// methods a guessing rule reaches).
    fn mark(
        &mut self,
        key: MethodKey,
        kind: EdgeKind,
        from: Option<NodeIndex>,
    ) -> Option<NodeIndex> {
        if !self.filters.instrumentable(&key.class) {
            self.note_filtered_call();
            return None;
        }
        if matches!(
            kind,
            EdgeKind::Virtual | EdgeKind::Interface | EdgeKind::Callback
        ) && !self.nodes.contains_key(&key)
            && self.spared.contains(&key)
        {
            self.spared_reached.insert(key);
            return None;
        }
        Some(self.mark_node(key, kind, from))
    }

    fn mark_node(&mut self, key: MethodKey, kind: EdgeKind, from: Option<NodeIndex>) -> NodeIndex {
        let n = match self.nodes.get(&key) {
            Some(&n) => n,
            None => {
                let class = key.class.clone();
                let n = self.graph.add_node(key.clone());
                self.nodes.insert(key, n);
                self.state.push(NodeState {
                    revealed_by: kind,
                    is_root: false,
                    id: None,
                    scanned: false,
                    reported: false,
                });
                self.by_class.entry(class.clone()).or_default().push(n);
                let is_static = self
                    .hierarchy
                    .declared(&class, &self.graph[n].name, &self.graph[n].descriptor)
                    .is_some_and(|m| m.access & ACC_STATIC != 0);
                self.try_assign(n);
                if !is_static {
                    self.make_live(&class);
                }
                n
            }
        };
        if let Some(f) = from {
            self.edge(f, n, kind);
        }
        n
    }

    fn edge(&mut self, from: NodeIndex, to: NodeIndex, kind: EdgeKind) {
        if !self
            .graph
            .edges_connecting(from, to)
            .any(|e| *e.weight() == kind)
        {
            self.graph.add_edge(from, to, kind);
        }
    }

    fn set_root(&mut self, n: NodeIndex) {
        let st = &mut self.state[n.index()];
        if st.is_root {
            return;
        }
        st.is_root = true;
        let reported = st.reported;
        let class = self.graph[n].class.clone();
        if reported {
            self.dirty.insert(class);
        } else {
            self.try_assign(n);
        }
    }

    /// Gives the node an id when it can be instrumented now.
    fn try_assign(&mut self, n: NodeIndex) {
        let st = &self.state[n.index()];
        if st.id.is_some() {
            return;
        }
        let key = &self.graph[n];
        let eligible = self
            .hierarchy
            .declared(&key.class, &key.name, &key.descriptor)
            .is_some_and(has_code)
            && !probes_call(&key.class, &key.name, &key.descriptor)
            && if st.is_root {
                !self.filters.is_excluded(&key.class)
            } else {
                self.filters.instrumentable(&key.class)
            };
        if !eligible {
            return;
        }
        let class = key.class.clone();
        let id = MethodId(self.ids.len() as u32);
        self.ids.push(n);
        self.state[n.index()].id = Some(id);
        self.instrumented_by_class
            .entry(class.clone())
            .or_default()
            .push(n);
        if self.loading.as_deref() != Some(class.as_str()) {
            self.dirty.insert(class);
        }
        if self.scheme == Scheme::Eager || self.scanning_all {
            self.scan_queue.push_back(n);
        }
    }

    /// Marks the methods of `class` that `pattern` names; returns how many.
    fn mark_roots(&mut self, class: &str, pattern: &MethodPattern) -> usize {
        // Roots may sit in default-excluded (JDK) classes, never in
        // excluded or sprig's own ones.
        if self.filters.is_excluded(class) {
            return 0;
        }
        let Some(loaded) = self.hierarchy.get(class) else {
            return 0;
        };
        let matching: Vec<(String, String, bool)> = loaded
            .methods
            .iter()
            .filter(|m| pattern.matches_method(&m.name, &m.descriptor))
            // What the probes call is never a root (nor counted as one).
            .filter(|m| !probes_call(class, &m.name, &m.descriptor))
            .map(|m| (m.name.clone(), m.descriptor.clone(), has_code(m)))
            .collect();
        let hits = matching.len();
        for (name, desc, code) in matching {
            if code {
                let n = self.mark_node(MethodKey::new(class, &name, &desc), EdgeKind::Root, None);
                self.set_root(n);
                self.try_assign(n);
            } else {
                self.virtual_call(None, class, &name, &desc, EdgeKind::Root, true);
            }
        }
        hits
    }

    /// Everything that happens when a new class name arrives.
    fn class_arrived(&mut self, name: &str) {
        // Root patterns.
        let dotted = binary_name(name);
        let roots: Vec<(usize, MethodPattern)> = self
            .roots
            .iter()
            .enumerate()
            .filter(|(_, p)| p.matches_class(&dotted))
            .map(|(i, p)| (i, p.clone()))
            .collect();
        for (i, p) in &roots {
            self.root_hits[*i] += self.mark_roots(name, p);
        }
        // Placeholders: calls made before this class was loaded.
        let waiting: Vec<NodeIndex> = self.by_class.get(name).cloned().unwrap_or_default();
        for n in waiting {
            let key = self.graph[n].clone();
            let incoming: Vec<(NodeIndex, EdgeKind)> = self
                .graph
                .edges_directed(n, Direction::Incoming)
                .map(|e| (e.source(), *e.weight()))
                .collect();
            // A method reference or reflective target turns out to be
            // overridable: dispatch it like a virtual call from now on.
            let overridable = self
                .hierarchy
                .resolve(name, &key.name, &key.descriptor)
                .and_then(|k| self.hierarchy.declared(&k.class, &k.name, &k.descriptor))
                .is_some_and(is_virtual);
            for &(caller, k) in &incoming {
                if overridable
                    && matches!(
                        k,
                        EdgeKind::Dynamic | EdgeKind::MethodHandle | EdgeKind::Reflective
                    )
                {
                    self.virtual_call(Some(caller), name, &key.name, &key.descriptor, k, false);
                }
            }
            if self
                .hierarchy
                .declared(name, &key.name, &key.descriptor)
                .is_some()
            {
                self.try_assign(n);
                continue;
            }
            let Some(real) = self.hierarchy.resolve(name, &key.name, &key.descriptor) else {
                continue;
            };
            let kind = self.state[n.index()].revealed_by;
            if incoming.is_empty() {
                self.mark(real.clone(), kind, None);
            }
            for (caller, k) in incoming {
                self.mark(real.clone(), k, Some(caller));
            }
        }
        // Virtual calls on supertypes that instances of this class answer.
        let mut found: Vec<(String, String, String, VirtualCall)> = Vec::new();
        for sup in self.hierarchy.supertypes(name) {
            if let Some(calls) = self.virtual_calls.get(&sup) {
                for ((n, d), call) in calls {
                    found.push((sup.clone(), n.clone(), d.clone(), call.clone()));
                }
            }
        }
        found.sort_by(|a, b| (&a.0, &a.1, &a.2).cmp(&(&b.0, &b.1, &b.2)));
        for (owner, n, d, call) in found {
            let Some(target) = self.hierarchy.select(name, &n, &d) else {
                continue;
            };
            if !self
                .hierarchy
                .declared(&target.class, &n, &d)
                .is_some_and(has_code)
            {
                continue;
            }
            let Some(t) = self.mark(target, call.kind, None) else {
                continue;
            };
            for &(c, k) in &call.callers {
                self.edge(c, t, k);
            }
            if call.root {
                self.set_root(t);
            }
            if let Some(entry) = self
                .virtual_calls
                .get_mut(&owner)
                .and_then(|calls| calls.get_mut(&(n.clone(), d.clone())))
                && !entry.targets.contains(&t)
            {
                entry.targets.push(t);
            }
        }
        // The callback rule, for a class that was live before it loaded or
        // that implements a callback interface.
        let handed = self.filters.instrumentable(name)
            && self
                .hierarchy
                .supertypes(name)
                .iter()
                .skip(1)
                .any(|s| self.filters.is_callback_interface(s));
        if handed {
            self.handed.push(name.to_string());
        }
        if self.calls_filtered && (handed || self.live.contains(name)) {
            self.callbacks(name);
        }
    }

    /// All instrumented methods of a class; marks them reported.
    fn instruments(&mut self, class: &str) -> Vec<Instrument> {
        let nodes = self
            .instrumented_by_class
            .get(class)
            .cloned()
            .unwrap_or_default();
        let mut out = Vec::with_capacity(nodes.len());
        for n in nodes {
            let key = &self.graph[n];
            let has_calls = self
                .hierarchy
                .declared(&key.class, &key.name, &key.descriptor)
                .is_some_and(|m| m.has_calls);
            let st = &mut self.state[n.index()];
            let Some(id) = st.id else { continue };
            out.push(Instrument {
                id,
                name: key.name.clone(),
                descriptor: key.descriptor.clone(),
                is_root: st.is_root,
                needs_first_call_check: self.scheme == Scheme::Lazy && has_calls && !st.scanned,
                added: !st.reported,
            });
            st.reported = true;
        }
        out.sort_by_key(|i| i.id);
        out
    }

    fn batch(&mut self, class: &str) -> Option<ClassBatch> {
        let loaders = self.hierarchy.get(class)?.loaders.clone();
        let methods = self.instruments(class);
        if methods.is_empty() {
            return None;
        }
        Some(ClassBatch {
            class: class.to_string(),
            loaders,
            methods,
        })
    }
}
