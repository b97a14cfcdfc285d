//! Numbers from run directories: reading and scanning a run, histograms and the tests on them,
//! one run's statistics, and the verdicts over runs. Nothing here writes HTML or SVG
//! (`render` does); the sentences of verdicts format durations with
//! [`trace_format::units`].
//!
//! ## Layers
//!
//! Lowest first; a module imports only from its own layer or below (checked by
//! `scripts/check-layers.py`).
//!
//! 1. `hist`, `inference`, `passprob` (apart) — arithmetic on histograms and samples: no run
//! 2. `load`, `changepoint` (apart) — opening a run directory, scanning `events.jsonl` into
//!    accumulators; change points in a series of numbers (E-divisive means)
//! 3. `frame`, `phase_io` (apart) — records as polars frames; `io_phase` units' interval
//!    histograms on the run's time axis
//! 4. `summary`, `modify`, `headline` (apart) — one run's statistics
//! 5. `report_data` — what the report shows of one run, gathered once
//! 6. `slo`, then `slo_bound` — an SLO and its value in a run; the tool's error bound of
//!    that value
//! 7. `point`, `qos`, `compare` (apart) — verdicts: a run as a capacity point, QoS windows,
//!    run-to-run regression
//! 8. `capacity`, `history` (apart) — the sustained rate over a sweep's points; change points
//!    over many builds' runs

pub mod capacity;
pub mod changepoint;
pub mod compare;
pub mod frame;
pub mod headline;
pub mod hist;
pub mod history;
pub mod inference;
pub mod load;
pub mod modify;
pub mod passprob;
pub mod phase_io;
pub mod point;
pub mod qos;
pub(crate) mod report_data;
pub mod slo;
pub mod slo_bound;
pub mod summary;
