//! Reports: one renderer per file behind [`Render`], all reading the same
//! [`Profile`] through the pure functions of [`view`].
//!
//! Output is deterministic: children by exact total descending then by
//! name, threads by index, hot spots by self time then name.

pub mod collapsed;
pub mod diff;
pub mod escape;
pub mod flamegraph;
pub mod json;
pub mod live;
pub mod names;
pub mod pprof;
pub mod text;
pub mod view;

use crate::profile::Profile;
use std::io;

/// The default of [`RenderOptions::max_stack`], as async-profiler's
/// default Java stack depth.
pub const DEFAULT_MAX_STACK: usize = 2048;

/// What a report shows; the defaults show everything, per thread (stacks
/// up to [`DEFAULT_MAX_STACK`] frames).
#[derive(Clone, Debug, PartialEq)]
pub struct RenderOptions {
    /// Hide nodes whose exact total is below this percentage of their root's
    /// (roots: of all roots' total). 0 shows everything.
    pub min_percent: f64,
    /// Number of tree levels shown (1 = roots only); `None` = all.
    pub max_depth: Option<usize>,
    /// Collapsed, flame graph and pprof (and the diff's collapsed and
    /// flame graph): most frames in one stack; deeper frames are cut and
    /// stand as one `[truncated N frames]` frame ([`view::stack_view`]).
    pub max_stack: usize,
    /// Collapsed, flame graph (and the diff's): what a frame's value or
    /// width is, and what the thresholds and the order weigh. Time by
    /// default; text and JSON always order by time.
    pub weight: crate::profile::Metric,
    /// Text/JSON: also (text: instead) show the tree merged over threads.
    pub merged: bool,
    /// Text/JSON: how many hot spots to list (0 = none).
    pub hot_spots: usize,
    /// Text: show the trees (off: the hot spots and back traces only).
    pub tree: bool,
    /// Diff text: compare the runs' totals instead of per root call.
    pub diff_totals: bool,
    /// Text: every method with its signature (Java form); without it only
    /// overloads that would read the same show theirs.
    pub signatures: bool,
    /// Text: the columns lines fit in (names are shortened from the left
    /// of their package to fit, never their method name).
    pub width: usize,
    /// Text: method ids whose back traces to print.
    pub back_traces: Vec<u32>,
    /// Collapsed: one stack set per thread, with the thread name as the
    /// first frame, instead of the merged stacks.
    pub thread_frames: bool,
    /// Text: every figure of the session in the footer (clock, events,
    /// revelation, redefinitions, calibration, waits), not only the
    /// summary line.
    pub verbose: bool,
    /// Text: the agent's warnings were printed on the same terminal while
    /// profiling; the footer only counts them.
    pub agent_warnings_shown: bool,
}

impl Default for RenderOptions {
    fn default() -> RenderOptions {
        RenderOptions {
            min_percent: 0.0,
            max_depth: None,
            max_stack: DEFAULT_MAX_STACK,
            weight: crate::profile::Metric::Time,
            merged: false,
            hot_spots: 20,
            tree: true,
            diff_totals: false,
            signatures: false,
            width: 120,
            back_traces: Vec::new(),
            thread_frames: false,
            verbose: false,
            agent_warnings_shown: false,
        }
    }
}

/// A report format.
pub trait Render {
    fn render(
        &self,
        profile: &Profile,
        opts: &RenderOptions,
        out: &mut dyn io::Write,
    ) -> io::Result<()>;
}

/// The formats `--format` offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    Collapsed,
    /// A self-contained interactive HTML flame graph.
    Flamegraph,
    /// Gzipped pprof protocol buffer (binary).
    Pprof,
}

#[derive(Debug, thiserror::Error)]
#[error("unknown format `{0}` (expected text, json, collapsed, flamegraph or pprof)")]
pub struct UnknownFormat(pub String);

impl std::str::FromStr for Format {
    type Err = UnknownFormat;
    fn from_str(s: &str) -> Result<Format, UnknownFormat> {
        match s {
            "text" => Ok(Format::Text),
            "json" => Ok(Format::Json),
            "collapsed" => Ok(Format::Collapsed),
            "flamegraph" => Ok(Format::Flamegraph),
            "pprof" => Ok(Format::Pprof),
            _ => Err(UnknownFormat(s.to_owned())),
        }
    }
}

