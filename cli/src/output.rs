//! Writing what a session produced: view options shared by `profile`,
//! `run` and `report`, snapshots (`-o run.sprig`), and the `report` and
//! `diff` commands that re-render snapshots.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use sprig::pattern;
use sprig_callgraph::cct::diff::DiffWeight;
use sprig_callgraph::profile::Metric;
use sprig_callgraph::report::DEFAULT_MAX_STACK;
use sprig_callgraph::report::diff::{DiffCollapsed, DiffText};
use sprig_callgraph::report::flamegraph::DiffFlameGraph;
use sprig_callgraph::{Profile, RenderOptions};

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
    Collapsed,
    /// One self-contained HTML page: an interactive flame graph and the
    /// call tree (open it in a browser; it makes no network request).
    Flamegraph,
    /// Gzipped pprof protocol buffer, for `go tool pprof`, Pyroscope,
    /// Parca or Grafana (binary: write it to a file with -o).
    Pprof,
}

/// Hot spots listed when `--hot-spots` is given without a number, and
/// under the tree when it is not given.
pub const DEFAULT_HOT_SPOTS: usize = 20;

/// Which sections of the text report to show (the tree and the hot spots
/// by default).
#[derive(Args, Debug, Clone, Default)]
pub struct Sections {
    /// Show only the hot spots table (methods by self time, the N first,
    /// 20 without N) instead of the tree and the hot spots; `--hot-spots 0`
    /// shows the tree without hot spots.
    #[arg(long = "hot-spots", value_name = "N", num_args = 0..=1,
          default_missing_value = "20")]
    pub hot_spots: Option<usize>,

    /// With --hot-spots: show the tree as well.
    #[arg(long)]
    pub tree: bool,

    /// Text: every method with its signature (`handle(Order, int)`);
    /// without it, only overloads that would otherwise read the same.
    #[arg(long)]
    pub signatures: bool,
}

impl Sections {
    /// `view` with these sections chosen, and whether the tree is shown.
    fn apply(&self, view: &ViewArgs) -> (ViewArgs, bool) {
        let mut view = view.clone();
        match self.hot_spots {
            None => (view, true),
            Some(0) => {
                view.hot_spots = 0;
                (view, true)
            }
            Some(n) => {
                view.hot_spots = n;
                (view, self.tree)
            }
        }
    }
}

/// What the report shows.
#[derive(Args, Debug, Clone)]
pub struct ViewArgs {
    /// Report format: an aligned text tree, JSON (schema version 1),
    /// collapsed stacks for flame graph tools, an interactive HTML flame
    /// graph, or pprof (gzipped protobuf). `-o FILE.sprig` writes a
    /// snapshot instead (re-render it with `sprig report`).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,

    /// Hide tree nodes below this percentage of their root's time.
    #[arg(long, value_name = "PCT", default_value_t = 0.0)]
    pub min_percent: f64,

    /// Show at most this many levels of the tree.
    #[arg(long, value_name = "N")]
    pub depth: Option<usize>,

    /// Collapsed, flamegraph and pprof: at most N frames in one stack;
    /// deeper frames are cut and shown as one `[truncated K frames]` frame
    /// holding their time (bounds the report of a deep recursion).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_STACK)]
    pub max_stack: usize,

    /// Collapsed and flamegraph: what a frame's value (its width) counts:
    /// `time` (exact, or sampled under sampled timing), `calls` (exact),
    /// `samples` (sampled timing), `waits` (`--locks`: the time of the
    /// wait rows, measured), or with `--alloc` `objects` or `bytes`
    /// allocated (exact). pprof carries calls and time in every sample;
    /// text and JSON order by time.
    #[arg(long, value_name = "METRIC", default_value = "time", value_parser = parse_metric)]
    pub weight: Metric,

    /// Show the tree merged over all threads instead of one tree per thread.
    #[arg(long)]
    pub merged: bool,

    /// One tree per virtual thread: by default the virtual threads are
    /// merged into one tree, `virtual threads (N)`, each root's calls
    /// added together (platform threads keep a tree each).
    #[arg(long)]
    pub threads: bool,

    /// How many hot spots the report lists under the tree (0 for none);
    /// `--hot-spots [N]` ([`Sections`]) sets it from the command line.
    #[arg(skip = DEFAULT_HOT_SPOTS)]
    pub hot_spots: usize,

    /// Show who called the methods matching PATTERN (`pkg.Class::method`),
    /// with each caller's share of their time. Repeatable.
    #[arg(long = "back-trace", value_name = "PATTERN")]
    pub back_traces: Vec<String>,

