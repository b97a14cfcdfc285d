//! `cnsreplay run` and `cnsreplay cleanup`: the replay engine behind a command line, with a
//! live progress bar, an optional Prometheus endpoint, signal handling and the final table.

use std::collections::BTreeMap;
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
use provider_kube::{IoExec, KubeConfig, KubeProvider};
use provider_local::{LocalConfig, LocalProvider, Mode, StreamCpus};
use provider_sim::{Latency, SimConfig, SimProvider, Stall};
use replay::{
    CompletionState, Live, Percentiles, Provider, RunControl, RunDir, RunInfo, RunOptions, Summary,
    TimingOptions, Verdict,
};
use trace_format::OpType;

use crate::cli::IoRateArg;
use trace_format::units::{fmt_ms_compact, parse_duration};

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
    #[arg(long, value_name = "DUR", default_value = "0s", value_parser = crate::cli::parse_duration, requires = "metrics_addr")]
    pub metrics_linger: u64,
    /// Print the summary as JSON (schema: docs/schemas/run.schema.json).
    #[arg(long)]
    pub json: bool,
    /// Exit 4 unless the verdict is `valid` (also when `partly-valid` or `not-judged`).
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

/// Exit code of `run --require-valid` when the verdict is not `valid`.
pub const EXIT_NOT_VALID: u8 = 4;

