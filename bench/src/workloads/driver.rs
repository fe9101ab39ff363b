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
    let times = numbers(&line, |ns: f64| ns / 1e6)?;
    if times.len() != k {
        bail!("asked for {k} iterations, got {} times", times.len());
    }
    Ok(times)
}

/// The numbers after a reply's first word, each through `f`.
fn numbers<T: std::str::FromStr, U>(line: &str, f: impl Fn(T) -> U) -> Result<Vec<U>> {
    line.split_whitespace()
        .skip(1)
        .map(|t| t.parse::<T>().map(&f).ok())
        .collect::<Option<_>>()
        .with_context(|| format!("unexpected output {line:?}"))
}

/// [`iterate`] with each iteration's start (`System.nanoTime()`, ns):
/// (start, milliseconds) per iteration.
pub(crate) fn iterate_stamped(jvm: &mut Jvm, k: usize, bound: Duration) -> Result<Vec<(u64, f64)>> {
    jvm.send(&format!("iter {k} stamps"))?;
    let times = jvm.expect("times", bound * (k as u32).max(1))?;
    let starts = jvm.expect("starts", Duration::from_secs(10))?;
    let times = numbers(&times, |ns: f64| ns / 1e6)?;
    let starts = numbers(&starts, |ns: u64| ns)?;
    if times.len() != k || starts.len() != k {
        bail!(
            "asked for {k} iterations, got {} times and {} starts",
            times.len(),
            starts.len()
        );
    }
    Ok(starts.into_iter().zip(times).collect())
}

#[cfg(test)]
mod tests {
    use super::numbers;

    #[test]
    fn a_reply_reads_as_its_numbers_or_fails() {
        let ms = numbers("times 2000000 500000", |ns: f64| ns / 1e6).unwrap();
        assert_eq!(ms, vec![2.0, 0.5]);
        assert_eq!(numbers("starts 7 9", |ns: u64| ns).unwrap(), vec![7, 9]);
        assert!(numbers("times 1 x", |ns: f64| ns).is_err());
    }
}
