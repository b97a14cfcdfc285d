//! The `cnsreplay` command line: argument definitions ([`cli`]) and the commands behind them.
//!
//! The binary only parses arguments and calls [`run`]; every command writes its report to a
//! `Write` it is given, so tests drive the same code the binary runs.
//!
//! Exit codes are the same for every command (the table in the README): 0 success, 1 the
//! input has problems (or the command's check said no: a run interrupted or all failed, a
//! regression, no capacity limit found), 2 the command could not run, 3 `analyze compare`
//! inconclusive, 4 `run --require-valid` whose verdict is not `valid`, 128 + N killed by
//! signal N. A command returns 1 itself when it reports the problems; an error it returns is
//! sorted by [`exit_code_of`], so an invalid trace exits 1 whichever command read it, except
//! under [`CouldNotRun`] (`analyze compare`, whose 1 means a regression only: 2).
//!
//! ## Layers
//!
//! Lowest first; a module imports only from its own layer or below (checked by
//! `scripts/check-layers.py`).
//!
//! 1. `exit`, `logging`, `output`, `report`, `search` — exit codes and their errors, log setup,
//!    safe outputs, reports, the search
//! 2. `commands` — one module per command, each with its arguments
//! 3. `cli` — the command line: [`cli::Cli`] and the list of commands

pub mod cli;
pub mod commands;
pub mod exit;
pub mod logging;
pub mod output;
pub mod report;
#[cfg(feature = "analyze")]
pub mod search;

use std::io::Write;
use std::process::ExitCode;

use clap::CommandFactory as _;
use cli::{Cli, Command};
pub use exit::{CouldNotRun, EXIT_FAILED, EXIT_INPUT, InputProblem};

/// Exit code of a command that failed with `e`: [`EXIT_INPUT`] when the error is a problem
/// of the input (a located problem in a trace, a bad import line, a bad model or data file, a
/// malformed run-directory record), else [`EXIT_FAILED`].
pub fn exit_code_of(e: &anyhow::Error) -> u8 {
    if e.downcast_ref::<CouldNotRun>().is_some() {
        return EXIT_FAILED;
    }
    if e.chain().any(is_input_problem) {
        EXIT_INPUT
    } else {
        EXIT_FAILED
    }
}

fn is_input_problem(e: &(dyn std::error::Error + 'static)) -> bool {
    use trace_format::Error as T;
    if e.is::<InputProblem>() {
        return true;
    }
    // A merge refused because the inputs, merged as asked, would make an invalid trace (or
    // collide) is a problem of those inputs.
    let trace = |t: &T| matches!(t, T::Invalid(_) | T::Merge { .. });
    if let Some(t) = e.downcast_ref::<T>() {
        return trace(t);
    }
    if let Some(s) = e.downcast_ref::<trace_format::split::SplitError>() {
        use trace_format::split::SplitError as S;
        // A trace that cannot be split as asked (an object two tenants use, fewer tenants or
        // lineages than parts) is a problem of that input, as a merge's is; a split by
        // lineage without --parts is usage.
        return match s {
            S::Trace(t) => trace(t),
            S::Shared(_) | S::TooFew { .. } => true,
            S::NeedParts { .. } => false,
        };
    }
    if let Some(i) = e.downcast_ref::<import::ImportError>() {
        return match i {
            import::ImportError::Bad(_) => true,
            import::ImportError::Trace(t) => trace(t),
            _ => false,
        };
    }
    if let Some(s) = e.downcast_ref::<synth::Error>() {
        return match s {
            synth::Error::Trace(t) => trace(t),
            s => commands::synth::input_problem(s),
        };
    }
    // A malformed run-directory record (events.jsonl, ledger.jsonl, manifest.json) is a
    // problem of that input; a JSON error of the file system is not.
    match e.downcast_ref::<replay::Error>() {
        Some(replay::Error::Trace(t)) => return trace(t),
        Some(replay::Error::Json { source, .. }) => return !source.is_io(),
        _ => {}
    }
    #[cfg(feature = "analyze")]
    if let Some(a) = e.downcast_ref::<analyze::Error>() {
        return match a {
            analyze::Error::Trace(t) => trace(t),
            analyze::Error::Record { .. } => true,
            _ => false,
        };
    }
    false
}

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
        Command::Cleanup(a) => commands::cleanup::run(&a, out),
        Command::Fetch(a) => commands::fetch::run(&a, out),
        Command::Pack(a) => {
            commands::fetch::stdout_ok()?;
            commands::fetch::pack(&a, out)
        }
        Command::Idle => commands::fetch::idle(),
        Command::MergeRuns(a) => commands::merge_runs::run(&a, out),
        Command::Synth(a) => commands::synth::run(&a, out),
        Command::Sweep(a) => commands::sweep::run(&a, out),
        #[cfg(feature = "analyze")]
        Command::Capacity(a) => commands::capacity::run(&a, out),
        #[cfg(feature = "analyze")]
        Command::Analyze(a) => commands::analyze::run(&a, out),
        Command::Trace(a) => commands::trace::run(&a, out),
        Command::Completions(a) => commands::meta::completions(&a, Cli::command(), out),
        Command::Man(a) => commands::meta::man(&a, Cli::command(), out),
        Command::JsonSchema(a) => commands::meta::json_schema(&a, out),
    }
}
