//! `sprig list`: the HotSpot JVMs the user may attach to, like `jps -l`.

use std::io::Write;

use sprig_callgraph::report::escape::escape;

use crate::jvm::{self, JvmProcess};

/// Writes the table of attachable JVMs (sorted by PID), or one line saying
/// there is none; a process that could not be inspected in time gets a
/// warning line on stderr.
pub fn run(out: &mut dyn Write) -> anyhow::Result<()> {
    let survey = jvm::survey();
    for skipped in &survey.unresponsive {
        eprintln!("sprig: warning: {skipped}");
    }
    let jvms = survey.jvms;
    let (euid, _) = crate::sys::effective_ids();
    match write_table(out, &jvms, euid) {
        // `sprig list | head -1`: the reader has what it wanted.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

/// Renders `jvms` for a caller whose effective uid is `euid`.
pub fn write_table(out: &mut dyn Write, jvms: &[JvmProcess], euid: u32) -> std::io::Result<()> {
    if jvms.is_empty() {
        if euid == 0 {
            writeln!(out, "no running HotSpot JVMs found")?;
        } else {
            writeln!(
                out,
                "no running HotSpot JVMs of user {} found (JVMs of other users need root)",
                jvm::user_name(euid)
            )?;
        }
        return Ok(());
    }
    let mut rows: Vec<[String; 4]> = vec![["PID", "USER", "JDK", "MAIN"].map(str::to_owned)];
    let mut sorted: Vec<&JvmProcess> = jvms.iter().collect();
    sorted.sort_by_key(|j| j.pid);
    for j in sorted {
        let mut main = escape(&j.main).into_owned();
        if j.attach_disabled {
            main.push_str("  (attach disabled: use `sprig run`)");
        }
        rows.push([
            j.pid.to_string(),
            escape(&j.user).into_owned(),
            j.java_version
                .as_deref()
                .map_or_else(|| "?".to_owned(), |v| escape(v).into_owned()),
            main,
        ]);
    }
    let width = |col: usize| {
        rows.iter()
            .map(|r| r[col].chars().count())
            .max()
            .unwrap_or(0)
    };
    let widths = [width(0), width(1), width(2)];
    for r in &rows {
        writeln!(
            out,
            "{:<w0$}  {:<w1$}  {:<w2$}  {}",
            r[0],
            r[1],
            r[2],
            r[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2]
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn jvm(pid: u32, user: &str, version: Option<&str>, main: &str) -> JvmProcess {
        JvmProcess {
            pid,
            uid: 1000,
            gid: 1000,
            user: user.to_owned(),
            main: main.to_owned(),
            java_version: version.map(str::to_owned),
            java_home: None,
            vm_name: None,
            ns_pid: pid,
            root: PathBuf::from(format!("/proc/{pid}/root")),
            cwd: PathBuf::from("/"),
            start_time: 1,
            attach_disabled: false,
        }
    }

    fn render(jvms: &[JvmProcess], euid: u32) -> String {
        let mut out = Vec::new();
        write_table(&mut out, jvms, euid).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn table_is_aligned_and_sorted_by_pid() {
        let mut disabled = jvm(77, "nobody", Some("25"), "/opt/app.jar");
        disabled.attach_disabled = true;
        let text = render(
            &[
                jvm(31337, "alice", Some("17.0.15"), "com.example.Main"),
                disabled,
            ],
            0,
        );
        assert_eq!(
            text,
            "PID    USER    JDK      MAIN\n\
             77     nobody  25       /opt/app.jar  (attach disabled: use `sprig run`)\n\
             31337  alice   17.0.15  com.example.Main\n"
        );
    }

    #[test]
    fn control_characters_in_names_are_escaped() {
        // A main class, user or version that would rewrite the terminal.
        let mut j = jvm(
            9,
            "ev\u{1b}[2Jil",
            Some("17\u{9b}1m"),
            "a.Main\u{1b}]0;owned\u{7}\n",
        );
        j.main.push('\u{7f}');
        let text = render(&[j], 0);
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
        assert_eq!(text.lines().count(), 2, "{text:?}");
        assert!(
            text.contains("a.Main\\x1b]0;owned\\x07\\n\\x7f"),
            "{text:?}"
        );
        assert!(text.contains("ev\\x1b[2Jil"), "{text:?}");
        assert!(text.contains("17\\u{9b}1m"), "{text:?}");
    }

    #[test]
    fn unknown_version_shows_question_mark() {
        let text = render(&[jvm(5, "bob", None, "Main")], 0);
        assert_eq!(text, "PID  USER  JDK  MAIN\n5    bob   ?    Main\n");
    }

    struct ClosedPipe;

    impl Write for ClosedPipe {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    struct Full;

    impl Write for Full {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::from_raw_os_error(libc::ENOSPC))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_pipe_is_not_an_error_but_a_full_disk_is() {
        assert!(run(&mut ClosedPipe).is_ok());
        assert!(run(&mut Full).is_err());
    }

    #[test]
    fn empty_list_says_so() {
        assert_eq!(render(&[], 0), "no running HotSpot JVMs found\n");
        let text = render(&[], 4321);
        assert!(
            text.starts_with("no running HotSpot JVMs of user 4321 found"),
            "{text}"
        );
        assert_eq!(text.lines().count(), 1);
    }
}
