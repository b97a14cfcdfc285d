//! How well `analyze history` names the build where a change began, and how often it sees a
//! change in a series without one, beside what pairwise `compare` of neighbouring builds says
//! on the same series (`scripts/history-eval.sh`; figures in docs/PERFORMANCE.md).
//!
//! A series is BUILDS builds of 3 runs each. A run's values come from EVENTS latencies drawn
//! from the sim's attach distribution (lognormal, median 200 ms, σ 0.3), recorded into the
//! engine's HdrHistogram and read with the percentile function of `compare::run_values`
//! (0.2 % of events fail), every latency of the run multiplied by its slowdown: per-run noise
//! `e^(CV·Z)` and, with probability OUTLIER per build, one of its runs slowed ×1.5 (a noisy
//! neighbour; two such runs in one build are not simulated: they would move its median). In a
//! shifted series every run from build `at` on (at uniform in [4, BUILDS − 4]) has its median
//! ×1.15 (p50, p99, mean +15 %). The runs go through the exact `history::judge` (grouped by a
//! `build` label, natural order) and, for the pairwise view, `compare::judge` of build k − 1
//! against build k with the design `design::detect` finds for runs collected build after
//! build (separate batches).
//!
//!   cargo run --release -p analyze --example history_eval -- [SERIES] [SEED] [BUILDS] [EVENTS] [CV] [OUTLIER]
//!
//! SEED defaults to the clock (printed): every invocation draws fresh series.

use std::collections::BTreeMap;

use analyze::compare::{self, CompareOptions, Metric, RunValue, Sample, Verdict, design};
use analyze::hist::{Rng, at, latency};
use analyze::history::{HistoryOptions, Latest, Order, RunPoint, judge};

const RUNS: usize = 3;

/// One run's values (attach × every metric).
fn run_values(rng: &mut Rng, events: u64, slowdown: f64) -> BTreeMap<(String, Metric), RunValue> {
    let mut h = latency();
    let (mut sum, mut failed) = (0.0, 0u64);
    for _ in 0..events {
        let v = (200e6 * (0.3 * rng.normal()).exp()).max(1.0);
        sum += v;
        h.saturating_record(v as u64);
        if rng.unit() < 0.002 {
            failed += 1;
        }
    }
    let mut out = BTreeMap::new();
    for m in Metric::ALL {
        let value = match m {
            Metric::Mean => slowdown * sum / events as f64,
            Metric::ErrorRate => failed as f64 / events as f64,
            _ => slowdown * at(&h, m.percentile().unwrap_or(50.0)) as f64,
        };
        out.insert(("attach".to_owned(), m), RunValue { value, events });
    }
    out
}

/// A series: per build, its runs. `shift_at`: the first shifted build.
fn series(
    rng: &mut Rng,
    builds: usize,
    events: u64,
    cv: f64,
    outlier: f64,
    shift_at: Option<usize>,
) -> Vec<RunPoint> {
    let mut out = Vec::new();
    for b in 0..builds {
        // A single-run outlier: with probability OUTLIER, one run of the build (a noisy
        // neighbour during that run).
        let odd = (rng.unit() < outlier).then(|| (rng.next_u64() % RUNS as u64) as usize);
        for i in 0..RUNS {
            let mut slow = (cv * rng.normal()).exp();
            if odd == Some(i) {
                slow *= 1.5;
            }
            if shift_at.is_some_and(|s| b >= s) {
                slow *= 1.15;
            }
            let minute = b * RUNS + i;
            out.push(RunPoint {
                source: format!("b{b}-r{i}"),
                run_id: format!("b{b}-r{i}"),
                started: format!(
                    "2026-12-{:02}T{:02}:{:02}:00Z",
                    1 + minute / 1440,
                    minute / 60 % 24,
                    minute % 60
                ),
                trace_sha256: "eval".to_owned(),
                labels: [("build".to_owned(), b.to_string())].into(),
                values: run_values(rng, events, slow),
                tool: Default::default(),
                imprecise: Default::default(),
            });
        }
    }
    out
}

/// Pairwise compare of neighbouring builds on p50: the builds k flagged a regression.
fn pairwise(points: &[RunPoint], builds: usize) -> Vec<usize> {
    let opts = CompareOptions::default();
    let key = ("attach".to_owned(), Metric::P50);
    let mut flagged = Vec::new();
    for k in 1..builds {
        let side = |b: usize| -> Vec<RunValue> {
            points[b * RUNS..(b + 1) * RUNS]
                .iter()
                .map(|p| p.values[&key])
                .collect()
        };
        let t =
            |b: usize| -> Vec<f64> { (0..RUNS).map(|i| (b * RUNS + i) as f64 * 60.0).collect() };
        let d = design::detect(&t(k - 1), &t(k), opts.batch_shift);
        let r = compare::judge(
            &[Sample {
                op: key.0.clone(),
                metric: Metric::P50,
                base: side(k - 1),
                new: side(k),
            }],
            &d,
            &opts,
        );
        if r.rows.iter().any(|row| row.verdict == Verdict::Regression) {
            flagged.push(k);
        }
    }
    flagged
}