/// Engine and provider settings of `run`, shared with `sweep` so each sweep point is exactly
/// a run.
#[derive(Debug, Clone, Args)]
pub struct ProviderArgs {
    /// What `--speed` does to an `io_phase`'s open-loop rate: `keep` it (the workload's I/O
    /// intensity stays, the churn around it speeds up) or `scale` it by the speed (the same
    /// requests in the compressed duration). Durations are compressed either way.
    #[arg(long, value_enum, default_value_t = IoRateArg::Keep)]
    pub io_rate: IoRateArg,
    /// Cap concurrent operations of a type, e.g. `attach=4` (repeatable).
    #[arg(long, value_name = "OP=N")]
    pub concurrency: Vec<String>,
    /// Timeout of an op type's provider call, e.g. `create_volume=30s` (repeatable).
    #[arg(long, value_name = "OP=DUR")]
    pub timeout: Vec<String>,
    /// Seed of random choices (recorded in the manifest; the sim's default seed).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// tokio worker threads.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Timing lanes (threads that sleep to event deadlines and dispatch); 0 = one per CPU, at
    /// most 2.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub timing_lanes: usize,
    /// Spacing of each timing lane's wake-up points (the lanes' interleaved): at high event
    /// rates events go out in groups, each up to this much / lanes late, instead of one
    /// wake-up each.
    #[arg(long, value_name = "DUR", default_value = "80us")]
    pub min_wake: String,
    /// Let the timing lanes run on any CPU instead of one each.
    #[arg(long)]
    pub no_pin_lanes: bool,
    /// Run the timing lanes at nice -10 instead of real-time (SCHED_FIFO, which needs root or
    /// CAP_SYS_NICE).
    #[arg(long)]
    pub no_realtime: bool,
    /// Thresholds of the verdict, `KEY=VALUE` (repeatable or comma-separated), e.g.
    /// `reference=1s` (lateness limits from it, loosened at most to `reference.share`, default
    /// 10 %, of the measured latencies), `start.p99=1ms` (fixed); defaults `rate=2%`,
    /// `window=1s`, `workers=90%`, `throttled=0%`, … (docs/replay.md, Run validity).
    #[arg(long, value_name = "KEY=VALUE", value_delimiter = ',')]
    pub validity: Vec<String>,
    /// sim: configuration file (YAML: seed, default, ops, errors, stalls).
    #[arg(long, value_name = "FILE")]
    pub sim_config: Option<PathBuf>,
    /// sim: latency of an op type (or `default`), e.g. `attach=lognormal:2s:0.5` (repeatable).
    #[arg(long, value_name = "OP=DIST")]
    pub sim_latency: Vec<String>,
    /// sim: inject a stall, `AT+DURATION` from the run start, e.g. `10s+2s` (repeatable).
    #[arg(long, value_name = "AT+DUR")]
    pub sim_stall: Vec<String>,
    /// sim: queueing model, FIFO servers of an op type (`attach=4`) or one pool shared by
    /// every other op type (`shared=8`); repeatable. An op type with N servers and mean
    /// service S saturates at N / S per second.
    #[arg(long, value_name = "OP=N")]
    pub sim_servers: Vec<String>,
    /// sim: multiply every service time by this factor (a run-wide slowdown, e.g. `1.1`).
    #[arg(long, value_name = "FACTOR")]
    pub sim_slowdown: Option<f64>,
    /// local: `auto` (loop devices when root), `loop` or `dir`.
    #[arg(long, value_name = "MODE", default_value = "auto")]
    pub local_mode: String,
    /// local: cap the size of each volume actually allocated (e.g. `256Mi`).
    #[arg(long, value_name = "BYTES")]
    pub local_max_volume: Option<String>,
    /// local: requests in flight at most per volume's I/O stream (bare `io` events).
    #[arg(long, value_name = "N", default_value_t = provider_local::DEFAULT_STREAM_DEPTH)]
    pub local_io_depth: u32,
    /// local: largest bare `io` request a stream issues (each in-flight slot holds a buffer
    /// of this size; longer requests are dropped and counted).
    #[arg(long, value_name = "BYTES", default_value = "1Mi")]
    pub local_io_max_len: String,
    /// local: write a sparse volume once before the clock starts, when it is at most this
    /// large, so bare `io` writes overwrite and reads hit the disk (`0`: never).
    #[arg(long, value_name = "BYTES", default_value = "8Gi")]
    pub local_io_layout_max: String,
    /// local: how long before each bare `io` request a stream spins on the clock instead of
    /// sleeping (default: 50us when the header declares fewer volumes than CPUs, else 0).
    #[arg(long, value_name = "DURATION")]
    pub local_io_spin: Option<String>,
    /// local: the CPU of each volume's I/O stream thread: `auto` (for a sparse target, whose
    /// writes the kernel's I/O workers carry out, one CPU each from the last when the header
    /// declares fewer volumes than CPUs, the workers on the others; else the scheduler's
    /// choice), `none` (the scheduler's choice), or a list such as `3,2` (the i-th volume's
    /// stream on the i-th CPU listed, cycling; workers on the CPUs not listed).
    #[arg(long, value_name = "auto|none|LIST", default_value = "auto")]
    pub local_io_cpus: String,
    /// kube: kubeconfig file (default: `KUBECONFIG`, `~/.kube/config`, in-cluster).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// kube: kubeconfig context (default: its current context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// kube: namespace to work in (default: a run-owned `cnsreplay-<run id>`, deleted after).
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,
    /// kube: StorageClass of every volume, replacing the classes the trace names (events
    /// and header) except those `--map-storage-class` remaps.
    #[arg(long, value_name = "CLASS")]
    pub storage_class: Option<String>,
    /// kube: use cluster StorageClass NEW where the trace names OLD (repeatable; beats
    /// `--storage-class`).
    #[arg(long, value_name = "OLD=NEW")]
    pub map_storage_class: Vec<String>,
    /// kube: VolumeSnapshotClass of every snapshot, replacing the trace's classes except
    /// those `--map-snapshot-class` remaps.
    #[arg(long, value_name = "CLASS")]
    pub snapshot_class: Option<String>,
    /// kube: use VolumeSnapshotClass NEW where the trace names OLD (repeatable).
    #[arg(long, value_name = "OLD=NEW")]
    pub map_snapshot_class: Vec<String>,
    /// kube: VolumeGroupSnapshotClass of every group snapshot, replacing the trace's classes
    /// (default: the trace's class, else the cluster's default class).
    #[arg(long, value_name = "CLASS")]
    pub group_snapshot_class: Option<String>,
    /// kube: nodeSelector of every pod, `KEY=VALUE` (repeatable).
    #[arg(long, value_name = "KEY=VALUE")]
    pub node_selector: Vec<String>,
    /// kube: toleration of every pod, `KEY[=VALUE][:EFFECT]` (repeatable).
    #[arg(long, value_name = "TOLERATION")]
    pub toleration: Vec<String>,
    /// kube: resource request of every container, e.g. `cpu=250m` (repeatable).
    #[arg(long, value_name = "RES=QTY")]
    pub pod_request: Vec<String>,
    /// kube: resource limit of every container, e.g. `memory=256Mi` (repeatable).
    #[arg(long, value_name = "RES=QTY")]
    pub pod_limit: Vec<String>,
    /// kube: imagePullSecret of every pod (a Secret in the run's namespace, so it needs
    /// --namespace: a run-owned namespace has none; repeatable).
    #[arg(long, value_name = "NAME")]
    pub image_pull_secret: Vec<String>,
    /// kube: pin workloads whose event names no node to this node.
    #[arg(long, value_name = "NODE")]
    pub node: Option<String>,
    /// kube: client-side request rate limit in requests/s (0 = off); throttling is reported.
    #[arg(long, value_name = "QPS", default_value_t = 50.0)]
    pub kube_qps: f64,
    /// kube: client-side burst.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub kube_burst: u32,
    /// kube: how long a pod may stay unschedulable (`unschedulable`) or its sandbox fail to be
    /// created (a FailedCreatePodSandBox Warning: `sandbox_failed`) before the operation fails
    /// with it. Raise it where nodes come later (a cluster autoscaler); the op's --timeout still
    /// ends it. Other Warnings Kubernetes retries (FailedMount, FailedAttachVolume,
    /// ProvisioningFailed with a retriable gRPC code) never fail an operation: they are counted
    /// on its record (`retries`) and quoted by its timeout.
    #[arg(long, value_name = "DUR", default_value = "3s")]
    pub kube_failure_grace: String,
    /// kube: seccomp profile of the iogen pods, a `Localhost` profile's path under the
    /// kubelet's seccomp root (install deploy/seccomp/iogen.json there). Default:
    /// `RuntimeDefault`, which refuses io_uring (iogen then runs its thread-pool engine).
    #[arg(long, value_name = "PATH")]
    pub iogen_seccomp_profile: Option<String>,
    /// kube: skip the pre-flight pull check (one short-lived pod per target node, before the
    /// clock starts, with the workload and iogen images and iogen's seccomp profile: a
    /// missing image or profile then fails the run there, not its first attach or io_phase).
    #[arg(long)]
    pub no_pull_check: bool,
    /// kube: image of the `io_phase` pods (runs iogen; deploy/iogen.Containerfile).
    #[arg(
        long,
        value_name = "IMAGE",
        env = "CNSREPLAY_IOGEN_IMAGE",
        default_value = "cnsreplay/iogen:latest"
    )]
    pub iogen_image: String,
    /// kube: image of the workload pods an `attach` starts (they only hold the volumes).
    #[arg(
        long,
        value_name = "IMAGE",
        default_value = "registry.k8s.io/pause:3.10"
    )]
    pub pause_image: String,
    /// kube: where `io_phase` I/O runs: `pod` (an iogen pod) or `local` (iogen in this
    /// process on the device the CSI driver attached; test clusters only, Block volumes).
    #[arg(long, value_name = "MODE", default_value = "pod")]
    pub kube_io_exec: String,
    /// kube: a CSI sidecar's Prometheus endpoint (`http://HOST:PORT/metrics`, repeatable),
    /// scraped when the clock starts and after the last operation: the run's CSI calls and
    /// their latency in the summary (`cluster.csi`) beside the run's own.
    #[arg(long, value_name = "URL")]
    pub csi_metrics: Vec<String>,
    /// kube: scrape the API server's `/metrics` the same way (`cluster.apiserver`; needs
    /// `get` on the non-resource URL `/metrics`).
    #[arg(long)]
    pub apiserver_metrics: bool,
    /// kube: the ServiceAccount (`NAMESPACE/NAME`) whose audience-scoped token changed-block
    /// tracking (`snapshot_allocated`, `snapshot_delta`) sends to the driver's
    /// SnapshotMetadataService; default: the run's own account when its credentials are a
    /// ServiceAccount, else `cnsreplay/cnsreplay` (deploy/rbac).
    #[arg(long, value_name = "NAMESPACE/NAME")]
    pub cbt_account: Option<String>,
}

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

