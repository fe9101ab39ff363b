//! class_info / callees / callees_all on classes compiled by javac in the test.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use sprig_rewriter::vocab::access::{ACC_INTERFACE, ACC_NATIVE, ACC_PUBLIC};
use sprig_rewriter::{CallKind, CallSite, callees, callees_all, class_info, trivial_methods};

/// Compiles the test sources once into a fresh temp dir; returns it.
fn classes() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/analyze_java");
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("analyze-classes");
        let _ = std::fs::remove_dir_all(&out);
        std::fs::create_dir_all(&out).unwrap();
        let javac = |args: &[&str], file: &str| {
            let status = Command::new("javac")
                .args(args)
                .arg("-d")
                .arg(&out)
                .arg(src.join(file))
                .status()
                .expect("javac runs");
            assert!(status.success(), "javac {file} failed");
        };
        javac(&[], "Calls.java");
        javac(&[], "Trivial.java");
        javac(&["--release", "8"], "Old.java");
        out
    })
}

fn bytes(class: &str) -> Vec<u8> {
    std::fs::read(classes().join(format!("{class}.class"))).unwrap()
}

fn site(kind: CallKind, owner: &str, name: &str, descriptor: &str, offset: u32) -> CallSite {
    CallSite {
        kind,
        owner: owner.into(),
        name: name.into(),
        descriptor: descriptor.into(),
        offset,
    }
}

#[test]
fn class_info_reports_header_and_methods() {
    let info = class_info(&bytes("Calls")).unwrap();
    assert_eq!(info.name, "Calls");
    assert_eq!(info.super_name.as_deref(), Some("java/lang/Object"));
    assert_eq!(info.interfaces, vec!["Greeter".to_string()]);
    assert_eq!(info.major_version, 61);
    assert_eq!(info.access & ACC_PUBLIC, ACC_PUBLIC);
    let m = |name: &str| info.methods.iter().find(|m| m.name == name).unwrap();
    assert_eq!(m("twice").descriptor, "(I)I");
    assert!(!m("twice").has_calls, "twice is a leaf");
    assert_eq!(m("twice").code_length, 4);
    assert!(!m("leaf").has_calls, "switches only");
    assert!(m("all").has_calls);
    assert!(
        m("greet").has_calls,
        "string concatenation is an invokedynamic"
    );
    assert!(m("<init>").has_calls);
    assert_eq!(m("nat").code_length, 0);
    assert!(!m("nat").has_calls);
    assert_eq!(m("nat").access & ACC_NATIVE, ACC_NATIVE);

    let shape = class_info(&bytes("Shape")).unwrap();
    let area = shape.methods.iter().find(|m| m.name == "area").unwrap();
    assert_eq!((area.code_length, area.has_calls), (0, false));

    let greeter = class_info(&bytes("Greeter")).unwrap();
    assert_eq!(
        greeter.access & ACC_INTERFACE,
        ACC_INTERFACE,
        "interface flag"
    );
    assert_eq!(greeter.super_name.as_deref(), Some("java/lang/Object"));
}

#[test]
fn callees_of_all_call_kinds_in_code_order() {
    let sites = callees(&bytes("Calls"), "all", "(Ljava/util/List;)V").unwrap();
    let expected = vec![
        site(CallKind::Static, "Calls", "twice", "(I)I", 1),
        site(
            CallKind::Virtual,
            "Calls",
            "greet",
            "(Ljava/lang/String;)Ljava/lang/String;",
            8,
        ),
        site(CallKind::Interface, "java/util/List", "size", "()I", 13),
        site(CallKind::Virtual, "Calls", "priv", "()V", 20),
        site(CallKind::Dynamic, "Calls", "lambda$all$0", "()V", 24),
        site(CallKind::Dynamic, "java/lang/String", "length", "()I", 31),
        site(
            CallKind::Dynamic,
            "java/util/ArrayList",
            "<init>",
            "()V",
            38,
        ),
        site(
            CallKind::Interface,
            "Greeter",
            "hello",
            "()Ljava/lang/String;",
            50,
        ),
        site(
            CallKind::Special,
            "java/lang/StringBuilder",
            "<init>",
            "()V",
            60,
        ),
        site(
            CallKind::Virtual,
            "java/lang/StringBuilder",
            "append",
            "(I)Ljava/lang/StringBuilder;",
            64,
        ),
        site(CallKind::Static, "Greeter", "polite", "()LGreeter;", 68),
    ];
    assert_eq!(sites, expected);
}

