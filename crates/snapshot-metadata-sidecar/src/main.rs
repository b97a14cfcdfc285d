//! `cnsreplay-snapshot-metadata-sidecar`: what stands in for the upstream
//! `external-snapshot-metadata` sidecar on testenv (its Go module is refused by the module
//! proxy here, so it cannot be built; `testenv/README.md` says so). It is not that component
//! and does not claim to be: it implements the same published contract so that cnsreplay's
//! client runs the path users run — SnapshotMetadataService object → audience-scoped token →
//! TLS → `snapshotmetadata.SnapshotMetadata` — against a real API server:
//!
//! - every call's token is checked with a TokenReview for the audience of the
//!   SnapshotMetadataService named after the driver, then a SubjectAccessReview asks whether
//!   that user may `get` VolumeSnapshots in the request's namespace (UNAUTHENTICATED,
//!   PERMISSION_DENIED otherwise), as upstream does;
//! - the VolumeSnapshot named in the request must be ready and bound to a ready
//!   VolumeSnapshotContent of this driver; its `snapshotHandle` goes to the CSI driver's own
//!   SnapshotMetadata service on its Unix socket, whose streamed answers are passed on as
//!   they come (UNAVAILABLE while a snapshot is not ready, as upstream).
//!
//! Left out, because cnsreplay-csi needs none of it: the snapshotter secrets upstream passes
//! to the driver, its metrics and its leader-less multi-replica setup.

mod serve;

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Parser;

/// Serves the Kubernetes SnapshotMetadata API in front of a CSI driver's SnapshotMetadata
/// service (testenv's stand-in for the external-snapshot-metadata sidecar).
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// The CSI driver's Unix socket (a `unix://` prefix is accepted).
    #[arg(long)]
    csi_address: String,
    /// The CSI driver's name: the SnapshotMetadataService object of that name gives the
    /// audience, and only its snapshots are served.
    #[arg(long)]
    driver: String,
    /// TCP address to listen on (port 0: any free port; see --address-file).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Writes the bound `host:port` here once listening.
    #[arg(long)]
    address_file: Option<PathBuf>,
    /// PEM certificate of the TLS server.
    #[arg(long)]
    tls_cert: PathBuf,
    /// PEM key of the TLS server.
    #[arg(long)]
    tls_key: PathBuf,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let a = Args::parse();
    let kube = kube::Client::try_default()
        .await
        .context("a Kubernetes client (KUBECONFIG or in-cluster)")?;
    let socket = PathBuf::from(a.csi_address.trim_start_matches("unix://"));
    serve::run(serve::Config {
        kube,
        socket,
        driver: a.driver,
        listen: a.listen,
        address_file: a.address_file,
        cert: fs_err::read(&a.tls_cert)?,
        key: fs_err::read(&a.tls_key)?,
    })
    .await
}
