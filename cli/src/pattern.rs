//! Method patterns for `sprig rewrite --methods` and the profiler's roots:
//! `pkg.Class::method`, `pkg.Class::method(desc)ret`, `pkg.Class::*`, with
//! `*` (one package segment) and `**` (any depth) globs in the class part,
//! e.g. `com.acme.**::*`.
//!
//! The grammar, the matcher and comma-separated lists live in
//! `sprig_rewriter::pattern`, the one definition the agent's root selection
//! also uses; this module is the CLI's name for it, and says which
//! `--exclude` pattern leaves a class out.

pub use sprig_rewriter::pattern::{MethodPattern, PatternError, parse, parse_list};

/// The pattern of `excludes` (`--exclude`) that covers `class` (binary
/// name with dots), if one does; a class pattern covers its nested classes.
pub fn excluded_by<'e>(class: &str, excludes: &'e [String]) -> Option<&'e str> {
    let outer = class.split('$').next().unwrap_or(class);
    excludes.iter().map(String::as_str).find(|p| {
        MethodPattern::parse(&format!("{}::*", p.trim()))
            .is_ok_and(|g| g.matches_class(class) || g.matches_class(outer))
    })
}
