//! Self-time overlap of sprig with JFR's execution samples (`jfr`): on
//! javac, H2 and Jetty, sprig and a JFR recording at 1 ms run over the same
//! iterations of the same JVM.

use super::*;

/// A JFR settings file with execution samples (threads in Java and threads
/// in native code) every millisecond, and the events that say when classes
/// were redefined and what the JIT compiled (windows timing's switches and
/// what follows them).
pub(crate) const JFC: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<configuration version="2.0" label="sprig-bench execution samples" description="jdk.ExecutionSample and jdk.NativeMethodSample every 1 ms, every RetransformClasses and every compilation">
  <event name="jdk.ExecutionSample">
    <setting name="enabled">true</setting>
    <setting name="period">1 ms</setting>
  </event>
  <event name="jdk.NativeMethodSample">
    <setting name="enabled">true</setting>
    <setting name="period">1 ms</setting>
  </event>
  <event name="jdk.RetransformClasses">
    <setting name="enabled">true</setting>
    <setting name="threshold">0 ms</setting>
  </event>
  <event name="jdk.Compilation">
    <setting name="enabled">true</setting>
    <setting name="threshold">0 ms</setting>
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
#[cfg(test)]
fn jfr_self(
    recording: &Value,
    roots: &BTreeSet<String>,
    known: &BTreeSet<String>,
) -> (Vec<String>, usize) {
    let (inside, total, _) = jfr_self_timed(recording, roots, known);
    (inside.into_iter().map(|(k, _)| k).collect(), total)
}

/// Seconds of an event's `startTime` (`jfr print --json`: ISO 8601, as
/// `2026-11-30T02:10:11.123456789Z` or with an offset), counted from a
/// fixed day; None when it does not read as one. Every event of a
/// recording carries the same offset, so it is left out.
fn event_secs(e: &Value) -> Option<f64> {
    let t = e.get("values")?.get("startTime")?.as_str()?;
    let (date, time) = t.split_once('T')?;
    let mut d = date.split('-').map(|x| x.parse::<i64>());
    let (y, m, day) = (d.next()?.ok()?, d.next()?.ok()?, d.next()?.ok()?);
    // Days from a civil date (proleptic Gregorian).
    let (y2, m2) = if m <= 2 { (y - 1, m + 9) } else { (y, m - 3) };
    let days = 365 * y2 + y2 / 4 - y2 / 100 + y2 / 400 + (153 * m2 + 2) / 5 + day;
    let clock = time.split(['Z', '+', '-']).next()?;
    let mut c = clock.split(':');
    let (h, mi, sec) = (
        c.next()?.parse::<f64>().ok()?,
        c.next()?.parse::<f64>().ok()?,
        c.next()?.parse::<f64>().ok()?,
    );
    Some(days as f64 * 86_400.0 + h * 3600.0 + mi * 60.0 + sec)
}

/// Seconds of an event's `duration` (`jfr print --json`: ISO 8601, as
/// `PT0.095S` or `PT1M2.5S`).
fn event_duration(e: &Value) -> Option<f64> {
    let d = e
        .get("values")?
        .get("duration")?
        .as_str()?
        .strip_prefix("PT")?;
    let (min, sec) = match d.split_once('M') {
        Some((m, rest)) => (m.parse::<f64>().ok()?, rest),
        None => (0.0, d),
    };
    let sec = match sec.strip_suffix('S') {
        Some(x) => x.parse::<f64>().ok()?,
        None => 0.0,
    };
    Some(min * 60.0 + sec)
}

/// [`jfr_self`] with each sample's time (seconds, [`event_secs`]; NaN
/// when it has none), and also the times of the recording's
/// RetransformClasses events and its compilations of methods in `known`
/// (time, `class::method`).
#[cfg(test)]
fn jfr_self_timed(
    recording: &Value,
    roots: &BTreeSet<String>,
    known: &BTreeSet<String>,
) -> (Vec<(String, f64)>, usize, Events) {
    let mut acc = JfrAcc::default();
    let recs = recording
        .get("recording")
        .and_then(|r| r.get("events"))
        .and_then(Value::as_array);
    for e in recs.into_iter().flatten() {
        acc.take(e, roots, known);
    }
    acc.finish()
}

