//! Located errors.
//!
//! Every problem with a trace is a [`Diagnostic`]: the file, where in it (line for text,
//! record index and byte offset for binary), the field path inside the event
//! (`events[41].attach.volumes[0]`), and a matchable [`Problem`]. Its `Display` is the one-line
//! message users see, e.g.
//! `trace.jsonl:42: events[41].attach.volumes[0]: volume "pvc-7" was deleted at t=12.5s`.

use std::fmt;

use crate::model::AccessMode;
use crate::units::{Name, fmt_secs};

/// Where in a file a problem is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Location {
    /// 1-based line (text encodings).
    pub line: Option<u64>,
    /// 0-based event index (`None` for the header).
    pub record: Option<u64>,
    /// Byte offset of the record (binary encoding).
    pub byte: Option<u64>,
}

/// One located problem in a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    /// The file as the user named it.
    pub file: String,
    /// Where in the file.
    pub location: Location,
    /// Field path, e.g. `events[41].attach.volumes[0]` or `header.defaults.volume_size`.
    pub path: String,
    /// What is wrong.
    pub problem: Problem,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        match (self.location.line, self.location.byte) {
            (Some(line), _) => write!(f, ":{line}")?,
            (None, Some(byte)) => write!(f, ": byte {byte}")?,
            (None, None) => {}
        }
        if !self.path.is_empty() {
            write!(f, ": {}", self.path)?;
        }
        write!(f, ": {}", self.problem)
    }
}

impl std::error::Error for Diagnostic {}

/// What is wrong, as data a caller can match on.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Problem {
    /// Malformed text or binary framing.
    #[error("{0}")]
    Syntax(String),
    /// Well-formed, but not the trace schema: unknown or missing field, wrong type.
    #[error("{0}")]
    Schema(String),
    /// The file is not a cnsreplay trace.
    #[error("not a cnsreplay trace: {0}")]
    NotATrace(String),
    /// Written by a newer format version than this reader knows.
    #[error(
        "format version {found} is newer than this reader supports ({supported}); upgrade cnsreplay"
    )]
    UnsupportedVersion {
        /// Version in the file.
        found: u32,
        /// Newest version this build reads.
        supported: u32,
    },
    /// The file ends inside a record or without its end marker.
    #[error("truncated: {0}")]
    Truncated(String),
    /// An event is earlier than the one before it.
    #[error("events out of time order: at={} is before the previous event's at={}", fmt_secs(*at), fmt_secs(*previous))]
    TimeInversion {
        /// This event's time.
        at: u64,
        /// The previous event's time.
        previous: u64,
    },
    /// A time divided by a speed factor (`run --speed`, `trace rewrite --speed`) does not fit
    /// a time offset (u64 ns, about 584 years).
    #[error(
        "at={} divided by speed {speed} is {:.3e} s, beyond the largest time offset (2^64 ns, \
         about 584 years); this event needs a speed of at least {:.3e}",
        fmt_secs(*at), *at as f64 / speed / 1e9, crate::units::min_speed(*at)
    )]
    TimeOverflow {
        /// The event's time, ns.
        at: u64,
        /// The speed factor.
        speed: f64,
    },
    /// An id is not larger than the previous one.
    #[error("id {id} is not larger than the previous event's id {previous}")]
    IdNotIncreasing {
        /// This event's id.
        id: u64,
        /// The previous event's id.
        previous: u64,
    },
    /// A referenced object does not exist at this time.
    #[error("{kind} {name:?} {}", gone_text(*gone_at, kind))]
    Dangling {
        /// `volume`, `snapshot` or `workload`.
        kind: &'static str,
        /// The name referenced.
        name: Name,
        /// When it was deleted or ended, if it existed earlier.
        gone_at: Option<u64>,
    },
    /// An object with this name already exists.
    #[error("{kind} {name:?} already exists")]
    Duplicate {
        /// `volume`, `snapshot` or `workload`.
        kind: &'static str,
        /// The name.
        name: Name,
    },
    /// A single-attach volume is already attached by another workload.
    #[error("volume {volume:?} ({mode:?}) is already attached by workload {by:?}")]
    AlreadyAttached {
        /// The volume.
        volume: Name,
        /// Its access mode.
        mode: AccessMode,
        /// The workload holding it.
        by: Name,
    },
    /// A volume cannot be deleted while a workload uses it.
    #[error("volume {volume:?} is still attached by workload {by:?}")]
    StillAttached {
        /// The volume.
        volume: Name,
        /// The workload holding it.
        by: Name,
    },
    /// A resize that does not grow the volume.
    #[error(
        "volume {volume:?} cannot shrink or stay the same: resize to {to} bytes from {from} bytes"
    )]
    NotGrowing {
        /// The volume.
        volume: Name,
        /// Current size.
        from: u64,
        /// Requested size.
        to: u64,
    },
    /// A resize below the current request that is not a valid recovery from the failed
    /// resize before it (code `not_growing`).
    #[error(
        "volume {volume:?}: lowering the request from {from} to {to} bytes is a recovery from a \
         failed resize only when it stays above {floor} bytes, the size before that resize"
    )]
    BadRecovery {
        /// The volume.
        volume: Name,
        /// Current request (the resize being recovered from).
        from: u64,
        /// Requested size.
        to: u64,
        /// The size before the resize being recovered from (the request must stay above it).
        floor: u64,
    },
    /// A restore or clone smaller than its source.
    #[error("size {size} bytes is smaller than the source's {source_size} bytes")]
    SmallerThanSource {
        /// Requested size.
        size: u64,
        /// Source size.
        source_size: u64,
    },
    /// An I/O request outside its volume, or a sum that overflows.
    #[error("{0}")]
    OutOfRange(String),
    /// A value outside its allowed range.
    #[error("{0}")]
    InvalidValue(String),
}

