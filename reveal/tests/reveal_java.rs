//! Revelation driven by real classes: the fixture under `tests/java/app` is
//! compiled with javac and run once on a real JVM with class-load logging
//! and `-XX:+LogTouchedMethods`, which gives the true class load order and
//! the true set of methods that ran. The JDK classes it loaded are dumped
//! too, so the hierarchy mirror sees what an agent would see.
//!
//! The tests replay that run through the [`Revealer`] and check, at every
//! scripted call, that the method called is already instrumented (otherwise
//! its calls would be lost), and which methods get instrumented when.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use sprig_reveal::{
    EdgeKind, Hierarchy, LoadOutcome, MethodKey, RevealConfig, Revealed, Revealer, Scheme,
};
use sprig_rewriter::pattern::MethodPattern;
use sprig_rewriter::{CallSite, callees, callees_all, class_info};

/// What the real run of the fixture left behind.
struct Run {
    /// Every class the JVM loaded that has bytes (hidden classes left out),
    /// in load order, as internal names.
    loads: Vec<String>,
    /// Class bytes by internal name.
    bytes: HashMap<String, Vec<u8>>,
    /// Methods of `app/` classes that ran (lambda proxies left out).
    touched: BTreeSet<MethodKey>,
}

fn run() -> &'static Run {
    static RUN: OnceLock<Run> = OnceLock::new();
    RUN.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java");
        let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("reveal-java");
        let _ = std::fs::remove_dir_all(&work);
        let classes = work.join("classes");
        let dump = work.join("dump");
        std::fs::create_dir_all(&classes).unwrap();
        let sources: Vec<PathBuf> = std::fs::read_dir(src.join("app"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        let status = Command::new("javac")
            .arg("-d")
            .arg(&classes)
            .args(&sources)
            .status()
            .expect("javac runs");
        assert!(status.success(), "javac failed");

        let out = Command::new("java")
            .args([
                "-Xshare:auto",
                "-Xlog:class+load",
                "-XX:+UnlockDiagnosticVMOptions",
                "-XX:+LogTouchedMethods",
                "-XX:+PrintTouchedMethodsAtExit",
                "-cp",
            ])
            .arg(&classes)
            .arg("app.Main")
            .output()
            .expect("java runs");
        assert!(out.status.success(), "fixture run failed: {out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains("result "), "{text}");
        let mut loads = Vec::new();
        let mut touched = BTreeSet::new();
        for line in text.lines() {
            if line.contains("[class,load] ") {
                loads.extend(common::loaded_class(line));
            } else if let Some(rest) = line.strip_prefix("app/") {
                let (class, method) = rest.split_once('.').unwrap();
                let (name, desc) = method.split_once(':').unwrap();
                if !class.contains("$$Lambda") {
                    touched.insert(MethodKey::new(&format!("app/{class}"), name, desc));
                }
            }
        }

        // Dump the bytes of every loaded class (JDK ones from the runtime image).
        let bytes = common::dump_classes(&src, Some(&classes), &dump, &mut loads);
        Run {
            loads,
            bytes,
            touched,
        }
    })
}

fn key(class: &str, name: &str, desc: &str) -> MethodKey {
    MethodKey::new(&format!("app/{class}"), name, desc)
}

/// The name of a javac lambda body in `App` by the signature it has.
fn lambda(desc: &str) -> MethodKey {
    let info = class_info(&run().bytes["app/App"]).unwrap();
    let m = info
        .methods
        .iter()
        .find(|m| m.name.starts_with("lambda$run$") && m.descriptor == desc)
        .unwrap_or_else(|| panic!("no lambda {desc}"));
    key("App", &m.name, desc)
}

/// A JVM as far as revelation is concerned: loads classes in order, calls
/// methods, and checks the revealer kept up.
struct Sim {
    rv: Revealer,
    next_load: usize,
    first_called: BTreeSet<MethodKey>,
    called: BTreeSet<MethodKey>,
    /// Method → the step (number of loads so far) at which it became instrumented.
    instrumented_at: HashMap<MethodKey, usize>,
    outcomes: HashMap<String, LoadOutcome>,
    reflective: Vec<String>,
}

