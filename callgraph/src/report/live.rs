//! The live view (`sprig profile ... --live`): a short, fixed-height text
//! of the current top of the tree, merged over threads, for the CLI to
//! redraw every second from [`CctBuilder::snapshot`](crate::CctBuilder::snapshot).
//!
//! The first lines are the hottest path (children come by exact total
//! descending), then the next branches, cut at `max_lines` tree lines.

use super::escape::escape;
use super::names::{self, Names};
use super::view::tree_view;
use super::{Render, RenderOptions, Unit, percent};
use crate::profile::{Profile, Times};
use std::io::{self, Write};

/// Columns a name keeps however deep its line.
const MIN_NAME: usize = 24;

pub struct Live {
    /// Tree lines shown at most (the header and footer come on top).
    pub max_lines: usize,
}

impl Render for Live {
    /// Every line fits `opts.width` columns: names are written short
    /// (`pkg.Class.method`, [`names`]) and cut in the middle where they
    /// would not fit, each time column in the one unit that fits it.
    fn render(&self, p: &Profile, opts: &RenderOptions, out: &mut dyn Write) -> io::Result<()> {
        let m = p.merged();
        let view = tree_view(p, &m.tree, opts);
        let names = Names::new(p, opts.signatures);
        let shown = &view.lines[..view.lines.len().min(self.max_lines)];
        let unit = |f: fn(&Times) -> u64| {
            Unit::fit(
                shown
                    .iter()
                    .map(|l| f(&view.times[l.node as usize]))
                    .max()
                    .unwrap_or(0) as f64,
            )
        };
        let (total_u, self_u) = (unit(|t| t.total_ns), unit(|t| t.self_ns));
        let in_roots = Unit::fit(view.total as f64);
        writeln!(
            out,
            "sprig live: {} events, {} threads, {} contexts, {} {} in roots{}",
            p.stats.events,
            p.threads.len(),
            m.tree.nodes.len(),
            in_roots.format(view.total as f64),
            in_roots.name(),
            if p.warnings.is_empty() {
                String::new()
            } else {
                format!(", {} warnings", p.warnings.len())
            }
        )?;
        let head = format!(
            "{:>12} {:>10} {:>10} {:>7}",
            "calls",
            format!("total {}", total_u.name()),
            format!("self {}", self_u.name()),
            "% root"
        );
        writeln!(out, "{head}  method")?;
        let figures = head.chars().count() + 2;
        for line in shown {
            let n = &m.tree.nodes[line.node as usize];
            let t = view.times[line.node as usize];
            // Indented by depth while the name keeps its room; deeper
            // lines say their depth instead.
            let max_indent = opts.width.saturating_sub(figures + MIN_NAME);
            let (indent, depth) = if 2 * line.depth <= max_indent {
                (2 * line.depth, String::new())
            } else {
                let d = format!("[{}] ", line.depth);
                (max_indent.saturating_sub(d.len()), d)
            };
            let room = opts
                .width
                .saturating_sub(figures + indent + depth.len())
                .max(MIN_NAME);
            writeln!(
                out,
                "{:>12} {:>10} {:>10} {:>7}  {:indent$}{depth}{}",
                n.calls,
                total_u.format(t.total_ns as f64),
                self_u.format(t.self_ns as f64),
                percent(t.total_ns, line.root_total),
                "",
                escape(&names::fit(&names.get(n.method), room)),
            )?;
        }
        if view.lines.len() > self.max_lines {
            writeln!(
                out,
                "{:>12} ... {} more lines",
                "",
                view.lines.len() - self.max_lines
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CctBuilder;
    use sprig_wire::event::{Event, EventKind};

    #[test]
    fn live_view_is_cut_and_shows_open_frames() {
        let mut b = CctBuilder::new(1_000_000_000);
        let mut evs = vec![Event::new(EventKind::RootEntry, 1, 0)];
        for m in 2..12u32 {
            evs.push(Event::new(EventKind::MethodEntry, m, m as u64 * 100));
            evs.push(Event::new(
                EventKind::MethodExit,
                m,
                m as u64 * 100 + m as u64,
            ));
        }
        b.process(0, &evs);
        let mut out = Vec::new();
        Live { max_lines: 4 }
            .render(&b.snapshot(), &RenderOptions::default(), &mut out)
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2 + 4 + 1, "{text}");
        assert!(lines[0].starts_with("sprig live: 21 events, 1 threads, 11 contexts"));
        // the root is still open: closed at the last timestamp in the view
        assert!(lines[2].ends_with("<unknown>.method#1"), "{text}");
        // hottest child first: method 11 ran 11 ns
        assert!(lines[3].ends_with("  <unknown>.method#11"), "{text}");
        assert!(lines[6].ends_with("... 7 more lines"), "{text}");
    }

    #[test]
    fn live_lines_fit_the_width_with_short_names() {
        let mut b = CctBuilder::new(1_000_000_000);
        // a deep chain of methods with long names
        let mut evs = vec![Event::new(EventKind::RootEntry, 1, 0)];
        for m in 2..40u32 {
            evs.push(Event::new(EventKind::MethodEntry, m, m as u64 * 1000));
        }
        for m in (2..40u32).rev() {
            evs.push(Event::new(EventKind::MethodExit, m, 100_000 + m as u64));
        }
        evs.push(Event::new(EventKind::RootExit, 1, 200_000));
        b.process(0, &evs);
        let mut p = b.snapshot();
        for id in 1..40u32 {
            p.methods.insert(
                id,
                crate::profile::MethodInfo {
                    class: format!("org.example.deeply.nested.pkg.SomeRatherLongClassName{id}"),
                    name: "handleIncomingRequest".into(),
                    descriptor: "(Ljava/lang/String;Ljava/util/Map;I)Ljava/lang/Object;".into(),
                },
            );
        }
        for width in [80usize, 120] {
            let opts = RenderOptions {
                width,
                ..RenderOptions::default()
            };
            let mut out = Vec::new();
            Live { max_lines: 12 }.render(&p, &opts, &mut out).unwrap();
            let text = String::from_utf8(out).unwrap();
            for l in text.lines().skip(1) {
                assert!(l.chars().count() <= width, "{width}: {l:?}\n{text}");
            }
            // short names: no descriptor, and the time columns carry a unit
            assert!(!text.contains("Ljava/lang"), "{text}");
            assert!(text.contains("total µs"), "{text}");
            assert!(text.contains("handleIncomingRequest"), "{text}");
        }
    }
}