fn op_value(s: &str) -> anyhow::Result<(OpType, &str)> {
    let (op, v) = s
        .split_once('=')
        .with_context(|| format!("{s:?}: expected OP=VALUE"))?;
    let op = OpType::from_name(op).with_context(|| format!("{s:?}: unknown op type {op:?}"))?;
    Ok((op, v))
}

fn dur_ns(s: &str) -> anyhow::Result<u64> {
    parse_duration(s).map_err(|e| anyhow::anyhow!("{s:?}: {e}"))
}

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

pub(crate) fn sim_config(a: &ProviderArgs) -> anyhow::Result<SimConfig> {
    let mut c = match &a.sim_config {
        Some(p) => SimConfig::from_file(p)?,
        None => SimConfig {
            seed: a.seed,
            ..SimConfig::default()
        },
    };
    for l in &a.sim_latency {
        let (op, d) = l
            .split_once('=')
            .with_context(|| format!("--sim-latency {l:?}: expected OP=DIST"))?;
        let lat = Latency::parse(d).map_err(|e| anyhow::anyhow!("--sim-latency: {e}"))?;
        if op == "default" {
            c.default = lat;
        } else {
            let op = OpType::from_name(op)
                .with_context(|| format!("--sim-latency: unknown op type {op:?}"))?;
            c.ops.insert(op, lat);
        }
    }
    for s in &a.sim_stall {
        c.stalls
            .push(Stall::parse(s).map_err(|e| anyhow::anyhow!("--sim-stall: {e}"))?);
    }
    for s in &a.sim_servers {
        c.set_servers(s)
            .map_err(|e| anyhow::anyhow!("--sim-servers: {e}"))?;
    }
    if let Some(f) = a.sim_slowdown {
        c.slowdown = f;
        c.check("--sim-slowdown")?;
    }
    Ok(c)
}