    /// Text report and live view: fit lines in COLS columns (default: the
    /// terminal's width, or 120 when the report goes to a file or a pipe).
    /// Names are cut from the left of their package to fit; figures never.
    #[arg(long, value_name = "COLS", value_parser = clap::value_parser!(u16).range(40..=1000))]
    pub width: Option<u16>,

    /// Text report: end with every figure of the session (clock, events,
    /// revelation and redefinition counts, dormant probes, calibration,
    /// in-session bursts, waits) instead of a one-line summary. The JSON
    /// always holds them all.
    #[arg(long, short = 'v')]
    pub verbose: bool,
}

impl ViewArgs {
    pub fn validate(&self) -> Result<()> {
        if !(self.min_percent.is_finite() && (0.0..=100.0).contains(&self.min_percent)) {
            bail!(
                "--min-percent must be between 0 and 100, not {}",
                self.min_percent
            );
        }
        if self.depth == Some(0) {
            bail!("--depth must be at least 1");
        }
        if self.max_stack == 0 {
            bail!("--max-stack must be at least 1");
        }
        for b in &self.back_traces {
            pattern::parse(b)
                .map_err(|e| anyhow::anyhow!("bad --back-trace pattern {b:?}: {e}"))?;
        }
        Ok(())
    }

    fn render_options(&self, profile: &Profile) -> Result<RenderOptions> {
        let mut back_traces = Vec::new();
        for b in &self.back_traces {
            let p = pattern::parse(b)
                .map_err(|e| anyhow::anyhow!("bad --back-trace pattern {b:?}: {e}"))?;
            let ids = profile.methods_matching(|m| p.matches(&m.class, &m.name, &m.descriptor));
            if ids.is_empty() {
                eprintln!("sprig: warning: --back-trace {b} matches no profiled method");
            }
            back_traces.extend(ids);
        }
        Ok(RenderOptions {
            min_percent: self.min_percent,
            max_depth: self.depth,
            max_stack: self.max_stack,
            weight: self.weight,
            merged: self.merged,
            hot_spots: self.hot_spots,
            back_traces,
            verbose: self.verbose,
            ..RenderOptions::default()
        })
    }
}

/// `sprig diff --weight`'s value.
fn parse_diff_weight(s: &str) -> Result<DiffWeight, String> {
    s.parse::<DiffWeight>()
}

/// `--weight`'s value.
fn parse_metric(s: &str) -> Result<Metric, String> {
    s.parse::<Metric>().map_err(|e| e.to_string())
}

fn is_snapshot_path(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "sprig")
}

/// Writes `profile` to `output` (stdout when None): a snapshot for a
/// `.sprig` file, else the report in the chosen format. `warned_live`: the
/// agent's warnings went to stderr while profiling; a text report on the
/// same terminal then only counts them.
pub fn write(
    profile: &Profile,
    view: &ViewArgs,
    output: Option<&Path>,
    warned_live: bool,
) -> Result<()> {
    write_sections(
        profile,
        view,
        &Sections::default(),
        output,
        warned_live,
        Console::Stdout,
    )
}

/// [`write`] with the sections the command line chose.
pub fn write_sections(
    profile: &Profile,
    view: &ViewArgs,
    sections: &Sections,
    output: Option<&Path>,
    warned_live: bool,
    console: Console,
) -> Result<()> {
    let (view, tree) = sections.apply(view);
    let view = &view;
    let shape = Shape {
        tree,
        signatures: sections.signatures,
        width: view.width_for(match (output, console) {
            (Some(_), _) => None,
            (None, Console::Stdout) => Some(1),
            (None, Console::Stderr) => Some(2),
        }),
    };
    match output {
        Some(path) => {
            let file = std::fs::File::create(path)
                .with_context(|| format!("cannot write {}", path.display()))?;
            let mut f = std::io::BufWriter::new(file);
            if is_snapshot_path(path) {
                profile.write_snapshot(&mut f)?;
            } else {
                render(profile, view, shape, &mut f, false)?;
            }
            f.flush()
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        None => {
            use std::io::IsTerminal;
            let terminal = match console {
                Console::Stdout => std::io::stdout().is_terminal(),
                Console::Stderr => std::io::stderr().is_terminal(),
            };
            if view.format.report().is_binary() && terminal {
                bail!(
                    "--format {} is binary: write it to a file with -o FILE, or redirect {}",
                    view.format
                        .to_possible_value()
                        .map_or_else(String::new, |v| v.get_name().to_owned()),
                    match console {
                        Console::Stdout => "stdout",
                        Console::Stderr => "stderr",
                    }
                );
            }
            let shown = warned_live && terminal && std::io::stderr().is_terminal();
            match console {
                Console::Stdout => {
                    let mut out = std::io::stdout().lock();
                    render(profile, view, shape, &mut out, shown)?;
                    out.flush()?;
                }
                Console::Stderr => {
                    let mut out = std::io::stderr().lock();
                    render(profile, view, shape, &mut out, shown)?;
                    out.flush()?;
                }
            }
        }
    }
    Ok(())
}

/// Where a report without `-o` goes: stdout, or stderr for `sprig run`,
/// whose stdout is the application's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Console {
    Stdout,
    Stderr,
}

