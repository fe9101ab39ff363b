//! sprig-bench: sprig's cost and accuracy on real JVM programs, bare and
//! profiled side by side in the same JVM, in JFluid's columns; plus the probe,
//! attach and throughput microbenchmarks. See BENCHMARKS.md.
//!
//! `cargo run --release -p sprig-bench -- [--quick] [--json OUT] [--only NAME]`

mod alloc_duty;
mod alloc_hist;
mod env;
mod micro;
mod proc;
mod profile;
mod sample;
mod stats;
mod truth;
mod workloads;

use anyhow::{Result, bail};
use clap::Parser;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

const MICRO: [&str; 10] = [
    "probe",
    "overlap",
    "attach",
    "throughput",
    "ring",
    "accuracy",
    "jfr",
    "sample",
    "alloc-hist",
    "alloc-duty",
];

/// Benchmarks run only when `--only` names them.
const OPT_IN: [&str; 2] = ["alloc-hist", "alloc-duty"];

#[derive(Parser, Debug)]
#[command(
    name = "sprig-bench",
    about = "Benchmarks sprig on real JVM workloads (bare vs profiled)"
)]
struct Args {
    /// A few minutes instead of up to half an hour: fewer repeats and iterations.
    #[arg(long)]
    quick: bool,
    /// Write every figure (medians, min/max, raw series) as JSON to OUT.
    #[arg(long, value_name = "OUT")]
    json: Option<PathBuf>,
    /// Run only these benchmarks (repeat or comma-separate): probe, overlap,
    /// attach, throughput, ring, accuracy (the accuracy fixtures under each
    /// timing mode), jfr (self-time overlap with JFR's execution samples),
    /// sample (`sprig sample`'s overhead and accuracy on H2 and Jetty),
    /// alloc-hist (only when named: the sampled class histogram of
    /// `--alloc` against the exact one on H2's and javac's roots, 30 s
    /// sessions), alloc-duty (only when named: the heap sampler's cost
    /// inside one session on H2 and Jetty, turned on and off every 2 s,
    /// with a control session without it),
    /// javac, h2, jetty, lucene (skipped, saying why, without Debian's
    /// liblucene4.10-java), calls, coarse.
    #[arg(long, value_name = "NAME", value_delimiter = ',')]
    only: Vec<String>,
    /// Of the workloads, run only the rows of these roots (repeat or
    /// comma-separate): whole, compile, partial, statement, server, servlet,
    /// document, and `idle` (never by default): a root no iteration calls, to time
    /// what a session costs with its probes dormant (under sampled timing:
    /// position sampling alone).
    #[arg(long, value_name = "LABEL", value_delimiter = ',')]
    rows: Vec<String>,
    /// Run each workload row under each of these timing modes (comma-
    /// separate: exact, sampled, windows, windows-original: windows timing
    /// with `--windows-silence original`), side by side in the same JVM
    /// and repeat; with exact among them, each sampled session's tree is
    /// checked path by path against the exact session's, and each windows
    /// session's per root call (its trees count the root calls of its
    /// counting windows). Default: sprig's default mode only. `--only
    /// accuracy` and `--only jfr` run each of these modes (default: exact
    /// and sampled).
    #[arg(long, value_name = "MODE", value_delimiter = ',', value_parser = ["exact", "sampled", "windows", "windows-original"])]
    timing_modes: Vec<String>,
    /// Of the workloads' schemes, run only these (comma-separate: lazy,
    /// eager, and those the --compare options add). Default: all.
    #[arg(long, value_name = "SCHEME", value_delimiter = ',')]
    schemes: Vec<String>,
    /// Repeats of each workload's bare/profiled windows (default 1 quick, 3 full).
    #[arg(long, value_name = "N")]
    repeats: Option<usize>,
    /// Also run Scheme B without dormant probes (`--no-dormant`, row `Br`):
    /// every revelation redefines its class again. Slow on javac.
    #[arg(long)]
    compare_dormant: bool,
    /// Also run Scheme B with virtual and interface calls revealed by the
    /// receivers they see (`--virtual-calls receiver`, row `Bv`) instead of
    /// class hierarchy analysis.
    #[arg(long)]
    compare_receivers: bool,
    /// Also run Scheme B with `--locks` (row `Bl`), beside B in the same
    /// JVM and repeat, the two alternating which runs first from one
    /// repeat to the next; the table adds `--locks` over B per repeat (the
    /// medians of their windows' iteration times; with `--settle`, of the
    /// settled windows) and the median of those. E.g. `--only jetty --rows
    /// server --schemes lazy,lazy-locks --compare-locks --settle 60
    /// --repeats 6`.
    #[arg(long)]
    compare_locks: bool,
    /// Also run Scheme B with `--alloc` counting exact allocations only
    /// (`--alloc-interval 0`, row `Bx`), with the JVM's heap sampler
    /// alone at `--alloc`'s default interval (`--alloc-interval 524288`,
    /// row `Bs`), with both (`--alloc`, row `Bxs`) and Scheme B once more
    /// (row `B'`, the control: what one session after another in the same
    /// JVM does to B itself), beside B in the same JVM and repeat as
    /// `--compare-locks` runs `Bl`; the table adds each over B per repeat
    /// and their median. E.g. `--only jetty,h2 --rows server,statement
    /// --schemes lazy,lazy-again,lazy-alloc-exact,lazy-alloc-sampled,lazy-alloc
    /// --compare-alloc --settle 60 --repeats 6`.
    #[arg(long)]
    compare_alloc: bool,
    /// Also run Scheme B with every method instrumented, trivial ones
    /// included (`--keep-trivial`, row `Ba`): row `B` is sprig's default,
    /// which gives getters, setters and other short straight-line leaves
    /// of up to 16 bytes no probes. With byte bounds
    /// (`--compare-trivial=0,6,35`), one row per bound (`--skip-trivial=N`,
    /// row `BtN`; 0 is `Ba`).
    // `Some([])`: the option given without a bound.
    #[arg(
        long,
        value_name = "BYTES",
        num_args = 0..=1,
        require_equals = true,
        value_delimiter = ',',
        value_parser = clap::value_parser!(u32)
            .range(0..=i64::from(sprig_rewriter::TRIVIAL_BYTES_MAX))
    )]
    compare_trivial: Option<Vec<u32>>,
    /// Keep profiling N more iterations after the measured window, then
    /// time one more window, against a bare window also timed after N more
    /// bare iterations: the "settled %" column, the overhead once the JIT
    /// has recompiled what revelation deoptimised (what a long session on a
    /// server costs). Default 0: not measured. sprig's results are reset
    /// before the settled window, so the profile columns (calls/iter, root
    /// ms, charged, charged/bare, share) then describe that window.
    #[arg(long, value_name = "N", default_value_t = 0)]
    settle: usize,
    /// Warm each workload JVM up, and with `--settle` settle both windows,
    /// until it stops getting faster, not for a fixed count: windows of
    /// the measured size until the median of the last five window medians
    /// is no more than 2% below that of the five before (at most 100
    /// windows, and never less than the fixed count). A Jetty JVM keeps
    /// getting faster for about 900 iterations (27-29 ms an iteration
    /// against 38-45 ms after the fixed 30), and again for about 400 after
    /// an attach, so without this its figures compare windows the JIT has
    /// not finished with.
    #[arg(long)]
    plateau: bool,
    /// Do not attach once during warm-up. By default each workload JVM is
    /// profiled for one iteration and detached before its rows are timed,
    /// then warmed up again: the first class redefinition after a dynamic
    /// attach makes HotSpot throw away all compiled code (not only what
    /// depends on the redefined classes), so without this the row that
    /// attaches first (Scheme B of the first root) pays a cost no other
    /// row pays. The priming session's first iteration and the re-warm-up
    /// are reported per workload ("priming" in the JSON).
    #[arg(long)]
    no_priming: bool,
    /// Do not run scripts/setup.sh --bench first.
    #[arg(long)]
    no_setup: bool,
    /// Use this sprig binary (libsprig_agent.so next to it) instead of building one.
    #[arg(long, value_name = "PATH")]
    sprig: Option<PathBuf>,
    /// Add this argument to every `sprig profile` command (repeatable),
    /// e.g. `--sprig-arg=--ring-mib=4`.
    #[arg(long = "sprig-arg", value_name = "ARG", allow_hyphen_values = true)]
    sprig_arg: Vec<String>,
    /// Add this argument to the command line of every workload JVM
    /// (repeatable), before its class path: `--jvm-arg=-XX:-Inline` times
    /// the same workloads bare and profiled with HotSpot's inlining off,
    /// to tell what the probes cost the JIT from what they cost to run.
    #[arg(long = "jvm-arg", value_name = "ARG", allow_hyphen_values = true)]
    jvm_arg: Vec<String>,
    /// JDK home the workloads run on (default: Debian's JDK 17).
    #[arg(long, value_name = "DIR")]
    jdk: Option<PathBuf>,
    /// Keep the scratch directory (the JVMs' and sprig's logs, with the
    /// agent's debug lines: calibration windows, probe path; and each
    /// row's JSON report, `<workload>-<row>-<scheme>-<repeat>.json`) after a
    /// run that passed too; its path is printed at the end.
    #[arg(long)]
    keep_logs: bool,
}

