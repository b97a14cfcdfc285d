//! Synchronous storage primitives shared by the `local` provider and the `cnsreplay-csi` driver:
//! create (+ format) an image, attach/detach a loop device, mount/unmount, copy (reflink or
//! full, reporting which), restore (copy + grow), grow (file, loop, file system), freeze/thaw.
//!
//! File systems: ext4 (the default) and xfs ([`FsType`]). They differ where it matters to a
//! benchmark of a real cluster: ext4's online grow (resize2fs) needs CAP_SYS_RESOURCE, which
//! sandboxed hosts often lack, while xfs grows only online (xfs_growfs on a mount point, which
//! needs only CAP_SYS_ADMIN), so an "offline" xfs grow is a private temporary mount. A restored
//! xfs copy carries its source's UUID, so xfs mounts use `nouuid` to sit beside the source.
//!
//! Each primitive does one step and nothing else: no ledger, no state, no phases. Callers
//! record what they intend before calling (the provider's ledger, the driver's state file)
//! and time each step themselves. Failures name the command and its stderr, or the path.

pub mod cbt;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A failed storage step.
#[derive(Debug)]
pub enum StorageError {
    /// A command could not be started.
    Spawn {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// A command exited unsuccessfully.
    Command {
        /// The program and its arguments.
        command: String,
        /// Its trimmed stderr.
        stderr: String,
        /// Its exit status.
        status: String,
    },
    /// A path is not UTF-8 (commands take strings).
    Path(PathBuf),
    /// File I/O (the message names the path: `fs-err`).
    Io(std::io::Error),
    /// Growing a mounted file system failed online and then offline: both reasons (the
    /// online one is usually the cause, e.g. ext4's online resize needs CAP_SYS_RESOURCE; the
    /// offline one follows from it, e.g. a container still holding the mount).
    Grow {
        /// Why the online resize failed.
        online: Box<StorageError>,
        /// Why the offline resize after unmounting failed.
        offline: Box<StorageError>,
    },
}

impl std::fmt::Display for StorageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Spawn { program, source } => write!(f, "cannot run {program}: {source}"),
            Self::Command {
                command,
                stderr,
                status,
            } => write!(f, "{command}: {stderr} ({status})"),
            Self::Path(p) => write!(f, "non-UTF-8 path {}", p.display()),
            Self::Io(e) => e.fmt(f),
            Self::Grow { online, offline } => write!(
                f,
                "online resize failed: {online}; offline resize after unmounting failed: {offline}"
            ),
        }
    }
}

impl std::error::Error for StorageError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Spawn { source, .. } | Self::Io(source) => Some(source),
            _ => None,
        }
    }
}

impl From<std::io::Error> for StorageError {
    fn from(e: std::io::Error) -> Self {
        Self::Io(e)
    }
}

impl StorageError {
    /// A short machine-readable kind: `command_failed` or `io`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Spawn { .. } | Self::Command { .. } | Self::Grow { .. } => "command_failed",
            Self::Path(_) | Self::Io(_) => "io",
        }
    }
}

/// A file system a volume can carry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FsType {
    /// ext4 (mkfs.ext4, resize2fs).
    #[default]
    Ext4,
    /// xfs (mkfs.xfs, xfs_growfs).
    Xfs,
}

impl FsType {
    /// The names [`FsType::parse`] accepts, for error messages.
    pub const NAMES: &'static str = "ext4, xfs";

    /// `ext4` or `xfs`; `None` for anything else (an empty string is for the caller to
    /// default).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "ext4" => Some(Self::Ext4),
            "xfs" => Some(Self::Xfs),
            _ => None,
        }
    }

    /// The name as mount and Kubernetes spell it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ext4 => "ext4",
            Self::Xfs => "xfs",
        }
    }

    /// The smallest size its mkfs accepts (mkfs.xfs refuses file systems under 300 MiB
    /// since xfsprogs 5.19).
    pub fn min_bytes(self) -> u64 {
        match self {
            Self::Ext4 => 16 << 20,
            Self::Xfs => 300 << 20,
        }
    }

    /// Extra `mount` arguments: xfs copies share their source's UUID, and the kernel refuses
    /// a second mount of one UUID without `nouuid`.
    pub fn mount_args(self) -> &'static [&'static str] {
        match self {
            Self::Ext4 => &[],
            Self::Xfs => &["-o", "nouuid"],
        }
    }

    /// The command that grows it (for call details and messages).
    pub fn grow_command(self) -> &'static str {
        match self {
            Self::Ext4 => "resize2fs",
            Self::Xfs => "xfs_growfs",
        }
    }
}

impl std::fmt::Display for FsType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How a copy was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyKind {
    /// A reflink (FICLONE): shared extents, constant time.
    Reflink,
    /// A full sparse copy.
    Full,
}

impl CopyKind {
    /// `copy-reflink` or `copy-full` (the phase names the provider records).
    pub fn phase(self) -> &'static str {
        match self {
            Self::Reflink => "copy-reflink",
            Self::Full => "copy-full",
        }
    }
}

