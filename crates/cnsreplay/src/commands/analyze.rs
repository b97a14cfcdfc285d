//! `cnsreplay analyze …`: summaries, run-to-run comparison (exit 1 on a regression), capacity
//! from a sweep, per-tenant QoS, the HTML report (figures also as SVG/PNG) and CSV/Parquet
//! export. The `analyze` library returns data; this module prints it as tables or JSON
//! (schemas `docs/schemas/analyze-*.schema.json`, printed by the hidden `json-schema analyze-*`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use analyze::compare::Metric;
use analyze::summary::{SummaryReport, summary};
use analyze::{CompareOptions, QosSpec, Slo};
use anyhow::Context;
use clap::{Args, Subcommand};
use serde::Serialize;
use trace_format::units::fmt_ns;

use crate::output::Output;

mod compare_table;
mod gate_out;
mod history;
mod summary_table;
use compare_table::write_compare;
pub(crate) use gate_out::GateArgs;
use summary_table::write_summary;

/// `analyze`.
#[derive(Debug, Args)]
pub struct AnalyzeArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: AnalyzeCommand,
}

/// `analyze` subcommands.
#[derive(Debug, Subcommand)]
pub enum AnalyzeCommand {
    /// Per op type: counts, errors, rates, response/service percentiles, lateness, dependency
    /// wait; I/O per unit; replayed vs observed latency when the trace carried it.
    Summary(SummaryArgs),
    /// Compare BASE runs with NEW runs per op type (p50, p99, p99.9, mean, error rate; I/O of
    /// io_phase units): Welch's t on per-run values, Holm over rows. Exit 0 no regression,
    /// 1 regression, 2 error, 3 inconclusive.
    Compare(CompareArgs),
    /// The highest rate of a sweep (`cnsreplay sweep`) that meets the SLOs, and the knee.
    Capacity(CapacityArgs),
    /// Per-tenant I/O latency targets per window, attributed to control operations in flight.
    /// Exit 0 every target met, 1 a target violated (or a tenant without I/O in the run),
    /// 2 error.
    Qos(QosArgs),
    /// A self-contained HTML report with figures and percentile tables.
    Report(ReportArgs),
    /// Export the event records (CSV, Parquet).
    Export(ExportArgs),
    /// Change points over many builds' runs (E-divisive means, permutation test): since which
    /// build a metric differs, by how much, and whether the latest build is still past it.
    /// Exit 0 no series worse now, 1 a series' latest segment a regression, 2 error, 3 too
    /// few builds.
    History(history::HistoryArgs),
}

/// `analyze summary`.
#[derive(Debug, Args)]
pub struct SummaryArgs {
    /// Run directories.
    #[arg(required = true, num_args = 1..)]
    pub runs: Vec<PathBuf>,
    /// Print JSON (schema: docs/schemas/analyze-summary.schema.json).
    #[arg(long)]
    pub json: bool,
    /// Also write the runs' values (per op type × metric, with their labels) as CSV: the
    /// table `analyze history` reads.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Also write the runs' values as Parquet (zstd).
    #[arg(long, value_name = "FILE")]
    pub parquet: Option<PathBuf>,
    /// Export the values of runs that did not finish or whose verdict is not `valid`
    /// (refused otherwise: a history would take them for measurements).
    #[arg(long)]
    pub allow_invalid: bool,
}

