//! `cnsreplay stats`.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use trace_format::check::check_trace;
use trace_format::units::fmt_secs;

use super::{label, open_or_fail, spinner};
use crate::commands::args::InputArgs;
use crate::report::StatsReport;

/// `stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// The trace.
    #[command(flatten)]
    pub input: InputArgs,
    /// Print the report as JSON (schema: docs/schemas/stats.schema.json).
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn run(a: &StatsArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let file = label(&a.input.file);
    let reader = open_or_fail(&a.input)?;
    let encoding = reader.encoding().name().to_owned();
    let pb = spinner("reading");
    let r = check_trace(reader, &file, 10, |n| pb.set_position(n))?;
    pb.finish_and_clear();
    for d in &r.diagnostics {
        tracing::warn!("{d}");
    }
    if r.problems > r.diagnostics.len() as u64 {
        tracing::warn!(
            "… and {} more problems; run `cnsreplay validate` for all",
            r.problems - r.diagnostics.len() as u64
        );
    }
    let report = StatsReport {
        file,
        encoding,
        valid: r.is_valid(),
        problems: r.problems,
        stats: r.stats,
    };
    if a.json {
        serde_json::to_writer_pretty(&mut *out, &report)?;
        writeln!(out)?;
    } else {
        write_table(&report, out)?;
    }
    Ok(if report.valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn write_table(r: &StatsReport, out: &mut dyn Write) -> std::io::Result<()> {
    let s = &r.stats;
    writeln!(
        out,
        "{}: {} events over {} (mean {:.2}/s, peak {}/s in one second)",
        r.file,
        s.events,
        fmt_secs(s.duration_ns),
        s.mean_rate,
        s.peak_rate
    )?;
    writeln!(out)?;
    // Wide enough for the longest op name of the trace (`delete_group_snapshot`, …).
    let w = s
        .ops
        .keys()
        .map(|o| o.name().len())
        .max()
        .unwrap_or(0)
        .max(16);
    writeln!(
        out,
        "{:<w$} {:>12} {:>12} {:>8}",
        "operation", "count", "mean/s", "peak/s"
    )?;
    for (op, o) in &s.ops {
        writeln!(
            out,
            "{:<w$} {:>12} {:>12.3} {:>8}",
            op.name(),
            o.count,
            o.mean_rate,
            o.peak_rate
        )?;
    }
    writeln!(out)?;
    writeln!(out, "peak live volumes       {}", s.peak_live_volumes)?;
    writeln!(out, "peak attached volumes   {}", s.peak_attached_volumes)?;
    writeln!(out, "peak running workloads  {}", s.peak_running_workloads)?;
    writeln!(out, "peak live snapshots     {}", s.peak_live_snapshots)?;
    if s.io_read_bytes > 0 || s.io_write_bytes > 0 {
        writeln!(out, "io bytes read           {}", s.io_read_bytes)?;
        writeln!(out, "io bytes written        {}", s.io_write_bytes)?;
    }
    if !r.valid {
        writeln!(
            out,
            "\nwarning: the trace has {} problem(s); these numbers are suspect",
            r.problems
        )?;
    }
    Ok(())
}
