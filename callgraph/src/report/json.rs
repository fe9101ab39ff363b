//! JSON report, schema version 1 (fields may be added, never renamed):
//!
//! ```text
//! {"version":1,
//!  "target":{"pid","jvm"},
//!  "stats":{"events","instrumented_methods","called_methods","lost_events","duration_ms","reset_after_ms",
//!           "instrumented_classes","failed_classes","threads","virtual_threads","redefinition_batches",
//!           "redefinition_ms","reveal_ms",
//!           "revelation":{"revealed_by":{kind:methods},"scanned","reachable",
//!                         "reachable_unloaded","classes_mirrored","unmodifiable_skipped",
//!                         "reflective_sites","dormant","activated_in_place",
//!                         "trivial_skipped"} | null},
//!  "calibration":{"inner_ns","outer_ns"} | null,
//!  "probe_cost":{"pair_ns","source","calls_per_root_call","per_root_call_ns","in_latencies"} | null,
//!  "cost":{"measured","class","method","recorded_calls","recorded_p50_ns","silent_calls",
//!          "silent_p50_ns","ratio","probe_share_percent","large"} | null,
//!  "threads":[{"id","name","roots":[NODE]}]}
//! NODE = {"class","method","descriptor","calls","total_ns","self_ns","children":[NODE]}
//! ```
//!
//! `total_ns`/`self_ns` are exact (adjust-time and calibrated probe cost
//! subtracted). Added fields: top level `ticks_per_sec`, `clock`, `warnings`,
//! `hot_spots` (when asked for) and `merged` (when asked for); per thread
//! `index` (sprig's thread index; `id` is the Java thread id), `virtual`
//! (how many virtual threads it stands for: 0 for a platform thread, N for
//! `virtual threads (N)`, the virtual threads merged) and `bursts`
//! (`{"used","rejected","min_pair_ns","median_pair_ns","max_pair_ns"}`: the
//! thread's in-session calibration bursts and the probe pair they measured,
//! zeros without any); per node
//! `raw_total_ns`, `adjust_ns`, `incomplete`, `probe_ns` (the calibrated
//! probe cost of the subtree before any node is clamped at zero:
//! `raw_total_ns - adjust_ns - probe_ns` is the exact total unclamped,
//! negative where the calibration took out more than was measured).
//!
//! Timing modes: top level `timing` (`"exact"` or `"sampled"`); on each
//! root node `latency` (`{"count","min_ns","p50_ns","p90_ns","p99_ns",
//! "max_ns"}`: the root's complete calls, each exit minus entry minus the
//! profiler's waits inside, in exact mode minus the probe cost too, so the
//! calls add up to `total_ns`), in both modes. In sampled mode `total_ns`
//! and `self_ns` are the sampled times (`raw_total_ns` is measured on
//! roots only, `probe_ns` is 0), and each node adds `samples` (behind
//! `self_ns`), `total_samples` (behind `total_ns`), `self_bound_ns` and
//! `total_bound_ns` (95% bounds, "± x"); each thread (and `merged`) adds
//! `samples` (`{"credited","outside","outside_ns","late","unmatched"}`).
//! Windows timing (`timing` is `"sampled"`) adds top level `windows`
//! (`{"counting_ms","silent_ms","interval_us","counted_root_calls",
//! "silent_root_calls","scale","samples","samples_outside","source","samples_dropped",
//! "samples_in_probes","silence","switches"}`; `samples_in_probes`:
//! samples in sprig's own probes, not credited; `silence`: `"dormant"` or
//! `"original"`; `switches`: with original-bytes silence,
//! `{"to_original","to_instrumented","classes","failed","ns","max_ns",
//! "cut"}`, the redefinitions of the switches, else null): calls are per counted root call, `scale` takes them to every root call, and the
//! root latencies come from the silent root calls.
//!
//! `--locks`: each wait is a row of its own among a node's children
//! (`"class":""`, `"method":"(blocked on pkg.Lock)"`, `"(waiting on ..)"`,
//! `"(parked: ..)"`, `"(sleeping)"`, `"(GC pause)"`; `calls` counts the
//! waits), and a node with such rows adds `contention`
//! (`[{"monitor","kind","count","blocked_ns"}]`, `blocked_ns` measured;
//! a contended enter's or a park's entry adds `owners`,
//! `[{"thread","context","waits","blocked_ns"}]`: who held the monitor or
//! the `java.util.concurrent` lock when the waits began and where, its
//! innermost frames outside the JDK).
//! The top level adds `locks`, the lock view over every thread:
//! `[{"monitor","kind","blocked_ns","waits","waiters":[{"context":
//! ["pkg.C.m", .. out to the root],"waits","blocked_ns"}],"owners":[..]}]`,
//! per kind and monitor class, the longest first.
//! Allocations (`--alloc`): a node whose own code allocated adds
//! `allocations` (`[{"class","count","bytes"}]`: per class, Java source
//! names such as `int[]` and `pkg.Outer$Inner`, most bytes first; exact
//! counts, bytes as GetObjectSize gives them). Sampled allocations
//! (`--alloc-interval`): a node open when the JVM sampled allocations
//! adds `sampled_allocations` (`[{"class","samples","bytes_est",
//! "probed_samples","probed_bytes_est"}]`: estimates of what its own code
//! and the unprofiled code below it allocated, most bytes first; the
//! `probed_` figures count the samples whose allocating frame was a method
//! the probes record, an allocation site the exact count sees too), and
//! the top level
//! `sampled_outside_roots` (`{"samples","bytes_est"}`), the samples taken
//! outside every root context (with `stacks_unkept`, those the agent kept
//! no stack for, when stacks came), and `sampled_outside_stacks`
//! (`[{"class","samples","bytes_est","truncated","frames":[{"class",
//! "method","descriptor"}, .. innermost first]}]`, most bytes first):
//! those samples by the allocating thread's stack and class.
//! With both `--alloc` and `--alloc-interval`, each `allocations` entry adds
//! the heap sampler's view of the same class on the same node:
//! `physical_samples`, `physical_estimate_bytes`, `expected_samples` (the
//! fewest samples the exact objects would have drawn on the heap, from an
//! upper bound of the interval read from the samples) and
//! `likely_scalar_replaced` (an inference from the two measurements: at
//! least 20 samples expected and an estimate under a tenth of the exact
//! bytes, the JIT likely removed the allocations by escape analysis).
//! Live objects (`--alloc=live`, estimates): a node with tagged samples
//! not freed adds `live` (`{"bytes","objects","samples"}`), and the top
//! level `live` (`{"estimate":true,"lost_frees","now":{..},"gcs":[..]}`):
//! `now` and each garbage collection's point (`gc`, the collections
//! finished in the session then) hold `bytes`, `objects` and `rows`
//! (`[{"context":["pkg.C.m", .. root first],"class","bytes","objects",
//! "samples"}]`, most bytes first, at most 20; `now`'s rows add
//! `growth_bytes`, the change over the last 3 collections).
//!
//! Written by hand, one node per line, indentation capped so a 10k-deep
//! recursion stays a file of reasonable size. No recursion in the writer.

