//! The revealer, one file per concern, each lower file knowing nothing of
//! the higher:
//!
//! - `state`: [`Revealer`], its graph and what each node knows.
//! - `queries`: the method table, the graph, `explain`, counters.
//! - `marks`: a method becomes reachable, gets an edge, a root, an id.
//! - `batches`: the redefinition batches, per class.
//! - `callbacks`: the JDK callback rule.
//! - `sites`: call sites (static and special calls, overrides of virtual
//!   calls, lambdas and method references, reflection) and the checks the
//!   agent gives them.
//! - `arrival`: what a class brings when it loads.
//! - `protocol`: the steps the agent calls.
//!
//! The files below `state` add methods to [`Revealer`] and call each other
//! through it, never naming each other.

mod arrival;
mod batches;
mod callbacks;
mod marks;
mod protocol;
mod queries;
mod sites;
mod state;

pub use state::Revealer;
