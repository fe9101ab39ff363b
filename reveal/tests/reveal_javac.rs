//! JFluid's own benchmark, replayed: javac (JDK's `jdk.compiler`) compiles
//! a real source set once, under class-load logging and
//! `-XX:+LogTouchedMethods`; the classes it loaded are dumped from the
//! runtime image. Revelation with root
//! `com.sun.tools.javac.main.JavaCompiler::compile` and
//! `--include com.sun.tools.javac.**` is replayed over the real load order,
//! every touched method being first-called as soon as it is instrumented.
//!
//! "Called" is approximated by the touched methods among the instrumented
//! ones (the JVM does not say which call stack touched a method), so the
//! ratios are instrumented / called in JFluid's Table 2 sense.

mod common;

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use sprig_reveal::{MethodId, MethodKey, RevealConfig, Revealed, Revealer, Scheme};
use sprig_rewriter::pattern::MethodPattern;
use sprig_rewriter::{CallKind, CallSite, callees, callees_all, class_info};

/// The source set javac compiles: the fixture by default, or a javac
/// `@argfile` named by `SPRIG_REVEAL_JAVAC_ARGS` for a bigger measurement.
fn sources(src: &Path) -> Vec<String> {
    match std::env::var("SPRIG_REVEAL_JAVAC_ARGS") {
        Ok(file) => vec![format!("@{file}")],
        Err(_) => ["app/App.java", "app/Main.java", "Dump.java"]
            .iter()
            .map(|f| src.join(f).display().to_string())
            .collect(),
    }
}

struct Run {
    loads: Vec<String>,
    bytes: HashMap<String, Vec<u8>>,
    touched: HashSet<MethodKey>,
}

fn run() -> &'static Run {
    static RUN: OnceLock<Run> = OnceLock::new();
    RUN.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/java");
        let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("reveal-javac");
        let _ = std::fs::remove_dir_all(&work);
        std::fs::create_dir_all(work.join("out")).unwrap();
        let out = Command::new("java")
            .args([
                "-Xlog:class+load",
                "-XX:+UnlockDiagnosticVMOptions",
                "-XX:+LogTouchedMethods",
                "-XX:+PrintTouchedMethodsAtExit",
                "-m",
                "jdk.compiler/com.sun.tools.javac.Main",
                "-d",
            ])
            .arg(work.join("out"))
            .args(sources(&src))
            .output()
            .expect("java runs");
        assert!(out.status.success(), "javac run failed: {out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        let mut loads = Vec::new();
        let mut touched = HashSet::new();
        for line in text.lines() {
            if line.contains("[class,load] ") {
                loads.extend(common::loaded_class(line));
            } else if let Some((class, method)) = line.split_once('.')
                && let Some((name, desc)) = method.split_once(':')
                && desc.starts_with('(')
            {
                touched.insert(MethodKey::new(class, name, desc));
            }
        }
        let dump = work.join("dump");
        let bytes = common::dump_classes(&src, None, &dump, &mut loads);
        Run {
            loads,
            bytes,
            touched,
        }
    })
}

/// Which call sites of a first-called method the replay hands the
/// revealer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sites {
    /// All of them: Scheme B as sprig runs it.
    All,
    /// Only those with a target that ran in the JVM (or none resolvable
    /// yet): a stand-in for "the sites that ran", i.e. for revelation at
    /// the granularity of call sites instead of methods. Optimistic: a site
    /// that ran but dispatched only to the JDK is dropped too.
    Taken,
    /// Virtual and interface sites reach only the overrides that ran: a
    /// stand-in for sites that see their receivers' classes (an oracle,
    /// optimistic like `Taken`); other sites as in `All`.
    Receivers,
    /// `Receivers` for virtual and interface sites, `Taken` for the others.
    ReceiversTaken,
    /// What `--virtual-calls receiver` does: `Receivers` at virtual and
    /// interface sites where class hierarchy analysis finds two or more
    /// targets; the other virtual and interface sites only if their target
    /// ran (a reach check); `Taken` for the others.
    ReceiversPolymorphic,
}

struct Replay {
    rv: Revealer,
    sites: Sites,
    /// Time spent inside the revealer (class loads, first calls, scans).
    spent: Duration,
    first_called: HashSet<MethodKey>,
    work: VecDeque<MethodKey>,
    /// `Receivers`: virtual and interface sites of first-called methods by
    /// (name, descriptor): (caller, owner).
    watched: HashMap<(String, String), Vec<(MethodId, String)>>,
}