use super::view::{hot_spots, tree_view};
use super::{Render, RenderOptions};
use crate::profile::{Node, Profile, SampleCounts, Timing, Tree, sample_bound_ns, ticks_to_ns};
use std::io::{self, Write};

const MAX_INDENT: usize = 32;

pub struct Json;

/// Writes `s` as a JSON string literal. Every control character (C0, DEL
/// and C1) is escaped, so the JSON is safe to print on a terminal too.
pub fn write_str(out: &mut dyn Write, s: &str) -> io::Result<()> {
    out.write_all(b"\"")?;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        let esc: Option<&[u8]> = match c {
            '"' => Some(b"\\\""),
            '\\' => Some(b"\\\\"),
            '\n' => Some(b"\\n"),
            '\r' => Some(b"\\r"),
            '\t' => Some(b"\\t"),
            '\u{8}' => Some(b"\\b"),
            '\u{c}' => Some(b"\\f"),
            _ => None,
        };
        if esc.is_none() && !c.is_control() {
            continue;
        }
        out.write_all(&s.as_bytes()[start..i])?;
        match esc {
            Some(e) => out.write_all(e)?,
            None => write!(out, "\\u{:04x}", c as u32)?,
        }
        start = i + c.len_utf8();
    }
    out.write_all(&s.as_bytes()[start..])?;
    out.write_all(b"\"")
}

/// A float as a JSON number (`null` when not finite).
fn num_f64(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "null".to_owned()
    }
}

