//! The reports of `sprig threads`: text for a person (the deadlocks first,
//! each thread with its stack and its locks, then every thread), JSON for
//! tools. Both read the last snapshot; the deadlocks are those every
//! snapshot showed (`model::deadlocks`).

use std::io::Write;

use anyhow::Result;
use serde_json::{Value, json};
use sprig_callgraph::report::escape::escape;
use sprig_wire::control::{DumpedThread, LockKind, LockRef, ThreadDump};

use super::model::{self, lock_name, owned_synchronizers, state_name, waits_for, why};

/// What the reports show.
pub struct Report<'a> {
    pub pid: u32,
    pub jvm: &'a str,
    pub dump: &'a ThreadDump,
    /// The deadlocks, each as the Java ids of its threads.
    pub deadlocks: &'a [Vec<u64>],
    pub snapshots: usize,
}

impl Report<'_> {
    fn thread(&self, id: u64) -> Option<&DumpedThread> {
        self.dump.threads.iter().find(|t| t.java_id == id)
    }

    fn thread_name(&self, id: u64) -> String {
        self.thread(id).map_or_else(
            || format!("thread {id}"),
            |t| format!("\"{}\"", escape(&t.name)),
        )
    }

    fn lock_text(&self, i: LockRef) -> String {
        self.dump
            .locks
            .get(i as usize)
            .map_or_else(|| "?".into(), |l| escape(&lock_name(l)).into_owned())
    }

    /// The lock with its owner, as JSON.
    fn lock_json(&self, i: LockRef) -> Value {
        let Some(l) = self.dump.locks.get(i as usize) else {
            return Value::Null;
        };
        json!({
            "class": l.class,
            "id": format!("{:08x}", l.hash as u32),
            "kind": match l.kind {
                LockKind::Monitor => "monitor",
                LockKind::Synchronizer => "synchronizer",
                LockKind::Blocker => "blocker",
            },
            "owner": l.owner.map(|o| json!({
                "id": o,
                "name": self.thread(o).map(|t| t.name.as_str()),
            })),
        })
    }

    /// What the thread waits for, in words: `waits to enter the monitor
    /// of X, held by "t"`.
    fn wait_text(&self, t: &DumpedThread) -> Option<String> {
        let held_by = |i: LockRef| {
            self.dump
                .locks
                .get(i as usize)
                .and_then(|l| l.owner)
                .map_or_else(String::new, |o| {
                    format!(", held by {}", self.thread_name(o))
                })
        };
        if let Some(i) = t.contended {
            let what = if model::blocked(t.state) {
                "waits to enter the monitor of"
            } else {
                "waits (Object.wait) on"
            };
            return Some(format!("{what} {}{}", self.lock_text(i), held_by(i)));
        }
        t.parked_on
            .map(|i| format!("is parked on {}{}", self.lock_text(i), held_by(i)))
    }

    /// One thread: its header line, its stack with the locks at the
    /// frames that hold them, the synchronizers it holds.
    fn write_thread(&self, t: &DumpedThread, out: &mut impl Write) -> Result<()> {
        let state = match why(t.state) {
            Some(w) => format!("{} ({})", state_name(t.state), w.replace('_', " ")),
            None => state_name(t.state).to_owned(),
        };
        writeln!(
            out,
            "\"{}\" id {}{} {}",
            escape(&t.name),
            t.java_id,
            if t.daemon { " daemon" } else { "" },
            state
        )?;
        for (depth, f) in t.frames.iter().enumerate() {
            let line = match f.line {
                -2 => " (native)".to_owned(),
                l if l > 0 => format!(":{l}"),
                _ => String::new(),
            };
            writeln!(
                out,
                "    at {}.{}{}",
                escape(&f.class),
                escape(&f.method),
                line
            )?;
            if depth == 0
                && let Some(w) = self.wait_text(t)
            {
                writeln!(out, "      - {w}")?;
            }
            for (i, d) in &t.owns {
                if usize::try_from(*d).ok() == Some(depth) {
                    writeln!(out, "      - holds {}", self.lock_text(*i))?;
                }
            }
        }
        if t.frames.is_empty()
            && let Some(w) = self.wait_text(t)
        {
            writeln!(out, "      - {w}")?;
        }
        if t.truncated {
            writeln!(out, "    ...")?;
        }
        for (i, d) in &t.owns {
            if *d < 0 || usize::try_from(*d).is_ok_and(|d| d >= t.frames.len()) {
                writeln!(
                    out,
                    "    holds {} (entered through JNI or deeper)",
                    self.lock_text(*i)
                )?;
            }
        }
        for i in owned_synchronizers(self.dump, t.java_id) {
            writeln!(out, "    holds {}", self.lock_text(i))?;
        }
        Ok(())
    }

    /// The text report.
    pub fn write_text(&self, out: &mut impl Write) -> Result<()> {
        writeln!(
            out,
            "JVM {} ({}): {} threads",
            self.pid,
            escape(self.jvm),
            self.dump.threads.len()
        )?;
        writeln!(out)?;
        if self.deadlocks.is_empty() {
            writeln!(
                out,
                "No deadlock (over {} snapshots of monitors and java.util.concurrent locks).",
                self.snapshots
            )?;
        }
        for (n, cycle) in self.deadlocks.iter().enumerate() {
            writeln!(
                out,
                "Deadlock {} of {}: {} threads, each waiting for a lock the next holds",
                n + 1,
                self.deadlocks.len(),
                cycle.len()
            )?;
            for id in cycle {
                if let Some(t) = self.thread(*id) {
                    writeln!(
                        out,
                        "  {} {}",
                        self.thread_name(*id),
                        self.wait_text(t).unwrap_or_default()
                    )?;
                }
            }
            writeln!(out)?;
            for id in cycle {
                if let Some(t) = self.thread(*id) {
                    self.write_thread(t, out)?;
                    writeln!(out)?;
                }
            }
        }
        writeln!(out)?;
        writeln!(out, "All threads:")?;
        writeln!(out)?;
        for t in &self.dump.threads {
            self.write_thread(t, out)?;
            writeln!(out)?;
        }
        Ok(())
    }

    /// The JSON report.
    pub fn write_json(&self, out: &mut impl Write) -> Result<()> {
        let threads: Vec<Value> = self
            .dump
            .threads
            .iter()
            .map(|t| {
                let blocked = model::blocked(t.state);
                json!({
                    "id": t.java_id,
                    "name": t.name,
                    "daemon": t.daemon,
                    "state": state_name(t.state),
                    "why": why(t.state),
                    "frames": t.frames.iter().map(|f| json!({
                        "class": f.class,
                        "method": f.method,
                        "descriptor": f.descriptor,
                        "line": f.line,
                    })).collect::<Vec<_>>(),
                    "truncated": t.truncated,
                    "owns": t.owns.iter().map(|(i, d)| json!({
                        "lock": self.lock_json(*i),
                        "depth": d,
                    })).collect::<Vec<_>>(),
                    "owns_synchronizers": owned_synchronizers(self.dump, t.java_id)
                        .into_iter()
                        .map(|i| self.lock_json(i))
                        .collect::<Vec<_>>(),
                    "blocked_on": t.contended.filter(|_| blocked).map(|i| self.lock_json(i)),
                    "waiting_on": t.contended.filter(|_| !blocked).map(|i| self.lock_json(i)),
                    "parked_on": t.parked_on.map(|i| self.lock_json(i)),
                })
            })
            .collect();
        let deadlocks: Vec<Value> = self
            .deadlocks
            .iter()
            .map(|cycle| {
                json!({
                    "threads": cycle.iter().filter_map(|id| {
                        let t = self.thread(*id)?;
                        let w = waits_for(self.dump, t)?;
                        Some(json!({
                            "id": id,
                            "name": t.name,
                            "waits_for": self.lock_json(w.lock),
                        }))
                    }).collect::<Vec<_>>(),
                })
            })
            .collect();
        let report = json!({
            "pid": self.pid,
            "jvm": self.jvm,
            "snapshots": self.snapshots,
            "snapshot_ms": self.dump.took_ns as f64 / 1e6,
            "threads": threads,
            "deadlocks": deadlocks,
        });
        serde_json::to_writer_pretty(&mut *out, &report)?;
        writeln!(out)?;
        Ok(())
    }
}
