//! Collapsed stacks (flamegraph.pl / inferno / speedscope input): one
//! `frame;frame;frame value` line per path, frame = `pkg.Class::method`,
//! value = the path's last node's own part of the options' metric
//! (`weight`): by default its self nanoseconds, exact, or in sampled mode
//! the weight of its samples (as [`Profile::times`] gives them); its calls
//! or its samples with `--weight calls|samples`.
//!
//! Weighed by sampled bytes (`--weight sampled-bytes`), the allocation
//! samples taken outside every root context follow, by stack, under the
//! base frame `[outside roots]`, each stack's class as its last frame.
//!
//! Paths are merged over threads unless `thread_frames` asks for one set per
//! thread with the thread's name as the first frame. Nodes hidden by the
//! thresholds give their time to the nearest shown ancestor, so the sum of
//! all values stays the exact total. Lines with value 0 are left out. Order:
//! pre-order, children by exact total descending then by name.
//!
//! A stack holds at most `max_stack` frames (the thread's frame aside): a
//! path that goes deeper ends in the frame `[truncated N frames]` (N: the
//! frames of the deepest path cut there), whose value is the exact total
//! of everything cut. So a recursion 10,000 deep costs at most `max_stack`
//! lines of at most `max_stack + 1` frames, not 10,000 of up to 10,000.

use super::view::{stack_view, truncated_frame};
use super::{Render, RenderOptions};
use crate::profile::{Metric, Profile, ThreadProfile};
use std::io::{self, Write};

pub struct Collapsed;

/// A frame must not contain the separators of the format.
fn clean(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            ';' => ':',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect()
}

fn stacks(
    p: &Profile,
    t: &ThreadProfile,
    first: Option<String>,
    opts: &RenderOptions,
    out: &mut dyn Write,
) -> io::Result<()> {
    let view = stack_view(p, &t.tree, opts);
    // path[d] = byte length of the path up to and including depth d.
    let mut path = String::new();
    let mut ends: Vec<usize> = Vec::new();
    let base = match first {
        Some(f) => {
            path.push_str(&clean(&f));
            path.len()
        }
        None => 0,
    };
    for line in &view.lines {
        ends.truncate(line.depth);
        path.truncate(ends.last().copied().unwrap_or(base));
        if !path.is_empty() {
            path.push(';');
        }
        let node = &t.tree.nodes[line.node as usize];
        path.push_str(&clean(&p.method(node.method).frame()));
        ends.push(path.len());
        let value = view.weights[line.node as usize]
            .own
            .saturating_add(line.hidden);
        if value > 0 {
            writeln!(out, "{path} {value}")?;
        }
        if let Some(cut) = view.cut(line).filter(|c| c.total > 0) {
            writeln!(out, "{path};{} {}", truncated_frame(cut.frames), cut.total)?;
        }
    }
    Ok(())
}

/// The base frame of the allocation samples outside every root context.
pub const OUTSIDE_ROOTS: &str = "[outside roots]";

/// Weighed by sampled bytes: the allocation samples outside every root
/// context, one line per stack and class under [`OUTSIDE_ROOTS`], the
/// stack from its outermost frame in, the class as the last frame.
fn outside(p: &Profile, opts: &RenderOptions, out: &mut dyn Write) -> io::Result<()> {
    let Some(o) = p.outside_allocs() else {
        return Ok(());
    };
    if opts.weight != Metric::SampledBytes {
        return Ok(());
    }
    for s in &o.stacks {
        if s.bytes_est == 0 {
            continue;
        }
        let mut path = String::from(OUTSIDE_ROOTS);
        if s.truncated {
            path.push_str(";[truncated]");
        }
        for &f in s.frames.iter().rev() {
            path.push(';');
            path.push_str(&clean(&o.frame(f).frame()));
        }
        path.push(';');
        path.push_str(&clean(&p.sampled_class(s.class)));
        writeln!(out, "{path} {}", s.bytes_est)?;
    }
    Ok(())
}

impl Render for Collapsed {
    fn render(&self, p: &Profile, opts: &RenderOptions, out: &mut dyn Write) -> io::Result<()> {
        if opts.thread_frames {
            for t in &p.threads {
                stacks(p, t, Some(t.display_name()), opts, out)?;
            }
        } else {
            stacks(p, &p.merged(), None, opts, out)?;
        }
        outside(p, opts, out)
    }
}
