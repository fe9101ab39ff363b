//! Real workloads, bare and under sprig in the same JVM, in JFluid's columns.
//!
//! Per workload one JVM (bench.Driver) is started and warmed up; then, per
//! repeat: K bare iterations, and for each root and scheme (each repeat
//! starting one scheme further along): attach, K profiled iterations,
//! detach, K iterations after detach. Every iteration is timed inside the JVM around the call of Work.iteration(). With `--settle
//! N`, profiling goes on for N more iterations and one more window of K
//! before the detach (the settled overhead); sprig's results are reset
//! (SIGUSR1) just before that window, so the profile columns (calls, root
//! and charged times, charged/bare, share) then describe the settled
//! window, against a bare window timed after as many bare iterations.

use crate::Ctx;
use crate::env::{extract, src_zip};
use crate::proc::{
    ALLOC_EXACT_SCHEME, ALLOC_SAMPLED_SCHEME, Jvm, KEEP_TRIVIAL_SCHEME, LOCKS_SCHEME, Sprig,
    SprigArgs, TRIVIAL_SCHEME, beside_lazy,
};
use crate::profile::{ProfileSummary, compare_paths, compare_paths_per_root};
use crate::stats::{Summary, fmt, json_of, median};
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

/// One root configuration of a workload.
pub struct RootDef {
    pub label: &'static str,
    /// A root no iteration calls (`idle`): the session's probes stay
    /// dormant and, under sampled timing, only position sampling runs.
    pub never_called: bool,
    pub roots: Vec<String>,
    pub include: Vec<String>,
    /// The root is the workload's own iteration method, so its bare time is
    /// the measured iteration time and charged/bare is defined.
    pub whole: bool,
}

pub struct WorkloadDef {
    pub name: &'static str,
    pub what: String,
    pub args: Vec<String>,
    pub warmup: usize,
    pub iterations: usize,
    pub roots: Vec<RootDef>,
    /// Longest one iteration may take (profiled), for the wait bound.
    pub iteration_bound: Duration,
}

fn root(label: &'static str, roots: &[&str], include: &[&str], whole: bool) -> RootDef {
    RootDef {
        label,
        never_called: false,
        roots: roots.iter().map(|s| s.to_string()).collect(),
        include: include.iter().map(|s| s.to_string()).collect(),
        whole,
    }
}

/// Rows that run only when `--rows` names them.
pub const OPT_IN_ROWS: [&str; 1] = ["idle"];

/// The `idle` row: a root in the driver that no iteration calls.
fn idle() -> RootDef {
    RootDef {
        never_called: true,
        ..root("idle", &["bench.Driver::never"], &[], false)
    }
}

pub const NAMES: [&str; 6] = ["javac", "h2", "jetty", "lucene", "calls", "coarse"];

