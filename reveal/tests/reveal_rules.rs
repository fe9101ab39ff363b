//! Revelation rules on small hand-made class models: filters, calls to
//! classes not loaded yet, inherited implementations, abstract roots, class
//! loaders, and the call protocol. (The tests on real javac output are in
//! `reveal_java.rs` and `reveal_javac.rs`.)

use sprig_reveal::{
    ClassFilter, EdgeKind, Filters, LoadOutcome, MethodId, MethodKey, RevealConfig, RevealError,
    Revealer, Scheme,
};
use sprig_rewriter::pattern::MethodPattern;
use sprig_rewriter::vocab::access::{
    ACC_ABSTRACT, ACC_INTERFACE, ACC_NATIVE, ACC_PROTECTED, ACC_PUBLIC, ACC_STATIC,
};
use sprig_rewriter::{CallKind, CallSite, Check, ClassInfo, MethodInfo};

const PUBLIC: u16 = ACC_PUBLIC;
const STATIC: u16 = ACC_STATIC;
const INTERFACE: u16 = ACC_INTERFACE | ACC_ABSTRACT;
const ABSTRACT: u16 = ACC_ABSTRACT;

/// A method: (name, descriptor, access, has_calls); abstract ones get no code.
type M<'a> = (&'a str, &'a str, u16, bool);

fn class(name: &str, sup: Option<&str>, ifaces: &[&str], access: u16, methods: &[M]) -> ClassInfo {
    ClassInfo {
        name: name.into(),
        super_name: sup.map(Into::into),
        interfaces: ifaces.iter().map(|s| s.to_string()).collect(),
        access,
        major_version: 61,
        methods: methods
            .iter()
            .map(|&(n, d, a, calls)| MethodInfo {
                name: n.into(),
                descriptor: d.into(),
                access: a,
                code_length: if a & ABSTRACT != 0 { 0 } else { 5 },
                has_calls: calls,
            })
            .collect(),
    }
}

fn site(kind: CallKind, owner: &str, name: &str, desc: &str) -> CallSite {
    CallSite {
        kind,
        owner: owner.into(),
        name: name.into(),
        descriptor: desc.into(),
        offset: 0,
    }
}

fn load(rv: &mut Revealer, info: ClassInfo) -> LoadOutcome {
    rv.on_class_loaded(info, 1, Vec::new)
}

fn names(out: &LoadOutcome) -> Vec<&str> {
    out.methods.iter().map(|m| m.name.as_str()).collect()
}

fn object() -> ClassInfo {
    class(
        "java/lang/Object",
        None,
        &[],
        PUBLIC,
        &[
            ("<init>", "()V", PUBLIC, false),
            ("toString", "()Ljava/lang/String;", PUBLIC, true),
            ("hashCode", "()I", PUBLIC | ACC_NATIVE, false),
            ("finalize", "()V", ACC_PROTECTED, false),
        ],
    )
}

fn lazy() -> Revealer {
    Revealer::new(RevealConfig::default())
}

fn root(rv: &mut Revealer, p: &str) {
    rv.add_root(MethodPattern::parse(p).unwrap());
}

fn key(c: &str, n: &str, d: &str) -> MethodKey {
    MethodKey::new(c, n, d)
}

/// Roots the session at `a.Main::main` and loads `a/Main` with it (a
/// static method that calls something); returns its id.
fn main_root(rv: &mut Revealer) -> MethodId {
    root(rv, "a.Main::main");
    load(
        rv,
        class(
            "a/Main",
            Some("java/lang/Object"),
            &[],
            PUBLIC,
            &[("main", "()V", STATIC, true)],
        ),
    );
    rv.id_of(&key("a/Main", "main", "()V")).unwrap()
}

#[test]
fn filters_default_include_exclude_and_sprig() {
    let f = |inc: &[&str], exc: &[&str]| {
        Filters::new(
            inc.iter().map(|t| ClassFilter::parse(t).unwrap()).collect(),
            exc.iter().map(|t| ClassFilter::parse(t).unwrap()).collect(),
        )
    };
    let d = f(&[], &[]);
    for jdk in [
        "java/util/ArrayList",
        "javax/swing/JFrame",
        "jdk/internal/misc/Unsafe",
        "sun/nio/ch/Net",
        "com/sun/tools/javac/main/JavaCompiler",
        "sprig/rt/Probe",
        "[Ljava/lang/String;",
        "app/App$$Lambda$14+0x0000000800c01234",
    ] {
        assert!(!d.instrumentable(jdk), "{jdk}");
    }
    assert!(d.instrumentable("com/acme/Foo"));
    assert!(
        d.instrumentable("javaish/Foo"),
        "java.** is the java package only"
    );
    let javac = f(&["com.sun.tools.javac.**"], &["com.sun.tools.javac.util.*"]);
    assert!(javac.instrumentable("com/sun/tools/javac/main/JavaCompiler"));
    assert!(javac.instrumentable("com/sun/tools/javac/code/Symbol$ClassSymbol"));
    assert!(
        !javac.instrumentable("com/sun/tools/javac/util/List"),
        "exclude wins"
    );
    assert!(!javac.instrumentable("com/sun/source/tree/Tree"));
    let sprig = f(&["sprig.**"], &[]);
    assert!(!sprig.instrumentable("sprig/rt/Probe"), "never sprig's own");
    // A class name also covers its nested classes.
    let nested = f(&[], &["com.acme.Outer"]);
    assert!(!nested.instrumentable("com/acme/Outer$Inner"));
    assert!(nested.instrumentable("com/acme/OuterX"));
    assert!(f(&["java.util.*"], &[]).instrumentable("java/util/ArrayList"));
    assert!(!f(&["java.util.*"], &[]).instrumentable("java/util/concurrent/Executors"));
    let err = ClassFilter::parse("com..acme").unwrap_err();
    assert!(err.to_string().contains("com..acme"));
    assert!(RevealConfig::with_patterns(Scheme::Lazy, &["a.**"], &["::"]).is_err());
}