impl Replay {
    fn queue(&mut self, class: &str, name: &str, desc: &str) {
        let k = MethodKey::new(class, name, desc);
        if run().touched.contains(&k) {
            self.work.push_back(k);
        }
    }

    fn apply(&mut self, r: Revealed) {
        for c in r.classes {
            for m in c.methods.iter().filter(|m| m.added) {
                self.queue(&c.class, &m.name, &m.descriptor);
            }
        }
    }

    /// First calls of every touched instrumented method, as early as possible.
    fn drain(&mut self) {
        while let Some(k) = self.work.pop_front() {
            if self.rv.scheme() == Scheme::Eager || !self.first_called.insert(k.clone()) {
                continue;
            }
            let id = self.rv.id_of(&k).unwrap();
            let mut sites = callees(&run().bytes[&k.class], &k.name, &k.descriptor).unwrap();
            let h = self.rv.hierarchy();
            let targets = |site: &CallSite| {
                let mut targets = h.virtual_targets(&site.owner, &site.name, &site.descriptor);
                targets.extend(h.resolve(&site.owner, &site.name, &site.descriptor));
                targets
            };
            let ran = |t: &MethodKey| run().touched.contains(t);
            let dispatched =
                |site: &CallSite| matches!(site.kind, CallKind::Virtual | CallKind::Interface);
            if self.sites == Sites::Taken {
                sites.retain(|site| {
                    let t = targets(site);
                    t.is_empty() || t.iter().any(ran)
                });
            }
            let mut dispatches = Vec::new();
            if matches!(
                self.sites,
                Sites::Receivers | Sites::ReceiversTaken | Sites::ReceiversPolymorphic
            ) {
                let mut out = Vec::new();
                for site in sites {
                    let t = targets(&site);
                    let mono = self.sites == Sites::ReceiversPolymorphic
                        && h.virtual_targets(&site.owner, &site.name, &site.descriptor)
                            .len()
                            < 2;
                    if t.is_empty() {
                        out.push(site);
                    } else if mono && dispatched(&site) {
                        if t.iter().any(ran) {
                            out.push(site);
                        }
                    } else if dispatched(&site) {
                        // The site sees its receivers: each override that
                        // ran is reached as it is dispatched to, now or
                        // once its class loads.
                        dispatches.extend(t.into_iter().filter(|k| ran(k)));
                        self.watched
                            .entry((site.name.clone(), site.descriptor.clone()))
                            .or_default()
                            .push((id, site.owner.clone()));
                    } else if !matches!(
                        self.sites,
                        Sites::ReceiversTaken | Sites::ReceiversPolymorphic
                    ) || t.iter().any(ran)
                    {
                        out.push(site);
                    }
                }
                sites = out;
            }
            let t = Instant::now();
            let mut r = self.rv.on_first_call(id, &sites).unwrap();
            for k in dispatches {
                r.merge(self.rv.on_dispatched_call(Some(id), &k));
            }
            self.spent += t.elapsed();
            self.apply(r);
        }
    }

    /// A class loaded: the watched sites whose receivers may now be of it
    /// dispatch to its overrides that ran.
    fn dispatch_to(&mut self, class: &str) {
        let Some(info) = self.rv.hierarchy().get(class) else {
            return;
        };
        let mut found = Vec::new();
        for m in &info.methods {
            let Some(sites) = self.watched.get(&(m.name.clone(), m.descriptor.clone())) else {
                continue;
            };
            let k = MethodKey::new(class, &m.name, &m.descriptor);
            if !run().touched.contains(&k) {
                continue;
            }
            for (caller, owner) in sites {
                if self.rv.hierarchy().is_subtype(class, owner) {
                    found.push((*caller, k.clone()));
                    break;
                }
            }
        }
        for (caller, k) in found {
            let r = self.rv.on_dispatched_call(Some(caller), &k);
            self.apply(r);
        }
    }
}

