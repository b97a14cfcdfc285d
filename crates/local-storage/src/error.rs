//! The error every storage primitive returns.

use std::path::PathBuf;

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
