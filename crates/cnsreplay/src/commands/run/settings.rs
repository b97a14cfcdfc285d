//! The engine and provider settings of `run` ([`ProviderArgs`], shared with `sweep` and
//! `capacity`) and the provider configurations built from them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Args;
use provider_kube::{IoExec, KubeConfig};
use provider_local::{LocalConfig, Mode, StreamCpus};
use provider_sim::{Latency, SimConfig, Stall};
use trace_format::OpType;
use trace_format::units::parse_duration;

use crate::commands::args::IoRateArg;

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
    /// A label of the run, `KEY=VALUE` (repeatable): the build, commit or driver version it
    /// measured (`build=1042`, `commit=3f2a9c1`). Recorded in the manifest, shown by
    /// `analyze summary`, carried into exports and merged runs; `analyze history --by KEY`
    /// orders runs by it. A sweep's or a capacity search's runs all get them.
    #[arg(long, value_name = "KEY=VALUE")]
    pub label: Vec<String>,
    /// Thresholds of the verdict, `KEY=VALUE` (repeatable or comma-separated), e.g.
    /// `reference=1s` (lateness limits from it, loosened at most to `reference.share`, default
    /// 10 %, of the measured latencies), `start.p99=1ms` (fixed); defaults `rate=2%`,
    /// `window=1s`, `workers=90%`, `throttled=0%`, … (docs/replay.md, Run validity). Also
    /// from `CNSREPLAY_VALIDITY` (a pipeline's thresholds for every run it makes).
    #[arg(
        long,
        value_name = "KEY=VALUE",
        value_delimiter = ',',
        env = "CNSREPLAY_VALIDITY"
    )]
    pub validity: Vec<String>,
    /// Measure the host's timing floor this long before the clock starts (how late a woken
    /// task runs here, idle; kept in the manifest), e.g. `1s`; `0s` skips it.
    #[arg(long, value_name = "DUR", default_value = "1s", env = "CNSREPLAY_FLOOR_PROBE", value_parser = crate::commands::args::parse_duration)]
    pub floor_probe: u64,
    /// sim: configuration file (YAML: seed, default, ops, errors, stalls).
    #[arg(long, value_name = "FILE")]
    pub sim_config: Option<PathBuf>,
    /// sim: latency of an op type (or `default`), e.g. `attach=lognormal:2s:0.5` (repeatable).
    #[arg(long, value_name = "OP=DIST")]
    pub sim_latency: Vec<String>,
    /// sim: a named set of realistic latencies, `real-node` (testenv's real kubelet node
    /// with cnsreplay-csi; docs/replay.md, sim presets). It fills the op types `--sim-config`
    /// leaves unset; `--sim-latency` overrides it.
    #[arg(long, value_name = "NAME")]
    pub sim_preset: Option<String>,
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
    /// local: open-loop I/O workers (`io_phase` and bare `io` streams) that may spin before
    /// their deadlines at once: a number, or `all` (default: one fewer than the CPUs, at least
    /// one; the others sleep to their deadlines).
    #[arg(long, value_name = "N|all")]
    pub local_io_spinners: Option<String>,
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

pub(super) fn op_value(s: &str) -> anyhow::Result<(OpType, &str)> {
    let (op, v) = s
        .split_once('=')
        .with_context(|| format!("{s:?}: expected OP=VALUE"))?;
    let op = OpType::from_name(op).with_context(|| format!("{s:?}: unknown op type {op:?}"))?;
    Ok((op, v))
}

pub(super) fn dur_ns(s: &str) -> anyhow::Result<u64> {
    parse_duration(s).map_err(|e| anyhow::anyhow!("{s:?}: {e}"))
}

pub(crate) fn sim_config(a: &ProviderArgs) -> anyhow::Result<SimConfig> {
    let mut c = match &a.sim_config {
        Some(p) => SimConfig::from_file(p)?,
        None => SimConfig {
            seed: a.seed,
            ..SimConfig::default()
        },
    };
    if let Some(name) = &a.sim_preset {
        let preset =
            provider_sim::preset::find(name).map_err(|e| anyhow::anyhow!("--sim-preset: {e}"))?;
        for (op, lat) in preset.ops() {
            c.ops.entry(op).or_insert(lat);
        }
    }
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
    let io_spinners = a
        .local_io_spinners
        .as_deref()
        .map(|n| iogen::parse_spinners(n).map_err(|e| anyhow::anyhow!("--local-io-spinners {e}")))
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
        io_spinners,
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
