//! `cnsreplay sweep TRACE --provider … --speeds 0.5,1,2 -o SWEEPDIR`: the same trace replayed
//! at several intensities, one run directory per intensity (`SWEEPDIR/<speed>/`), through the
//! very `run` command (same provider flags, same engine entry point). `--rates` gives target
//! event rates instead; each becomes the speed that offers it (rate ÷ the trace's own mean
//! rate). `cnsreplay analyze capacity SWEEPDIR` reads the result.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use replay::RunDir;
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
    if !crate::commands::precheck::check(&a.trace)? {
        return Ok(ExitCode::from(crate::EXIT_INPUT));
    }
    fs_err::create_dir_all(&a.output)?;
    let mut code = ExitCode::SUCCESS;
    for &speed in &speeds {
        let dir = a.output.join(format!("{}", (speed * 1e6).round() / 1e6));
        let args = RunArgs {
            trace: a.trace.clone(),
            provider: a.provider,
            output: Some(dir.clone()),
            speed,
            settings: a.settings.clone(),
            fail_fast: false,
            grace: "30s".into(),
            metrics_addr: None,
            metrics_any_address: false,
            start_at: None,
            metrics_linger: 0,
            json: true,
            require_valid: false,
            // Checked once before the first point.
            no_check: true,
            preflight_only: false,
        };
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