#[test]
fn special_calls_constructors_super_and_private() {
    let init = callees(&bytes("Calls"), "<init>", "()V").unwrap();
    assert_eq!(
        init,
        vec![site(
            CallKind::Special,
            "java/lang/Object",
            "<init>",
            "()V",
            1
        )]
    );
    let hello = callees(&bytes("Calls"), "hello", "()Ljava/lang/String;").unwrap();
    assert_eq!(
        hello,
        vec![site(
            CallKind::Special,
            "Greeter",
            "hello",
            "()Ljava/lang/String;",
            1
        )]
    );
    // Before nestmates (--release 8) private calls are invokespecial.
    let reveal = callees(&bytes("Old"), "reveal", "()I").unwrap();
    assert_eq!(
        reveal,
        vec![site(CallKind::Special, "Old", "secret", "()I", 1)]
    );
    let task = callees(&bytes("Old"), "task", "()Ljava/lang/Runnable;").unwrap();
    assert_eq!(
        task,
        vec![site(CallKind::Dynamic, "Old", "reveal", "()I", 1)]
    );
}

#[test]
fn default_and_interface_methods() {
    let sites = callees(&bytes("DefaultUser"), "useDefault", "()Ljava/lang/String;").unwrap();
    assert_eq!(
        sites,
        vec![site(
            CallKind::Virtual,
            "DefaultUser",
            "hello",
            "()Ljava/lang/String;",
            1
        )]
    );
    let default = callees(&bytes("Greeter"), "hello", "()Ljava/lang/String;").unwrap();
    assert_eq!(
        default,
        vec![site(
            CallKind::Interface,
            "Greeter",
            "greet",
            "(Ljava/lang/String;)Ljava/lang/String;",
            3
        )]
    );
    let polite = callees(&bytes("Greeter"), "polite", "()LGreeter;").unwrap();
    assert_eq!(polite.len(), 1);
    assert_eq!(polite[0].kind, CallKind::Dynamic);
    assert_eq!(polite[0].owner, "Greeter");
    assert!(
        polite[0].name.starts_with("lambda$polite$"),
        "{:?}",
        polite[0]
    );
}

#[test]
fn string_concat_leaf_native_abstract_have_no_callees() {
    let calls = bytes("Calls");
    assert!(
        callees(&calls, "greet", "(Ljava/lang/String;)Ljava/lang/String;")
            .unwrap()
            .is_empty()
    );
    assert!(callees(&calls, "leaf", "(I)I").unwrap().is_empty());
    assert!(callees(&calls, "nat", "()V").unwrap().is_empty());
    assert!(callees(&bytes("Shape"), "area", "()D").unwrap().is_empty());
    let wide = callees(&calls, "wideLocals", "(J)J").unwrap();
    assert_eq!(wide.len(), 1, "{wide:?}");
    assert_eq!(
        (wide[0].name.as_str(), wide[0].offset),
        ("twice", 425),
        "after wide iinc/lload/iload"
    );
}

#[test]
fn unknown_method_is_an_error_naming_it() {
    let err = callees(&bytes("Calls"), "nope", "()V")
        .unwrap_err()
        .to_string();
    assert!(err.contains("nope()V") && err.contains("Calls"), "{err}");
}

#[test]
fn callees_all_matches_callees_and_class_info() {
    for class in ["Calls", "Greeter", "DefaultUser", "Shape", "Old"] {
        let b = bytes(class);
        let all = callees_all(&b).unwrap();
        let info = class_info(&b).unwrap();
        assert_eq!(all.len(), info.methods.len());
        for ((name, desc, sites), m) in all.iter().zip(&info.methods) {
            assert_eq!((name, desc), (&m.name, &m.descriptor));
            assert_eq!(sites, &callees(&b, name, desc).unwrap());
            if !sites.is_empty() {
                assert!(
                    m.has_calls,
                    "{class}.{name}{desc} has callees but no has_calls"
                );
            }
        }
    }
}

