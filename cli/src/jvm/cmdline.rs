//! What a JVM's command line and environment say: its main class like
//! `jps -l`, whether its options disable attach, and the command line
//! shortened for a message. /proc files its owner can grow are read with a
//! cap.

use std::fs;
use std::io::{self, Read};
use std::path::Path;

use super::perfdata::PerfStrings;

/// The command line and environment are read up to this much.
const ARGS_CAP: u64 = 1 << 20;

/// Whether the JVM's options disable attach: from PerfData (flags file and
/// VM arguments, environment options included), else from the command line
/// and the environment variables the JVM reads options from.
pub(super) fn attach_disabled(
    perf: Option<&PerfStrings>,
    proc_dir: &Path,
    cmdline: &[String],
) -> bool {
    if let Some(p) = perf {
        let args = [p.get("java.rt.vmFlags"), p.get("java.rt.vmArgs")]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" ");
        return attach_disabled_in(args.split_whitespace());
    }
    let env = read_environ(proc_dir);
    let var = |name: &str| {
        env.iter()
            .find_map(|(k, v)| (k == name).then_some(v.as_str()))
            .unwrap_or("")
    };
    // HotSpot's order: JAVA_TOOL_OPTIONS, JDK_JAVA_OPTIONS (via the
    // launcher), the command line, _JAVA_OPTIONS; the last setting wins.
    let args = var("JAVA_TOOL_OPTIONS")
        .split_whitespace()
        .chain(var("JDK_JAVA_OPTIONS").split_whitespace())
        .chain(cmdline.iter().skip(1).map(String::as_str))
        .chain(var("_JAVA_OPTIONS").split_whitespace());
    attach_disabled_in(args)
}

/// At most `cap` bytes of a /proc file.
fn read_capped(path: &Path, cap: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    fs::File::open(path)?.take(cap).read_to_end(&mut bytes)?;
    Ok(bytes)
}

pub(super) fn read_cmdline(proc_dir: &Path) -> Vec<String> {
    read_capped(&proc_dir.join("cmdline"), ARGS_CAP)
        .map(|bytes| {
            bytes
                .split(|&b| b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn read_environ(proc_dir: &Path) -> Vec<(String, String)> {
    read_capped(&proc_dir.join("environ"), ARGS_CAP)
        .map(|bytes| {
            bytes
                .split(|&b| b == 0)
                .filter_map(|kv| {
                    let kv = String::from_utf8_lossy(kv);
                    let (k, v) = kv.split_once('=')?;
                    Some((k.to_owned(), v.to_owned()))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The command line shortened for a one-line message.
pub(super) fn short_cmdline(args: &[String]) -> String {
    const MAX: usize = 60;
    let full = args.join(" ");
    if full.is_empty() {
        return "no command line".to_owned();
    }
    if full.chars().count() <= MAX {
        return full;
    }
    let cut: String = full.chars().take(MAX).collect();
    format!("{cut}…")
}

/// The launcher options whose value is the next argument.
const OPTIONS_WITH_VALUE: &[&str] = &[
    "-cp",
    "-classpath",
    "--class-path",
    "-p",
    "--module-path",
    "--upgrade-module-path",
    "--add-modules",
    "--limit-modules",
    "--add-reads",
    "--add-exports",
    "--add-opens",
    "--patch-module",
    "--enable-native-access",
    "--source",
];

/// The main class, jar or module of a `java` command line, like `jps -l`.
pub(super) fn main_from_cmdline(args: &[String]) -> Option<String> {
    let mut it = args.iter().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-jar" | "-m" | "--module" => return it.next().cloned(),
            a if a.starts_with("--module=") => return Some(a["--module=".len()..].to_owned()),
            a if OPTIONS_WITH_VALUE.contains(&a) => {
                it.next();
            }
            a if a.starts_with('-') || a.starts_with('@') => {}
            a => return Some(a.to_owned()),
        }
    }
    None
}

/// Whether the JVM options disable the attach mechanism; the last setting
/// wins, as in HotSpot.
fn attach_disabled_in<'a>(args: impl Iterator<Item = &'a str>) -> bool {
    let mut disabled = false;
    for arg in args {
        match arg {
            "-XX:+DisableAttachMechanism" => disabled = true,
            "-XX:-DisableAttachMechanism" => disabled = false,
            a => {
                if let Some(v) = a.strip_prefix("-XX:DisableAttachMechanism=") {
                    disabled = matches!(v, "true" | "1");
                }
            }
        }
    }
    disabled
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn main_like_jps() {
        let m = |a: &[&str]| main_from_cmdline(&strings(a));
        assert_eq!(
            m(&["java", "-cp", "a:b", "-Xmx1g", "com.x.Main", "arg"]).as_deref(),
            Some("com.x.Main")
        );
        assert_eq!(
            m(&["java", "-Dx=1", "-jar", "/opt/app.jar", "x"]).as_deref(),
            Some("/opt/app.jar")
        );
        assert_eq!(
            m(&["java", "-p", "mods", "-m", "m/p.Main"]).as_deref(),
            Some("m/p.Main")
        );
        assert_eq!(
            m(&["java", "--module=m/p.Main"]).as_deref(),
            Some("m/p.Main")
        );
        assert_eq!(
            m(&["java", "@argfile", "--add-opens", "a/b=c", "Main"]).as_deref(),
            Some("Main")
        );
        assert_eq!(m(&["java", "-version"]), None);
        assert_eq!(m(&[]), None);
    }

    #[test]
    fn disable_attach_last_setting_wins() {
        let d = |s: &str| attach_disabled_in(s.split_whitespace());
        assert!(d("-Xmx1g -XX:+DisableAttachMechanism"));
        assert!(!d(
            "-XX:+DisableAttachMechanism -XX:-DisableAttachMechanism"
        ));
        assert!(d("-XX:DisableAttachMechanism=true"));
        assert!(!d(
            "-XX:DisableAttachMechanism=false -Dx=-XX:+DisableAttachMechanismX"
        ));
        assert!(!d(""));
    }

    #[test]
    fn short_cmdline_is_one_bounded_line() {
        assert_eq!(short_cmdline(&[]), "no command line");
        assert_eq!(short_cmdline(&strings(&["sleep", "100"])), "sleep 100");
        let long = short_cmdline(&strings(&[&"x".repeat(200)]));
        assert_eq!(long.chars().count(), 61);
    }
}
