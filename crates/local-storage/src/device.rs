//! Loop devices and mounts.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::command::{path_str, run};
use crate::error::StorageError;

/// Attaches `image` to a free loop device; returns the device path.
pub fn attach_loop(image: &Path) -> Result<String, StorageError> {
    run("losetup", &["--find", "--show", path_str(image)?])
}

/// Detaches a loop device.
pub fn detach_loop(dev: &str) -> Result<(), StorageError> {
    run("losetup", &["-d", dev]).map(drop)
}

/// Makes an attached loop device see its backing file's new size (`losetup -c`).
pub fn refresh_loop(dev: &str) -> Result<(), StorageError> {
    run("losetup", &["-c", dev]).map(drop)
}

/// Loop devices whose backing file is `image` (`losetup -j`).
pub fn loops_of(image: &Path) -> Vec<String> {
    let Ok(p) = path_str(image) else {
        return Vec::new();
    };
    run("losetup", &["-n", "-O", "NAME", "-j", p])
        .map(|s| {
            s.lines()
                .map(|l| l.trim().to_owned())
                .filter(|l| !l.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// Mounts `source` on `target` (created if missing) with extra `mount` arguments
/// (e.g. `["--bind"]`, `["-o", "ro"]`).
pub fn mount(source: &str, target: &Path, extra: &[&str]) -> Result<(), StorageError> {
    if !target.exists() {
        fs_err::create_dir_all(target)?;
    }
    let t = path_str(target)?;
    let mut args: Vec<&str> = extra.to_vec();
    args.extend([source, t]);
    run("mount", &args).map(drop)
}

/// Unmounts `target`, retrying a busy file system for up to `patience` (I/O threads of a
/// stopped workload may take a moment to close their files).
pub fn unmount(target: &Path, patience: Duration) -> Result<(), StorageError> {
    let t = path_str(target)?;
    let deadline = std::time::Instant::now() + patience;
    loop {
        match run("umount", &[t]) {
            Ok(_) => return Ok(()),
            Err(e) if std::time::Instant::now() >= deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
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
