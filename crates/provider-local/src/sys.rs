//! The system commands behind the local provider (mkfs.ext4, losetup, mount, resize2fs,
//! fsfreeze, cp) and the run-owned-only cleanup. Every command's failure names the command
//! and its stderr.

use std::path::{Path, PathBuf};
use std::process::Command;

use replay::ProviderError;

/// Runs a command; `Err` carries its stderr.
pub(crate) fn cmd(program: &str, args: &[&str]) -> Result<String, ProviderError> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| ProviderError::new("command_failed", format!("cannot run {program}: {e}")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(ProviderError::new(
            "command_failed",
            format!(
                "{program} {}: {} ({})",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim(),
                out.status
            ),
        ))
    }
}

pub(crate) fn path_str(p: &Path) -> Result<&str, ProviderError> {
    p.to_str()
        .ok_or_else(|| ProviderError::new("io", format!("non-UTF-8 path {}", p.display())))
}

#[allow(clippy::needless_pass_by_value)] // shaped for `.map_err(io_err)`
pub(crate) fn io_err(e: std::io::Error) -> ProviderError {
    ProviderError::new("io", e.to_string())
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

/// Loop devices whose backing file is `image`.
pub fn loops_of(image: &Path) -> Vec<String> {
    let Ok(p) = path_str(image) else {
        return Vec::new();
    };
    cmd("losetup", &["-n", "-O", "NAME", "-j", p])
        .map(|s| {
            s.lines()
                .map(|l| l.trim().to_owned())
                .filter(|l| !l.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// Mount points currently mounted (from /proc/self/mountinfo, octal escapes decoded).
pub fn mount_points() -> Vec<PathBuf> {
    let text = fs_err::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|m| PathBuf::from(unescape(m)))
        .collect()
}

fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(u8::is_ascii_digit) {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether `p` is a mount point now.
pub fn is_mounted(p: &Path) -> bool {
    mount_points().iter().any(|m| m == p)
}

/// Copies `src` to `dst`, by reflink when the file system supports it (`cp
/// --reflink=always`; FICLONE underneath), else a full sparse copy. Returns whether the
/// reflink worked.
pub(crate) fn copy_image(src: &Path, dst: &Path) -> Result<bool, ProviderError> {
    let (s, d) = (path_str(src)?, path_str(dst)?);
    if cmd("cp", &["--reflink=always", "--", s, d]).is_ok() {
        return Ok(true);
    }
    let _ = fs_err::remove_file(dst);
    cmd(
        "cp",
        &["-a", "--reflink=never", "--sparse=always", "--", s, d],
    )?;
    Ok(false)
}

/// Grows a file-system image that is not attached: fsck (resize2fs insists) + resize2fs.
pub(crate) fn grow_offline(image: &Path) -> Result<(), ProviderError> {
    let p = path_str(image)?;
    // e2fsck exits 1 when it fixed something, which is fine here.
    let _ = Command::new("e2fsck").args(["-f", "-y", p]).output();
    cmd("resize2fs", &[p]).map(|_| ())
}

/// Whether `p` lies inside `root` (both made absolute without following the last symlink).
pub(crate) fn inside(root: &Path, p: &Path) -> bool {
    let canon = |x: &Path| {
        x.parent()
            .and_then(|par| fs_err::canonicalize(par).ok())
            .map(|par| par.join(x.file_name().unwrap_or_default()))
    };
    match (fs_err::canonicalize(root).ok(), canon(p)) {
        (Some(r), Some(c)) => c.starts_with(&r) && c != r,
        _ => false,
    }
}
