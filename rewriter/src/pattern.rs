//! Method patterns naming profiling roots: `pkg.Class::method`,
//! `pkg.Class::method(Ldesc;)V` and `pkg.Class::*`.
//!
//! The class part is a binary class name with dots (nested classes with
//! `$`), optionally with globs: `*` matches any run of characters within one
//! package segment (never a `.`), `**` matches any run including dots. The
//! method part is a method name (`<init>` included), `*` for every method, or
//! a name with `*` globs; an optional method descriptor follows it and must
//! then match exactly. A method name is what the JVM allows (JVMS 4.2.2):
//! anything but `.`, `;`, `[`, `/`, `<` and `>`, spaces and `:` included.
//! What the grammar reserves (`::`, `**`, a `(` starting the descriptor,
//! and for [`parse_list`] the `,`), a `*` glob matches: `a.B::x*y` for a
//! method named `x::y`. Whitespace around either part is ignored.

use std::fmt;
use thiserror::Error;

use crate::vocab::names::{binary_name, check_method_descriptor};

/// Why a pattern could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum PatternError {
    #[error("pattern {0:?} has no `::` between class and method (write pkg.Class::method)")]
    MissingSeparator(String),
    #[error("pattern {0:?} has an empty class part (write pkg.Class::method)")]
    EmptyClass(String),
    #[error("pattern {0:?} has an empty method part (write pkg.Class::method or pkg.Class::*)")]
    EmptyMethod(String),
    #[error("pattern {pattern:?}: bad class part {class:?}: {reason}")]
    BadClass {
        pattern: String,
        class: String,
        reason: &'static str,
    },
    #[error("pattern {pattern:?}: bad method name {method:?}: {reason}")]
    BadMethod {
        pattern: String,
        method: String,
        reason: &'static str,
    },
    #[error("pattern {pattern:?}: bad method descriptor {descriptor:?}: {reason}")]
    BadDescriptor {
        pattern: String,
        descriptor: String,
        reason: &'static str,
    },
}

/// One element of a compiled glob.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    Literal(char),
    /// `*`: any run of characters other than `stop`.
    Star,
    /// `**`: any run of characters.
    AnyRun,
}

/// A compiled glob over a name; `stop` is the character `*` never crosses.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Glob {
    pieces: Vec<Piece>,
    stop: Option<char>,
}

impl Glob {
    fn compile(text: &str, allow_double: bool, stop: Option<char>) -> Result<Glob, &'static str> {
        let chars: Vec<char> = text.chars().collect();
        let mut pieces = Vec::with_capacity(chars.len());
        let mut i = 0;
        while i < chars.len() {
            if chars[i] == '*' {
                let mut run = 1;
                while i + run < chars.len() && chars[i + run] == '*' {
                    run += 1;
                }
                match run {
                    1 => pieces.push(Piece::Star),
                    2 if allow_double => pieces.push(Piece::AnyRun),
                    2 => return Err("`**` is only allowed in the class part"),
                    _ => return Err("more than two `*` in a row"),
                }
                i += run;
            } else {
                pieces.push(Piece::Literal(chars[i]));
                i += 1;
            }
        }
        Ok(Glob { pieces, stop })
    }

    fn is_literal(&self) -> bool {
        self.pieces.iter().all(|p| matches!(p, Piece::Literal(_)))
    }

    fn literal(&self) -> Option<String> {
        self.pieces
            .iter()
            .map(|p| match p {
                Piece::Literal(c) => Some(*c),
                _ => None,
            })
            .collect()
    }

    /// Matches the whole of `text`. Dynamic programming over (piece, char):
    /// linear in pieces × chars, no backtracking blow-up.
    fn matches(&self, text: &str) -> bool {
        let chars: Vec<char> = text.chars().collect();
        let n = chars.len();
        // reach[j]: the pieces consumed so far can match chars[..j].
        let mut reach = vec![false; n + 1];
        reach[0] = true;
        for piece in &self.pieces {
            let mut next = vec![false; n + 1];
            match piece {
                Piece::Literal(c) => {
                    for j in 0..n {
                        if reach[j] && chars[j] == *c {
                            next[j + 1] = true;
                        }
                    }
                }
                Piece::Star | Piece::AnyRun => {
                    let stop = if matches!(piece, Piece::Star) {
                        self.stop
                    } else {
                        None
                    };
                    let mut open = false;
                    for j in 0..=n {
                        if reach[j] {
                            open = true;
                        }
                        next[j] = open;
                        if j < n && Some(chars[j]) == stop {
                            open = false;
                        }
                    }
                }
            }
            reach = next;
            if !reach.iter().any(|&r| r) {
                return false;
            }
        }
        reach[n]
    }
}

