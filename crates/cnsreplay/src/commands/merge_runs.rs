//! `cnsreplay merge-runs`: the run directories of one split trace merged into one.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

/// `merge-runs`.
#[derive(Debug, Args)]
pub struct MergeRunsArgs {
    /// The run directories (two or more).
    #[arg(required = true, num_args = 2..)]
    pub runs: Vec<PathBuf>,
    /// The merged run directory (new, or empty).
    #[arg(short, long)]
    pub output: PathBuf,
}

/// Merges `a.runs` into `a.output` and says what it merged.
pub(crate) fn run(a: &MergeRunsArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let parts: Vec<&std::path::Path> = a.runs.iter().map(|r| r.as_path()).collect();
    crate::output::refuse_inputs(&a.output, &parts)?;
    let m = replay::merge_runs::merge_runs(&a.output, &a.runs)?;
    writeln!(
        out,
        "{}: {} records from {} runs ({} duplicate markers left out); their clocks \
         started {:.3} ms apart",
        a.output.display(),
        m.events,
        m.runs.len(),
        m.duplicate_markers,
        m.origin_spread_ns as f64 / 1e6
    )?;
    Ok(ExitCode::SUCCESS)
}
