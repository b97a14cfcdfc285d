//! Importers: real traces recorded by partners and tools, read exactly into cnsreplay traces,
//! and exporters back to the tools' own formats.
//!
//! Every importer reports bad input as [`BadInput`]: the file, the 1-based line (or record
//! index for binary inputs), the field, and what is wrong. By default the first bad line is an
//! error; with [`Policy::skip_bad`] bad lines are skipped, counted, and the first few kept for
//! the report, never dropped silently.
//!
//! Importers read their input twice where a trace needs facts only the whole input knows (the
//! volumes a block trace touches and how far into each it reaches, for the header's volume
//! declarations), and stream events on the second pass, so memory stays constant.

pub mod audit;
pub mod blk;
pub mod blockcsv;
pub mod fio;
pub mod input;
pub mod pods;
#[doc(hidden)]
pub mod testgen;
use std::collections::BTreeMap;
use std::fmt;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::sync::Arc;

/// One bad line or record of an input file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadInput {
    /// The file as the user named it.
    pub file: String,
    /// 1-based line (text) or 0-based record index (binary, with `record: true`); 0 for a
    /// text input as a whole (a compressed stream that does not decode).
    pub line: u64,
    /// Whether `line` is a record index rather than a line number.
    pub record: bool,
    /// The field, e.g. `offset` or `column 3 (offset)`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for BadInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.record {
            write!(f, "{}: record {}", self.file, self.line)?;
        } else if self.line == 0 {
            write!(f, "{}", self.file)?;
        } else {
            write!(f, "{}:{}", self.file, self.line)?;
        }
        if !self.field.is_empty() {
            write!(f, ": {}", self.field)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Errors of importers and exporters.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// An I/O error (with `fs-err`, the message names the path).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A bad line or record, when not skipping.
    #[error("{0}")]
    Bad(Box<BadInput>),
    /// Writing the trace failed.
    #[error(transparent)]
    Trace(#[from] trace_format::Error),
    /// The input cannot be represented (e.g. an exporter given an operation its format lacks).
    #[error("{0}")]
    Unsupported(String),
}

impl From<BadInput> for ImportError {
    fn from(b: BadInput) -> Self {
        ImportError::Bad(Box::new(b))
    }
}

/// What to do with bad lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Skip bad lines (counted and reported) instead of stopping at the first.
    pub skip_bad: bool,
    /// How many skipped lines to keep in the report.
    pub keep_first: usize,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            skip_bad: false,
            keep_first: 5,
        }
    }
}

/// What an import did besides producing events.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// Events written.
    pub events: u64,
    /// Bad lines skipped (with `skip_bad`).
    pub skipped: u64,
    /// The first skipped lines.
    pub first_skipped: Vec<BadInput>,
    /// Notes for the user (e.g. defaults that were applied, and how often).
    pub warnings: Vec<String>,
}

impl ImportReport {
    /// Applies the policy to a bad line: records it and carries on, or fails.
    pub fn bad(&mut self, policy: Policy, b: BadInput) -> Result<(), ImportError> {
        if !policy.skip_bad {
            return Err(b.into());
        }
        self.skipped += 1;
        if self.first_skipped.len() < policy.keep_first {
            self.first_skipped.push(b);
        }
        Ok(())
    }
}

/// An importer's input: a file, or bytes in memory (fuzzing, benchmarks, tests). Importers
/// that read their input twice open it twice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A file, named in messages as given.
    File(PathBuf),
    /// A copy of an input that could not be read twice as it was (a pipe, stdin, a
    /// compressed file: [`input::Inputs`]), at `path`, named `name` in messages.
    Spooled {
        /// The name the user gave (`<stdin>` for `-`).
        name: String,
        /// The spooled copy.
        path: PathBuf,
    },
    /// Bytes in memory, named `name` in messages.
    Bytes {
        /// The name used in messages and provenance.
        name: String,
        /// The content.
        data: Arc<[u8]>,
    },
}

impl Source {
    /// Bytes in memory named `name`.
    pub fn bytes(name: &str, data: &[u8]) -> Self {
        Source::Bytes {
            name: name.to_owned(),
            data: Arc::from(data),
        }
    }

    /// The name used in messages and provenance.
    pub fn name(&self) -> String {
        match self {
            Source::File(p) => p.display().to_string(),
            Source::Spooled { name, .. } | Source::Bytes { name, .. } => name.clone(),
        }
    }

    /// Opens the input from its start.
    pub fn open(&self) -> Result<Box<dyn BufRead + Send>, ImportError> {
        Ok(match self {
            Source::File(p) | Source::Spooled { path: p, .. } => {
                Box::new(BufReader::with_capacity(256 << 10, fs_err::File::open(p)?))
            }
            Source::Bytes { data, .. } => Box::new(std::io::Cursor::new(Arc::clone(data))),
        })
    }

    /// Files as sources.
    pub fn files(paths: &[PathBuf]) -> Vec<Source> {
        paths.iter().cloned().map(Source::File).collect()
    }
}

/// Calls `f` with each line (1-based) until it returns `false`. Lines are read as bytes, so a
/// non-UTF-8 line reaches `f` as a located problem rather than failing the read.
pub(crate) fn for_each_line(
    src: &Source,
    mut f: impl FnMut(u64, Result<&str, std::str::Utf8Error>) -> Result<bool, ImportError>,
) -> Result<(), ImportError> {
    let mut r = src.open()?;
    let mut buf = Vec::new();
    let mut line = 0u64;
    loop {
        buf.clear();
        if r.read_until(b'\n', &mut buf)? == 0 {
            return Ok(());
        }
        line += 1;
        if !f(line, std::str::from_utf8(&buf))? {
            return Ok(());
        }
    }
}

/// The size declared for a volume whose furthest byte reached is `end`: rounded up to 1 MiB,
/// at least 1 MiB (or `end` itself where rounding would overflow).
pub(crate) fn volume_size(end: u64) -> u64 {
    const MIB: u64 = 1 << 20;
    end.div_ceil(MIB).max(1).checked_mul(MIB).unwrap_or(end)
}

/// The header of an imported trace: its provenance and the volumes it declares.
pub(crate) fn header(
    source_format: &str,
    source_files: Vec<String>,
    parameters: BTreeMap<String, String>,
    volumes: Vec<trace_format::VolumeDecl>,
) -> trace_format::Header {
    trace_format::Header {
        provenance: trace_format::Provenance {
            source_format: Some(source_format.to_owned()),
            source_files,
            generator: Some(format!("cnsreplay-import {}", env!("CARGO_PKG_VERSION"))),
            seed: None,
            parameters,
        },
        volumes,
        ..trace_format::Header::default()
    }
}
