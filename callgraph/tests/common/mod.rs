//! Shared helpers of the callgraph integration tests: a small text format
//! for synthetic event streams (the files under `tests/data/`), a JSON
//! reader to check the JSON report's schema, and golden-file comparison.
//!
//! Event script lines (`#` starts a comment):
//!
//! ```text
//! ticks_per_sec 1000000000
//! clock tsc|monotonic|thread-cpu
//! target <pid> <jvm text...>
//! stats <instrumented> <called> <lost> <duration_ms>
//! calibration <inner_ns> <outer_ns>
//! method <id> <class> <name> <descriptor>
//! thread <index> <java_id> <name...>
//! option min_percent=<f> | max_depth=<n> | merged | hot_spots=<n> | back_trace=<id> | thread_frames
//! <thread> root|enter|exit|root_exit <method id> <ts>
//! <thread> adjust <ticks>
//! <thread> thread_start|thread_end <ts>
//! timing exact|sampled
//! <thread> sample <weight>
//! ```
//!
//! With `timing sampled` each thread's events are one stream (claim number
//! = thread index) fed with `process_run`, and a `sample` line is a sample
//! of the thread's position at that line, worth `weight` ticks; all samples
//! are given before the first event (ahead of their events).
#![allow(dead_code)]

use sprig_callgraph::{Calibration, CctBuilder, PositionSample, Profile, RenderOptions, Timing};
use sprig_wire::control::{ClockKind, Message};
use sprig_wire::event::{Event, EventKind};
use sprig_wire::ring::Run;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

pub fn results_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/results")
}

/// Every `*.events` file under `tests/data`, sorted.
pub fn scripts() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(data_dir())
        .expect("tests/data")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "events"))
        .collect();
    v.sort();
    v
}

pub struct Script {
    pub profile: Profile,
    pub opts: RenderOptions,
}