/// How a file system was grown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrowKind {
    /// `resize2fs` on the mounted file system.
    Online,
    /// Unmounted, grown offline and mounted again (the kernel refused the online resize).
    Remount,
    /// The image or device was not mounted: e2fsck + resize2fs.
    Offline,
}

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

/// Creates a sparse image of `size` bytes; with `fs`, that file system on it.
pub fn create_image(image: &Path, size: u64, fs: Option<FsType>) -> Result<(), StorageError> {
    let f = fs_err::File::create(image)?;
    f.set_len(size)?;
    drop(f);
    if let Some(fs) = fs {
        mkfs_as(image, fs)?;
    }
    Ok(())
}

/// Formats an image or device with ext4.
pub fn mkfs(target: &Path) -> Result<(), StorageError> {
    mkfs_as(target, FsType::Ext4)
}

/// Formats an image or device with `fs`.
pub fn mkfs_as(target: &Path, fs: FsType) -> Result<(), StorageError> {
    let t = path_str(target)?;
    match fs {
        FsType::Ext4 => run("mkfs.ext4", &["-q", "-F", t]),
        FsType::Xfs => run("mkfs.xfs", &["-q", "-f", t]),
    }
    .map(drop)
}

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

/// Copies `src` to `dst`, by reflink when the file system supports it (`cp
/// --reflink=always`; FICLONE underneath), else a full sparse copy.
pub fn copy_image(src: &Path, dst: &Path) -> Result<CopyKind, StorageError> {
    let (s, d) = (path_str(src)?, path_str(dst)?);
    if run("cp", &["--reflink=always", "--", s, d]).is_ok() {
        return Ok(CopyKind::Reflink);
    }
    let _ = fs_err::remove_file(dst);
    run(
        "cp",
        &["-a", "--reflink=never", "--sparse=always", "--", s, d],
    )?;
    Ok(CopyKind::Full)
}

/// Sets a file's length to `size` (never shrinks).
pub fn grow_file(image: &Path, size: u64) -> Result<(), StorageError> {
    let f = fs_err::OpenOptions::new().write(true).open(image)?;
    if f.metadata()?.len() < size {
        f.set_len(size)?;
    }
    Ok(())
}

/// Grows the ext4 file system of an image or device that is not mounted: e2fsck (resize2fs
/// insists on a fresh check) + resize2fs.
pub fn grow_offline(target: &Path) -> Result<(), StorageError> {
    let p = path_str(target)?;
    // e2fsck exits 1 when it fixed something, which is fine here.
    let _ = Command::new("e2fsck").args(["-f", "-y", p]).output();
    run("resize2fs", &[p]).map(drop)
}

/// Grows the `fs` file system of an image or device that is not mounted. xfs grows only
/// mounted: it is mounted at `scratch` (a directory created and removed here, `nouuid`, a
/// loop device made by mount for an image), grown with xfs_growfs and unmounted again.
pub fn grow_offline_as(target: &Path, fs: FsType, scratch: &Path) -> Result<(), StorageError> {
    match fs {
        FsType::Ext4 => grow_offline(target),
        FsType::Xfs => {
            mount(path_str(target)?, scratch, fs.mount_args())?;
            let grown = run("xfs_growfs", &[path_str(scratch)?]).map(drop);
            let unmounted = unmount(scratch, Duration::from_secs(5));
            let _ = fs_err::remove_dir(scratch);
            grown.and(unmounted)
        }
    }
}

/// Grows the file system on `dev` to the device's size: online when mounted at `mount_at`;
/// where the kernel refuses online resizing, unmount, grow offline, mount again.
pub fn grow_fs(dev: &str, mount_at: Option<&Path>) -> Result<GrowKind, StorageError> {
    grow_fs_mounted(dev, mount_at.map(Path::to_owned).as_slice())
}

/// Like [`grow_fs`] for a file system mounted at several places: `mounts[0]` is the device's
/// own mount, the others bind mounts of it (a CSI staging path and its published targets).
/// When the online resize is refused, all are unmounted (binds first), the file system is
/// grown offline, and all are mounted again in the same way.
pub fn grow_fs_mounted(dev: &str, mounts: &[PathBuf]) -> Result<GrowKind, StorageError> {
    let Some((first, binds)) = mounts.split_first() else {
        grow_offline(Path::new(dev))?;
        return Ok(GrowKind::Offline);
    };
    let online = match run("resize2fs", &[dev]) {
        Ok(_) => return Ok(GrowKind::Online),
        Err(e) => e,
    };
    for (i, m) in mounts.iter().enumerate().rev() {
        if let Err(e) = run("umount", &[path_str(m)?]) {
            // Put back what was already unmounted, then report the original failure.
            for again in &mounts[i + 1..] {
                let _ = mount(path_str(first)?, again, &["--bind"]);
            }
            return Err(if i == 0 { online } else { e });
        }
    }
    let grown = grow_offline(Path::new(dev));
    mount(dev, first, &[])?;
    for b in binds {
        mount(path_str(first)?, b, &["--bind"])?;
    }
    grown.map_err(|offline| StorageError::Grow {
        online: Box::new(online),
        offline: Box::new(offline),
    })?;
    Ok(GrowKind::Remount)
}