impl Sim {
    fn new(scheme: Scheme) -> Sim {
        let config = RevealConfig {
            scheme,
            ..RevealConfig::default()
        };
        Sim {
            rv: Revealer::new(config),
            next_load: 0,
            first_called: BTreeSet::new(),
            called: BTreeSet::new(),
            instrumented_at: HashMap::new(),
            outcomes: HashMap::new(),
            reflective: Vec::new(),
        }
    }

    fn callees_of(k: &MethodKey) -> Option<Vec<CallSite>> {
        let b = run().bytes.get(&k.class)?;
        callees(b, &k.name, &k.descriptor).ok()
    }

    fn apply(&mut self, r: Revealed) {
        for c in &r.classes {
            assert!(
                self.rv.hierarchy().contains(&c.class),
                "batch names unloaded {}",
                c.class
            );
            for m in c.methods.iter().filter(|m| m.added) {
                let k = MethodKey::new(&c.class, &m.name, &m.descriptor);
                assert!(
                    self.instrumented_at.insert(k, self.next_load).is_none(),
                    "{} handed out twice as added",
                    m.name
                );
            }
        }
        for s in r.reflective_sites {
            self.reflective
                .push(format!("{}.{}", s.site.owner, s.site.name));
        }
    }

    /// Loads classes in the real order up to and including `last`.
    fn load_through(&mut self, last: &str) {
        let loads = &run().loads;
        let stop = loads
            .iter()
            .position(|n| n == last)
            .unwrap_or_else(|| panic!("{last} never loaded"));
        while self.next_load <= stop {
            let name = loads[self.next_load].clone();
            self.next_load += 1;
            let bytes = &run().bytes[&name];
            let info = class_info(bytes).unwrap();
            let loader = u64::from(name.starts_with("app/"));
            let out = self
                .rv
                .on_class_loaded(info, loader, || callees_all(bytes).unwrap());
            for m in &out.methods {
                let k = MethodKey::new(&name, &m.name, &m.descriptor);
                assert!(m.added);
                self.instrumented_at.insert(k, self.next_load);
            }
            let redefine = out.redefine.clone();
            let pending = out.scan_pending;
            self.outcomes.insert(name, out);
            self.apply(redefine);
            if pending {
                let r = self.rv.reveal_all(Self::callees_of);
                self.apply(r);
            }
        }
    }

    fn load_all(&mut self) {
        let last = run().loads.last().unwrap().clone();
        self.load_through(&last);
    }

    /// The method runs: it must be instrumented already; its first run is
    /// reported when it asks for it.
    fn call(&mut self, k: &MethodKey) {
        let id = self
            .rv
            .id_of(k)
            .unwrap_or_else(|| panic!("{k} called but not instrumented"));
        self.called.insert(k.clone());
        let needs = self
            .rv
            .hierarchy()
            .declared(&k.class, &k.name, &k.descriptor)
            .unwrap()
            .has_calls
            && self.rv.scheme() == Scheme::Lazy;
        if needs && self.first_called.insert(k.clone()) {
            let sites = Self::callees_of(k).unwrap();
            let r = self.rv.on_first_call(id, &sites).unwrap();
            self.apply(r);
        }
    }

    fn instrumented(&self) -> BTreeSet<MethodKey> {
        self.rv.instrumented().map(|(_, k)| k.clone()).collect()
    }
}

fn root() -> MethodPattern {
    MethodPattern::parse("app.App::run").unwrap()
}

const S: &str = "(Ljava/lang/String;)Ljava/lang/String;";
const RUN: &str = "(ILjava/util/Comparator;)I";
const CMP_BRIDGE: &str = "(Ljava/lang/Object;Ljava/lang/Object;)I";
const CMP: &str = "(Ljava/lang/String;Ljava/lang/String;)I";

