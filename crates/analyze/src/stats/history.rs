//! `analyze history RUN...`: over many builds, since which build is a metric different, by how
//! much, and is the latest build still past it?
//!
//! Each run gives the same per-run values `compare` judges ([`compare::run_values`]: per op
//! type p50, p99, p99.9, mean and error rate; I/O per kind), read from run directories or from
//! a table of exported values ([`table`]: what `analyze summary --csv|--parquet` writes, so a
//! team can keep its results in object storage or a results repository). Runs are grouped
//! into builds by a label (`run --label build=…`, `--by build`), or each run is its own build;
//! builds are ordered by their first run's start, or by the label's value in natural (version)
//! order. Several runs of one build are one point of the series: the median of their values
//! (on the log scale for latencies), so a single outlying run moves nothing, with their range
//! as its spread.
//!
//! Change points of each op type × metric series are found by E-divisive means with a
//! permutation test ([`changepoint`], the method of hunter and Orion), at a family-wise level
//! `alpha` over the series (Bonferroni: each series is tested at alpha / series). Each change
//! point is reported with the first build after it, the size (after vs before, the segments'
//! mean level) and its Welch interval over the segments' build values, and whether the latest
//! build is still past it by more than the threshold. A series whose latest segment is worse
//! than the one before by more than its threshold (the thresholds of `compare`) is a
//! regression: exit 1. Runs of different traces are refused unless `--by-op-type`, as in
//! `compare`; op types a run's verdict calls imprecise are left out of that run's values
//! (the build is missing from those series).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::stats::changepoint::{self, Settings};
use crate::stats::compare::{self, Metric, RunValue, Thresholds};
use crate::stats::inference::{TTest, mean_var};
use crate::stats::load::Run;
use crate::{Error, Result};

pub mod table;

/// One run's values, wherever they were read from.
#[derive(Debug, Clone, PartialEq)]
pub struct RunPoint {
    /// The run directory, or `FILE` for a row group of an exported table.
    pub source: String,
    /// Its run id.
    pub run_id: String,
    /// Its wall-clock start (RFC 3339).
    pub started: String,
    /// SHA-256 of its trace.
    pub trace_sha256: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its values per op type (or `io KIND`) × metric.
    pub values: BTreeMap<(String, Metric), RunValue>,
    /// The tool's error bound of each value that has one (ns; `tool_ns` of `summary.json`:
    /// an op type's response p50, p99 and p99.9).
    pub tool: BTreeMap<(String, Metric), u64>,
    /// The rows (op type or `io KIND`) the run's verdict calls imprecise: their values are
    /// kept and exported, with their bounds, but a history leaves them out ([`Self::precise`]).
    pub imprecise: BTreeSet<String>,
}

impl RunPoint {
    /// A run directory's values, each with its tool bound where `summary.json` has one, and
    /// the rows its verdict calls imprecise.
    pub fn of_run(path: &Path, allow_invalid: bool) -> Result<Self> {
        let run = Run::open_for_analysis(path, allow_invalid)?;
        let values = compare::run_values(&run)?;
        let named: BTreeSet<String> = run
            .validity
            .iter()
            .flat_map(|v| v.imprecise_ops())
            .map(|o| o.op.clone())
            .collect();
        let imprecise = values
            .keys()
            .map(|(op, _)| op)
            .filter(|op| {
                named.contains(*op)
                    || (op.starts_with("io ") && named.contains(replay::validity::IO_PHASE_IO))
            })
            .cloned()
            .collect();
        let tool = compare::tool::bounds(path)
            .into_iter()
            .filter(|(k, _)| values.contains_key(k))
            .map(|(k, (_, bound))| (k, bound))
            .collect();
        Ok(Self {
            source: path.display().to_string(),
            run_id: run.manifest.run_id.clone(),
            started: run.manifest.started.to_string(),
            trace_sha256: run.manifest.trace.sha256.clone(),
            labels: run.manifest.labels,
            values,
            tool,
            imprecise,
        })
    }

