//! Volume I/O limits, the storage side of `modify_volume`: a volume attributes class's
//! parameters become the kernel's block throttle (cgroup v1 `blkio.throttle.*_device`) on the
//! volume's device, for the cgroups whose tasks do the volume's I/O.
//!
//! Why the kernel's throttle and not the generator's own pacing: a tier change on a real
//! backend slows the device, not the client. Requests already queued feel it, and the I/O
//! generator sees its latency grow and its rate fall as it would against a slower device.
//! The throttle holds requests in the block layer before they reach the device (the loop
//! device here), so the time until the new limit holds is observable from the I/O itself.
//!
//! The vocabulary (shared by the `local` provider and `cnsreplay-csi`): `read_iops`,
//! `write_iops` (requests per second), `read_bps`, `write_bps` (bytes per second; quantities
//! such as `50Mi` are accepted). `0` or `unlimited` lifts that limit. As the CSI
//! specification says of ControllerModifyVolume, only the keys given change anything; a key
//! outside the vocabulary, or a malformed value, is refused before anything changes.
//!
//! cgroup v1 throttling is flat: a limit binds only the tasks of the cgroup it is written
//! to, not its children. Callers write it to every cgroup that does the volume's I/O (the
//! local provider: one cgroup per volume, which its I/O threads join; the driver: each
//! container cgroup of the pods that mount the volume).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The throttle files, in the order of [`Limits`]' fields.
const FILES: [&str; 4] = [
    "blkio.throttle.read_iops_device",
    "blkio.throttle.write_iops_device",
    "blkio.throttle.read_bps_device",
    "blkio.throttle.write_bps_device",
];

/// The parameter keys, in the order of [`FILES`].
pub const KEYS: [&str; 4] = ["read_iops", "write_iops", "read_bps", "write_bps"];

/// Limits a class sets: per [`KEYS`] entry, `None` when the class leaves it alone, `Some(0)`
/// to lift it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Limits(pub [Option<u64>; 4]);

impl Limits {
    /// Parses a class's parameters. Errors name the key and the value.
    pub fn parse(params: &BTreeMap<String, String>) -> Result<Self, String> {
        let mut out = [None; 4];
        for (k, v) in params {
            let Some(i) = KEYS.iter().position(|x| x == k) else {
                return Err(format!(
                    "unknown parameter {k:?}: this storage knows {}",
                    KEYS.join(", ")
                ));
            };
            let t = v.trim();
            let n = if t == "unlimited" {
                0
            } else if i < 2 {
                t.parse::<u64>()
                    .map_err(|_| format!("{k}: {v:?} is not a whole number of requests/s"))?
            } else {
                trace_format::units::parse_bytes(t)
                    .map_err(|e| format!("{k}: {v:?} is not a byte rate: {e}"))?
            };
            out[i] = Some(n);
        }
        Ok(Self(out))
    }

    /// These limits with `next`'s given keys applied on top (a modify changes only what
    /// the new class names).
    #[must_use]
    pub fn then(self, next: Self) -> Self {
        let mut out = self.0;
        for (o, n) in out.iter_mut().zip(next.0) {
            if n.is_some() {
                *o = n;
            }
        }
        Self(out)
    }

    /// Whether any limit is in force.
    pub fn any(&self) -> bool {
        self.0.iter().any(|v| v.is_some_and(|n| n > 0))
    }

    /// As text, e.g. `read_iops=500 write_iops=500` (`unlimited` when none).
    pub fn describe(&self) -> String {
        let parts: Vec<String> = KEYS
            .iter()
            .zip(self.0)
            .filter_map(|(k, v)| v.filter(|&n| n > 0).map(|n| format!("{k}={n}")))
            .collect();
        if parts.is_empty() {
            "unlimited".to_owned()
        } else {
            parts.join(" ")
        }
    }
}

/// The cgroup v1 blkio hierarchy's mount point with the throttle files, if this host has one.
pub fn blkio_root() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() >= 4
            && f[2] == "cgroup"
            && f[3].split(',').any(|o| o == "blkio")
            && Path::new(f[1]).join(FILES[0]).exists())
        .then(|| PathBuf::from(f[1]))
    })
}