/// The real run, scripted: first calls in execution order of `App.run`,
/// class loads where the JVM logged them. Returns the simulation.
fn scripted(scheme: Scheme) -> Sim {
    let mut sim = Sim::new(scheme);
    sim.rv.add_root(root());
    // Main, then App with the classes its verification pulls in.
    sim.load_through("app/French");
    if scheme == Scheme::Eager {
        let r = sim.rv.reveal_all(Sim::callees_of);
        sim.apply(r);
    }
    let app_run = key("App", "run", RUN);
    sim.call(&app_run);
    for k in [
        key("Util", "twice", "(I)I"),
        key("App", "fact", "(I)I"),
        key("App", "fact", "(I)I"),
        key("Circle", "<init>", "(I)V"),
        key("Shape", "<init>", "()V"),
        key("Square", "<init>", "(I)V"),
        key("Shape", "describe", "()I"),
        key("Circle", "area", "()I"),
        key("Square", "area", "()I"),
        key("English", "<init>", "()V"),
        key("French", "<init>", "()V"),
        key("Greeter", "loud", S),
        key("English", "greet", S),
        key("French", "loud", S),
        key("French", "greet", S),
    ] {
        sim.call(&k);
    }
    // words.sort(Comparator.comparing(App::keyOf)): the JDK calls keyOf.
    sim.call(&key("App", "keyOf", S));
    sim.load_through("app/ByLength");
    sim.call(&key("ByLength", "<init>", "()V"));
    // Collections.sort calls the bridge, which calls the real compare.
    sim.call(&key("ByLength", "compare", CMP_BRIDGE));
    sim.call(&key("ByLength", "compare", CMP));
    // words.sort(outside): a comparator Main created before the root ran.
    sim.call(&key("ByName", "compare", CMP_BRIDGE));
    sim.call(&key("ByName", "compare", CMP));
    sim.call(&lambda("(Ljava/lang/String;)Ljava/lang/Integer;"));
    sim.call(&lambda("()V"));
    // String concatenation calls Circle.toString from inside the JDK.
    sim.call(&key("Circle", "toString", "()Ljava/lang/String;"));
    sim.load_through("app/Reflected");
    // The agent sees Method.invoke's target and reports it.
    let caller = sim.rv.id_of(&app_run);
    let r = sim
        .rv
        .on_reflective_call(caller, &key("Reflected", "hello", S));
    sim.apply(r);
    sim.call(&key("Reflected", "hello", S));
    sim.call(&key("App", "later", "(I)I"));
    sim.load_through("app/Hexagon");
    sim.call(&key("Late", "make", "(I)Lapp/Shape;"));
    sim.call(&key("Hexagon", "<init>", "(I)V"));
    sim.call(&key("Shape", "describe", "()I"));
    sim.call(&key("Hexagon", "area", "()I"));
    sim.load_all();
    sim
}

/// The methods of the subgraph that really ran: everything `app/` touched
/// except what `Main.main` ran outside the root.
fn really_called() -> BTreeSet<MethodKey> {
    let mut t = run().touched.clone();
    t.remove(&key("Main", "main", "([Ljava/lang/String;)V"));
    t.remove(&key("App", "<init>", "()V"));
    t.remove(&key("ByName", "<init>", "()V"));
    t
}

#[test]
fn script_matches_the_real_run() {
    let sim = scripted(Scheme::Lazy);
    let real = really_called();
    let show = |s: BTreeSet<&MethodKey>| s.iter().map(|k| k.to_string()).collect::<Vec<_>>();
    assert_eq!(
        (
            show(sim.called.difference(&real).collect()),
            show(real.difference(&sim.called).collect())
        ),
        (vec![], vec![]),
        "the scripted calls are exactly the methods the JVM ran under the root \
         (scripted only, ran only)"
    );
}

