//! The `--json` reports. Their JSON Schemas are generated from these types and committed
//! under `docs/schemas/`; a test fails when the two drift apart.

use schemars::JsonSchema;
use serde::Serialize;
use trace_format::{Diagnostic, Stats};

/// `cnsreplay validate --json`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ValidateReport {
    /// The file as named on the command line.
    pub file: String,
    /// The encoding read (`yaml`, `jsonl`, `binary`); absent when the header was unreadable.
    pub encoding: Option<String>,
    /// True when no problem was found.
    pub valid: bool,
    /// Events read.
    pub events: u64,
    /// Problems found (all of them, even beyond `diagnostics`).
    pub problems: u64,
    /// True when reading stopped at an unrecoverable problem.
    pub aborted: bool,
    /// The first problems, in file order.
    pub diagnostics: Vec<DiagnosticJson>,
}

/// One located problem.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DiagnosticJson {
    /// 1-based line (text encodings).
    pub line: Option<u64>,
    /// 0-based event index.
    pub record: Option<u64>,
    /// Byte offset (binary encoding).
    pub byte: Option<u64>,
    /// Field path, e.g. `events[41].attach.volumes[0]`.
    pub path: String,
    /// Stable problem code, e.g. `dangling_reference`.
    pub code: String,
    /// The problem alone.
    pub message: String,
    /// The full located message as printed without `--json`.
    pub text: String,
}

impl From<&Diagnostic> for DiagnosticJson {
    fn from(d: &Diagnostic) -> Self {
        Self {
            line: d.location.line,
            record: d.location.record,
            byte: d.location.byte,
            path: d.path.clone(),
            code: d.problem.code().to_owned(),
            message: d.problem.to_string(),
            text: d.to_string(),
        }
    }
}

/// `cnsreplay stats --json`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct StatsReport {
    /// The file as named on the command line.
    pub file: String,
    /// The encoding read.
    pub encoding: String,
    /// True when the checker found no problem (statistics of an invalid trace are suspect).
    pub valid: bool,
    /// Problems found.
    pub problems: u64,
    /// The statistics.
    pub stats: Stats,
}
