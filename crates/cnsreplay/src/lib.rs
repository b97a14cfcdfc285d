//! The `cnsreplay` command line: argument definitions ([`cli`]) and the commands behind them.
//!
//! The binary only parses arguments and calls [`run`]; every command writes its report to a
//! `Write` it is given, so tests drive the same code the binary runs. Exit codes: 0 success,
//! 1 the input has problems (an invalid trace; for `run`: interrupted, or every operation
//! failed), 2 the command could not run (I/O, usage), 4 `run
//! --require-valid` whose verdict is not `valid`.

pub mod cli;
pub mod commands;
pub mod logging;
pub mod report;
#[cfg(feature = "analyze")]
pub mod search;

use std::io::Write;
use std::process::ExitCode;

use cli::{Cli, Command};

/// Runs a parsed command line, writing reports to stdout.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let code = run_to(cli, &mut out)?;
    out.flush()?;
    Ok(code)
}

/// Runs a parsed command line, writing reports to `out`.
pub fn run_to(cli: Cli, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Validate(a) => commands::validate::run(&a, out),
        Command::Stats(a) => commands::stats::run(&a, out),
        Command::Convert(a) => commands::convert::run(&a, out),
        Command::Run(a) => commands::run::run(&a, out),
        Command::Cleanup(a) => commands::run::cleanup(&a, out),
        Command::Fetch(a) => commands::fetch::run(&a, out),
        Command::Pack(a) => {
            commands::fetch::stdout_ok()?;
            commands::fetch::pack(&a, out)
        }
        Command::Idle => commands::fetch::idle(),
        Command::MergeRuns(a) => {
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
        Command::Synth(a) => commands::synth::run(&a, out),
        Command::Sweep(a) => commands::sweep::run(&a, out),
        #[cfg(feature = "analyze")]
        Command::Capacity(a) => commands::capacity::run(&a, out),
        #[cfg(feature = "analyze")]
        Command::Analyze(a) => commands::analyze::run(&a, out),
        Command::Trace(a) => commands::trace::run(&a, out),
        Command::Completions(a) => commands::meta::completions(&a, out),
        Command::Man(a) => commands::meta::man(&a, out),
        Command::JsonSchema(a) => commands::meta::json_schema(&a, out),
    }
}