fn indent(out: &mut dyn Write, depth: usize) -> io::Result<()> {
    write!(out, "\n{:1$}", "", 2 * depth.min(MAX_INDENT))
}

/// The `"samples":{...},` object of a thread (sampled mode).
fn sample_counts(p: &Profile, c: &SampleCounts, out: &mut dyn Write) -> io::Result<()> {
    write!(
        out,
        "\"samples\":{{\"credited\":{},\"outside\":{},\"outside_ns\":{},\"late\":{},\"unmatched\":{}}},",
        c.credited,
        c.outside,
        ticks_to_ns(c.outside_ticks, p.ticks_per_sec),
        c.late,
        c.unmatched
    )
}

/// `"contention":[{"monitor","kind","count","blocked_ns"}],` of a node
/// with waits among its children (`--locks`), one entry per row: the
/// monitor's class (empty for a sleep or a GC pause), the kind
/// (`blocked`, `waiting`, `parked`, `sleeping`, `gc`), how many waits
/// and their measured length. Nothing for a node without.
fn contention(p: &Profile, tree: &Tree, n: &Node, out: &mut dyn Write) -> io::Result<()> {
    let mut first = true;
    for &c in &n.children {
        let Some(k) = tree.nodes.get(c as usize) else {
            continue;
        };
        let Some((kind, _)) = sprig_wire::wait_row(k.method) else {
            continue;
        };
        out.write_all(if first { b"\"contention\":[" } else { b"," })?;
        first = false;
        let m = p.method(k.method);
        out.write_all(b"{\"monitor\":")?;
        write_str(out, m.monitor().unwrap_or(""))?;
        write!(
            out,
            ",\"kind\":\"{}\",\"count\":{},\"blocked_ns\":{}",
            kind.name(),
            k.calls,
            ticks_to_ns(k.total_ticks, p.ticks_per_sec)
        )?;
        if !k.owners.is_empty() {
            out.write_all(b",\"owners\":[")?;
            for (i, o) in k.owners.iter().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                owner(
                    p,
                    o.owner,
                    o.count,
                    ticks_to_ns(o.ticks, p.ticks_per_sec),
                    out,
                )?;
            }
            out.write_all(b"]")?;
        }
        out.write_all(b"}")?;
    }
    if !first {
        out.write_all(b"],")?;
    }
    Ok(())
}

/// `{"thread","context","waits","blocked_ns"}` of one owner of a
/// contended monitor.
fn owner(p: &Profile, id: u32, waits: u64, ns: u64, out: &mut dyn Write) -> io::Result<()> {
    let info = p.owners.get(&id).cloned().unwrap_or_default();
    out.write_all(b"{\"thread\":")?;
    write_str(out, &info.thread)?;
    out.write_all(b",\"context\":")?;
    write_str(out, &info.context)?;
    write!(out, ",\"waits\":{waits},\"blocked_ns\":{ns}}}")
}

/// `"context":[...]`, the methods of a context as `class.method`, in the
/// order of `path`.
fn context(p: &Profile, path: &[u32], out: &mut dyn Write) -> io::Result<()> {
    out.write_all(b"\"context\":[")?;
    for (i, &mid) in path.iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        let m = p.method(mid);
        write_str(out, &format!("{}.{}", m.class, m.name))?;
    }
    out.write_all(b"]")
}

/// `,"locks":[...]`, the lock view (`--locks`) over every thread, when
/// the profile holds waits: per kind and monitor class, the longest
/// first, the waits' count and time, the contexts that waited (methods
/// from the one that waited out to its root, `class.method`) and the
/// owners of contended monitors.
fn locks(p: &Profile, out: &mut dyn Write) -> io::Result<()> {
    let has_waits = p
        .threads
        .iter()
        .any(|t| t.tree.nodes.iter().any(|n| n.is_wait()));
    if !has_waits {
        return Ok(());
    }
    let merged = p.merged();
    out.write_all(b",")?;
    indent(out, 1)?;
    out.write_all(b"\"locks\":[")?;
    for (i, l) in crate::report::view::lock_view(p, &merged.tree)
        .iter()
        .enumerate()
    {
        if i > 0 {
            out.write_all(b",")?;
        }
        indent(out, 2)?;
        let m = p.method(l.row);
        let kind = sprig_wire::wait_row(l.row).map_or("", |(k, _)| k.name());
        out.write_all(b"{\"monitor\":")?;
        write_str(out, m.monitor().unwrap_or(""))?;
        write!(
            out,
            ",\"kind\":\"{kind}\",\"blocked_ns\":{},\"waits\":{},\"waiters\":[",
            l.ns, l.count
        )?;
        for (j, (path, count, ns)) in l.waiters.iter().enumerate() {
            if j > 0 {
                out.write_all(b",")?;
            }
            out.write_all(b"{")?;
            context(p, path, out)?;
            write!(out, ",\"waits\":{count},\"blocked_ns\":{ns}}}")?;
        }
        out.write_all(b"],\"owners\":[")?;
        for (j, &(id, count, ns)) in l.owners.iter().enumerate() {
            if j > 0 {
                out.write_all(b",")?;
            }
            owner(p, id, count, ns, out)?;
        }
        out.write_all(b"]}")?;
    }
    out.write_all(b"]")
}