/// A parsed root pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MethodPattern {
    text: String,
    class_text: String,
    class: Glob,
    method_text: String,
    method: Glob,
    descriptor: Option<String>,
}

impl MethodPattern {
    /// Parses `pkg.Class::method`, `pkg.Class::method(desc)ret` or
    /// `pkg.Class::*`. Surrounding whitespace is ignored; `/` in the class
    /// part is accepted for `.`.
    pub fn parse(text: &str) -> Result<MethodPattern, PatternError> {
        let text = text.trim();
        let Some((class_raw, rest)) = text.split_once("::") else {
            return Err(PatternError::MissingSeparator(text.to_string()));
        };
        let class_text = binary_name(class_raw.trim());
        if class_text.is_empty() {
            return Err(PatternError::EmptyClass(text.to_string()));
        }
        let bad_class = |reason| PatternError::BadClass {
            pattern: text.to_string(),
            class: class_text.clone(),
            reason,
        };
        if class_text.starts_with('.') || class_text.ends_with('.') || class_text.contains("..") {
            return Err(bad_class("empty package segment"));
        }
        if let Some(c) = class_text
            .chars()
            .find(|c| c.is_whitespace() || matches!(c, ';' | '[' | '(' | ')' | '<' | '>' | ':'))
        {
            let _ = c;
            return Err(bad_class(
                "contains a character that cannot appear in a class name",
            ));
        }
        let class = Glob::compile(&class_text, true, Some('.')).map_err(bad_class)?;

        let rest = rest.trim();
        let (method_text, descriptor) = match rest.find('(') {
            Some(at) => (rest[..at].trim().to_string(), Some(rest[at..].to_string())),
            None => (rest.to_string(), None),
        };
        if method_text.is_empty() {
            return Err(PatternError::EmptyMethod(text.to_string()));
        }
        let bad_method = |reason| PatternError::BadMethod {
            pattern: text.to_string(),
            method: method_text.clone(),
            reason,
        };
        if method_text.contains("::") {
            return Err(bad_method("more than one `::`"));
        }
        // JVMS 4.2.2: any character but these (`<init>` and `<clinit>`
        // aside). Spaces, `:` and `,` are legal (Kotlin writes backquoted
        // names as they are); the grammar itself needs only `::`, `**` and
        // `(`, checked on their own.
        let special = method_text == "<init>" || method_text == "<clinit>";
        if !special
            && method_text
                .chars()
                .any(|c| matches!(c, '.' | ';' | '[' | '/' | '<' | '>'))
        {
            return Err(bad_method(
                "contains a character that cannot appear in a method name",
            ));
        }
        let method = Glob::compile(&method_text, false, None).map_err(bad_method)?;
        if let Some(d) = &descriptor {
            check_method_descriptor(d).map_err(|reason| PatternError::BadDescriptor {
                pattern: text.to_string(),
                descriptor: d.clone(),
                reason,
            })?;
        }
        Ok(MethodPattern {
            text: text.to_string(),
            class_text,
            class,
            method_text,
            method,
            descriptor,
        })
    }

    /// The pattern as written (trimmed).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The class part, dotted (`pkg.Class`, possibly with globs).
    pub fn class_part(&self) -> &str {
        &self.class_text
    }

    /// The method part without descriptor (`name`, `*`, or a glob).
    pub fn method_part(&self) -> &str {
        &self.method_text
    }

    /// The descriptor, when the pattern names one.
    pub fn descriptor(&self) -> Option<&str> {
        self.descriptor.as_deref()
    }

