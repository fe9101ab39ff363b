//! The workload's JVM (`bench.Driver`): started with the bench's JVM
//! arguments, asked for iterations, each timed inside the JVM.

use super::WorkloadDef;
use crate::Ctx;
use crate::proc::Jvm;
use anyhow::{Context, Result, bail};
use std::time::Duration;

/// Starts the JVM that runs workload `def` (`bench.Driver`), with the
/// bench's JVM arguments and then `extra`; `name` names its logs.
pub fn start_jvm(ctx: &Ctx, def: &WorkloadDef, extra: &[String], name: &str) -> Result<Jvm> {
    start_jvm_with_env(ctx, def, extra, &[], name)
}

/// [`start_jvm`] with extra environment variables.
pub fn start_jvm_with_env(
    ctx: &Ctx,
    def: &WorkloadDef,
    extra: &[String],
    env: &[(&str, &str)],
    name: &str,
) -> Result<Jvm> {
    let mut args = ctx.jvm_args.clone();
    args.extend(extra.iter().cloned());
    args.extend([
        "-cp".to_string(),
        ctx.env.classpath.clone(),
        "bench.Driver".into(),
    ]);
    args.extend(def.args.iter().cloned());
    Jvm::start_with_env(
        &ctx.env.java(),
        &args,
        env,
        name,
        &ctx.env.logs(),
        Duration::from_secs(300),
    )
}

pub(crate) fn iterate(jvm: &mut Jvm, k: usize, bound: Duration) -> Result<Vec<f64>> {
    jvm.send(&format!("iter {k}"))?;
    let line = jvm.expect("times", bound * (k as u32).max(1))?;
    let times: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .map(|t| t.parse::<f64>().map(|ns| ns / 1e6))
        .collect::<Result<_, _>>()
        .with_context(|| format!("unexpected output {line:?}"))?;
    if times.len() != k {
        bail!("asked for {k} iterations, got {} times", times.len());
    }
    Ok(times)
}

/// [`iterate`] with each iteration's start (`System.nanoTime()`, ns):
/// (start, milliseconds) per iteration.
pub(crate) fn iterate_stamped(jvm: &mut Jvm, k: usize, bound: Duration) -> Result<Vec<(u64, f64)>> {
    jvm.send(&format!("iter {k} stamps"))?;
    let times = jvm.expect("times", bound * (k as u32).max(1))?;
    let starts = jvm.expect("starts", Duration::from_secs(10))?;
    let times: Vec<f64> = times
        .split_whitespace()
        .skip(1)
        .map(|t| t.parse::<f64>().map(|ns| ns / 1e6))
        .collect::<Result<_, _>>()
        .with_context(|| format!("unexpected output {times:?}"))?;
    let starts: Vec<u64> = starts
        .split_whitespace()
        .skip(1)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .with_context(|| format!("unexpected output {starts:?}"))?;
    if times.len() != k || starts.len() != k {
        bail!(
            "asked for {k} iterations, got {} times and {} starts",
            times.len(),
            starts.len()
        );
    }
    Ok(starts.into_iter().zip(times).collect())
}