/// Rows of a live point in the JSON report.
const LIVE_ROWS: usize = 20;

/// The top-level `live` member, with its comma.
fn live(p: &Profile, out: &mut dyn Write) -> io::Result<()> {
    let Some(l) = &p.live else {
        return Ok(());
    };
    let point =
        |g: &crate::profile::live::LiveGc, growth: bool, out: &mut dyn Write| -> io::Result<()> {
            write!(
                out,
                "{{\"gc\":{},\"bytes\":{},\"objects\":{},\"samples\":{},\"rows\":[",
                g.gc, g.total.bytes, g.total.objects, g.total.samples
            )?;
            for (i, r) in g.rows.iter().take(LIVE_ROWS).enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                out.write_all(b"{")?;
                let path = l.contexts.get(r.context as usize).map_or(&[][..], |c| c);
                context(p, path, out)?;
                out.write_all(b",\"class\":")?;
                write_str(out, &p.sampled_class(r.class))?;
                write!(
                    out,
                    ",\"bytes\":{},\"objects\":{},\"samples\":{}",
                    r.live.bytes, r.live.objects, r.live.samples
                )?;
                if growth && let Some(g) = l.growth(r.context, r.class) {
                    write!(out, ",\"growth_bytes\":{g}")?;
                }
                out.write_all(b"}")?;
            }
            out.write_all(b"]}")
        };
    write!(
        out,
        "\"live\":{{\"estimate\":true,\"lost_frees\":{},\"now\":",
        l.lost_frees
    )?;
    point(&l.now, true, out)?;
    out.write_all(b",\"gcs\":[")?;
    for (i, g) in l.series.iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        point(g, false, out)?;
    }
    out.write_all(b"]},")
}

/// Which tree [`roots`] writes: the thread's index (`None`: the merged
/// tree), its sample window, and the profile's
/// [`Profile::sampling_gauge`] (taken once per report).
struct Of {
    thread: Option<u32>,
    window: u64,
    gauge: Option<u64>,
}

