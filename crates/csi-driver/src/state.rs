//! The driver's persistent state and its per-call log.
//!
//! `ROOT/state.json` holds every volume and snapshot (with the class parameters it was created
//! with, where it is published, staged and mounted), rewritten atomically (temp file, fsync,
//! rename, fsync of the directory) after every change, so a restart mid-run loses nothing. A
//! record is written as `ready: false` before its backing file is made: a retry of the same
//! name after a crash redoes the work instead of leaking a file. Loop devices are found again
//! by backing file (`losetup -j`) on load.
//!
//! `ROOT/ops.jsonl` gets one line per call of a mutating RPC: operation, object, wall-clock
//! start and end (ns since the Unix epoch), the injected part and the outcome, so analysis
//! can separate the provider's time from Kubernetes' time.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use local_storage::FsType;
use serde::{Deserialize, Serialize};

/// Where a volume's content came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Restored from this snapshot id.
    Snapshot(String),
    /// Cloned from this volume id.
    Volume(String),
}

/// One volume.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VolumeRec {
    /// Volume id (`vol-N`).
    pub id: String,
    /// The CO's name (idempotency key).
    pub name: String,
    /// Capacity, bytes.
    pub capacity: u64,
    /// Raw block volume (no file system).
    pub block: bool,
    /// Its file system (meaningless for block volumes; ext4 in state files older than xfs).
    #[serde(default)]
    pub fs: FsType,
    /// Backing image.
    pub image: PathBuf,
    /// Class parameters at creation.
    pub params: BTreeMap<String, String>,
    /// Content source.
    pub source: Option<Source>,
    /// Accessible topology segments (empty = everywhere).
    pub topology: BTreeMap<String, String>,
    /// Whether ControllerExpandVolume leaves the file system to NodeExpandVolume.
    pub node_expansion: bool,
    /// Node id → published read-only.
    pub published: BTreeMap<String, bool>,
    /// Loop device while published (root mode).
    pub loop_dev: Option<String>,
    /// Staging paths (file system mounted there for mount volumes).
    pub staged: BTreeSet<PathBuf>,
    /// Target paths published on the node.
    pub targets: BTreeSet<PathBuf>,
    /// False until the backing file is complete.
    pub ready: bool,
    /// I/O limits of its attributes class (CreateVolume's and ControllerModifyVolume's
    /// mutable parameters), applied on the node ([`crate::throttle`]).
    #[serde(default)]
    pub limits: local_storage::throttle::Limits,
}

/// One snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapRec {
    /// Snapshot id (`snap-N`).
    pub id: String,
    /// The CO's name (idempotency key).
    pub name: String,
    /// Source volume id.
    pub source_volume: String,
    /// Size, bytes.
    pub size: u64,
    /// Whether the source was a block volume.
    pub block: bool,
    /// The source's file system (a restore keeps it).
    #[serde(default)]
    pub fs: FsType,
    /// Backing image copy.
    pub image: PathBuf,
    /// Class parameters at creation.
    pub params: BTreeMap<String, String>,
    /// Creation time, ns since the Unix epoch.
    pub created_ns: u64,
    /// How the copy was made (`copy-reflink` / `copy-full`).
    pub copy: String,
    /// False until the copy is complete.
    pub ready: bool,
    /// The group snapshot it is a member of (DeleteSnapshot refuses members).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

/// One group snapshot: member snapshots taken at one instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupRec {
    /// Group snapshot id (`group-N`).
    pub id: String,
    /// The CO's name (idempotency key).
    pub name: String,
    /// Source volume ids, in the request's order.
    pub source_volumes: Vec<String>,
    /// Member snapshot ids, in the same order.
    pub snapshots: Vec<String>,
    /// Class parameters at creation.
    pub params: BTreeMap<String, String>,
    /// Creation time, ns since the Unix epoch.
    pub created_ns: u64,
    /// False until every member's copy is complete.
    pub ready: bool,
}

/// Everything the driver knows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// Next numeric id.
    pub next_id: u64,
    /// By volume id.
    pub volumes: BTreeMap<String, VolumeRec>,
    /// By snapshot id.
    pub snapshots: BTreeMap<String, SnapRec>,
    /// By group snapshot id.
    #[serde(default)]
    pub groups: BTreeMap<String, GroupRec>,
}