/// What [`jfr_self_timed`] gathers, one event at a time (a recording's
/// events are read as they come: `jfr print --json` of a javac window
/// runs to gigabytes).
#[derive(Default)]
struct JfrAcc {
    inside: Vec<(String, f64)>,
    total: usize,
    events: Events,
}

impl JfrAcc {
    fn take(&mut self, e: &Value, roots: &BTreeSet<String>, known: &BTreeSet<String>) {
        match e.get("type").and_then(Value::as_str) {
            Some("jdk.RetransformClasses") => {
                // The window begins when the redefinition is done.
                if let Some(t) = event_secs(e) {
                    self.events
                        .switches
                        .push(t + event_duration(e).unwrap_or(0.0));
                }
                return;
            }
            Some("jdk.Compilation") => {
                let m = e.get("values").and_then(frame_key);
                if let (Some(t), Some(m)) = (event_secs(e), m)
                    && known.contains(&m)
                {
                    self.events.compiles.push(t);
                }
                return;
            }
            _ => {}
        }
        let Some(frames) = e
            .get("values")
            .and_then(|v| v.get("stackTrace"))
            .and_then(|s| s.get("frames"))
            .and_then(Value::as_array)
        else {
            return;
        };
        self.total += 1;
        let keys: Vec<Option<String>> = frames.iter().map(frame_key).collect();
        // frames[0] is the top of the stack; the root's outermost frame is
        // the last one that matches.
        let Some(ri) = keys
            .iter()
            .rposition(|k| k.as_ref().is_some_and(|k| roots.contains(k)))
        else {
            return;
        };
        if let Some(k) = keys[..=ri]
            .iter()
            .flatten()
            .find(|k| known.contains(k.as_str()))
        {
            self.inside
                .push((k.clone(), event_secs(e).unwrap_or(f64::NAN)));
        }
    }

    fn finish(mut self) -> (Vec<(String, f64)>, usize, Events) {
        self.events.switches.sort_by(f64::total_cmp);
        self.events.compiles.sort_by(f64::total_cmp);
        (self.inside, self.total, self.events)
    }
}

/// A recording's RetransformClasses events and its compilations of the
/// tree's methods, in seconds ([`event_secs`]), sorted.
#[derive(Default)]
struct Events {
    switches: Vec<f64>,
    compiles: Vec<f64>,
}

/// Upper ends (ms) of the bins of time since a silent window's switch.
const SINCE_SWITCH_MS: [f64; 6] = [100.0, 250.0, 500.0, 1000.0, 2000.0, f64::INFINITY];

/// A gap between two RetransformClasses events at least this long is a
/// silent window of windows timing's original-bytes silence (its counting
/// windows are far shorter: `--windows` 50,950 or 200,4800).
const SILENT_GAP_S: f64 = 0.4;

