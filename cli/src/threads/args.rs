//! The command line of `sprig threads` and its validation: everything is
//! checked before a JVM is touched.

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::{Args, ValueEnum};

/// `sprig threads PID`.
#[derive(Args, Debug)]
pub struct ThreadsArgs {
    /// PID of the JVM (see `sprig list`).
    pub pid: u32,

    /// Report format: `text` for a person (paste it into a bug report),
    /// `json` for tools.
    #[arg(long, value_enum, default_value_t = ThreadsFormat::Text)]
    pub format: ThreadsFormat,

    /// Write the report to FILE instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Frames kept per stack, from the innermost (1 to 2048).
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub max_depth: u32,

    /// Give up attaching after this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 15.0)]
    pub attach_timeout: f64,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum ThreadsFormat {
    Text,
    Json,
}

impl ThreadsArgs {
    /// Checks every option; the first problem as one line.
    pub fn validate(&self) -> Result<()> {
        if self.max_depth == 0 || self.max_depth > 2048 {
            bail!(
                "--max-depth must be between 1 and 2048 frames, not {}",
                self.max_depth
            );
        }
        if let Some(path) = &self.output {
            crate::profile::args::check_writable(path)?;
        }
        Ok(())
    }
}
