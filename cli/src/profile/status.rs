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

    /// No progress line at all (`--quiet`).
    pub(super) fn quiet(mut self) -> Status {
        self.tty = false;
        self
    }

    pub(super) fn update(&mut self, elapsed: Duration, progress: Progress, stats: &AgentStats) {
        if !self.tty || self.last.elapsed() < Duration::from_millis(500) {
            return;
        }
        self.last = Instant::now();
        let _ = write!(
            self.out,
            "\r\x1b[2Ksprig: profiling {:>6.1} s, {} root calls, {} events ({}/s), {} methods instrumented / {} called",
            elapsed.as_secs_f64(),
            human(progress.root_calls as f64),
            human(progress.events as f64),
            human(progress.rate),
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

/// What the progress line shows besides the agent's counts.
#[derive(Clone, Copy, Debug)]
pub(super) struct Progress {
    pub events: u64,
    /// Events a second, over the last second or so.
    pub rate: f64,
    pub root_calls: u64,
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
