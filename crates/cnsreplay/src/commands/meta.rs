//! Completions, man pages and output schemas: the binary documents itself.

use std::io::Write;
use std::process::ExitCode;

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use crate::report::{StatsReport, ValidateReport};

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
    /// `analyze history --json`.
    AnalyzeHistory,
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

/// `completions`; `cmd` is the whole command line (`Cli::command()`).
pub(crate) fn completions(
    a: &CompletionsArgs,
    mut cmd: clap::Command,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    // clap_complete panics on a failed write: render into memory, then write.
    let mut buf = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "cnsreplay", &mut buf);
    out.write_all(&buf)?;
    Ok(ExitCode::SUCCESS)
}

/// `man`; `cmd` is the whole command line (`Cli::command()`).
pub(crate) fn man(
    a: &ManArgs,
    cmd: clap::Command,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    match &a.dir {
        None => clap_mangen::Man::new(cmd).render(out)?,
        Some(dir) => {
            fs_err::create_dir_all(dir)?;
            let mut cmd = cmd.disable_help_subcommand(true);
            cmd.build();
            man_pages(cmd, dir)?;
            tracing::info!("man pages written to {}", dir.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A page per command and subcommand (as `clap_mangen::generate_to` writes them), each
/// through an [`Output`](crate::output::Output).
fn man_pages(cmd: clap::Command, dir: &std::path::Path) -> anyhow::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
        man_pages(sub, dir)?;
    }
    let man = clap_mangen::Man::new(cmd);
    let mut page = Vec::new();
    man.render(&mut page)?;
    crate::output::write(&dir.join(man.get_filename()), &[], &page)
}

/// The JSON Schema of a command's `--json` output, pretty-printed with a final newline.
pub fn schema_text(which: SchemaFor) -> String {
    let schema = match which {
        SchemaFor::Validate => schemars::schema_for!(ValidateReport),
        SchemaFor::Stats => schemars::schema_for!(StatsReport),
        SchemaFor::Synth => schemars::schema_for!(crate::commands::synth::SynthReport),
        SchemaFor::SynthFit => schemars::schema_for!(synth::FitReport),
        SchemaFor::Run => schemars::schema_for!(replay::Summary),
        #[cfg(feature = "analyze")]
        SchemaFor::AnalyzeSummary => schemars::schema_for!(analyze::summary::SummaryReport),
        #[cfg(feature = "analyze")]
        SchemaFor::AnalyzeCompare => schemars::schema_for!(analyze::CompareReport),
        #[cfg(feature = "analyze")]
        SchemaFor::AnalyzeCapacity => schemars::schema_for!(analyze::CapacityReport),
        #[cfg(feature = "analyze")]
        SchemaFor::AnalyzeQos => schemars::schema_for!(analyze::QosReport),
        #[cfg(feature = "analyze")]
        SchemaFor::AnalyzeHistory => schemars::schema_for!(analyze::history::HistoryReport),
        #[cfg(feature = "analyze")]
        SchemaFor::Capacity => {
            schemars::schema_for!(crate::commands::capacity::CapacitySearchReport)
        }
        SchemaFor::TraceSlice => schemars::schema_for!(trace_format::slice::SliceReport),
        SchemaFor::TraceRewrite => schemars::schema_for!(trace_format::rewrite::RewriteReport),
        SchemaFor::TraceMerge => schemars::schema_for!(trace_format::merge::MergeReport),
        SchemaFor::TraceSplit => schemars::schema_for!(trace_format::split::SplitReport),
    };
    let mut s = serde_json::to_string_pretty(&schema).unwrap_or_default();
    s.push('\n');
    s
}

pub(crate) fn json_schema(a: &JsonSchemaArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    out.write_all(schema_text(a.command).as_bytes())?;
    Ok(ExitCode::SUCCESS)
}
