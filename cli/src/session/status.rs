//! The status line on stderr while a session runs, and the lines printed
//! above it (warnings, notes), escaped.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use sprig_callgraph::report::escape::escape;
use sprig_wire::control::AgentStats;

/// Status line on stderr: redrawn in place on a terminal, printed once
/// (plus the start line) otherwise.
pub(crate) struct Status {
    tty: bool,
    last: Instant,
    drawn: bool,
    out: Box<dyn Write>,
}

impl Status {
    pub(crate) fn new() -> Status {
        Status::to(Box::new(std::io::stderr()), std::io::stderr().is_terminal())
    }

    /// A status writing to `out` (redrawn in place when `tty`).
    pub(crate) fn to(out: Box<dyn Write>, tty: bool) -> Status {
        Status {
            tty,
            last: Instant::now(),
            drawn: false,
            out,
        }
    }

    /// No progress line at all (`--quiet`).
    pub(crate) fn quiet(mut self) -> Status {
        self.tty = false;
        self
    }

    pub(crate) fn update(&mut self, elapsed: Duration, progress: Progress, stats: &AgentStats) {
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

    /// The progress line of a work that words its own (see
    /// `Work::progress_text`): `sprig: ` and the text.
    pub(crate) fn update_text(&mut self, text: &str) {
        if !self.tty || self.last.elapsed() < Duration::from_millis(500) {
            return;
        }
        self.last = Instant::now();
        let _ = write!(self.out, "\r\x1b[2Ksprig: {}", escape(text));
        self.drawn = true;
    }

    pub(crate) fn line(&mut self, text: &str) {
        if self.drawn {
            let _ = write!(self.out, "\r\x1b[2K");
            self.drawn = false;
        }
        let _ = writeln!(self.out, "{}", escape(text));
    }
}

/// What the progress line shows besides the agent's counts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Progress {
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

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A sink the test keeps a handle on.
    #[derive(Clone, Default)]
    pub(in crate::session) struct Captured(
        pub(in crate::session) std::rc::Rc<std::cell::RefCell<Vec<u8>>>,
    );

    impl Write for Captured {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.borrow_mut().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_progress_line_shows_root_calls_and_quiet_turns_it_off() {
        let progress = Progress {
            events: 2_500_000,
            rate: 1_250_000.0,
            root_calls: 4_200,
        };
        let stats = AgentStats {
            instrumented_methods: 12,
            called_methods: 9,
            ..AgentStats::default()
        };
        for quiet in [false, true] {
            let captured = Captured::default();
            let status = Status::to(Box::new(captured.clone()), true);
            let mut status = if quiet { status.quiet() } else { status };
            std::thread::sleep(Duration::from_millis(510));
            status.update(Duration::from_secs(3), progress, &stats);
            let text = String::from_utf8(captured.0.borrow().clone()).unwrap();
            if quiet {
                assert!(text.is_empty(), "{text:?}");
            } else {
                assert!(
                    text.contains("3.0 s, 4.2k root calls, 2.5M events (1.2M/s), 12 methods instrumented / 9 called"),
                    "{text:?}"
                );
            }
        }
    }

    #[test]
    fn a_work_words_its_own_progress_line_escaped() {
        let captured = Captured::default();
        let mut status = Status::to(Box::new(captured.clone()), true);
        std::thread::sleep(Duration::from_millis(510));
        status.update_text("sampling 2.0 s, 100 rounds\u{1b}[2J");
        let text = String::from_utf8(captured.0.borrow().clone()).unwrap();
        assert_eq!(text, "\r\x1b[2Ksprig: sampling 2.0 s, 100 rounds\\x1b[2J");
    }
}
