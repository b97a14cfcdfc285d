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
    /// Some op types' numbers are within the tolerance of the tool's error bound, others'
    /// are not ([`Validity::ops`]): the first describe the system; the others are
    /// `imprecise`, reported with their bounds.
    PartlyValid,
    /// The tool's own delay could have added more than the tolerance (`--validity tool`) to
    /// some reported percentile of every op type: the numbers stand with their bounds
    /// (`tool_ns`), which say how much (for an op type: [`OpValidity::tool_ratio`]).
    Imprecise,
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
            Verdict::Imprecise => "imprecise",
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
    /// The verdict: the worst failed engine check's (`incomplete` before `failed` before
    /// `engine-bound`); else from the op types' ([`Self::ops`]): `imprecise` when none is
    /// `valid` and some is `imprecise`, `partly-valid` when both are there, `valid` when
    /// every judged op type is; `not-judged` when nothing was judged. A lateness check past
    /// its limit fails as `imprecise`: it makes no verdict by itself, the bounds do.
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

    /// The op types whose numbers are not precise enough to be the system's alone:
    /// `imprecise` (and, in runs from before the bounds judged op types, `engine-bound`).
    pub fn imprecise_ops(&self) -> impl Iterator<Item = &OpValidity> {
        self.ops
            .iter()
            .filter(|o| matches!(o.verdict, Verdict::Imprecise | Verdict::EngineBound))
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
        let mut text = match self.verdict {
            Verdict::PartlyValid | Verdict::Imprecise => {
                let imprecise: Vec<String> = self
                    .imprecise_ops()
                    .map(|o| format!("{}: {}", o.op, o.evidence))
                    .collect();
                let valid = self.valid_ops();
                if imprecise.is_empty() {
                    let v: Vec<&str> = self.failed().map(|c| c.message.as_str()).collect();
                    v.join("; ")
                } else if valid.is_empty() {
                    format!("imprecise for {}", imprecise.join("; "))
                } else {
                    format!("valid for {valid}; imprecise for {}", imprecise.join("; "))
                }
            }
            Verdict::NotJudged => {
                let v: Vec<&str> = self.not_judged().map(|c| c.message.as_str()).collect();
                v.join("; ")
            }
            _ => {
                let v: Vec<&str> = self.failed().map(|c| c.message.as_str()).collect();
                v.join("; ")
            }
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
        matches!(
            self.verdict,
            Verdict::EngineBound | Verdict::PartlyValid | Verdict::Imprecise
        )
        .then(|| {
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
    /// `valid` (every reported percentile's tool bound within the tolerance of its value),
    /// `imprecise` (some bound beyond it; without a bound: a lateness past its limits),
    /// `not-judged` (no bound, and no lateness with enough values to judge). Runs from
    /// before the bounds judged op types say `engine-bound` for `imprecise`.
    pub verdict: Verdict,
    /// The largest tool bound relative to the value it bounds over the op type's reported
    /// percentiles (response and service; for `io_phase I/O` the I/O split), e.g. 0.08 when
    /// some percentile may be 8 % the tool's (absent when no bound was measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_ratio: Option<f64>,
    /// Why it is not `valid`, in words: the percentiles whose bound is beyond the tolerance
    /// (`response p99.9 17.1 ms, tool ≤ 1.5 ms (8.8 %)`), or the lateness past its limits
    /// (empty when valid).
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
    /// The largest tool bound, as a fraction of its figure, an op type's numbers were held
    /// to (`--validity tool`; absent in runs from before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_tolerance: Option<f64>,
}

/// Steal at or above this over a run (all CPUs) is named in an engine-bound verdict's evidence.
pub const NAMED_STEAL_NS: u64 = 1_000_000;
