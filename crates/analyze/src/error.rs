//! The analysis's errors: every failure names the file or option it is about.

use std::path::PathBuf;

/// Errors of the analysis.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read or written (the message names it).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A line of `events.jsonl` is malformed.
    #[error("{file}:{line}: {message}")]
    Record {
        /// The file.
        file: PathBuf,
        /// 1-based line number.
        line: u64,
        /// What is wrong, with the field.
        message: String,
    },
    /// The directory is not a run directory, or its manifest is unreadable.
    #[error("{path}: not a readable run directory: {source}")]
    NotARun {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: replay::Error,
    },
    /// The run did not finish, or its verdict says the tool limited it: its numbers do not
    /// describe the system under test.
    #[error(
        "{path}: refused, the run's verdict is {verdict}: {evidence} (analyze it anyway with \
         --allow-invalid)"
    )]
    InvalidRun {
        /// The run directory.
        path: PathBuf,
        /// `incomplete`, `engine-bound` or `failed`.
        verdict: String,
        /// The failed checks, in words.
        evidence: String,
    },
    /// The trace could not be read.
    #[error(transparent)]
    Trace(#[from] trace_format::Error),
    /// polars failed (building a frame or writing CSV).
    #[error("polars: {0}")]
    Polars(#[from] polars::error::PolarsError),
    /// Runs that do not belong together were given to be combined: `compare` runs of
    /// different traces without `--by-op-type`, capacity points of different traces or
    /// setups (`replay::identity`).
    #[error(transparent)]
    Combine(#[from] Box<replay::CombineError>),
    /// A figure could not be rasterized (no fonts, or a rendering failure).
    #[error("PNG export: {0}")]
    Render(String),
    /// An SLO, threshold or option is malformed.
    #[error("{0}")]
    Invalid(String),
    /// An `io_phase` unit's interval log (`io/ID.hlog`) or summary (`io/ID.json`) is
    /// malformed.
    #[error("{file}: {message}")]
    IntervalLog {
        /// The file.
        file: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Another file of the run directory (e.g. a stream's rate curve) is malformed.
    #[error("{file}: {message}")]
    RunFile {
        /// The file.
        file: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The analysis needs per-request records, and the run's I/O has none: it was replayed
    /// through per-volume I/O streams (a block trace), which keep per-stream percentiles and
    /// rates only.
    #[error(
        "{path}: no per-request records to {what}: the run's {streamed} io request(s) were \
         replayed through per-volume I/O streams, which keep only per-stream percentiles and \
         rates (`analyze summary` and `analyze report` show them: recorded vs replayed \
         latency, rate by second)"
    )]
    NoRecords {
        /// The run directory.
        path: PathBuf,
        /// What was asked (`export`, `judge QoS windows`).
        what: &'static str,
        /// Requests replayed through streams.
        streamed: u64,
    },
    /// A configuration file (QoS) is malformed.
    #[error("{file}: {message}")]
    Config {
        /// The file.
        file: PathBuf,
        /// What is wrong, with the field.
        message: String,
    },
}

/// Result alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// For a run refused as not valid ([`Error::InvalidRun`]) that `--allow-invalid` admitted:
    /// its verdict and evidence, said as analysed anyway (the refusal's advice to pass
    /// `--allow-invalid` would be wrong there).
    pub fn admitted(&self) -> Option<String> {
        match self {
            Error::InvalidRun {
                verdict, evidence, ..
            } => Some(format!(
                "the run's verdict is {verdict}: {evidence}; analysed anyway (--allow-invalid)"
            )),
            _ => None,
        }
    }
}