#[test]
fn calls_into_classes_not_loaded_yet_wait_for_their_load() {
    let mut rv = lazy();
    load(&mut rv, object());
    root(&mut rv, "a.Main::run");
    let out = load(
        &mut rv,
        class(
            "a/Main",
            Some("java/lang/Object"),
            &[],
            PUBLIC,
            &[("run", "()V", STATIC, true)],
        ),
    );
    assert_eq!(names(&out), ["run"]);
    assert!(out.methods[0].is_root && out.methods[0].needs_first_call_check);
    let run = out.methods[0].id;
    let base = class(
        "a/Base",
        Some("java/lang/Object"),
        &[],
        PUBLIC,
        &[
            ("helper", "()V", STATIC, false),
            ("other", "()V", STATIC, false),
        ],
    );
    load(&mut rv, base);
    // run calls Sub.helper (inherited from Base, Sub not loaded) and Late.go.
    let r = rv
        .on_first_call(
            run,
            &[
                site(CallKind::Static, "a/Sub", "helper", "()V"),
                site(CallKind::Static, "a/Late", "go", "()V"),
            ],
        )
        .unwrap();
    assert!(r.classes.is_empty(), "nothing loaded to instrument yet");
    let stats = rv.stats();
    assert_eq!(stats.reachable_unloaded, 2);
    assert_eq!(stats.instrumented, 1);
    // Late loads: go is handed out in the load.
    let late = load(
        &mut rv,
        class(
            "a/Late",
            Some("java/lang/Object"),
            &[],
            PUBLIC,
            &[("go", "()V", STATIC, false)],
        ),
    );
    assert_eq!(names(&late), ["go"]);
    assert!(!late.methods[0].needs_first_call_check, "leaf");
    assert_eq!(
        rv.revealed_by(&key("a/Late", "go", "()V")),
        Some(EdgeKind::Static)
    );
    // Sub loads, declaring nothing: Base.helper is instrumented by
    // redefining Base, which was loaded already.
    let sub = load(&mut rv, class("a/Sub", Some("a/Base"), &[], PUBLIC, &[]));
    assert!(sub.methods.is_empty());
    assert_eq!(sub.redefine.classes.len(), 1);
    assert_eq!(sub.redefine.classes[0].class, "a/Base");
    let m = &sub.redefine.classes[0].methods;
    assert_eq!(
        (m.len(), m[0].name.as_str(), m[0].added),
        (1, "helper", true)
    );
    assert!(rv.id_of(&key("a/Base", "other", "()V")).is_none());
    assert_eq!(rv.stats().reachable_unloaded, 0);
}

#[test]
fn interface_call_reaches_implementation_inherited_from_a_superclass() {
    let mut rv = lazy();
    load(&mut rv, object());
    load(
        &mut rv,
        class(
            "java/lang/Runnable",
            Some("java/lang/Object"),
            &[],
            INTERFACE,
            &[("run", "()V", PUBLIC | ABSTRACT, false)],
        ),
    );
    // S has run() but does not implement Runnable; T extends S implements Runnable.
    load(
        &mut rv,
        class(
            "a/S",
            Some("java/lang/Object"),
            &[],
            PUBLIC,
            &[
                ("<init>", "()V", PUBLIC, true),
                ("run", "()V", PUBLIC, false),
            ],
        ),
    );
    load(
        &mut rv,
        class(
            "a/T",
            Some("a/S"),
            &["java/lang/Runnable"],
            PUBLIC,
            &[("<init>", "()V", PUBLIC, true)],
        ),
    );
    let id = main_root(&mut rv);
    let r = rv
        .on_first_call(
            id,
            &[site(
                CallKind::Interface,
                "java/lang/Runnable",
                "run",
                "()V",
            )],
        )
        .unwrap();
    let classes: Vec<&str> = r.classes.iter().map(|c| c.class.as_str()).collect();
    assert_eq!(classes, ["a/S"]);
    assert_eq!(
        rv.revealed_by(&key("a/S", "run", "()V")),
        Some(EdgeKind::Interface)
    );
    // A Runnable loaded later gets its run instrumented as it loads.
    let u = load(
        &mut rv,
        class(
            "a/U",
            Some("java/lang/Object"),
            &["java/lang/Runnable"],
            PUBLIC,
            &[
                ("<init>", "()V", PUBLIC, true),
                ("run", "()V", PUBLIC, true),
            ],
        ),
    );
    assert_eq!(names(&u), ["run"]);
    // Repeated first calls are harmless; unknown ids are errors.
    assert!(rv.on_first_call(id, &[]).unwrap().is_empty());
    assert_eq!(
        rv.on_first_call(MethodId(999), &[]),
        Err(RevealError::UnknownMethod(MethodId(999)))
    );
}

