//! A bare-`io` stream's fidelity as the run summary records it. The streams themselves are in
//! `streams`.

use serde::{Deserialize, Serialize};

use crate::record::Percentiles;

/// A stream's fidelity, in the run summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StreamFidelity {
    /// The volume.
    pub volume: String,
    /// What the requests went to.
    pub target: String,
    /// How (engine, O_DIRECT, alignment, placement policy).
    pub flags: Vec<String>,
    /// The trace's requests handed to the stream or meant for it.
    pub requests: u64,
    /// Issued (accepted and not dropped).
    pub issued: u64,
    /// Completed without error.
    pub completed: u64,
    /// Failed.
    pub errors: u64,
    /// Never issued: refused by the stream, not accepted, or dropped by a stop.
    pub dropped: u64,
    /// Issued out of the trace's order.
    pub reordered: u64,
    /// Offset or length changed to be issued (see `flags`).
    pub adjusted: u64,
    /// First to last intended request, seconds from the run origin.
    pub span: [f64; 2],
    /// Requests per second intended over the span.
    pub intended_rate: f64,
    /// Requests per second issued over the span.
    pub achieved_rate: f64,
    /// Full seconds of the span compared.
    pub windows: u64,
    /// The second (from the origin) whose issued count was furthest from its intended count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worst_window: Option<RateWindow>,
    /// Issue lateness (intended → issued), ns.
    pub lateness: Percentiles,
    /// Response time (intended → completed), ns.
    pub response: Percentiles,
    /// Service time (issued → completed), ns.
    pub service: Percentiles,
    /// The stream's CPU time per request, µs.
    pub cpu_per_request_us: f64,
    /// Why the stream could not report, when it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One second of a stream's active span.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RateWindow {
    /// Start, seconds from the run origin.
    pub start: u64,
    /// Requests intended in it.
    pub intended: u64,
    /// Requests issued in it.
    pub issued: u64,
    /// |issued − intended| / intended.
    pub error: f64,
}
