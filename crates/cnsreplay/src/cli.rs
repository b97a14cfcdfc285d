//! The command line: [`Cli`] and the list of [`Command`]s. Each command's arguments live
//! beside the command (`commands::*`), the types several commands share in
//! `commands::args`; they are re-exported here under their old paths.

use clap::{Parser, Subcommand};

pub use crate::commands::args::{EncodingArg, InputArgs, IoRateArg, parse_duration};
pub use crate::commands::cleanup::CleanupArgs;
pub use crate::commands::convert::{ConvertArgs, Format, OutFormat};
pub use crate::commands::merge_runs::MergeRunsArgs;
pub use crate::commands::meta::{CompletionsArgs, JsonSchemaArgs, ManArgs, SchemaFor};
pub use crate::commands::stats::StatsArgs;
pub use crate::commands::trace::{
    AlignArg, MergeArgs, RewriteArgs, SliceArgs, SplitArgs, SplitBy, TraceArgs, TraceTool,
};
pub use crate::commands::validate::ValidateArgs;

/// Benchmark cloud-native storage by replaying what real clusters do to it: volume create,
/// attach, snapshot, restore, resize, detach and delete, together with the I/O around them.
#[derive(Debug, Parser)]
#[command(name = "cnsreplay", version, propagate_version = true)]
pub struct Cli {
    /// More log output on stderr (-v debug, -vv trace). `RUST_LOG` overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Only errors on stderr.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// Parses the process's arguments as [`Cli::parse`] does, after [`hoist_trailing_options`].
    pub fn parse_args() -> Self {
        Self::parse_from(hoist_trailing_options(std::env::args_os().collect()))
    }
}

/// `analyze compare BASE... -- NEW... [OPTIONS]`: the docs write the options after the NEW
/// runs, and a refusal says "… with --allow-invalid", which a user appends at the end. Clap
/// takes everything after `--` as a NEW run, so the options in that tail (a token starting
/// with `-`, with its value when the option takes one) are moved before the `--`, where clap
/// parses them as usual (an unknown one is then clap's "unexpected argument", not a missing
/// run directory). A NEW run whose name starts with `-` is written `./-name`. Other command
/// lines are returned unchanged.
pub fn hoist_trailing_options(args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    #[cfg(feature = "analyze")]
    {
        use clap::CommandFactory as _;
        let Some(sep) = args.iter().position(|a| a == "--") else {
            return args;
        };
        // The subcommand path before `--`, skipping the global flags (none takes a value).
        let words: Vec<&std::ffi::OsString> = args[1..sep]
            .iter()
            .filter(|a| !a.to_string_lossy().starts_with('-'))
            .take(2)
            .collect();
        if words.len() < 2 || words[0] != "analyze" || words[1] != "compare" {
            return args;
        }
        let cmd = Cli::command();
        let compare = cmd
            .find_subcommand("analyze")
            .and_then(|a| a.find_subcommand("compare"));
        let takes_value = |flag: &str| -> bool {
            let Some(c) = compare else { return false };
            c.get_arguments().any(|a| {
                let named = match flag.strip_prefix("--") {
                    Some(long) => a.get_long() == Some(long),
                    None => flag.len() == 2 && a.get_short() == flag.chars().nth(1),
                };
                named && a.get_action().takes_values()
            })
        };
        let (head, tail) = args.split_at(sep);
        let (mut options, mut runs) = (Vec::new(), Vec::new());
        let mut rest = tail[1..].iter();
        while let Some(a) = rest.next() {
            let text = a.to_string_lossy();
            if text.starts_with('-') && text.len() > 1 {
                options.push(a.clone());
                if !text.contains('=') && takes_value(&text) {
                    options.extend(rest.next().cloned());
                }
            } else {
                runs.push(a.clone());
            }
        }
        let mut out = head.to_vec();
        out.extend(options);
        out.push("--".into());
        out.extend(runs);
        out
    }
    #[cfg(not(feature = "analyze"))]
    args
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check a trace: syntax, schema, time order and the life cycle of every object it names.
    /// Exits 1 when it finds problems.
    Validate(ValidateArgs),
    /// Summarize a trace: events per operation, duration, mean and peak rates, peak live objects.
    Stats(StatsArgs),
    /// Convert a trace between YAML, JSON Lines and binary, streaming and losslessly.
    Convert(ConvertArgs),
    /// Replay a trace open-loop against a provider and record every latency in a run
    /// directory. Every run ends with a verdict: `valid`, `partly-valid` (valid for some op
    /// types; the others' figures may be more than 5 % the tool's own delay, reported with
    /// their bounds), `imprecise` (so for every op type), `not-judged` (too few events to
    /// tell), `engine-bound` (the tool did not keep the schedule), `incomplete` or `failed`
    /// (every operation failed). Exits 0 when complete, 1 when
    /// interrupted or when every operation failed, 2 when it could not run, 4 with
    /// `--require-valid` when the verdict is not `valid`.
    Run(crate::commands::run::RunArgs),
    /// Remove the leftovers of a crashed or interrupted run (only objects in its ledger; or,
    /// on kube without the run directory, `--run-id`: only objects with its run label).
    Cleanup(CleanupArgs),
    /// Copy run directories off the claim an in-cluster run (deploy/kustomize) wrote them to:
    /// a pod of the cnsreplay image mounts it and `pack` is exec'd in it.
    Fetch(crate::commands::fetch::FetchArgs),
    /// Write a directory (a run directory) as a tar archive to stdout.
    Pack(crate::commands::fetch::PackArgs),
    /// Wait for SIGTERM: the process of `fetch`'s pod.
    #[command(hide = true)]
    Idle,
    /// Merge the run directories of one split trace (`trace split`, `run --start-at`) into one
    /// for `analyze`: every record on the earliest run's clock, each marker once.
    MergeRuns(MergeRunsArgs),
    /// Generate a trace from a workload model (`synth MODEL -o OUT`), or fit lifetimes (`synth fit`).
    Synth(crate::commands::synth::SynthArgs),
    /// Replay a trace at several speeds or rates into SWEEPDIR/<speed>/ (for `analyze capacity`).
    Sweep(crate::commands::sweep::SweepArgs),
    /// Find the maximum sustainable rate: step up, then bisect the intensity (speed of a trace,
    /// target rate of a synth model) against SLOs, with repeats near the limit.
    #[cfg(feature = "analyze")]
    Capacity(crate::commands::capacity::CapacityArgs),
    /// Analyze run directories: summary, compare, capacity, qos, report, export.
    #[cfg(feature = "analyze")]
    Analyze(crate::commands::analyze::AnalyzeArgs),
    /// Trace tools: `slice` a time window (e.g. the busiest minute) into a trace that replays;
    /// `rewrite` (alias `scale`, `map`) its pace and the cluster names it uses.
    Trace(TraceArgs),
    /// Print a shell completion script.
    Completions(CompletionsArgs),
    /// Print the man page (roff), or write one page per command into a directory.
    Man(ManArgs),
    /// Print the JSON Schema of a command's `--json` output.
    #[command(hide = true)]
    JsonSchema(JsonSchemaArgs),
}
