//! `cnsreplay cleanup`: the leftovers of a crashed or interrupted run removed, by its ledger
//! or (kube, without the run directory) by its run label.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use provider_kube::{KubeConfig, KubeProvider};
use provider_local::LocalProvider;
use replay::{CompletionState, Provider, RunDir, RunInfo};

/// `cleanup`.
#[derive(Debug, Args)]
pub struct CleanupArgs {
    /// The run directory of a crashed or interrupted run (its ledger lists what to remove).
    #[arg(required_unless_present = "run_id", conflicts_with = "run_id")]
    pub run_dir: Option<PathBuf>,
    /// kube, without the run directory: find run ID's objects on the cluster by their run
    /// label (`cnsreplay.io/run=ID`; nodes it cordoned by their annotation) and remove them,
    /// each by the UID it was found with. The ID is the run's `run_id` (its manifest, its
    /// log, or the label on its namespace).
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,
    /// With --run-id: kubeconfig file (default: `KUBECONFIG`, `~/.kube/config`, in-cluster).
    #[arg(long, value_name = "FILE", requires = "run_id")]
    pub kubeconfig: Option<PathBuf>,
    /// With --run-id: kubeconfig context (default: its current context).
    #[arg(long, value_name = "NAME", requires = "run_id")]
    pub context: Option<String>,
    /// With --run-id: look only in this namespace (the run's `--namespace`; needed when the
    /// credentials are a namespaced Role), instead of in every namespace.
    #[arg(long, value_name = "NS", requires = "run_id")]
    pub namespace: Option<String>,
}

pub(crate) fn run(a: &CleanupArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let run_dir = match (&a.run_dir, &a.run_id) {
        (Some(d), _) => d,
        (None, Some(id)) => return cleanup_run_id(a, id, out),
        (None, None) => bail!("give a run directory or --run-id"),
    };
    let rd = RunDir::open(run_dir);
    let m = rd
        .detect_crash()
        .with_context(|| format!("{} is not a readable run directory", run_dir.display()))?;
    if m.state == CompletionState::Running {
        bail!(
            "run {} is still running (process {}); stop it first",
            m.run_id,
            m.pid
        );
    }
    let info = RunInfo {
        run_dir: fs_err::canonicalize(run_dir)?,
        run_id: m.run_id.clone(),
        header: m.trace.header.clone(),
        stop: None,
    };
    let leftovers = replay::ledger::read_live(&replay::Ledger::path_in(run_dir))?;
    let report = match m.provider.name.as_str() {
        "local" => LocalProvider::from_config(&m.provider.config)
            .context("manifest provider.config")?
            .cleanup(&info, &leftovers),
        "kube" => KubeProvider::from_config(&m.provider.config)
            .context("manifest provider.config")?
            .cleanup(&info, &leftovers),
        "sim" | "noop" => replay::provider::CleanupReport::default(),
        other => bail!("unknown provider {other:?} in the manifest"),
    };
    writeln!(
        out,
        "{}: run {} ({}); removed {}, already gone {}, failed {}",
        run_dir.display(),
        m.run_id,
        serde_json::to_value(m.state)?.as_str().unwrap_or("?"),
        report.removed,
        report.already_gone,
        report.failed.len()
    )?;
    failures(&report, out)
}

/// Lists what cleanup could not remove; exit 1 when anything.
fn failures(
    report: &replay::provider::CleanupReport,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    for f in &report.failed {
        writeln!(out, "  not removed: {f}")?;
    }
    Ok(if report.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `cleanup --run-id`: the run's objects found on the cluster, removed.
fn cleanup_run_id(a: &CleanupArgs, id: &str, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    if id.is_empty()
        || !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        bail!("--run-id {id:?} is not a run id (a label value: letters, digits, '-', '_', '.')");
    }
    let p = KubeProvider::new(KubeConfig {
        kubeconfig: a.kubeconfig.clone(),
        context: a.context.clone(),
        namespace: a.namespace.clone(),
        ..KubeConfig::default()
    })
    .context("kube provider")?;
    let (found, report) = p
        .cleanup_run_id(id)
        .with_context(|| format!("cleanup of run {id}"))?;
    for e in &found {
        writeln!(out, "  found {} {}", e.kind, e.id)?;
    }
    writeln!(
        out,
        "run {id}: found {} object(s) by its label; removed {}, already gone {}, failed {}",
        found.len(),
        report.removed,
        report.already_gone,
        report.failed.len()
    )?;
    failures(&report, out)
}