    /// The point without its imprecise rows: what a history compares (a series of build
    /// medians has no place for a run's tool bound: one run's tool error would read as a
    /// change between builds; the build is listed as missing from that series instead).
    pub fn precise(mut self) -> Self {
        let imprecise = std::mem::take(&mut self.imprecise);
        self.values.retain(|(op, _), _| !imprecise.contains(op));
        self.tool.retain(|(op, _), _| !imprecise.contains(op));
        self
    }
}

/// How builds are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// By each build's earliest run start.
    Time,
    /// By the label's value in natural order (`v1.9` before `v1.10`, `99` before `100`).
    Natural,
}

/// Options of a history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HistoryOptions {
    /// The label whose value names a run's build (None: every run is a build of its own).
    pub by: Option<String>,
    /// How builds are ordered.
    pub order: Order,
    /// Family-wise false-alarm rate over the series.
    pub alpha: f64,
    /// Permutations per test (at least; more when alpha / series needs them).
    pub permutations: u32,
    /// Fewest builds on either side of a change.
    pub min_builds: usize,
    /// The smallest change that counts (as in `compare`).
    pub thresholds: Thresholds,
    /// Metrics left out.
    #[serde(default)]
    pub skip: Vec<Metric>,
    /// Fewest events per run for a value (percentiles need more: `min_tail / (1 − p)`).
    pub min_events: u64,
    /// Events beyond a percentile a run needs for its value.
    pub min_tail: u64,
    /// Runs of different traces allowed: op types compared by name only.
    pub by_op_type: bool,
    /// Seed of the permutations.
    pub seed: u64,
}

impl Default for HistoryOptions {
    fn default() -> Self {
        Self {
            by: None,
            order: Order::Time,
            alpha: 0.05,
            permutations: 999,
            min_builds: 2,
            thresholds: Thresholds::default(),
            skip: Vec::new(),
            min_events: 10,
            min_tail: 5,
            by_op_type: false,
            seed: 0,
        }
    }
}

/// One build.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Build {
    /// The label's value (or the run id when every run is a build).
    pub build: String,
    /// Its earliest run start.
    pub started: String,
    /// Its runs (directories or table sources with run ids).
    pub runs: Vec<String>,
}

/// One build's point of a series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SeriesPoint {
    /// The build.
    pub build: String,
    /// Runs behind the point.
    pub runs: usize,
    /// The median of the runs' values (ns, or the failed fraction).
    pub value: f64,
    /// The smallest run value.
    pub low: f64,
    /// The largest.
    pub high: f64,
}

/// What a change point is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Worse by more than the threshold.
    Regression,
    /// Better by more than the threshold.
    Improvement,
    /// Significant, but within the threshold.
    Small,
}

/// A change point of a series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ChangePoint {
    /// The first build after the change.
    pub build: String,
    /// The last build before it.
    pub previous: String,
    /// Permutation p-value when it was found.
    pub p: f64,
    /// The level before (from the previous change point on; ns or fraction).
    pub before: f64,
    /// The level after (to the next change point).
    pub after: f64,
    /// `after / before − 1` for latencies, `after − before` for the error rate.
    pub change: f64,
    /// Interval (1 − alpha) of `change`, low end (Welch over the segments' build values).
    pub ci_low: f64,
    /// High end.
    pub ci_high: f64,
    /// What it is against the threshold.
    pub kind: Change,
    /// The latest build is still past the level before the change by more than the
    /// threshold, in the change's direction.
    pub still_past: bool,
}

/// The verdict of a series on its latest segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Latest {
    /// The latest segment is worse than the one before by more than the threshold.
    Regression,
    /// Better by more than the threshold.
    Improvement,
    /// No change point, or the last one within the threshold.
    Steady,
    /// Too few builds with values to look for a change.
    Untested,
}

/// One op type × metric over the builds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Series {
    /// Op type, or `io KIND`.
    pub op: String,
    /// Metric.
    pub metric: Metric,
    /// The threshold applied.
    pub threshold: f64,
    /// One point per build with a value, in build order.
    pub points: Vec<SeriesPoint>,
    /// Builds without a value (no run of the build had the row, or enough events for it).
    pub missing: Vec<String>,
    /// Change points, in build order.
    pub change_points: Vec<ChangePoint>,
    /// The latest segment's verdict.
    pub latest: Latest,
}

