//! What the agent's control messages mean for the session itself,
//! whatever its work: the roots instrumented (profiling begins) or not
//! found, the agent's counts, warnings, errors and the detach.

use std::time::{Duration, Instant};

use sprig::pattern::{MethodPattern, excluded_by};
use sprig_wire::Message;
use sprig_wire::control::AgentStats;

use super::state::{End, Phase, jvm_gone_within};
use super::status::Status;

/// Whether `msg` carries the agent's counts.
pub(super) fn carries_stats(msg: &Message) -> bool {
    matches!(msg, Message::Status(_) | Message::Detached(_))
}

/// What the control messages tell the session loop.
#[derive(Debug)]
pub(super) struct Control {
    pub(super) phase: Phase,
    /// The agent's latest counts.
    pub(super) stats: AgentStats,
    /// Whether the agent's counts (`Status`, `Detached`) ever arrived.
    pub(super) stats_seen: bool,
    /// Whether its final counts (`Detached`) arrived.
    pub(super) final_counts: bool,
    pub(super) profiling_since: Option<Instant>,
    announced_roots: bool,
    /// The `--exclude` patterns, to explain a root they leave out.
    excludes: Vec<String>,
    /// A root pattern whose class was not loaded, with its near matches:
    /// said again at the end of a session that recorded no root call.
    pub(super) root_hint: Option<String>,
    /// The warnings printed so far: each is printed once.
    warned: std::collections::HashSet<String>,
}

impl Control {
    pub(super) fn new(excludes: Vec<String>) -> Control {
        Control {
            phase: Phase::Starting,
            stats: AgentStats::default(),
            stats_seen: false,
            final_counts: false,
            profiling_since: None,
            announced_roots: false,
            excludes,
            root_hint: None,
            warned: std::collections::HashSet::new(),
        }
    }

    pub(super) fn start_profiling(&mut self) {
        if self.phase == Phase::Starting {
            self.phase = Phase::Profiling;
            self.profiling_since = Some(Instant::now());
        }
    }

    /// Takes the counts `msg` carries, if any: for the messages read
    /// while the session settles, which say nothing more to it.
    pub(super) fn take_counts(&mut self, msg: Message) {
        self.stats_seen |= carries_stats(&msg);
        self.final_counts |= matches!(msg, Message::Detached(_));
        if let Message::Status(s) | Message::Detached(s) = msg {
            self.stats = s;
        }
    }

    /// The `--exclude` pattern that covers the classes of every near match
    /// the agent gave for a root it found no method for, when the root's
    /// class pattern matches them all: the root is excluded, not missing.
    fn excluding_all(&self, pattern: &str, suggestions: &[String]) -> Option<&str> {
        let root = MethodPattern::parse(pattern).ok()?;
        let mut found = None;
        for s in suggestions {
            let class = s.split("::").next().unwrap_or(s);
            if !root.matches_class(class) {
                return None;
            }
            found = Some(excluded_by(class, &self.excludes)?);
        }
        found
    }

    /// What the session loop itself does with a control message (the
    /// session's work has already taken what it needs). Returns how the
    /// session ended, if it did.
    pub(super) fn on_message(
        &mut self,
        msg: Message,
        status: &mut Status,
        pid: u32,
    ) -> Option<End> {
        self.stats_seen |= carries_stats(&msg);
        self.final_counts |= matches!(msg, Message::Detached(_));
        match msg {
            Message::RootInstrumented {
                pattern,
                methods: n,
            } => {
                self.root_hint = None;
                if !self.announced_roots {
                    self.announced_roots = true;
                    status.line(&format!(
                        "sprig: profiling JVM {pid}: root {pattern}: {n} root method{} instrumented; \
                         what the roots call is instrumented as it runs",
                        if n == 1 { "" } else { "s" }
                    ));
                }
                self.start_profiling();
            }
            Message::RootNotFound {
                pattern,
                class_loaded,
                suggestions,
            } => {
                if class_loaded {
                    if let Some(p) = self.excluding_all(&pattern, &suggestions) {
                        return Some(End::AgentError(format!(
                            "root {pattern} matches only classes excluded by --exclude {p}"
                        )));
                    }
                    let near = if suggestions.is_empty() {
                        String::new()
                    } else {
                        format!("; near matches: {}", suggestions.join(", "))
                    };
                    return Some(End::AgentError(format!(
                        "root {pattern} matches no method of the loaded classes{near}"
                    )));
                }
                // Suggestions name loaded classes close to the pattern's class.
                let mut classes: Vec<&str> = suggestions
                    .iter()
                    .map(|s| s.split("::").next().unwrap_or(s))
                    .collect();
                classes.dedup();
                let near = if classes.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (loaded classes with similar names: {})",
                        classes.join(", ")
                    )
                };
                status.line(&format!(
                    "sprig: root {pattern} matches no loaded class yet; it is instrumented when its class loads{near}"
                ));
                self.root_hint = Some(format!("the class of root {pattern} never loaded{near}"));
                self.start_profiling();
            }
            Message::Status(s) => self.stats = s,
            Message::ClassFailed(f) => {
                let err = if f.jvmti_error.is_empty() {
                    String::new()
                } else {
                    format!("{}: ", f.jvmti_error)
                };
                status.line(&format!(
                    "sprig: warning: class {} left uninstrumented: {err}{}",
                    f.class, f.reason
                ));
            }
            Message::Warning(w) if self.warned.insert(w.clone()) => {
                status.line(&format!("sprig: warning: {w}"));
            }
            Message::Error(e) => return Some(End::AgentError(e)),
            Message::Detached(s) => {
                self.stats = s;
                // Not asked for: the agent ended the session itself. When the
                // JVM is exiting it may still get its `Detached` out before the
                // process goes; that is an early end, not a normal detach.
                if self.phase != Phase::Detaching && jvm_gone_within(pid, Duration::from_secs(2)) {
                    return Some(End::JvmExited(format!("JVM {pid} exited")));
                }
                return Some(End::Detached);
            }
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::status::tests::Captured;

