//! Calibration of `analyze compare`'s statistics under the noise real providers have,
//! simulated directly: each run's per-row values are computed from latencies drawn from the
//! sim provider's distributions (attach lognormal 200 ms σ 0.3, create_volume 500 ms σ 0.4,
//! EVENTS of each per run, recorded into the engine's HdrHistograms and read with the same
//! percentile function as `compare::run_values`), every latency of a run multiplied by that
//! run's slowdown: `e^(CV·Z)` (per-run noise) × the batch's shift × `(1 + drift)^(position in
//! time)`. Start times follow the case's collection design and go through the same
//! `design::detect` and `compare::judge` as `analyze compare`. What it does not simulate: the
//! host's scheduling jitter and the engine (see `scripts/calibrate-compare.sh` for real runs).
//! Every trial draws fresh runs (no pool is reused).
//!
//!   cargo run --release -p analyze --example calibrate_compare -- [TRIALS] [SEED] [EVENTS] [CASES] [AT]
//!
//! CASES: 1-based, comma-separated (all by default). AT: measure false regressions and power
//! at AT runs a side instead of at the recommendation (e.g. the count the runs-needed formula
//! gives at the simulated noise, to tell the formula from the pilots' estimate of the noise
//! and the change).
//!
//! Per case: A/A false regressions (exit 1) at 5 runs a side with the one-sided 95 %
//! Clopper–Pearson upper bound; inconclusive and no-change shares. Then TRIALS pilot
//! comparisons at 5 runs a side with a +20 % attach p99 (σ 0.3784, p50 unchanged): each
//! inconclusive pilot's own count for that row is followed by one fresh A/A comparison and
//! one fresh +20 % comparison at that count: false regressions and power (attach p99 a
//! regression) over the pilots given a count, as a user following the advice meets them.

use std::io::Write;

use analyze::compare::{CompareOptions, Metric, RunValue, Sample, Verdict, design, judge};
use analyze::hist::{Rng, at, latency};

#[derive(Clone, Copy, PartialEq)]
enum Layout {
    /// A, B, A, B, … in one session.
    Interleaved,
    /// All A, then all B (before/after).
    Separate,
    /// A/A batches of the base (at least `base`, a day apart), then the new batches, all of
    /// `size` runs: `r` runs a side are `⌈r / size⌉` batches (at 5 runs: `base` base batches
    /// and one new batch; at the runs the tool recommends, which it asks for as batches,
    /// that many batches a side).
    Baseline { base: usize, size: usize },
}

#[derive(Clone, Copy)]
struct Case {
    name: &'static str,
    layout: Layout,
    cv: f64,
    /// The new batch's shift (separate), or the sd of every batch's shift (baseline).
    shift: f64,
    drift: f64,
}

/// One run's values of its rows (attach and create_volume × p50, p99, p99.9, mean, error).
fn run_rows(
    rng: &mut Rng,
    events: u64,
    slowdown: f64,
    attach_sigma: f64,
) -> Vec<(String, Metric, RunValue)> {
    let mut out = Vec::new();
    for (op, median, sigma) in [
        ("attach", 200e6, attach_sigma),
        ("create_volume", 500e6, 0.4),
    ] {
        let mut h = latency();
        let mut sum = 0.0;
        for _ in 0..events {
            let v = (median * (sigma * rng.normal()).exp()).max(1.0);
            sum += v;
            h.saturating_record(v as u64);
        }
        // The run's slowdown scales every latency, so it scales the percentiles read: applied
        // to them, not to the draws, so that hundreds of runs of a 1 %/run drift (1.01^1000
        // ≈ 21 000×) cannot push attaches past the histograms' hour and saturate.
        for m in Metric::ALL {
            let value = match m {
                Metric::Mean => slowdown * sum / events as f64,
                Metric::ErrorRate => 0.0,
                _ => slowdown * at(&h, m.percentile().unwrap_or(50.0)) as f64,
            };
            out.push((op.to_owned(), m, RunValue { value, events }));
        }
    }
    out
}

