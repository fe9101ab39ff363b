//! Method patterns for `sprig rewrite --methods` and the profiler's roots:
//! `pkg.Class::method`, `pkg.Class::method(desc)ret`, `pkg.Class::*`, with
//! `*` (one package segment) and `**` (any depth) globs in the class part,
//! e.g. `com.acme.**::*`.
//!
//! The grammar, the matcher and comma-separated lists live in
//! `sprig_rewriter::pattern`, the one definition the agent's root selection
//! also uses; this module is the CLI's name for it.

pub use sprig_rewriter::pattern::{MethodPattern, PatternError, parse, parse_list};