pub(crate) fn local_config(a: &ProviderArgs) -> anyhow::Result<LocalConfig> {
    let mode = match a.local_mode.as_str() {
        "auto" => Mode::Auto,
        "loop" => Mode::Loop,
        "dir" => Mode::Dir,
        m => bail!("--local-mode {m:?}: expected auto, loop or dir"),
    };
    let max_volume_bytes = match &a.local_max_volume {
        Some(s) => trace_format::units::parse_bytes(s)
            .map_err(|e| anyhow::anyhow!("--local-max-volume {s:?}: {e}"))?,
        None => 0,
    };
    if a.local_io_depth == 0 {
        bail!("--local-io-depth must be at least 1");
    }
    let stream_max_len = trace_format::units::parse_bytes(&a.local_io_max_len)
        .map_err(|e| anyhow::anyhow!("--local-io-max-len {:?}: {e}", a.local_io_max_len))?;
    if !(512..=(64 << 20)).contains(&stream_max_len) {
        bail!(
            "--local-io-max-len {:?}: between 512 bytes and 64 MiB",
            a.local_io_max_len
        );
    }
    let stream_layout_max = trace_format::units::parse_bytes(&a.local_io_layout_max)
        .map_err(|e| anyhow::anyhow!("--local-io-layout-max {:?}: {e}", a.local_io_layout_max))?;
    let stream_spin_ns = a
        .local_io_spin
        .as_deref()
        .map(|d| match d.trim() {
            "0" => Ok(0),
            d => parse_duration(d).map_err(|e| anyhow::anyhow!("--local-io-spin {d:?}: {e}")),
        })
        .transpose()?;
    let stream_cpus = match a.local_io_cpus.trim() {
        "auto" => StreamCpus::Auto,
        "none" => StreamCpus::None,
        list => StreamCpus::List(
            list.split(',')
                .map(|c| {
                    c.trim().parse::<usize>().map_err(|e| {
                        anyhow::anyhow!(
                            "--local-io-cpus {list:?}: {c:?} is not a CPU number ({e}); \
                             expected auto, none or a list such as 3,2"
                        )
                    })
                })
                .collect::<anyhow::Result<_>>()?,
        ),
    };
    Ok(LocalConfig {
        mode,
        max_volume_bytes,
        stream_spin_ns,
        stream_cpus,
        stream_depth: a.local_io_depth,
        stream_max_len,
        stream_layout_max,
        ..LocalConfig::default()
    })
}

