//! The Identity service and the gRPC server on a Unix socket.

use std::future::Future;
use std::path::Path;

use tokio::net::UnixListener;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::{Request, Response, Status};

use crate::driver::{Driver, DriverError};
use crate::pb::controller_server::ControllerServer;
use crate::pb::group_controller_server::GroupControllerServer;
use crate::pb::identity_server::{Identity, IdentityServer};
use crate::pb::node_server::NodeServer;
use crate::pb::snapshot_metadata_server::SnapshotMetadataServer;
use crate::pb::{self, plugin_capability};

/// What `serve` ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// Volumes in the state when the server stopped.
    pub volumes: usize,
    /// Snapshots in the state when the server stopped.
    pub snapshots: usize,
}

/// A listener on the unix socket `socket`, replacing a stale socket file there (a restart)
/// and making its directory; every error names the path.
pub(crate) fn bind_socket(socket: &Path) -> Result<UnixListener, DriverError> {
    if let Ok(m) = fs_err::symlink_metadata(socket)
        && !m.is_dir()
    {
        fs_err::remove_file(socket)?;
    }
    if let Some(dir) = socket.parent() {
        fs_err::create_dir_all(dir)?;
    }
    Ok(UnixListener::bind(socket)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", socket.display())))?)
}

/// Serves Identity, Controller, GroupController, Node and SnapshotMetadata on the Unix socket `socket` (a stale socket file is
/// replaced) until `shutdown` completes.
pub async fn serve(
    driver: Driver,
    socket: &Path,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<Served, DriverError> {
    let listener = bind_socket(socket)?;
    // Containers started after their volume was published get its I/O limits too.
    let limits = (driver.cannot_throttle().is_none())
        .then(|| tokio::spawn(crate::throttle::run(driver.clone(), std::future::pending())));
    let served = tonic::transport::Server::builder()
        .add_service(IdentityServer::new(driver.clone()))
        .add_service(ControllerServer::new(driver.clone()))
        .add_service(GroupControllerServer::new(driver.clone()))
        .add_service(NodeServer::new(driver.clone()))
        .add_service(SnapshotMetadataServer::new(driver.clone()))
        .serve_with_incoming_shutdown(UnixListenerStream::new(listener), shutdown)
        .await;
    if let Some(t) = limits {
        t.abort();
    }
    served?;
    let _ = fs_err::remove_file(socket);
    let st = driver.snapshot_state();
    Ok(Served {
        volumes: st.volumes.len(),
        snapshots: st.snapshots.len(),
    })
}

#[tonic::async_trait]
impl Identity for Driver {
    async fn get_plugin_info(
        &self,
        _request: Request<pb::GetPluginInfoRequest>,
    ) -> Result<Response<pb::GetPluginInfoResponse>, Status> {
        Ok(Response::new(pb::GetPluginInfoResponse {
            name: self.config().name.clone(),
            // The external-provisioner exits when this is empty.
            vendor_version: env!("CARGO_PKG_VERSION").to_owned(),
            manifest: [(
                "mode".to_owned(),
                if self.loop_mode() { "loop" } else { "file" }.to_owned(),
            )]
            .into(),
        }))
    }

    async fn get_plugin_capabilities(
        &self,
        _request: Request<pb::GetPluginCapabilitiesRequest>,
    ) -> Result<Response<pb::GetPluginCapabilitiesResponse>, Status> {
        use plugin_capability::service::Type as S;
        let service = |t: S| pb::PluginCapability {
            r#type: Some(plugin_capability::Type::Service(
                plugin_capability::Service { r#type: t.into() },
            )),
        };
        let mut capabilities = vec![
            service(S::ControllerService),
            service(S::GroupControllerService),
            service(S::SnapshotMetadataService),
        ];
        if self.config().topology {
            capabilities.push(service(S::VolumeAccessibilityConstraints));
        }
        capabilities.push(pb::PluginCapability {
            r#type: Some(plugin_capability::Type::VolumeExpansion(
                plugin_capability::VolumeExpansion {
                    r#type: plugin_capability::volume_expansion::Type::Online.into(),
                },
            )),
        });
        Ok(Response::new(pb::GetPluginCapabilitiesResponse {
            capabilities,
        }))
    }

    async fn probe(
        &self,
        _request: Request<pb::ProbeRequest>,
    ) -> Result<Response<pb::ProbeResponse>, Status> {
        Ok(Response::new(pb::ProbeResponse { ready: Some(true) }))
    }
}
