//! Self-time overlap of sprig with JFR's execution samples (`jfr`): on
//! javac, H2 and Jetty, sprig and a JFR recording at 1 ms run over the same
//! iterations of the same JVM.

use super::*;

/// A JFR settings file with only execution samples (threads in Java and
/// threads in native code), every millisecond.
pub(crate) const JFC: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<configuration version="2.0" label="sprig-bench execution samples" description="jdk.ExecutionSample and jdk.NativeMethodSample every 1 ms, nothing else">
  <event name="jdk.ExecutionSample">
    <setting name="enabled">true</setting>
    <setting name="period">1 ms</setting>
  </event>
  <event name="jdk.NativeMethodSample">
    <setting name="enabled">true</setting>
    <setting name="period">1 ms</setting>
  </event>
</configuration>
"#;

/// `class::method` of a sprig node.
fn node_key(n: &Value) -> String {
    format!(
        "{}::{}",
        n.get("class").and_then(Value::as_str).unwrap_or("?"),
        n.get("method").and_then(Value::as_str).unwrap_or("?")
    )
}

/// Self time per method (`class::method`) over every node of every tree,
/// and the samples behind it (sampled timing).
fn sprig_self(report: &Value) -> (BTreeMap<String, f64>, u64) {
    let mut out: BTreeMap<String, f64> = BTreeMap::new();
    let mut samples = 0;
    for t in report
        .get("threads")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let mut stack: Vec<&Value> = t
            .get("roots")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .collect();
        while let Some(n) = stack.pop() {
            *out.entry(node_key(n)).or_default() += f(n, "self_ns");
            samples += n.get("samples").and_then(Value::as_u64).unwrap_or(0);
            if let Some(ch) = n.get("children").and_then(Value::as_array) {
                stack.extend(ch.iter());
            }
        }
    }
    (out, samples)
}

/// `class::method` of a JFR frame (`jfr print --json`).
pub(crate) fn frame_key(fr: &Value) -> Option<String> {
    let m = fr.get("method")?;
    let class = m.get("type")?.get("name")?.as_str()?.replace('/', ".");
    Some(format!("{class}::{}", m.get("name")?.as_str()?))
}

/// Execution samples inside the root: per sample, the method sprig would
/// charge it to (the innermost frame at or above the root's outermost
/// frame that sprig's tree holds; JFR sees frames sprig does not
/// instrument, such as JDK classes outside `--include`). Also the number
/// of samples in all and of those inside the root.
fn jfr_self(
    recording: &Value,
    roots: &BTreeSet<String>,
    known: &BTreeSet<String>,
) -> (Vec<String>, usize) {
    let mut inside = Vec::new();
    let mut total = 0;
    let events = recording
        .get("recording")
        .and_then(|r| r.get("events"))
        .and_then(Value::as_array);
    for e in events.into_iter().flatten() {
        let Some(frames) = e
            .get("values")
            .and_then(|v| v.get("stackTrace"))
            .and_then(|s| s.get("frames"))
            .and_then(Value::as_array)
        else {
            continue;
        };
        total += 1;
        let keys: Vec<Option<String>> = frames.iter().map(frame_key).collect();
        // frames[0] is the top of the stack; the root's outermost frame is
        // the last one that matches.
        let Some(ri) = keys
            .iter()
            .rposition(|k| k.as_ref().is_some_and(|k| roots.contains(k)))
        else {
            continue;
        };
        if let Some(k) = keys[..=ri]
            .iter()
            .flatten()
            .find(|k| known.contains(k.as_str()))
        {
            inside.push(k.clone());
        }
    }
    (inside, total)
}

/// Sum over methods of the smaller of the two shares (1.0: the same
/// distribution).
pub fn overlap(a: &BTreeMap<String, f64>, b: &BTreeMap<String, f64>) -> f64 {
    let ta: f64 = a.values().sum();
    let tb: f64 = b.values().sum();
    if ta <= 0.0 || tb <= 0.0 {
        return f64::NAN;
    }
    a.iter()
        .map(|(k, va)| (va / ta).min(b.get(k).copied().unwrap_or(0.0) / tb))
        .sum()
}