/// Where `t` falls among the switches: the time since the one before, when
/// the gap to the next one (or the recording's end) is a silent window's.
fn since_silent_switch(switches: &[f64], t: f64, end: f64) -> Option<f64> {
    let i = switches.partition_point(|&s| s <= t);
    let prev = *switches.get(i.checked_sub(1)?)?;
    let next = switches.get(i).copied().unwrap_or(end);
    (next - prev >= SILENT_GAP_S).then_some(t - prev)
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
    /// Each of `inside`'s times (seconds).
    times: Vec<f64>,
    events: Events,
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

    /// With original-bytes silence: this recording's samples in silent
    /// windows, by the time since the window's switch, against `bare`'s
    /// samples (what the program is while the JIT recompiles after a
    /// switch, and once it has settled), and the compilations of the
    /// tree's methods by the same time. Null without switches.
    fn since_switch(&self, bare: &JfrWindow) -> Value {
        let sw = &self.events.switches;
        if sw.is_empty() {
            return Value::Null;
        }
        let end = self.times.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let bare_c = counts(&bare.inside);
        let bin = |age: f64| SINCE_SWITCH_MS.iter().position(|&b| age * 1000.0 < b);
        let mut bins: Vec<Vec<String>> = vec![Vec::new(); SINCE_SWITCH_MS.len()];
        let mut compiles = vec![0u64; SINCE_SWITCH_MS.len()];
        let mut aged: Vec<(f64, &String)> = Vec::new();
        for (k, &t) in self.inside.iter().zip(&self.times) {
            if let Some(age) = since_silent_switch(sw, t, end) {
                if let Some(b) = bin(age) {
                    bins[b].push(k.clone());
                }
                aged.push((age, k));
            }
        }
        let mut outside = 0u64;
        for &t in &self.events.compiles {
            match since_silent_switch(sw, t, end).and_then(bin) {
                Some(b) => compiles[b] += 1,
                None => outside += 1,
            }
        }
        let mut lo = 0.0;
        let rows: Vec<Value> = SINCE_SWITCH_MS
            .iter()
            .zip(bins.iter().zip(&compiles))
            .map(|(&hi, (keys, &n))| {
                let r = json!({
                    "from_ms": lo,
                    "to_ms": if hi.is_finite() { json!(hi) } else { Value::Null },
                    "samples_in_root": keys.len(),
                    "overlap_with_bare": overlap(&counts(keys), &bare_c),
                    "compilations": n,
                });
                lo = hi;
                r
            })
            .collect();
        let settled: Vec<Value> = [0.0, 250.0, 500.0, 1000.0]
            .iter()
            .map(|&from| {
                let keys: Vec<String> = aged
                    .iter()
                    .filter(|(a, _)| *a * 1000.0 >= from)
                    .map(|(_, k)| (*k).clone())
                    .collect();
                json!({"from_ms": from, "samples_in_root": keys.len(),
                       "overlap_with_bare": overlap(&counts(&keys), &bare_c)})
            })
            .collect();
        json!({
            "switches": sw.len(),
            "bins": rows,
            "settled": settled,
            "compilations_outside_silent_windows": outside,
            "bare_compilations": bare.events.compiles.len(),
        })
    }
}