/// One comparison of `runs` a side; returns the report.
fn trial(
    rng: &mut Rng,
    case: &Case,
    runs: usize,
    p99_up: bool,
    opts: &CompareOptions,
) -> analyze::CompareReport {
    // Start times (s) and slowdown per run, base then new.
    let mut times = (Vec::new(), Vec::new());
    let mut slow = (Vec::new(), Vec::new());
    let mut add = |side: bool, t: f64, pos: usize, batch: f64, rng: &mut Rng| {
        let f = (case.cv * rng.normal()).exp() * batch * (1.0 + case.drift).powi(pos as i32);
        if side {
            times.1.push(t);
            slow.1.push(f);
        } else {
            times.0.push(t);
            slow.0.push(f);
        }
    };
    match case.layout {
        Layout::Interleaved => {
            for i in 0..2 * runs {
                add(i % 2 == 1, i as f64 * 60.0, i, 1.0, rng);
            }
        }
        Layout::Separate => {
            for i in 0..2 * runs {
                let new = i >= runs;
                add(
                    new,
                    i as f64 * 60.0,
                    i,
                    if new { 1.0 + case.shift } else { 1.0 },
                    rng,
                );
            }
        }
        Layout::Baseline { base, size } => {
            let new_batches = runs.div_ceil(size);
            let base_batches = base.max(new_batches);
            let mut pos = 0;
            for batch in 0..base_batches + new_batches {
                let shift = (case.shift * rng.normal()).exp();
                for i in 0..size {
                    add(
                        batch >= base_batches,
                        batch as f64 * 86_400.0 + i as f64 * 60.0,
                        pos,
                        shift,
                        rng,
                    );
                    pos += 1;
                }
            }
        }
    }
    let events = EVENTS.with(|e| *e.borrow());
    let base: Vec<_> = slow
        .0
        .iter()
        .map(|&f| run_rows(rng, events, f, 0.3))
        .collect();
    let sigma = if p99_up { 0.3784 } else { 0.3 };
    let new: Vec<_> = slow
        .1
        .iter()
        .map(|&f| run_rows(rng, events, f, sigma))
        .collect();
    let samples: Vec<Sample> = (0..base[0].len())
        .map(|i| Sample {
            op: base[0][i].0.clone(),
            metric: base[0][i].1,
            base: base.iter().map(|r| r[i].2).collect(),
            new: new.iter().map(|r| r[i].2).collect(),
        })
        .collect();
    let d = design::detect(&times.0, &times.1, opts.batch_shift);
    judge(&samples, &d, opts)
}

thread_local! {
    static EVENTS: std::cell::RefCell<u64> = const { std::cell::RefCell::new(600) };
}