fn counts(keys: &[String]) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    for k in keys {
        *m.entry(k.clone()).or_insert(0.0) += 1.0;
    }
    m
}

pub(crate) fn top(m: &BTreeMap<String, f64>, n: usize) -> Vec<Value> {
    let t: f64 = m.values().sum();
    let mut v: Vec<(&String, &f64)> = m.iter().collect();
    v.sort_by(|a, b| b.1.total_cmp(a.1));
    v.into_iter()
        .take(n)
        .map(|(k, x)| json!([k, (x / t * 1000.0).round() / 10.0]))
        .collect()
}

pub(crate) fn tool(jdk: &Path, name: &str, args: &[String]) -> Result<String> {
    let out = Command::new(jdk.join("bin").join(name))
        .args(args)
        .output()
        .with_context(|| format!("running {name}"))?;
    if !out.status.success() {
        bail!(
            "{name} {} failed ({}): {}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// JFR's samples of one recording that fall inside the root, charged as
/// [`jfr_self`] says, and the number of samples in all.
struct JfrWindow {
    inside: Vec<String>,
    total: usize,
}

/// Starts a JFR recording of execution samples in the JVM.
fn jfr_start(ctx: &Ctx, pid: u32, jfc: &Path, rec: &Path) -> Result<()> {
    tool(
        &ctx.env.jdk,
        "jcmd",
        &[
            pid.to_string(),
            "JFR.start".into(),
            "name=sprigbench".into(),
            format!("settings={}", jfc.display()),
            format!("filename={}", rec.display()),
        ],
    )?;
    Ok(())
}

/// Stops the recording (the file is written then).
fn jfr_stop(ctx: &Ctx, pid: u32) -> Result<()> {
    tool(
        &ctx.env.jdk,
        "jcmd",
        &[pid.to_string(), "JFR.stop".into(), "name=sprigbench".into()],
    )?;
    Ok(())
}

impl JfrWindow {
    /// Overlap of sprig's self times with these samples, and of the two
    /// halves of the samples with each other (the sampling noise that
    /// bounds any overlap with this many samples).
    fn figures(&self, sprig_self: &BTreeMap<String, f64>) -> Value {
        let half = self.inside.len() / 2;
        let c = counts(&self.inside);
        json!({
            "overlap": overlap(sprig_self, &c),
            "halves_overlap": overlap(&counts(&self.inside[..half]), &counts(&self.inside[half..])),
            "samples": self.total,
            "samples_in_root": self.inside.len(),
            "methods": c.len(),
            "top": top(&c, 5),
        })
    }
}

/// (workload, row, iterations measured quick, full).
const JFR_ROWS: [(&str, &str, usize, usize); 4] = [
    ("javac", "partial", 15, 30),
    ("h2", "statement", 40, 100),
    // A Lucene iteration is about as long as an H2 one.
    ("lucene", "document", 40, 100),
    // Jetty's iteration is about 10 ms: as long a window as H2's.
    ("jetty", "server", 120, 300),
];

/// The bare window JFR records is this many times as long as the profiled
/// one: JFR takes far fewer samples than once a millisecond in the root
/// (about 1,500 in 40 H2 iterations), and the overlap of two sample sets
/// is bounded by their noise.
const BARE_WINDOWS: usize = 10;

/// Windows timing samples only its silent root calls, so its sessions
/// run this many times the profiled iterations, with a stack sample every
/// [`WINDOWS_INTERVAL_MS`] of CPU time (JFR's period): at 40 Lucene
/// iterations and sprig's default 5 ms it credited 54-59 samples where
/// JFR's bare window holds about 2,200.
const WINDOWS_ITERATIONS: usize = 4;
const WINDOWS_INTERVAL_MS: f64 = 1.0;

/// sprig in each timing mode against JFR's execution samples (Java and
/// native, every 1 ms) on the same workload in the same JVM: JFR over a
/// bare window right before each sprig session (the truth: the program
/// without probes), and JFR again over the profiled window itself.
pub fn jfr(ctx: &Ctx) -> Result<Value> {
    let jfc = ctx.env.scratch.path.join("exec-1ms.jfc");
    std::fs::write(&jfc, JFC)?;
    let modes = modes(ctx);
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    for (wl, label, kq, kf) in JFR_ROWS {
        if !ctx.rows.is_empty() && !ctx.rows.iter().any(|r| r == label) {
            continue;
        }
        let def = match workloads::define(ctx, wl) {
            Err(e) if e.to_string().starts_with(workloads::SKIPPED) => {
                println!("jfr: {wl}: {e}");
                skipped.push(format!("{wl}: {e}"));
                continue;
            }
            d => d?,
        };
        let r = def
            .roots
            .iter()
            .find(|r| r.label == label)
            .context("no such row")?;
        let k = if ctx.quick { kq } else { kf };
        // The bare window is as long whatever the mode.
        let k_bare = k;
        // JFR keeps 64 frames a stack by default: javac's genClass sits
        // deeper than that below the top.
        let mut jvm = workloads::start_jvm(
            ctx,
            &def,
            &["-XX:FlightRecorderOptions:stackdepth=2048".into()],
            &format!("jfr-{wl}"),
        )?;
        eprintln!(
            "sprig-bench: jfr: {wl}: warm-up ({} iterations)",
            def.warmup
        );
        iter(&mut jvm, def.warmup, def.iteration_bound)?;
        let roots: BTreeSet<String> = r.roots.iter().cloned().collect();
        let pid = jvm.pid();
        for rep in 0..ctx.repeats {
            for mi in (0..modes.len()).map(|i| (i + rep) % modes.len()) {
                let mode = &modes[mi];
                let windows = crate::proc::is_windows(mode);
                let k = if windows { k * WINDOWS_ITERATIONS } else { k };
                eprintln!(
                    "sprig-bench: jfr: {wl} {label}, timing {mode}, repeat {}/{}: JFR over {} bare iterations, then sprig and JFR over {k} profiled ones",
                    rep + 1,
                    ctx.repeats,
                    k_bare * BARE_WINDOWS
                );
                let name = format!("jfr-{wl}-{mode}-{}", rep + 1);
                let rec_bare = ctx.env.scratch.path.join(format!("{name}-bare.jfr"));
                let rec_prof = ctx.env.scratch.path.join(format!("{name}-profiled.jfr"));
                // The bare window; its samples are charged once sprig's
                // tree (which methods it holds) is known.
                jfr_start(ctx, pid, &jfc, &rec_bare)?;
                iter(&mut jvm, k_bare * BARE_WINDOWS, def.iteration_bound)?;
                jfr_stop(ctx, pid)?;
                let sargs = SprigArgs {
                    roots: r.roots.clone(),
                    include: r.include.clone(),
                    exclude: vec![],
                    scheme: "lazy".into(),
                    timing: Some(mode.clone()),
                    interval_ms: windows.then_some(WINDOWS_INTERVAL_MS),
                };
                let out = ctx.env.scratch.path.join(format!("{name}.json"));
                let mut sprig = Sprig::start(&ctx.env.sprig, pid, &sargs, &out)?;
                sprig.wait_profiling(START)?;
                // Revelation and the JIT's recompilation first.
                iter(&mut jvm, def.warmup.min(5), def.iteration_bound)?;
                jfr_start(ctx, pid, &jfc, &rec_prof)?;
                sprig.reset(Duration::from_secs(30))?;
                iter(&mut jvm, k, def.iteration_bound)?;
                let stopped_rec = jfr_stop(ctx, pid);
                let stopped = sprig.stop(STOP)?;
                let (sprig_self, sprig_samples) = sprig_self(&stopped.report);
                let known: BTreeSet<String> = sprig_self.keys().cloned().collect();
                stopped_rec?;
                let bare = read_jfr(ctx, &rec_bare, &roots, &known)?;
                let prof = read_jfr(ctx, &rec_prof, &roots, &known)?;
                if bare.inside.is_empty() {
                    bail!(
                        "jfr: {wl}: none of JFR's {} samples of the bare window is inside {}",
                        bare.total,
                        r.roots.join(" ")
                    );
                }
                rows.push(json!({
                    "workload": wl, "root": label, "patterns": r.roots, "timing": mode,
                    "repeat": rep + 1, "iterations": k,
                    "jfr_bare": bare.figures(&sprig_self),
                    "jfr_profiled": prof.figures(&sprig_self),
                    // What the probes do to the program as JFR sees it.
                    "jfr_profiled_vs_bare": overlap(&counts(&prof.inside), &counts(&bare.inside)),
                    "sprig_samples": sprig_samples,
                    "windows": ProfileSummary::from_json(&stopped.report)
                        .ok()
                        .and_then(|p| p.windows)
                        .map_or(Value::Null, |w| w.to_json()),
                    // Original-bytes silence: what its switches cost.
                    "switches": stopped.report.get("windows").and_then(|w| w.get("switches")).cloned().unwrap_or(Value::Null),
                    "sprig_methods": known.len(),
                    "sprig_top": top(&sprig_self, 5),
                }));
                let _ = std::fs::remove_file(&rec_bare);
                let _ = std::fs::remove_file(&rec_prof);
            }
        }
        jvm.quit()?;
    }
    Ok(json!({
        "rows": rows,
        "skipped": skipped,
        "settings": "jdk.ExecutionSample and jdk.NativeMethodSample every 1 ms, stackdepth 2048",
    }))
}

/// A stopped recording's samples inside the root.
fn read_jfr(
    ctx: &Ctx,
    rec: &Path,
    roots: &BTreeSet<String>,
    known: &BTreeSet<String>,
) -> Result<JfrWindow> {
    let text = tool(
        &ctx.env.jdk,
        "jfr",
        &[
            "print".into(),
            "--json".into(),
            // `jfr print` shows 5 frames a stack unless told otherwise.
            "--stack-depth".into(),
            "2048".into(),
            "--events".into(),
            "jdk.ExecutionSample,jdk.NativeMethodSample".into(),
            rec.display().to_string(),
        ],
    )?;
    let v: Value = serde_json::from_str(&text).context("parsing jfr print --json")?;
    let (inside, total) = jfr_self(&v, roots, known);
    Ok(JfrWindow { inside, total })
}

fn iter(jvm: &mut Jvm, k: usize, bound: Duration) -> Result<()> {
    jvm.send(&format!("iter {k}"))?;
    jvm.expect("times", bound * (k as u32).max(1))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_of_shares() {
        let m = |v: &[(&str, f64)]| -> BTreeMap<String, f64> {
            v.iter().map(|(k, x)| ((*k).to_owned(), *x)).collect()
        };
        let a = m(&[("x", 3.0), ("y", 1.0)]);
        assert!((overlap(&a, &m(&[("x", 30.0), ("y", 10.0)])) - 1.0).abs() < 1e-12);
        // x: min(0.75, 0.5) + y: min(0.25, 0.25) + z only in b.
        let b = m(&[("x", 2.0), ("y", 1.0), ("z", 1.0)]);
        assert!((overlap(&a, &b) - 0.75).abs() < 1e-12);
        assert!(overlap(&a, &m(&[("z", 1.0)])).abs() < 1e-12);
        assert!(overlap(&a, &BTreeMap::new()).is_nan());
    }

    #[test]
    fn jfr_samples_go_to_the_innermost_known_frame_inside_the_root() {
        let frame = |c: &str, m: &str| json!({"method": {"type": {"name": c}, "name": m}});
        let ev = |frames: Vec<Value>| json!({"values": {"stackTrace": {"frames": frames}}});
        let rec = json!({"recording": {"events": [
            // Top frame a JDK method sprig does not hold: goes to a.B::leaf.
            ev(vec![frame("java/lang/String", "hashCode"), frame("a/B", "leaf"),
                    frame("a/B", "root"), frame("a/B", "root"), frame("a/Main", "main")]),
            // Outside the root.
            ev(vec![frame("a/B", "leaf"), frame("a/Main", "main")]),
            // The root itself.
            ev(vec![frame("java/lang/Math", "max"), frame("a/B", "root")]),
        ]}});
        let roots: BTreeSet<String> = ["a.B::root".to_owned()].into();
        let known: BTreeSet<String> = ["a.B::root".to_owned(), "a.B::leaf".to_owned()].into();
        let (inside, total) = jfr_self(&rec, &roots, &known);
        assert_eq!(total, 3);
        assert_eq!(inside, vec!["a.B::leaf".to_owned(), "a.B::root".to_owned()]);
    }
}
