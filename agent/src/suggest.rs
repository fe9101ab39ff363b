//! Near matches for a root pattern that matched nothing.

use sprig_rewriter::pattern::MethodPattern;

/// Edit distance (insert, delete, substitute) between two strings.
pub fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

fn close(want: &str, have: &str) -> Option<usize> {
    let (w, h) = (want.to_lowercase(), have.to_lowercase());
    let d = distance(&w, &h);
    let limit = (w.chars().count() / 3).max(2);
    if d <= limit || (!w.is_empty() && (h.contains(&w) || w.contains(&h) && h.len() >= 3)) {
        Some(d)
    } else {
        None
    }
}

/// Up to `max` suggestions (`pkg.Class::method`). `class_matches` are the
/// loaded classes the class part matched, with their method names; when
/// there are any, the suggestions are their methods closest to the method
/// part. Otherwise `loaded` (every loaded class, dotted) is searched for
/// classes whose simple name is close to the pattern's.
pub fn suggestions(
    pattern: &MethodPattern,
    class_matches: &[(String, Vec<String>)],
    loaded: &[String],
    max: usize,
) -> Vec<String> {
    let mut scored: Vec<(usize, String)> = Vec::new();
    if !class_matches.is_empty() {
        for (class, methods) in class_matches {
            for m in methods {
                if let Some(d) = close(pattern.method_part(), m) {
                    scored.push((d, format!("{class}::{m}")));
                }
            }
        }
        if scored.is_empty() {
            // Nothing close: list the methods as they come.
            for (class, methods) in class_matches {
                for m in methods.iter().filter(|m| !m.starts_with('<')) {
                    scored.push((usize::MAX, format!("{class}::{m}")));
                }
            }
        }
    } else {
        let want = pattern.simple_class_part();
        for class in loaded {
            let simple = class.rsplit('.').next().unwrap_or(class);
            if let Some(d) = close(want, simple) {
                scored.push((d, format!("{class}::{}", pattern.method_part())));
            }
        }
    }
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    scored.into_iter().take(max).map(|(_, s)| s).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("same", "same"), 0);
    }

    #[test]
    fn class_typo() {
        let p = MethodPattern::parse("com.acme.Servise::handle").unwrap();
        let loaded = vec![
            "com.acme.Service".to_string(),
            "java.lang.String".to_string(),
            "com.acme.Other".to_string(),
        ];
        assert_eq!(
            suggestions(&p, &[], &loaded, 5),
            vec!["com.acme.Service::handle".to_string()]
        );
    }

    #[test]
    fn method_typo() {
        let p = MethodPattern::parse("com.acme.Service::handel").unwrap();
        let cm = vec![(
            "com.acme.Service".to_string(),
            vec![
                "handle".to_string(),
                "<init>".to_string(),
                "zzz".to_string(),
            ],
        )];
        assert_eq!(
            suggestions(&p, &cm, &[], 5),
            vec!["com.acme.Service::handle".to_string()]
        );
    }
}
