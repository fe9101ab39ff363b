//! The status line on stderr while a session runs, and the lines printed
//! above it (warnings, notes), escaped.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use sprig_callgraph::report::escape::escape;
use sprig_wire::control::AgentStats;

/// Status line on stderr: redrawn in place on a terminal, printed once
/// (plus the start line) otherwise.
pub(super) struct Status {
    tty: bool,
    last: Instant,
    drawn: bool,
    out: Box<dyn Write>,
}

impl Status {
    pub(super) fn new() -> Status {
        Status::to(Box::new(std::io::stderr()), std::io::stderr().is_terminal())
    }

    /// A status writing to `out` (redrawn in place when `tty`).
    pub(super) fn to(out: Box<dyn Write>, tty: bool) -> Status {
        Status {
            tty,
            last: Instant::now(),
            drawn: false,
            out,
        }
    }

    pub(super) fn update(&mut self, elapsed: Duration, events: u64, rate: f64, stats: &AgentStats) {
        if !self.tty || self.last.elapsed() < Duration::from_millis(500) {
            return;
        }
        self.last = Instant::now();
        let _ = write!(
            self.out,
            "\r\x1b[2Ksprig: profiling {:>6.1} s, {} events ({}/s), {} methods instrumented / {} called",
            elapsed.as_secs_f64(),
            human(events as f64),
            human(rate),
            stats.instrumented_methods,
            stats.called_methods
        );
        self.drawn = true;
    }

    pub(super) fn line(&mut self, text: &str) {
        if self.drawn {
            let _ = write!(self.out, "\r\x1b[2K");
            self.drawn = false;
        }
        let _ = writeln!(self.out, "{}", escape(text));
    }
}

fn human(v: f64) -> String {
    if v >= 1e9 {
        format!("{:.1}G", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}