#[test]
fn lazy_instruments_what_runs_before_it_runs_and_little_else() {
    let sim = scripted(Scheme::Lazy);
    let instrumented = sim.instrumented();
    let called = really_called();
    let extra: Vec<String> = instrumented
        .difference(&called)
        .map(|k| k.to_string())
        .collect();
    // The two uncalled methods Scheme B cannot avoid: `rare` is a callee of
    // `run` on a branch never taken (call sites are revealed, not executions),
    // and Triangle is loaded and overrides Shape.area (class hierarchy
    // analysis). What `rare` calls is not instrumented since it never runs.
    assert_eq!(extra, vec!["app/App.rare()I", "app/Triangle.area()I"]);
    let missed: Vec<String> = called
        .difference(&instrumented)
        .map(|k| k.to_string())
        .collect();
    assert!(
        missed.is_empty(),
        "called but never instrumented: {missed:?}"
    );
    let ratio = instrumented.len() as f64 / called.len() as f64;
    println!(
        "scheme B (scripted): instrumented {} / called {} = {ratio:.3}; stats {:?}",
        instrumented.len(),
        called.len(),
        sim.rv.stats()
    );
    assert!(ratio <= 1.2, "ratio {ratio}");

    // Never reached: Never.touch and Triangle.<init> are loaded but never instrumented.
    for k in [
        key("Never", "touch", "()V"),
        key("Triangle", "<init>", "()V"),
        key("Main", "main", "([Ljava/lang/String;)V"),
    ] {
        assert!(sim.rv.id_of(&k).is_none(), "{k}");
    }
    // JDK methods are never instrumented.
    assert!(instrumented.iter().all(|k| k.class.starts_with("app/")));
    assert_eq!(sim.reflective, vec!["java/lang/reflect/Method.invoke"]);
}

#[test]
fn lazy_instruments_at_the_right_moment() {
    let sim = scripted(Scheme::Lazy);
    let at = |class: &str, name: &str, desc: &str| {
        let k = key(class, name, desc);
        *sim.instrumented_at
            .get(&k)
            .unwrap_or_else(|| panic!("{k} not instrumented"))
    };
    let loads = &run().loads;
    let load_step = |c: &str| loads.iter().position(|n| n == &format!("app/{c}")).unwrap() + 1;
    // The root is instrumented as its class loads.
    let app = load_step("App");
    assert_eq!(at("App", "run", RUN), app);
    let run_out = &sim.outcomes["app/App"];
    assert_eq!(run_out.methods.len(), 1);
    assert!(run_out.methods[0].is_root && run_out.methods[0].needs_first_call_check);
    // Callees of run in already loaded classes wait for run's first call,
    // which happens after French loaded.
    let french = load_step("French");
    assert_eq!(at("Util", "twice", "(I)I"), french);
    assert_eq!(at("Circle", "<init>", "(I)V"), french);
    // Leaf methods need no first-call check.
    let twice = sim.rv.id_of(&key("Util", "twice", "(I)I")).unwrap();
    assert_eq!(sim.rv.method(twice), Some(&key("Util", "twice", "(I)I")));
    // Hexagon loads after Shape.area was revealed: its override is
    // instrumented in its load, not by a redefinition.
    let hex = &sim.outcomes["app/Hexagon"];
    let names: Vec<&str> = hex.methods.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, vec!["area"]);
    assert!(!hex.methods[0].needs_first_call_check, "area is a leaf");
    assert!(hex.redefine.is_empty());
    // Hexagon.<init> is revealed by Late.make's first call, after Hexagon
    // loaded: a redefinition.
    assert_eq!(at("Hexagon", "<init>", "(I)V"), load_step("Hexagon"));
    // Circle.toString comes from the JDK callback rule.
    assert_eq!(
        sim.rv
            .revealed_by(&key("Circle", "toString", "()Ljava/lang/String;")),
        Some(EdgeKind::Callback)
    );
    assert_eq!(
        sim.rv.revealed_by(&key(
            "ByLength",
            "compare",
            "(Ljava/lang/Object;Ljava/lang/Object;)I"
        )),
        Some(EdgeKind::Callback)
    );
    assert_eq!(
        sim.rv.revealed_by(&key("Reflected", "hello", S)),
        Some(EdgeKind::Reflective)
    );
    assert_eq!(
        sim.rv.revealed_by(&key("App", "keyOf", S)),
        Some(EdgeKind::Dynamic)
    );
    assert_eq!(
        sim.rv.revealed_by(&key("Hexagon", "area", "()I")),
        Some(EdgeKind::Virtual)
    );
    assert_eq!(
        sim.rv.revealed_by(&key("English", "greet", S)),
        Some(EdgeKind::Interface)
    );
    let stats = sim.rv.stats();
    assert_eq!(stats.instrumented, sim.instrumented().len());
    assert_eq!(
        stats.revealed_by.values().sum::<usize>(),
        stats.instrumented
    );
    assert_eq!(stats.revealed_by[&EdgeKind::Root], 1);
    assert_eq!(stats.reflective_sites, 1);
    // The revealed graph has the recursive edge.
    let g = sim.rv.graph();
    let fact = g
        .node_indices()
        .find(|&n| g[n] == key("App", "fact", "(I)I"))
        .unwrap();
    assert!(g.find_edge(fact, fact).is_some(), "fact calls itself");
}

