//! `cnsreplay run`: the replay engine behind a command line, with a live progress bar, an
//! optional Prometheus endpoint, signal handling and the final table ([`table`]). The engine
//! and provider settings, shared with `sweep` and `capacity`, are in [`settings`].

mod settings;
mod table;

pub use settings::ProviderArgs;
pub(crate) use settings::{kube_config, local_config, pod_options, sim_config};

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use provider_kube::KubeProvider;
use provider_local::LocalProvider;
use provider_sim::SimProvider;
use replay::{
    CompletionState, Live, Provider, RunControl, RunOptions, Summary, TimingOptions, Verdict,
};

use settings::{dur_ns, op_value};
use table::write_table;
use trace_format::units::fmt_ms_compact;

/// Which provider to replay against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProviderKind {
    /// Simulated latencies, no data (tests the engine).
    Sim,
    /// Every operation succeeds at once (measures the engine alone).
    Noop,
    /// Real loop-device volumes on this machine (directories without root).
    Local,
    /// A Kubernetes cluster: PVCs, pods, VolumeSnapshots (docs/kubernetes.md).
    Kube,
}

/// `run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The trace to replay.
    pub trace: PathBuf,
    /// The provider; `local` (real volumes on this machine) is the embedded default.
    #[arg(long, value_enum, default_value_t = ProviderKind::Local)]
    pub provider: ProviderKind,
    /// Run directory to create (must not exist or be empty); by default
    /// `runs/<trace name>-<UTC time>`.
    #[arg(short, long = "output", value_name = "RUNDIR")]
    pub output: Option<PathBuf>,
    /// Replay speed factor (2 = twice as fast): every instant and every `io_phase` duration
    /// of the trace is divided by it (`--io-rate` says what happens to I/O rates).
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// Engine and provider settings (shared with `sweep`).
    #[command(flatten)]
    pub settings: ProviderArgs,
    /// Stop dispatching at the first failed operation.
    #[arg(long)]
    pub fail_fast: bool,
    /// After Ctrl-C/SIGTERM, how long in-flight operations may finish.
    #[arg(long, default_value = "30s", value_name = "DUR")]
    pub grace: String,
    /// Serve Prometheus metrics on this address, e.g. `127.0.0.1:9464` (loopback only,
    /// unless --metrics-any-address).
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<SocketAddr>,
    /// Start the clock at this wall-clock instant (RFC 3339, e.g. `2026-11-26T10:00:00Z`)
    /// once setup is done: several drivers of a split trace (`trace split`) on one clock.
    /// A run whose setup ends later starts at once, with a notice.
    #[arg(long, value_name = "TIME")]
    pub start_at: Option<jiff::Timestamp>,
    /// Allow --metrics-addr beyond loopback (`0.0.0.0:9464` in a pod for an in-cluster
    /// Prometheus). The endpoint has no authentication: it tells anyone who can reach it the
    /// run's op counts and latencies.
    #[arg(long, requires = "metrics_addr")]
    pub metrics_any_address: bool,
    /// Keep serving metrics this long after the run's summary is written, so a scraper gets
    /// the final values (its scrape interval or more).
    #[arg(long, value_name = "DUR", default_value = "0s", value_parser = crate::commands::args::parse_duration, requires = "metrics_addr")]
    pub metrics_linger: u64,
    /// Print the summary as JSON (schema: docs/schemas/run.schema.json).
    #[arg(long)]
    pub json: bool,
    /// Exit 4 unless the verdict is `valid` (also when `partly-valid`, `imprecise` or
    /// `not-judged`).
    #[arg(long)]
    pub require_valid: bool,
    /// Skip the check of the trace before the run (`validate`'s checker, one streaming pass)
    /// for a trace that was checked already.
    #[arg(long)]
    pub no_check: bool,
    /// Check the trace and, on kube, the cluster as a run does before its clock starts
    /// (classes, nodes, namespace, credentials, what each class can do), then exit without
    /// creating anything: 0 when a run could start, 2 (with every problem named) when not
    #[arg(long, conflicts_with_all = ["json", "no_check"])]
    pub preflight_only: bool,
}

impl RunArgs {
    /// A point of a sweep or a capacity search: `trace` at `speed` into `output`, the JSON
    /// summary kept from the table, the trace checked once before the first point.
    pub(crate) fn point(
        trace: PathBuf,
        provider: ProviderKind,
        output: PathBuf,
        speed: f64,
        settings: ProviderArgs,
    ) -> Self {
        RunArgs {
            trace,
            provider,
            output: Some(output),
            speed,
            settings,
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
        }
    }
}