/// (workload, row, iterations measured quick, full, run only when
/// `--rows` names it).
const JFR_ROWS: [(&str, &str, usize, usize, bool); 5] = [
    ("javac", "partial", 15, 30, false),
    ("h2", "statement", 40, 100, false),
    // A Lucene iteration is about as long as an H2 one.
    ("lucene", "document", 40, 100, false),
    // The same work under a root above the loop that `document`'s root
    // holds (windows timing wants counting windows longer than an
    // iteration, `--sprig-arg=--windows=...`).
    ("lucene", "whole", 40, 100, true),
    // Jetty's iteration is about 10 ms: as long a window as H2's.
    ("jetty", "server", 120, 300, false),
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
    for (wl, label, kq, kf, named_only) in JFR_ROWS {
        let named = ctx.rows.iter().any(|r| r == label);
        if !named && (named_only || !ctx.rows.is_empty()) {
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
        let r = def.root(label)?;
        let k = if ctx.quick { kq } else { kf };
        // The bare window is as long whatever the mode.
        let k_bare = k;
        let mut jvm = workloads::start_jvm(
            ctx,
            &def,
            &super::jfr_truth_jvm_args(),
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
                    "sprig-bench: jfr: {wl} {label}, timing {mode}, repeat {}/{}: JFR over {} bare iterations and {k} more (the control), then sprig and JFR over {k} profiled ones",
                    rep + 1,
                    ctx.repeats,
                    k_bare * BARE_WINDOWS
                );
                let name = format!("jfr-{wl}-{mode}-{}", rep + 1);
                let rec_bare = ctx.env.scratch.path.join(format!("{name}-bare.jfr"));
                let rec_prof = ctx.env.scratch.path.join(format!("{name}-profiled.jfr"));
                let rec_again = ctx.env.scratch.path.join(format!("{name}-bare-again.jfr"));
                // The bare window; its samples are charged once sprig's
                // tree (which methods it holds) is known.
                jfr_start(ctx, pid, &jfc, &rec_bare)?;
                iter(&mut jvm, k_bare * BARE_WINDOWS, def.iteration_bound)?;
                jfr_stop(ctx, pid)?;
                // The control: as many bare iterations as the profiled
                // window, right after (what drift and JFR's own noise give
                // at that length, with no sprig).
                jfr_start(ctx, pid, &jfc, &rec_again)?;
                iter(&mut jvm, k, def.iteration_bound)?;
                jfr_stop(ctx, pid)?;
                let sargs = SprigArgs {
                    roots: r.roots.clone(),
                    include: r.include.clone(),
                    exclude: vec![],
                    scheme: "lazy".into(),
                    timing: Some(mode.clone()),
                    // `--sprig-arg=--interval=...` (the timer's signals
                    // every second: the program without them) wins.
                    interval_ms: (windows && !crate::proc::extra_sprig_arg_given("--interval"))
                        .then_some(WINDOWS_INTERVAL_MS),
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
                let again = read_jfr(ctx, &rec_again, &roots, &known)?;
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
                    // The control: bare again, as long as the profiled window.
                    "jfr_bare_again_vs_bare": overlap(&counts(&again.inside), &counts(&bare.inside)),
                    "jfr_bare_again_samples_in_root": again.inside.len(),
                    // Original-bytes silence: the program JFR sees by the
                    // time since each switch into a silent window.
                    "jfr_profiled_since_switch": prof.since_switch(&bare),
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
                let _ = std::fs::remove_file(&rec_again);
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
    let mut acc = JfrAcc::default();
    super::jfr_stream::each_event(
        &ctx.env.jdk,
        &[
            "print".into(),
            "--json".into(),
            // `jfr print` shows 5 frames a stack unless told otherwise.
            "--stack-depth".into(),
            "2048".into(),
            "--events".into(),
            "jdk.ExecutionSample,jdk.NativeMethodSample,jdk.RetransformClasses,jdk.Compilation"
                .into(),
            rec.display().to_string(),
        ],
        |e| acc.take(&e, roots, known),
    )?;
    let (timed, total, events) = acc.finish();
    let (inside, times) = timed.into_iter().unzip();
    Ok(JfrWindow {
        inside,
        times,
        events,
        total,
    })
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
    fn event_times_and_the_silent_window_a_sample_falls_in() {
        let at = |t: &str| json!({"values": {"startTime": t, "duration": "PT0.25S"}});
        let a = event_secs(&at("2026-11-30T23:59:59.5Z")).unwrap();
        let b = event_secs(&at("2026-12-01T00:00:00.75+01:00")).unwrap();
        assert!((b - a - 1.25).abs() < 1e-6, "{a} {b}");
        assert_eq!(event_duration(&at("x")), Some(0.25));
        assert!(event_secs(&json!({"values": {}})).is_none());
        // Switches at 10 (into a counting window, 0.1 s long) and 10.1
        // (into a silent one, till 11.1), then 11.1 and 11.2.
        let sw = [10.0, 10.1, 11.1, 11.2];
        assert_eq!(since_silent_switch(&sw, 10.05, 20.0), None);
        assert!((since_silent_switch(&sw, 10.6, 20.0).unwrap() - 0.5).abs() < 1e-9);
        assert_eq!(since_silent_switch(&sw, 9.0, 20.0), None);
        // The last window runs to the recording's end.
        assert!((since_silent_switch(&sw, 11.7, 12.0).unwrap() - 0.5).abs() < 1e-9);
        assert_eq!(since_silent_switch(&sw, 11.3, 11.4), None);
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