pub struct Ctx {
    pub env: env::Env,
    pub quick: bool,
    pub repeats: usize,
    pub compare_dormant: bool,
    pub compare_receivers: bool,
    /// Also run Scheme B with `--locks` (row `Bl`).
    pub compare_locks: bool,
    pub compare_alloc: bool,
    /// Byte bounds of `--skip-trivial` rows to add (none: no such row).
    pub compare_trivial: Vec<u32>,
    /// Extra profiled iterations before the settled window (0: none).
    pub settle: usize,
    /// Warm up and settle until the JVM stops getting faster (`--plateau`).
    pub plateau: bool,
    /// Root labels to run (empty: all).
    pub rows: Vec<String>,
    /// Extra arguments for the workload JVMs (`--jvm-arg`).
    pub jvm_args: Vec<String>,
    /// `--timing` values to run every row under (empty: sprig's default).
    pub timing_modes: Vec<String>,
    /// Schemes to keep (empty: all).
    pub schemes: Vec<String>,
    /// Attach once during warm-up (see `--no-priming`).
    pub priming: bool,
}

fn main() -> ExitCode {
    match real_main() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("sprig-bench: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Ok(false) when a benchmark failed (the others still ran).
impl Args {
    /// The `--skip-trivial` bounds `--compare-trivial` asks for (0: every
    /// method instrumented): 0 when the option came without a bound, none
    /// without it.
    fn trivial_bounds(&self) -> Vec<u32> {
        match &self.compare_trivial {
            Some(b) if b.is_empty() => vec![0],
            b => b.clone().unwrap_or_default(),
        }
    }
}

fn real_main() -> Result<bool> {
    let args = Args::parse();
    let all: Vec<&str> = MICRO
        .iter()
        .chain(workloads::NAMES.iter())
        .copied()
        .collect();
    for o in &args.only {
        if !all.contains(&o.as_str()) {
            bail!("--only {o}: unknown benchmark (known: {})", all.join(", "));
        }
    }
    let selected: Vec<&str> = all
        .iter()
        .copied()
        .filter(|n| {
            // `alloc-hist` runs when named only (a minute and more of sessions).
            (args.only.is_empty() && !OPT_IN.contains(n)) || args.only.iter().any(|o| o == n)
        })
        .collect();
    let started = Instant::now();
    proc::set_extra_sprig_args(args.sprig_arg.clone());
    if !args.sprig_arg.is_empty() {
        println!(
            "sprig profile arguments added: {}",
            args.sprig_arg.join(" ")
        );
    }
    if !args.jvm_arg.is_empty() {
        println!("workload JVM arguments added: {}", args.jvm_arg.join(" "));
    }
    let env = env::Env::prepare(env::Options {
        setup: !args.no_setup,
        sprig: args.sprig.clone(),
        jdk: args.jdk.clone(),
    })?;
    let ctx = Ctx {
        compare_dormant: args.compare_dormant,
        compare_receivers: args.compare_receivers,
        compare_locks: args.compare_locks,
        compare_alloc: args.compare_alloc,
        compare_trivial: args.trivial_bounds(),
        settle: args.settle,
        plateau: args.plateau,
        priming: !args.no_priming,
        rows: args.rows.clone(),
        jvm_args: args.jvm_arg.clone(),
        timing_modes: args.timing_modes.clone(),
        schemes: args.schemes.clone(),
        quick: args.quick,
        repeats: args
            .repeats
            .unwrap_or(if args.quick { 1 } else { 3 })
            .max(1),
        env,
    };
    println!("machine: {}", ctx.env.machine);
    println!(
        "sprig: {}  (mode: {})",
        ctx.env.sprig.display(),
        if ctx.quick { "quick" } else { "full" }
    );
    let mut micro_out = serde_json::Map::new();
    let mut workload_out = Vec::new();
    let mut failures = Vec::new();
    for name in &selected {
        let t = Instant::now();
        eprintln!("sprig-bench: == {name}");
        let result = if MICRO.contains(name) {
            let r = match *name {
                "probe" => micro::probe_cost(&ctx),
                "attach" => micro::attach_latency(&ctx),
                "ring" => micro::ring_rates(&ctx),
                "overlap" => micro::overlap(&ctx),
                "accuracy" => truth::accuracy(&ctx),
                "jfr" => truth::jfr(&ctx),
                "sample" => sample::sample(&ctx),
                "alloc-hist" => alloc_hist::alloc_hist(&ctx),
                "alloc-duty" => alloc_duty::alloc_duty(&ctx),
                _ => micro::throughput(&ctx),
            };
            r.map(|v| {
                micro::print(name, &v);
                truth::print(name, &v);
                if *name == "sample" {
                    sample::print(&v);
                }
                if *name == "alloc-hist" {
                    alloc_hist::print(&v);
                }
                if *name == "alloc-duty" {
                    alloc_duty::print(&v);
                }
                micro_out.insert(name.to_string(), v);
            })
        } else {
            match workloads::define(&ctx, name) {
                Err(e) if e.to_string().starts_with(workloads::SKIPPED) => {
                    println!("{name}: {e}");
                    workload_out
                        .push(json!({"workload": name, "rows": [], "skipped": [e.to_string()]}));
                    Ok(())
                }
                d => d
                    .and_then(|def| {
                        println!("{}: {}", def.name, def.what);
                        workloads::run(&ctx, &def)
                    })
                    .map(|v| workload_out.push(v)),
            }
        };
        match result {
            Ok(()) => eprintln!(
                "sprig-bench: {name} done in {:.0} s",
                t.elapsed().as_secs_f64()
            ),
            Err(e) => {
                eprintln!("sprig-bench: FAILED {name}: {e:#}");
                failures.push(json!({"benchmark": name, "error": format!("{e:#}")}));
            }
        }
    }
    if !workload_out.is_empty() {
        println!();
        println!(
            "workloads (medians over repeats [min-max]; B = lazy, BtN = lazy with --skip-trivial=N, A = eager; times per iteration)"
        );
        if ctx.settle > 0 {
            println!(
                "(with --settle {}{}: calls/iter, floor, root ms, charged, charged/bare and share are of the settled window; under windows timing, of the whole session)",
                ctx.settle,
                if ctx.plateau { " and --plateau" } else { "" }
            );
        }
        if ctx.plateau {
            println!(
                "(with --plateau: warm-up and settling go on until the iteration time stops falling; iterations run to get there in the JSON)"
            );
        }
        println!(
            "(floor %: calls/iter x the calibrated probe pair, over bare ms: the overhead the probes' own cost makes if nothing else changes)"
        );
        workloads::print_table(&workload_out);
    }
    let ok = failures.is_empty();
    let doc = json!({
        "sprig_bench": 1,
        "mode": if ctx.quick { "quick" } else { "full" },
        "repeats": ctx.repeats,
        "machine": ctx.env.machine,
        "jvm_args": ctx.jvm_args,
        "sprig_args": args.sprig_arg,
        "elapsed_s": started.elapsed().as_secs_f64(),
        "micro": Value::Object(micro_out),
        "workloads": workload_out,
        "failures": failures,
    });
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&doc)? + "\n")?;
        eprintln!("sprig-bench: wrote {}", path.display());
    }
    println!("elapsed: {:.0} s", started.elapsed().as_secs_f64());
    let mut ctx = ctx;
    if args.keep_logs && ok {
        ctx.env.scratch.keep = true;
        eprintln!(
            "sprig-bench: logs kept in {} (each row's report in {})",
            ctx.env.logs().display(),
            ctx.env.scratch.path.display()
        );
    }
    if !ok {
        ctx.env.scratch.keep = true;
        eprintln!(
            "sprig-bench: {} benchmark(s) failed; logs kept in {}",
            doc["failures"].as_array().map_or(0, Vec::len),
            ctx.env.logs().display()
        );
    }
    Ok(ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(args: &[&str]) -> Vec<u32> {
        Args::try_parse_from(std::iter::once("sprig-bench").chain(args.iter().copied()))
            .expect("valid arguments")
            .trivial_bounds()
    }

    #[test]
    fn compare_trivial_bounds() {
        assert_eq!(bounds(&[]), Vec::<u32>::new());
        assert_eq!(bounds(&["--compare-trivial"]), vec![0]);
        assert_eq!(bounds(&["--compare-trivial=0,6,35"]), vec![0, 6, 35]);
        for bad in ["--compare-trivial=256", "--compare-trivial=x"] {
            assert!(
                Args::try_parse_from(["sprig-bench", bad]).is_err(),
                "{bad} accepted"
            );
        }
    }
}
