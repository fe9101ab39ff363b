//! The live view (`sprig profile ... --live`): a short, fixed-height text
//! of the current top of the tree, merged over threads, for the CLI to
//! redraw every second from [`CctBuilder::snapshot`](crate::CctBuilder::snapshot).
//!
//! The first lines are the hottest path (children come by exact total
//! descending), then the next branches, cut at `max_lines` tree lines.

use super::view::tree_view;
use super::{Render, RenderOptions, ms, percent};
use crate::profile::Profile;
use std::io::{self, Write};

pub struct Live {
    /// Tree lines shown at most (the header and footer come on top).
    pub max_lines: usize,
}

impl Render for Live {
    fn render(&self, p: &Profile, opts: &RenderOptions, out: &mut dyn Write) -> io::Result<()> {
        let m = p.merged();
        let view = tree_view(p, &m.tree, opts);
        writeln!(
            out,
            "sprig live: {} events, {} threads, {} contexts, {} ms in roots{}",
            p.stats.events,
            p.threads.len(),
            m.tree.nodes.len(),
            ms(view.total),
            if p.warnings.is_empty() {
                String::new()
            } else {
                format!(", {} warnings", p.warnings.len())
            }
        )?;
        writeln!(
            out,
            "{:>12} {:>12} {:>12} {:>8}  method",
            "calls", "total ms", "self ms", "% root"
        )?;
        for line in view.lines.iter().take(self.max_lines) {
            let n = &m.tree.nodes[line.node as usize];
            let t = view.times[line.node as usize];
            writeln!(
                out,
                "{:>12} {:>12} {:>12} {:>8}  {:indent$}{}",
                n.calls,
                ms(t.total_ns),
                ms(t.self_ns),
                percent(t.total_ns, line.root_total),
                "",
                super::escape::escape(&p.display_name(n.method)),
                indent = 2 * line.depth.min(30)
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
}