/// `analyze history --json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HistoryReport {
    /// The inputs as given.
    pub inputs: Vec<String>,
    /// Options used.
    pub options: HistoryOptions,
    /// The builds, in order.
    pub builds: Vec<Build>,
    /// Each series tested at this level (alpha / tested series).
    pub series_alpha: f64,
    /// Permutations per test.
    pub permutations: u32,
    /// The series.
    pub series: Vec<Series>,
    /// Series tested (enough builds).
    pub tested: usize,
    /// Change points found.
    pub change_points: usize,
    /// Series whose latest segment is a regression.
    pub regressions: usize,
    /// Notes for the reader.
    pub notes: Vec<String>,
}

impl HistoryReport {
    /// 1 when a series' latest segment is a regression, 3 when no series could be tested, 0
    /// otherwise.
    pub fn exit_code(&self) -> u8 {
        if self.regressions > 0 {
            1
        } else if self.tested == 0 {
            3
        } else {
            0
        }
    }
}

/// Reads every input: a run directory, or a `.csv` / `.parquet` table of exported values;
/// each run's imprecise rows left out ([`RunPoint::precise`]).
pub fn load(inputs: &[PathBuf], allow_invalid: bool) -> Result<Vec<RunPoint>> {
    let mut out = Vec::new();
    for p in inputs {
        if p.is_dir() {
            out.push(RunPoint::of_run(p, allow_invalid)?.precise());
        } else {
            out.extend(table::read(p)?.into_iter().map(RunPoint::precise));
        }
    }
    Ok(out)
}

/// The history of run directories and exported tables.
pub fn history(
    inputs: &[PathBuf],
    opts: &HistoryOptions,
    allow_invalid: bool,
) -> Result<HistoryReport> {
    let points = load(inputs, allow_invalid)?;
    let mut r = judge(&points, opts)?;
    r.inputs = inputs.iter().map(|p| p.display().to_string()).collect();
    Ok(r)
}