/// Exit code of `run --require-valid` when the verdict is not `valid`.
pub const EXIT_NOT_VALID: u8 = 4;

fn options(a: &RunArgs) -> anyhow::Result<RunOptions> {
    let mut o = RunOptions {
        speed: a.speed,
        io_rate: a.settings.io_rate.into(),
        fail_fast: a.fail_fast,
        grace_ns: dur_ns(&a.grace).context("--grace")?,
        seed: a.settings.seed,
        workers: a.settings.workers,
        timing: TimingOptions {
            lanes: a.settings.timing_lanes,
            min_wake_ns: dur_ns(&a.settings.min_wake).context("--min-wake")?,
            pin: !a.settings.no_pin_lanes,
            realtime: !a.settings.no_realtime,
        },
        start_at: a.start_at,
        floor_probe_ns: a.settings.floor_probe,
        labels: replay::parse_labels(&a.settings.label)?,
        ..RunOptions::default()
    };
    for c in &a.settings.concurrency {
        let (op, n) = op_value(c).context("--concurrency")?;
        o.concurrency
            .insert(op, n.parse().with_context(|| format!("--concurrency {c}"))?);
    }
    for t in &a.settings.timeout {
        let (op, d) = op_value(t).context("--timeout")?;
        o.timeouts.insert(op, dur_ns(d).context("--timeout")?);
    }
    for v in &a.settings.validity {
        o.validity
            .set(v)
            .map_err(|e| anyhow::anyhow!("--validity {e}"))?;
    }
    Ok(o)
}

/// A progress line on stderr, hidden when stderr is not a terminal and with `-q`.
fn progress(live: Arc<Live>) -> std::thread::JoinHandle<()> {
    let pb = if crate::logging::progress_allowed() {
        ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr())
    } else {
        ProgressBar::hidden()
    };
    pb.set_style(
        ProgressStyle::with_template("{spinner} {elapsed} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    std::thread::spawn(move || {
        let mut last = (std::time::Instant::now(), 0u64);
        let mut rate = 0.0;
        while !live.finished.load(Relaxed) {
            std::thread::sleep(Duration::from_millis(200));
            let done = live.done.load(Relaxed);
            let streamed = live.streamed.load(Relaxed);
            let dt = last.0.elapsed().as_secs_f64();
            if dt >= 1.0 {
                rate = ((done + streamed) - last.1) as f64 / dt;
                last = (std::time::Instant::now(), done + streamed);
            }
            // Bare io requests go to per-volume streams, which report completions only at
            // their end: they are counted as handed over, apart from the events done.
            let streams = if streamed > 0 {
                format!("streamed io {streamed} | ")
            } else {
                String::new()
            };
            pb.set_message(format!(
                "done {done} | {streams}in flight {} | late {} | failed {} | {rate:.0} ops/s | worst lag {}",
                live.in_flight(),
                live.late.load(Relaxed),
                live.failed.load(Relaxed),
                fmt_ms_compact(live.worst_lag_ns.load(Relaxed), 3),
            ));
            pb.tick();
        }
        pb.finish_and_clear();
    })
}

fn execute<P: Provider>(a: &RunArgs, output: &Path, provider: &Arc<P>) -> anyhow::Result<Summary> {
    let mut opts = options(a)?;
    if provider.name() == "kube" {
        // The kube provider applies `--timeout` itself (recorded in its configuration), so
        // a timeout names what the operation was waiting for.
        opts.timeouts.clear();
    }
    let control = RunControl::new();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, control.stop_flag())?;
    }
    let live = control.live();
    let mut metrics = None;
    if let Some(addr) = a.metrics_addr {
        if !addr.ip().is_loopback() && !a.metrics_any_address {
            bail!(
                "--metrics-addr {addr}: only loopback addresses are served unless \
                 --metrics-any-address"
            );
        }
        let (bound, thread) = replay::live::serve_metrics(
            addr,
            live.clone(),
            Duration::from_nanos(a.metrics_linger),
        )?;
        tracing::info!("metrics on http://{bound}/metrics");
        metrics = Some(thread);
    }
    let bar = progress(live.clone());
    let result = replay::run(&a.trace, output, provider, &opts, &control);
    live.finished.store(true, Relaxed);
    let _ = bar.join();
    if let Some(t) = metrics {
        if a.metrics_linger > 0 {
            tracing::info!(
                "serving the final metrics for {:.1} s (--metrics-linger)",
                a.metrics_linger as f64 / 1e9
            );
        }
        let _ = t.join();
    }
    let outcome = result.with_context(|| format!("run of {} failed", a.trace.display()))?;
    for n in &outcome.summary.notices {
        tracing::warn!("{n}");
    }
    Ok(outcome.summary)
}