/// The device number (`MAJ:MIN`) of a block device node.
pub fn dev_number(dev: &Path) -> std::io::Result<String> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let md = fs_err::metadata(dev)?;
    if !md.file_type().is_block_device() {
        return Err(std::io::Error::other(format!(
            "{} is not a block device",
            dev.display()
        )));
    }
    let rdev = md.rdev();
    // The kernel's encoding (glibc's gnu_dev_major/minor).
    let major = ((rdev >> 32) & 0xffff_f000) | ((rdev >> 8) & 0xfff);
    let minor = ((rdev >> 12) & 0xffff_ff00) | (rdev & 0xff);
    Ok(format!("{major}:{minor}"))
}

/// Writes `limits` for device `dev` (`MAJ:MIN`) into the throttle files of `cgroup`: only the
/// keys the limits give; 0 removes that rule. Errors name the file.
pub fn apply(cgroup: &Path, dev: &str, limits: &Limits) -> std::io::Result<()> {
    for (file, v) in FILES.iter().zip(limits.0) {
        if let Some(n) = v {
            let path = cgroup.join(file);
            // Removing a rule that is not there is refused by some kernels: skip it.
            if n == 0 && !has_rule(&path, dev) {
                continue;
            }
            fs_err::write(&path, format!("{dev} {n}\n"))?;
        }
    }
    Ok(())
}

fn has_rule(path: &Path, dev: &str) -> bool {
    std::fs::read_to_string(path)
        .is_ok_and(|s| s.lines().any(|l| l.split_whitespace().next() == Some(dev)))
}

/// The limits in force for `dev` in `cgroup` (read back from its throttle files).
pub fn read(cgroup: &Path, dev: &str) -> std::io::Result<Limits> {
    let mut out = [None; 4];
    for (o, file) in out.iter_mut().zip(FILES) {
        let s = fs_err::read_to_string(cgroup.join(file))?;
        *o = s.lines().find_map(|l| {
            let mut f = l.split_whitespace();
            (f.next() == Some(dev))
                .then(|| f.next().and_then(|n| n.parse().ok()))
                .flatten()
        });
    }
    Ok(Limits(out))
}

/// Moves the calling thread into `cgroup` (v1 `tasks`: `0` is the writing task). Threads it
/// starts afterwards, and io_uring's workers it creates, are born there.
pub fn join_current_thread(cgroup: &Path) -> std::io::Result<()> {
    fs_err::write(cgroup.join("tasks"), "0\n")
}

/// Creates `cgroup` (and its parents) in the blkio hierarchy.
pub fn create(cgroup: &Path) -> std::io::Result<()> {
    fs_err::create_dir_all(cgroup)
}

/// Removes `cgroup` and then each empty parent up to (not including) `stop`; a cgroup that
/// still has tasks is left (its removal fails with EBUSY), and so is a missing one.
pub fn remove(cgroup: &Path, stop: &Path) -> std::io::Result<()> {
    let mut p = cgroup.to_path_buf();
    while p.starts_with(stop) && p != stop {
        match std::fs::remove_dir(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) if p == cgroup => {
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("cannot remove cgroup {}: {e}", p.display()),
                ));
            }
            Err(_) => break,
        }
        if !p.pop() {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn parameters_parse_into_limits_and_unknown_ones_are_refused() {
        let l = Limits::parse(&params(&[("read_iops", "500"), ("write_bps", "10Mi")])).unwrap();
        assert_eq!(l, Limits([Some(500), None, None, Some(10 << 20)]));
        assert_eq!(l.describe(), "read_iops=500 write_bps=10485760");
        let lifted = Limits::parse(&params(&[("read_iops", "unlimited")])).unwrap();
        assert_eq!(
            l.then(lifted),
            Limits([Some(0), None, None, Some(10 << 20)])
        );
        let e = Limits::parse(&params(&[("iops", "5")])).unwrap_err();
        assert!(e.contains("unknown parameter \"iops\""), "{e}");
        let e = Limits::parse(&params(&[("write_iops", "fast")])).unwrap_err();
        assert!(e.contains("write_iops: \"fast\""), "{e}");
        assert!(!Limits::default().any());
        assert_eq!(Limits::default().describe(), "unlimited");
    }
}
