//! Which classes may be instrumented: the default JDK exclusion, the user's
//! `--include` / `--exclude` class patterns, and sprig's own classes.

use std::cell::RefCell;
use std::collections::HashMap;

use sprig_rewriter::vocab::names::binary_name;

use sprig_rewriter::pattern::{MethodPattern, PatternError};

/// Packages of the JDK that are not instrumented unless an include pattern
/// names them. Their code is still "traversed for nothing" (see the module
/// documentation of [`crate`]).
pub const DEFAULT_EXCLUDES: &[&str] = &["java.**", "javax.**", "jdk.**", "sun.**", "com.sun.**"];

/// Filtered supertypes whose methods the callback rule considers: the JDK
/// code that receives user objects and calls them back.
pub const CALLBACK_TYPES: &[&str] = &["java.**"];

/// Interfaces whose implementations the callback rule marks in every loaded
/// class, live or not: the objects programs create in one place and hand to
/// the JDK to be called back in another.
pub const CALLBACK_INTERFACES: &[&str] = &[
    "java.util.function.*",
    "java.util.Comparator",
    "java.lang.Runnable",
    "java.util.concurrent.Callable",
    "java.util.EventListener",
];

/// The profiler's own classes: never instrumented, whatever the patterns say.
pub const SPRIG_CLASSES: &str = "sprig.**";

/// Why a class pattern could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bad class pattern {text:?}: {source}")]
pub struct FilterError {
    pub text: String,
    #[source]
    pub source: PatternError,
}

/// A package or class glob in binary-name form: `com.acme.**` (the package
/// and all subpackages), `com.acme.*` (classes of that one package),
/// `com.acme.Foo` (that class and its nested classes), `com.acme.*Dao`.
/// `*` stays within a package segment, `**` crosses dots; `/` is accepted
/// for `.`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassFilter {
    text: String,
    glob: MethodPattern,
    /// Whether a nested class matches through its outermost class (false
    /// for [`ClassFilter::exact`]).
    nested: bool,
}

impl ClassFilter {
    pub fn parse(text: &str) -> Result<ClassFilter, FilterError> {
        let text = text.trim();
        let glob = MethodPattern::parse(&format!("{text}::*")).map_err(|source| FilterError {
            text: text.to_string(),
            source,
        })?;
        Ok(ClassFilter {
            text: text.to_string(),
            glob,
            nested: true,
        })
    }

    /// A filter for the one class `text` names (binary name), without its
    /// nested classes.
    pub fn exact(text: &str) -> Result<ClassFilter, FilterError> {
        let mut f = ClassFilter::parse(text)?;
        f.nested = false;
        Ok(f)
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the class (binary name with dots) or, for a nested class, its
    /// outermost enclosing class matches.
    pub fn matches_dotted(&self, dotted: &str) -> bool {
        if self.glob.matches_class(dotted) {
            return true;
        }
        if !self.nested {
            return false;
        }
        match dotted.split_once('$') {
            Some((outer, _)) => self.glob.matches_class(outer),
            None => false,
        }
    }
}

/// The combined class filter of a revelation run. A class is instrumentable
/// unless an `exclude` pattern or sprig's own package matches it, or a
/// default JDK exclusion matches it and no `include` pattern does. Array
/// pseudo-classes (`[I`) and lambda proxy classes (`$$Lambda`, hidden and not
/// redefinable) are never instrumentable.
#[derive(Debug)]
pub struct Filters {
    include: Vec<ClassFilter>,
    exclude: Vec<ClassFilter>,
    defaults: Vec<ClassFilter>,
    sprig: ClassFilter,
    callback_types: Vec<ClassFilter>,
    callback_interfaces: Vec<ClassFilter>,
    /// Internal name → instrumentable.
    cache: RefCell<HashMap<String, bool>>,
}

impl Filters {
    pub fn new(include: Vec<ClassFilter>, exclude: Vec<ClassFilter>) -> Filters {
        let fixed = |t: &str| ClassFilter::parse(t).expect("built-in class pattern parses");
        Filters {
            include,
            exclude,
            defaults: DEFAULT_EXCLUDES.iter().map(|t| fixed(t)).collect(),
            sprig: fixed(SPRIG_CLASSES),
            callback_types: CALLBACK_TYPES.iter().map(|t| fixed(t)).collect(),
            callback_interfaces: CALLBACK_INTERFACES.iter().map(|t| fixed(t)).collect(),
            cache: RefCell::new(HashMap::new()),
        }
    }

    /// Whether methods of the class (internal name) may be instrumented.
    pub fn instrumentable(&self, internal: &str) -> bool {
        if let Some(&v) = self.cache.borrow().get(internal) {
            return v;
        }
        let v = self.decide(internal);
        self.cache.borrow_mut().insert(internal.to_string(), v);
        v
    }

    /// Whether the callback rule considers methods of this (filtered)
    /// supertype: it is not instrumentable and [`CALLBACK_TYPES`] names it.
    pub fn calls_back(&self, internal: &str) -> bool {
        if self.instrumentable(internal) {
            return false;
        }
        let dotted = binary_name(internal);
        self.callback_types
            .iter()
            .any(|f| f.matches_dotted(&dotted))
    }

    /// Whether the callback rule marks implementations of this (filtered)
    /// type even in classes that are not live ([`CALLBACK_INTERFACES`]).
    pub fn is_callback_interface(&self, internal: &str) -> bool {
        if !self.calls_back(internal) {
            return false;
        }
        let dotted = binary_name(internal);
        self.callback_interfaces
            .iter()
            .any(|f| f.matches_dotted(&dotted))
    }

    /// Whether the class can never be instrumented, not even as a root: an
    /// exclude pattern or sprig's own package names it, or it is an array or
    /// a lambda proxy.
    pub fn is_excluded(&self, internal: &str) -> bool {
        if internal.starts_with('[') || internal.contains("$$Lambda") {
            return true;
        }
        let dotted = binary_name(internal);
        self.sprig.matches_dotted(&dotted) || self.exclude.iter().any(|f| f.matches_dotted(&dotted))
    }

    fn decide(&self, internal: &str) -> bool {
        if self.is_excluded(internal) {
            return false;
        }
        let dotted = binary_name(internal);
        !self.defaults.iter().any(|f| f.matches_dotted(&dotted))
            || self.include.iter().any(|f| f.matches_dotted(&dotted))
    }
}

#[cfg(test)]
mod exact_tests {
    use super::ClassFilter;

    #[test]
    fn an_exact_filter_leaves_nested_classes_alone() {
        let outer = ClassFilter::parse("a.b.Parser").unwrap();
        let exact = ClassFilter::exact("a.b.Parser").unwrap();
        for f in [&outer, &exact] {
            assert!(f.matches_dotted("a.b.Parser"));
            assert!(!f.matches_dotted("a.b.ParserX"));
        }
        assert!(outer.matches_dotted("a.b.Parser$1"));
        assert!(!exact.matches_dotted("a.b.Parser$1"));
        assert!(!exact.matches_dotted("a.b.Parser$Mode"));
        let nested = ClassFilter::exact("a.b.Parser$Mode").unwrap();
        assert!(nested.matches_dotted("a.b.Parser$Mode"));
        assert!(!nested.matches_dotted("a.b.Parser"));
    }
}