/// `analyze compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Baseline run directories (`BASE... -- NEW...`; or exactly `BASE NEW`).
    #[arg(required = true, num_args = 1.., value_name = "BASE")]
    pub base: Vec<PathBuf>,
    /// Run directories to judge, after `--` (options may follow them: `-- NEW... --json`).
    #[arg(last = true, value_name = "NEW")]
    pub new: Vec<PathBuf>,
    /// Allow runs of different traces: compare op types only.
    #[arg(long)]
    pub by_op_type: bool,
    /// Smallest change that counts, `METRIC=VALUE` (p50, p99, p99.9, mean: relative, e.g.
    /// `p99=10%`; error_rate: absolute fraction, e.g. `error_rate=1%`; `all=…`). Repeatable.
    #[arg(long, value_name = "METRIC=VALUE")]
    pub threshold: Vec<String>,
    /// Family-wise error rate over the rows (Holm); intervals are 1 − α.
    #[arg(long, default_value_t = 0.05)]
    pub alpha: f64,
    /// Fewest events per run for any verdict (fewer: insufficient data).
    #[arg(long, default_value_t = 10)]
    pub min_events: u64,
    /// Events beyond a percentile each run needs for its verdict (p99: 100×, p99.9: 1000×).
    #[arg(long, default_value_t = 5)]
    pub min_tail: u64,
    /// Analyze runs that did not finish or whose verdict is not `valid` (refused otherwise).
    #[arg(long)]
    pub allow_invalid: bool,
    /// Leave a metric out (p50, p99, p99.9, mean, error_rate): no rows, so it cannot hold the
    /// exit code at 3 for insufficient data. Repeatable.
    #[arg(long, value_name = "METRIC")]
    pub skip: Vec<String>,
    /// The largest shift between two batches of identical runs assumed when each side is one
    /// separate batch (relative, `5%` or `0.05`): such changes are not counted.
    #[arg(long, value_name = "FRACTION", default_value = "5%")]
    pub batch_shift: String,
    /// Print JSON (schema: docs/schemas/analyze-compare.schema.json).
    #[arg(long)]
    pub json: bool,
    /// JUnit and Markdown outputs.
    #[command(flatten)]
    pub gate: GateArgs,
}

/// `analyze capacity`.
#[derive(Debug, Args)]
pub struct CapacityArgs {
    /// The sweep directory (`cnsreplay sweep -o SWEEPDIR`, or a `cnsreplay capacity` output).
    pub sweep: PathBuf,
    /// An SLO, `OP[.METRIC] PCT<=LIMIT` (`'attach p99<=2s'`, `'io p99.9<=10ms'`) or
    /// `OP.PCT=LIMIT` (`attach.p99=30s`); repeatable. None: throughput only.
    #[arg(long, value_name = "SLO")]
    pub slo: Vec<String>,
    /// Analyze runs that did not finish or whose verdict is not `valid` (refused otherwise).
    #[arg(long)]
    pub allow_invalid: bool,
    /// Achieved throughput may fall short of offered by this fraction.
    #[arg(long, value_name = "FRACTION", default_value_t = 0.02)]
    pub tolerance: f64,
    /// Largest fraction of failed operations at a sustained point.
    #[arg(long, value_name = "FRACTION", default_value_t = 0.01)]
    pub max_error_rate: f64,
    /// Print JSON (schema: docs/schemas/analyze-capacity.schema.json).
    #[arg(long)]
    pub json: bool,
    /// JUnit and Markdown outputs.
    #[command(flatten)]
    pub gate: GateArgs,
}

/// `analyze qos`.
#[derive(Debug, Args)]
pub struct QosArgs {
    /// The run directory.
    pub run: PathBuf,
    /// Per-tenant targets (YAML; see docs/analyze.md).
    #[arg(long, value_name = "FILE")]
    pub slo_file: PathBuf,
    /// Analyze runs that did not finish or whose verdict is not `valid` (refused otherwise).
    #[arg(long)]
    pub allow_invalid: bool,
    /// Print JSON (schema: docs/schemas/analyze-qos.schema.json).
    #[arg(long)]
    pub json: bool,
    /// JUnit and Markdown outputs.
    #[command(flatten)]
    pub gate: GateArgs,
}

/// `analyze report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Run directories.
    #[arg(required = true, num_args = 1..)]
    pub runs: Vec<PathBuf>,
    /// The HTML file to write.
    #[arg(short, long = "output", value_name = "FILE")]
    pub output: PathBuf,
    /// Also write each figure as `DIR/<figure>.svg`.
    #[arg(long, value_name = "DIR")]
    pub svg: Option<PathBuf>,
    /// Also write each figure as `DIR/<figure>.png` (rasterized in-process with the system's
    /// fonts; no browser needed).
    #[arg(long, value_name = "DIR")]
    pub png: Option<PathBuf>,
    /// Pixels per SVG unit of the PNGs (figures are 760×360 units), above 0 and at most 16.
    #[arg(long, value_name = "X", default_value_t = 2.0, value_parser = png_scale)]
    pub png_scale: f32,
    /// Analyze runs that did not finish or whose verdict is not `valid` (refused otherwise).
    #[arg(long)]
    pub allow_invalid: bool,
}

