//! `cnsreplay sweep TRACE --provider … --speeds 0.5,1,2 -o SWEEPDIR`: the same trace replayed
//! at several intensities, one run directory per intensity (`SWEEPDIR/<speed>/`), through the
//! very `run` command (same provider flags, same engine entry point). `--rates` gives target
//! event rates instead; each becomes the speed that offers it (rate ÷ the trace's own mean
//! rate). `cnsreplay analyze capacity SWEEPDIR` reads the result.
//!
//! A sweep may add points to an existing SWEEPDIR, only of the same trace on the same provider
//! and setup (`replay::identity`, purpose `Points`) and only at speeds it has no run of yet:
//! both are checked before the first point runs, against the runs already there.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use replay::{Purpose, RunDir, RunIdentity};
use trace_format::TraceReader;

use crate::commands::run::{ProviderArgs, ProviderKind, RunArgs};

/// `sweep`.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// The trace to replay.
    pub trace: PathBuf,
    /// The provider.
    #[arg(long, value_enum)]
    pub provider: ProviderKind,
    /// Sweep directory to create; each run goes to `SWEEPDIR/<speed>/`.
    #[arg(short, long = "output", value_name = "SWEEPDIR")]
    pub output: PathBuf,
    /// Replay speeds, comma-separated (e.g. `0.5,1,1.5,2`).
    #[arg(
        long,
        value_delimiter = ',',
        required_unless_present = "rates",
        conflicts_with = "rates"
    )]
    pub speeds: Vec<f64>,
    /// Target rates in events per second, comma-separated (turned into speeds).
    #[arg(long, value_delimiter = ',')]
    pub rates: Vec<f64>,
    /// Engine and provider settings, as for `run`.
    #[command(flatten)]
    pub settings: ProviderArgs,
}

/// The trace's mean event rate: (events − 1) per second of trace span.
fn trace_rate(trace: &PathBuf) -> anyhow::Result<f64> {
    let (mut n, mut first, mut last) = (0u64, None, 0u64);
    for ev in TraceReader::open(trace)?.events() {
        let ev = ev?;
        n += 1;
        first.get_or_insert(ev.at);
        last = ev.at;
    }
    let span = last.saturating_sub(first.unwrap_or(0));
    if n < 2 || span == 0 {
        bail!(
            "{}: needs two or more events at different times for --rates",
            trace.display()
        );
    }
    Ok((n - 1) as f64 / (span as f64 / 1e9))
}

pub(crate) fn run(a: &SweepArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let speeds: Vec<f64> = if a.rates.is_empty() {
        a.speeds.clone()
    } else {
        let natural = trace_rate(&a.trace)?;
        a.rates.iter().map(|r| r / natural).collect()
    };
    if let Some(s) = speeds.iter().find(|s| !(s.is_finite() && **s > 0.0)) {
        bail!("speed {s} is not positive");
    }
    if crate::commands::precheck::check(&a.trace)?.is_none() {
        return Ok(ExitCode::from(crate::EXIT_INPUT));
    }
    crate::output::refuse_inputs(&a.output, &[&a.trace])?;
    let dirs: Vec<PathBuf> = speeds
        .iter()
        .map(|s| a.output.join(format!("{}", (s * 1e6).round() / 1e6)))
        .collect();
    for (i, d) in dirs.iter().enumerate() {
        if dirs[..i].contains(d) {
            bail!("speed {} is given twice (as {})", speeds[i], d.display());
        }
    }
    if a.output.exists() {
        check_existing(a, &speeds, &dirs)?;
    }
    fs_err::create_dir_all(&a.output)?;
    let mut code = ExitCode::SUCCESS;
    for (&speed, dir) in speeds.iter().zip(&dirs) {
        let dir = dir.clone();
        let args = RunArgs::point(
            a.trace.clone(),
            a.provider,
            dir.clone(),
            speed,
            a.settings.clone(),
        );
        let mut sink = Vec::new();
        let c = crate::commands::run::run(&args, &mut sink)
            .with_context(|| format!("sweep run at speed {speed}"))?;
        if c != ExitCode::SUCCESS {
            code = ExitCode::from(1);
        }
        let s = RunDir::open(&dir).summary()?;
        writeln!(
            out,
            "speed {speed}: {} events, {:.1} ops/s, {} failed, state {} → {}",
            s.dispatched,
            s.ops_per_second,
            s.failed,
            s.state,
            dir.display()
        )?;
    }
    Ok(code)
}

/// The provider's name and configuration as a run with these settings records them
/// (`manifest.provider`), without starting it.
pub(crate) fn provider_setup(
    kind: ProviderKind,
    settings: &ProviderArgs,
) -> anyhow::Result<(&'static str, serde_json::Value)> {
    use crate::commands::run::{kube_config, local_config, sim_config};
    Ok(match kind {
        ProviderKind::Sim => ("sim", serde_json::to_value(sim_config(settings)?)?),
        ProviderKind::Noop => ("noop", serde_json::json!({})),
        ProviderKind::Local => ("local", serde_json::to_value(local_config(settings)?)?),
        ProviderKind::Kube => ("kube", serde_json::to_value(kube_config(settings)?)?),
    })
}

/// Before anything runs: the points this sweep adds (`dirs`, one per speed) must be new, and
/// of the trace, provider and setup of the runs already in SWEEPDIR.
fn check_existing(a: &SweepArgs, speeds: &[f64], dirs: &[PathBuf]) -> anyhow::Result<()> {
    for d in dirs {
        if d.exists() && fs_err::read_dir(d)?.next().is_some() {
            bail!(
                "{} already holds a run at this speed; sweep other speeds or into a new \
                 directory",
                d.display()
            );
        }
    }
    let existing = replay::rundir::run_dirs_in(&a.output)?;
    if existing.is_empty() {
        return Ok(());
    }
    let sha = replay::rundir::sha256_file(&a.trace)
        .with_context(|| format!("cannot read {}", a.trace.display()))?;
    let header = TraceReader::open(&a.trace)?.header().clone();
    let (provider, config) = provider_setup(a.provider, &a.settings)?;
    let mut ids: Vec<(&Path, RunIdentity)> = Vec::new();
    for r in &existing {
        let m = RunDir::open(r).manifest()?;
        ids.push((r.as_path(), RunIdentity::of(&m)));
    }
    for (d, &speed) in dirs.iter().zip(speeds) {
        let mut id = RunIdentity::planned(&sha, &header, speed, provider, &config);
        id.io_rate = a.settings.io_rate.into();
        ids.push((d.as_path(), id));
    }
    let pairs: Vec<(&Path, &RunIdentity)> = ids.iter().map(|(p, i)| (*p, i)).collect();
    replay::combinable(Purpose::Points, &pairs)
        .with_context(|| format!("adding to the sweep in {}", a.output.display()))?;
    Ok(())
}
