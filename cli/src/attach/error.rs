//! Why an attach failed, in one line each: the error type, the stages an
//! attach waits in, and the sentences for the agent's return codes and the
//! JVM's own failure texts (with a hint where the user can do something).

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use super::reply::AGENT_FAILED;
use crate::jvm::JvmError;

/// Why loading the agent into a JVM failed. One line each.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error(transparent)]
    Jvm(#[from] JvmError),
    #[error("invalid {what}: {why}")]
    InvalidArgument { what: &'static str, why: String },
    #[error(
        "JVM {pid} does not accept attach (-XX:+DisableAttachMechanism?): start it with `sprig run ...` instead"
    )]
    AttachDisabled { pid: u32 },
    #[error(
        "JVM {pid} runs Java {version}: sprig supports HotSpot JDK {oldest} and later (tested on 11, 17, 21 and 25); nothing was loaded into it"
    )]
    TooOld {
        pid: u32,
        version: String,
        oldest: u32,
    },
    #[error(
        "JVM {pid} does not handle SIGQUIT (-Xrs?), so sprig cannot ask it to open its attach socket: start it with `sprig run ...` instead"
    )]
    NoSignalHandler { pid: u32 },
    #[error("JVM {pid} did not {stage} within {:.1} s{}", waited.as_secs_f64(), stage.hint())]
    Timeout {
        pid: u32,
        stage: Stage,
        waited: Duration,
    },
    #[error("{}", load_failure(*pid, *code, message))]
    AgentLoadFailed {
        pid: u32,
        code: Option<i32>,
        message: String,
    },
    #[error("attach protocol error with JVM {pid}: {detail}")]
    Protocol { pid: u32, detail: String },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
    #[error(
        "JVM {pid} cannot open its attach socket: {} is left from a dead JVM that had the same PID and belongs to uid {owner}, so the JVM may not replace it ({source}); remove it as root and retry",
        path.display()
    )]
    StaleSocket {
        pid: u32,
        path: PathBuf,
        owner: u32,
        #[source]
        source: io::Error,
    },
    #[error(
        "JVM {pid} cannot be asked to open its attach socket: {} is {kind} of uid {owner}, not of the JVM's user {jvm_user} or of sprig's, so the JVM would ignore it and print a thread dump instead; its owner or root must remove it",
        path.display()
    )]
    ForeignTrigger {
        pid: u32,
        path: PathBuf,
        /// `a file`, `a symbolic link`, ...
        kind: &'static str,
        owner: u32,
        jvm_user: String,
    },
    #[error(
        "sprig's agent library is not installed: looked for {}; build it with `cargo build -p sprig-agent` (it goes next to the sprig binary)",
        looked.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" and ")
    )]
    AgentNotFound { looked: Vec<PathBuf> },
}

/// What sprig was waiting for when an attach timed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The JVM to open its attach socket after SIGQUIT.
    Socket,
    /// The JVM's reply to the load request (the agent's `Agent_OnAttach`).
    Reply,
}

impl Stage {
    fn hint(self) -> &'static str {
        match self {
            Stage::Socket => {
                " (is it stopped or hung, or is attach disabled by a flag sprig cannot see? `sprig run ...` works without attach)"
            }
            Stage::Reply => " (the agent may still be starting)",
        }
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Stage::Socket => "open its attach socket",
            Stage::Reply => "answer the load request",
        })
    }
}

/// What the agent's return code `code` says, and what to do, when the JVM
/// passed on no text of its own (the agent's own line went to the JVM's
/// stderr). `None` for a code the agent does not return.
fn agent_code_meaning(code: i32) -> Option<String> {
    use sprig_wire::control::agent_code as c;
    Some(match code {
        c::OLD_PROBE_CLASS => {
            "this JVM holds the probe class of an older sprig (defined when that \
             sprig attached), which this sprig cannot use: profile it with that sprig, or restart \
             the JVM; the JVM runs on unchanged"
                .to_owned()
        }
        c::BUSY => "a sprig session is already running in this JVM: stop it or wait for it to \
             end, then try again"
            .to_owned(),
        c::OPTIONS => "the agent refused the options sprig passed (is the agent library from \
             another sprig version?)"
            .to_owned(),
        c::PIN => "the agent could not keep its library loaded and stopped before changing \
             anything in the JVM"
            .to_owned(),
        c::NO_VM | c::JVMTI | c::JNI | c::THREAD | c::PANIC => format!(
            "the agent could not start (code {code}; its reason is on the JVM's standard \
             error); nothing was instrumented and the JVM runs on"
        ),
        _ => return None,
    })
}

/// The one line of a failed load: the agent's code explained when the JVM
/// gave no text, else the JVM's text with its hint.
fn load_failure(pid: u32, code: Option<i32>, message: &str) -> String {
    if message == AGENT_FAILED
        && let Some(meaning) = code.and_then(agent_code_meaning)
    {
        return format!("JVM {pid} could not start sprig's agent: {meaning}");
    }
    format!(
        "JVM {pid} could not load the agent{}: {}",
        code.map(|c| format!(" (return code {c})"))
            .unwrap_or_default(),
        describe_failure(message)
    )
}

/// The JVM's text on one line, with a hint for the failures users can fix.
fn describe_failure(message: &str) -> String {
    let text = message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    let text = if text.is_empty() {
        "no reason given".to_owned()
    } else {
        text
    };
    let hint = if text.contains("Dynamic agent loading is not enabled")
        || text.contains("EnableDynamicAgentLoading")
    {
        " (the JVM runs with -XX:-EnableDynamicAgentLoading: start it with `sprig run ...` instead)"
    } else if text.contains("cannot open shared object") {
        " (the library must exist and be readable by the JVM's user, inside its file system)"
    } else {
        ""
    };
    format!("{text}{hint}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_messages_are_one_line_with_hints() {
        let e = AttachError::AgentLoadFailed {
            pid: 7,
            code: None,
            message: "Dynamic agent loading is not enabled. Use -XX:+EnableDynamicAgentLoading to launch target VM.\n".into(),
        };
        let text = e.to_string();
        assert!(!text.contains('\n'), "{text}");
        assert!(text.contains("sprig run"), "{text}");
        let e = AttachError::AgentLoadFailed {
            pid: 7,
            code: Some(-1),
            message: "/a.so was not loaded.\n/a.so: cannot open shared object file: No such file or directory".into(),
        };
        let text = e.to_string();
        assert!(!text.contains('\n'), "{text}");
        assert!(text.contains("return code -1"), "{text}");
        assert!(text.contains("readable by the JVM's user"), "{text}");
    }

    #[test]
    fn the_agent_s_codes_say_what_failed_and_what_to_do() {
        let text = |code| {
            AttachError::AgentLoadFailed {
                pid: 7,
                code: Some(code),
                message: AGENT_FAILED.into(),
            }
            .to_string()
        };
        let old = text(sprig_wire::control::agent_code::OLD_PROBE_CLASS);
        assert!(!old.contains("return code"), "{old}");
        assert!(
            old.contains("older sprig") && old.contains("restart the JVM"),
            "{old}"
        );
        let busy = text(sprig_wire::control::agent_code::BUSY);
        assert!(busy.contains("already running"), "{busy}");
        let panic = text(sprig_wire::control::agent_code::PANIC);
        assert!(panic.contains("standard error"), "{panic}");
        for code in 1..=9 {
            assert!(!text(code).contains('\n'));
        }
        // A code the agent never returns keeps the JVM's words.
        assert!(text(100).contains("return code 100"), "{}", text(100));
    }
}
