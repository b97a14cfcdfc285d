//! A run's verdict as its summary records it: the [`Validity`] with its [`Check`]s, the
//! limits it was held to and each op type's own verdict. The judging is in `validity`.

use serde::{Deserialize, Serialize};

/// What a run's results are good for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Every check passed: the numbers describe the system under test.
    #[default]
    Valid,
    /// The tool, not the system, limited the run (see the failed checks).
    EngineBound,
    /// The run stopped early (signal, `--fail-fast`, a trace read error).
    Incomplete,
    /// Every provider operation failed: nothing but errors was measured.
    Failed,
    /// No timing check had enough events to judge (e.g. fewer than 100 events that did
    /// not wait): nothing says the engine limited the run, and nothing says it did not.
    NotJudged,
    /// Only lateness checks failed, and only against some op types' own limits: the numbers
    /// of the op types judged `valid` ([`Validity::ops`]) describe the system; those of the
    /// others are within reach of the tool's own delay.
    PartlyValid,
}

impl Verdict {
    /// The name as written in `summary.json`.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Valid => "valid",
            Verdict::EngineBound => "engine-bound",
            Verdict::Incomplete => "incomplete",
            Verdict::Failed => "failed",
            Verdict::NotJudged => "not-judged",
            Verdict::PartlyValid => "partly-valid",
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One check behind a verdict: what was measured, against which limit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Check {
    /// Name: `completion`, `outcomes`, `start_lateness.p99`, `start_lateness.p99.9`,
    /// `dispatch_rate`, `dispatch_rate.window`, `workers_busy`, `client_throttling`.
    pub check: String,
    /// Whether the run passed it (a check not judged passed nothing and failed nothing:
    /// `passed` true, `judged` false).
    pub passed: bool,
    /// Whether there were enough events to judge it (absent in runs from before: judged).
    #[serde(default = "judged_default")]
    pub judged: bool,
    /// The verdict a failure of this check gives.
    pub fails_as: Verdict,
    /// The measured value (unit: `unit`).
    pub value: f64,
    /// The limit it was held to (same unit).
    pub limit: f64,
    /// `ns`, `ratio` (achieved ÷ intended rate), `fraction`, or `count`.
    pub unit: String,
    /// The evidence in words.
    pub message: String,
}

fn judged_default() -> bool {
    true
}

/// The verdict of a run and every check behind it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Validity {
    /// The verdict: the worst failed check's (`incomplete` before `failed` before
    /// `engine-bound`); when none failed, `not-judged` if no timing check was judged, else
    /// `valid`.
    pub verdict: Verdict,
    /// Every check made, passed or not.
    pub checks: Vec<Check>,
    /// The lateness limits the run was held to (absent in runs from before they scaled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
    /// Each op type judged against limits scaled from its own median (absent in runs from
    /// before).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ops: Vec<OpValidity>,
    /// CPU time the host's hypervisor took from this machine over the run's clock, ns, all
    /// CPUs (`/proc/stat` steal; absent off Linux and in runs from before): a stall of the
    /// whole machine, named in the evidence of an engine-bound verdict ([`host`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_steal_ns: Option<u64>,
}

impl Validity {
    /// The op types judged `verdict` against their own limits ([`Validity::ops`]).
    pub fn ops_judged(&self, verdict: Verdict) -> impl Iterator<Item = &OpValidity> {
        self.ops.iter().filter(move |o| o.verdict == verdict)
    }

    /// The op types judged `valid`, by name, comma-separated.
    pub fn valid_ops(&self) -> String {
        self.ops_judged(Verdict::Valid)
            .map(|o| o.op.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The checks that failed.
    pub fn failed(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| !c.passed)
    }

    /// The checks there were too few events to judge.
    pub fn not_judged(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| !c.judged)
    }

    /// The evidence of the failed checks, one sentence each, joined with `; ` (for a run
    /// with nothing judged: why each check was not).
    pub fn evidence(&self) -> String {
        let mut text = if self.verdict == Verdict::PartlyValid {
            let bound: Vec<String> = self
                .ops_judged(Verdict::EngineBound)
                .map(|o| format!("{}: {}", o.op, o.evidence))
                .collect();
            format!(
                "valid for {}; engine-bound for {}",
                self.valid_ops(),
                bound.join("; ")
            )
        } else {
            let v: Vec<&str> = if self.verdict == Verdict::NotJudged {
                self.not_judged().map(|c| c.message.as_str()).collect()
            } else {
                self.failed().map(|c| c.message.as_str()).collect()
            };
            v.join("; ")
        };
        if let Some(note) = self.host_stall() {
            text.push_str("; ");
            text.push_str(&note);
        }
        text
    }

    /// The host's steal over the run, said in words, when the verdict blames the tool's
    /// timing and the machine stalled (≥ [`NAMED_STEAL_NS`]).
    pub fn host_stall(&self) -> Option<String> {
        let steal = self.host_steal_ns.filter(|s| *s >= NAMED_STEAL_NS)?;
        matches!(self.verdict, Verdict::EngineBound | Verdict::PartlyValid).then(|| {
            format!(
                "the host's hypervisor took {:.0} ms of CPU from this machine during the run \
                 (/proc/stat steal): the whole machine stalled, not the engine alone",
                steal as f64 / 1e6
            )
        })
    }
}

/// Achieved against intended dispatch rate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DispatchRate {
    /// Events per second the trace asked for, from the first to the last judged window.
    pub intended: f64,
    /// Events per second the engine handed to the runtime over the same stretch.
    pub achieved: f64,
    /// Windows judged (with at least `window_events` events).
    pub windows: u64,
    /// The window where the engine fell furthest behind (lowest achieved ÷ intended
    /// against the window before it), if two or more windows were judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worst_window: Option<RateWindow>,
}

/// The dispatch rate between one window and the judged window before it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RateWindow {
    /// Start of the window, ns of intended time since the origin.
    pub start: u64,
    /// Intended events per second in it.
    pub intended: f64,
    /// Achieved events per second (intended × the ratio).
    pub achieved: f64,
}

/// One op type's verdict against limits scaled from its own median.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct OpValidity {
    /// The op type (`attach`, …), or `io_phase I/O` for the I/O of `io_phase` units.
    pub op: String,
    /// Its median service time, ns (the reference of its limits; a given reference loosens
    /// them only up to `reference.share` of it).
    pub median_ns: u64,
    /// Its lateness p99 limit, ns.
    pub p99_limit_ns: u64,
    /// Its lateness p99.9 limit, ns.
    pub p999_limit_ns: u64,
    /// `valid`, `engine-bound` or `not-judged`.
    pub verdict: Verdict,
    /// The lateness percentiles past its limits, in words (empty when none is).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub evidence: String,
}

/// The lateness limits a run was held to, and what they were scaled from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Limits {
    /// Limit of every lateness p99 check, ns.
    pub p99_ns: u64,
    /// Limit of every lateness p99.9 check, ns.
    pub p999_ns: u64,
    /// The reference latency, ns (none: no latency measured and none given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_ns: Option<u64>,
    /// Where the limits come from, in words (`1 % of attach median service time 10.2 ms`,
    /// `--validity start.p99`, …).
    pub basis: String,
    /// Fewest events behind a p99 check (a p99.9 needs ten times as many).
    pub min_events: u64,
}

/// Steal at or above this over a run (all CPUs) is named in an engine-bound verdict's evidence.
pub const NAMED_STEAL_NS: u64 = 1_000_000;
