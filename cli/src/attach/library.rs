//! The agent library a JVM is handed: where the installed one is, and
//! whether the JVM's user may read it and reach it.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::error::AttachError;
use crate::jvm::JvmProcess;

/// File name of the agent library next to the `sprig` binary.
pub const AGENT_LIBRARY: &str = "libsprig_agent.so";

/// Finds the agent library installed with the running `sprig` binary.
pub fn agent_library_path() -> Result<PathBuf, AttachError> {
    let exe = std::env::current_exe().map_err(|source| AttachError::Io {
        context: "cannot find the sprig binary's own path".to_owned(),
        source,
    })?;
    let dir = exe.parent().unwrap_or(Path::new("/"));
    agent_library_near(dir)
}

/// Whether `jvm` sees the same root directory as sprig.
pub(super) fn same_root(jvm: &JvmProcess) -> bool {
    match (fs::metadata(&jvm.root), fs::metadata("/")) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// The agent library in `bin_dir` or in `bin_dir/../lib/sprig/`, as an
/// absolute canonical path.
pub fn agent_library_near(bin_dir: &Path) -> Result<PathBuf, AttachError> {
    let looked = vec![
        bin_dir.join(AGENT_LIBRARY),
        bin_dir.join("../lib/sprig").join(AGENT_LIBRARY),
    ];
    for candidate in &looked {
        if fs::metadata(candidate).is_ok_and(|m| m.is_file()) {
            return fs::canonicalize(candidate).map_err(|source| AttachError::Io {
                context: format!("cannot resolve {}", candidate.display()),
                source,
            });
        }
    }
    Err(AttachError::AgentNotFound { looked })
}

/// When the JVM shares sprig's file system and runs as another user, the
/// library and the directories above it must be open to that user, or the
/// JVM's error is obscure. (Permission bits only: an ACL granting more is
/// not seen.)
pub(super) fn check_readable_by_target(
    jvm: &JvmProcess,
    agent_path: &Path,
) -> Result<(), AttachError> {
    let same_root = same_root(jvm);
    let Ok(meta) = fs::metadata(agent_path) else {
        // Missing here: the JVM reports it in its own words.
        return Ok(());
    };
    if !same_root || jvm.uid == 0 {
        return Ok(());
    }
    let groups = supplementary_groups(jvm.pid);
    let may = |m: &fs::Metadata, bit: u32| {
        let shift = if m.uid() == jvm.uid {
            6
        } else if m.gid() == jvm.gid || groups.contains(&m.gid()) {
            3
        } else {
            0
        };
        m.mode() & (bit << shift) != 0
    };
    let refuse = |what: String| AttachError::InvalidArgument {
        what: "agent path",
        why: format!(
            "JVM {} runs as user {}, who may not {what}",
            jvm.pid, jvm.user
        ),
    };
    if !may(&meta, 0o4) {
        return Err(refuse(format!("read {}", agent_path.display())));
    }
    for dir in agent_path.ancestors().skip(1) {
        if let Ok(m) = fs::metadata(dir)
            && !may(&m, 0o1)
        {
            return Err(refuse(format!(
                "enter {} (on the way to {})",
                dir.display(),
                agent_path.display()
            )));
        }
    }
    Ok(())
}

/// The supplementary groups of `pid` (the `Groups:` line of its status).
fn supplementary_groups(pid: u32) -> Vec<u32> {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|text| {
            text.lines().find_map(|l| {
                l.strip_prefix("Groups:").map(|g| {
                    g.split_whitespace()
                        .filter_map(|n| n.parse().ok())
                        .collect()
                })
            })
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_library_lookup() {
        let dir = std::env::temp_dir().join(format!("sprig-agent-lookup-{}", std::process::id()));
        let bin = dir.join("bin");
        fs::create_dir_all(&bin).unwrap();
        let err = agent_library_near(&bin).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("cargo build -p sprig-agent"), "{text}");
        assert!(
            text.contains(&bin.join(AGENT_LIBRARY).display().to_string()),
            "{text}"
        );

        fs::create_dir_all(dir.join("lib/sprig")).unwrap();
        fs::write(dir.join("lib/sprig").join(AGENT_LIBRARY), b"").unwrap();
        let found = agent_library_near(&bin).unwrap();
        assert!(found.is_absolute());
        assert_eq!(
            found,
            fs::canonicalize(dir.join("lib/sprig").join(AGENT_LIBRARY)).unwrap()
        );

        fs::write(bin.join(AGENT_LIBRARY), b"").unwrap();
        assert_eq!(
            agent_library_near(&bin).unwrap(),
            fs::canonicalize(bin.join(AGENT_LIBRARY)).unwrap()
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