#[test]
fn eager_instruments_a_superset_before_anything_runs() {
    let lazy = scripted(Scheme::Lazy).instrumented();
    let eager_sim = scripted(Scheme::Eager);
    let eager = eager_sim.instrumented();
    assert!(lazy.is_subset(&eager), "A ⊇ B");
    for k in [
        key("App", "rare", "()I"),
        key("Never", "touch", "()V"),
        key("Triangle", "<init>", "()V"),
    ] {
        assert!(eager.contains(&k), "eager reaches {k}");
    }
    let called = really_called();
    println!(
        "scheme A (scripted): instrumented {} / called {} = {:.3}; scheme B {}",
        eager.len(),
        called.len(),
        eager.len() as f64 / called.len() as f64,
        lazy.len()
    );
    assert!(eager.len() > lazy.len());
    // Nothing needs a first-call check in the eager scheme.
    assert!(eager_sim.first_called.is_empty());
}

/// The agent attaches late: everything is loaded before the root is named.
#[test]
fn attach_after_load_reveals_the_same_subgraph() {
    let mut sim = Sim::new(Scheme::Lazy);
    sim.load_through("app/French");
    sim.rv.add_root(root());
    let r = sim.rv.take_redefinitions();
    assert_eq!(r.classes.len(), 1);
    assert_eq!(r.classes[0].class, "app/App");
    sim.apply(r);
    let startup = scripted(Scheme::Lazy);
    // Replay the same calls as the scripted run, in the same order.
    let mut sim2 = sim;
    let order: Vec<MethodKey> = startup
        .instrumented()
        .into_iter()
        .filter(|k| startup.called.contains(k))
        .collect();
    sim2.load_all();
    // Resolve first calls to a fixpoint (as early as possible).
    loop {
        let before = sim2.called.len();
        for k in &order {
            if sim2.rv.id_of(k).is_some() && !sim2.called.contains(k) {
                sim2.call(k);
            }
        }
        if sim2.rv.id_of(&key("Reflected", "hello", S)).is_none() {
            let caller = sim2.rv.id_of(&key("App", "run", RUN));
            let r = sim2
                .rv
                .on_reflective_call(caller, &key("Reflected", "hello", S));
            sim2.apply(r);
        }
        if sim2.called.len() == before {
            break;
        }
    }
    assert_eq!(sim2.called, really_called());
    assert_eq!(sim2.instrumented(), startup.instrumented());
}