/// Replays an event script through the builder.
pub fn load(path: &Path) -> Script {
    let text = std::fs::read_to_string(path).expect("read script");
    parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn parse(text: &str) -> Result<Script, String> {
    let mut tps = 1_000_000_000u64;
    let mut header: Vec<(usize, Vec<String>)> = Vec::new();
    let mut events: Vec<(usize, Vec<String>)> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let words: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
        if words[0] == "ticks_per_sec" {
            tps = words
                .get(1)
                .and_then(|w| w.parse().ok())
                .ok_or(format!("line {}: ticks_per_sec", n + 1))?;
        } else if words[0].chars().all(|c| c.is_ascii_digit()) {
            events.push((n + 1, words));
        } else {
            header.push((n + 1, words));
        }
    }
    let mut b = CctBuilder::new(tps);
    let mut opts = RenderOptions::default();
    let mut stats = None;
    let mut target = None;
    for (n, w) in &header {
        let num = |i: usize| -> Result<u64, String> {
            w.get(i)
                .and_then(|x| x.parse().ok())
                .ok_or(format!("line {n}: number expected in field {i}"))
        };
        let float = |i: usize| -> Result<f64, String> {
            w.get(i)
                .and_then(|x| x.parse().ok())
                .ok_or(format!("line {n}: float expected in field {i}"))
        };
        match w[0].as_str() {
            "target" => target = Some((num(1)? as u32, w[2..].join(" "))),
            "stats" => stats = Some((num(1)?, num(2)?, num(3)?, num(4)?)),
            "clock" => {
                let clock = match w.get(1).map(String::as_str) {
                    Some("tsc") => ClockKind::Tsc,
                    Some("monotonic") => ClockKind::Monotonic,
                    Some("thread-cpu") => ClockKind::ThreadCpu,
                    _ => return Err(format!("line {n}: clock tsc|monotonic|thread-cpu")),
                };
                b.apply_message(&Message::Started {
                    clock,
                    ticks_per_sec: tps,
                });
            }
            "calibration" => b.set_calibration(Calibration::new(float(1)?, float(2)?)),
            "timing" => b.set_timing(match w.get(1).map(String::as_str) {
                Some("exact") => Timing::Exact,
                Some("sampled") => Timing::Sampled,
                _ => return Err(format!("line {n}: timing exact|sampled")),
            }),
            "method" if w.len() == 5 => b.set_method(num(1)? as u32, &w[2], &w[3], &w[4]),
            "thread" => b.set_thread_name(num(1)? as u32, num(2)?, &w[3..].join(" ")),
            "option" => {
                let (k, v) = w[1].split_once('=').unwrap_or((&w[1], ""));
                match k {
                    "min_percent" => opts.min_percent = v.parse().map_err(|_| "min_percent")?,
                    "max_depth" => opts.max_depth = Some(v.parse().map_err(|_| "max_depth")?),
                    "merged" => opts.merged = true,
                    "hot_spots" => opts.hot_spots = v.parse().map_err(|_| "hot_spots")?,
                    "back_trace" => opts.back_traces.push(v.parse().map_err(|_| "back_trace")?),
                    "thread_frames" => opts.thread_frames = true,
                    _ => return Err(format!("line {n}: unknown option {k}")),
                }
            }
            _ => return Err(format!("line {n}: cannot read {w:?}")),
        }
    }
    // Consecutive events of one thread go in one batch, like the ring hands them.
    let mut batch: Vec<Event> = Vec::new();
    let mut batch_thread = None;
    let sampled = b.timing() == Timing::Sampled;
    // events of each thread so far: where a sample stands
    let mut seen: HashMap<u32, u32> = HashMap::new();
    let mut samples = Vec::new();
    let mut runs: Vec<(Run, Vec<Event>)> = Vec::new();
    type Runs = Vec<(Run, Vec<Event>)>;
    let feed = |b: &mut CctBuilder,
                seen: &mut HashMap<u32, u32>,
                runs: &mut Runs,
                thread: u32,
                batch: &[Event]| {
        if sampled {
            let start = seen.entry(thread).or_insert(0);
            let run = Run {
                thread,
                claim: u64::from(thread),
                start: *start,
            };
            *start += batch.len() as u32;
            runs.push((run, batch.to_vec()));
        } else {
            b.process(thread, batch);
        }
    };
    for (n, w) in &events {
        let thread: u32 = w[0].parse().map_err(|_| format!("line {n}: thread"))?;
        let num = |i: usize| -> Result<u64, String> {
            w.get(i)
                .and_then(|x| x.parse().ok())
                .ok_or(format!("line {n}: number expected in field {i}"))
        };
        let kind = w.get(1).map(String::as_str).unwrap_or("");
        if kind == "sample" {
            // the thread's events so far, those of the open batch included
            let before = seen.get(&thread).copied().unwrap_or(0);
            let open = if batch_thread == Some(thread) {
                batch.len() as u32
            } else {
                0
            };
            samples.push(PositionSample {
                thread,
                claim: u64::from(thread),
                index: before + open,
                ts: 0,
                weight: num(2)?,
            });
            continue;
        }
        let e = match kind {
            "root" => Event::new(EventKind::RootEntry, num(2)? as u32, num(3)?),
            "enter" => Event::new(EventKind::MethodEntry, num(2)? as u32, num(3)?),
            "exit" => Event::new(EventKind::MethodExit, num(2)? as u32, num(3)?),
            "root_exit" => Event::new(EventKind::RootExit, num(2)? as u32, num(3)?),
            "adjust" => Event::new(EventKind::AdjustTime, 0, num(2)?),
            "thread_start" => Event::new(EventKind::ThreadStart, thread, num(2)?),
            "thread_end" => Event::new(EventKind::ThreadEnd, thread, num(2)?),
            _ => return Err(format!("line {n}: unknown event kind {kind:?}")),
        };
        if batch_thread != Some(thread) {
            if let Some(t) = batch_thread {
                feed(&mut b, &mut seen, &mut runs, t, &batch);
            }
            batch.clear();
            batch_thread = Some(thread);
        }
        batch.push(e);
    }
    if let Some(t) = batch_thread {
        feed(&mut b, &mut seen, &mut runs, t, &batch);
    }
    b.add_samples(&samples);
    for (run, events) in runs {
        b.process_run(run, &events);
    }
    {
        let (target_slot, stats_slot) = b.profile_fields_mut();
        if let Some((pid, jvm)) = target {
            target_slot.pid = pid;
            target_slot.jvm = jvm;
        }
        if let Some((i, c, l, d)) = stats {
            stats_slot.instrumented_methods = i;
            stats_slot.called_methods = c;
            stats_slot.lost_events = l;
            stats_slot.duration_ms = d;
        }
    }
    Ok(Script {
        profile: b.finish(),
        opts,
    })
}

