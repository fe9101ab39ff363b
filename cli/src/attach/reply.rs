//! The JVM's reply to `load`: a status line, then `return code: N` for an
//! agent that ran, or the JVM's error text. JDK 21+ answers status 0 even
//! when loading failed, so the rest of the reply decides.

/// A load reply that does not say success.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum ReplyError {
    Failed { code: Option<i32>, message: String },
    Malformed(String),
}

const RETURN_CODE: &str = "return code: ";
/// The message of a failed `Agent_OnAttach` the JVM gave no text for.
pub(super) const AGENT_FAILED: &str = "the agent's Agent_OnAttach failed";

/// Decodes the reply to `load`: `<status>\n` then, when the agent ran,
/// `return code: <N>\n`, else the JVM's error text (status -1 before JDK 21,
/// status 0 with the text from JDK 21 on).
pub(super) fn parse_load_reply(reply: &str) -> Result<(), ReplyError> {
    if reply.is_empty() {
        return Err(ReplyError::Malformed(
            "the JVM closed the connection without a reply (does sprig run with the JVM's user and group?)"
                .to_owned(),
        ));
    }
    let (first, rest) = reply.split_once('\n').unwrap_or((reply, ""));
    let status: i32 = first.trim().parse().map_err(|_| {
        ReplyError::Malformed(format!("unexpected reply {:?}", truncate(reply, 80)))
    })?;
    if status != 0 {
        return Err(ReplyError::Failed {
            code: Some(status),
            message: rest.trim().to_owned(),
        });
    }
    let (line, after) = rest.split_once('\n').unwrap_or((rest, ""));
    match line.trim().strip_prefix(RETURN_CODE.trim_end()) {
        Some(code) => match code.trim().parse::<i32>() {
            Ok(0) => Ok(()),
            Ok(code) => Err(ReplyError::Failed {
                code: Some(code),
                message: match after.trim() {
                    "" => AGENT_FAILED.to_owned(),
                    text => text.to_owned(),
                },
            }),
            Err(_) => Err(ReplyError::Malformed(format!(
                "unexpected return code line {:?}",
                truncate(line, 80)
            ))),
        },
        None if rest.trim().is_empty() => Err(ReplyError::Malformed(
            "the JVM answered status 0 without a return code".to_owned(),
        )),
        None => Err(ReplyError::Failed {
            code: None,
            message: rest.trim().to_owned(),
        }),
    }
}

fn truncate(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(code: Option<i32>, message: &str) -> Result<(), ReplyError> {
        Err(ReplyError::Failed {
            code,
            message: message.to_owned(),
        })
    }

    #[test]
    fn success_on_every_jdk() {
        assert_eq!(parse_load_reply("0\nreturn code: 0\n"), Ok(()));
        assert_eq!(parse_load_reply("0\r\nreturn code: 0"), Ok(()));
    }

    #[test]
    fn agent_on_attach_failure_keeps_its_code() {
        assert_eq!(
            parse_load_reply("0\nreturn code: 100\n"),
            failed(Some(100), "the agent's Agent_OnAttach failed")
        );
        assert_eq!(
            parse_load_reply("0\nreturn code: -1\nbad options\n"),
            failed(Some(-1), "bad options")
        );
    }

    #[test]
    fn load_failure_before_jdk_21_has_nonzero_status() {
        assert_eq!(
            parse_load_reply(
                "-1\n/x/lib.so was not loaded.\n/x/lib.so: cannot open shared object file\n"
            ),
            failed(
                Some(-1),
                "/x/lib.so was not loaded.\n/x/lib.so: cannot open shared object file"
            )
        );
    }

    #[test]
    fn load_failure_from_jdk_21_has_status_zero_and_text() {
        assert_eq!(
            parse_load_reply(
                "0\nDynamic agent loading is not enabled. Use -XX:+EnableDynamicAgentLoading to launch target VM.\n"
            ),
            failed(
                None,
                "Dynamic agent loading is not enabled. Use -XX:+EnableDynamicAgentLoading to launch target VM."
            )
        );
    }

    #[test]
    fn malformed_replies() {
        assert!(matches!(
            parse_load_reply(""),
            Err(ReplyError::Malformed(_))
        ));
        assert!(matches!(
            parse_load_reply("0\n"),
            Err(ReplyError::Malformed(_))
        ));
        assert!(matches!(
            parse_load_reply("hello\n"),
            Err(ReplyError::Malformed(_))
        ));
        assert!(matches!(
            parse_load_reply("0\nreturn code: x\n"),
            Err(ReplyError::Malformed(_))
        ));
    }
}
