//! The file systems a volume can carry, and formatting one.

use std::path::Path;

use crate::command::{path_str, run};
use crate::error::StorageError;

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