/// The `"roots":[...]` array of one tree, `depth` = indentation of the key;
/// `of`: which tree, its samples' window (for the bounds) and the gauge.
fn roots(
    p: &Profile,
    tree: &Tree,
    of: &Of,
    opts: &RenderOptions,
    depth: usize,
    out: &mut dyn Write,
) -> io::Result<()> {
    let (thread, window) = (of.thread, of.window);
    let view = tree_view(p, tree, opts);
    out.write_all(b"\"roots\":[")?;
    // wrote[d]: the children array at level d already holds an element.
    let mut wrote: Vec<bool> = vec![false];
    for line in &view.lines {
        while wrote.len() > line.depth + 1 {
            wrote.pop();
            out.write_all(b"]}")?;
        }
        if let Some(w) = wrote.last_mut() {
            if *w {
                out.write_all(b",")?;
            }
            *w = true;
        }
        indent(out, depth + 1 + line.depth)?;
        let n = &tree.nodes[line.node as usize];
        let t = view.times[line.node as usize];
        let m = p.method(n.method);
        out.write_all(b"{\"class\":")?;
        write_str(out, &m.class)?;
        out.write_all(b",\"method\":")?;
        write_str(out, &m.name)?;
        out.write_all(b",\"descriptor\":")?;
        write_str(out, &m.descriptor)?;
        write!(
            out,
            ",\"calls\":{},\"total_ns\":{},\"self_ns\":{},\"raw_total_ns\":{},\"adjust_ns\":{},\"incomplete\":{},\"probe_ns\":{},",
            n.calls,
            t.total_ns,
            t.self_ns,
            t.raw_total_ns,
            t.adjust_ns,
            n.incomplete,
            t.probe_cost_ns
        )?;
        if p.timing == Timing::Sampled {
            write!(
                out,
                "\"samples\":{},\"total_samples\":{},\"self_bound_ns\":{},\"total_bound_ns\":{},",
                t.self_samples,
                t.total_samples,
                sample_bound_ns(t.self_samples, t.self_ns, window),
                sample_bound_ns(t.total_samples, t.total_ns, window)
            )?;
        }
        contention(p, tree, n, out)?;
        if let Some(l) = p.latency_ns(n) {
            write!(
                out,
                "\"latency\":{{\"count\":{},\"min_ns\":{},\"p50_ns\":{},\"p90_ns\":{},\"p99_ns\":{},\"max_ns\":{}}},",
                l.count, l.min_ns, l.p50_ns, l.p90_ns, l.p99_ns, l.max_ns
            )?;
        }
        if !n.allocs.is_empty() {
            out.write_all(b"\"allocations\":[")?;
            for (i, a) in p.node_allocs_physical(n, of.gauge).iter().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                out.write_all(b"{\"class\":")?;
                write_str(out, &a.class)?;
                write!(out, ",\"count\":{},\"bytes\":{}", a.count, a.bytes)?;
                if let Some(ph) = &a.physical {
                    write!(
                        out,
                        ",\"physical_samples\":{},\"physical_estimate_bytes\":{},\"expected_samples\":{},\"likely_scalar_replaced\":{}",
                        ph.samples,
                        ph.bytes_est,
                        num_f64((ph.expected_samples * 10.0).round() / 10.0),
                        ph.likely_scalar_replaced
                    )?;
                }
                out.write_all(b"}")?;
            }
            out.write_all(b"],")?;
        }
        if !n.sampled_allocs.is_empty() {
            out.write_all(b"\"sampled_allocations\":[")?;
            for (i, a) in p.node_sampled(n).iter().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                out.write_all(b"{\"class\":")?;
                write_str(out, &a.class)?;
                write!(
                    out,
                    ",\"samples\":{},\"bytes_est\":{},\"probed_samples\":{},\"probed_bytes_est\":{}}}",
                    a.samples, a.bytes_est, a.probed_samples, a.probed_bytes_est
                )?;
            }
            out.write_all(b"],")?;
        }
        if let Some(l) = thread.and_then(|t| p.live.as_ref()?.nodes.get(&(t, line.node))) {
            write!(
                out,
                "\"live\":{{\"bytes\":{},\"objects\":{},\"samples\":{}}},",
                l.bytes, l.objects, l.samples
            )?;
        }
        out.write_all(b"\"children\":[")?;
        wrote.push(false);
    }
    while wrote.len() > 1 {
        wrote.pop();
        out.write_all(b"]}")?;
    }
    out.write_all(b"]")
}

