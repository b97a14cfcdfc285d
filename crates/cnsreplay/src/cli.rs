//! Command-line definitions.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use trace_format::Encoding;

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
    /// types; the tool's delay is too large against the others' latencies), `not-judged` (too
    /// few events to tell), `engine-bound` (the tool limited it), `incomplete` or `failed`
    /// (every operation failed). Exits 0 when complete, 1 when
    /// interrupted or when every operation failed, 2 when it could not run, 4 with
    /// `--require-valid` when the verdict is not `valid`.
    Run(crate::commands::run::RunArgs),
    /// Remove the leftovers of a crashed or interrupted run (only objects in its ledger; or,
    /// on kube without the run directory, `--run-id`: only objects with its run label).
    Cleanup(crate::commands::run::CleanupArgs),
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

/// Which encoding to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EncodingArg {
    /// YAML.
    Yaml,
    /// JSON Lines.
    Jsonl,
    /// Binary (`.cnsbin`).
    Binary,
}

impl From<EncodingArg> for Encoding {
    fn from(e: EncodingArg) -> Self {
        match e {
            EncodingArg::Yaml => Encoding::Yaml,
            EncodingArg::Jsonl => Encoding::Jsonl,
            EncodingArg::Binary => Encoding::Binary,
        }
    }
}

/// Input trace options shared by the reading commands.
#[derive(Debug, Args)]
pub struct InputArgs {
    /// The trace file (`-` for stdin).
    pub file: PathBuf,
    /// Input encoding; by default from the file name (.yaml, .jsonl, .cnsbin), else sniffed.
    #[arg(long, value_enum)]
    pub from: Option<EncodingArg>,
}

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

/// `convert`.
#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// The inputs (`-` for stdin, trace encodings only). Several inputs are merged by time
    /// where the format allows it (msr, alibaba, tencent, k8s-audit, blktrace per-CPU files).
    #[arg(required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Input format; by default a trace encoding from the name (.yaml, .jsonl, .cnsbin) or
    /// content. `auto` sniffs every input and says what it chose.
    #[arg(long, value_enum)]
    pub from: Option<Format>,
    /// Output file (`-` for stdout). Written to a temporary name and renamed when complete.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Output format; by default the trace encoding implied by the output file name.
    #[arg(long, value_enum)]
    pub to: Option<OutFormat>,
    /// Importing: skip malformed lines (counted and the first few reported) instead of
    /// stopping at the first.
    #[arg(long)]
    pub skip_bad: bool,
    /// Importing alibaba: the `device_size.csv` file giving each device's capacity.
    #[arg(long, value_name = "FILE")]
    pub device_sizes: Option<PathBuf>,
    /// Importing k8s-audit: keep failed requests (code >= 400) instead of dropping them.
    #[arg(long)]
    pub keep_failed: bool,
    /// Importing k8s-audit: how far a request may be out of order in its file (an API server
    /// logs requests as they complete, stamped when received); one further back is bad input.
    #[arg(long, value_name = "DUR", default_value = "120s", value_parser = parse_duration)]
    pub reorder_window: u64,
    /// Importing k8s-audit: how long an attach waits for its pod's binding and its volumes'
    /// VolumeAttachments to report attached (its observed time) before it is written without.
    #[arg(long, value_name = "DUR", default_value = "10m", value_parser = parse_duration)]
    pub attach_horizon: u64,
    /// Skip the check of what is converted (`validate`'s checker, in the same pass: a trace
    /// read, or the trace an import makes) for an input checked already.
    #[arg(long)]
    pub no_check: bool,
}

/// Formats `convert` writes: the trace encodings and fio's iolog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutFormat {
    /// A YAML trace.
    Yaml,
    /// A JSON Lines trace.
    Jsonl,
    /// A binary trace (`.cnsbin`).
    Binary,
    /// A fio version 3 iolog of the trace's `io` events, for `fio --read_iolog`.
    FioIolog,
}

impl From<OutFormat> for Format {
    fn from(f: OutFormat) -> Self {
        match f {
            OutFormat::Yaml => Format::Yaml,
            OutFormat::Jsonl => Format::Jsonl,
            OutFormat::Binary => Format::Binary,
            OutFormat::FioIolog => Format::FioIolog,
        }
    }
}

/// A duration flag (`90s`, `1h`, `250ms`) in nanoseconds.
pub fn parse_duration(s: &str) -> Result<u64, String> {
    trace_format::units::parse_duration(s).map_err(|e| e.to_string())
}