impl Problem {
    /// A stable snake_case code for machine-readable output.
    pub const fn code(&self) -> &'static str {
        match self {
            Problem::Syntax(_) => "syntax",
            Problem::Schema(_) => "schema",
            Problem::NotATrace(_) => "not_a_trace",
            Problem::UnsupportedVersion { .. } => "unsupported_version",
            Problem::Truncated(_) => "truncated",
            Problem::TimeInversion { .. } => "time_inversion",
            Problem::TimeOverflow { .. } => "time_overflow",
            Problem::IdNotIncreasing { .. } => "id_not_increasing",
            Problem::Dangling { .. } => "dangling_reference",
            Problem::Duplicate { .. } => "duplicate",
            Problem::AlreadyAttached { .. } => "already_attached",
            Problem::StillAttached { .. } => "still_attached",
            Problem::NotGrowing { .. } | Problem::BadRecovery { .. } => "not_growing",
            Problem::SmallerThanSource { .. } => "smaller_than_source",
            Problem::OutOfRange(_) => "out_of_range",
            Problem::InvalidValue(_) => "invalid_value",
        }
    }
}

fn gone_text(gone_at: Option<u64>, kind: &str) -> String {
    match (gone_at, kind) {
        (Some(t), "workload") => format!("ended at t={}", fmt_secs(t)),
        (Some(t), _) => format!("was deleted at t={}", fmt_secs(t)),
        (None, "workload") => "is not running".to_owned(),
        (None, _) => "does not exist".to_owned(),
    }
}

/// Errors from reading or writing traces.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An I/O error; with `fs-err` the message names the path.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A located problem in the trace.
    #[error("{0}")]
    Invalid(Box<Diagnostic>),
    /// The encoding could not be told from the name or content.
    #[error(
        "{file}: cannot tell the encoding; use a .yaml, .jsonl or .cnsbin name or say it explicitly"
    )]
    UnknownEncoding {
        /// The file.
        file: String,
    },
    /// Traces that cannot be merged as asked.
    #[error("merge: {reason}")]
    Merge {
        /// Why.
        reason: String,
    },
}

impl From<Diagnostic> for Error {
    fn from(d: Diagnostic) -> Self {
        Error::Invalid(Box::new(d))
    }
}

impl From<Box<Diagnostic>> for Error {
    fn from(d: Box<Diagnostic>) -> Self {
        Error::Invalid(d)
    }
}
