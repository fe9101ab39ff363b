//! The architecture invariants of ARCHITECTURE.md that a program can check:
//! which crate may depend on which, no import circle between the files of
//! a crate, the agent's imports pointing down its floors, `unsafe` only in
//! the named FFI modules, the pure crates doing no I/O, and no document or
//! comment dated by a numbered work session.
//! Reads the workspace's sources as text; starts nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    sprig_tests::repo_root()
}

/// The workspace's library and binary crates: directory, package name,
/// and the sprig crates it may depend on.
const CRATES: &[(&str, &str, &[&str])] = &[
    ("wire", "sprig-wire", &[]),
    ("rewriter", "sprig-rewriter", &[]),
    ("reveal", "sprig-reveal", &["sprig-rewriter"]),
    ("callgraph", "sprig-callgraph", &["sprig-wire"]),
    (
        "agent",
        "sprig-agent",
        &["sprig-wire", "sprig-rewriter", "sprig-reveal"],
    ),
    (
        "cli",
        "sprig",
        &["sprig-wire", "sprig-rewriter", "sprig-callgraph"],
    ),
];

/// Files that may hold `unsafe` code: the FFI modules.
const UNSAFE_ALLOWED: &[&str] = &[
    "agent/src/ffi/",
    "agent/src/lib.rs",
    "cli/src/sys.rs",
    "cli/src/signals.rs",
    "wire/src/clock.rs",
    "wire/src/memfd.rs",
    "wire/src/ring/raw.rs",
    "wire/src/session/sys.rs",
];

/// Crates with no `unsafe` at all, which say so with `forbid`.
const FORBID_UNSAFE: &[&str] = &["rewriter", "reveal", "callgraph"];

/// Crates that do no I/O of their own (they read and write through what
/// their callers hand them).
const PURE: &[&str] = &["rewriter", "reveal", "callgraph"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The source with comments removed (line and block, not inside strings
/// well enough for import scanning) and the trailing `#[cfg(test)] mod`.
fn code_of(src: &str) -> String {
    let src = match src.find("#[cfg(test)]\nmod ") {
        Some(at) => &src[..at],
        None => src,
    };
    let mut out = String::with_capacity(src.len());
    for line in src.lines() {
        let line = match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        };
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The module path of a file of a crate's `src/` (`a/b.rs` and `a/b/mod.rs`
/// are `[a, b]`, `lib.rs` and `main.rs` the crate root).
fn module_of(src_dir: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src_dir).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_owned());
    }
    parts
}

/// Module paths named in `code` (`crate::a::b`, `super::x`, `self::x`),
/// made absolute for a file at module path `here`.
fn named_paths(code: &str, here: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    for head in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(head) {
            let start = from + at;
            from = start + head.len();
            // A whole word: not `foo_crate::`.
            if start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
                continue;
            }
            let mut tail = Vec::new();
            let mut rest = &code[from..];
            // `super::super::x`
            let mut ups = usize::from(head == "super::");
            while let Some(r) = rest.strip_prefix("super::") {
                ups += 1;
                rest = r;
            }
            loop {
                let end = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                if end == 0 {
                    break;
                }
                tail.push(rest[..end].to_owned());
                match rest[end..].strip_prefix("::") {
                    Some(r) => rest = r,
                    None => break,
                }
            }
            let mut path: Vec<String> = match head {
                "crate::" => Vec::new(),
                "self::" => here.to_vec(),
                _ => here[..here.len().saturating_sub(ups)].to_vec(),
            };
            path.extend(tail);
            out.push(path);
        }
    }
    out
}

/// File-level import graph of one crate: file -> files it names.
fn import_graph(krate: &str) -> BTreeMap<String, BTreeSet<String>> {
    let src_dir = root().join(krate).join("src");
    let mut files = Vec::new();
    rust_files(&src_dir, &mut files);
    let mut by_module: BTreeMap<Vec<String>, String> = BTreeMap::new();
    for f in &files {
        let m = module_of(&src_dir, f);
        if m.last().is_some_and(|l| l == "tests") {
            continue;
        }
        by_module.insert(m, f.strip_prefix(root()).unwrap().display().to_string());
    }
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, file) in &by_module {
        let src = fs::read_to_string(root().join(file)).unwrap();
        let edges = graph.entry(file.clone()).or_default();
        for path in named_paths(&code_of(&src), module) {
            // The longest prefix that is a file of the crate.
            let target = (1..=path.len())
                .rev()
                .find_map(|n| by_module.get(&path[..n]));
            if let Some(t) = target
                && t != file
            {
                edges.insert(t.clone());
            }
        }
    }
    graph
}

