//! Running the system commands the primitives are made of, and the facts they need about
//! this process.

use std::path::Path;
use std::process::Command;

use crate::error::StorageError;

/// Runs a command; its trimmed stdout on success.
pub fn run(program: &str, args: &[&str]) -> Result<String, StorageError> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|source| StorageError::Spawn {
            program: program.to_owned(),
            source,
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(StorageError::Command {
            command: format!("{program} {}", args.join(" ")),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            status: out.status.to_string(),
        })
    }
}

/// The path as a string (commands take strings).
pub fn path_str(p: &Path) -> Result<&str, StorageError> {
    p.to_str().ok_or_else(|| StorageError::Path(p.to_owned()))
}

/// Whether this process runs as root (Linux: effective uid 0 in /proc/self/status).
pub fn is_root() -> bool {
    fs_err::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}