fn replay(scheme: Scheme, sites: Sites) -> (Revealer, usize, Duration) {
    let config = RevealConfig::with_patterns(scheme, &["com.sun.tools.javac.**"], &[]).unwrap();
    let mut rp = Replay {
        rv: Revealer::new(config),
        sites,
        spent: Duration::ZERO,
        first_called: HashSet::new(),
        work: VecDeque::new(),
        watched: HashMap::new(),
    };
    rp.rv
        .add_root(MethodPattern::parse("com.sun.tools.javac.main.JavaCompiler::compile").unwrap());
    let source = |k: &MethodKey| {
        let b = run().bytes.get(&k.class)?;
        callees(b, &k.name, &k.descriptor).ok()
    };
    for name in &run().loads {
        let bytes = &run().bytes[name];
        let info = class_info(bytes).unwrap();
        let all = callees_all(bytes).unwrap();
        let t = Instant::now();
        let out = rp.rv.on_class_loaded(info, 0, || all);
        for m in &out.methods {
            rp.queue(name, &m.name, &m.descriptor);
        }
        rp.apply(out.redefine);
        rp.dispatch_to(name);
        if out.scan_pending {
            let r = rp.rv.reveal_all(source);
            rp.apply(r);
        }
        rp.spent += t.elapsed();
        rp.drain();
    }
    let instrumented: BTreeSet<MethodKey> = rp.rv.instrumented().map(|(_, k)| k.clone()).collect();
    let called = instrumented
        .iter()
        .filter(|k| run().touched.contains(*k))
        .count();
    (rp.rv, called, rp.spent)
}

#[test]
fn javac_lazy_instruments_few_uncalled_methods_and_eager_more() {
    let (lazy, called_b, time_b) = replay(Scheme::Lazy, Sites::All);
    let (eager, called_a, time_a) = replay(Scheme::Eager, Sites::All);
    let (b, a) = (lazy.stats(), eager.stats());
    let javac_touched = run()
        .touched
        .iter()
        .filter(|k| k.class.starts_with("com/sun/tools/javac/"))
        .count();
    println!(
        "javac: {} classes loaded, {javac_touched} javac methods ran in the whole JVM",
        run().loads.len()
    );
    println!(
        "scheme A: instrumented {} called {called_a} ratio {:.2}, {time_a:?} in the revealer; {:?}",
        a.instrumented,
        a.instrumented as f64 / called_a as f64,
        a
    );
    println!(
        "scheme B: instrumented {} called {called_b} ratio {:.2}, {time_b:?} in the revealer; {:?}",
        b.instrumented,
        b.instrumented as f64 / called_b as f64,
        b
    );
    let (ratio_a, ratio_b) = (
        a.instrumented as f64 / called_a as f64,
        b.instrumented as f64 / called_b as f64,
    );
    // Measured 1.89 (A) and 1.48 (B) on JDK 17.0.15; the remaining excess
    // is class hierarchy analysis over javac's visitor-style hierarchies.
    assert!(
        ratio_b < 1.6 && ratio_b < ratio_a,
        "B {ratio_b:.2} A {ratio_a:.2}"
    );
    // A reaches a few methods that ran outside the root (option handling
    // before `compile`) through paths the root never took; B fewer.
    assert!(called_a >= called_b);
    assert!(called_b > 1000, "compile reaches most of javac");
    assert!(b.instrumented < a.instrumented);
    let lazy_set: HashSet<&MethodKey> = lazy.instrumented().map(|(_, k)| k).collect();
    let eager_set: HashSet<&MethodKey> = eager.instrumented().map(|(_, k)| k).collect();
    assert!(lazy_set.is_subset(&eager_set), "A ⊇ B");
    // Everything instrumented is javac's (the root's package is included).
    assert!(
        lazy_set
            .iter()
            .all(|k| k.class.starts_with("com/sun/tools/javac/"))
    );
}