impl Format {
    /// The renderer of this format.
    pub fn renderer(self) -> Box<dyn Render> {
        match self {
            Format::Text => Box::new(text::Text),
            Format::Json => Box::new(json::Json),
            Format::Collapsed => Box::new(collapsed::Collapsed),
            Format::Flamegraph => Box::new(flamegraph::FlameGraph),
            Format::Pprof => Box::new(pprof::Pprof),
        }
    }

    /// Whether the format's output is binary (not for a terminal).
    pub fn is_binary(self) -> bool {
        self == Format::Pprof
    }
}

/// A time unit chosen for a column of figures: the one in which the
/// column's largest figure reads with one to three digits before the point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Ns,
    Us,
    Ms,
    S,
}

impl Unit {
    /// The unit that fits the largest figure of a column, `max_ns`.
    pub fn fit(max_ns: f64) -> Unit {
        if max_ns < 999.5 {
            Unit::Ns
        } else if max_ns < 999_500.0 {
            Unit::Us
        } else if max_ns < 999_500_000.0 {
            Unit::Ms
        } else {
            Unit::S
        }
    }

    /// The unit as written in a column header.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Ns => "ns",
            Unit::Us => "µs",
            Unit::Ms => "ms",
            Unit::S => "s",
        }
    }

    fn ns(self) -> f64 {
        match self {
            Unit::Ns => 1.0,
            Unit::Us => 1e3,
            Unit::Ms => 1e6,
            Unit::S => 1e9,
        }
    }

    /// `ns` in this unit with three significant digits (at most three
    /// decimals; whole numbers from 100 up).
    pub fn format(self, ns: f64) -> String {
        sig3(ns / self.ns())
    }
}

/// `v` with three significant digits: `1.23`, `12.3`, `123`, `1234`;
/// below 1, three decimals (`0.042`); `0` for zero.
pub fn sig3(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 || !a.is_finite() {
        return "0".to_owned();
    }
    let decimals = if a >= 99.95 {
        0
    } else if a >= 9.995 {
        1
    } else if a >= 0.9995 {
        2
    } else {
        3
    };
    format!("{v:.decimals$}")
}

/// Nanoseconds as milliseconds with three decimals, rounded to the nearest
/// microsecond (integer arithmetic, so the text is the same everywhere).
pub(crate) fn ms(ns: u64) -> String {
    let us = ns / 1_000 + u64::from(ns % 1_000 >= 500);
    format!("{}.{:03}", us / 1_000, us % 1_000)
}

/// `part` as a percentage of `whole` with one decimal, `-` when `whole` is 0.
pub(crate) fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "-".to_owned();
    }
    // tenths of a percent, rounded half up, in integers
    let tenths = (part as u128 * 2000 / whole as u128).div_ceil(2);
    format!("{}.{}%", tenths / 10, tenths % 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_formats() {
        assert_eq!(ms(1_234_567), "1.235");
        assert_eq!(ms(1_234_499), "1.234");
        assert_eq!(ms(999), "0.001");
        assert_eq!(ms(499), "0.000");
        assert_eq!(ms(u64::MAX), "18446744073709.552");
        assert_eq!(percent(1, 3), "33.3%");
        assert_eq!(percent(2, 3), "66.7%");
        assert_eq!(percent(5, 5), "100.0%");
        assert_eq!(percent(1, 0), "-");
        assert_eq!(percent(1, 2000), "0.1%");
        assert_eq!(percent(1, 4000), "0.0%");
    }

    #[test]
    fn units_fit_the_largest_figure_with_three_significant_digits() {
        assert_eq!(Unit::fit(420.0), Unit::Ns);
        assert_eq!(Unit::fit(999.7), Unit::Us);
        assert_eq!(Unit::fit(120_000.0), Unit::Us);
        assert_eq!(Unit::fit(2_500_000.0), Unit::Ms);
        assert_eq!(Unit::fit(3e9), Unit::S);
        assert_eq!(Unit::Us.format(120_000.0), "120");
        assert_eq!(Unit::Us.format(1_234.0), "1.23");
        assert_eq!(Unit::Us.format(42.0), "0.042");
        assert_eq!(Unit::Ms.format(12_340_000.0), "12.3");
        assert_eq!(Unit::Ns.format(0.0), "0");
        assert_eq!(Unit::S.format(1_234e9), "1234");
        assert_eq!(sig3(-1.5), "-1.50");
    }

    #[test]
    fn formats_parse() {
        assert_eq!("json".parse::<Format>().ok(), Some(Format::Json));
        assert!("xml".parse::<Format>().is_err());
    }
}