/// The workload's definition; javac extracts its sources into the scratch dir.
pub fn define(ctx: &Ctx, name: &str) -> Result<WorkloadDef> {
    let q = ctx.quick;
    let (warmup, iterations) = if q { (4, 3) } else { (10, 6) };
    let javac_inc = ["com.sun.tools.javac.**"];
    Ok(match name {
        "javac" => {
            let prefixes: &[&str] = if q {
                &["java.base/java/util/concurrent/atomic/"]
            } else {
                &[
                    "java.base/java/util/concurrent/atomic/",
                    "java.base/java/util/concurrent/locks/",
                ]
            };
            let zip = src_zip(&ctx.env.jdk)?;
            let src = ctx.env.scratch.path.join("javac-src");
            let mut files = 0;
            for p in prefixes {
                files += extract(&zip, p, &src)?;
            }
            WorkloadDef {
                name: "javac",
                what: format!(
                    "JDK {} javac in process compiling {files} files ({}) from {} each iteration",
                    ctx.env.jdk_version,
                    prefixes.join(" + "),
                    zip.display()
                ),
                args: vec![
                    "javac".into(),
                    src.join("java.base").display().to_string(),
                    "java.base".into(),
                    ctx.env.scratch.path.join("javac-out").display().to_string(),
                ],
                warmup: if q { 4 } else { 8 },
                iterations: if q { 3 } else { 5 },
                roots: vec![
                    root("whole", &["bench.JavacWork::iteration"], &javac_inc, true),
                    root("compile", &["com.sun.tools.javac.main.JavaCompiler::compile"], &javac_inc, false),
                    root("partial", &["com.sun.tools.javac.jvm.Gen::genClass"], &javac_inc, false),
                    idle(),
                ],
                iteration_bound: Duration::from_secs(600),
            }
        }
        "h2" => WorkloadDef {
            name: "h2",
            what: "H2 (Debian libh2-java) in memory over JDBC: per iteration 500 inserts, 500 indexed lookups, 20 joins with GROUP BY, 1 delete of 500 rows".into(),
            args: vec!["h2".into(), "500".into()],
            warmup: warmup * 3,
            iterations: iterations * 2,
            roots: vec![
                root("whole", &["bench.H2Work::iteration"], &[], true),
                root(
                    "statement",
                    &["org.h2.command.Command::executeQuery", "org.h2.command.Command::executeUpdate"],
                    &[],
                    false,
                ),
                root("partial", &["org.h2.command.dml.Delete::update"], &[], false),
                idle(),
            ],
            iteration_bound: Duration::from_secs(300),
        },
        "jetty" => WorkloadDef {
            name: "jetty",
            what: "Jetty 9 (Debian libjetty9-java) serving bench.HelloServlet on 127.0.0.1; per iteration 400 keep-alive GETs from 2 client threads in the same JVM (buffered reads)".into(),
            args: vec!["jetty".into(), "400".into(), "2".into()],
            // An iteration takes about 10 ms at the plateau: windows of
            // 36 (quick 18) iterations, about a third of a second.
            warmup: warmup * 9,
            iterations: iterations * 6,
            roots: vec![
                root("server", &["org.eclipse.jetty.server.Server::handle"], &[], false),
                root("servlet", &["bench.HelloServlet::doGet"], &[], false),
                idle(),
            ],
            iteration_bound: Duration::from_secs(300),
        },
        "lucene" => {
            if let Some(why) = &ctx.env.lucene_missing {
                bail!("{SKIPPED}: {why}");
            }
            WorkloadDef {
                name: "lucene",
                what: "Lucene 4.10 (Debian liblucene4.10-java) StandardAnalyzer over a fixed-seed corpus generated in the driver: per iteration 8 documents of 10,000 words, each analyzed once (tokenizer, standard, lower-case and stop filters; about 300,000 calls a document)".into(),
                args: vec!["lucene".into(), "8".into(), "10000".into()],
                warmup: warmup * 3,
                iterations: iterations * 2,
                roots: vec![
                    root("whole", &["bench.LuceneWork::iteration"], &[], true),
                    root("document", &["bench.LuceneWork::analyze"], &[], false),
                    idle(),
                ],
                iteration_bound: Duration::from_secs(300),
            }
        }
        "calls" => WorkloadDef {
            name: "calls",
            what: "call-intensive: 10 x (9 recursive walks + 1 checksum walk) over a 32767-node tree, 2 calls per node".into(),
            args: vec!["calls".into()],
            warmup: warmup * 5,
            iterations: iterations * 2,
            roots: vec![
                root("whole", &["bench.CallsWork::iteration"], &[], true),
                root("partial", &["bench.CallsWork::checksumPhase"], &[], false),
                idle(),
            ],
            iteration_bound: Duration::from_secs(300),
        },
        "coarse" => WorkloadDef {
            name: "coarse",
            what: "coarse-grained: 10 calls per iteration to loops of 2M steps with no calls inside".into(),
            args: vec!["coarse".into(), "2000000".into()],
            warmup: warmup * 2,
            iterations: iterations * 2,
            roots: vec![
                root("whole", &["bench.CoarseWork::iteration"], &[], true),
                root("partial", &["bench.CoarseWork::blockB"], &[], false),
                idle(),
            ],
            iteration_bound: Duration::from_secs(120),
        },
        other => bail!("unknown workload {other} (known: {})", NAMES.join(", ")),
    })
}

/// How [`define`]'s error starts when a workload cannot run on this
/// machine (a jar missing): the run goes on without it, saying why.
pub const SKIPPED: &str = "skipped";

/// Windows of five window medians compared by [`to_plateau`].
const PLATEAU_BLOCK: usize = 5;
/// At most this many windows in one [`to_plateau`].
const PLATEAU_MAX_WINDOWS: usize = 100;

/// With `--plateau`, runs windows of at least `k` iterations and at least
/// [`PLATEAU_WINDOW_MS`] until the JVM stops getting faster: the median of
/// the last [`PLATEAU_BLOCK`] window medians no more than 2% below the
/// median of the block before (at most [`PLATEAU_MAX_WINDOWS`] windows). A
/// single window's median moves by 5-15% from one to the next on this host
/// while the trend is far smaller, hence blocks; and windows of a few
/// iterations (`--quick`'s 6 of Jetty) made blocks so short that noise hid
/// the trend and the plateau was declared at 46 ms, far above 27-29.
/// Returns the iterations run (none without `--plateau`).
fn to_plateau(ctx: &Ctx, jvm: &mut Jvm, k: usize, bound: Duration) -> Result<usize> {
    if !ctx.plateau {
        return Ok(0);
    }
    // One window of k first, to size the rest by the iteration time.
    let k0 = k.max(1);
    let first = median(&iterate(jvm, k0, bound)?);
    let k = k0.max((PLATEAU_WINDOW_MS / first.max(1e-3)).ceil() as usize);
    let mut medians = Vec::new();
    while medians.len() < PLATEAU_MAX_WINDOWS {
        medians.push(median(&iterate(jvm, k, bound)?));
        if plateau_reached(&medians) {
            break;
        }
    }
    Ok(k0 + medians.len() * k)
}

/// The shortest window [`to_plateau`] times, ms: about 40 Jetty iterations,
/// the window its recorded warm-up was read with.
const PLATEAU_WINDOW_MS: f64 = 1200.0;

/// Whether the last block of window medians is no more than 2% below the
/// block before it.
fn plateau_reached(medians: &[f64]) -> bool {
    let n = medians.len();
    if n < 2 * PLATEAU_BLOCK {
        return false;
    }
    let last = median(&medians[n - PLATEAU_BLOCK..]);
    let before = median(&medians[n - 2 * PLATEAU_BLOCK..n - PLATEAU_BLOCK]);
    last >= 0.98 * before
}