/// Before the clock: the op types of the trace the sim gives no latency. Their numbers will
/// be the tool's own delay (what the verdict then calls imprecise), so the user hears it
/// before, not only after, the run.
fn sim_notice(config: &provider_sim::SimConfig, stats: &trace_format::check::Stats) {
    let bare = config.without_latency(stats.ops.keys().copied());
    if bare.is_empty() {
        return;
    }
    let names: Vec<&str> = bare.iter().map(|op| op.name()).collect();
    tracing::warn!(
        "sim: no latency configured for {} (the sim's default is 0): this run times the tool, \
         not a storage system; give them one with --sim-preset real-node, --sim-latency \
         OP=DIST, `default=DIST` or --sim-config (docs/replay.md, sim)",
        names.join(", ")
    );
}

pub(crate) fn run(a: &RunArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    // A bad label is a usage error, said before the trace is read or anything is created.
    replay::parse_labels(&a.settings.label)?;
    let stats = if a.no_check {
        None
    } else {
        match super::precheck::check(&a.trace)? {
            Some(stats) => Some(stats),
            None => return Ok(ExitCode::from(crate::EXIT_INPUT)),
        }
    };
    if !(a.speed.is_finite() && a.speed > 0.0) {
        bail!(
            "--speed {}: a replay speed must be a positive factor",
            a.speed
        );
    }
    if !super::precheck::check_speed(&a.trace, a.speed, a.settings.io_rate.into())? {
        return Ok(ExitCode::from(crate::EXIT_INPUT));
    }
    let output = match &a.output {
        Some(o) => o.clone(),
        None => default_run_dir(&a.trace),
    };
    if a.preflight_only {
        super::precheck::output_dir(&output)?;
    }
    if a.preflight_only && !matches!(a.provider, ProviderKind::Kube) {
        writeln!(
            out,
            "pre-flight passed: {} is a valid trace, {} can be created; the {} provider \
             checks nothing else before its clock",
            a.trace.display(),
            output.display(),
            a.provider
                .to_possible_value()
                .map_or_else(String::new, |v| v.get_name().to_owned())
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let summary = match a.provider {
        ProviderKind::Sim => {
            let config = sim_config(&a.settings)?;
            if let Some(stats) = &stats {
                sim_notice(&config, stats);
            }
            execute(a, &output, &Arc::new(SimProvider::new(config)?))?
        }
        ProviderKind::Noop => execute(a, &output, &Arc::new(replay::noop::NoopProvider))?,
        ProviderKind::Local => execute(
            a,
            &output,
            &Arc::new(LocalProvider::new(local_config(&a.settings)?)),
        )?,
        ProviderKind::Kube => {
            let p = KubeProvider::new(kube_config(&a.settings)?)?;
            let uses = p.preflight(&a.trace)?;
            if a.preflight_only {
                super::precheck::write_preflight(&a.trace, &uses, out)?;
                return Ok(ExitCode::SUCCESS);
            }
            execute(a, &output, &Arc::new(p))?
        }
    };
    if a.json {
        serde_json::to_writer_pretty(&mut *out, &summary)?;
        writeln!(out)?;
    } else {
        write_table(&summary, out)?;
        writeln!(out, "run directory: {}", output.display())?;
    }
    Ok(exit_code(&summary, a.require_valid))
}

/// 0 complete; 1 interrupted or every operation failed; 4 (`--require-valid`) any verdict
/// but `valid`.
fn exit_code(s: &Summary, require_valid: bool) -> ExitCode {
    let verdict = s.validity.as_ref().map(|v| v.verdict);
    if require_valid && verdict != Some(Verdict::Valid) {
        ExitCode::from(EXIT_NOT_VALID)
    } else if s.state != CompletionState::Complete || verdict == Some(Verdict::Failed) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// `runs/<trace file stem>-<UTC time to the second>`, so repeated runs never collide with an
/// earlier run directory (the engine refuses a non-empty one).
fn default_run_dir(trace: &Path) -> PathBuf {
    let stem = trace
        .file_stem()
        .map_or_else(|| "run".to_owned(), |s| s.to_string_lossy().into_owned());
    let now = jiff::Timestamp::now().strftime("%Y%m%dT%H%M%SZ");
    PathBuf::from("runs").join(format!("{stem}-{now}"))
}
