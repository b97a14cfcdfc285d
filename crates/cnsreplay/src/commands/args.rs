//! Argument types shared by several commands: the input trace, encodings, durations, the
//! I/O rate of a speed factor. Each command's own arguments live beside it.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use trace_format::Encoding;

/// Which encoding to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EncodingArg {
    /// YAML.
    Yaml,
    /// JSON Lines.
    Jsonl,
    /// Binary (`.cnsbin`).
    Binary,
}

impl From<EncodingArg> for Encoding {
    fn from(e: EncodingArg) -> Self {
        match e {
            EncodingArg::Yaml => Encoding::Yaml,
            EncodingArg::Jsonl => Encoding::Jsonl,
            EncodingArg::Binary => Encoding::Binary,
        }
    }
}

/// Input trace options shared by the reading commands.
#[derive(Debug, Args)]
pub struct InputArgs {
    /// The trace file (`-` for stdin).
    pub file: PathBuf,
    /// Input encoding; by default from the file name (.yaml, .jsonl, .cnsbin), else sniffed.
    #[arg(long, value_enum)]
    pub from: Option<EncodingArg>,
}

/// A duration flag (`90s`, `1h`, `250ms`) in nanoseconds.
pub fn parse_duration(s: &str) -> Result<u64, String> {
    trace_format::units::parse_duration(s).map_err(|e| e.to_string())
}

/// What a speed factor does to an `io_phase`'s open-loop rate
/// ([`trace_format::rewrite::IoRate`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum IoRateArg {
    /// Keep the trace's rate for the compressed duration.
    #[default]
    Keep,
    /// Multiply the rate by the speed factor.
    Scale,
}

impl From<IoRateArg> for trace_format::rewrite::IoRate {
    fn from(a: IoRateArg) -> Self {
        match a {
            IoRateArg::Keep => Self::Keep,
            IoRateArg::Scale => Self::Scale,
        }
    }
}
