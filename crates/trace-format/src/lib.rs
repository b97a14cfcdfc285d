//! The cnsreplay trace: one time-stamped stream of storage control and I/O events.
//!
//! This crate is the pure core every other crate builds on: the model ([`model`]), its three
//! encodings (YAML for hand-written traces, JSON Lines as the canonical text form, and a
//! compact binary form for very large traces), streaming readers and writers ([`io`]), and the
//! semantic checker ([`check`]) that validates a trace against the life cycle of the objects it
//! names and computes its statistics. It has no async runtime, no cluster client and no
//! dataframe library, so it builds in seconds and can be used by importers, generators, the
//! replay engine and analysis alike.
//!
//! The specification, with examples and the versioning rule, is `docs/trace-format.md`.

mod binary;
pub mod check;
pub mod error;
pub mod io;
mod jsonl;
pub mod merge;
pub mod model;
pub mod rewrite;
#[doc(hidden)]
pub mod sample;
mod serde_impl;
pub mod slice;
pub mod split;
pub mod split_part;
pub mod splitmix;
mod text;
pub mod units;
mod yaml;

pub use binary::{DICT_SLOTS, MAGIC};
pub use check::{Checker, OpStats, Report, Stats, check_trace, check_trace_until};
pub use error::{Diagnostic, Error, Location, Problem};
pub use io::{Encoding, Trace, TraceReader, TraceWriter};
pub use model::*;
pub use units::Name;
