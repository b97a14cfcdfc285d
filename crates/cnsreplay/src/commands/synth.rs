//! `cnsreplay synth`: generate a trace from a workload model, or fit a lifetime model to data.
//!
//! Shape: `cnsreplay synth MODEL -o OUT …` generates (also spelled `synth gen MODEL …`);
//! `cnsreplay synth fit DATA` fits. A subcommand name wins over a model path, so a model file
//! literally named `fit` must be written `./fit`. The library (`synth`) returns data; this
//! module prints it, as a table or as JSON (schemas: `docs/schemas/synth.schema.json` and
//! `docs/schemas/synth-fit.schema.json`, printed by the hidden `json-schema synth|synth-fit`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use schemars::JsonSchema;
use serde::Serialize;
use synth::data::Objects;
use synth::{Derivation, Model, Observation, Options, Plan, Target};
use trace_format::{Encoding, TraceWriter};

use crate::commands::args::EncodingArg;
use crate::output::Output;

/// `synth`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct SynthArgs {
    /// `gen` (the default when a model is given), `fit`.
    #[command(subcommand)]
    pub command: Option<SynthCommand>,
    /// Generation arguments when no subcommand is given.
    #[command(flatten)]
    pub generate: GenArgs,
}

/// `synth` subcommands.
#[derive(Debug, Subcommand)]
pub enum SynthCommand {
    /// Generate a trace from a model (the same as `synth MODEL …`).
    Gen(GenArgs),
    /// Fit lifetime distributions to a lifetime CSV or a trace and print the best as YAML.
    Fit(FitArgs),
}

/// `synth [gen]`.
#[derive(Debug, Args)]
pub struct GenArgs {
    /// The workload model (YAML, see docs/synth.md). May be left out with `--preset`: a
    /// cluster of 30 containers per host with 1 GiB volumes is assumed.
    pub model: Option<PathBuf>,
    /// Output trace; the encoding follows the name (.yaml, .jsonl, .cnsbin) unless `--to`.
    #[arg(short, long, required_unless_present = "dry_run")]
    pub output: Option<PathBuf>,
    /// Generate without writing a file: print how many events and bytes the trace would have
    /// (encoding from `-o` or `--to`, else binary).
    #[arg(long)]
    pub dry_run: bool,
    /// Stop with an error once the trace would exceed this many events (nothing is left
    /// behind). 0 = no limit.
    #[arg(long, default_value_t = 500_000_000)]
    pub max_events: u64,
    /// Output encoding.
    #[arg(long, value_enum)]
    pub to: Option<EncodingArg>,
    /// Random seed (default: the model's `seed`, else 0). Same model + seed ⇒ same bytes.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Duration after the warm-up, e.g. `1h`, `90s` (default: the model's).
    #[arg(long, value_parser = crate::commands::args::parse_duration)]
    pub duration: Option<u64>,
    /// Solve the cluster size for an operation rate, e.g. `attach=100/s` (Little's law).
    #[arg(long)]
    pub target: Option<Target>,
    /// Replace the model's lifetime distribution with a preset: sysdig-2019,
    /// alibaba-k8s-pods, azure-functions-2019, datadog-2018.
    #[arg(long)]
    pub preset: Option<String>,
    /// Print the summary as JSON (schema: docs/schemas/synth.schema.json).
    #[arg(long)]
    pub json: bool,
}

/// `synth fit`.
#[derive(Debug, Args)]
pub struct FitArgs {
    /// A CSV (`lifetime_s[,censored]` header), a pod lifecycle CSV (header naming
    /// `creation_time` and `deletion_time`), or a trace (.yaml, .jsonl, .cnsbin).
    pub data: PathBuf,
    /// From a trace, fit workload (attach → detach) or volume (create → delete) lifetimes.
    #[arg(long, value_enum, default_value_t = ObjectsArg::Workloads)]
    pub objects: ObjectsArg,
    /// Write the best fit as a model snippet (`lifetime: …`) to this file.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Print the report as JSON (schema: docs/schemas/synth-fit.schema.json).
    #[arg(long)]
    pub json: bool,
}

/// Which lifetimes to take from a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ObjectsArg {
    /// Workloads: attach → detach / abort_workload.
    Workloads,
    /// Volumes: create_volume → delete_volume.
    Volumes,
}

/// `synth --json`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SynthReport {
    /// The output file.
    pub output: String,
    /// Its encoding.
    pub encoding: String,
    /// The seed used.
    pub seed: u64,
    /// Events written.
    pub events: u64,
    /// Time of the last event, ns.
    pub duration_ns: u64,
    /// Hosts in the cluster.
    pub hosts: u32,
    /// Mean container lifetime, seconds.
    pub mean_lifetime_s: f64,
    /// Containers started (the initial population included).
    pub containers: u64,
    /// Containers alive at the start (steady state).
    pub initial_containers: u64,
    /// Volumes created by events.
    pub volumes_created: u64,
    /// Pre-existing volumes declared in the header.
    pub volumes_declared: u64,
    /// Container volumes taken from the reuse pool.
    pub pool_reuses: u64,
    /// Bytes of the encoded trace (what `--dry-run` would have written; the file's size
    /// otherwise).
    pub bytes: u64,
    /// Whether this was a `--dry-run` (no file written).
    pub dry_run: bool,
    /// How the cluster size was solved, with `--target`.
    pub derivation: Option<Derivation>,
}