/// Compares `actual` with `tests/results/<name>`; with `SPRIG_BLESS=1`
/// writes it instead. On mismatch the actual output is saved next to the
/// expected one as `<name>.actual` and the error names both files.
pub fn golden(name: &str, actual: &[u8]) -> Result<(), String> {
    let expected_path = results_dir().join(name);
    let actual_path = results_dir().join(format!("{name}.actual"));
    if std::env::var_os("SPRIG_BLESS").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(results_dir()).map_err(|e| e.to_string())?;
        std::fs::write(&expected_path, actual).map_err(|e| e.to_string())?;
        let _ = std::fs::remove_file(&actual_path);
        return Ok(());
    }
    let expected = std::fs::read(&expected_path).unwrap_or_default();
    if expected == actual {
        let _ = std::fs::remove_file(&actual_path);
        return Ok(());
    }
    std::fs::write(&actual_path, actual).map_err(|e| e.to_string())?;
    Err(format!(
        "{} differs from {} (re-bless with SPRIG_BLESS=1 if the change is intended)",
        actual_path.display(),
        expected_path.display()
    ))
}

/// A parsed JSON value (numbers kept as their text).
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
    pub fn keys(&self) -> Vec<&str> {
        match self {
            Json::Obj(fields) => fields.iter().map(|(k, _)| k.as_str()).collect(),
            _ => Vec::new(),
        }
    }
    pub fn arr(&self) -> &[Json] {
        match self {
            Json::Arr(v) => v,
            _ => &[],
        }
    }
    pub fn u64(&self) -> Option<u64> {
        match self {
            Json::Num(n) => n.parse().ok(),
            _ => None,
        }
    }
    pub fn str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// A strict JSON reader (RFC 8259 syntax), iterative so deep documents