/// Formats `convert` reads and writes: the trace encodings, and foreign formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A YAML trace.
    Yaml,
    /// A JSON Lines trace.
    Jsonl,
    /// A binary trace (`.cnsbin`).
    Binary,
    /// fio iolog, version 2 or 3 (`--write_iolog`); written as version 3 for `--read_iolog`.
    FioIolog,
    /// blktrace binary per-CPU files: give the NAME prefix or any `NAME.blktrace.N` file.
    Blktrace,
    /// blkparse text output in its default format.
    Blkparse,
    /// MSR Cambridge block CSV.
    Msr,
    /// Alibaba block-trace CSV (see --device-sizes).
    Alibaba,
    /// Tencent CBS block CSV.
    Tencent,
    /// Kubernetes audit log (audit.k8s.io/v1 JSON lines; GKE and AKS wrappers).
    #[value(name = "k8s-audit")]
    K8sAudit,
    /// Pod lifecycle CSV (Alibaba GPU 2023 pod list, or name,creation_time,deletion_time).
    PodCsv,
    /// Sniff each input's format (import formats and trace encodings).
    Auto,
}

impl Format {
    /// The trace encoding, if this is one.
    pub fn encoding(self) -> Option<Encoding> {
        match self {
            Format::Yaml => Some(Encoding::Yaml),
            Format::Jsonl => Some(Encoding::Jsonl),
            Format::Binary => Some(Encoding::Binary),
            _ => None,
        }
    }
}

/// `completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write `cnsreplay.1` and one page per command into this directory instead of stdout.
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// `json-schema`.
#[derive(Debug, Args)]
pub struct JsonSchemaArgs {
    /// The command whose output schema to print.
    #[arg(value_enum)]
    pub command: SchemaFor,
}

/// Commands with a `--json` output; each schema is committed as
/// `docs/schemas/<value name>.schema.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchemaFor {
    /// `validate --json`.
    Validate,
    /// `stats --json`.
    Stats,
    /// `synth --json`.
    Synth,
    /// `synth fit --json`.
    SynthFit,
    /// `run --json`.
    Run,
    #[cfg(feature = "analyze")]
    /// `analyze summary --json`.
    AnalyzeSummary,
    #[cfg(feature = "analyze")]
    /// `analyze compare --json`.
    AnalyzeCompare,
    #[cfg(feature = "analyze")]
    /// `analyze capacity --json`.
    AnalyzeCapacity,
    #[cfg(feature = "analyze")]
    /// `analyze qos --json`.
    AnalyzeQos,
    #[cfg(feature = "analyze")]
    /// `capacity --json`.
    Capacity,
    /// `trace slice --json`.
    TraceSlice,
    /// `trace rewrite --json`.
    TraceRewrite,
    /// `trace merge --json`.
    TraceMerge,
    /// `trace split --json`.
    TraceSplit,
}

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

/// `trace`.
#[derive(Debug, Args)]
pub struct TraceArgs {
    /// The tool.
    #[command(subcommand)]
    pub tool: TraceTool,
}

/// The trace tools.
#[derive(Debug, Subcommand)]
pub enum TraceTool {
    /// Cut a time window out of a trace: events in [START, END) shifted to start at 0, volumes
    /// alive and workloads running at the cut declared in the header, events needing a
    /// snapshot taken before the window dropped and counted; optionally only some tenants or op types
    /// (docs/trace-format.md, Trace tools).
    Slice(SliceArgs),
    /// Rewrite a trace for the cluster it will meet: times divided by `--speed K`, names
    /// replaced by `--map KIND:FROM=TO` (storage-class, snapshot-class, node, tenant);
    /// streaming, lossless where nothing was asked to change.
    #[command(visible_aliases = ["scale", "map"])]
    Rewrite(RewriteArgs),
    /// Merge traces onto one clock: each input's volumes, workloads and snapshots prefixed
    /// (`t1-`, `t2-`, … or `--prefix`), cluster names shared, header defaults the inputs
    /// disagree on written into their events, ids renumbered in merged order; streaming.
    Merge(MergeArgs),
    /// Split a trace into parts for several drivers started on one instant (`run
    /// --start-at`): by tenant (DIR/TENANT.EXT, or DIR/part-K.EXT with --parts) or by lineage
    /// (a volume with its snapshots, restores, clones and the workloads mounting it in one
    /// part; DIR/part-K.EXT); each part with its events, the declared objects they use and
    /// every marker; ids and times kept. The trace is checked in the first pass.
    Split(SplitArgs),
}

/// `trace split`.
#[derive(Debug, Args)]
pub struct SplitArgs {
    /// The trace (read twice: a file, not a pipe).
    pub input: PathBuf,
    /// Output directory (created); one trace per part in it.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Encoding of the parts.
    #[arg(long, value_enum, default_value = "binary")]
    pub to: EncodingArg,
    /// What a part keeps together: each tenant's events, or each lineage's (objects joined
    /// by the events naming them together). Default: tenant when the trace has two or more
    /// tenants that share no object (and at least --parts of them), else lineage.
    #[arg(long, value_enum)]
    pub by: Option<SplitBy>,
    /// Number of parts, the tenants or lineages balanced over them by their events; refused
    /// when the trace has fewer. Default: one part per tenant; a split by lineage needs it.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub parts: Option<u32>,
    /// Skip the check of the trace in the first pass (`validate`'s checker) for a trace
    /// checked already.
    #[arg(long)]
    pub no_check: bool,
    /// Print the report as JSON (schema: docs/schemas/trace-split.schema.json).
    #[arg(long)]
    pub json: bool,
}