/// `--png-scale`: a finite factor in (0, 16] (0 draws nothing; 16 is a 12 160 px wide PNG).
fn png_scale(s: &str) -> Result<f32, String> {
    let x: f32 = s
        .parse()
        .map_err(|e| format!("{s:?} is not a number: {e}"))?;
    if x.is_finite() && x > 0.0 && x <= 16.0 {
        Ok(x)
    } else {
        Err(format!("{s} is not a scale in (0, 16]"))
    }
}

/// `analyze export`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("format").required(true).multiple(true).args(["csv", "parquet"])))]
pub struct ExportArgs {
    /// The run directory.
    pub run: PathBuf,
    /// Write the records as CSV to this file.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Write the records as Parquet (zstd) to this file.
    #[arg(long, value_name = "FILE")]
    pub parquet: Option<PathBuf>,
}

fn json<T: Serialize>(v: &T, out: &mut dyn Write) -> anyhow::Result<()> {
    serde_json::to_writer_pretty(&mut *out, v)?;
    writeln!(out)?;
    Ok(())
}

pub(crate) fn run(a: &AnalyzeArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    match &a.command {
        AnalyzeCommand::Summary(a) => run_summary(a, out),
        AnalyzeCommand::Compare(a) => run_compare(a, out),
        AnalyzeCommand::Capacity(a) => run_capacity(a, out),
        AnalyzeCommand::Qos(a) => run_qos(a, out),
        AnalyzeCommand::Report(a) => run_report(a, out),
        AnalyzeCommand::Export(a) => run_export(a, out),
        AnalyzeCommand::History(a) => history::run(a, out),
    }
}

fn run_export(a: &ExportArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    // The run directory itself: nothing is written inside it.
    let inputs = [
        a.run.clone(),
        a.run.join("events.jsonl"),
        a.run.join("manifest.json"),
    ];
    let inputs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
    for (path, csv) in [(&a.csv, true), (&a.parquet, false)] {
        let Some(path) = path else { continue };
        let context = || format!("export of {} to {}", a.run.display(), path.display());
        let run = analyze::Run::open(&a.run).with_context(context)?;
        // A block replay's streamed requests have no records: nothing to export is an error,
        // not an empty file (checked before the output exists).
        run.check_records("export").with_context(context)?;
        let dest = Output::create(path, &inputs)?;
        let mut w = std::io::BufWriter::new(dest.file()?);
        let n = if csv {
            analyze::frame::export_csv(&run, &mut w)
        } else {
            analyze::frame::export_parquet(&run, &mut w)
        }
        .with_context(context)?;
        w.flush().with_context(context)?;
        drop(w);
        dest.commit()?;
        writeln!(out, "{n} records → {}", path.display())?;
    }
    streamed_notice(&a.run, "exported");
    Ok(ExitCode::SUCCESS)
}

/// Says when part of a run's I/O went through streams and so is not in what a record-based
/// analysis produced.
fn streamed_notice(run: &Path, what: &str) {
    let n = analyze::Run::open(run).map_or(0, |r| r.streamed_requests());
    if n > 0 {
        tracing::warn!(
            "{}: {n} io request(s) were replayed through per-volume I/O streams and have no \
             per-request records: they are not {what} (`analyze summary` and `analyze report` \
             show them)",
            run.display()
        );
    }
}