/// cannot overflow the stack.
pub fn parse_json(text: &str) -> Result<Json, String> {
    enum Open {
        Arr(Vec<Json>),
        Obj(Vec<(String, Json)>, Option<String>),
    }
    let b = text.as_bytes();
    let mut i = 0usize;
    let ws = |i: &mut usize| {
        while *i < b.len() && matches!(b[*i], b' ' | b'\n' | b'\r' | b'\t') {
            *i += 1;
        }
    };
    let string = |i: &mut usize| -> Result<String, String> {
        // at the opening quote
        *i += 1;
        let mut s = String::new();
        loop {
            let c = *b.get(*i).ok_or("unterminated string")?;
            match c {
                b'"' => {
                    *i += 1;
                    return Ok(s);
                }
                b'\\' => {
                    let e = *b.get(*i + 1).ok_or("bad escape")?;
                    *i += 2;
                    match e {
                        b'"' => s.push('"'),
                        b'\\' => s.push('\\'),
                        b'/' => s.push('/'),
                        b'b' => s.push('\u{8}'),
                        b'f' => s.push('\u{c}'),
                        b'n' => s.push('\n'),
                        b'r' => s.push('\r'),
                        b't' => s.push('\t'),
                        b'u' => {
                            let h = text.get(*i..*i + 4).ok_or("bad \\u")?;
                            let v = u32::from_str_radix(h, 16).map_err(|_| "bad \\u")?;
                            s.push(char::from_u32(v).ok_or("surrogate in \\u")?);
                            *i += 4;
                        }
                        _ => return Err(format!("bad escape \\{}", e as char)),
                    }
                }
                0..=0x1f => return Err("control character in string".into()),
                _ => {
                    let start = *i;
                    while *i < b.len() && b[*i] != b'"' && b[*i] != b'\\' && b[*i] >= 0x20 {
                        *i += 1;
                    }
                    s.push_str(&text[start..*i]);
                }
            }
        }
    };
    let mut stack: Vec<Open> = Vec::new();
    loop {
        ws(&mut i);
        // expecting a value (or the end of an empty container)
        let c = *b.get(i).ok_or("unexpected end")?;
        let value = match c {
            b'{' => {
                i += 1;
                ws(&mut i);
                if b.get(i) == Some(&b'}') {
                    i += 1;
                    Json::Obj(Vec::new())
                } else {
                    if b.get(i) != Some(&b'"') {
                        return Err(format!("key expected at {i}"));
                    }
                    let k = string(&mut i)?;
                    ws(&mut i);
                    if b.get(i) != Some(&b':') {
                        return Err(format!("':' expected at {i}"));
                    }
                    i += 1;
                    stack.push(Open::Obj(Vec::new(), Some(k)));
                    continue;
                }
            }
            b'[' => {
                i += 1;
                ws(&mut i);
                if b.get(i) == Some(&b']') {
                    i += 1;
                    Json::Arr(Vec::new())
                } else {
                    stack.push(Open::Arr(Vec::new()));
                    continue;
                }
            }
            b'"' => Json::Str(string(&mut i)?),
            b't' if text[i..].starts_with("true") => {
                i += 4;
                Json::Bool(true)
            }
            b'f' if text[i..].starts_with("false") => {
                i += 5;
                Json::Bool(false)
            }
            b'n' if text[i..].starts_with("null") => {
                i += 4;
                Json::Null
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                if b[i] == b'-' {
                    i += 1;
                }
                let digits = |i: &mut usize| {
                    let s = *i;
                    while *i < b.len() && b[*i].is_ascii_digit() {
                        *i += 1;
                    }
                    *i > s
                };
                if b.get(i) == Some(&b'0') {
                    i += 1;
                } else if !digits(&mut i) {
                    return Err(format!("bad number at {start}"));
                }
                if b.get(i) == Some(&b'.') {
                    i += 1;
                    if !digits(&mut i) {
                        return Err(format!("bad fraction at {start}"));
                    }
                }
                if matches!(b.get(i), Some(b'e' | b'E')) {
                    i += 1;
                    if matches!(b.get(i), Some(b'+' | b'-')) {
                        i += 1;
                    }
                    if !digits(&mut i) {
                        return Err(format!("bad exponent at {start}"));
                    }
                }
                Json::Num(text[start..i].to_owned())
            }
            _ => return Err(format!("unexpected {:?} at {i}", c as char)),
        };
        // attach the value, closing containers as far as they end
        let mut value = value;
        loop {
            match stack.last_mut() {
                None => {
                    ws(&mut i);
                    if i != b.len() {
                        return Err(format!("trailing text at {i}"));
                    }
                    return Ok(value);
                }
                Some(Open::Arr(items)) => {
                    items.push(value);
                    ws(&mut i);
                    match b.get(i) {
                        Some(b',') => {
                            i += 1;
                            break;
                        }
                        Some(b']') => {
                            i += 1;
                            let Some(Open::Arr(items)) = stack.pop() else {
                                unreachable!()
                            };
                            value = Json::Arr(items);
                        }
                        _ => return Err(format!("',' or ']' expected at {i}")),
                    }
                }
                Some(Open::Obj(fields, key)) => {
                    let k = key.take().ok_or("value without key")?;
                    if fields.iter().any(|(x, _)| *x == k) {
                        return Err(format!("duplicate key {k}"));
                    }
                    fields.push((k, value));
                    ws(&mut i);
                    match b.get(i) {
                        Some(b',') => {
                            i += 1;
                            ws(&mut i);
                            if b.get(i) != Some(&b'"') {
                                return Err(format!("key expected at {i}"));
                            }
                            let k = string(&mut i)?;
                            ws(&mut i);
                            if b.get(i) != Some(&b':') {
                                return Err(format!("':' expected at {i}"));
                            }
                            i += 1;
                            *key = Some(k);
                            break;
                        }
                        Some(b'}') => {
                            i += 1;
                            let Some(Open::Obj(fields, _)) = stack.pop() else {
                                unreachable!()
                            };
                            value = Json::Obj(fields);
                        }
                        _ => return Err(format!("',' or '}}' expected at {i}")),
                    }
                }
            }
        }
    }
}
