//! Method patterns for `sprig rewrite --methods` and the profiler's roots:
//! `pkg.Class::method`, `pkg.Class::method(desc)ret`, `pkg.Class::*`, with
//! `*` (one package segment) and `**` (any depth) globs in the class part,
//! e.g. `com.acme.**::*`.
//!
//! The grammar and matcher live in `sprig_callgraph::pattern`, the one
//! definition the agent's root selection also uses; this module is the CLI's
//! entry point to it and adds comma-separated lists.

pub use sprig_callgraph::pattern::{MethodPattern, PatternError};

/// Parses one pattern.
pub fn parse(text: &str) -> Result<MethodPattern, PatternError> {
    MethodPattern::parse(text)
}

/// Parses a comma-separated list of patterns (descriptors never contain
/// commas). Empty items are errors, so a stray comma is reported.
pub fn parse_list(text: &str) -> Result<Vec<MethodPattern>, PatternError> {
    text.split(',').map(parse).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrite_examples() {
        let one = parse("com.acme.Service::handle").unwrap();
        assert!(one.matches("com.acme.Service", "handle", "()V"));
        assert!(!one.matches("com.acme.Service", "handler", "()V"));
        let desc = parse("com.acme.Service::handle(Ljava/lang/String;)V").unwrap();
        assert!(desc.matches_method("handle", "(Ljava/lang/String;)V"));
        assert!(!desc.matches_method("handle", "()V"));
        let deep = parse("com.acme.**::*").unwrap();
        assert!(deep.matches_class("com.acme.sub.Deep$Inner"));
        assert!(!deep.matches_class("com.acmex.Service"));
        let shallow = parse("com.acme.*::*").unwrap();
        assert!(shallow.matches_class("com.acme.Service"));
        assert!(!shallow.matches_class("com.acme.sub.Service"));
    }

    #[test]
    fn lists_split_on_commas_and_reject_empty_items() {
        let list = parse_list("a.B::x,c.**::*").unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[1].to_string(), "c.**::*");
        let err = parse_list("a.B::x,").unwrap_err().to_string();
        assert!(err.contains("no `::`"), "{err}");
        let err = parse_list("a.B").unwrap_err().to_string();
        assert!(
            err.contains("\"a.B\"") && err.contains("pkg.Class::method"),
            "{err}"
        );
    }
}
