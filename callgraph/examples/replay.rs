//! Replays an event script (the format of `tests/data/*.events`, described
//! in `tests/common/mod.rs`) through the CCT builder and prints a report.
//!
//! `cargo run -p sprig-callgraph --example replay -- FILE.events [text|json|collapsed]`

#[path = "../tests/common/mod.rs"]
mod common;

use sprig_callgraph::report::Format;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(file) = args.first() else {
        eprintln!("usage: replay FILE.events [text|json|collapsed]");
        return ExitCode::from(2);
    };
    let format: Format = match args.get(1).map_or(Ok(Format::Text), |f| f.parse()) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("replay: {e}");
            return ExitCode::from(2);
        }
    };
    let text = match std::fs::read_to_string(Path::new(file)) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("replay: {file}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let script = match common::parse(&text) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("replay: {file}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut out = std::io::stdout().lock();
    if let Err(e) = format
        .renderer()
        .render(&script.profile, &script.opts, &mut out)
        .and_then(|()| out.flush())
    {
        eprintln!("replay: {e}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