/// The text report's shape beyond [`ViewArgs`] ([`Sections`]).
#[derive(Clone, Copy)]
struct Shape {
    tree: bool,
    signatures: bool,
    /// Columns the text report fits in.
    width: usize,
}

/// Columns of a report when nothing says otherwise: not a terminal.
pub const DEFAULT_WIDTH: usize = 120;

impl ViewArgs {
    /// The columns a text report or live view fits in: `--width`, else
    /// those of the terminal on `fd` when it is one, else 120.
    pub fn width_for(&self, fd: Option<i32>) -> usize {
        self.width.map(usize::from).unwrap_or_else(|| {
            fd.and_then(sprig::terminal_columns)
                .unwrap_or(DEFAULT_WIDTH)
        })
    }
}

fn render(
    profile: &Profile,
    view: &ViewArgs,
    shape: Shape,
    out: &mut dyn Write,
    agent_warnings_shown: bool,
) -> Result<()> {
    let grouped;
    let profile = if view.threads || profile.virtual_threads() < 2 {
        profile
    } else {
        let mut p = profile.clone();
        p.group_virtual();
        grouped = p;
        &grouped
    };
    let mut opts = view.render_options(profile)?;
    opts.agent_warnings_shown = agent_warnings_shown;
    opts.tree = shape.tree;
    opts.signatures = shape.signatures;
    opts.width = shape.width;
    view.format
        .report()
        .renderer()
        .render(profile, &opts, out)?;
    Ok(())
}

impl Format {
    /// The report format this option names.
    fn report(self) -> sprig_callgraph::Format {
        match self {
            Format::Text => sprig_callgraph::Format::Text,
            Format::Json => sprig_callgraph::Format::Json,
            Format::Collapsed => sprig_callgraph::Format::Collapsed,
            Format::Flamegraph => sprig_callgraph::Format::Flamegraph,
            Format::Pprof => sprig_callgraph::Format::Pprof,
        }
    }
}

/// Reads a `.sprig` snapshot.
pub fn read_snapshot(path: &Path) -> Result<Profile> {
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut r = std::io::BufReader::new(file);
    Profile::read_snapshot(&mut r)
        .with_context(|| format!("{} is not a readable sprig snapshot", path.display()))
}

/// `sprig report FILE.sprig`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// A snapshot written by `sprig profile ... -o FILE.sprig`.
    pub snapshot: PathBuf,

    #[command(flatten)]
    pub view: ViewArgs,

    #[command(flatten)]
    pub sections: Sections,

    /// Write the report to FILE instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

