//! `sprig calibrate <pid>`: the probes' cost inside a running JVM, measured
//! as at the start of every profiling session, without profiling.

use std::io::Write;
use std::os::fd::AsFd;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use sprig_callgraph::report::escape::escape;
use sprig_wire::Message;
use sprig_wire::control::{Scheme, SessionOptions};

use super::args::{self, CalibrateArgs};
use super::connect::{attach_to, spawn_reader};

/// `sprig calibrate <pid>`: attaches, measures the probes' cost inside the
/// JVM exactly as `profile` does at the start of a session, prints it,
/// detaches. Nothing is instrumented but sprig's own calibration class.
pub fn calibrate(args: CalibrateArgs) -> Result<ExitCode> {
    let timeout = args::attach_timeout(args.attach_timeout)?;
    let clock_kind = args.clock_kind();
    let (prepared, channel, jvm_line) = attach_to(args.pid, clock_kind, 1, timeout)?;
    let writer = channel
        .try_clone()
        .context("cannot duplicate the control socket")?;
    writer.send_with_fd(
        &Message::Start(SessionOptions {
            roots: Vec::new(),
            include: Vec::new(),
            exclude: Vec::new(),
            scheme: Scheme::Lazy,
            clock: clock_kind,
            roots_only: true,
            calibrate: true,
            wait_bound_ms: 2000,
            no_dormant: false,
            skip_trivial: 0,
            receivers: false,
            recalibrate_ms: 0,
            timing: Default::default(),
        }),
        prepared.ring_fd.as_fd(),
    )?;
    let messages = spawn_reader(channel);
    let mut clock_used = prepared.region.clock();
    let mut ticks_per_sec = prepared.region.ticks_per_sec();
    let mut figures: Option<(f64, f64, u32)> = None;
    let mut problems: Vec<String> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            bail!(
                "the agent in JVM {} did not finish calibrating within 30 s",
                args.pid
            );
        }
        match messages.recv_timeout(left) {
            Ok(Ok(Message::Started {
                clock,
                ticks_per_sec: t,
            })) => {
                clock_used = clock;
                ticks_per_sec = t;
            }
            Ok(Ok(Message::Calibration {
                inner_ticks,
                outer_ticks,
                samples,
            })) => figures = Some((inner_ticks, outer_ticks, samples)),
            Ok(Ok(Message::Warning(w))) => problems.push(w),
            Ok(Ok(Message::Error(e))) => bail!("the agent failed: {e}"),
            Ok(Ok(Message::Detached(_))) => break,
            Ok(Ok(_)) => {}
            Ok(Err(e)) => bail!("the agent's connection broke before calibration ended: {e}"),
            Err(_) => bail!(
                "the agent in JVM {} did not finish calibrating within 30 s",
                args.pid
            ),
        }
    }
    let Some((inner, outer, samples)) = figures else {
        bail!(
            "the agent could not calibrate: {}",
            if problems.is_empty() {
                "no figures came back".to_string()
            } else {
                problems.join("; ")
            }
        );
    };
    let ns = |ticks: f64| ticks * 1e9 / ticks_per_sec.max(1) as f64;
    let (inner_ns, outer_ns) = (ns(inner), ns(outer));
    let clock_name = format!("{clock_used:?}").to_lowercase();
    let mut out = std::io::stdout().lock();
    if args.json {
        let js = |out: &mut dyn Write, v: &str| sprig_callgraph::report::json::write_str(out, v);
        write!(out, "{{\n  \"pid\": {},\n  \"jvm\": ", args.pid)?;
        js(&mut out, &jvm_line)?;
        write!(out, ",\n  \"clock\": ")?;
        js(&mut out, &clock_name)?;
        writeln!(out, ",\n  \"ticks_per_sec\": {ticks_per_sec},")?;
        writeln!(
            out,
            "  \"calibration\": {{\"inner_ns\": {inner_ns:.3}, \"outer_ns\": {outer_ns:.3}, \
             \"pair_ns\": {:.3}, \"batches\": {samples}, \"calls_per_batch\": 1000}},",
            inner_ns + outer_ns
        )?;
        write!(out, "  \"warnings\": [")?;
        for (i, p) in problems.iter().enumerate() {
            if i > 0 {
                write!(out, ", ")?;
            }
            js(&mut out, p)?;
        }
        writeln!(out, "]\n}}")?;
    } else {
        writeln!(
            out,
            "sprig calibrate: pid {}, {}",
            args.pid,
            escape(&jvm_line)
        )?;
        writeln!(out, "  clock        {clock_name} ({ticks_per_sec} ticks/s)")?;
        writeln!(
            out,
            "  inner  t_I   {inner_ns:8.2} ns per call, inside the called method's own time"
        )?;
        writeln!(
            out,
            "  outer  t_O   {outer_ns:8.2} ns per call, inside the caller's time"
        )?;
        writeln!(
            out,
            "  pair         {:8.2} ns per instrumented call (entry + exit probe)",
            inner_ns + outer_ns
        )?;
        writeln!(
            out,
            "  samples      {samples} batches of 1000 calls, the median batch of the fastest few ms kept"
        )?;
        for p in &problems {
            writeln!(out, "  warning      {}", escape(p))?;
        }
    }
    drop(prepared);
    Ok(ExitCode::SUCCESS)
}