#[test]
fn abstract_root_makes_every_implementation_a_root() {
    let mut rv = lazy();
    load(&mut rv, object());
    load(
        &mut rv,
        class(
            "a/Handler",
            Some("java/lang/Object"),
            &[],
            INTERFACE,
            &[("handle", "(I)V", PUBLIC | ABSTRACT, false)],
        ),
    );
    load(
        &mut rv,
        class(
            "a/One",
            Some("java/lang/Object"),
            &["a/Handler"],
            PUBLIC,
            &[
                ("<init>", "()V", PUBLIC, true),
                ("handle", "(I)V", PUBLIC, true),
            ],
        ),
    );
    root(&mut rv, "a.Handler::handle");
    let r = rv.take_redefinitions();
    assert_eq!(r.classes.len(), 1);
    let one = &r.classes[0];
    assert_eq!(
        (one.class.as_str(), one.methods[0].is_root),
        ("a/One", true)
    );
    let two = load(
        &mut rv,
        class(
            "a/Two",
            Some("java/lang/Object"),
            &["a/Handler"],
            PUBLIC,
            &[
                ("<init>", "()V", PUBLIC, true),
                ("handle", "(I)V", PUBLIC, false),
            ],
        ),
    );
    assert_eq!(names(&two), ["handle"]);
    assert!(two.methods[0].is_root);
    assert_eq!(rv.stats().revealed_by[&EdgeKind::Root], 2);
}

#[test]
fn root_named_late_marks_an_instrumented_method_and_redefines_it() {
    let mut rv = lazy();
    load(&mut rv, object());
    root(&mut rv, "a.A::a");
    load(
        &mut rv,
        class(
            "a/A",
            Some("java/lang/Object"),
            &[],
            PUBLIC,
            &[("a", "()V", STATIC, true), ("b", "()V", STATIC, false)],
        ),
    );
    let a = rv.id_of(&key("a/A", "a", "()V")).unwrap();
    let r = rv
        .on_first_call(a, &[site(CallKind::Static, "a/A", "b", "()V")])
        .unwrap();
    let b = &r.classes[0].methods;
    assert_eq!(
        b.len(),
        2,
        "a batch lists every instrumented method of the class"
    );
    assert_eq!(b.iter().filter(|m| m.added).count(), 1);
    root(&mut rv, "a.A::b");
    let r = rv.take_redefinitions();
    let b = r.classes[0].methods.iter().find(|m| m.name == "b").unwrap();
    assert!(b.is_root && !b.added);
    assert_eq!(
        rv.revealed_by(&key("a/A", "b", "()V")),
        Some(EdgeKind::Static)
    );
}

#[test]
fn roots_in_default_excluded_classes_but_never_in_excluded_ones() {
    let config =
        RevealConfig::with_patterns(Scheme::Lazy, &[], &["com.sun.tools.javac.util.**"]).unwrap();
    let mut rv = Revealer::new(config);
    load(&mut rv, object());
    root(&mut rv, "com.sun.tools.javac.main.JavaCompiler::compile");
    root(&mut rv, "com.sun.tools.javac.util.Log::error");
    let c = load(
        &mut rv,
        class(
            "com/sun/tools/javac/main/JavaCompiler",
            Some("java/lang/Object"),
            &[],
            PUBLIC,
            &[
                ("compile", "()V", PUBLIC, true),
                ("other", "()V", PUBLIC, true),
            ],
        ),
    );
    assert_eq!(names(&c), ["compile"]);
    let l = load(
        &mut rv,
        class(
            "com/sun/tools/javac/util/Log",
            Some("java/lang/Object"),
            &[],
            PUBLIC,
            &[("error", "()V", PUBLIC, true)],
        ),
    );
    assert!(l.methods.is_empty());
    // Callees of the root stay filtered (no include pattern).
    let id = c.methods[0].id;
    let r = rv
        .on_first_call(
            id,
            &[site(
                CallKind::Virtual,
                "com/sun/tools/javac/main/JavaCompiler",
                "other",
                "()V",
            )],
        )
        .unwrap();
    assert!(r.classes.is_empty());
}

#[test]
fn a_second_class_loader_gets_the_same_methods_and_ids() {
    let mut rv = lazy();
    load(&mut rv, object());
    root(&mut rv, "a.A::*");
    let info = class(
        "a/A",
        Some("java/lang/Object"),
        &[],
        PUBLIC,
        &[("<init>", "()V", PUBLIC, true), ("x", "()V", PUBLIC, false)],
    );
    let first = rv.on_class_loaded(info.clone(), 7, Vec::new);
    let second = rv.on_class_loaded(info, 8, Vec::new);
    assert_eq!(names(&first), ["<init>", "x"]);
    let ids = |o: &LoadOutcome| o.methods.iter().map(|m| m.id).collect::<Vec<_>>();
    assert_eq!(ids(&first), ids(&second));
    assert!(second.methods.iter().all(|m| !m.added));
    assert_eq!(rv.hierarchy().get("a/A").unwrap().loaders, [7, 8]);
    assert_eq!(rv.stats().loaded_classes, 2);
}