/// Strongly connected groups of two or more files (Tarjan, iterative).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let names: Vec<&String> = graph.keys().collect();
    let index_of: BTreeMap<&String, usize> =
        names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let adj: Vec<Vec<usize>> = names
        .iter()
        .map(|n| {
            graph[*n]
                .iter()
                .filter_map(|t| index_of.get(t).copied())
                .collect()
        })
        .collect();
    let n = names.len();
    let (mut index, mut low, mut on) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
    let (mut stack, mut next, mut out) = (Vec::new(), 0, Vec::new());
    for s in 0..n {
        if index[s] != usize::MAX {
            continue;
        }
        let mut work = vec![(s, 0usize)];
        index[s] = next;
        low[s] = next;
        next += 1;
        stack.push(s);
        on[s] = true;
        while let Some(&mut (v, ref mut i)) = work.last_mut() {
            if *i < adj[v].len() {
                let w = adj[v][*i];
                *i += 1;
                if index[w] == usize::MAX {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on[w] = true;
                    work.push((w, 0));
                } else if on[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                work.pop();
                if let Some(&(u, _)) = work.last() {
                    low[u] = low[u].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut group = Vec::new();
                    while let Some(w) = stack.pop() {
                        on[w] = false;
                        group.push(names[w].clone());
                        if w == v {
                            break;
                        }
                    }
                    if group.len() > 1 {
                        group.sort();
                        out.push(group);
                    }
                }
            }
        }
    }
    out
}

#[test]
fn the_circle_finder_finds_circles() {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (a, b) in [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e")] {
        g.entry(a.into()).or_default().insert(b.into());
        g.entry(b.into()).or_default();
    }
    assert_eq!(circles(&g), vec![vec!["a", "b", "c"]]);
    let here = vec!["reveal".to_owned(), "plan".to_owned()];
    let paths = named_paths("use super::state::State; crate::ffi::Jni; self::x", &here);
    assert!(paths.contains(&vec!["reveal".into(), "state".into(), "State".into()]));
    assert!(paths.contains(&vec!["ffi".into(), "Jni".into()]));
    assert!(paths.contains(&vec!["reveal".into(), "plan".into(), "x".into()]));
}

#[test]
fn no_file_imports_a_file_that_imports_it_back() {
    let mut found = Vec::new();
    for (dir, _, _) in CRATES.iter().chain(&[("bench", "sprig-bench", &[][..])]) {
        let graph = import_graph(dir);
        assert!(
            graph.len() > 1 || *dir == "reveal",
            "no files found in {dir}"
        );
        found.extend(circles(&graph));
    }
    assert!(found.is_empty(), "import circles: {found:#?}");
}

/// The agent's floors (ARCHITECTURE.md, `agent/`), bottom first: a module
/// imports only modules of floors below its own.
const AGENT_FLOORS: &[&[&str]] = &[
    &["ffi", "sync", "suggest"],
    &["error", "outbox"],
    &["ledger", "frames", "env"],
    &["probe_class", "threads"],
    &["methods", "allocs", "wait_classes"],
    &["reveal"],
    &["instrument", "probe"],
    &["calibrate"],
    &["sources"],
    &["session"],
    &["lib.rs"],
];

