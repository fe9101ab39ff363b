//! What revelation hands back to the agent: methods to instrument, batches
//! of classes to redefine, reflective sites to watch, counters, errors.

use std::collections::BTreeMap;

use sprig_rewriter::CallSite;

use crate::model::{EdgeKind, MethodId};

/// One method to instrument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instrument {
    pub id: MethodId,
    pub name: String,
    pub descriptor: String,
    pub is_root: bool,
    /// Whether the method's first run must be reported through
    /// [`Revealer::on_first_call`](crate::Revealer::on_first_call) (lazy scheme, method with calls, not yet
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

/// The result of [`Revealer::on_class_loaded`](crate::Revealer::on_class_loaded).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadOutcome {
    /// Methods of the loading class to instrument in the bytes being loaded.
    pub methods: Vec<Instrument>,
    /// Other, already loaded classes that now need redefinition (rare: an
    /// inherited implementation became reachable through the new class).
    pub redefine: Revealed,
    /// Eager scheme: methods of other classes wait to be scanned; call
    /// [`Revealer::reveal_all`](crate::Revealer::reveal_all).
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
