//! The JSON report of `sprig sample`:
//!
//! ```text
//! {"version":1, "view":"cpu"|"wall", "samples":N, "wall_samples":N, "cpu_samples":N,
//!  "rounds":N, "interval_ms":F, "duration_ms":N, "truncated":N, "cost_ns":N,
//!  "source":"timer"|"jvmti"|"" (the agent's stack source; "" when not said),
//!  "native_cpu_samples":N (samples on the CPU in a native method),
//!  "java_only":B (the CPU view leaves the native ones out: --java-only),
//!  "sprig_cpu":{"handler_ns","threads_ns","target_cpu_ns","share"} or null
//!  (the CPU time sprig's signal handler and threads took in the target
//!  while it sampled, the target's, and sprig's share of it),
//!  "threads":[{"id","name","samples","wall_samples","cpu_samples","tree":[NODE] (with --threads)}],
//!  "methods":[{"class","method","self","total",
//!              "native_self" (its CPU samples as the leaf in a native method)}],
//!  "tree":[NODE],
//!  "suggested_roots":[{"class","method","root","share","window_shares":[F],
//!                      "activations","activations_per_s","time_ns",
//!                      "predicted_overhead":{"estimate":true,"basis":"edges"|"none",
//!                                            "sampled_pct","exact_pct","calls_per_s_est",
//!                                            "calls_per_cpu_s_est" (each null with basis "none"),
//!                                            "note","sampled_pair_ns","exact_pair_ns",
//!                                            "pair_source":"benchmark","burst_path_ns"
//!                                            (null with basis "none"; the path null
//!                                            when unmeasured)},
//!                      "command","kind":"unit"|"part"|"loop","same_time":[ROOT]}],
//!  "edges":{"bursts","samples","named","dropped","effective_ms","cost_ns","classes","methods",
//!           "intervals","interval_cpu_ms","app_cpu_per_s","path_ns","interval_app_cpu_ms",
//!           "edges":[{"caller","callee","samples","calls_per_s_est"}]} (with --edges)}
//! NODE = {"class","method","self","total","activations","children":[NODE]}
//! ```
//!
//! `samples`, `self` and `total` count the samples of the view; `tree` is
//! merged over threads, each thread's own under `threads` with
//! `--threads`. A node's `activations` are Whaley's edge counts: the
//! times its frame was seen newly entered, a lower bound on its calls.
//! Methods are listed by self then total samples. A suggested root's
//! predicted overhead is an estimate that rests on the call-edge bursts
//! (`suggest.rs`); without `--edges` its figures are null and its note
//! says "unknown (run with --edges)". A suggestion's `kind` is its tier
//! and `same_time` the rest of its delegation run (`suggest.rs`).

use std::io::{self, Write};

use super::build::StackProfile;
use super::convert::{ConvertOptions, merged_with};
use super::edges::EdgeProfile;
use super::suggest::{SAMPLED_PAIR_NS, SuggestedRoot, app_cpu_per_s};
use crate::profile::{Metric, Profile, Tree};
use crate::report::json::write_str;

/// Writes the report; `threads`: each thread's tree too; `pid`: for the
/// suggested commands.
pub fn write_json(
    p: &StackProfile,
    opts: ConvertOptions,
    threads: bool,
    suggestions: &[SuggestedRoot],
    pid: u32,
    out: &mut dyn Write,
) -> io::Result<()> {
    write_json_with_edges(p, opts, threads, suggestions, None, pid, out)
}

