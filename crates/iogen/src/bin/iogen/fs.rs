//! `iogen fs PATH`: the file system holding a path, as the process sees it (e.g. an online
//! resize seen from inside a pod).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use iogen::Stop;

use super::{parse_dur, parse_size_arg};

#[derive(Args)]
pub struct FsArgs {
    /// A path on the file system.
    path: PathBuf,
    /// Poll until the file system's size is at least this (exit 0), else exit 1 after
    /// --timeout; without it, print once.
    #[arg(long, value_parser = parse_size_arg)]
    until_size: Option<u64>,
    /// Poll period.
    #[arg(long, default_value = "200ms", value_parser = parse_dur)]
    every: Duration,
    /// Give up after this long.
    #[arg(long, default_value = "60s", value_parser = parse_dur)]
    timeout: Duration,
}

/// Size and free bytes of the file system holding `path` (statvfs: blocks × fragment size).
fn fs_size(path: &Path) -> Result<(u64, u64)> {
    let st = rustix::fs::statvfs(path).with_context(|| format!("statvfs {}", path.display()))?;
    Ok((
        st.f_blocks.saturating_mul(st.f_frsize),
        st.f_bavail.saturating_mul(st.f_frsize),
    ))
}

/// The kind of file system holding `path`, from statfs's magic number (ext2/3/4 share one).
fn fs_type(path: &Path) -> Result<String> {
    let st = rustix::fs::statfs(path).with_context(|| format!("statfs {}", path.display()))?;
    #[allow(clippy::unnecessary_cast)] // f_type's integer type differs between targets
    let magic = st.f_type as u64;
    Ok(match magic {
        0xEF53 => "ext4".to_owned(),
        0x5846_5342 => "xfs".to_owned(),
        0x9123_683E => "btrfs".to_owned(),
        0x0102_1994 => "tmpfs".to_owned(),
        0x794C_7630 => "overlay".to_owned(),
        m => format!("{m:#x}"),
    })
}

pub fn fs(a: &FsArgs, stop: &Stop) -> Result<()> {
    let t0 = Instant::now();
    let kind = fs_type(&a.path)?;
    let mut last = None;
    loop {
        let (size, free) = fs_size(&a.path)?;
        if last != Some(size) {
            println!(
                "{}",
                serde_json::json!({
                    "at_ms": t0.elapsed().as_millis(),
                    "fs_type": kind,
                    "size": size,
                    "free": free,
                })
            );
            last = Some(size);
        }
        match a.until_size {
            None => return Ok(()),
            Some(want) if size >= want => return Ok(()),
            Some(want) => {
                if t0.elapsed() >= a.timeout || stop.is_requested() {
                    // The check said no: exit 1, as the flag's help says.
                    return Err(super::exit::CheckSaidNo(format!(
                        "{}: size {size} B, not {want} B after {:?}",
                        a.path.display(),
                        a.timeout
                    ))
                    .into());
                }
            }
        }
        std::thread::sleep(a.every);
    }
}