#[test]
fn hierarchy_resolves_like_the_jvm() {
    let mut h = Hierarchy::new();
    for name in &run().loads {
        h.add_class(class_info(&run().bytes[name]).unwrap(), 0);
    }
    let loud = |c: &str| h.select(&format!("app/{c}"), "loud", S);
    assert_eq!(
        loud("English"),
        Some(key("Greeter", "loud", S)),
        "default method"
    );
    assert_eq!(loud("French"), Some(key("French", "loud", S)));
    assert_eq!(
        h.resolve("app/Circle", "describe", "()I"),
        Some(key("Shape", "describe", "()I"))
    );
    let mut areas = h.virtual_targets("app/Shape", "area", "()I");
    areas.sort();
    assert_eq!(
        areas,
        ["Circle", "Hexagon", "Square", "Triangle"]
            .map(|c| key(c, "area", "()I"))
            .to_vec()
    );
    let subs = h.subtypes("app/Shape");
    assert_eq!(subs.len(), 4);
    assert!(h.is_subtype("app/ByLength", "java/util/Comparator"));
    let cmp = h.virtual_targets(
        "java/util/Comparator",
        "compare",
        "(Ljava/lang/Object;Ljava/lang/Object;)I",
    );
    assert!(cmp.contains(&key(
        "ByLength",
        "compare",
        "(Ljava/lang/Object;Ljava/lang/Object;)I"
    )));
    // Object.toString resolves to Object's; Circle's override is a target.
    let ts = h.virtual_targets("java/lang/Object", "toString", "()Ljava/lang/String;");
    assert!(ts.contains(&key("Circle", "toString", "()Ljava/lang/String;")));
    assert!(ts.contains(&MethodKey::new(
        "java/lang/Object",
        "toString",
        "()Ljava/lang/String;"
    )));
    // A private method has no overrides; a static one resolves upward.
    assert_eq!(
        h.virtual_targets("app/App", "later", "(I)I"),
        vec![key("App", "later", "(I)I")]
    );
    assert_eq!(h.resolve("app/Util", "nope", "()V"), None);
}

#[test]
fn explain_gives_the_chain_from_the_root() {
    let sim = scripted(Scheme::Lazy);
    let chain: Vec<(String, EdgeKind)> = sim
        .rv
        .explain(&key("Hexagon", "area", "()I"))
        .unwrap()
        .into_iter()
        .map(|(k, e)| (k.to_string(), e))
        .collect();
    assert_eq!(
        chain,
        [
            (
                "app/App.run(ILjava/util/Comparator;)I".to_string(),
                EdgeKind::Root
            ),
            ("app/Shape.describe()I".to_string(), EdgeKind::Virtual),
            ("app/Hexagon.area()I".to_string(), EdgeKind::Virtual),
        ]
    );
    let cb = sim
        .rv
        .explain(&key("Circle", "toString", "()Ljava/lang/String;"))
        .unwrap();
    assert_eq!(cb.len(), 1, "a callback has no caller in the subgraph");
    assert_eq!(cb[0].1, EdgeKind::Callback);
    assert!(sim.rv.explain(&key("Never", "touch", "()V")).is_none());
}

#[test]
fn revealer_can_live_behind_the_agents_mutex() {
    fn send<T: Send + 'static>() {}
    send::<Revealer>();
    let shared = std::sync::Mutex::new(Revealer::new(RevealConfig::default()));
    std::thread::scope(|s| {
        s.spawn(|| shared.lock().unwrap().add_root(root()));
    });
    assert_eq!(shared.lock().unwrap().stats().instrumented, 0);
}

/// At attach the agent feeds already loaded classes in whatever order
/// GetLoadedClasses gives: subclasses may come before their superclasses.
#[test]
fn attach_in_any_load_order_reveals_the_same() {
    let reveal = |order: &[String]| {
        let mut rv = Revealer::new(RevealConfig::default());
        for name in order {
            let bytes = &run().bytes[name];
            rv.on_class_loaded(class_info(bytes).unwrap(), 0, Vec::new);
        }
        rv.add_root(root());
        rv.take_redefinitions();
        let run_id = rv.id_of(&key("App", "run", RUN)).unwrap();
        let sites = Sim::callees_of(&key("App", "run", RUN)).unwrap();
        rv.on_first_call(run_id, &sites).unwrap();
        let describe = rv.id_of(&key("Shape", "describe", "()I")).unwrap();
        let sites = Sim::callees_of(&key("Shape", "describe", "()I")).unwrap();
        rv.on_first_call(describe, &sites).unwrap();
        rv.instrumented()
            .map(|(_, k)| k.to_string())
            .collect::<BTreeSet<_>>()
    };
    let in_order = reveal(&run().loads);
    let mut reversed = run().loads.clone();
    reversed.reverse();
    assert_eq!(reveal(&reversed), in_order);
    for m in [
        "app/Hexagon.area()I",
        "app/Triangle.area()I",
        "app/Circle.area()I",
    ] {
        assert!(in_order.contains(m), "{m}");
    }
}