/// Cross-checks offsets, kinds and owners against `javap -c -p -s`.
#[test]
fn offsets_agree_with_javap() {
    for class in ["Calls", "Greeter", "DefaultUser", "Old"] {
        let path = classes().join(format!("{class}.class"));
        let out = Command::new("javap")
            .args(["-c", "-p", "-s"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        // Per method in declaration order: (offset, opcode, comment) of each invoke.
        let mut methods: Vec<Vec<(u32, String, String)>> = Vec::new();
        let mut in_method = false;
        for line in text.lines() {
            let t = line.trim();
            if let Some(d) = t.strip_prefix("descriptor: ") {
                in_method = d.starts_with('(');
                if in_method {
                    methods.push(Vec::new());
                }
                continue;
            }
            let Some((off, rest)) = t.split_once(": ") else {
                continue;
            };
            let Ok(off) = off.parse::<u32>() else {
                continue;
            };
            let op = rest.split_whitespace().next().unwrap_or("");
            if in_method && op.starts_with("invoke") {
                let comment = rest
                    .split_once("// ")
                    .map(|c| c.1)
                    .unwrap_or("")
                    .to_string();
                methods
                    .last_mut()
                    .unwrap()
                    .push((off, op.to_string(), comment));
            }
        }
        let ours = callees_all(&bytes(class)).unwrap();
        assert_eq!(methods.len(), ours.len(), "{class}: method count");
        for (javap, (name, desc, sites)) in methods.iter().zip(&ours) {
            for (off, op, comment) in javap {
                let kind = match op.as_str() {
                    "invokestatic" => CallKind::Static,
                    "invokespecial" => CallKind::Special,
                    "invokevirtual" => CallKind::Virtual,
                    "invokeinterface" => CallKind::Interface,
                    _ => continue,
                };
                let s = sites.iter().find(|s| s.offset == *off).unwrap_or_else(|| {
                    panic!("{class}.{name}{desc}: no call site at {off} ({op} {comment})")
                });
                assert_eq!(s.kind, kind, "{class}.{name}{desc} at {off}");
                let shown = format!("{}:{}", s.name, s.descriptor);
                let quoted = format!("\"{}\":{}", s.name, s.descriptor);
                assert!(
                    comment.ends_with(&shown) || comment.ends_with(&quoted),
                    "{class}.{name}{desc} at {off}: {comment} vs {s:?}"
                );
                if s.owner != *class {
                    assert!(
                        comment.contains(&format!("{}.", s.owner)),
                        "{comment} vs {s:?}"
                    );
                }
            }
            for s in sites {
                assert!(
                    javap
                        .iter()
                        .any(|(off, op, _)| *off == s.offset && op.starts_with("invoke")),
                    "{class}.{name}{desc}: call site {s:?} is not an invoke in javap"
                );
            }
        }
    }
}

#[test]
fn malformed_input_is_an_error() {
    let b = bytes("Calls");
    assert!(
        class_info(&[])
            .unwrap_err()
            .to_string()
            .contains("truncated")
    );
    assert!(
        class_info(b"\xCA\xFE\xBA\xBF\0\0\0\x3d")
            .unwrap_err()
            .to_string()
            .contains("magic")
    );
    for cut in [10, b.len() / 2, b.len() - 1] {
        assert!(class_info(&b[..cut]).is_err(), "cut at {cut}");
        assert!(callees_all(&b[..cut]).is_err(), "cut at {cut}");
    }
    let mut extra = b.clone();
    extra.push(0);
    assert!(
        class_info(&extra)
            .unwrap_err()
            .to_string()
            .contains("extra bytes")
    );
}

/// A bootstrap method other than LambdaMetafactory: every method-handle
/// argument is reported as CallKind::MethodHandle. Made by renaming the
/// bootstrap's `metafactory` (same length, so nothing else moves).
#[test]
fn other_bootstraps_report_method_handle_arguments() {
    let mut b = bytes("Old");
    let at = b
        .windows(11)
        .position(|w| w == b"metafactory")
        .expect("Old uses metafactory");
    b[at + 10] = b'z';
    let task = callees(&b, "task", "()Ljava/lang/Runnable;").unwrap();
    assert_eq!(
        task,
        vec![site(CallKind::MethodHandle, "Old", "reveal", "()I", 1)]
    );
    let info = class_info(&b).unwrap();
    assert!(
        info.methods
            .iter()
            .find(|m| m.name == "task")
            .unwrap()
            .has_calls
    );
}

#[test]
fn trivial_methods_are_short_straight_leaves() {
    let class = bytes("Trivial");
    let names = |max: u32| -> Vec<String> {
        trivial_methods(&class, max)
            .unwrap()
            .into_iter()
            .map(|(name, _)| name)
            .collect()
    };
    // The source names every method t_ (trivial at 16 bytes) or n_ (not).
    let info = class_info(&class).unwrap();
    let expected: Vec<String> = info
        .methods
        .iter()
        .filter(|m| m.name.starts_with("t_"))
        .map(|m| m.name.clone())
        .collect();
    assert_eq!(expected.len(), 10, "the fixture's trivial methods");
    assert_eq!(names(16), expected);
    let n_seventeen = info.methods.iter().find(|m| m.name == "n_seventeen");
    assert_eq!(n_seventeen.map(|m| m.code_length), Some(17));
    assert!(names(17).contains(&"n_seventeen".to_string()));
    // The bound is on bytes: at 5, the getter (5) stays, the setter (6) goes.
    let five = names(5);
    assert!(five.contains(&"t_getter".to_string()));
    assert!(!five.contains(&"t_setter".to_string()));
    assert!(names(0).is_empty());
    // Descriptors come with the names.
    assert!(
        trivial_methods(&class, 16)
            .unwrap()
            .contains(&("t_setter".to_string(), "(I)V".to_string()))
    );
}
