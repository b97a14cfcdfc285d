//! Run analysis: summaries, run-to-run regression verdicts, capacity planning and reports.
//! polars lives here and only here.
//!
//! This crate is not written yet; its issue in the tracker describes what it will hold.