const DEFAULT_MODEL: &str = "\
cluster:
  containers_per_host: {preset: containers-per-host-2019}
lifetime: {preset: sysdig-2019}
volumes:
  size: 1Gi
";

/// Bad input (model, data) exits 1; anything else is an error (exit 2).
pub(crate) fn input_problem(e: &synth::Error) -> bool {
    matches!(
        e,
        synth::Error::Model { .. }
            | synth::Error::Invalid { .. }
            | synth::Error::Data { .. }
            | synth::Error::Fit(_)
            | synth::Error::Target(_)
    )
}

fn fail(e: synth::Error) -> anyhow::Result<ExitCode> {
    if input_problem(&e) {
        tracing::error!("{e}");
        Ok(ExitCode::from(1))
    } else {
        Err(e.into())
    }
}

pub(crate) fn run(a: &SynthArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    match &a.command {
        None => generate(&a.generate, out),
        Some(SynthCommand::Gen(g)) => generate(g, out),
        Some(SynthCommand::Fit(f)) => fit(f, out),
    }
}

/// Counts the bytes written through it (for `--dry-run`).
struct Counter(std::sync::Arc<std::sync::atomic::AtomicU64>);

impl Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .fetch_add(buf.len() as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn generate(a: &GenArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let dry = PathBuf::new();
    let output = match &a.output {
        Some(o) => o,
        None if a.dry_run => &dry,
        None => anyhow::bail!("give the output file with -o"),
    };
    let (model, file) = match &a.model {
        Some(p) => match Model::load(p) {
            Ok(m) => (m, p.display().to_string()),
            Err(e) => return fail(e),
        },
        None if a.preset.is_some() => match Model::parse(DEFAULT_MODEL, "<default model>") {
            Ok(m) => (m, "<default model>".to_owned()),
            Err(e) => return Err(e.into()),
        },
        None => anyhow::bail!("give a MODEL file, or --preset to use the default cluster"),
    };
    let opts = Options {
        seed: a.seed,
        duration: a.duration,
        target: a.target,
        preset: a.preset.clone(),
    };
    let plan = match Plan::new(model, &file, &opts) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let encoding = match a.to {
        Some(e) => Encoding::from(e),
        None if a.dry_run && a.output.is_none() => Encoding::Binary,
        None => Encoding::from_path(output).with_context(|| {
            format!(
                "cannot tell the encoding of {}; use a .yaml, .jsonl or .cnsbin name or --to",
                output.display()
            )
        })?,
    };
    let derivation = plan.derivation().cloned();
    let hosts = plan.model().cluster.hosts;
    let mean = plan.lifetime().mean();
    if let Some(d) = &derivation
        && !a.json
    {
        write_derivation(d, out)?;
    }
    let max = (a.max_events > 0).then_some(a.max_events);
    // The model is an input too: `-o MODEL` must not overwrite it.
    let model_path = a.model.as_deref();
    let dest = if a.dry_run {
        None
    } else {
        Some(Output::create(output, model_path.as_slice())?)
    };
    let bytes = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let summary = (|| {
        let g = synth::Generator::new(plan);
        let w = match &dest {
            None => TraceWriter::new(Counter(bytes.clone()), encoding, g.header())?,
            Some(o) => TraceWriter::new(
                o.file().map_err(std::io::Error::other)?,
                encoding,
                g.header(),
            )?,
        };
        synth::write_limited(g, w, max)
    })();
    let summary = match summary {
        Ok(s) => s,
        Err(e) => {
            drop(dest);
            if let synth::Error::TooManyEvents { .. } = e {
                tracing::error!("{e}");
                return Ok(ExitCode::from(1));
            }
            return Err(e).with_context(|| format!("cannot write {}", output.display()));
        }
    };
    let bytes = match dest {
        None => bytes.load(std::sync::atomic::Ordering::Relaxed),
        Some(o) => {
            o.commit()?;
            fs_err::metadata(output)?.len()
        }
    };
    let c = summary.counts;
    let report = SynthReport {
        output: output.display().to_string(),
        encoding: encoding.name().to_owned(),
        seed: summary.seed,
        events: summary.events,
        duration_ns: summary.duration_ns,
        hosts,
        mean_lifetime_s: mean,
        containers: c.containers,
        initial_containers: c.initial_containers,
        volumes_created: c.volumes_created,
        volumes_declared: c.volumes_declared,
        pool_reuses: c.pool_reuses,
        bytes,
        dry_run: a.dry_run,
        derivation,
    };
    if a.json {
        serde_json::to_writer_pretty(&mut *out, &report)?;
        writeln!(out)?;
    } else {
        let label = match (a.dry_run, &a.output) {
            (false, _) => report.output.clone(),
            (true, Some(o)) => format!("dry run for {}", o.display()),
            (true, None) => "dry run".to_owned(),
        };
        writeln!(
            out,
            "{label}: {} events over {} ({} encoding, {} bytes, seed {})",
            report.events,
            trace_format::units::fmt_secs(report.duration_ns),
            report.encoding,
            report.bytes,
            report.seed
        )?;
        writeln!(
            out,
            "{} hosts, {} containers ({} alive at the start), mean lifetime {:.1} s",
            report.hosts, report.containers, report.initial_containers, report.mean_lifetime_s
        )?;
        writeln!(
            out,
            "{} volumes created, {} declared in the header, {} pool reuses",
            report.volumes_created, report.volumes_declared, report.pool_reuses
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

fn write_derivation(d: &Derivation, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "target {}={}/s, solved with Little's law:",
        d.op, d.target_rate
    )?;
    for s in &d.steps {
        writeln!(out, "  {s}")?;
    }
    writeln!(out)
}

/// What `synth fit` was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DataKind {
    /// `lifetime_s[,censored]`.
    LifetimeCsv,
    /// A pod lifecycle CSV: a header naming `creation_time` and `deletion_time`.
    PodCsv,
    /// A trace.
    Trace,
}

fn data_kind(path: &Path) -> anyhow::Result<DataKind> {
    let is_csv_name = path.extension().is_some_and(|e| e == "csv");
    if !is_csv_name && Encoding::from_path(path).is_some() {
        return Ok(DataKind::Trace);
    }
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(fs_err::File::open(path)?),
        &mut first,
    )?;
    let first = first.trim_start();
    if first.starts_with("lifetime_s") {
        return Ok(DataKind::LifetimeCsv);
    }
    let cols: Vec<&str> = first.trim_end().split(',').map(str::trim).collect();
    if cols.contains(&"creation_time") && cols.contains(&"deletion_time") {
        return Ok(DataKind::PodCsv);
    }
    // Other CSVs go to the lifetime reader, whose error names the line.
    Ok(if is_csv_name {
        DataKind::LifetimeCsv
    } else {
        DataKind::Trace
    })
}

/// Lifetimes from a pod lifecycle CSV (strict: the first bad row is the error).
fn pod_observations(path: &Path) -> anyhow::Result<Vec<Observation>> {
    let (pods, _) = import::pods::read_lifetimes(path, &import::Policy::default())?;
    Ok(pods
        .iter()
        .map(|p| Observation {
            value_s: p.duration_ns as f64 / 1e9,
            censored: p.censored,
        })
        .collect())
}

fn fit(a: &FitArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    // Opened first: `-o DATA` is refused before the work.
    let dest = a
        .output
        .as_deref()
        .map(|o| Output::create(o, &[&a.data]))
        .transpose()?;
    let obs = match data_kind(&a.data)? {
        DataKind::LifetimeCsv => synth::data::read_csv(&a.data),
        DataKind::PodCsv => match pod_observations(&a.data) {
            Ok(o) => Ok(o),
            Err(e) => {
                tracing::error!("{e:#}");
                return Ok(ExitCode::from(1));
            }
        },
        DataKind::Trace => {
            let objects = match a.objects {
                ObjectsArg::Workloads => Objects::Workloads,
                ObjectsArg::Volumes => Objects::Volumes,
            };
            synth::data::read_trace(&a.data, objects)
        }
    };
    let obs = match obs {
        Ok(o) => o,
        Err(e) => return fail(e),
    };
    let report = match synth::fit(&obs) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    if let Some(o) = dest {
        o.file()?.write_all(report.yaml.as_bytes())?;
        o.commit()?;
    }
    if a.json {
        serde_json::to_writer_pretty(&mut *out, &report)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "{}: {} observations, {} censored; KS critical value {:.5} (α = 0.05){}",
        a.data.display(),
        report.observations,
        report.censored,
        report.ks_critical,
        if report.fits {
            ""
        } else {
            ": no family fits, the empirical curve is written"
        }
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "{:<12} {:>14} {:>10} {:>12} {:>5} {:>12}  parameters",
        "family", "log-lik", "AIC", "KS", "fits", "mean (s)"
    )?;
    for c in &report.candidates {
        let params: Vec<String> = c
            .params
            .iter()
            .map(|(k, v)| format!("{k}={v:.6}"))
            .collect();
        writeln!(
            out,
            "{:<12} {:>14.3} {:>10.1} {:>12.5} {:>5} {:>12}  {}",
            c.family,
            c.log_likelihood,
            c.aic,
            c.ks_distance,
            if c.passes { "yes" } else { "no" },
            c.mean_s
                .map_or_else(|| "∞".to_owned(), |m| format!("{m:.3}")),
            params.join(" ")
        )?;
    }
    for (f, why) in &report.skipped {
        writeln!(out, "{f:<12} skipped: {why}")?;
    }
    writeln!(out)?;
    write!(out, "{}", report.yaml)?;
    Ok(ExitCode::SUCCESS)
}
