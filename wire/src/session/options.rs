//! The agent's option string, `dir=<abs path>,token=<32 hex>,cli=<pid>`:
//! how the CLI writes it ([`AgentOptions::format`]) and how the agent reads
//! it ([`AgentOptions::parse`], strict: each key once, nothing unknown).

use super::dir::{RING_NAME, SOCKET_NAME, hex};
use crate::control::AgentOptions;
use std::path::PathBuf;
use thiserror::Error;

/// Why an agent option string was refused.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum OptionsError {
    #[error("agent options: missing `{0}=`")]
    Missing(&'static str),
    #[error("agent options: `{0}` given twice")]
    Duplicate(String),
    #[error("agent options: unknown option `{0}`")]
    Unknown(String),
    #[error("agent options: `{0}` is not `key=value`")]
    NotKeyValue(String),
    #[error("agent options: dir must be an absolute path, got `{0}`")]
    BadDir(String),
    #[error("agent options: token must be 32 hex digits")]
    BadToken,
    #[error("agent options: cli must be a process id, got `{0}`")]
    BadPid(String),
}

impl AgentOptions {
    /// `dir=<abs path>,token=<32 hex>,cli=<pid>`.
    pub fn format(&self) -> String {
        format!(
            "dir={},token={},cli={}",
            self.dir.display(),
            hex(&self.token),
            self.cli_pid
        )
    }

    /// Parses what [`AgentOptions::format`] wrote. Keys may come in any
    /// order but each exactly once; unknown keys are refused.
    pub fn parse(s: &str) -> Result<AgentOptions, OptionsError> {
        let mut dir = None;
        let mut token = None;
        let mut cli = None;
        for part in s.split(',') {
            let Some((key, value)) = part.split_once('=') else {
                return Err(OptionsError::NotKeyValue(part.to_string()));
            };
            let slot_taken = match key {
                "dir" => dir.replace(value).is_some(),
                "token" => token.replace(value).is_some(),
                "cli" => cli.replace(value).is_some(),
                _ => return Err(OptionsError::Unknown(key.to_string())),
            };
            if slot_taken {
                return Err(OptionsError::Duplicate(key.to_string()));
            }
        }
        let dir = dir.ok_or(OptionsError::Missing("dir"))?;
        let token = token.ok_or(OptionsError::Missing("token"))?;
        let cli = cli.ok_or(OptionsError::Missing("cli"))?;
        let dir_path = PathBuf::from(dir);
        if !dir_path.is_absolute() || dir.contains('\0') {
            return Err(OptionsError::BadDir(dir.to_string()));
        }
        Ok(AgentOptions {
            dir: dir_path,
            token: parse_token(token).ok_or(OptionsError::BadToken)?,
            cli_pid: match cli.parse::<u32>() {
                Ok(p) if p > 0 && !cli.starts_with('+') => p,
                _ => return Err(OptionsError::BadPid(cli.to_string())),
            },
        })
    }

    /// The control socket of this session.
    pub fn socket_path(&self) -> PathBuf {
        self.dir.join(SOCKET_NAME)
    }

    /// The ring file of this session.
    pub fn ring_path(&self) -> PathBuf {
        self.dir.join(RING_NAME)
    }
}

fn parse_token(s: &str) -> Option<[u8; 16]> {
    let bytes = s.as_bytes();
    if bytes.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, pair) in bytes.chunks_exact(2).enumerate() {
        let hi = (pair[0] as char).to_digit(16)?;
        let lo = (pair[1] as char).to_digit(16)?;
        out[i] = (hi * 16 + lo) as u8;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_round_trip() {
        let o = AgentOptions {
            dir: PathBuf::from("/tmp/sprig-1000-abcdef"),
            token: [0xab; 16],
            cli_pid: 4242,
        };
        let s = o.format();
        assert_eq!(
            s,
            "dir=/tmp/sprig-1000-abcdef,token=abababababababababababababababab,cli=4242"
        );
        assert_eq!(AgentOptions::parse(&s).unwrap(), o);
        // Any order is fine.
        let shuffled = "cli=4242,token=ABABABABABABABABABABABABABABABAB,dir=/tmp/sprig-1000-abcdef";
        assert_eq!(AgentOptions::parse(shuffled).unwrap(), o);
    }

    #[test]
    fn options_strict() {
        let tok = "00112233445566778899aabbccddeeff";
        let ok = format!("dir=/x,token={tok},cli=1");
        assert!(AgentOptions::parse(&ok).is_ok());
        let cases: Vec<(String, OptionsError)> = vec![
            (format!("token={tok},cli=1"), OptionsError::Missing("dir")),
            ("dir=/x,cli=1".into(), OptionsError::Missing("token")),
            (format!("dir=/x,token={tok}"), OptionsError::Missing("cli")),
            (
                format!("dir=/x,dir=/y,token={tok},cli=1"),
                OptionsError::Duplicate("dir".into()),
            ),
            (
                format!("dir=/x,token={tok},cli=1,foo=2"),
                OptionsError::Unknown("foo".into()),
            ),
            (
                format!("dir=/x,token={tok},cli=1,"),
                OptionsError::NotKeyValue(String::new()),
            ),
            (
                format!("dir=rel,token={tok},cli=1"),
                OptionsError::BadDir("rel".into()),
            ),
            (
                format!("dir=,token={tok},cli=1"),
                OptionsError::BadDir(String::new()),
            ),
            ("dir=/x,token=0011,cli=1".into(), OptionsError::BadToken),
            (
                format!("dir=/x,token={}zz,cli=1", &tok[..30]),
                OptionsError::BadToken,
            ),
            (
                format!("dir=/x,token={tok},cli=0"),
                OptionsError::BadPid("0".into()),
            ),
            (
                format!("dir=/x,token={tok},cli=-3"),
                OptionsError::BadPid("-3".into()),
            ),
            (
                format!("dir=/x,token={tok},cli=+3"),
                OptionsError::BadPid("+3".into()),
            ),
            (
                format!("dir=/x,token={tok},cli=99999999999"),
                OptionsError::BadPid("99999999999".into()),
            ),
            (String::new(), OptionsError::NotKeyValue(String::new())),
        ];
        for (input, want) in cases {
            assert_eq!(AgentOptions::parse(&input), Err(want), "input {input:?}");
        }
    }
}