/// The callback rule's scenario: `Live` and `Dead` implement `Comparator`
/// (and override `toString`, `finalize`); the root constructs a `Live`
/// and calls `Collections.sort(list, comparator)`. Returns the first
/// batch (class, methods) and the methods `a/Late`, a `Comparator` loaded
/// afterwards, gets at its load.
fn callback_scenario(rv: &mut Revealer) -> (Vec<(String, Vec<String>)>, Vec<String>) {
    load(rv, object());
    let cmp = "(Ljava/lang/Object;Ljava/lang/Object;)I";
    load(
        rv,
        class(
            "java/util/Comparator",
            Some("java/lang/Object"),
            &[],
            INTERFACE,
            &[("compare", cmp, PUBLIC | ABSTRACT, false)],
        ),
    );
    for c in ["a/Live", "a/Dead"] {
        load(
            rv,
            class(
                c,
                Some("java/lang/Object"),
                &["java/util/Comparator"],
                PUBLIC,
                &[
                    ("<init>", "()V", PUBLIC, true),
                    ("compare", cmp, PUBLIC, false),
                    ("toString", "()Ljava/lang/String;", PUBLIC, false),
                    ("finalize", "()V", PUBLIC, false),
                    ("own", "()V", PUBLIC, false),
                ],
            ),
        );
    }
    let id = main_root(rv);
    // main: new Live(); Collections.sort(list, live)
    let r = rv
        .on_first_call(
            id,
            &[
                site(CallKind::Special, "a/Live", "<init>", "()V"),
                site(
                    CallKind::Static,
                    "java/util/Collections",
                    "sort",
                    "(Ljava/util/List;Ljava/util/Comparator;)V",
                ),
            ],
        )
        .unwrap();
    let batch = r
        .classes
        .iter()
        .map(|c| {
            let m = c.methods.iter().map(|m| m.name.clone()).collect();
            (c.class.clone(), m)
        })
        .collect();
    let late = load(
        rv,
        class(
            "a/Late",
            Some("java/lang/Object"),
            &["java/util/Comparator"],
            PUBLIC,
            &[
                ("compare", cmp, PUBLIC, false),
                ("toString", "()Ljava/lang/String;", PUBLIC, false),
            ],
        ),
    );
    (batch, names(&late).iter().map(|n| n.to_string()).collect())
}

fn batch_of(v: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
    v.iter()
        .map(|(c, m)| (c.to_string(), m.iter().map(|n| n.to_string()).collect()))
        .collect()
}

#[test]
fn callback_rule_marks_java_overrides_of_live_classes_and_callback_interfaces_of_all() {
    let mut rv = lazy();
    let cmp = "(Ljava/lang/Object;Ljava/lang/Object;)I";
    let (batch, late) = callback_scenario(&mut rv);
    // Live: every override of a java.* method. Dead (never constructed in
    // the subgraph, maybe handed in from outside): its implementation of the
    // callback interface Comparator, which being reachable makes Dead live
    // in turn (toString); never its own methods.
    assert_eq!(
        batch,
        batch_of(&[
            ("a/Dead", &["compare", "toString"]),
            ("a/Live", &["<init>", "compare", "toString"])
        ])
    );
    assert_eq!(
        rv.revealed_by(&key("a/Live", "compare", cmp)),
        Some(EdgeKind::Callback)
    );
    assert!(rv.id_of(&key("a/Dead", "own", "()V")).is_none());
    assert!(rv.id_of(&key("a/Dead", "finalize", "()V")).is_none());
    // A Comparator loaded later gets its compare at its load (and, live
    // through it, its toString).
    assert_eq!(late, ["compare", "toString"]);
}

/// With dormant probes (the agent's Scheme B default) the callback rule
/// leaves live classes to them: `Live` is redefined for its constructor,
/// so its `compare` and `toString` hold dormant probes and are revealed
/// where the JDK calls them inside a root context (`on_entered`). A class
/// that is not live still gets its callback-interface methods, which
/// nothing else would give probes, and nothing more once they make it live.
#[test]
fn callbacks_of_live_classes_are_left_to_their_dormant_probes() {
    let mut rv = Revealer::new(RevealConfig {
        live_callbacks_where_they_run: true,
        ..RevealConfig::default()
    });
    let cmp = "(Ljava/lang/Object;Ljava/lang/Object;)I";
    let (batch, late) = callback_scenario(&mut rv);
    assert_eq!(
        batch,
        batch_of(&[("a/Dead", &["compare"]), ("a/Live", &["<init>"])])
    );
    assert_eq!(late, ["compare"]);
    let compare = key("a/Live", "compare", cmp);
    assert!(rv.id_of(&compare).is_none());
    // The JDK's sort calls it inside the root: entered, instrumented.
    let r = rv.on_entered(&compare);
    assert!(rv.id_of(&compare).is_some());
    assert_eq!(rv.revealed_by(&compare), Some(EdgeKind::Entered));
    assert_eq!(
        r.classes
            .iter()
            .map(|c| c.class.as_str())
            .collect::<Vec<_>>(),
        ["a/Live"]
    );
}

