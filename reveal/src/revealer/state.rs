//! The revealer's state: the graph of reachable methods, what each node
//! knows, the virtual calls remembered for classes loaded later, and the
//! live classes of the callback rule.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

use petgraph::graph::{DiGraph, NodeIndex};
use sprig_rewriter::pattern::MethodPattern;

use crate::config::{RevealConfig, Scheme};
use crate::filter::Filters;
use crate::hierarchy::Hierarchy;
use crate::model::{EdgeKind, MethodId, MethodKey};
use crate::outcome::ReflectiveSite;

#[derive(Clone, Debug)]
pub(super) struct NodeState {
    pub(super) revealed_by: EdgeKind,
    pub(super) is_root: bool,
    pub(super) id: Option<MethodId>,
    pub(super) scanned: bool,
    pub(super) reported: bool,
}

/// A virtual or interface call seen in the subgraph, by owner and signature.
#[derive(Clone, Debug)]
pub(super) struct VirtualCall {
    pub(super) kind: EdgeKind,
    pub(super) root: bool,
    pub(super) callers: Vec<(NodeIndex, EdgeKind)>,
    pub(super) targets: Vec<NodeIndex>,
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
    pub(super) scheme: Scheme,
    pub(super) filters: Filters,
    pub(super) roots: Vec<MethodPattern>,
    /// Methods each root pattern matched in loaded classes so far.
    pub(super) root_hits: Vec<usize>,
    pub(super) hierarchy: Hierarchy,
    pub(super) graph: DiGraph<MethodKey, EdgeKind>,
    pub(super) nodes: HashMap<MethodKey, NodeIndex>,
    pub(super) state: Vec<NodeState>,
    pub(super) ids: Vec<NodeIndex>,
    pub(super) by_class: HashMap<String, Vec<NodeIndex>>,
    pub(super) instrumented_by_class: HashMap<String, Vec<NodeIndex>>,
    pub(super) virtual_calls: HashMap<String, HashMap<(String, String), VirtualCall>>,
    pub(super) live: HashSet<String>,
    /// Loaded classes implementing a callback interface.
    pub(super) handed: Vec<String>,
    pub(super) calls_filtered: bool,
    pub(super) loading: Option<String>,
    pub(super) dirty: BTreeSet<String>,
    pub(super) scan_queue: VecDeque<NodeIndex>,
    pub(super) scanning_all: bool,
    pub(super) reflective: Vec<ReflectiveSite>,
    pub(super) scanned: usize,
    pub(super) batches: usize,
    pub(super) reflective_count: usize,
    /// [`RevealConfig::live_callbacks_where_they_run`].
    pub(super) live_callbacks_where_they_run: bool,
    /// [`Revealer::spare`]: methods no rule that guesses marks.
    pub(super) spared: HashSet<MethodKey>,
    /// Spared methods a guessing rule reached.
    pub(super) spared_reached: BTreeSet<MethodKey>,
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
}