/// `trace split --by`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SplitBy {
    /// Each tenant's events in one part (refused when two tenants use one object).
    Tenant,
    /// Each lineage's events in one part.
    Lineage,
}

/// `trace merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The traces (two or more; `-` for at most one of them).
    #[arg(required = true, num_args = 2..)]
    pub inputs: Vec<PathBuf>,
    /// Output trace (encoding from its name: .yaml, .jsonl, .cnsbin).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Prefix of each input's objects, in input order (repeatable; default `t1-`, `t2-`, …).
    #[arg(long, value_name = "PREFIX")]
    pub prefix: Vec<String>,
    /// Put the inputs on one clock by their start (all at 0) or by their header origins.
    #[arg(long, value_enum, default_value = "start")]
    pub align: AlignArg,
    /// Print the report as JSON (schema: docs/schemas/trace-merge.schema.json).
    #[arg(long)]
    pub json: bool,
}

/// `trace merge --align`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AlignArg {
    /// Every input starts at 0.
    Start,
    /// By the header origins: the earliest starts at 0 (each input needs one).
    Origin,
}

/// `trace rewrite`.
#[derive(Debug, Args)]
pub struct RewriteArgs {
    /// The trace.
    #[command(flatten)]
    pub input: InputArgs,
    /// Output trace (encoding from its name: .yaml, .jsonl, .cnsbin).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Compress the trace by this factor (2 = twice as fast): every event time and every
    /// `io_phase` duration is divided by it, as `run --speed` does.
    #[arg(long, value_name = "K")]
    pub speed: Option<f64>,
    /// What `--speed` does to `io_phase` open-loop rates: `keep` them or `scale` them by K.
    #[arg(long, value_enum, default_value_t = IoRateArg::Keep, requires = "speed")]
    pub io_rate: IoRateArg,
    /// Replace a name: `storage-class:gold=fast`, `snapshot-class:a=b`, `node:n1=worker-7`,
    /// `tenant:prod=bench` (or `namespace:`); repeatable.
    #[arg(long = "map", value_name = "KIND:FROM=TO")]
    pub maps: Vec<String>,
    /// Skip the check of the trace as it is read (`validate`'s checker, same pass) for a
    /// trace checked already.
    #[arg(long)]
    pub no_check: bool,
    /// Print the report as JSON (schema: docs/schemas/trace-rewrite.schema.json).
    #[arg(long)]
    pub json: bool,
}

/// `trace slice`.
#[derive(Debug, Args)]
pub struct SliceArgs {
    /// The trace.
    #[command(flatten)]
    pub input: InputArgs,
    /// Output trace (encoding from its name: .yaml, .jsonl, .cnsbin).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Window start, trace time (e.g. `90s`, `1h`).
    #[arg(long, value_name = "DURATION", conflicts_with = "busiest")]
    pub start: Option<String>,
    /// Window end (exclusive), trace time; default: the end of the trace.
    #[arg(long, value_name = "DURATION", conflicts_with = "busiest")]
    pub end: Option<String>,
    /// Instead of START/END: the window of this length holding the most events.
    #[arg(long, value_name = "DURATION")]
    pub busiest: Option<String>,
    /// Keep only this tenant's events (the event's tenant, else the header's default
    /// namespace); repeatable. Events needing an object a left-out event made are dropped
    /// and counted too.
    #[arg(long, value_name = "TENANT")]
    pub tenant: Vec<String>,
    /// Keep only events of this op type (`io`, `attach`, …); repeatable, as `--tenant`.
    #[arg(long = "op", value_name = "OP")]
    pub ops: Vec<String>,
    /// Skip the check of the trace (`validate`'s checker, in the same pass, then on to the
    /// trace's end) for a trace checked already.
    #[arg(long)]
    pub no_check: bool,
    /// Print the report as JSON (schema: docs/schemas/trace-slice.schema.json).
    #[arg(long)]
    pub json: bool,
}

/// What a speed factor does to an `io_phase`'s open-loop rate
/// ([`trace_format::rewrite::IoRate`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum IoRateArg {
    /// Keep the trace's rate for the compressed duration.
    #[default]
    Keep,
    /// Multiply the rate by the speed factor.
    Scale,
}

impl From<IoRateArg> for trace_format::rewrite::IoRate {
    fn from(a: IoRateArg) -> Self {
        match a {
            IoRateArg::Keep => Self::Keep,
            IoRateArg::Scale => Self::Scale,
        }
    }
}