/// Where Scheme B's uncalled instrumented methods come from, and how far a
/// finer revelation could bring the ratio down (the goal is 1.2).
///
/// Measured on JDK 17.0.15 with the fixture's three files (the counts move
/// by a few tens from run to run with what the JVM touched): 5,859
/// instrumented for 3,966 called (1.48); of the 1,893 uncalled, 960 are
/// overrides reached only through dispatch (class hierarchy analysis) and
/// 933 the declared targets of call sites in the subgraph that never ran;
/// 305 lie in classes none of whose methods ran. Handing the revealer only
/// the sites that ran leaves 5,031 for 3,887 (1.29): even revelation per
/// call site stays above 1.2, because a virtual site that ran still
/// reaches every loaded override. The receiver variants (an oracle
/// standing in for the checks of `--virtual-calls receiver`) come to
/// 1.14-1.19; the last is what sprig runs: receiver checks where the
/// receiver's class chooses among loaded methods, reach checks elsewhere.
#[test]
fn javac_lazy_excess_by_cause() {
    use sprig_reveal::EdgeKind;
    let (lazy, called, _) = replay(Scheme::Lazy, Sites::All);
    let touched = &run().touched;
    let ran_classes: HashSet<&str> = touched.iter().map(|k| k.class.as_str()).collect();
    let instrumented: Vec<&MethodKey> = lazy.instrumented().map(|(_, k)| k).collect();
    let uncalled: Vec<&MethodKey> = instrumented
        .iter()
        .copied()
        .filter(|k| !touched.contains(*k))
        .collect();
    let declared = declared_targets(&lazy);
    let dispatched = |k: &MethodKey| {
        matches!(
            lazy.revealed_by(k),
            Some(EdgeKind::Virtual | EdgeKind::Interface | EdgeKind::Callback)
        ) && !declared.contains(k)
    };
    let by_dispatch = uncalled.iter().filter(|k| dispatched(k)).count();
    let in_idle_classes = uncalled
        .iter()
        .filter(|k| !ran_classes.contains(k.class.as_str()))
        .count();
    let (fine, called_fine, _) = replay(Scheme::Lazy, Sites::Taken);
    let fine_n = fine.instrumented().count();
    let ratio = instrumented.len() as f64 / called as f64;
    let ratio_fine = fine_n as f64 / called_fine as f64;
    println!(
        "scheme B: {} instrumented, {called} called ({ratio:.2}); uncalled {}: \
         {by_dispatch} overrides reached by dispatch, {} declared targets of \
         sites that did not run; {in_idle_classes} in classes none of whose \
         methods ran",
        instrumented.len(),
        uncalled.len(),
        uncalled.len() - by_dispatch
    );
    println!(
        "only the sites that ran: {fine_n} instrumented, {called_fine} called ({ratio_fine:.2})"
    );
    for (label, mode) in [
        ("receivers at virtual sites", Sites::Receivers),
        (
            "receivers, and only the other sites that ran",
            Sites::ReceiversTaken,
        ),
        (
            "receivers where hierarchy analysis finds several targets, reach checks elsewhere",
            Sites::ReceiversPolymorphic,
        ),
    ] {
        let (r, called_r, _) = replay(Scheme::Lazy, mode);
        let n = r.instrumented().count();
        let ratio_r = n as f64 / called_r as f64;
        println!("{label}: {n} instrumented, {called_r} called ({ratio_r:.2})");
        // Measured 1.19, 1.14 and 1.16 (JDK 17.0.15): the receivers
        // remove most of the excess (B 1.48) in each variant.
        assert!(ratio_r < 1.25, "{label}: {ratio_r:.2}");
    }
    assert_eq!(instrumented.len() - uncalled.len(), called);
    // Fewer sites reveal a subset.
    let all: HashSet<&MethodKey> = instrumented.iter().copied().collect();
    assert!(fine.instrumented().all(|(_, k)| all.contains(k)));
    assert!(fine_n < instrumented.len() && ratio_fine < ratio);
    // Both kinds of excess are real on javac: neither cause alone explains
    // it, so neither a better dispatch analysis nor call-site revelation
    // alone reaches 1.2.
    assert!(
        by_dispatch > uncalled.len() / 4,
        "{by_dispatch} of {}",
        uncalled.len()
    );
    assert!(uncalled.len() - by_dispatch > uncalled.len() / 4);
    assert!(
        ratio_fine > 1.2,
        "site granularity alone reaches {ratio_fine:.2}"
    );
}

/// The declared (resolved) targets of every call site of `rv`'s
/// instrumented methods: what they reach directly, not as an override.
fn declared_targets(rv: &Revealer) -> HashSet<MethodKey> {
    let h = rv.hierarchy();
    let mut set = HashSet::new();
    for (_, m) in rv.instrumented() {
        let Some(bytes) = run().bytes.get(&m.class) else {
            continue;
        };
        for site in callees(bytes, &m.name, &m.descriptor).unwrap_or_default() {
            set.extend(h.resolve(&site.owner, &site.name, &site.descriptor));
        }
    }
    set
}
