//! The ledger: every object a run creates, written (and flushed to disk) *before* it is
//! created, and released after it is deleted. A crash therefore leaves a ledger naming every
//! possible leftover, and `cnsreplay cleanup` removes exactly those and nothing else.
//!
//! Format (`RUNDIR/ledger.jsonl`, one JSON object per line):
//! `{"op":"create","kind":"image","id":"/run/objects/vol-db-0.img","detail":{…}}` and
//! `{"op":"release","kind":"image","id":"…"}`. A torn last line (crash mid-write) is ignored;
//! any other malformed line is an error naming it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};

/// One object the run owns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LedgerEntry {
    /// Provider-defined kind, e.g. `image`, `loop`, `mount`, `dir`, `pvc`.
    pub kind: String,
    /// Identifier unique within the kind (a path, a device, a namespaced name).
    pub id: String,
    /// Anything the provider needs to delete it (e.g. the loop device's backing file).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub detail: serde_json::Value,
}

/// One line of `ledger.jsonl`: an entry and whether the object was created or released.
#[derive(Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub(crate) struct Line {
    /// `create` (written before the object is created) or `release` (after it is gone).
    op: LineOp,
    /// The object.
    #[serde(flatten)]
    entry: LedgerEntry,
}

/// What a ledger line records.
#[derive(Serialize, Deserialize, PartialEq, Eq, Clone, Copy)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
enum LineOp {
    /// The object is about to be created.
    Create,
    /// The object is gone.
    Release,
}

/// The append-only ledger file of a run.
#[derive(Debug)]
pub struct Ledger {
    path: PathBuf,
    file: Mutex<Option<fs_err::File>>,
}

impl Ledger {
    /// The ledger file inside a run directory.
    pub fn path_in(run_dir: &Path) -> PathBuf {
        run_dir.join("ledger.jsonl")
    }

    /// Opens (creating or appending) the ledger of `run_dir`.
    pub fn open(run_dir: &Path) -> std::io::Result<Self> {
        let path = Self::path_in(run_dir);
        let file = fs_err::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        Ok(Self {
            path,
            file: Mutex::new(Some(file)),
        })
    }

    /// A ledger that records nothing (providers that create nothing, tests).
    pub fn disabled() -> Self {
        Self {
            path: PathBuf::new(),
            file: Mutex::new(None),
        }
    }

    fn append(&self, op: LineOp, entry: LedgerEntry) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(&Line { op, entry }).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let mut guard = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(f) = guard.as_mut() {
            f.write_all(&line)?;
            if op == LineOp::Create {
                // The entry must be on disk before the object exists.
                f.sync_data()?;
            }
        }
        Ok(())
    }

    /// Records that the run is about to create an object. Call *before* creating it.
    pub fn intend(&self, kind: &str, id: &str, detail: serde_json::Value) -> std::io::Result<()> {
        self.append(
            LineOp::Create,
            LedgerEntry {
                kind: kind.to_owned(),
                id: id.to_owned(),
                detail,
            },
        )
    }

    /// Records that an object is gone. Call *after* deleting it.
    pub fn release(&self, kind: &str, id: &str) -> std::io::Result<()> {
        self.append(
            LineOp::Release,
            LedgerEntry {
                kind: kind.to_owned(),
                id: id.to_owned(),
                detail: serde_json::Value::Null,
            },
        )
    }

    /// The objects created and not released, oldest first ([`read_live`]).
    pub fn live(&self) -> Result<Vec<LedgerEntry>, crate::Error> {
        if self.path.as_os_str().is_empty() {
            return Ok(Vec::new());
        }
        read_live(&self.path)
    }
}

/// Reads a ledger file: the objects created and not released, oldest first. A missing file
/// is an empty ledger; a torn last line (a crash mid-write: no newline after it) is ignored.
/// Any other line that is not a ledger entry is an error naming the file and line: skipping
/// it would leave what it records out of a cleanup, silently.
pub fn read_live(path: &Path) -> Result<Vec<LedgerEntry>, crate::Error> {
    let text = match fs_err::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let n = text.lines().count();
    let mut live: Vec<LedgerEntry> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let l = match serde_json::from_str::<Line>(line) {
            Ok(l) => l,
            Err(_) if i + 1 == n && !text.ends_with('\n') => continue,
            Err(source) => {
                return Err(crate::Error::Json {
                    file: format!("{}:{}", path.display(), i + 1).into(),
                    source,
                });
            }
        };
        match l.op {
            LineOp::Create => {
                live.retain(|e| !(e.kind == l.entry.kind && e.id == l.entry.id));
                live.push(l.entry);
            }
            LineOp::Release => live.retain(|e| !(e.kind == l.entry.kind && e.id == l.entry.id)),
        }
    }
    Ok(live)
}

#[cfg(test)]
mod tests {
    use super::read_live;

    const CREATE: &str = r#"{"op":"create","kind":"image","id":"a"}"#;

    /// A crash mid-write tears the last line only: ignored. A malformed line anywhere else is
    /// damage a cleanup would silently work around, leaving what it recorded behind.
    #[test]
    fn a_torn_last_line_is_ignored_and_a_malformed_one_is_an_error_naming_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("ledger.jsonl");
        fs_err::write(&path, format!("{CREATE}\n{{\"op\":\"cre")).expect("write");
        let live = read_live(&path).expect("torn last line ignored");
        assert_eq!(live.len(), 1);
        fs_err::write(&path, format!("{{\"op\":\n{CREATE}\n")).expect("write");
        let e = read_live(&path).expect_err("a malformed first line");
        assert!(
            matches!(e, crate::Error::Json { .. }) && e.to_string().contains("ledger.jsonl:1:"),
            "{e}"
        );
    }
}