/// [`write_json`] with the call edges of `--edges`.
pub fn write_json_with_edges(
    p: &StackProfile,
    opts: ConvertOptions,
    threads: bool,
    suggestions: &[SuggestedRoot],
    edges: Option<&EdgeProfile>,
    pid: u32,
    out: &mut dyn Write,
) -> io::Result<()> {
    let view = opts.view;
    let (profile, activations) = p.converted(opts);
    write!(
        out,
        "{{\"version\":1,\"view\":\"{}\",\"samples\":{},\"wall_samples\":{},\"cpu_samples\":{},\"rounds\":{},\"interval_ms\":{},\"duration_ms\":{},\"truncated\":{},\"cost_ns\":{},\"source\":\"{}\",\"native_cpu_samples\":{},\"java_only\":{},\"sprig_cpu\":{},\n\"threads\":[",
        view.name(),
        p.samples(view),
        p.wall_samples,
        p.cpu_samples,
        p.rounds,
        p.interval_ns as f64 / 1e6,
        p.span_ns() / 1_000_000,
        p.truncated,
        p.cost_ns,
        match p.source {
            Some(sprig_wire::control::StackSource::Timer) => "timer",
            Some(sprig_wire::control::StackSource::Jvmti) => "jvmti",
            None => "",
        },
        p.native_cpu_samples,
        p.java_only,
        match p.own_cpu {
            Some(o) => format!(
                "{{\"handler_ns\":{},\"threads_ns\":{},\"target_cpu_ns\":{},\"share\":{:.6}}}",
                o.handler_ns,
                o.threads_ns,
                o.target_cpu_ns,
                o.share()
            ),
            None => "null".to_owned(),
        }
    )?;
    for (i, ((t, tp), acts)) in p
        .threads
        .values()
        .zip(&profile.threads)
        .zip(&activations)
        .enumerate()
    {
        if i > 0 {
            out.write_all(b",")?;
        }
        write!(out, "\n {{\"id\":{},\"name\":", t.java_id)?;
        write_str(out, &t.name)?;
        write!(
            out,
            ",\"samples\":{},\"wall_samples\":{},\"cpu_samples\":{},\"native_cpu_samples\":{}",
            match view {
                super::View::Wall => t.wall_samples,
                super::View::Cpu => t.cpu_samples,
            },
            t.wall_samples,
            t.cpu_samples,
            t.native_cpu_samples
        )?;
        if threads {
            out.write_all(b",\"tree\":")?;
            write_tree(&profile, &tp.tree, acts, out)?;
        }
        out.write_all(b"}")?;
    }
    out.write_all(b"],\n\"methods\":[")?;
    for (i, (m, s, t)) in p.hot_methods(view).into_iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        let info = p.method(m);
        out.write_all(b"\n {\"class\":")?;
        write_str(out, &info.class)?;
        out.write_all(b",\"method\":")?;
        write_str(out, &info.name)?;
        out.write_all(b",\"descriptor\":")?;
        write_str(out, &info.descriptor)?;
        let native = p.counts.get(&m).map_or(0, |c| c.native_self);
        write!(
            out,
            ",\"self\":{s},\"total\":{t},\"native_self\":{native}}}"
        )?;
    }
    out.write_all(b"],\n\"tree\":")?;
    let (merged, merged_acts) = merged_with(&profile, &activations);
    write_tree(&profile, &merged, &merged_acts, out)?;
    out.write_all(b",\n\"suggested_roots\":[")?;
    for (i, r) in suggestions.iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        let info = p.method(r.method);
        out.write_all(b"\n {\"class\":")?;
        write_str(out, &info.class)?;
        out.write_all(b",\"method\":")?;
        write_str(out, &info.name)?;
        out.write_all(b",\"root\":")?;
        write_str(out, &r.pattern)?;
        write!(out, ",\"share\":{:.4},\"window_shares\":[", r.share)?;
        for (j, w) in r.window_shares.iter().enumerate() {
            if j > 0 {
                out.write_all(b",")?;
            }
            write!(out, "{w:.4}")?;
        }
        write!(
            out,
            "],\"activations\":{},\"activations_per_s\":{:.1},\"time_ns\":{},\"predicted_overhead\":{{\"estimate\":true,\"basis\":\"{}\",\"sampled_pct\":{},\"exact_pct\":{},\"calls_per_s_est\":{},\"calls_per_cpu_s_est\":{},\"note\":",
            r.activations,
            r.activations_per_sec,
            r.time_ns,
            if r.exact_pct.is_some() {
                "edges"
            } else {
                "none"
            },
            num(r.sampled_pct, 3),
            num(r.exact_pct, 3),
            num(r.edge_calls_per_sec, 1),
            num(r.edge_calls_per_cpu_s, 1),
        )?;
        write_str(
            out,
            if r.exact_pct.is_some() {
                "estimated from the calls per CPU second the call-edge bursts measured below the root"
            } else {
                "unknown (run with --edges)"
            },
        )?;
        if r.exact_pct.is_some() {
            let (exact_pair, source) = EdgeProfile::exact_pair(edges);
            write!(
                out,
                ",\"sampled_pair_ns\":{SAMPLED_PAIR_NS:.1},\"exact_pair_ns\":{exact_pair:.1},\"pair_source\":\"{source}\",\"burst_path_ns\":{}",
                num(edges.map(|e| e.path_ns as f64).filter(|&n| n > 0.0), 0)
            )?;
        } else {
            out.write_all(
                b",\"sampled_pair_ns\":null,\"exact_pair_ns\":null,\"pair_source\":null,\"burst_path_ns\":null",
            )?;
        }
        out.write_all(b"},\"command\":")?;
        write_str(out, &profile_command(pid, &r.pattern))?;
        out.write_all(b",\"kind\":")?;
        write_str(out, r.kind.name())?;
        out.write_all(b",\"same_time\":[")?;
        for (j, o) in r.same_time.iter().enumerate() {
            if j > 0 {
                out.write_all(b",")?;
            }
            write_str(out, o)?;
        }
        out.write_all(b"]}")?;
    }
    out.write_all(b"]")?;
    if let Some(e) = edges {
        let app_cpu = app_cpu_per_s(p);
        write!(
            out,
            ",\n\"edges\":{{\"bursts\":{},\"samples\":{},\"named\":{},\"dropped\":{},\"effective_ms\":{:.3},\"cost_ns\":{},\"classes\":{},\"methods\":{},\"intervals\":{},\"interval_cpu_ms\":{:.3},\"app_cpu_per_s\":{:.3},\"path_ns\":{},\"interval_app_cpu_ms\":{:.3},\"counted\":{},\"counted_ms\":{:.3},\"counted_per_s\":{},\"edges\":[",
            e.bursts,
            e.samples,
            e.named(),
            e.dropped,
            e.effective_ns as f64 / 1e6,
            e.cost_ns,
            e.classes,
            e.methods,
            e.intervals,
            e.interval_cpu_ns as f64 / 1e6,
            app_cpu,
            e.path_ns,
            e.app_cpu_ns(e.intervals, e.interval_cpu_ns) as f64 / 1e6,
            e.counted,
            e.counted_ns as f64 / 1e6,
            num(e.counted_per_s(), 1)
        )?;
        for (i, row) in e.rows(app_cpu).iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            out.write_all(b"\n {\"caller\":")?;
            write_str(out, &row.caller)?;
            out.write_all(b",\"callee\":")?;
            write_str(out, &row.callee)?;
            write!(
                out,
                ",\"samples\":{},\"calls_per_s_est\":{:.1}}}",
                row.samples, row.calls_per_s_est
            )?;
        }
        out.write_all(b"]}")?;
    }
    out.write_all(b"}\n")
}