impl Render for Json {
    fn render(&self, p: &Profile, opts: &RenderOptions, out: &mut dyn Write) -> io::Result<()> {
        let gauge = p.sampling_gauge();
        out.write_all(b"{\"version\":1,")?;
        indent(out, 1)?;
        write!(out, "\"target\":{{\"pid\":{},\"jvm\":", p.target.pid)?;
        write_str(out, &p.target.jvm)?;
        out.write_all(b"},")?;
        indent(out, 1)?;
        let s = &p.stats;
        write!(
            out,
            "\"stats\":{{\"events\":{},\"instrumented_methods\":{},\"called_methods\":{},\"lost_events\":{},\"duration_ms\":{},\"reset_after_ms\":{},",
            s.events,
            s.instrumented_methods,
            s.called_methods,
            s.lost_events,
            s.duration_ms,
            s.reset_after_ms
        )?;
        write!(
            out,
            "\"instrumented_classes\":{},\"failed_classes\":{},\"threads\":{},\"virtual_threads\":{},\"redefinition_batches\":{},\"redefinition_ms\":{},\"reveal_ms\":{},\"revelation\":",
            s.instrumented_classes,
            s.failed_classes,
            s.threads.max(p.thread_count()),
            p.virtual_threads(),
            s.redefinition_batches,
            num_f64(s.redefinition_ns as f64 / 1e6),
            num_f64(s.reveal_ns as f64 / 1e6)
        )?;
        match &s.reveal {
            None => out.write_all(b"null")?,
            Some(r) => {
                out.write_all(b"{\"revealed_by\":{")?;
                for (i, (k, n)) in r.revealed_by.iter().enumerate() {
                    if i > 0 {
                        out.write_all(b",")?;
                    }
                    write_str(out, k)?;
                    write!(out, ":{n}")?;
                }
                write!(
                    out,
                    "}},\"scanned\":{},\"reachable\":{},\"reachable_unloaded\":{},\"classes_mirrored\":{},\"unmodifiable_skipped\":{},\"reflective_sites\":{},\"dormant\":{},\"activated_in_place\":{},\"trivial_skipped\":{}}}",
                    r.scanned,
                    r.reachable,
                    r.reachable_unloaded,
                    r.classes_mirrored,
                    r.unmodifiable_skipped,
                    r.reflective_sites,
                    r.dormant,
                    r.activated_in_place,
                    r.trivial_skipped
                )?;
            }
        }
        out.write_all(b"},")?;
        indent(out, 1)?;
        match p.calibration {
            Some(c) => write!(
                out,
                "\"calibration\":{{\"inner_ns\":{},\"outer_ns\":{}}},",
                num_f64(c.inner_ns),
                num_f64(c.outer_ns)
            )?,
            None => out.write_all(b"\"calibration\":null,")?,
        }
        indent(out, 1)?;
        match p.probe_cost() {
            Some(c) => write!(
                out,
                "\"probe_cost\":{{\"pair_ns\":{},\"source\":\"{}\",\"calls_per_root_call\":{},\
                 \"per_root_call_ns\":{},\"in_latencies\":{}}},",
                num_f64(c.pair_ns),
                c.source(),
                num_f64(c.calls_per_root_call),
                num_f64(c.per_root_call_ns),
                c.in_latencies
            )?,
            None => out.write_all(b"\"probe_cost\":null,")?,
        }
        indent(out, 1)?;
        match &p.stats.cost {
            Some(c) => {
                let m = p.method(c.method);
                let measured = c.measured();
                let opt = |v: Option<f64>| v.map_or_else(|| "null".to_owned(), num_f64);
                write!(out, "\"cost\":{{\"measured\":{measured},\"class\":")?;
                write_str(out, &m.class)?;
                out.write_all(b",\"method\":")?;
                write_str(out, &m.name)?;
                write!(
                    out,
                    ",\"recorded_calls\":{},\"recorded_p50_ns\":{},\"silent_calls\":{},\
                     \"silent_p50_ns\":{},\"ratio\":{},\"probe_share_percent\":{},\"large\":{}}},",
                    c.recorded_calls,
                    c.recorded_p50_ns,
                    c.silent_calls,
                    if c.silent_calls > 0 {
                        c.silent_p50_ns.to_string()
                    } else {
                        "null".to_owned()
                    },
                    opt(c.ratio()),
                    opt(c.probe_share_percent()),
                    c.large()
                )?;
            }
            None => out.write_all(b"\"cost\":null,")?,
        }
        indent(out, 1)?;
        write!(out, "\"ticks_per_sec\":{},\"clock\":", p.ticks_per_sec)?;
        write_str(out, &p.clock)?;
        write!(out, ",\"timing\":\"{}\",", p.timing.name())?;
        if let Some(w) = &p.stats.windows {
            indent(out, 1)?;
            write!(
                out,
                "\"windows\":{{\"counting_ms\":{},\"silent_ms\":{},\"interval_us\":{},\"counted_root_calls\":{},\"silent_root_calls\":{},\"scale\":{},\"samples\":{},\"samples_outside\":{},\"source\":{},\"samples_dropped\":{},\"samples_in_probes\":{},\"silence\":\"{}\",\"switches\":{}}},",
                w.counting_ms,
                w.silent_ms,
                w.interval_us,
                w.counted_root_calls,
                w.silent_root_calls,
                num_f64(w.scale()),
                w.samples,
                w.samples_outside,
                match w.source {
                    Some(sprig_wire::control::StackSource::Timer) => "\"timer\"",
                    Some(sprig_wire::control::StackSource::Jvmti) => "\"jvmti\"",
                    None => "null",
                },
                w.samples_dropped,
                w.samples_in_probes,
                match w.silence {
                    sprig_wire::control::Silence::Dormant => "dormant",
                    sprig_wire::control::Silence::Original => "original",
                },
                match &w.switches {
                    Some(s) => format!(
                        "{{\"to_original\":{},\"to_instrumented\":{},\"classes\":{},\"failed\":{},\"ns\":{},\"max_ns\":{},\"cut\":{}}}",
                        s.to_original,
                        s.to_instrumented,
                        s.classes,
                        s.failed,
                        s.ns,
                        s.max_ns,
                        s.cut
                    ),
                    None => "null".to_string(),
                },
            )?;
        }
        indent(out, 1)?;
        out.write_all(b"\"warnings\":[")?;
        for (i, w) in p.warnings.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            indent(out, 2)?;
            write_str(out, w)?;
        }
        out.write_all(b"],")?;
        if let Some((samples, bytes_est)) = p.sampled_outside {
            indent(out, 1)?;
            write!(
                out,
                "\"sampled_outside_roots\":{{\"samples\":{samples},\"bytes_est\":{bytes_est}"
            )?;
            if let Some(o) = &p.outside_allocs {
                write!(
                    out,
                    ",\"stacks_unkept\":{{\"samples\":{},\"bytes_est\":{}}}",
                    o.unkept, o.unkept_bytes_est
                )?;
            }
            out.write_all(b"},")?;
        }
        if let Some(o) = p.outside_allocs() {
            indent(out, 1)?;
            outside_stacks(p, o, out)?;
        }
        if p.live.is_some() {
            indent(out, 1)?;
            live(p, out)?;
        }
        indent(out, 1)?;
        out.write_all(b"\"threads\":[")?;
        for (i, t) in p.threads.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            indent(out, 2)?;
            write!(
                out,
                "{{\"id\":{},\"index\":{},\"virtual\":{},\"name\":",
                t.java_id, t.index, t.virtual_threads
            )?;
            write_str(out, &t.name)?;
            let b = &t.bursts;
            let ns = |ps: u64| num_f64(ps as f64 / 1e3);
            write!(
                out,
                ",\"bursts\":{{\"used\":{},\"rejected\":{},\"min_pair_ns\":{},\"median_pair_ns\":{},\"max_pair_ns\":{}}},",
                b.used,
                b.rejected,
                ns(b.min_pair_ps),
                ns(b.median_pair_ps),
                ns(b.max_pair_ps)
            )?;
            indent(out, 3)?;
            if p.timing == Timing::Sampled {
                sample_counts(p, &t.samples, out)?;
            }
            let of = Of {
                thread: Some(t.index),
                window: t.samples.window(),
                gauge,
            };
            roots(p, &t.tree, &of, opts, 3, out)?;
            out.write_all(b"}")?;
        }
        out.write_all(b"]")?;
        let merged = (opts.merged || opts.hot_spots > 0).then(|| p.merged());
        if let Some(m) = &merged
            && opts.merged
        {
            out.write_all(b",")?;
            indent(out, 1)?;
            out.write_all(b"\"merged\":{")?;
            if p.timing == Timing::Sampled {
                sample_counts(p, &m.samples, out)?;
            }
            let of = Of {
                thread: None,
                window: m.samples.window(),
                gauge,
            };
            roots(p, &m.tree, &of, opts, 2, out)?;
            out.write_all(b"}")?;
        }
        if let Some(m) = &merged
            && opts.hot_spots > 0
        {
            out.write_all(b",")?;
            indent(out, 1)?;
            out.write_all(b"\"hot_spots\":[")?;
            for (i, h) in hot_spots(p, &m.tree)
                .iter()
                .take(opts.hot_spots)
                .enumerate()
            {
                if i > 0 {
                    out.write_all(b",")?;
                }
                indent(out, 2)?;
                let mi = p.method(h.method);
                out.write_all(b"{\"class\":")?;
                write_str(out, &mi.class)?;
                out.write_all(b",\"method\":")?;
                write_str(out, &mi.name)?;
                out.write_all(b",\"descriptor\":")?;
                write_str(out, &mi.descriptor)?;
                write!(
                    out,
                    ",\"calls\":{},\"self_ns\":{},\"total_ns\":{},\"avg_ns\":{}}}",
                    h.calls, h.self_ns, h.total_ns, h.avg_ns
                )?;
            }
            out.write_all(b"]")?;
        }
        locks(p, out)?;
        out.write_all(b"}\n")
    }
}

