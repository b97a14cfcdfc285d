//! `cnsreplay validate`.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;
use trace_format::check::check_trace;

use super::{label, open, spinner};
use crate::commands::args::InputArgs;
use crate::report::{DiagnosticJson, ValidateReport};

/// `validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The trace.
    #[command(flatten)]
    pub input: InputArgs,
    /// Report at most this many problems (all are counted).
    #[arg(long, default_value_t = 100)]
    pub max_errors: usize,
    /// Print the report as JSON (schema: docs/schemas/validate.schema.json).
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn run(a: &ValidateArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let file = label(&a.input.file);
    let report = match open(&a.input) {
        Ok(reader) => {
            let encoding = reader.encoding().name().to_owned();
            let pb = spinner("validating");
            let r = check_trace(reader, &file, a.max_errors, |n| pb.set_position(n))?;
            pb.finish_and_clear();
            ValidateReport {
                file,
                encoding: Some(encoding),
                valid: r.is_valid(),
                events: r.events,
                problems: r.problems,
                aborted: r.aborted,
                diagnostics: r.diagnostics.iter().map(DiagnosticJson::from).collect(),
            }
        }
        Err(trace_format::Error::Invalid(d)) => ValidateReport {
            file,
            encoding: None,
            valid: false,
            events: 0,
            problems: 1,
            aborted: true,
            diagnostics: vec![DiagnosticJson::from(&*d)],
        },
        Err(e) => return Err(e.into()),
    };
    if a.json {
        serde_json::to_writer_pretty(&mut *out, &report)?;
        writeln!(out)?;
    } else {
        for d in &report.diagnostics {
            writeln!(out, "{}", d.text)?;
        }
        let shown = report.diagnostics.len() as u64;
        if report.problems > shown {
            writeln!(
                out,
                "… and {} more problems (raise --max-errors to see them)",
                report.problems - shown
            )?;
        }
        if report.valid {
            writeln!(out, "{}: valid, {} events", report.file, report.events)?;
        } else {
            writeln!(
                out,
                "{}: invalid, {} problem{} in {} events{}",
                report.file,
                report.problems,
                if report.problems == 1 { "" } else { "s" },
                report.events,
                if report.aborted {
                    " (reading stopped early)"
                } else {
                    ""
                }
            )?;
        }
    }
    Ok(if report.valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