    /// The class name when the class part has no globs.
    pub fn exact_class(&self) -> Option<String> {
        self.class.literal()
    }

    /// Whether the class part has no globs.
    pub fn is_exact_class(&self) -> bool {
        self.class.is_literal()
    }

    /// The last segment of the class part (after the last `.`), for
    /// near-match suggestions.
    pub fn simple_class_part(&self) -> &str {
        self.class_text
            .rsplit('.')
            .next()
            .unwrap_or(&self.class_text)
    }

    /// Whether the class part matches a binary class name with dots
    /// (`com.acme.Outer$Inner`).
    pub fn matches_class(&self, binary_name_dotted: &str) -> bool {
        self.class.matches(binary_name_dotted)
    }

    /// Whether the method part matches a method's name and descriptor.
    pub fn matches_method(&self, name: &str, descriptor: &str) -> bool {
        if let Some(d) = &self.descriptor
            && d != descriptor
        {
            return false;
        }
        self.method.matches(name)
    }

    /// Both parts at once.
    pub fn matches(&self, class_dotted: &str, name: &str, descriptor: &str) -> bool {
        self.matches_class(class_dotted) && self.matches_method(name, descriptor)
    }
}

impl fmt::Display for MethodPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for MethodPattern {
    type Err = PatternError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        MethodPattern::parse(s)
    }
}