#[test]
fn eager_scans_everything_reachable_at_once() {
    let mut rv = Revealer::new(RevealConfig {
        scheme: Scheme::Eager,
        ..RevealConfig::default()
    });
    load(&mut rv, object());
    let methods: &[M] = &[
        ("a", "()V", STATIC, true),
        ("b", "()V", STATIC, true),
        ("c", "()V", STATIC, false),
        ("d", "()V", STATIC, false),
    ];
    load(
        &mut rv,
        class("a/A", Some("java/lang/Object"), &[], PUBLIC, methods),
    );
    root(&mut rv, "a.A::a");
    let calls = |k: &MethodKey| -> Option<Vec<CallSite>> {
        match k.name.as_str() {
            "a" => Some(vec![site(CallKind::Static, "a/A", "b", "()V")]),
            "b" => Some(vec![
                site(CallKind::Static, "a/A", "c", "()V"),
                site(CallKind::Static, "a/B", "e", "()V"),
            ]),
            _ => Some(Vec::new()),
        }
    };
    let r = rv.reveal_all(calls);
    let m: Vec<&str> = r.classes[0]
        .methods
        .iter()
        .map(|m| m.name.as_str())
        .collect();
    assert_eq!(m, ["a", "b", "c"]);
    assert!(
        r.classes[0]
            .methods
            .iter()
            .all(|m| !m.needs_first_call_check)
    );
    // B loads later: e is scanned with B's own call sites at its load.
    let out = rv.on_class_loaded(
        class(
            "a/B",
            Some("java/lang/Object"),
            &[],
            PUBLIC,
            &[("e", "()V", STATIC, true), ("f", "()V", STATIC, false)],
        ),
        1,
        || {
            vec![
                (
                    "e".into(),
                    "()V".into(),
                    vec![
                        site(CallKind::Static, "a/B", "f", "()V"),
                        site(CallKind::Static, "a/A", "d", "()V"),
                    ],
                ),
                ("f".into(), "()V".into(), Vec::new()),
            ]
        },
    );
    assert_eq!(names(&out), ["e", "f"]);
    // d (in A, already loaded) is a redefinition, and waits for a scan
    // since only B's call sites were at hand.
    assert_eq!(out.redefine.classes[0].class, "a/A");
    assert!(out.scan_pending, "d waits for a scan");
    assert_eq!(rv.stats().scanned, 5);
    let r = rv.reveal_all(calls);
    assert!(r.classes.is_empty());
    assert_eq!(rv.stats().scanned, 6);
}

#[test]
fn method_reference_to_a_class_not_loaded_yet_dispatches_virtually_once_it_loads() {
    let mut rv = lazy();
    load(&mut rv, object());
    let id = main_root(&mut rv);
    // main: shapes.stream().mapToInt(Shape::area) before Shape is loaded.
    rv.on_first_call(id, &[site(CallKind::Dynamic, "a/Shape", "area", "()I")])
        .unwrap();
    assert_eq!(rv.stats().reachable_unloaded, 1);
    let shape = load(
        &mut rv,
        class(
            "a/Shape",
            Some("java/lang/Object"),
            &[],
            PUBLIC | ABSTRACT,
            &[
                ("<init>", "()V", PUBLIC, true),
                ("area", "()I", PUBLIC | ABSTRACT, false),
            ],
        ),
    );
    assert!(shape.methods.is_empty(), "abstract area has no code");
    let circle = load(
        &mut rv,
        class(
            "a/Circle",
            Some("a/Shape"),
            &[],
            PUBLIC,
            &[
                ("<init>", "()V", PUBLIC, true),
                ("area", "()I", PUBLIC, false),
            ],
        ),
    );
    assert_eq!(names(&circle), ["area"]);
    assert_eq!(
        rv.revealed_by(&key("a/Circle", "area", "()I")),
        Some(EdgeKind::Dynamic)
    );
}

#[test]
fn roots_report_how_many_methods_they_matched() {
    let mut rv = lazy();
    load(&mut rv, object());
    let a = class(
        "a/A",
        Some("java/lang/Object"),
        &[],
        PUBLIC,
        &[
            ("run", "()V", PUBLIC, true),
            ("run", "(I)V", PUBLIC, true),
            ("stop", "()V", PUBLIC, true),
        ],
    );
    load(&mut rv, a);
    root(&mut rv, "a.A::run");
    root(&mut rv, "a.B::go");
    root(&mut rv, "a.*::stop");
    let hits = |rv: &Revealer| {
        rv.roots()
            .map(|(p, n)| (p.to_string(), n))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        hits(&rv),
        [
            ("a.A::run".to_string(), 2),
            ("a.B::go".to_string(), 0),
            ("a.*::stop".to_string(), 1)
        ]
    );
    load(
        &mut rv,
        class(
            "a/B",
            Some("java/lang/Object"),
            &[],
            PUBLIC,
            &[("go", "()V", STATIC, false), ("stop", "()V", PUBLIC, false)],
        ),
    );
    assert_eq!(hits(&rv)[1].1, 1);
    assert_eq!(hits(&rv)[2].1, 2);
    assert_eq!(rv.stats().revealed_by[&EdgeKind::Root], 5);
}