#[allow(clippy::print_stdout)] // an example's report is its output
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, d: &str| args.get(i).cloned().unwrap_or_else(|| d.to_owned());
    let n: usize = arg(0, "20").parse().expect("SERIES");
    let seed: u64 = args.get(1).map_or_else(
        || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        },
        |s| s.parse().expect("SEED"),
    );
    let builds: usize = arg(2, "20").parse().expect("BUILDS");
    let events: u64 = arg(3, "2000").parse().expect("EVENTS");
    let cv: f64 = arg(4, "0.05").parse().expect("CV");
    let outlier: f64 = arg(5, "0.05").parse().expect("OUTLIER");
    println!(
        "history_eval: {n} series × 2 (shifted +15 % p50, stationary), {builds} builds × {RUNS} \
         runs, {events} attaches a run, run-to-run CV {cv}, outlier runs (×1.5) {outlier}; seed {seed}"
    );
    let opts = HistoryOptions {
        by: Some("build".to_owned()),
        order: Order::Natural,
        ..HistoryOptions::default()
    };
    let mut rng = Rng::new(seed);
    let (mut hit, mut hit_regression, mut hist_false, mut hist_false_any) = (0, 0, 0, 0);
    let (mut pair_hit, mut pair_false_shifted, mut pair_false_flat, mut pair_any_flat) =
        (0, 0, 0, 0);
    for s in 0..n {
        let at_build = 4 + (rng.next_u64() as usize) % (builds - 7);
        let shifted = series(&mut rng, builds, events, cv, outlier, Some(at_build));
        let r = judge(&shifted, &opts).expect("history");
        let p50 = r
            .series
            .iter()
            .find(|x| x.metric == Metric::P50)
            .expect("p50 series");
        let found: Vec<usize> = p50
            .change_points
            .iter()
            .filter_map(|c| c.build.parse().ok())
            .collect();
        let ok = found.iter().any(|b: &usize| b.abs_diff(at_build) <= 1);
        if !ok {
            let levels: Vec<String> = p50
                .points
                .iter()
                .map(|p| format!("{:.1}", p.value / 1e6))
                .collect();
            println!("  missed: p50 build medians (ms) {}", levels.join(" "));
        }
        hit += usize::from(ok);
        hit_regression += usize::from(ok && p50.latest == Latest::Regression);
        let pf = pairwise(&shifted, builds);
        pair_hit += usize::from(pf.contains(&at_build));
        pair_false_shifted += pf.iter().filter(|&&k| k != at_build).count();
        let flat = series(&mut rng, builds, events, cv, outlier, None);
        let rf = judge(&flat, &opts).expect("history");
        let flat_p50 = rf
            .series
            .iter()
            .find(|x| x.metric == Metric::P50)
            .expect("p50 series");
        hist_false += usize::from(!flat_p50.change_points.is_empty());
        hist_false_any += usize::from(rf.change_points > 0);
        let pff = pairwise(&flat, builds);
        pair_false_flat += pff.len();
        pair_any_flat += usize::from(!pff.is_empty());
        println!(
            "series {s:2}: shift at build {at_build:2}; history p50 change points {found:?}; \
             pairwise compare flags {pf:?}; stationary: history {:?}, pairwise {pff:?}",
            flat_p50
                .change_points
                .iter()
                .map(|c| c.build.clone())
                .collect::<Vec<_>>()
        );
    }
    println!();
    println!("                                              history   pairwise compare");
    println!(
        "shifted series, change named at its build±1   {hit:>3}/{n:<3}  {pair_hit:>3}/{n} (at the build)"
    );
    println!("  … and the latest segment a regression       {hit_regression:>3}/{n}");
    println!(
        "shifted series, regressions flagged elsewhere  {:>7}  {pair_false_shifted:>3} (of {} pairs)",
        "-",
        n * (builds - 2)
    );
    println!(
        "stationary series with a change (p50)         {hist_false:>3}/{n:<3}  {pair_any_flat:>3}/{n} ({pair_false_flat} of {} pairs)",
        n * (builds - 1)
    );
    println!("stationary series with a change (any metric)  {hist_false_any:>3}/{n}");
}
