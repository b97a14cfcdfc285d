//! `cnsreplay trace`: tools that make a trace from a trace (`slice`).

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, bail};
use trace_format::TraceWriter;
use trace_format::slice::{Window, busiest, slice};
use trace_format::units::{fmt_secs, parse_duration};

use super::{label, open_or_fail};
use crate::cli::{SliceArgs, TraceArgs, TraceTool};

pub(crate) fn run(a: &TraceArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    match &a.tool {
        TraceTool::Slice(s) => run_slice(s, out),
    }
}

fn dur(flag: &str, v: &str) -> anyhow::Result<u64> {
    parse_duration(v).map_err(|e| anyhow::anyhow!("{flag} {v:?}: {e}"))
}

fn run_slice(a: &SliceArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let file = label(&a.input.file);
    if a.input.file.as_os_str() == "-" && a.busiest.is_some() {
        bail!("--busiest reads the trace twice: give a file, not stdin");
    }
    let window = match (&a.busiest, &a.start, &a.end) {
        (Some(len), _, _) => {
            let len = dur("--busiest", len)?;
            if len == 0 {
                bail!("--busiest: the window must be longer than 0");
            }
            let reader = open_or_fail(&a.input)?;
            match busiest(reader.events().map(|e| e.map(|e| e.at)), len)
                .with_context(|| format!("cannot read {file}"))?
            {
                Some((w, _)) => w,
                None => bail!("{file}: the trace has no events"),
            }
        }
        (None, None, None) => bail!("give --start and/or --end, or --busiest"),
        (None, from, to) => {
            let from = from.as_deref().map_or(Ok(0), |v| dur("--start", v))?;
            let to = to.as_deref().map_or(Ok(u64::MAX), |v| dur("--end", v))?;
            if to <= from {
                bail!("--end must be after --start");
            }
            Window { from, to }
        }
    };
    let reader = open_or_fail(&a.input)?;
    let header = reader.header().clone();
    let (writer, report) = slice(
        &header,
        reader.events(),
        window,
        &file,
        |h| TraceWriter::create(&a.output, None, h),
        |w, ev| w.write(ev),
    )
    .with_context(|| format!("slicing {file} into {}", a.output.display()))?;
    writer
        .finish()
        .with_context(|| format!("writing {}", a.output.display()))?;
    if a.json {
        serde_json::to_writer_pretty(&mut *out, &report)?;
        writeln!(out)?;
    } else {
        let to = if report.to == u64::MAX {
            "the end".to_owned()
        } else {
            fmt_secs(report.to)
        };
        writeln!(
            out,
            "{}: [{}, {to}) of {file}: {} events kept ({} before the window), {} volumes \
             declared{}",
            a.output.display(),
            fmt_secs(report.from),
            report.kept,
            report.before,
            report.volumes,
            if report.truncated {
                ", the trace goes on past it"
            } else {
                ""
            }
        )?;
        for (why, n) in &report.dropped {
            writeln!(out, "dropped {n}: {why}")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