pub(crate) fn iterate(jvm: &mut Jvm, k: usize, bound: Duration) -> Result<Vec<f64>> {
    jvm.send(&format!("iter {k}"))?;
    let line = jvm.expect("times", bound * (k as u32).max(1))?;
    let times: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .map(|t| t.parse::<f64>().map(|ns| ns / 1e6))
        .collect::<Result<_, _>>()
        .with_context(|| format!("unexpected output {line:?}"))?;
    if times.len() != k {
        bail!("asked for {k} iterations, got {} times", times.len());
    }
    Ok(times)
}

/// The priming session (see `--no-priming`): Scheme B on the workload's
/// first root for one iteration, detached, then the warm-up again. After a
/// dynamic attach, HotSpot records which compiled code depends on which
/// class only from the moment it grants the redefinition capability, so the
/// first redefinition throws away all compiled code of the JVM; later ones
/// only what depends on the classes redefined. Taken here, it falls on no
/// row: every timed session is one after the first, whichever scheme or
/// root it is.
fn prime(
    ctx: &Ctx,
    jvm: &mut Jvm,
    def: &WorkloadDef,
    r: &RootDef,
    out: &std::path::Path,
    before_ms: f64,
) -> Result<Value> {
    eprintln!(
        "sprig-bench: {}: priming session (root {}, one iteration), then warm-up again ({} iterations)",
        def.name, r.label, def.warmup
    );
    let sargs = SprigArgs {
        roots: r.roots.clone(),
        include: r.include.clone(),
        exclude: vec![],
        scheme: "lazy".into(),
        timing: None,
    };
    let mut sprig = Sprig::start(&ctx.env.sprig, jvm.pid(), &sargs, out)?;
    sprig.wait_profiling(Duration::from_secs(120))?;
    let first = iterate(jvm, 1, def.iteration_bound)?;
    let stopped = sprig.stop(Duration::from_secs(120))?;
    let p = ProfileSummary::from_json(&stopped.report)?;
    if p.root_calls == 0 {
        bail!(
            "{} priming session on root {}: no root call recorded; sprig's stderr: {:?}",
            def.name,
            r.label,
            stopped.stderr
        );
    }
    let rewarm = iterate(jvm, def.warmup, def.iteration_bound)?;
    let to_plateau_iterations = to_plateau(ctx, jvm, def.iterations, def.iteration_bound)?;
    Ok(json!({
        "root": r.label,
        "first_iteration_ms": first[0],
        "last_warmup_ms": before_ms,
        "rewarm_ms": json_of(&rewarm),
        "rewarm_to_plateau_iterations": to_plateau_iterations,
    }))
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// One profiled window's figures.
struct Sample {
    bare_mean: f64,
    bare_median: f64,
    total_mean: f64,
    total_median: f64,
    after_mean: f64,
    /// With `--settle`: the bare window timed after `settle` more bare
    /// iterations, and the profiled window timed after `settle` more
    /// profiled ones. The profile then covers the settled window only
    /// (sprig's results are reset just before it).
    settled: Option<(Vec<f64>, Vec<f64>)>,
    /// With `--plateau`: the iterations run past `settle` until the bare
    /// and the profiled iteration times stopped falling.
    plateau_runs: (usize, usize),
    p: ProfileSummary,
    attach_ms: f64,
    detach_ms: f64,
    /// CPU the `sprig` process used while profiling, ms.
    cli_cpu_ms: Option<f64>,
    k: usize,
    whole: bool,
    /// Calls per calling-context path (with several timing modes).
    paths: Option<BTreeMap<u64, (u64, String)>>,
    /// The root calls the trees counted (`paths` are theirs).
    counted_root_calls: u64,
    repeat: usize,
}

impl Sample {
    /// Iterations the report covers: the measured window, or with
    /// `--settle` the settled window (the results are reset before it).
    fn profiled(&self) -> f64 {
        self.k as f64
    }
    /// The profiled window's median iteration time, ms: with `--settle`
    /// the settled window's.
    fn steady_median(&self) -> f64 {
        self.settled
            .as_ref()
            .map_or(self.total_median, |(_, prof)| median(prof))
    }
    /// Bare and profiled means of the window the report covers.
    fn covered_means(&self) -> (f64, f64) {
        self.settled
            .as_ref()
            .map_or((self.bare_mean, self.total_mean), |(bare, prof)| {
                (mean(bare), mean(prof))
            })
    }
    /// Under windows timing the trees hold the counted root calls only:
    /// calls and times scaled to every root call (the report's scale).
    fn calls_per_iter(&self) -> f64 {
        self.p.all_calls as f64 * self.p.scale() / self.profiled()
    }
    /// The root's time before the probes' cost is taken off; under
    /// windows timing, whose counted root calls carry no time of theirs,
    /// the root's time from its silent calls.
    fn root_ms(&self) -> f64 {
        let ns = if self.p.windows.is_some() {
            self.p.root_total_ns
        } else {
            self.p.root_raw_ns
        };
        ns * self.p.scale() / 1e6 / self.profiled()
    }
    fn charged_ms(&self) -> f64 {
        self.p.root_total_ns * self.p.scale() / 1e6 / self.profiled()
    }
    /// Throughput while profiling over bare, over the whole session's
    /// window (attach and revelation included): bare mean / profiled mean.
    fn throughput(&self) -> f64 {
        self.bare_mean / self.total_mean
    }
    fn overhead(&self) -> f64 {
        (self.total_mean / self.bare_mean - 1.0) * 100.0
    }
    fn steady(&self) -> f64 {
        (self.total_median / self.bare_median - 1.0) * 100.0
    }
    fn settled(&self) -> Option<f64> {
        self.settled
            .as_ref()
            .map(|(bare, prof)| (median(prof) / median(bare) - 1.0) * 100.0)
    }
    /// What the probes' own cost adds to an iteration if nothing else
    /// changes: calls per iteration times the calibrated probe pair, over
    /// the bare time of the window the report covers, in percent. The part
    /// of an overhead no change outside the probes can take away.
    fn probe_floor(&self) -> Option<f64> {
        let c = &self.p.calibration;
        let pair = c.get("inner_ns")?.as_f64()? + c.get("outer_ns")?.as_f64()?;
        Some(self.calls_per_iter() * pair / 1e6 / self.covered_means().0 * 100.0)
    }
    fn charged_bare(&self) -> Option<f64> {
        self.whole
            .then(|| self.charged_ms() / self.covered_means().0)
    }
    fn share(&self) -> f64 {
        self.root_ms() / self.covered_means().1
    }
}

/// Starts the JVM that runs workload `def` (`bench.Driver`), with the
/// bench's JVM arguments and then `extra`; `name` names its logs.
pub fn start_jvm(ctx: &Ctx, def: &WorkloadDef, extra: &[String], name: &str) -> Result<Jvm> {
    let mut args = ctx.jvm_args.clone();
    args.extend(extra.iter().cloned());
    args.extend([
        "-cp".to_string(),
        ctx.env.classpath.clone(),
        "bench.Driver".into(),
    ]);
    args.extend(def.args.iter().cloned());
    Jvm::start(
        &ctx.env.java(),
        &args,
        name,
        &ctx.env.logs(),
        Duration::from_secs(300),
    )
}

/// Runs one workload; returns its JSON rows.
pub fn run(ctx: &Ctx, def: &WorkloadDef) -> Result<Value> {
    let mut jvm = start_jvm(ctx, def, &[], def.name)?;
    eprintln!(
        "sprig-bench: {}: warm-up ({} iterations)",
        def.name, def.warmup
    );
    let warm = iterate(&mut jvm, def.warmup, def.iteration_bound)?;
    let warm_to_plateau = to_plateau(ctx, &mut jvm, def.iterations, def.iteration_bound)?;
    if ctx.plateau {
        eprintln!(
            "sprig-bench: {}: {warm_to_plateau} more iterations until the iteration time stopped falling",
            def.name
        );
    }
    let mut schemes: Vec<String> = vec!["lazy".into()];
    if ctx.compare_locks {
        schemes.push(LOCKS_SCHEME.into());
    }
    if ctx.compare_alloc {
        schemes.push(ALLOC_EXACT_SCHEME.into());
        schemes.push(ALLOC_SAMPLED_SCHEME.into());
    }
    schemes.extend(
        ctx.compare_trivial
            .iter()
            .map(|b| format!("{TRIVIAL_SCHEME}{b}")),
    );
    if ctx.compare_dormant {
        schemes.push("lazy-redefine".into());
    }
    if ctx.compare_receivers {
        schemes.push("lazy-receiver".into());
    }
    schemes.push("eager".into());
    if !ctx.schemes.is_empty() {
        schemes.retain(|s| ctx.schemes.iter().any(|w| w == s));
        if schemes.is_empty() {
            bail!(
                "--schemes {}: none of this run's schemes (lazy, eager and those the --compare options add)",
                ctx.schemes.join(",")
            );
        }
    }
    // Every scheme under every timing mode asked for, side by side in the
    // same JVM and repeat.
    let timings: Vec<Option<String>> = if ctx.timing_modes.is_empty() {
        vec![None]
    } else {
        ctx.timing_modes.iter().cloned().map(Some).collect()
    };
    let variants: Vec<(String, Option<String>)> = schemes
        .iter()
        .flat_map(|s| timings.iter().map(move |t| (s.clone(), t.clone())))
        .collect();
    let k = def.iterations;
    // samples[root][variant] over repeats
    let mut samples: Vec<Vec<Vec<Sample>>> = def
        .roots
        .iter()
        .map(|_| variants.iter().map(|_| Vec::new()).collect())
        .collect();
    let mut skipped: Vec<String> = Vec::new();
    let mut roots_only_seen = false;
    let out = ctx
        .env
        .scratch
        .path
        .join(format!("{}-priming.json", def.name));
    // Opt-in rows (`idle`) run only when named.
    let wanted = |label: &str| {
        (ctx.rows.is_empty() && !OPT_IN_ROWS.contains(&label))
            || ctx.rows.iter().any(|r| r == label)
    };
    if !def.roots.iter().any(|r| wanted(r.label)) {
        bail!(
            "{}: no row among --rows {}; its rows are {}",
            def.name,
            ctx.rows.join(","),
            def.roots
                .iter()
                .map(|r| r.label)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let priming = if ctx.priming {
        // A root that is called: the wanted one, else the workload's first.
        let first = def
            .roots
            .iter()
            .find(|r| wanted(r.label) && !r.never_called)
            .or_else(|| def.roots.iter().find(|r| !r.never_called));
        let before = warm.last().copied().unwrap_or(f64::NAN);
        Some(prime(
            ctx,
            &mut jvm,
            def,
            first.context("no wanted root")?,
            &out,
            before,
        )?)
    } else {
        None
    };
    for rep in 0..ctx.repeats {
        let bare = iterate(&mut jvm, k, def.iteration_bound)?;
        for (ri, r) in def.roots.iter().enumerate() {
            if !wanted(r.label) {
                continue;
            }
            // Each repeat starts one scheme further along, so that no scheme
            // always runs first after the bare window (in a JVM the previous
            // sessions have not yet warmed) or always last. The first repeat
            // starts with Scheme B, whose report says whether the others
            // can differ from it at all.
            for si in (0..variants.len()).map(|i| (i + rep) % variants.len()) {
                let (scheme, timing) = &variants[si];
                // Scheme A differs from B only once callees are revealed
                // (`--locks` and `--alloc` differ whatever is instrumented).
                if *scheme != "lazy" && !beside_lazy(scheme) && roots_only_seen {
                    let note = format!(
                        "{} {}: {scheme} skipped (only roots are instrumented yet)",
                        def.name, r.label
                    );
                    if !skipped.contains(&note) {
                        skipped.push(note);
                    }
                    continue;
                }
                eprintln!(
                    "sprig-bench: {}: repeat {}/{}, root {} ({}), scheme {scheme}{}",
                    def.name,
                    rep + 1,
                    ctx.repeats,
                    r.label,
                    r.roots.join(" "),
                    timing
                        .as_ref()
                        .map_or(String::new(), |t| format!(", timing {t}"))
                );
                let sargs = SprigArgs {
                    roots: r.roots.clone(),
                    include: r.include.clone(),
                    exclude: vec![],
                    scheme: scheme.clone(),
                    timing: timing.clone(),
                };
                // With --settle, a bare window just as far from the last
                // disturbance: this workload keeps getting faster for a
                // while, so the bare window at the repeat's start is no
                // reference for a window timed after many more iterations.
                let mut settle_runs = (0, 0);
                let settled_bare = if ctx.settle > 0 {
                    iterate(&mut jvm, ctx.settle, def.iteration_bound)?;
                    settle_runs.0 = to_plateau(ctx, &mut jvm, k, def.iteration_bound)?;
                    Some(iterate(&mut jvm, k, def.iteration_bound)?)
                } else {
                    None
                };
                // One report per row and repeat, kept with --keep-logs.
                let out = ctx.env.scratch.path.join(format!(
                    "{}-{}-{scheme}{}-{}.json",
                    def.name,
                    r.label,
                    timing.as_ref().map_or(String::new(), |t| format!("-{t}")),
                    rep + 1
                ));
                let mut sprig = Sprig::start(&ctx.env.sprig, jvm.pid(), &sargs, &out)?;
                let attach = sprig.wait_profiling(Duration::from_secs(120))?;
                let prof = iterate(&mut jvm, k, def.iteration_bound)?;
                // With --settle, the report covers the settled window: the
                // calls, root and charged times of a session the JIT has
                // recompiled (charged/bare in steady state).
                let settled_prof = if ctx.settle > 0 {
                    iterate(&mut jvm, ctx.settle, def.iteration_bound)?;
                    settle_runs.1 = to_plateau(ctx, &mut jvm, k, def.iteration_bound)?;
                    if ctx.plateau {
                        eprintln!(
                            "sprig-bench: {}: settled after {} + {} bare and {} + {} profiled iterations",
                            def.name, ctx.settle, settle_runs.0, ctx.settle, settle_runs.1
                        );
                    }
                    sprig.reset(Duration::from_secs(30))?;
                    Some(iterate(&mut jvm, k, def.iteration_bound)?)
                } else {
                    None
                };
                let stopped = sprig.stop(Duration::from_secs(120))?;
                let p = ProfileSummary::from_json(&stopped.report)?;
                if p.lost > 0 {
                    bail!(
                        "{} root {} scheme {scheme}: sprig reported {} lost events",
                        def.name,
                        r.label,
                        p.lost
                    );
                }
                if r.never_called {
                    if p.root_calls != 0 {
                        bail!(
                            "{} root {}: {} calls recorded of a root that is never called",
                            def.name,
                            r.label,
                            p.root_calls
                        );
                    }
                } else if p.root_calls == 0 {
                    bail!(
                        "{} root {} scheme {scheme}: no root call recorded; sprig's stderr: {:?}",
                        def.name,
                        r.label,
                        stopped.stderr
                    );
                }
                // Whole roots: one root call per iteration of the window
                // the report covers (under windows timing counted and
                // silent ones together).
                if r.whole && p.all_root_calls() != k as u64 {
                    bail!(
                        "{} root {}: {} root calls recorded, {k} made",
                        def.name,
                        r.label,
                        p.all_root_calls()
                    );
                }
                if timing.as_deref() == Some("windows") && p.windows.is_none() {
                    bail!(
                        "{} root {}: asked for --timing windows, the report has no windows facts",
                        def.name,
                        r.label
                    );
                }
                roots_only_seen |= p.roots_only();
                let after = iterate(&mut jvm, k, def.iteration_bound)?;
                let counted_root_calls = p.root_calls;
                samples[ri][si].push(Sample {
                    bare_mean: mean(&bare),
                    bare_median: median(&bare),
                    total_mean: mean(&prof),
                    total_median: median(&prof),
                    after_mean: mean(&after),
                    settled: settled_bare.zip(settled_prof),
                    plateau_runs: settle_runs,
                    p,
                    attach_ms: attach.as_secs_f64() * 1e3,
                    detach_ms: stopped.stop_time.as_secs_f64() * 1e3,
                    cli_cpu_ms: stopped.cli_cpu.map(|d| d.as_secs_f64() * 1e3),
                    k,
                    whole: r.whole,
                    paths: (ctx.timing_modes.len() > 1)
                        .then(|| ProfileSummary::paths_and_calls(&stopped.report)),
                    repeat: rep,
                    counted_root_calls,
                });
            }
        }
    }
    jvm.quit()?;
    let mut rows = Vec::new();
    for (ri, r) in def.roots.iter().enumerate() {
        for (si, (scheme, timing)) in variants.iter().enumerate() {
            let s = &samples[ri][si];
            if s.is_empty() {
                continue;
            }
            // Under sampled timing: the tree against the exact session of
            // the same root, scheme and repeat (same JVM, same number of
            // iterations), path by path. Under windows timing, per root
            // call: its trees hold the root calls of its counting windows.
            let exact_twin = variants
                .iter()
                .position(|(sc, t)| sc == scheme && t.as_deref() == Some("exact"));
            let vs_exact: Vec<Value> = match (timing.as_deref(), exact_twin) {
                (Some(mode @ ("sampled" | "windows")), Some(ei)) => s
                    .iter()
                    .filter_map(|x| {
                        let e = samples[ri][ei].iter().find(|e| e.repeat == x.repeat)?;
                        let (ep, xp) = (e.paths.as_ref()?, x.paths.as_ref()?);
                        Some(if mode == "windows" {
                            compare_paths_per_root(
                                ep,
                                e.counted_root_calls,
                                xp,
                                x.counted_root_calls,
                            )
                        } else {
                            compare_paths(ep, xp)
                        })
                    })
                    .collect(),
                _ => Vec::new(),
            };
            // `--locks` (row Bl) or `--alloc` (Bx, Bs) over Scheme B
            // without it, same root,
            // timing and repeat: their windows' median iteration times
            // (with `--settle`, of the settled windows).
            let over_lazy: Vec<f64> = match variants
                .iter()
                .position(|(sc, t)| sc == "lazy" && t == timing)
            {
                Some(li) if beside_lazy(scheme) => s
                    .iter()
                    .filter_map(|x| {
                        let b = samples[ri][li].iter().find(|b| b.repeat == x.repeat)?;
                        Some((x.steady_median() / b.steady_median() - 1.0) * 100.0)
                    })
                    .collect(),
                _ => Vec::new(),
            };
            let col = |f: &dyn Fn(&Sample) -> f64| -> Vec<f64> { s.iter().map(f).collect() };
            let cb: Vec<f64> = s.iter().filter_map(Sample::charged_bare).collect();
            let settled: Vec<f64> = s.iter().filter_map(Sample::settled).collect();
            let last = &s[s.len() - 1].p;
            rows.push(json!({
                "workload": def.name, "root": r.label, "patterns": r.roots, "include": r.include,
                "scheme": scheme, "timing": timing, "repeats": s.len(), "iterations_per_window": k,
                "tree_vs_exact": vs_exact,
                "over_lazy_pct": json_of(&over_lazy),
                "over_lazy_pct_by_repeat": over_lazy,
                "calls_per_iter": json_of(&col(&|x| x.calls_per_iter())),
                "bare_ms": json_of(&col(&|x| x.bare_mean)),
                "total_ms": json_of(&col(&|x| x.total_mean)),
                "overhead_pct": json_of(&col(&|x| x.overhead())),
                "throughput_over_bare": json_of(&col(&|x| x.throughput())),
                "windows": s.iter().map(|x| x.p.windows.as_ref().map_or(Value::Null, |w| w.to_json())).collect::<Vec<_>>(),
                "steady_overhead_pct": json_of(&col(&|x| x.steady())),
                "settled_overhead_pct": json_of(&settled),
                "settle_iterations": ctx.settle,
                "plateau_bare_iterations": json_of(&col(&|x| x.plateau_runs.0 as f64)),
                "plateau_profiled_iterations": json_of(&col(&|x| x.plateau_runs.1 as f64)),
                "probe_floor_pct": json_of(&s.iter().filter_map(Sample::probe_floor).collect::<Vec<_>>()),
                "root_ms": json_of(&col(&|x| x.root_ms())),
                "charged_ms": json_of(&col(&|x| x.charged_ms())),
                "charged_over_bare": json_of(&cb),
                "root_share": json_of(&col(&|x| x.share())),
                "instrumented_methods": json_of(&col(&|x| x.p.instrumented as f64)),
                "called_methods": json_of(&col(&|x| x.p.called as f64)),
                "methods_in_tree": json_of(&col(&|x| x.p.distinct_methods as f64)),
                "after_detach_ms": json_of(&col(&|x| x.after_mean)),
                "attach_ms": json_of(&col(&|x| x.attach_ms)),
                "detach_and_report_ms": json_of(&col(&|x| x.detach_ms)),
                "events": json_of(&col(&|x| x.p.events as f64)),
                "profiled_window_ms": json_of(&col(&|x| x.p.duration_ms as f64)),
                "cli_cpu_ms": json_of(&s.iter().filter_map(|x| x.cli_cpu_ms).collect::<Vec<_>>()),
                "cli_cpu_pct_of_window": json_of(
                    &s.iter()
                        .filter_map(|x| Some(
                            x.cli_cpu_ms? / (x.p.duration_ms + x.p.reset_after_ms) as f64 * 100.0
                        ))
                        .collect::<Vec<_>>()
                ),
                "lost_events": 0,
                "extra_stats": last.extra_stats,
                "calibration": last.calibration,
                "warnings": last.warnings,
            }));
        }
    }
    Ok(json!({
        "workload": def.name, "what": def.what, "warmup_ms": json_of(&warm),
        "priming": priming, "rows": rows, "skipped": skipped,
        "warm_to_plateau_iterations": warm_to_plateau,
    }))
}

fn sum(v: &Value, k: &str) -> Option<Summary> {
    let x = v.get(k)?;
    Some(Summary {
        median: x.get("median")?.as_f64()?,
        min: x.get("min")?.as_f64()?,
        max: x.get("max")?.as_f64()?,
        n: x.get("n")?.as_u64()? as usize,
    })
}

/// The table in JFluid's columns (medians over repeats, [min-max]).
pub fn print_table(results: &[Value]) {
    println!(
        "{:<7} {:<9} {:<5} {:<7} {:>12} {:>24} {:>24} {:>22} {:>6} {:>9} {:>9} {:>7} {:>10} {:>10} {:>11} {:>6} {:>9} {:>24}",
        "program",
        "root",
        "sch",
        "timing",
        "calls/iter",
        "bare ms",
        "total ms",
        "overhead %",
        "tput",
        "steady %",
        "settled %",
        "floor %",
        "root ms",
        "charged",
        "charged/bare",
        "share",
        "instr/call",
        "after detach ms"
    );
    for w in results {
        for r in w
            .get("rows")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let m = |k: &str| sum(r, k).map_or(f64::NAN, |s| s.median);
            let st = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("?").to_owned();
            println!(
                "{:<7} {:<9} {:<5} {:<7} {:>12.0} {:>24} {:>24} {:>22} {:>6.3} {:>9.1} {:>9} {:>7} {:>10.2} {:>10.2} {:>11} {:>6.3} {:>9} {:>24}",
                st("workload"),
                st("root"),
                match st("scheme").as_str() {
                    "lazy" => "B".to_owned(),
                    "lazy-redefine" => "Br".to_owned(),
                    "lazy-receiver" => "Bv".to_owned(),
                    KEEP_TRIVIAL_SCHEME => "Ba".to_owned(),
                    LOCKS_SCHEME => "Bl".to_owned(),
                    ALLOC_EXACT_SCHEME => "Bx".to_owned(),
                    ALLOC_SAMPLED_SCHEME => "Bs".to_owned(),
                    s => match s.strip_prefix(TRIVIAL_SCHEME) {
                        Some(bound) => format!("Bt{bound}"),
                        None => "A".to_owned(),
                    },
                },
                r.get("timing").and_then(Value::as_str).unwrap_or("-"),
                m("calls_per_iter"),
                fmt(sum(r, "bare_ms"), 2),
                fmt(sum(r, "total_ms"), 2),
                fmt(sum(r, "overhead_pct"), 1),
                m("throughput_over_bare"),
                m("steady_overhead_pct"),
                sum(r, "settled_overhead_pct")
                    .map_or("-".to_owned(), |s| format!("{:.1}", s.median)),
                sum(r, "probe_floor_pct").map_or("-".to_owned(), |s| format!("{:.1}", s.median)),
                m("root_ms"),
                m("charged_ms"),
                sum(r, "charged_over_bare").map_or("-".to_owned(), |s| format!("{:.3}", s.median)),
                m("root_share"),
                format!(
                    "{:.0}/{:.0}",
                    m("instrumented_methods"),
                    m("called_methods")
                ),
                fmt(sum(r, "after_detach_ms"), 2),
            );
            if let Some(x) = r.get("extra_stats").and_then(Value::as_object)
                && !x.is_empty()
            {
                println!("        stats: {}", Value::Object(x.clone()));
            }
            for (i, w) in r
                .get("windows")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
                .filter(|(_, w)| !w.is_null())
            {
                let n = |k: &str| w.get(k).and_then(Value::as_u64).unwrap_or(0);
                println!(
                    "        windows, repeat {}: {} root calls counted, {} silent (totals scaled x{:.2}); {} stack samples credited, {} outside a root",
                    i + 1,
                    n("counted_root_calls"),
                    n("silent_root_calls"),
                    w.get("scale").and_then(Value::as_f64).unwrap_or(f64::NAN),
                    n("samples"),
                    n("samples_outside"),
                );
            }
            for (i, c) in r
                .get("tree_vs_exact")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                let pair = |k: &str| {
                    c.get(k)
                        .and_then(Value::as_array)
                        .map(|v| {
                            v.iter()
                                .map(|x| x.as_u64().unwrap_or(0).to_string())
                                .collect::<Vec<_>>()
                                .join(" / ")
                        })
                        .unwrap_or_default()
                };
                let per_root = c.get("per_root_call") == Some(&Value::Bool(true));
                println!(
                    "        check, repeat {}: paths and calls{} against exact timing {}: paths {}, calls {}{}{}",
                    i + 1,
                    if per_root { " per root call" } else { "" },
                    if c.get("identical") == Some(&Value::Bool(true)) {
                        "IDENTICAL"
                    } else {
                        "DIFFER"
                    },
                    pair("paths"),
                    pair("calls"),
                    if per_root {
                        format!(
                            " over {} root calls; distance {:.4}, {} paths exact never saw",
                            pair("root_calls"),
                            c.get("distance")
                                .and_then(Value::as_f64)
                                .unwrap_or(f64::NAN),
                            c.get("paths_only_in_second")
                                .and_then(Value::as_u64)
                                .unwrap_or(0)
                        )
                    } else {
                        String::new()
                    },
                    match c.get("paths_differing").and_then(Value::as_u64) {
                        Some(n) if n > 0 => format!(
                            "; {n} paths differ, e.g. {}",
                            c.get("first_differences").cloned().unwrap_or(Value::Null)
                        ),
                        _ => String::new(),
                    }
                );
            }
            if let Some(o) = sum(r, "over_lazy_pct").filter(|o| o.n > 0) {
                let each: Vec<String> = r
                    .get("over_lazy_pct_by_repeat")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_f64)
                    .map(|v| format!("{v:+.1}"))
                    .collect();
                println!(
                    "        {} over B, same repeat (median iteration times{}): {} % (per repeat: {})",
                    match r.get("scheme").and_then(Value::as_str) {
                        Some(ALLOC_EXACT_SCHEME) => "--alloc (exact only)",
                        Some(ALLOC_SAMPLED_SCHEME) => "--alloc-interval 524288 (sampled alone)",
                        _ => "--locks",
                    },
                    if sum(r, "settled_overhead_pct").is_some() {
                        ", settled windows"
                    } else {
                        ""
                    },
                    fmt(Some(o), 1),
                    each.join(", ")
                );
            }
            if let Some(c) = sum(r, "cli_cpu_pct_of_window") {
                println!(
                    "        sprig process CPU while profiling: {:.0}% of one core (median over repeats)",
                    c.median
                );
            }
        }
        if let Some(p) = w.get("priming").filter(|p| !p.is_null()) {
            println!(
                "{:<7} priming session (root {}, before the rows): first iteration {:.2} ms against {:.2} ms at the end of the warm-up; warm-up again {} ms",
                w.get("workload").and_then(Value::as_str).unwrap_or("?"),
                p.get("root").and_then(Value::as_str).unwrap_or("?"),
                p.get("first_iteration_ms")
                    .and_then(Value::as_f64)
                    .unwrap_or(f64::NAN),
                p.get("last_warmup_ms")
                    .and_then(Value::as_f64)
                    .unwrap_or(f64::NAN),
                fmt(sum(p, "rewarm_ms"), 2),
            );
        }
        for s in w
            .get("skipped")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            println!("        note: {}", s.as_str().unwrap_or(""));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plateau_is_two_blocks_of_windows_the_later_no_faster_by_2_pct() {
        // The warm-up of a Jetty JVM (window medians, ms, 2026-11-27).
        let jetty = [
            44.2, 36.8, 39.0, 38.7, 39.7, 39.4, 38.0, 32.6, 36.3, 33.0, 36.5, 31.8, 33.5, 30.6,
            29.6, 29.4, 27.4, 27.5, 27.6, 27.4, 26.8, 28.5, 27.5, 27.8, 28.6,
        ];
        let first = (1..=jetty.len()).find(|&n| plateau_reached(&jetty[..n]));
        assert_eq!(
            first,
            Some(24),
            "falling until the 20th window or so, flat from then on"
        );
        assert!(!plateau_reached(&jetty[..9]), "two whole blocks first");
        // Noise around a flat level is a plateau; a steady fall is not.
        let flat = [10.0, 11.0, 9.5, 10.4, 10.1, 9.8, 10.6, 9.9, 10.2, 10.3];
        assert!(plateau_reached(&flat));
        let falling: Vec<f64> = (0..10).map(|i| 20.0 - f64::from(i)).collect();
        assert!(!plateau_reached(&falling));
    }
}