/// Grows the `fs` file system on `dev`, mounted at `mounts` (`mounts[0]` the device's own
/// mount, the others bind mounts of it). ext4: [`grow_fs_mounted`]. xfs: xfs_growfs on the
/// first mount (no fallback: xfs cannot grow unmounted, and a failure here is the answer);
/// not mounted, through a temporary mount at `scratch` ([`grow_offline_as`]).
pub fn grow_fs_mounted_as(
    dev: &str,
    mounts: &[PathBuf],
    fs: FsType,
    scratch: &Path,
) -> Result<GrowKind, StorageError> {
    match (fs, mounts.first()) {
        (FsType::Ext4, _) => grow_fs_mounted(dev, mounts),
        (FsType::Xfs, Some(m)) => run("xfs_growfs", &[path_str(m)?]).map(|_| GrowKind::Online),
        (FsType::Xfs, None) => {
            grow_offline_as(Path::new(dev), fs, scratch)?;
            Ok(GrowKind::Offline)
        }
    }
}

/// Copies `src` to `dst` and grows the copy to `size` when that is larger than the source
/// (its file system too, with `fs`; an xfs one through a temporary mount at `dst` +
/// `.grow-mnt`). The copy must not be attached.
pub fn restore(
    src: &Path,
    dst: &Path,
    size: u64,
    fs: Option<FsType>,
) -> Result<CopyKind, StorageError> {
    let kind = copy_image(src, dst)?;
    let src_len = fs_err::metadata(dst)?.len();
    if size > src_len {
        grow_file(dst, size)?;
        if let Some(fs) = fs {
            grow_offline_as(dst, fs, &scratch_of(dst))?;
        }
    }
    Ok(kind)
}

/// The temporary mount point for growing an xfs image offline: beside the image.
pub fn scratch_of(image: &Path) -> PathBuf {
    let mut s = image.as_os_str().to_owned();
    s.push(".grow-mnt");
    PathBuf::from(s)
}

/// Freezes a mounted file system (`fsfreeze -f`); returns whether it worked.
pub fn freeze(mount_at: &Path) -> bool {
    path_str(mount_at).is_ok_and(|m| run("fsfreeze", &["-f", m]).is_ok())
}

/// Thaws a frozen file system (`fsfreeze -u`).
pub fn thaw(mount_at: &Path) -> Result<(), StorageError> {
    run("fsfreeze", &["-u", path_str(mount_at)?]).map(drop)
}

/// A consistent copy of a volume's image: freezes `mounted` (if any) around the copy.
pub fn snapshot_copy(
    image: &Path,
    dst: &Path,
    mounted: Option<&Path>,
) -> Result<(CopyKind, bool), StorageError> {
    let frozen = mounted.is_some_and(freeze);
    let copied = copy_image(image, dst);
    if frozen && let Some(m) = mounted {
        thaw(m)?;
    }
    Ok((copied?, frozen))
}

/// One member of a group snapshot: its image, the copy to make, its mount point if mounted.
pub type Member<'a> = (&'a Path, &'a Path, Option<&'a Path>);

/// A group snapshot's copies: every mounted member frozen first, then each copied, then all
/// thawed, so the copies share one instant (crash-consistent across the members). `step` is
/// told `freeze-all` once every mounted member is frozen and `thaw-all` once all are thawed
/// (not when none was mounted). Returns each copy's kind (in `members` order). Every member
/// is thawed whatever happened; the first error is returned after that.
pub fn group_snapshot_copy(
    members: &[Member<'_>],
    step: &mut dyn FnMut(&'static str),
) -> Result<Vec<CopyKind>, StorageError> {
    group_snapshot_copy_timed(members, step).map(|(kinds, _)| kinds)
}

/// [`group_snapshot_copy`], also returning when each mounted member's freeze returned (its
/// point in time; `None` for a member that was not mounted).
pub fn group_snapshot_copy_timed(
    members: &[Member<'_>],
    step: &mut dyn FnMut(&'static str),
) -> Result<(Vec<CopyKind>, Vec<Option<std::time::Instant>>), StorageError> {
    let mut at = Vec::with_capacity(members.len());
    let frozen: Vec<bool> = members
        .iter()
        .map(|(_, _, m)| {
            let f = m.is_some_and(freeze);
            at.push(f.then(std::time::Instant::now));
            f
        })
        .collect();
    let any = frozen.iter().any(|f| *f);
    if any {
        step("freeze-all");
    }
    let copies: Vec<Result<CopyKind, StorageError>> = members
        .iter()
        .map(|(src, dst, _)| copy_image(src, dst))
        .collect();
    let mut thawed = Ok(());
    for ((_, _, m), f) in members.iter().zip(&frozen) {
        if *f && let Some(m) = m {
            let r = thaw(m);
            if thawed.is_ok() {
                thawed = r;
            }
        }
    }
    if any {
        step("thaw-all");
    }
    let kinds = copies.into_iter().collect::<Result<Vec<_>, _>>()?;
    thawed?;
    Ok((kinds, at))
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
