//! A process's /proc/PID/status (ids, state, namespaces, the signals it
//! handles) and the start time in /proc/PID/stat that tells a reused PID
//! apart.

use std::fs;
use std::path::Path;

/// The fields of /proc/PID/status sprig needs.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct ProcStatus {
    pub(super) name: String,
    pub(super) state: char,
    pub(super) tgid: u32,
    /// Effective uid.
    pub(super) uid: u32,
    /// Effective gid.
    pub(super) gid: u32,
    pub(super) ns_pid: u32,
    /// Signals with a handler installed (SigCgt bit n-1 for signal n).
    pub(super) sig_caught: u64,
}

impl ProcStatus {
    pub(super) fn parse(text: &str) -> Option<ProcStatus> {
        let field = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
                .map(str::trim)
        };
        let nth = |key: &str, n: usize| -> Option<u32> {
            field(key)?.split_whitespace().nth(n)?.parse().ok()
        };
        let pid = nth("Pid", 0)?;
        Some(ProcStatus {
            name: field("Name")?.to_owned(),
            state: field("State")?.chars().next()?,
            tgid: nth("Tgid", 0)?,
            uid: nth("Uid", 1)?,
            gid: nth("Gid", 1)?,
            // Kernels before 4.1 have no NSpid: no namespaces to care about.
            ns_pid: field("NSpid")
                .and_then(|v| v.split_whitespace().last()?.parse().ok())
                .unwrap_or(pid),
            sig_caught: field("SigCgt")
                .and_then(|v| u64::from_str_radix(v, 16).ok())
                .unwrap_or(0),
        })
    }
}

/// Field 22 of /proc/PID/stat (start time in clock ticks).
pub(super) fn read_start_time(proc_dir: &Path) -> Option<u64> {
    let stat = fs::read_to_string(proc_dir.join("stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_with_nested_pid_namespace() {
        let text = "Name:\tjava\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\nNgid:\t0\n\
                    Pid:\t4242\nPPid:\t1\nUid:\t1000\t1001\t1001\t1001\nGid:\t50\t51\t51\t51\n\
                    NSpid:\t4242\t7\nSigCgt:\t0000000000000004\n";
        let s = ProcStatus::parse(text).unwrap();
        assert_eq!(
            s,
            ProcStatus {
                name: "java".into(),
                state: 'S',
                tgid: 4242,
                uid: 1001,
                gid: 51,
                ns_pid: 7,
                sig_caught: 0x4
            }
        );
        let old = text.replace("NSpid:\t4242\t7\n", "");
        assert_eq!(ProcStatus::parse(&old).unwrap().ns_pid, 4242);
        assert_eq!(ProcStatus::parse("garbage"), None);
    }
}