    #[test]
    fn agent_messages_are_printed_with_control_characters_escaped() {
        let captured = Captured::default();
        let mut status = Status::to(Box::new(captured.clone()), false);
        let mut control = Control::new(Vec::new());
        let esc = "a.B\u{1b}]0;t\u{7}";
        for msg in [
            Message::RootInstrumented {
                pattern: format!("{esc}::run"),
                methods: 1,
            },
            Message::RootNotFound {
                pattern: format!("{esc}::x"),
                class_loaded: false,
                suggestions: vec![format!("{esc}::y")],
            },
            Message::Warning(format!("class {esc} \u{9b}")),
            Message::ClassFailed(sprig_wire::control::ClassFailure {
                class: esc.into(),
                jvmti_error: "E\u{1b}".into(),
                reason: "r\r".into(),
            }),
        ] {
            let end = control.on_message(msg, &mut status, 1);
            assert!(end.is_none());
        }
        let text = String::from_utf8(captured.0.borrow().clone()).unwrap();
        assert_eq!(text.lines().count(), 4, "{text}");
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
        assert!(
            text.contains("warning: class a.B\\x1b]0;t\\x07 \\u{9b}"),
            "{text}"
        );
    }

    #[test]
    fn each_warning_is_printed_once_and_a_missing_class_is_kept_as_the_hint() {
        let captured = Captured::default();
        let mut status = Status::to(Box::new(captured.clone()), false);
        let mut control = Control::new(Vec::new());
        for _ in 0..2 {
            control.on_message(
                Message::Warning("first redefinition".into()),
                &mut status,
                1,
            );
        }
        control.on_message(Message::Warning("another".into()), &mut status, 1);
        control.on_message(
            Message::RootNotFound {
                pattern: "a.Bz::run".into(),
                class_loaded: false,
                suggestions: vec!["a.B::run".into()],
            },
            &mut status,
            1,
        );
        let text = String::from_utf8(captured.0.borrow().clone()).unwrap();
        assert_eq!(text.matches("first redefinition").count(), 1, "{text}");
        assert_eq!(text.matches("another").count(), 1, "{text}");
        assert_eq!(
            control.root_hint.as_deref(),
            Some(
                "the class of root a.Bz::run never loaded (loaded classes with similar names: a.B)"
            )
        );
        // The class loads after all: nothing to repeat.
        control.on_message(
            Message::RootInstrumented {
                pattern: "a.Bz::run".into(),
                methods: 1,
            },
            &mut status,
            1,
        );
        assert_eq!(control.root_hint, None);
    }

    #[test]
    fn a_root_whose_classes_are_all_excluded_says_so() {
        let captured = Captured::default();
        let mut status = Status::to(Box::new(captured.clone()), false);
        let mut control = Control::new(vec!["com.acme.**".into()]);
        // The agent finds the root's classes loaded but may not instrument
        // them: its near matches are the root's own methods.
        let end = control.on_message(
            Message::RootNotFound {
                pattern: "com.acme.*::run".into(),
                class_loaded: true,
                suggestions: vec!["com.acme.A::run".into(), "com.acme.B::run".into()],
            },
            &mut status,
            1,
        );
        match end {
            Some(End::AgentError(why)) => assert_eq!(
                why,
                "root com.acme.*::run matches only classes excluded by --exclude com.acme.**"
            ),
            _ => panic!("not an error"),
        }
        // A near match outside the excluded classes is still shown as one.
        let end = control.on_message(
            Message::RootNotFound {
                pattern: "com.acme.*::run".into(),
                class_loaded: true,
                suggestions: vec!["org.other.A::run".into()],
            },
            &mut status,
            1,
        );
        match end {
            Some(End::AgentError(why)) => assert_eq!(
                why,
                "root com.acme.*::run matches no method of the loaded classes; near matches: org.other.A::run"
            ),
            _ => panic!("not an error"),
        }
    }
}