#[test]
fn batches_from_several_first_calls_merge_into_one_redefinition() {
    let mut rv = lazy();
    load(&mut rv, object());
    root(&mut rv, "a.M::*");
    let statics = |n: &[&'static str]| -> Vec<M<'static>> {
        n.iter().map(|&m| (m, "()V", STATIC, false)).collect()
    };
    let mut m = statics(&["x", "y"]);
    m.iter_mut().for_each(|m| m.3 = true);
    load(
        &mut rv,
        class("a/M", Some("java/lang/Object"), &[], PUBLIC, &m),
    );
    load(
        &mut rv,
        class(
            "a/A",
            Some("java/lang/Object"),
            &[],
            PUBLIC,
            &statics(&["p", "q"]),
        ),
    );
    load(
        &mut rv,
        class(
            "a/B",
            Some("java/lang/Object"),
            &[],
            PUBLIC,
            &statics(&["r", "s"]),
        ),
    );
    let x = rv.id_of(&key("a/M", "x", "()V")).unwrap();
    let y = rv.id_of(&key("a/M", "y", "()V")).unwrap();
    let mut all = rv
        .on_first_call(x, &[site(CallKind::Static, "a/B", "r", "()V")])
        .unwrap();
    all.merge(rv.on_first_call(x, &[]).unwrap()); // nothing new
    let second = rv
        .on_first_call(
            y,
            &[
                site(CallKind::Static, "a/A", "q", "()V"),
                site(CallKind::Static, "a/B", "s", "()V"),
            ],
        )
        .unwrap();
    // On its own, the second batch lists B.r as already handed out.
    let b = second.classes.iter().find(|c| c.class == "a/B").unwrap();
    assert_eq!(
        b.methods
            .iter()
            .map(|m| (m.name.as_str(), m.added))
            .collect::<Vec<_>>(),
        [("r", false), ("s", true)]
    );
    all.merge(second);
    let shape: Vec<(&str, Vec<(&str, bool)>)> = all
        .classes
        .iter()
        .map(|c| {
            let m = c
                .methods
                .iter()
                .map(|m| (m.name.as_str(), m.added))
                .collect();
            (c.class.as_str(), m)
        })
        .collect();
    assert_eq!(
        shape,
        [
            ("a/A", vec![("q", true)]),
            ("a/B", vec![("r", true), ("s", true)])
        ]
    );
    assert_eq!(all.added(), 3);
}

/// The receiver-mode entry points: which sites a check may watch, a
/// dispatched call marks only the selected method (no overrides, no
/// memory for later loads), and a site revealed as a whole (a reach check,
/// or a watched site given up) does what the caller's first call would.
#[test]
fn receiver_checks_reveal_only_what_is_dispatched_to() {
    let mut rv = lazy();
    load(&mut rv, object());
    let shape = |name: &str, sup: &str| {
        class(
            name,
            Some(sup),
            &[],
            PUBLIC,
            &[
                ("<init>", "()V", PUBLIC, true),
                ("area", "()I", PUBLIC, false),
            ],
        )
    };
    load(&mut rv, shape("a/Shape", "java/lang/Object"));
    load(&mut rv, shape("a/Square", "a/Shape"));
    load(&mut rv, shape("a/Circle", "a/Shape"));
    root(&mut rv, "a.Main::main");
    load(
        &mut rv,
        class(
            "a/Main",
            Some("java/lang/Object"),
            &[],
            PUBLIC,
            &[
                ("main", "()V", STATIC, true),
                ("helper", "()V", STATIC, true),
            ],
        ),
    );
    let main = rv.id_of(&key("a/Main", "main", "()V")).unwrap();
    let virt = site(CallKind::Virtual, "a/Shape", "area", "()I");
    let stat = site(CallKind::Static, "a/Main", "helper", "()V");
    let on_jdk = site(CallKind::Interface, "java/lang/Runnable", "run", "()V");
    let on_array = site(CallKind::Virtual, "[I", "clone", "()Ljava/lang/Object;");
    let reflective = site(
        CallKind::Virtual,
        "java/lang/reflect/Method",
        "invoke",
        "(Ljava/lang/Object;[Ljava/lang/Object;)Ljava/lang/Object;",
    );
    assert!(rv.dispatch_watchable(&virt));
    assert!(!rv.dispatch_watchable(&stat));
    assert!(
        !rv.dispatch_watchable(&on_jdk),
        "JDK types keep hierarchy analysis"
    );
    assert!(!rv.dispatch_watchable(&on_array));
    assert!(!rv.dispatch_watchable(&reflective));
    assert!(rv.reach_watchable(&stat));
    assert!(!rv.reach_watchable(&virt));
    assert!(!rv.reach_watchable(&site(CallKind::Static, "java/lang/Math", "abs", "(I)I")));
    // The checks: a receiver's class chooses among Shape's three `area`s;
    // Box has one `size` whatever the receiver, until a subclass
    // overriding it loads; an owner not loaded yet is not known to have
    // one target.
    assert_eq!(rv.site_check(&virt), Some(Check::Receiver));
    assert_eq!(rv.site_check(&stat), Some(Check::Reach));
    let boxed = |name: &str, sup: &str| {
        class(
            name,
            Some(sup),
            &[],
            PUBLIC,
            &[("size", "()I", PUBLIC, false)],
        )
    };
    load(&mut rv, boxed("a/Box", "java/lang/Object"));
    let mono = site(CallKind::Virtual, "a/Box", "size", "()I");
    assert!(rv.dispatch_watchable(&mono));
    assert_eq!(rv.site_check(&mono), Some(Check::Reach));
    load(&mut rv, boxed("a/BigBox", "a/Box"));
    assert_eq!(rv.site_check(&mono), Some(Check::Receiver));
    let unknown = site(CallKind::Interface, "a/NotYet", "area", "()I");
    assert_eq!(rv.site_check(&unknown), Some(Check::Receiver));
    for s in [&on_jdk, &on_array, &reflective] {
        assert_eq!(rv.site_check(s), None, "{s:?}");
    }

    // main's first call with its watched sites taken out reveals nothing.
    assert!(rv.on_first_call(main, &[]).unwrap().is_empty());
    // A Square arrives at the virtual site: Square.area only.
    let square = rv
        .hierarchy()
        .select("a/Square", "area", "()I")
        .expect("Square selects its own area");
    let r = rv.on_dispatched_call(Some(main), &square);
    let added: Vec<(String, String)> = r
        .classes
        .iter()
        .flat_map(|c| {
            c.methods
                .iter()
                .filter(|m| m.added)
                .map(move |m| (c.class.clone(), m.name.clone()))
        })
        .collect();
    assert_eq!(added, [("a/Square".to_string(), "area".to_string())]);
    assert!(rv.is_reachable(&key("a/Square", "area", "()I")));
    assert!(!rv.is_reachable(&key("a/Circle", "area", "()I")));
    assert!(!rv.is_reachable(&key("a/Shape", "area", "()I")));
    // The same again: nothing new.
    assert!(rv.on_dispatched_call(Some(main), &square).is_empty());
    // A subclass loaded later is not instrumented for the watched site.
    let late = load(&mut rv, shape("a/Hexagon", "a/Shape"));
    assert!(names(&late).is_empty(), "{:?}", names(&late));
    // A reach check: the static target, as the first call would.
    let r = rv.on_call_site(Some(main), &stat);
    assert_eq!(r.classes.len(), 1);
    assert!(rv.is_reachable(&key("a/Main", "helper", "()V")));
    // A watched site given up: every override, loaded now or later.
    rv.on_call_site(Some(main), &virt);
    for c in ["a/Shape", "a/Circle", "a/Hexagon"] {
        assert!(rv.is_reachable(&key(c, "area", "()I")), "{c}");
    }
    let later = load(&mut rv, shape("a/Octagon", "a/Shape"));
    assert_eq!(names(&later), ["area"]);
    // No caller (a method revelation has not reached): the target still.
    let solo = rv.on_call_site(None, &site(CallKind::Special, "a/Square", "<init>", "()V"));
    assert!(!solo.is_empty());
    assert!(rv.is_reachable(&key("a/Square", "<init>", "()V")));
}

/// `toString`, `hashCode` and `equals` called on a JDK type (`Object`,
/// `CharSequence`) are watched by receivers too: a dispatched call
/// instruments the receiver's own method, not every loaded class's
/// `toString`; and what the JDK calls back of them in a live class, the
/// callback rule still marks. Other calls on JDK types keep hierarchy
/// analysis.
#[test]
fn object_methods_on_jdk_types_are_watched_by_receivers() {
    let mut rv = lazy();
    let mut obj = object();
    obj.methods.push(MethodInfo {
        name: "equals".into(),
        descriptor: "(Ljava/lang/Object;)Z".into(),
        access: PUBLIC,
        code_length: 5,
        has_calls: false,
    });
    load(&mut rv, obj);
    let with_object_methods = |name: &str| {
        class(
            name,
            Some("java/lang/Object"),
            &[],
            PUBLIC,
            &[
                ("<init>", "()V", PUBLIC, true),
                ("toString", "()Ljava/lang/String;", PUBLIC, true),
                ("hashCode", "()I", PUBLIC, true),
                ("equals", "(Ljava/lang/Object;)Z", PUBLIC, true),
            ],
        )
    };
    load(&mut rv, with_object_methods("a/Key"));
    load(&mut rv, with_object_methods("a/Unused"));
    let main = main_root(&mut rv);
    let to_string = site(
        CallKind::Virtual,
        "java/lang/Object",
        "toString",
        "()Ljava/lang/String;",
    );
    let on_char_seq = site(
        CallKind::Interface,
        "java/lang/CharSequence",
        "toString",
        "()Ljava/lang/String;",
    );
    let hash = site(CallKind::Virtual, "java/lang/Object", "hashCode", "()I");
    let equals = site(
        CallKind::Virtual,
        "java/lang/Object",
        "equals",
        "(Ljava/lang/Object;)Z",
    );
    for s in [&to_string, &on_char_seq, &hash, &equals] {
        assert!(rv.dispatch_watchable(s), "{s:?}");
    }
    for s in [
        site(CallKind::Interface, "java/lang/Runnable", "run", "()V"),
        site(
            CallKind::Virtual,
            "java/lang/Object",
            "toString",
            "(I)Ljava/lang/String;",
        ),
        site(
            CallKind::Static,
            "java/lang/Objects",
            "hashCode",
            "(Ljava/lang/Object;)I",
        ),
    ] {
        assert!(!rv.dispatch_watchable(&s), "{s:?}");
    }

    // main builds a Key (a special call, revealed at the first call here)
    // and hands it to JDK code (a HashSet): Key is live, so the callback
    // rule marks its hashCode and equals, which the JDK calls back.
    let new_key = site(CallKind::Special, "a/Key", "<init>", "()V");
    let add = site(
        CallKind::Interface,
        "java/util/Set",
        "add",
        "(Ljava/lang/Object;)Z",
    );
    rv.on_first_call(main, &[new_key, add]).unwrap();
    for m in [("hashCode", "()I"), ("equals", "(Ljava/lang/Object;)Z")] {
        assert!(rv.is_reachable(&key("a/Key", m.0, m.1)), "{m:?}");
        assert!(!rv.is_reachable(&key("a/Unused", m.0, m.1)), "{m:?}");
    }
    // A Key at the watched toString site: its toString, not Unused's.
    let selected = rv
        .hierarchy()
        .select("a/Key", "toString", "()Ljava/lang/String;")
        .expect("Key has its own toString");
    rv.on_dispatched_call(Some(main), &selected);
    assert!(rv.is_reachable(&key("a/Key", "toString", "()Ljava/lang/String;")));
    assert!(!rv.is_reachable(&key("a/Unused", "toString", "()Ljava/lang/String;")));
    // A JDK class's own toString: nothing to instrument.
    let string = rv
        .hierarchy()
        .select("java/lang/Object", "toString", "()Ljava/lang/String;")
        .expect("Object.toString");
    assert!(rv.on_dispatched_call(Some(main), &string).is_empty());
    // The site given up (too many receivers): hierarchy analysis, every
    // loaded override, as without receiver checks.
    rv.on_call_site(Some(main), &to_string);
    assert!(rv.is_reachable(&key("a/Unused", "toString", "()Ljava/lang/String;")));
}

/// A method holding dormant probes that runs inside a root context is
/// marked as it runs (edge kind `Entered`, no caller), and its first call
/// then reveals its callees like any other method's.
#[test]
fn a_method_entered_with_dormant_probes_is_revealed_there() {
    let mut rv = lazy();
    load(&mut rv, object());
    load(
        &mut rv,
        class(
            "a/Ranked",
            Some("java/lang/Object"),
            &["java/lang/Comparable"],
            PUBLIC,
            &[
                ("<init>", "(I)V", PUBLIC, true),
                ("compareTo", "(Ljava/lang/Object;)I", PUBLIC, true),
                ("helper", "()I", STATIC, true),
            ],
        ),
    );
    let main = main_root(&mut rv);
    // The root sorts Ranked objects made elsewhere: a static JDK call, and
    // Ranked is not live, so no rule reaches compareTo.
    let sort = site(
        CallKind::Static,
        "java/util/Arrays",
        "sort",
        "([Ljava/lang/Object;)V",
    );
    rv.on_first_call(main, &[sort]).unwrap();
    let compare = key("a/Ranked", "compareTo", "(Ljava/lang/Object;)I");
    assert!(!rv.is_reachable(&compare));
    let r = rv.on_entered(&compare);
    assert!(rv.is_reachable(&compare));
    assert_eq!(rv.revealed_by(&compare), Some(EdgeKind::Entered));
    let added: Vec<&str> = r
        .classes
        .iter()
        .flat_map(|c| c.methods.iter().filter(|m| m.added))
        .map(|m| m.name.as_str())
        .collect();
    assert_eq!(added, ["compareTo"]);
    // Entered again: nothing new. Its first call reveals what it calls.
    assert!(rv.on_entered(&compare).is_empty());
    let id = rv.id_of(&compare).unwrap();
    let helper = site(CallKind::Static, "a/Ranked", "helper", "()I");
    rv.on_first_call(id, &[helper]).unwrap();
    assert!(rv.is_reachable(&key("a/Ranked", "helper", "()I")));
}

/// A thread's loop running at the attach (`a/Loop.run`) is spared by the
/// guessing rules: class hierarchy analysis at an interface call of
/// `Runnable.run` leaves it out and says so, while the other
/// implementation is marked; a receiver of its class seen at the call
/// site marks it after all.
#[test]
fn spared_loops_are_left_to_evidence() {
    let mut rv = lazy();
    load(&mut rv, object());
    load(
        &mut rv,
        class(
            "java/lang/Runnable",
            Some("java/lang/Object"),
            &[],
            INTERFACE,
            &[("run", "()V", PUBLIC | ABSTRACT, false)],
        ),
    );
    for c in ["a/Loop", "a/Task"] {
        load(
            &mut rv,
            class(
                c,
                Some("java/lang/Object"),
                &["java/lang/Runnable"],
                PUBLIC,
                &[
                    ("<init>", "()V", PUBLIC, true),
                    ("run", "()V", PUBLIC, true),
                ],
            ),
        );
    }
    rv.spare([key("a/Loop", "run", "()V")]);
    let id = main_root(&mut rv);
    let r = rv
        .on_first_call(
            id,
            &[site(
                CallKind::Interface,
                "java/lang/Runnable",
                "run",
                "()V",
            )],
        )
        .unwrap();
    let classes: Vec<&str> = r.classes.iter().map(|c| c.class.as_str()).collect();
    assert_eq!(classes, ["a/Task"]);
    assert!(rv.id_of(&key("a/Loop", "run", "()V")).is_none());
    let reached: Vec<&MethodKey> = rv.spared_reached().collect();
    assert_eq!(reached, [&key("a/Loop", "run", "()V")]);
    // Evidence: a receiver of class a/Loop dispatched at the site.
    let r = rv.on_dispatched_call(Some(id), &key("a/Loop", "run", "()V"));
    let classes: Vec<&str> = r.classes.iter().map(|c| c.class.as_str()).collect();
    assert_eq!(classes, ["a/Loop"]);
    assert_eq!(rv.spared_reached().count(), 0);
}