/// One-sided 95 % Clopper–Pearson upper bound of a rate, `x` of `n`.
fn upper(x: usize, n: usize) -> f64 {
    let cdf = |p: f64| {
        let mut s = 0.0;
        let ln = |k: usize| -> f64 { (1..=k).map(|i| (i as f64).ln()).sum() };
        for k in 0..=x {
            let l = ln(n) - ln(k) - ln(n - k) + k as f64 * p.ln() + (n - k) as f64 * (1.0 - p).ln();
            s += l.exp();
        }
        s
    };
    if x >= n {
        return 1.0;
    }
    let (mut lo, mut hi) = (x as f64 / n as f64, 1.0);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if cdf(mid) > 0.05 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

fn p99_row(r: &analyze::CompareReport) -> Option<&analyze::compare::Row> {
    r.rows
        .iter()
        .find(|x| x.op == "attach" && x.metric == Metric::P99)
}

fn main() -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    let args: Vec<String> = std::env::args().collect();
    let trials: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(300);
    let seed: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let events: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(600);
    EVENTS.with(|e| *e.borrow_mut() = events);
    // Cases to run (1-based, comma-separated; all by default).
    let only: Vec<usize> = args
        .get(4)
        .map(|s| s.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_default();
    // Runs a side at which to measure instead of the recommendation (the pilots still run).
    let at: Option<usize> = args.get(5).and_then(|s| s.parse().ok());
    let opts = CompareOptions {
        // 600 events a run: p99.9 needs 5000, so the user leaves it out.
        skip: vec![Metric::P999],
        ..CompareOptions::default()
    };
    let cases = [
        Case {
            name: "interleaved, run CV 10 %",
            layout: Layout::Interleaved,
            cv: 0.10,
            shift: 0.0,
            drift: 0.0,
        },
        Case {
            name: "interleaved, CV 10 % + drift 1 %/run",
            layout: Layout::Interleaved,
            cv: 0.10,
            shift: 0.0,
            drift: 0.01,
        },
        Case {
            name: "separate batches, CV 10 % + batch shift 3 %",
            layout: Layout::Separate,
            cv: 0.10,
            shift: 0.03,
            drift: 0.0,
        },
        Case {
            name: "separate batches, CV 10 % + drift 1 %/run",
            layout: Layout::Separate,
            cv: 0.10,
            shift: 0.0,
            drift: 0.01,
        },
        Case {
            name: "batch baseline (3 A/A batches), CV 10 % + batch shifts sd 3 %",
            layout: Layout::Baseline { base: 3, size: 5 },
            cv: 0.10,
            shift: 0.03,
            drift: 0.0,
        },
    ];
    let mut rng = Rng::new(seed);
    writeln!(
        out,
        "{trials} fresh trials per figure, {events} attaches + {events} create_volumes per run, seed {seed}"
    )?;
    writeln!(
        out,
        "| case | design | A/A false regressions at 5 runs (95 % upper) | inconclusive / no change | runs recommended (+20 % p99 pilots at 5 runs: median [p10–p90]) | A/A false regressions at each pilot's count (95 % upper) | power +20 % p99 at each pilot's count |"
    )?;
    writeln!(out, "|---|---|---|---|---|---|---|")?;
    for (ci, case) in cases.iter().enumerate() {
        if !only.is_empty() && !only.contains(&(ci + 1)) {
            continue;
        }
        let mut fr = 0;
        let mut inc = 0;
        let mut nc = 0;
        let mut design = String::new();
        for _ in 0..trials {
            let r = trial(&mut rng, case, 5, false, &opts);
            design = r.design.kind.name().to_owned();
            match r.exit_code() {
                1 => fr += 1,
                3 => inc += 1,
                _ => nc += 1,
            }
        }
        // Pilots: +20 % p99 at 5 runs a side. A user whose pilot is inconclusive follows
        // the tool's count for that row: one fresh A/A comparison and one fresh +20 %
        // comparison at that count per pilot (power over the pilots' own counts, not at one
        // median count: the count is as random as the pilot).
        let mut recs: Vec<usize> = Vec::new();
        let (mut undecided, mut found, mut fr_rec, mut hit) = (0, 0, 0, 0);
        for _ in 0..trials {
            let r = trial(&mut rng, case, 5, true, &opts);
            let n = match p99_row(&r) {
                Some(row) if row.verdict == Verdict::Regression => {
                    found += 1;
                    continue;
                }
                Some(row) => row.runs_needed,
                None => None,
            };
            let Some(n) = at.map(|a| a as u64).or(n) else {
                undecided += 1;
                continue;
            };
            let n = (n as usize).max(5);
            recs.push(n);
            if trial(&mut rng, case, n, false, &opts).exit_code() == 1 {
                fr_rec += 1;
            }
            if p99_row(&trial(&mut rng, case, n, true, &opts))
                .is_some_and(|x| x.verdict == Verdict::Regression)
            {
                hit += 1;
            }
        }
        recs.sort_unstable();
        let pct = |x: usize, of: usize| format!("{:.1} %", 100.0 * x as f64 / of.max(1) as f64);
        let q = |f: f64| recs.get(((recs.len() as f64 - 1.0) * f).round() as usize);
        let given = recs.len();
        let (recs, fr_rec, power) = match (q(0.1), q(0.5), q(0.9)) {
            (Some(lo), Some(med), Some(hi)) => (
                format!(
                    "{}{med} [{lo}–{hi}] ({found} of {trials} pilots already a regression at 5, \
                     {undecided} undecidable)",
                    if at.is_some() { "given: " } else { "" },
                ),
                format!(
                    "{fr_rec} of {given} = {} ({:.1} %)",
                    pct(fr_rec, given),
                    100.0 * upper(fr_rec, given)
                ),
                format!(
                    "{hit} of {given} = **{}** (found by following the advice: {} of all pilots)",
                    pct(hit, given),
                    pct(found + hit, trials)
                ),
            ),
            _ => (
                format!("none ({undecided} of {trials} pilots: more runs cannot decide)"),
                "-".into(),
                "-".into(),
            ),
        };
        writeln!(
            out,
            "| {} | {design} | {fr} of {trials} = {} ({:.1} %) | {} / {} | {recs} | {fr_rec} | {power} |",
            case.name,
            pct(fr, trials),
            100.0 * upper(fr, trials),
            pct(inc, trials),
            pct(nc, trials),
        )?;
    }
    Ok(())
}