/// A state-file failure.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// Reading or writing the file.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The file does not parse.
    #[error("{path}: {source}")]
    Parse {
        /// The state file.
        path: PathBuf,
        /// The JSON error (line and column).
        source: serde_json::Error,
    },
}

impl State {
    /// A fresh id with this prefix.
    pub fn new_id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}-{}", self.next_id)
    }

    /// The volume with this CO name.
    pub fn volume_by_name(&self, name: &str) -> Option<&VolumeRec> {
        self.volumes.values().find(|v| v.name == name)
    }

    /// The snapshot with this CO name.
    pub fn snapshot_by_name(&self, name: &str) -> Option<&SnapRec> {
        self.snapshots.values().find(|s| s.name == name)
    }

    /// Loads `path`, or an empty state when it does not exist.
    pub fn load(path: &Path) -> Result<Self, StateError> {
        match fs_err::read_to_string(path) {
            Ok(text) => serde_json::from_str(&text).map_err(|source| StateError::Parse {
                path: path.to_owned(),
                source,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(e.into()),
        }
    }

    /// Writes `path` atomically: temp file, fsync, rename, fsync of the directory.
    pub fn save(&self, path: &Path) -> Result<(), StateError> {
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_vec_pretty(self).map_err(|source| StateError::Parse {
            path: path.to_owned(),
            source,
        })?;
        let mut f = fs_err::File::create(&tmp)?;
        f.write_all(&text)?;
        f.sync_all()?;
        drop(f);
        fs_err::rename(&tmp, path)?;
        if let Some(dir) = path.parent() {
            fs_err::File::open(dir)?.sync_all()?;
        }
        Ok(())
    }
}

/// One line of `ops.jsonl`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OpRecord {
    /// CSI method name.
    pub op: String,
    /// Volume id (or the CO's name when none was assigned yet).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub volume: String,
    /// Snapshot id, for snapshot calls.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub snapshot: String,
    /// Node id, for publish calls.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub node: String,
    /// The path a node call was given (staging, target or volume path): a target path names
    /// the pod (`pods/<uid>/…`) and the PV, which joins the driver's calls to the CO's objects.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
    /// Call start, ns since the Unix epoch.
    pub start_ns: u64,
    /// Call end, ns since the Unix epoch.
    pub end_ns: u64,
    /// Injected delay + stall, ns (included in end − start).
    pub injected_ns: u64,
    /// Whether a stall was drawn.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stalled: bool,
    /// `OK` or the gRPC status code name.
    pub code: String,
    /// What the storage work did (e.g. `mkfs`, `copy-reflink`, `losetup`), or the error.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// Appends records to `ops.jsonl`, one write per line.
#[derive(Debug)]
pub struct OpLog {
    file: fs_err::File,
}

impl OpLog {
    /// Opens (appends to) `path`.
    pub fn open(path: &Path) -> Result<Self, std::io::Error> {
        let file = fs_err::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Self { file })
    }

    /// Appends one record.
    pub fn append(&mut self, r: &OpRecord) -> Result<(), std::io::Error> {
        let mut line = serde_json::to_vec(r).map_err(std::io::Error::other)?;
        line.push(b'\n');
        self.file.write_all(&line)
    }
}

/// Reads every record of an `ops.jsonl` file; errors name the line.
pub fn read_ops(path: &Path) -> Result<Vec<OpRecord>, StateError> {
    let text = fs_err::read_to_string(path)?;
    parse_ops(&text, &path.display().to_string())
}

/// Parses the text of an `ops.jsonl` file named `file` (in errors, with the line).
pub fn parse_ops(text: &str, file: &str) -> Result<Vec<OpRecord>, StateError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|source| StateError::Parse {
                path: PathBuf::from(format!("{file}:{}", i + 1)),
                source,
            })
        })
        .collect()
}

/// Now, ns since the Unix epoch.
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Errors name the line in the file, blank lines included (they were numbered among the
    /// non-blank lines only).
    #[test]
    fn ops_errors_name_the_file_line() {
        let err = parse_ops("\n\n{not json}\n", "ops.jsonl").expect_err("bad line");
        assert!(err.to_string().contains("ops.jsonl:3"), "{err}");
    }
}