pub fn report(args: &ReportArgs) -> Result<()> {
    args.view.validate()?;
    let profile = read_snapshot(&args.snapshot)?;
    write_sections(
        &profile,
        &args.view,
        &args.sections,
        args.output.as_deref(),
        false,
        Console::Stdout,
    )
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum DiffFormat {
    /// The merged trees side by side with the change per node.
    Text,
    /// `frame;frame self_a self_b` lines (differential flame graphs).
    Collapsed,
    /// An interactive differential flame graph (HTML): widths from B,
    /// red where B is slower, blue where faster (by time or by calls).
    Flamegraph,
}

/// `sprig diff A.sprig B.sprig`.
#[derive(Args, Debug)]
pub struct DiffArgs {
    /// The baseline snapshot (with --overlap: any sprig output or a .jfr).
    pub a: PathBuf,
    /// The snapshot compared against it.
    pub b: PathBuf,
    /// Print Arnold and Grove's overlap of A and B instead: the sum over
    /// methods of the smaller of their two self shares (100% for the same
    /// distribution of time, 0% for nothing in common), and the methods
    /// that differ most. A and B may each be a `.sprig` snapshot, the JSON
    /// report of `sprig profile` or `sprig sample`, or a JFR recording
    /// (`.jfr`: its jdk.ExecutionSample events, threads in Java code, read
    /// with $JAVA_HOME/bin/jfr: compare them with a `sprig sample
    /// --java-only` report). (`crate::overlap`; `main` dispatches it.)
    #[arg(long)]
    pub overlap: bool,
    /// With --overlap: compare threads in native methods instead: a
    /// `.jfr`'s jdk.NativeMethodSample events (threads in native code, on
    /// the CPU or blocked in it) and a `sprig sample` JSON report's CPU
    /// samples in native methods (its methods' `native_self`).
    #[arg(long)]
    pub native: bool,
    #[arg(long, value_enum, default_value_t = DiffFormat::Text)]
    pub format: DiffFormat,
    /// Hide nodes below this percentage of the roots' time.
    #[arg(long, value_name = "PCT", default_value_t = 0.0)]
    pub min_percent: f64,
    /// Show at most this many levels.
    #[arg(long, value_name = "N")]
    pub depth: Option<usize>,
    /// Collapsed and flamegraph: at most N frames in one stack; deeper
    /// frames are cut and shown as one `[truncated K frames]` frame.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_STACK)]
    pub max_stack: usize,
    /// Collapsed and flamegraph: what a frame's value (its width) counts:
    /// `time` (the default), or of allocation profiles `objects` or
    /// `bytes` allocated (exact, `--alloc`), `sampled-bytes` (estimates
    /// from allocation samples, `--alloc-interval`) or `live-bytes`
    /// (estimates of the bytes alive at the end, `--alloc=live`). The text
    /// shows each of them as columns where either side has them.
    #[arg(long, value_name = "METRIC", default_value = "time", value_parser = parse_diff_weight)]
    pub weight: DiffWeight,
    /// Text: compare the runs' totals instead of each side's calls and
    /// time per root call (the default, right when the runs made
    /// different numbers of root calls).
    #[arg(long)]
    pub totals: bool,
    /// Text: write every method with its parameter types (by default only
    /// overloads that would otherwise read the same get them).
    #[arg(long)]
    pub signatures: bool,
    /// Text: fit lines in COLS columns (default: the terminal's width, or
    /// 120 into a file or a pipe).
    #[arg(long, value_name = "COLS", value_parser = clap::value_parser!(u16).range(40..=1000))]
    pub width: Option<u16>,
    /// Write the comparison to FILE instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Writes what `render` produces to `output`, or to stdout when None.
pub fn write_to(
    output: Option<&Path>,
    render: impl FnOnce(&mut dyn Write) -> Result<()>,
) -> Result<()> {
    match output {
        Some(path) => {
            let file = std::fs::File::create(path)
                .with_context(|| format!("cannot write {}", path.display()))?;
            let mut f = std::io::BufWriter::new(file);
            render(&mut f)?;
            f.flush()
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        None => {
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            render(&mut out)?;
            out.flush()?;
        }
    }
    Ok(())
}

pub fn diff(args: &DiffArgs) -> Result<()> {
    if !(args.min_percent.is_finite() && (0.0..=100.0).contains(&args.min_percent)) {
        bail!(
            "--min-percent must be between 0 and 100, not {}",
            args.min_percent
        );
    }
    if args.max_stack == 0 {
        bail!("--max-stack must be at least 1");
    }
    let a = read_snapshot(&args.a)?;
    let b = read_snapshot(&args.b)?;
    let d = sprig_callgraph::diff(&a, &b);
    if args.format != DiffFormat::Text {
        let has = |f: fn(&sprig_callgraph::cct::diff::Side) -> u64| {
            d.nodes
                .iter()
                .any(|n| n.a.is_some_and(|s| f(&s) > 0) || n.b.is_some_and(|s| f(&s) > 0))
        };
        let missing = match args.weight {
            DiffWeight::Time => None,
            DiffWeight::Objects | DiffWeight::Bytes => {
                (!has(|s| s.alloc_objects)).then_some("allocations (profile with --alloc)")
            }
            DiffWeight::SampledBytes => (!d.sampled.iter().any(|&x| x))
                .then_some("allocation samples (profile with --alloc)"),
            DiffWeight::LiveBytes => {
                (!d.live.iter().any(|&x| x)).then_some("live objects (profile with --alloc=live)")
            }
        };
        if let Some(what) = missing {
            bail!(
                "--weight {}: neither profile has {what}",
                args.weight.name()
            );
        }
    }
    let d = d.weighed_by(args.weight);
    let opts = RenderOptions {
        min_percent: args.min_percent,
        max_depth: args.depth,
        max_stack: args.max_stack,
        diff_totals: args.totals,
        signatures: args.signatures,
        width: args.width.map(usize::from).unwrap_or_else(|| {
            args.output
                .is_none()
                .then(|| sprig::terminal_columns(1))
                .flatten()
                .unwrap_or(DEFAULT_WIDTH)
        }),
        ..RenderOptions::default()
    };
    write_to(args.output.as_deref(), |out| {
        match args.format {
            DiffFormat::Text => DiffText.render(&d, &opts, out)?,
            DiffFormat::Collapsed => DiffCollapsed.render(&d, &opts, out)?,
            DiffFormat::Flamegraph => DiffFlameGraph.render(&d, &opts, out)?,
        }
        Ok(())
    })
}