/// Parses one pattern ([`MethodPattern::parse`]).
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

    fn p(s: &str) -> MethodPattern {
        MethodPattern::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn exact_method() {
        let m = p("com.acme.Service::handle");
        assert!(m.matches_class("com.acme.Service"));
        assert!(!m.matches_class("com.acme.ServiceX"));
        assert!(!m.matches_class("com.acme.sub.Service"));
        assert!(m.matches_method("handle", "()V"));
        assert!(m.matches_method("handle", "(I)Ljava/lang/String;"));
        assert!(!m.matches_method("handler", "()V"));
        assert_eq!(m.exact_class().as_deref(), Some("com.acme.Service"));
        assert_eq!(m.simple_class_part(), "Service");
        assert_eq!(m.to_string(), "com.acme.Service::handle");
    }

    #[test]
    fn with_descriptor() {
        let m = p("com.acme.Service::handle(Ljava/lang/String;[I)V");
        assert_eq!(m.descriptor(), Some("(Ljava/lang/String;[I)V"));
        assert!(m.matches_method("handle", "(Ljava/lang/String;[I)V"));
        assert!(!m.matches_method("handle", "(Ljava/lang/String;)V"));
        assert!(p("a.B::c()J").matches_method("c", "()J"));
    }

    #[test]
    fn every_method_and_globs() {
        let m = p("com.acme.Service::*");
        assert!(m.matches("com.acme.Service", "anything", "()V"));
        assert!(m.matches("com.acme.Service", "<init>", "()V"));
        let g = p("com.acme.*::run");
        assert!(g.matches_class("com.acme.Service"));
        assert!(g.matches_class("com.acme.Outer$Inner"));
        assert!(!g.matches_class("com.acme.sub.Service"));
        assert!(!g.matches_class("com.other.Service"));
        let gg = p("com.**::run");
        assert!(gg.matches_class("com.acme.sub.Service"));
        assert!(gg.matches_class("com.x"));
        assert!(!gg.matches_class("org.acme.Service"));
        let mid = p("com.*.Service::run");
        assert!(mid.matches_class("com.acme.Service"));
        assert!(!mid.matches_class("com.a.b.Service"));
        let mg = p("a.B::get*");
        assert!(mg.matches_method("getX", "()I"));
        assert!(mg.matches_method("get", "()I"));
        assert!(!mg.matches_method("set", "()I"));
        let suffix = p("**Test::*");
        assert!(suffix.matches_class("a.b.FooTest"));
        assert!(!suffix.matches_class("a.b.FooTests"));
        assert!(!p("a.B*::x").is_exact_class());
    }

    #[test]
    fn nested_and_slashes() {
        let m = p("com.acme.Outer$Inner::run");
        assert!(m.matches_class("com.acme.Outer$Inner"));
        assert!(!m.matches_class("com.acme.Outer"));
        let s = p("com/acme/Service::run");
        assert!(s.matches_class("com.acme.Service"));
        assert!(p("a.B::<init>").matches_method("<init>", "(I)V"));
    }

    #[test]
    fn errors() {
        use PatternError::*;
        let e = |s: &str| MethodPattern::parse(s).unwrap_err();
        assert!(matches!(e("com.acme.Service.handle"), MissingSeparator(_)));
        assert!(matches!(e("::handle"), EmptyClass(_)));
        assert!(matches!(e("com.acme.Service::"), EmptyMethod(_)));
        assert!(matches!(e("com.acme.Service::(I)V"), EmptyMethod(_)));
        assert!(matches!(e("com..Service::x"), BadClass { .. }));
        assert!(matches!(e("com.acme.Service.::x"), BadClass { .. }));
        assert!(matches!(e("com.a cme.S::x"), BadClass { .. }));
        assert!(matches!(e("com.***.S::x"), BadClass { .. }));
        assert!(matches!(e("a.B::x.y"), BadMethod { .. }));
        assert!(matches!(e("a.B::x**"), BadMethod { .. }));
        assert!(matches!(e("a.B::x::y"), BadMethod { .. }));
        assert!(matches!(e("a.B::x(I"), BadDescriptor { .. }));
        assert!(matches!(e("a.B::x(Q)V"), BadDescriptor { .. }));
        assert!(matches!(
            e("a.B::x(Ljava.lang.String;)V"),
            BadDescriptor { .. }
        ));
        assert!(matches!(
            e("a.B::x(Ljava/lang/String)V"),
            BadDescriptor { .. }
        ));
        assert!(matches!(e("a.B::x()"), BadDescriptor { .. }));
        assert!(matches!(e("a.B::x()VV"), BadDescriptor { .. }));
        assert!(matches!(e("a.B::x(V)V"), BadDescriptor { .. }));
        // The messages say what to write.
        assert!(e("x").to_string().contains("pkg.Class::method"));
    }

    #[test]
    fn legal_method_names_are_accepted() {
        // JVMS 4.2.2: a method name is any non-empty string without `.`,
        // `;`, `[`, `/`, `<` or `>` (`<init>` and `<clinit>` aside). Kotlin
        // writes backquoted names such as `my test` as they are.
        for name in [
            "my test",
            "should fail when: empty",
            "a:b",
            "x-y",
            "x)",
            "x,y",
            "x+y=z?",
            "\u{e9}t\u{e9}",
            "$lambda$run$0",
            "tab\there",
        ] {
            let m = p(&format!("a.B::{name}"));
            assert_eq!(m.method_part(), name);
            assert!(m.matches_method(name, "()V"), "{name}");
            assert!(!m.matches_method("other", "()V"), "{name}");
        }
        let with_desc = p("a.B::my test(I)V");
        assert_eq!(with_desc.method_part(), "my test");
        assert!(with_desc.matches_method("my test", "(I)V"));
        assert!(p("a.B::my *").matches_method("my test", "()V"));
    }

    #[test]
    fn method_metacharacters_are_still_rejected() {
        use PatternError::*;
        let e = |s: &str| MethodPattern::parse(s).unwrap_err();
        // Illegal in any JVM method name.
        for name in [
            "x.y", "x;y", "x[y", "x/y", "x<y", "x>y", "<foo>", "<init", "init>",
        ] {
            assert!(
                matches!(e(&format!("a.B::{name}")), BadMethod { .. }),
                "{name}"
            );
        }
        // The grammar's own: one `::`, `**` only in the class part, `(`
        // starts the descriptor.
        assert!(matches!(e("a.B::x::y"), BadMethod { .. }));
        assert!(matches!(e("a.B::x**"), BadMethod { .. }));
        assert!(matches!(e("a.B::x(y"), BadDescriptor { .. }));
        assert!(p("a.B::<clinit>").matches_method("<clinit>", "()V"));
    }

    #[test]
    fn glob_is_linear_on_hostile_input() {
        let m = p("a.**b**c**d**e**f::x");
        let long = format!("a.{}", "b".repeat(5000));
        assert!(!m.matches_class(&long));
    }

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
