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
    let mut args = ctx.jvm_args.clone();
    args.extend(extra.iter().cloned());
    args.extend([
        "-cp".to_string(),
        ctx.env.classpath.clone(),
        "bench.Driver".into(),
    ]);
    args.extend(def.args.iter().cloned());
    Jvm::start(
        &ctx.env.java(),
        &args,
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
