//! `analyze history INPUT...`: change points over many builds' runs ([`analyze::history`]),
//! as a table per series, JSON (`docs/schemas/analyze-history.schema.json`), JUnit and
//! Markdown.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use analyze::gate::{change_point_text, fmt_value};
use analyze::history::{HistoryOptions, Latest, Order};
use anyhow::Context;
use clap::{Args, ValueEnum};

use super::GateArgs;

/// How builds are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OrderArg {
    /// By each build's earliest run start.
    Time,
    /// By the `--by` label's value in natural order (`v1.9` before `v1.10`).
    Natural,
}

/// `analyze history`.
#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// Run directories, and/or tables of exported values (`analyze summary --csv|--parquet`).
    #[arg(required = true, num_args = 1..)]
    pub inputs: Vec<PathBuf>,
    /// The label naming a run's build (`run --label build=…`): runs of one build are one
    /// point (their median, with their range). Without it every run is a build.
    #[arg(long, value_name = "KEY")]
    pub by: Option<String>,
    /// How builds are ordered.
    #[arg(long, value_enum, default_value_t = OrderArg::Time)]
    pub order: OrderArg,
    /// Family-wise false-alarm rate over the series (each is tested at alpha / series).
    #[arg(long, default_value_t = 0.05)]
    pub alpha: f64,
    /// Permutations per test (at least; more when alpha / series needs them).
    #[arg(long, default_value_t = 999)]
    pub permutations: u32,
    /// Fewest builds on either side of a change.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub min_builds: usize,
    /// Smallest change that counts, `METRIC=VALUE`, as for `compare` (repeatable).
    #[arg(long, value_name = "METRIC=VALUE")]
    pub threshold: Vec<String>,
    /// Leave a metric out (p50, p99, p99.9, mean, error_rate). Repeatable.
    #[arg(long, value_name = "METRIC")]
    pub skip: Vec<String>,
    /// Fewest events per run for a value.
    #[arg(long, default_value_t = 10)]
    pub min_events: u64,
    /// Events beyond a percentile a run needs for its value (p99: 100×, p99.9: 1000×).
    #[arg(long, default_value_t = 5)]
    pub min_tail: u64,
    /// Allow runs of different traces: op types by name only.
    #[arg(long)]
    pub by_op_type: bool,
    /// Analyze run directories that did not finish or whose verdict is not `valid`.
    #[arg(long)]
    pub allow_invalid: bool,
    /// Seed of the permutations (the result is deterministic for a seed).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Also write an HTML page with a figure per series that has a change point (each build's
    /// median, its runs' range, the change points) and the series table.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// With --html: a figure for every series, not only those with a change point.
    #[arg(long, requires = "html")]
    pub html_all: bool,
    /// Print JSON (schema: docs/schemas/analyze-history.schema.json).
    #[arg(long)]
    pub json: bool,
    /// JUnit and Markdown outputs.
    #[command(flatten)]
    pub gate: GateArgs,
}

pub(super) fn run(a: &HistoryArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let mut opts = HistoryOptions {
        by: a.by.clone(),
        order: match a.order {
            OrderArg::Time => Order::Time,
            OrderArg::Natural => Order::Natural,
        },
        alpha: a.alpha,
        permutations: a.permutations.max(99),
        min_builds: a.min_builds,
        min_events: a.min_events,
        min_tail: a.min_tail,
        by_op_type: a.by_op_type,
        seed: a.seed,
        ..HistoryOptions::default()
    };
    anyhow::ensure!(
        a.alpha > 0.0 && a.alpha < 1.0,
        "--alpha {}: expected a level in (0, 1), e.g. 0.05",
        a.alpha
    );
    anyhow::ensure!(a.min_builds >= 1, "--min-builds must be at least 1");
    anyhow::ensure!(
        a.order == OrderArg::Time || a.by.is_some(),
        "--order natural orders builds by the --by label's value: give --by KEY"
    );
    for t in &a.threshold {
        opts.thresholds.set(t)?;
    }
    opts.skip = super::skipped_metrics(&a.skip)?;
    let inputs: Vec<&Path> = a.inputs.iter().map(PathBuf::as_path).collect();
    a.gate.check(a.json, &inputs)?;
    if let Some(h) = &a.html {
        crate::output::refuse_inputs(h, &inputs)?;
    }
    let r = analyze::history::history(&a.inputs, &opts, a.allow_invalid)
        .context(crate::CouldNotRun("analyze history could not run"))?;
    if a.json {
        serde_json::to_writer_pretty(&mut *out, &r)?;
        writeln!(out)?;
    } else if !a.gate.takes_stdout() {
        write_history(&r, out)?;
    }
    a.gate.write(|| analyze::gate::history(&r), &inputs, out)?;
    if let Some(h) = &a.html {
        let (html, figures) = analyze::history_page::page(&r, a.html_all);
        crate::output::write(h, &inputs, html.as_bytes())?;
        tracing::info!("{} figure(s) → {}", figures.len(), h.display());
    }
    Ok(ExitCode::from(r.exit_code()))
}

fn write_history(r: &analyze::history::HistoryReport, out: &mut dyn Write) -> std::io::Result<()> {
    let runs: usize = r.builds.iter().map(|b| b.runs.len()).sum();
    writeln!(
        out,
        "{} builds{} ({} runs), {} … {}; E-divisive means, permutation test at {:.2e} a series \
         ({} family-wise over {} series), {} permutations, ≥ {} builds a side",
        r.builds.len(),
        r.options
            .by
            .as_ref()
            .map_or(String::new(), |k| format!(" by {k}")),
        runs,
        r.builds.first().map_or("", |b| b.build.as_str()),
        r.builds.last().map_or("", |b| b.build.as_str()),
        r.series_alpha,
        r.options.alpha,
        r.tested,
        r.permutations,
        r.options.min_builds
    )?;
    writeln!(
        out,
        "{:<16} {:<10} {:>10} {:>10}  change points",
        "operation", "metric", "first", "latest"
    )?;
    for s in &r.series {
        let first = s
            .points
            .first()
            .map_or(String::new(), |p| fmt_value(s.metric, p.value));
        let last = s
            .points
            .last()
            .map_or(String::new(), |p| fmt_value(s.metric, p.value));
        let changes = match s.latest {
            Latest::Untested => format!("untested ({} builds with a value)", s.points.len()),
            _ if s.change_points.is_empty() => "none".to_owned(),
            _ => s
                .change_points
                .iter()
                .map(|c| {
                    let kind = match c.kind {
                        analyze::history::Change::Regression => "REGRESSION",
                        analyze::history::Change::Improvement => "improvement",
                        analyze::history::Change::Small => "small change",
                    };
                    format!("{kind} at {} ({})", c.build, change_point_text(s.metric, c))
                })
                .collect::<Vec<_>>()
                .join("; "),
        };
        writeln!(
            out,
            "{:<16} {:<10} {:>10} {:>10}  {changes}",
            s.op,
            s.metric.name(),
            first,
            last
        )?;
    }
    for n in &r.notes {
        writeln!(out, "note: {n}")?;
    }
    writeln!(
        out,
        "{} change point(s) in {} tested series; {} series worse now than before its last change",
        r.change_points, r.tested, r.regressions
    )?;
    Ok(())
}