/// `x` with `decimals`, or `null`.
fn num(x: Option<f64>, decimals: usize) -> String {
    x.filter(|v| v.is_finite())
        .map_or_else(|| "null".to_owned(), |v| format!("{v:.decimals$}"))
}

/// The `sprig profile` command for a suggested root, ready to paste into
/// a POSIX shell (the pattern single-quoted). A root in one of the JDK's
/// tools (`com.sun.tools.javac.*`) gets `--include` of that tool's
/// packages: `sprig profile` leaves the JDK's packages uninstrumented
/// unless asked, so without it only the root itself would be profiled.
pub fn profile_command(pid: u32, pattern: &str) -> String {
    let quote = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
    let mut cmd = format!("sprig profile {pid} --root {}", quote(pattern));
    let class = pattern.split("::").next().unwrap_or(pattern);
    // The tool's package: `javac` of `com.sun.tools.javac.jvm.Gen`, none
    // for a class right under `com.sun.tools`.
    if let Some((tool, _)) = class
        .strip_prefix("com.sun.tools.")
        .and_then(|rest| rest.split_once('.'))
        .filter(|(t, _)| !t.is_empty())
    {
        cmd.push_str(&format!(
            " --include {}",
            quote(&format!("com.sun.tools.{tool}.**"))
        ));
    }
    cmd
}

/// `[NODE, ...]` of one tree, children by total samples then by name,
/// without recursion.
fn write_tree(
    profile: &Profile,
    tree: &Tree,
    activations: &[u64],
    out: &mut dyn Write,
) -> io::Result<()> {
    let w = profile.weights(tree, Metric::Samples);
    let order = |ids: &[u32]| {
        let mut v: Vec<u32> = ids.to_vec();
        v.sort_by(|&a, &b| {
            w[b as usize].total.cmp(&w[a as usize].total).then_with(|| {
                profile
                    .method(tree.nodes[a as usize].method)
                    .cmp(&profile.method(tree.nodes[b as usize].method))
            })
        });
        v
    };
    enum Step {
        Open(u32, bool),
        Close,
    }
    out.write_all(b"[")?;
    let roots = order(&tree.roots);
    let mut stack: Vec<Step> = roots
        .iter()
        .enumerate()
        .rev()
        .map(|(i, &r)| Step::Open(r, i == 0))
        .collect();
    while let Some(step) = stack.pop() {
        match step {
            Step::Close => out.write_all(b"]}")?,
            Step::Open(n, first) => {
                if !first {
                    out.write_all(b",")?;
                }
                let node = &tree.nodes[n as usize];
                let info = profile.method(node.method);
                out.write_all(b"{\"class\":")?;
                write_str(out, &info.class)?;
                out.write_all(b",\"method\":")?;
                write_str(out, &info.name)?;
                let x = w[n as usize];
                write!(
                    out,
                    ",\"self\":{},\"total\":{},\"activations\":{},\"children\":[",
                    x.own,
                    x.total,
                    activations.get(n as usize).copied().unwrap_or(0)
                )?;
                stack.push(Step::Close);
                let kids: Vec<u32> = node
                    .children
                    .iter()
                    .copied()
                    .filter(|&c| c > n && (c as usize) < tree.nodes.len())
                    .collect();
                for (i, &c) in order(&kids).iter().enumerate().rev() {
                    stack.push(Step::Open(c, i == 0));
                }
            }
        }
    }
    out.write_all(b"]")
}