fn pairs(flag: &str, v: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    v.iter()
        .map(|s| {
            let (k, v) = s
                .split_once('=')
                .filter(|(k, v)| !k.is_empty() && !v.is_empty())
                .with_context(|| format!("{flag} {s:?}: expected KEY=VALUE"))?;
            Ok((k.to_owned(), v.to_owned()))
        })
        .collect()
}

/// Pod placement and pull secrets from `--node-selector`, `--toleration`, `--image-pull-secret`.
pub(crate) fn pod_options(
    node_selector: &[String],
    toleration: &[String],
    image_pull_secret: &[String],
) -> anyhow::Result<provider_kube::PodOptions> {
    Ok(provider_kube::PodOptions {
        node_selector: pairs("--node-selector", node_selector)?,
        tolerations: toleration
            .iter()
            .map(|t| provider_kube::objects::parse_toleration(t))
            .collect::<Result<_, _>>()
            .map_err(|e| anyhow::anyhow!("--toleration: {e}"))?,
        image_pull_secrets: image_pull_secret.to_vec(),
        ..provider_kube::PodOptions::default()
    })
}

pub(crate) fn kube_config(a: &ProviderArgs) -> anyhow::Result<KubeConfig> {
    if !(a.kube_qps.is_finite() && a.kube_qps >= 0.0) {
        bail!("--kube-qps {}: expected a rate >= 0", a.kube_qps);
    }
    let mut timeouts = provider_kube::default_timeouts();
    for t in &a.timeout {
        let (op, d) = op_value(t).context("--timeout")?;
        timeouts.insert(op, dur_ns(d).context("--timeout")?);
    }
    let pod = provider_kube::PodOptions {
        requests: pairs("--pod-request", &a.pod_request)?,
        limits: pairs("--pod-limit", &a.pod_limit)?,
        iogen_seccomp_profile: a.iogen_seccomp_profile.clone(),
        ..pod_options(&a.node_selector, &a.toleration, &a.image_pull_secret)?
    };
    Ok(KubeConfig {
        kubeconfig: a.kubeconfig.clone(),
        context: a.context.clone(),
        namespace: a.namespace.clone(),
        storage_class: a.storage_class.clone(),
        storage_class_map: pairs("--map-storage-class", &a.map_storage_class)?,
        snapshot_class: a.snapshot_class.clone(),
        snapshot_class_map: pairs("--map-snapshot-class", &a.map_snapshot_class)?,
        group_snapshot_class: a.group_snapshot_class.clone(),
        timeouts,
        pod,
        node: a.node.clone(),
        qps: a.kube_qps,
        burst: a.kube_burst,
        iogen_image: a.iogen_image.clone(),
        pause_image: a.pause_image.clone(),
        io_exec: match a.kube_io_exec.as_str() {
            "pod" => IoExec::Pod,
            "local" => IoExec::Local,
            other => bail!("--kube-io-exec {other}: expected `pod` or `local`"),
        },
        csi_metrics: a.csi_metrics.clone(),
        apiserver_metrics: a.apiserver_metrics,
        failure_grace_ns: dur_ns(&a.kube_failure_grace).context("--kube-failure-grace")?,
        pull_check: !a.no_pull_check,
        cbt_account: a.cbt_account.clone(),
    })
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

pub(crate) fn run(a: &RunArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    if !a.no_check && !super::precheck::check(&a.trace)? {
        return Ok(ExitCode::from(crate::EXIT_INPUT));
    }
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
        ProviderKind::Sim => execute(
            a,
            &output,
            &Arc::new(SimProvider::new(sim_config(&a.settings)?)?),
        )?,
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

fn write_table(s: &Summary, out: &mut dyn Write) -> std::io::Result<()> {
    let state = match s.state {
        CompletionState::Complete => "complete".to_owned(),
        _ => format!(
            "INTERRUPTED ({})",
            s.reason.as_deref().unwrap_or("unknown reason")
        ),
    };
    writeln!(
        out,
        "{state}: {} events on {} in {:.1}s ({}/s), {} ok, {} failed; dispatch lateness p99 {} max {}",
        s.dispatched,
        s.provider,
        s.wall_seconds,
        per_s(s.ops_per_second),
        s.ok,
        s.failed,
        fmt_ms_compact(s.lateness.p99, 3),
        fmt_ms_compact(s.lateness.max, 3)
    )?;
    write_verdict(s, out)?;
    writeln!(out)?;
    // Wide enough for the longest op name of the run (`snapshot_allocated`, …).
    let w = s.ops.keys().map(String::len).max().unwrap_or(0).max(16);
    writeln!(
        out,
        "{:<w$} {:>7} {:>6} | {:>10} {:>10} {:>10} {:>10} | {:>10} {:>10} {:>10} {:>10}",
        "operation",
        "count",
        "failed",
        "resp p50",
        "p90",
        "p99",
        "max",
        "svc p50",
        "p90",
        "p99",
        "max"
    )?;
    let row = |p: &Percentiles| [p.p50, p.p90, p.p99, p.max].map(|v| fmt_ms_compact(v, 3));
    for (op, o) in &s.ops {
        let (r, v) = (row(&o.response), row(&o.service));
        writeln!(
            out,
            "{op:<w$} {:>7} {:>6} | {:>10} {:>10} {:>10} {:>10} | {:>10} {:>10} {:>10} {:>10}",
            o.count, o.failed, r[0], r[1], r[2], r[3], v[0], v[1], v[2], v[3]
        )?;
    }
    write_streams(s, out)?;
    if s.io.with_snapshot.count + s.io.without_snapshot.count > 0 {
        writeln!(out)?;
        writeln!(
            out,
            "I/O p99.9: {} without a snapshot in flight ({} I/Os), {} with ({} I/Os)",
            fmt_ms_compact(s.io.without_snapshot.p999, 3),
            s.io.without_snapshot.count,
            fmt_ms_compact(s.io.with_snapshot.p999, 3),
            s.io.with_snapshot.count
        )?;
    }
    if !s.io.backends.is_empty() {
        let io_phases = s.ops.get(OpType::IoPhase.name()).map_or(0, |o| o.count);
        let counts: Vec<String> =
            s.io.backend_counts()
                .iter()
                .map(|(b, n)| format!("{b} in {n}"))
                .collect();
        writeln!(
            out,
            "I/O backend: {} of {io_phases} io_phases",
            counts.join(", ")
        )?;
    }
    if !s.errors.is_empty() {
        writeln!(out)?;
        let errs: BTreeMap<_, _> = s.errors.iter().collect();
        for (class, n) in errs {
            writeln!(out, "errors: {class}: {n}")?;
        }
    }
    if s.cleaned_up > 0 || !s.cleanup_failures.is_empty() {
        writeln!(
            out,
            "cleanup: removed {} leftover object(s); {} could not be removed",
            s.cleaned_up,
            s.cleanup_failures.len()
        )?;
        for f in &s.cleanup_failures {
            writeln!(out, "  {f}")?;
        }
    }
    Ok(())
}

/// A rate with the precision it needs: `0.25`, `3.5`, `31767`.
fn per_s(v: f64) -> String {
    if v >= 100.0 || v == 0.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The fidelity of bare `io` events' streams, one line per volume.
fn write_streams(s: &Summary, out: &mut dyn Write) -> std::io::Result<()> {
    if s.io_streams.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(
        out,
        "{:<16} {:>9} {:>7} {:>7} | {:>10} {:>10} {:>9} | {:>10} {:>10} {:>10} | {:>10}",
        "I/O stream",
        "requests",
        "dropped",
        "reorder",
        "intended/s",
        "achieved/s",
        "worst 1 s",
        "late p50",
        "p99",
        "p99.9",
        "resp p99"
    )?;
    for f in &s.io_streams {
        let worst = f
            .worst_window
            .map_or_else(|| "-".to_owned(), |w| format!("{:.2}%", w.error * 100.0));
        writeln!(
            out,
            "{:<16} {:>9} {:>7} {:>7} | {:>10.0} {:>10.0} {:>9} | {:>10} {:>10} {:>10} | {:>10}",
            f.volume,
            f.requests,
            f.dropped,
            f.reordered,
            f.intended_rate,
            f.achieved_rate,
            worst,
            fmt_ms_compact(f.lateness.p50, 3),
            fmt_ms_compact(f.lateness.p99, 3),
            fmt_ms_compact(f.lateness.p999, 3),
            fmt_ms_compact(f.response.p99, 3)
        )?;
        if let Some(e) = &f.error {
            writeln!(out, "  error: {e}")?;
        }
    }
    if let Some(f) = s.io_streams.first() {
        writeln!(out, "  on {}: {}", f.target, f.flags.join("; "))?;
    }
    Ok(())
}

/// The verdict line: for a valid run the engine's delay in brief, otherwise every failed
/// check with its evidence.
fn write_verdict(s: &Summary, out: &mut dyn Write) -> std::io::Result<()> {
    let sl = &s.start_lateness;
    writeln!(
        out,
        "engine delay: start lateness p50 {} p99 {} p99.9 {} max {} ({} events that did not wait, \
         {} that waited); pickup p99 {}",
        fmt_ms_compact(sl.p50, 3),
        fmt_ms_compact(sl.p99, 3),
        fmt_ms_compact(sl.p999, 3),
        fmt_ms_compact(sl.max, 3),
        sl.count,
        s.waited,
        fmt_ms_compact(s.pickup.p99, 3)
    )?;
    if let Some(r) = &s.dispatch_rate {
        writeln!(
            out,
            "dispatch rate: {:.0} of {:.0} events/s intended",
            r.achieved, r.intended
        )?;
    }
    let Some(v) = &s.validity else {
        return writeln!(
            out,
            "verdict: none (summary written before verdicts existed)"
        );
    };
    let judged = v.checks.iter().filter(|c| c.judged).count();
    match v.verdict {
        Verdict::Valid => writeln!(out, "verdict: valid ({judged} checks passed)")?,
        Verdict::NotJudged => writeln!(
            out,
            "verdict: NOT JUDGED (too few events to tell whether the engine kept up)"
        )?,
        Verdict::PartlyValid => {
            writeln!(
                out,
                "verdict: PARTLY VALID (valid for {}; the tool's own delay is too large against \
                 the latencies of the rest)",
                v.valid_ops()
            )?;
            for o in v.ops_judged(Verdict::EngineBound) {
                writeln!(out, "  {}: {}", o.op, o.evidence)?;
            }
        }
        _ => {
            writeln!(out, "verdict: {}", v.verdict.name().to_uppercase())?;
            for c in v.failed() {
                writeln!(out, "  {}: {}", c.check, c.message)?;
            }
        }
    }
    if let Some(stall) = v.host_stall() {
        writeln!(out, "  host: {stall}")?;
    }
    if let Some(l) = &v.limits {
        writeln!(
            out,
            "  lateness limits: p99 {}, p99.9 {} ({})",
            fmt_ms_compact(l.p99_ns, 3),
            fmt_ms_compact(l.p999_ns, 3),
            l.basis
        )?;
    }
    for c in v.not_judged() {
        writeln!(out, "  {}: {}", c.check, c.message)?;
    }
    Ok(())
}

pub(crate) fn cleanup(a: &CleanupArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
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

/// `runs/<trace file stem>-<UTC time to the second>`, so repeated runs never collide with an
/// earlier run directory (the engine refuses a non-empty one).
fn default_run_dir(trace: &Path) -> PathBuf {
    let stem = trace
        .file_stem()
        .map_or_else(|| "run".to_owned(), |s| s.to_string_lossy().into_owned());
    let now = jiff::Timestamp::now().strftime("%Y%m%dT%H%M%SZ");
    PathBuf::from("runs").join(format!("{stem}-{now}"))
}
