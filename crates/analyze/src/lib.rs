//! Run analysis: summaries, run-to-run regression verdicts (Welch's t on per-run values, Holm
//! over rows), capacity planning over speed sweeps, per-tenant QoS attribution, a self-contained
//! HTML report with inline SVG figures (also rasterized to PNG by resvg), and CSV and Parquet
//! export. polars lives here and only here. `io_phase` units are read from their interval
//! histograms ([`phase_io`]), so their I/O shows over time in the report and in QoS windows.
//!
//! Everything reads a run directory (`docs/run-dir.md`). `events.jsonl` is scanned in blocks
//! by a few threads into order-independent accumulators (HdrHistograms, counters, time buckets),
//! so a 10 M-event run is summarised in constant memory; [`frame`] turns records into polars
//! DataFrames (whole runs for small inputs, fixed-size batches for export).
//! The design and the statistics are described in `docs/analyze.md`.
//!
//! ## Layers
//!
//! Lowest first; a module imports only from its own layer or below (checked by
//! `scripts/check-layers.py`).
//!
//! 1. `error` — the analysis's errors
//! 2. `stats` — numbers from run directories: reading and scanning a run, histograms, the
//!    statistics of one run, and the verdicts (compare, point, capacity, QoS)
//! 3. `render` — numbers into text for people: the HTML report, its SVG figures and tables
//!
//! Statistics never depend on rendering: a verdict's sentence formats its durations with
//! [`trace_format::units`], not with the report's code. The two are module trees of one crate,
//! not two crates: the renderer reads what the statistics gather for it (`ReportData`, the
//! report's time buckets) through `pub(crate)` fields that a crate boundary would make public
//! API; its only dependency of its own is resvg, so a renderer crate would build nothing
//! sooner (it needs the statistics, and with them polars); and the CLI uses both through one
//! public API, which stays as it was: the modules are re-exported here under their old paths
//! (`analyze::point`, `analyze::report`, …).

mod error;
mod render;
mod stats;

pub use error::{Error, Result};
pub use render::svg::to_png;
pub use render::{gate, history_page, report};
pub use stats::{
    capacity, changepoint, compare, frame, headline, hist, history, inference, load, modify,
    passprob, phase_io, point, qos, slo, summary,
};

pub use stats::capacity::{CapacityReport, capacity};
pub use stats::compare::{CompareOptions, CompareReport, Thresholds, Verdict, compare};
pub use stats::load::{Rec, Run};
pub use stats::point::{PointEval, PointOptions};
pub use stats::qos::{QosReport, QosSpec, qos};
pub use stats::slo::Slo;
pub use stats::summary::{RunStats, RunSummary, SummaryReport};