/// `"sampled_outside_stacks":[..],`: the allocation samples outside every
/// root context by stack and class, most bytes first, every frame.
fn outside_stacks(
    p: &Profile,
    o: &crate::profile::OutsideAllocs,
    out: &mut dyn Write,
) -> io::Result<()> {
    out.write_all(b"\"sampled_outside_stacks\":[")?;
    for (i, s) in o.stacks.iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        indent(out, 2)?;
        out.write_all(b"{\"class\":")?;
        write_str(out, &p.sampled_class(s.class))?;
        write!(
            out,
            ",\"samples\":{},\"bytes_est\":{},\"truncated\":{},\"frames\":[",
            s.samples, s.bytes_est, s.truncated
        )?;
        for (j, &f) in s.frames.iter().enumerate() {
            if j > 0 {
                out.write_all(b",")?;
            }
            let m = o.frame(f);
            out.write_all(b"{\"class\":")?;
            write_str(out, &m.class)?;
            out.write_all(b",\"method\":")?;
            write_str(out, &m.name)?;
            out.write_all(b",\"descriptor\":")?;
            write_str(out, &m.descriptor)?;
            out.write_all(b"}")?;
        }
        out.write_all(b"]}")?;
    }
    out.write_all(b"],")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn esc(s: &str) -> String {
        let mut v = Vec::new();
        write_str(&mut v, s).unwrap();
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn strings_are_escaped() {
        assert_eq!(esc("plain"), "\"plain\"");
        assert_eq!(esc("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(esc("l1\nl2\t\r"), "\"l1\\nl2\\t\\r\"");
        assert_eq!(esc("\u{1}\u{7f}"), "\"\\u0001\\u007f\"");
        // C1: a terminal may read U+009B as the start of an escape sequence.
        assert_eq!(esc("\u{9b}2J\u{a0}"), "\"\\u009b2J\u{a0}\"");
        assert_eq!(esc("Zürich ✓"), "\"Zürich ✓\"");
        assert_eq!(esc(""), "\"\"");
    }

    #[test]
    fn the_probe_cost_is_in_the_json() {
        use crate::profile::{MethodInfo, Node, ThreadProfile, Tree};
        let mut p = Profile::new(1_000_000_000);
        p.methods.insert(1, MethodInfo::new("a.B", "root", "()V"));
        let mut tree = Tree::default();
        tree.push(
            None,
            Node {
                method: 1,
                calls: 4,
                total_ticks: 4_000,
                ..Node::default()
            },
        );
        tree.recount();
        p.threads.push(ThreadProfile {
            virtual_threads: 0,
            index: 0,
            tree,
            ..ThreadProfile::default()
        });
        p.calibration = Some(crate::profile::Calibration::new(20.0, 10.0));
        let mut out = Vec::new();
        Json.render(&p, &RenderOptions::default(), &mut out)
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(
                "\"probe_cost\":{\"pair_ns\":30,\"source\":\"calibration\",\
                 \"calls_per_root_call\":1,\"per_root_call_ns\":30,\"in_latencies\":false}"
            ),
            "{text}"
        );
        assert!(text.contains("\"cost\":null,"), "{text}");
        p.stats.cost = Some(crate::profile::CostFacts {
            method: 1,
            recorded_calls: 4,
            recorded_p50_ns: 1000,
            silent_calls: 200,
            silent_p50_ns: 400,
        });
        let mut out = Vec::new();
        Json.render(&p, &RenderOptions::default(), &mut out)
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(
                "\"cost\":{\"measured\":true,\"class\":\"a.B\",\"method\":\"root\",\
                 \"recorded_calls\":4,\"recorded_p50_ns\":1000,\"silent_calls\":200,\
                 \"silent_p50_ns\":400,\"ratio\":2.5,\"probe_share_percent\":60,\"large\":true},"
            ),
            "{text}"
        );
    }

    #[test]
    fn floats() {
        assert_eq!(num_f64(12.5), "12.5");
        assert_eq!(num_f64(3.0), "3");
        assert_eq!(num_f64(f64::NAN), "null");
    }
}
