//! The workloads' definitions: what each runs, its iterations and its
//! rows (the roots profiled, one row each).

use crate::Ctx;
use crate::env::{extract, src_zip};
use anyhow::{Result, bail};
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

impl WorkloadDef {
    /// The row labelled `label`.
    pub fn root(&self, label: &str) -> anyhow::Result<&RootDef> {
        self.roots
            .iter()
            .find(|r| r.label == label)
            .ok_or_else(|| anyhow::anyhow!("no such row"))
    }
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
