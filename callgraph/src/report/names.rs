//! Method names as the text report writes them: `pkg.Class.method`,
//! with the signature in Java form (`handle(Order, int[])`) only where two
//! overloads would otherwise read the same (or for every method when
//! asked), and shortened from the left of the package (`…`) to fit a
//! width, never cutting the method name.

use crate::profile::{MethodInfo, Profile};
use std::collections::{HashMap, HashSet};

/// The text name of every method of a profile.
pub struct Names {
    names: HashMap<u32, String>,
}

impl Names {
    pub fn new(p: &Profile, signatures: bool) -> Names {
        // Distinct descriptors per class and method name (one method may
        // have several ids: a class loaded twice).
        let mut overloads: HashMap<(&str, &str), HashSet<&str>> = HashMap::new();
        for m in p.methods.values() {
            overloads
                .entry((&m.class, &m.name))
                .or_default()
                .insert(&m.descriptor);
        }
        let names = p
            .methods
            .iter()
            .map(|(&id, m)| {
                let with = signatures || overloads[&(m.class.as_str(), m.name.as_str())].len() > 1;
                (id, short(m, with))
            })
            .collect();
        Names { names }
    }

    /// The name of method `id` (an unknown id by its placeholder).
    pub fn get(&self, id: u32) -> String {
        self.names
            .get(&id)
            .cloned()
            .unwrap_or_else(|| MethodInfo::unknown(id).display())
    }
}

/// The text names of methods known by their [`MethodInfo`] rather than an
/// id (a diff's nodes): the same rule as [`Names`], overloads among the
/// methods given.
pub struct InfoNames {
    overloaded: HashSet<(String, String)>,
    signatures: bool,
}

impl InfoNames {
    pub fn new<'a>(methods: impl IntoIterator<Item = &'a MethodInfo>, signatures: bool) -> Self {
        let mut seen: HashMap<(&str, &str), &str> = HashMap::new();
        let mut overloaded = HashSet::new();
        for m in methods {
            match seen.insert((&m.class, &m.name), &m.descriptor) {
                Some(d) if d != m.descriptor => {
                    overloaded.insert((m.class.clone(), m.name.clone()));
                }
                _ => {}
            }
        }
        InfoNames {
            overloaded,
            signatures,
        }
    }

    pub fn get(&self, m: &MethodInfo) -> String {
        let with = self.signatures || self.overloaded.contains(&(m.class.clone(), m.name.clone()));
        short(m, with)
    }
}

/// `pkg.Class.method`, with `(Type, Type)` when `signature`.
fn short(m: &MethodInfo, signature: bool) -> String {
    if m.class.is_empty() {
        return m.name.clone();
    }
    if signature && m.descriptor.starts_with('(') {
        format!(
            "{}.{}({})",
            m.class,
            m.name,
            java_params(&m.descriptor).join(", ")
        )
    } else {
        format!("{}.{}", m.class, m.name)
    }
}

/// The parameter types of a JVM descriptor in Java form, simple names:
/// `(Lcom/acme/Order;[I)V` gives `["Order", "int[]"]`.
pub fn java_params(descriptor: &str) -> Vec<String> {
    let inner = descriptor
        .strip_prefix('(')
        .and_then(|d| d.split(')').next())
        .unwrap_or("");
    let mut out = Vec::new();
    let mut dims = 0;
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        let base = match c {
            '[' => {
                dims += 1;
                continue;
            }
            'B' => "byte".to_owned(),
            'C' => "char".to_owned(),
            'D' => "double".to_owned(),
            'F' => "float".to_owned(),
            'I' => "int".to_owned(),
            'J' => "long".to_owned(),
            'S' => "short".to_owned(),
            'Z' => "boolean".to_owned(),
            'L' => {
                let class: String = chars.by_ref().take_while(|&c| c != ';').collect();
                class.rsplit(['/', '.']).next().unwrap_or("").to_owned()
            }
            other => other.to_string(),
        };
        out.push(format!("{base}{}", "[]".repeat(dims)));
        dims = 0;
    }
    out
}

/// `name` in at most `width` columns: the left of its package replaced by
/// `…`; the method name (and signature) always whole, so a name whose
/// method alone is wider keeps `…` and the method.
pub fn fit(name: &str, width: usize) -> String {
    let len = name.chars().count();
    if len <= width {
        return name.to_owned();
    }
    let end = name.find('(').unwrap_or(name.len());
    let method_start = name[..end].rfind('.').map_or(0, |i| i + 1);
    let keep = name[method_start..].chars().count();
    let tail = width.saturating_sub(1).max(keep).min(len);
    let cut: String = name.chars().skip(len - tail).collect();
    format!("…{cut}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_in_java_form() {
        assert_eq!(java_params("(Lcom/acme/Order;[I)V"), ["Order", "int[]"]);
        assert_eq!(java_params("()V"), Vec::<String>::new());
        assert_eq!(
            java_params("([[Ljava/lang/String;JZ)I"),
            ["String[][]", "long", "boolean"]
        );
    }

    #[test]
    fn fitting_cuts_the_package_never_the_method() {
        assert_eq!(fit("a.b.C.run", 20), "a.b.C.run");
        let f = fit("org.example.deep.Service.handle", 20);
        assert_eq!(f.chars().count(), 20);
        assert!(f.starts_with('…') && f.ends_with("Service.handle"), "{f}");
        assert_eq!(
            fit("x.Y.aVeryLongMethodName(int)", 8),
            "…aVeryLongMethodName(int)"
        );
    }
}
