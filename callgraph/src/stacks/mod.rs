//! Stack samples of a whole JVM (`sprig sample`): Whaley's partial calling
//! context tree (PCCT), built incrementally from the agent's sampling
//! rounds, its two views, hot methods, suggested roots, and Arnold and
//! Grove's overlap of two profiles.
//!
//! - `pcct`: one thread's tree: a node per calling context seen (the root
//!   is the outermost frame), sample counts per node for the wall and the
//!   CPU view, and Whaley's edge activations;
//! - `build`: [`StackProfile`], every thread's tree fed round by round,
//!   with the per-method counts and the time buckets behind the windows;
//! - `convert`: the trees as a [`crate::Profile`], so that the tree, the
//!   collapsed stacks, the flame graph and pprof render them;
//! - `suggest`: candidate roots for `sprig profile` and the overhead
//!   predicted for each;
//! - `overlap`: the overlap of two method-share vectors;
//! - `edges`: the call edges of `--edges`' bursts, their calls per
//!   second, the exact edges of a `sprig profile` tree and the edge
//!   overlap;
//! - `json`: the JSON report of `sprig sample`.
//!
//! # The views
//!
//! The **wall view** counts every sample of every thread, whatever it was
//! doing; a sample weighs the time since the round before. The **CPU
//! view** counts the samples of threads on the CPU: in state `Running`,
//! or `Native` having used at least half the round's interval in CPU
//! time (JVMTI cannot tell a native method computing from one blocked in
//! the kernel; the thread's CPU clock can). A CPU sample weighs the CPU
//! time its thread used since its previous sample (the round's interval
//! where that is unknown, as for a thread's first sample). So a thread
//! blocked on a monitor, waiting, parked or sleeping counts in the wall
//! view and not in the CPU view.
//!
//! # Edge activations
//!
//! Each thread's stack is compared with its previous one from the
//! outermost frame in: the frames below the common outer part were
//! entered since (at least once), so each such node counts one new
//! activation of the edge from its parent (Whaley's edge counts; a whole
//! stack the first time a thread is seen). A call that starts and ends
//! between two samples is not seen: activations are a lower bound on
//! calls.

mod build;
mod convert;
mod edges;
mod json;
mod overlap;
mod pcct;
mod suggest;

pub use build::{MethodCounts, OwnCpu, StackProfile, ThreadStacks};
pub use convert::ConvertOptions;
pub use edges::{EdgeProfile, EdgeRow, edge_name, edge_overlap, edges_within, exact_edges};
pub use json::{profile_command, write_json, write_json_with_edges};
pub use overlap::{MethodShare, Overlap, overlap};
pub use pcct::{PNode, Pcct};
pub use suggest::{
    EXACT_PAIR_NS, JUDGE_SAMPLES, RootKind, SAMPLED_PAIR_NS, SuggestOptions, SuggestedRoot,
    app_cpu_per_s, is_jdk_class, is_library_class, suggest_roots, with_edges,
};

/// Which samples count, and what a sample weighs (module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum View {
    /// Every sample; weight: the time since the round before.
    Wall,
    /// Samples of threads on the CPU; weight: the CPU time used since
    /// the thread's previous sample.
    #[default]
    Cpu,
}

impl View {
    pub fn name(self) -> &'static str {
        match self {
            View::Wall => "wall",
            View::Cpu => "cpu",
        }
    }
}

/// The frame id of the pseudo-frame under which stacks cut at the agent's
/// maximum depth hang (their outer end is missing).
pub const TRUNCATED_FRAME: u32 = u32::MAX;
/// The frame id of a run of JDK frames folded into one (`--fold-jdk`).
pub const JDK_FRAME: u32 = u32::MAX - 1;

#[cfg(test)]
mod tests;