fn run_summary(a: &SummaryArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let inputs: Vec<&Path> = a.runs.iter().map(PathBuf::as_path).collect();
    for dest in a.csv.iter().chain(&a.parquet) {
        crate::output::refuse_inputs(dest, &inputs)?;
    }
    let runs = a
        .runs
        .iter()
        .map(|r| summary(r).with_context(|| format!("summary of {}", r.display())))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if a.json {
        json(&SummaryReport { runs }, out)?;
    } else {
        for (i, s) in runs.iter().enumerate() {
            if i > 0 {
                writeln!(out)?;
            }
            write_summary(s, out)?;
        }
    }
    if a.csv.is_some() || a.parquet.is_some() {
        let points = a
            .runs
            .iter()
            .map(|r| {
                analyze::history::RunPoint::of_run(r, a.allow_invalid)
                    .with_context(|| format!("values of {}", r.display()))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        for (path, csv) in [(&a.csv, true), (&a.parquet, false)] {
            let Some(path) = path else { continue };
            let dest = Output::create(path, &inputs)?;
            let mut w = std::io::BufWriter::new(dest.file()?);
            let n = if csv {
                analyze::history::table::write_csv(&points, &mut w)
            } else {
                analyze::history::table::write_parquet(&points, &mut w)
            }
            .with_context(|| format!("values to {}", path.display()))?;
            w.flush()?;
            drop(w);
            dest.commit()?;
            // Not on stdout beside --json: the JSON stays one document.
            tracing::info!("{n} values of {} run(s) → {}", points.len(), path.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn run_compare(a: &CompareArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let mut opts = CompareOptions {
        by_op_type: a.by_op_type,
        alpha: a.alpha,
        min_events: a.min_events,
        min_tail: a.min_tail,
        allow_invalid: a.allow_invalid,
        ..CompareOptions::default()
    };
    anyhow::ensure!(
        a.alpha > 0.0 && a.alpha < 1.0,
        "--alpha {}: expected a level in (0, 1), e.g. 0.05",
        a.alpha
    );
    for t in &a.threshold {
        opts.thresholds.set(t)?;
    }
    opts.skip = skipped_metrics(&a.skip)?;
    opts.batch_shift = match a.batch_shift.trim().strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|x| x / 100.0),
        None => a.batch_shift.trim().parse::<f64>(),
    }
    .ok()
    .filter(|x| x.is_finite() && *x >= 0.0)
    .with_context(|| {
        format!(
            "--batch-shift {:?}: expected a fraction ≥ 0, e.g. 5% or 0.05",
            a.batch_shift
        )
    })?;
    let (base, new) = match (a.base.as_slice(), a.new.is_empty()) {
        (_, false) => (a.base.clone(), a.new.clone()),
        ([b, n], true) => (vec![b.clone()], vec![n.clone()]),
        _ => anyhow::bail!(
            "separate the BASE runs from the NEW runs with `--`: compare BASE... -- NEW..."
        ),
    };
    let inputs: Vec<&Path> = base.iter().chain(&new).map(PathBuf::as_path).collect();
    a.gate.check(a.json, &inputs)?;
    let r = analyze::compare(&base, &new, &opts)
        .context(crate::CouldNotRun("analyze compare could not run"))?;
    if a.json {
        json(&r, out)?;
    } else if !a.gate.takes_stdout() {
        write_compare(&r, out)?;
    }
    a.gate.write(|| analyze::gate::compare(&r), &inputs, out)?;
    Ok(ExitCode::from(r.exit_code()))
}

/// `--skip METRIC...` of `compare` and `history`.
fn skipped_metrics(names: &[String]) -> anyhow::Result<Vec<Metric>> {
    names
        .iter()
        .map(|m| {
            Metric::ALL
                .into_iter()
                .find(|x| x.name() == m.trim())
                .with_context(|| {
                    format!("--skip {m:?}: expected p50, p99, p99.9, mean or error_rate")
                })
        })
        .collect()
}

fn run_capacity(a: &CapacityArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let slos = a
        .slo
        .iter()
        .map(|s| Slo::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    let opts = analyze::PointOptions {
        tolerance: a.tolerance,
        max_error_rate: a.max_error_rate,
        allow_invalid: a.allow_invalid,
        ..analyze::PointOptions::default()
    };
    let inputs = [a.sweep.as_path()];
    a.gate.check(a.json, &inputs)?;
    let r = analyze::capacity(&a.sweep, &slos, &opts)?;
    if a.json {
        json(&r, out)?;
    } else if !a.gate.takes_stdout() {
        let rows: Vec<_> = r.points.iter().map(|p| (None, p)).collect();
        write_points(&slos, &rows, out)?;
        writeln!(out, "{}", r.answer)?;
    }
    a.gate.write(
        || analyze::gate::capacity(&analyze::gate::capacity_of(&r)),
        &inputs,
        out,
    )?;
    Ok(ExitCode::SUCCESS)
}

/// The curve: one row per run (with its search intensity when given).
pub(crate) fn write_points(
    slos: &[Slo],
    points: &[(Option<f64>, &analyze::PointEval)],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let searched = points.iter().any(|p| p.0.is_some());
    writeln!(
        out,
        "{}{:>8} {:>11} {:>11}  {}{:>6}  why not",
        if searched {
            format!("{:>10} ", "intensity")
        } else {
            String::new()
        },
        "speed",
        "offered/s",
        "achieved/s",
        slos.iter()
            .map(|s| format!("{:>22}", s.spec))
            .collect::<String>(),
        "pass",
    )?;
    for (x, p) in points {
        let vals: String = p
            .slos
            .iter()
            .map(|v| {
                let t = v.value_ns.map_or("–".to_owned(), |x| fmt_ns(x as f64));
                let mark = match (v.met, v.decided) {
                    (true, _) => "",
                    (false, true) => " ✗",
                    (false, false) => " ?",
                };
                format!("{:>22}", format!("{t}{mark}"))
            })
            .collect();
        let (off, ach) = p
            .total()
            .map_or((0.0, 0.0), |t| (t.offered_rate, t.achieved_rate));
        writeln!(
            out,
            "{}{:>8} {:>11.2} {:>11.2}  {vals}{:>6}  {}",
            x.map_or(String::new(), |x| format!("{x:>10.4} ")),
            (p.speed * 1e4).round() / 1e4,
            off,
            ach,
            match (p.pass, p.decided) {
                (true, _) => "yes",
                (false, true) => "no",
                (false, false) => "?",
            },
            p.reasons.join("; ")
        )?;
    }
    Ok(())
}

/// Exit 0 when every target held in every window, 1 when one was violated or the input
/// has problems (the SLO file is malformed or names a tenant without I/O in the run), 2 when
/// it could not run.
fn run_qos(a: &QosArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let input_problem = |e: analyze::Error| -> anyhow::Result<ExitCode> {
        match e {
            analyze::Error::Invalid(_) | analyze::Error::Config { .. } => {
                tracing::error!("{e}");
                Ok(ExitCode::from(1))
            }
            e => Err(e.into()),
        }
    };
    let inputs = [a.run.as_path(), a.slo_file.as_path()];
    a.gate.check(a.json, &inputs)?;
    let spec = match QosSpec::from_file(&a.slo_file) {
        Ok(s) => s,
        Err(e) => return input_problem(e),
    };
    let r = match analyze::qos(&a.run, &spec, a.allow_invalid) {
        Ok(r) => r,
        Err(e) => return input_problem(e),
    };
    streamed_notice(&a.run, "judged");
    let code = if r.targets.iter().any(|t| t.violated > 0) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    };
    a.gate.write(|| analyze::gate::qos(&r), &inputs, out)?;
    if a.json {
        json(&r, out)?;
        return Ok(code);
    }
    if a.gate.takes_stdout() {
        return Ok(code);
    }
    writeln!(
        out,
        "{}: {} windows of {}",
        r.run,
        r.windows,
        fmt_ns(r.window_ns as f64)
    )?;
    for t in &r.targets {
        writeln!(out, "{}", t.sentence)?;
        for v in t.violations.iter().take(20) {
            writeln!(
                out,
                "  [{}, {}) {} over {} I/Os; in flight: {}",
                fmt_ns(v.start_ns as f64),
                fmt_ns(v.end_ns as f64),
                fmt_ns(v.value_ns as f64),
                v.ios,
                if v.in_flight.is_empty() {
                    "nothing".to_owned()
                } else {
                    v.in_flight.join(", ")
                }
            )?;
        }
        if t.violations.len() > 20 {
            writeln!(out, "  … {} more", t.violations.len() - 20)?;
        }
    }
    Ok(code)
}

fn run_report(a: &ReportArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let runs: Vec<&Path> = a.runs.iter().map(PathBuf::as_path).collect();
    // Every output outside every run, checked before anything is computed or written.
    for dest in std::iter::once(&a.output).chain(&a.svg).chain(&a.png) {
        crate::output::refuse_inputs(dest, &runs)?;
    }
    let r = analyze::report::report(&runs, a.allow_invalid)?;
    crate::output::write(&a.output, &runs, r.html.as_bytes())?;
    if let Some(dir) = &a.svg {
        fs_err::create_dir_all(dir)?;
        for f in &r.figures {
            crate::output::write(&dir.join(format!("{}.svg", f.id)), &runs, f.svg.as_bytes())?;
        }
    }
    if let Some(dir) = &a.png {
        fs_err::create_dir_all(dir)?;
        for f in &r.figures {
            let png = f
                .png(a.png_scale)
                .with_context(|| format!("figure {}", f.id))?;
            crate::output::write(&dir.join(format!("{}.png", f.id)), &runs, &png)?;
        }
    }
    let figs: Vec<String> = r
        .figures
        .iter()
        .map(|f| format!("{} ({} points)", f.id, f.points))
        .collect();
    writeln!(out, "{} → {}", figs.join(", "), a.output.display())?;
    Ok(ExitCode::SUCCESS)
}