#[test]
fn every_import_of_the_agent_points_down_its_floors() {
    let floor_of = |file: &str| -> usize {
        let rel = file.strip_prefix("agent/src/").unwrap_or(file);
        let top = rel.split('/').next().unwrap_or(rel);
        let top = if top == "lib.rs" {
            top
        } else {
            top.trim_end_matches(".rs")
        };
        AGENT_FLOORS
            .iter()
            .position(|f| f.contains(&top))
            .unwrap_or_else(|| panic!("{file}: its module is on no floor of AGENT_FLOORS"))
    };
    let top_of = |file: &str| {
        file.trim_start_matches("agent/src/")
            .split('/')
            .next()
            .map(str::to_owned)
    };
    let mut upward = Vec::new();
    for (file, targets) in import_graph("agent") {
        for t in targets {
            if top_of(&file) != top_of(&t) && floor_of(&t) >= floor_of(&file) {
                upward.push(format!("{file} -> {t}"));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "agent imports that do not point down: {upward:#?}"
    );
}

fn sprig_dependencies(dir: &str) -> BTreeSet<String> {
    let toml = fs::read_to_string(root().join(dir).join("Cargo.toml")).unwrap();
    let mut deps = BTreeSet::new();
    let mut in_deps = false;
    for line in toml.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if in_deps
            && let Some((name, _)) = line.split_once(['=', '.'])
            && name.trim().starts_with("sprig")
        {
            deps.insert(name.trim().to_owned());
        }
    }
    deps
}

#[test]
fn crates_depend_only_downwards() {
    for (dir, name, allowed) in CRATES {
        let deps = sprig_dependencies(dir);
        let extra: Vec<_> = deps
            .iter()
            .filter(|d| !allowed.contains(&d.as_str()))
            .collect();
        assert!(
            extra.is_empty(),
            "{name} depends on {extra:?}; ARCHITECTURE.md allows {allowed:?}"
        );
    }
    // The CLI never links revelation or the agent; the agent never the CCT.
    assert!(!sprig_dependencies("cli").contains("sprig-reveal"));
    assert!(!sprig_dependencies("agent").contains("sprig-callgraph"));
}

#[test]
fn unsafe_code_lives_only_in_the_ffi_modules() {
    let mut offenders = Vec::new();
    for (dir, _, _) in CRATES {
        let mut files = Vec::new();
        rust_files(&root().join(dir).join("src"), &mut files);
        for f in files {
            let rel = f.strip_prefix(root()).unwrap().display().to_string();
            if UNSAFE_ALLOWED.iter().any(|a| rel.starts_with(a)) {
                continue;
            }
            let code = code_of(&fs::read_to_string(&f).unwrap());
            if ["unsafe {", "unsafe fn", "unsafe impl", "unsafe extern"]
                .iter()
                .any(|k| code.contains(k))
            {
                offenders.push(rel);
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "unsafe outside the FFI modules: {offenders:?}"
    );
    for dir in FORBID_UNSAFE {
        let lib = fs::read_to_string(root().join(dir).join("src/lib.rs")).unwrap();
        assert!(
            lib.contains("#![forbid(unsafe_code)]"),
            "{dir} does not forbid unsafe code"
        );
    }
    for dir in ["wire", "agent"] {
        let lib = fs::read_to_string(root().join(dir).join("src/lib.rs")).unwrap();
        assert!(
            lib.contains("#![deny(unsafe_code)]"),
            "{dir} does not deny unsafe code"
        );
    }
}

#[test]
fn the_pure_crates_do_no_io_of_their_own() {
    let mut offenders = Vec::new();
    for dir in PURE {
        let mut files = Vec::new();
        rust_files(&root().join(dir).join("src"), &mut files);
        // Test modules in files of their own (`tests.rs`) may use the disk.
        for f in files.into_iter().filter(|f| !f.ends_with("tests.rs")) {
            let code = code_of(&fs::read_to_string(&f).unwrap());
            for needle in [
                "std::fs",
                "std::net",
                "std::process",
                "File::open",
                "File::create",
            ] {
                if code.contains(needle) {
                    offenders.push(format!("{}: {needle}", f.display()));
                }
            }
        }
    }
    assert!(offenders.is_empty(), "I/O in a pure crate: {offenders:?}");
}

#[test]
fn nothing_is_dated_by_a_numbered_work_session() {
    let ordinals = [
        "first",
        "second",
        "third",
        "fourth",
        "fifth",
        "sixth",
        "seventh",
        "eighth",
        "ninth",
        "tenth",
        "eleventh",
        "twelfth",
        "thirteenth",
        "fourteenth",
        "fifteenth",
        "sixteenth",
        "seventeenth",
        "eighteenth",
        "nineteenth",
        "twentieth",
        "thirtieth",
    ];
    let out = std::process::Command::new("git")
        .args(["ls-files", "*.md", "*.rs", "*.java", "*.sh"])
        .current_dir(root())
        .output()
        .expect("git ls-files");
    if !out.status.success() {
        eprintln!("SKIP nothing_is_dated_by_a_numbered_work_session: not a git checkout");
        return;
    }
    let mut hits = Vec::new();
    for file in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(text) = fs::read_to_string(root().join(file)) else {
            continue;
        };
        let lower = text.to_lowercase();
        // Words of the whole file with their line, so that a phrase
        // wrapped over two lines (or two comment lines) is seen too.
        let words: Vec<(usize, &str)> = lower
            .lines()
            .enumerate()
            .flat_map(|(n, line)| {
                line.split(|c: char| !c.is_ascii_alphabetic() && c != '-')
                    .filter(|w| !w.is_empty())
                    .map(move |w| (n, w))
            })
            .collect();
        for pair in words.windows(2) {
            let (n, first) = pair[0];
            let ordinal = ordinals.contains(&first) || first.starts_with("twenty-");
            if ordinal && pair[1].1 == "session" {
                hits.push(format!("{file}:{}", n + 1));
            }
        }
    }
    assert!(
        hits.is_empty(),
        "dated by a numbered work session (say the date and commit, or `profiling session`): {hits:?}"
    );
}