/// Natural order: digit runs compared as numbers, the rest as text.
fn natural(a: &str, b: &str) -> std::cmp::Ordering {
    fn chunks(s: &str) -> Vec<(bool, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        let bytes = s.as_bytes();
        for i in 1..=bytes.len() {
            if i == bytes.len() || bytes[i].is_ascii_digit() != bytes[start].is_ascii_digit() {
                out.push((bytes[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        out
    }
    let (ca, cb) = (chunks(a), chunks(b));
    for (x, y) in ca.iter().zip(&cb) {
        let o = match (x.0, y.0) {
            (true, true) => {
                let (u, v) = (x.1.trim_start_matches('0'), y.1.trim_start_matches('0'));
                u.len().cmp(&v.len()).then_with(|| u.cmp(v))
            }
            _ => x.1.cmp(y.1),
        };
        if o.is_ne() {
            return o;
        }
    }
    ca.len().cmp(&cb.len()).then_with(|| a.cmp(b))
}

/// Groups runs into builds, in order.
fn builds<'a>(
    points: &'a [RunPoint],
    opts: &HistoryOptions,
) -> Result<Vec<(Build, Vec<&'a RunPoint>)>> {
    let mut groups: BTreeMap<String, Vec<&RunPoint>> = BTreeMap::new();
    for p in points {
        let key = match &opts.by {
            Some(k) => p.labels.get(k).cloned().ok_or_else(|| {
                let has: Vec<String> = p.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                Error::Invalid(format!(
                    "{} (run {}) has no label {k:?} (its labels: {}): give every run \
                     `--label {k}=…`, or leave it out of the history",
                    p.source,
                    p.run_id,
                    if has.is_empty() {
                        "none".to_owned()
                    } else {
                        has.join(", ")
                    }
                ))
            })?,
            None => p.run_id.clone(),
        };
        groups.entry(key).or_default().push(p);
    }
    let mut out: Vec<(Build, Vec<&RunPoint>)> = groups
        .into_iter()
        .map(|(build, runs)| {
            let started = runs
                .iter()
                .map(|r| r.started.clone())
                .min()
                .unwrap_or_default();
            let names = runs
                .iter()
                .map(|r| {
                    if r.source.ends_with(&r.run_id) || Path::new(&r.source).is_dir() {
                        r.source.clone()
                    } else {
                        format!("{} (run {})", r.source, r.run_id)
                    }
                })
                .collect();
            (
                Build {
                    build,
                    started,
                    runs: names,
                },
                runs,
            )
        })
        .collect();
    // RFC 3339 in UTC (`Z`) sorts as text.
    match opts.order {
        Order::Time => out.sort_by(|a, b| {
            a.0.started
                .cmp(&b.0.started)
                .then_with(|| natural(&a.0.build, &b.0.build))
        }),
        Order::Natural => out.sort_by(|a, b| natural(&a.0.build, &b.0.build)),
    }
    Ok(out)
}

/// The value a series uses of one run value: the log of a latency, the fraction as it is.
fn scale(m: Metric, v: f64) -> f64 {
    if m.is_latency() { v.max(1.0).ln() } else { v }
}

fn unscale(m: Metric, v: f64) -> f64 {
    if m.is_latency() { v.exp() } else { v }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// The history of loaded runs (the statistics alone; `inputs` is left empty).
pub fn judge(points: &[RunPoint], opts: &HistoryOptions) -> Result<HistoryReport> {
    if !(opts.alpha > 0.0 && opts.alpha < 1.0) {
        return Err(Error::Invalid(format!(
            "alpha {}: expected a level in (0, 1)",
            opts.alpha
        )));
    }
    if points.is_empty() {
        return Err(Error::Invalid("history needs runs".into()));
    }
    if !opts.by_op_type
        && let Some(p) = points
            .iter()
            .find(|p| p.trace_sha256 != points[0].trace_sha256)
    {
        return Err(Error::Invalid(format!(
            "{} and {} replayed different traces (SHA-256 {} vs {}): a history over \
             different traces compares op types by name only, with --by-op-type",
            points[0].source, p.source, points[0].trace_sha256, p.trace_sha256
        )));
    }
    let builds = builds(points, opts)?;
    let keys: BTreeSet<&(String, Metric)> = points
        .iter()
        .flat_map(|p| p.values.keys())
        .filter(|k| !opts.skip.contains(&k.1))
        .collect();
    // Per series: each build's point (scaled median) or missing.
    let cmp_opts = compare::CompareOptions {
        min_events: opts.min_events,
        min_tail: opts.min_tail,
        ..compare::CompareOptions::default()
    };
    struct Raw {
        op: String,
        metric: Metric,
        idx: Vec<usize>,
        level: Vec<f64>,
        points: Vec<SeriesPoint>,
        missing: Vec<String>,
    }
    let mut raws = Vec::new();
    for key in keys {
        let need = cmp_opts.required_events(key.1);
        let mut raw = Raw {
            op: key.0.clone(),
            metric: key.1,
            idx: Vec::new(),
            level: Vec::new(),
            points: Vec::new(),
            missing: Vec::new(),
        };
        for (i, (b, runs)) in builds.iter().enumerate() {
            let mut v: Vec<f64> = runs
                .iter()
                .filter_map(|r| r.values.get(key))
                .filter(|v| v.events >= need)
                .map(|v| scale(key.1, v.value))
                .collect();
            if v.is_empty() {
                raw.missing.push(b.build.clone());
                continue;
            }
            let m = median(&mut v);
            raw.idx.push(i);
            raw.level.push(m);
            raw.points.push(SeriesPoint {
                build: b.build.clone(),
                runs: v.len(),
                value: unscale(key.1, m),
                low: unscale(key.1, v[0]),
                high: unscale(key.1, v[v.len() - 1]),
            });
        }
        raws.push(raw);
    }
    let testable = raws
        .iter()
        .filter(|r| r.level.len() >= 2 * opts.min_builds.max(1))
        .count();
    let series_alpha = opts.alpha / testable.max(1) as f64;
    // Enough permutations that p can fall 10× below the series' level.
    let permutations = opts
        .permutations
        .max((10.0 / series_alpha).ceil() as u32 - 1);
    let set = Settings {
        alpha: series_alpha,
        permutations,
        min_size: opts.min_builds.max(1),
    };
    let mut series = Vec::new();
    let mut notes = Vec::new();
    for (n, raw) in raws.into_iter().enumerate() {
        let threshold = opts.thresholds.of(raw.metric);
        let tested = raw.level.len() >= 2 * set.min_size;
        let found = if tested {
            changepoint::e_divisive(&raw.level, &set, opts.seed.wrapping_add(n as u64))
        } else {
            Vec::new()
        };
        let cuts: Vec<usize> = found.iter().map(|f| f.at).collect();
        let last = *raw.level.last().unwrap_or(&0.0);
        let mut change_points = Vec::new();
        for (j, f) in found.iter().enumerate() {
            let lo = if j == 0 { 0 } else { cuts[j - 1] };
            let hi = cuts.get(j + 1).copied().unwrap_or(raw.level.len());
            let (before, after) = (&raw.level[lo..f.at], &raw.level[f.at..hi]);
            // Welch's interval of the difference of the segments' mean levels (compare's test).
            let t = TTest::welch(before, after, 0.0, 0.0);
            let (lo, hi) = t.ci(opts.alpha);
            let (mb, d) = (mean_var(before).0, t.diff);
            let rel = |x: f64| {
                if raw.metric.is_latency() {
                    x.exp() - 1.0
                } else {
                    x
                }
            };
            let change = rel(d);
            let kind = if change > threshold {
                Change::Regression
            } else if change < -threshold {
                Change::Improvement
            } else {
                Change::Small
            };
            let now = rel(last - mb);
            let still_past = match kind {
                Change::Regression => now > threshold,
                Change::Improvement => now < -threshold,
                Change::Small => false,
            };
            change_points.push(ChangePoint {
                build: raw.points[f.at].build.clone(),
                previous: raw.points[f.at - 1].build.clone(),
                p: f.p,
                before: unscale(raw.metric, mb),
                after: unscale(raw.metric, mb + d),
                change,
                ci_low: rel(lo),
                ci_high: rel(hi),
                kind,
                still_past,
            });
        }
        let latest = if !tested {
            Latest::Untested
        } else {
            match change_points.last().map(|c| c.kind) {
                Some(Change::Regression) => Latest::Regression,
                Some(Change::Improvement) => Latest::Improvement,
                _ => Latest::Steady,
            }
        };
        series.push(Series {
            op: raw.op,
            metric: raw.metric,
            threshold,
            points: raw.points,
            missing: raw.missing,
            change_points,
            latest,
        });
    }
    let tested = series
        .iter()
        .filter(|s| s.latest != Latest::Untested)
        .count();
    if tested == 0 {
        notes.push(format!(
            "no series has {} builds with values: too few to find a change (exit code 3)",
            2 * set.min_size
        ));
    }
    let gaps: Vec<String> = series
        .iter()
        .filter(|s| !s.missing.is_empty())
        .map(|s| format!("{} {} ({})", s.op, s.metric.name(), s.missing.join(", ")))
        .collect();
    if !gaps.is_empty() {
        notes.push(format!(
            "builds without a value (no run with the row, or too few events for the metric), \
             left out of their series: {}",
            gaps.join("; ")
        ));
    }
    Ok(HistoryReport {
        inputs: Vec::new(),
        options: opts.clone(),
        builds: builds.into_iter().map(|(b, _)| b).collect(),
        series_alpha,
        permutations,
        tested,
        change_points: series.iter().map(|s| s.change_points.len()).sum(),
        regressions: series
            .iter()
            .filter(|s| s.latest == Latest::Regression)
            .count(),
        series,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::natural;

    #[test]
    fn natural_order_reads_numbers_as_numbers() {
        let mut v = vec!["v1.10", "v1.9", "100", "99", "v1.9.1", "a"];
        v.sort_by(|a, b| natural(a, b));
        assert_eq!(v, ["99", "100", "a", "v1.9", "v1.9.1", "v1.10"]);
    }
}
