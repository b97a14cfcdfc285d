//! `cnsreplay-csi`: the CSI driver binary. See `docs/csi-driver.md`.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Parser;
use csi_driver::latency::LatencyConfig;
use csi_driver::{Driver, DriverConfig};

/// A CSI driver over the local provider's storage code, with injectable latency.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Unix socket to serve on (a `unix://` prefix is accepted).
    #[arg(long, env = "CSI_ENDPOINT")]
    endpoint: String,
    /// Root directory: state.json, ops.jsonl, volumes/, snapshots/.
    #[arg(long)]
    root: PathBuf,
    /// CSI driver name.
    #[arg(long, default_value = "csi.cnsreplay.dev")]
    driver_name: String,
    /// This node's id (NodeGetInfo).
    #[arg(long, default_value = "node-1")]
    node_id: String,
    /// Further node ids ControllerPublishVolume accepts (comma-separated).
    #[arg(long, value_delimiter = ',')]
    nodes: Vec<String>,
    /// Advertise topology (VOLUME_ACCESSIBILITY_CONSTRAINTS): PVs get node affinity.
    #[arg(long)]
    topology: bool,
    /// Topology key of NodeGetInfo's segment.
    #[arg(long, default_value = "topology.csi.cnsreplay.dev/node")]
    topology_key: String,
    /// JSON latency config (per-op defaults; class parameters override them).
    #[arg(long)]
    latency_config: Option<PathBuf>,
    /// `loop` (needs root), `file` (no loop devices, no mounts) or `auto` (loop when root).
    #[arg(long, default_value = "auto", value_parser = ["auto", "loop", "file"])]
    mode: String,
    /// Capacity of a volume whose request gives none, bytes.
    #[arg(long, default_value_t = 1 << 30)]
    default_size: u64,
    /// Also serve the kubelet's plugin registration on this socket (in the kubelet's
    /// `plugins_registry` directory, e.g. `/var/lib/kubelet/plugins_registry/NAME@reg.sock`; the
    /// file name needs the `@`, see the registration module):
    /// the kubelet then registers the driver and writes the node's CSINode itself.
    #[arg(long)]
    registration_socket: Option<PathBuf>,
    /// The blkio cgroup directory where the kubelet makes pod cgroups (cgroupfs driver):
    /// volumes' I/O limits (ControllerModifyVolume) are written into the cgroups of the pods
    /// using them. Default: BLKIO/kubepods.
    #[arg(long)]
    pod_cgroups: Option<PathBuf>,
    /// The node's volume limit NodeGetInfo reports (`max_volumes_per_node`; 0: none).
    #[arg(long, default_value_t = 0)]
    max_volumes_per_node: u64,
    /// A file with the node's volume limit (one integer), read at every NodeGetInfo so it can
    /// change at run time; `--max-volumes-per-node` while it does not exist.
    #[arg(long)]
    max_volumes_file: Option<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let latency: LatencyConfig = match &args.latency_config {
        Some(p) => {
            let text = fs_err::read_to_string(p)?;
            serde_json::from_str(&text).with_context(|| format!("{}", p.display()))?
        }
        None => LatencyConfig::default(),
    };
    let cfg = DriverConfig {
        name: args.driver_name,
        root: args.root,
        node_id: args.node_id,
        nodes: args.nodes,
        topology: args.topology,
        topology_key: args.topology_key,
        latency,
        loop_mode: match args.mode.as_str() {
            "loop" => Some(true),
            "file" => Some(false),
            _ => None,
        },
        default_size: args.default_size,
        pod_cgroups: args.pod_cgroups,
        max_volumes_per_node: args.max_volumes_per_node,
        max_volumes_file: args.max_volumes_file,
    };
    let socket = PathBuf::from(args.endpoint.trim_start_matches("unix://"));
    let driver = Driver::open(cfg)?;
    tracing::info!(
        socket = %socket.display(),
        root = %driver.config().root.display(),
        loop_mode = driver.loop_mode(),
        "cnsreplay-csi serving"
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = move || {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };
    let name = driver.config().name.clone();
    let served = rt.block_on(async {
        let signals = async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .context("SIGTERM handler")?;
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
                () = stopped() => {}
            }
            let _ = stop_tx.send(true);
            anyhow::Ok(())
        };
        // Either server ending (e.g. its socket cannot be bound) stops the other.
        let csi = async {
            let r = csi_driver::serve(driver, &socket, stopped()).await;
            let _ = stop_tx.send(true);
            r
        };
        let registration = async {
            match &args.registration_socket {
                Some(reg) => {
                    tracing::info!(socket = %reg.display(), "serving the kubelet's plugin registration");
                    let r = csi_driver::serve_registration(&name, &socket, reg, stopped()).await;
                    let _ = stop_tx.send(true);
                    r.map(Some)
                }
                None => Ok(None),
            }
        };
        let (sig, served, registered) = tokio::join!(signals, csi, registration);
        sig?;
        let registered = registered.context("plugin registration server")?;
        tracing::info!(?registered, "plugin registration stopped");
        served.context("CSI server")
    })?;
    tracing::info!(?served, "stopped");
    Ok(())
}
