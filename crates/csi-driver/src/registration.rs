//! The kubelet's plugin registration (`pluginregistration.v1`), served by the driver itself
//! (no node-driver-registrar): on a socket in the kubelet's `plugins_registry` directory the
//! kubelet calls GetInfo (type `CSIPlugin`, driver name, the CSI socket), then dials the CSI
//! socket (NodeGetInfo) and writes the node's CSINode, then NotifyRegistrationStatus. The
//! socket is removed on shutdown, which the kubelet takes as the plugin's deregistration.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::net::UnixListener;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::{Request, Response, Status};

use crate::DriverError;
use crate::pb_registration::registration_server::{Registration, RegistrationServer};
use crate::pb_registration::{
    InfoRequest, PluginInfo, RegistrationStatus, RegistrationStatusResponse,
};

/// What the kubelet last reported through NotifyRegistrationStatus.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Registered {
    /// `plugin_registered` of the last notification (false before any).
    pub registered: bool,
    /// Its error text (empty when registered).
    pub error: String,
}

#[derive(Debug, Clone)]
struct Service {
    name: String,
    endpoint: String,
    status: Arc<Mutex<Registered>>,
}

#[tonic::async_trait]
impl Registration for Service {
    async fn get_info(
        &self,
        _request: Request<InfoRequest>,
    ) -> Result<Response<PluginInfo>, Status> {
        Ok(Response::new(PluginInfo {
            r#type: "CSIPlugin".to_owned(),
            name: self.name.clone(),
            endpoint: self.endpoint.clone(),
            supported_versions: vec!["1.0.0".to_owned()],
        }))
    }

    async fn notify_registration_status(
        &self,
        request: Request<RegistrationStatus>,
    ) -> Result<Response<RegistrationStatusResponse>, Status> {
        let st = request.into_inner();
        if st.plugin_registered {
            tracing::info!(driver = %self.name, "registered with the kubelet");
        } else {
            tracing::error!(driver = %self.name, error = %st.error, "the kubelet refused the registration");
        }
        *self.status.lock().unwrap_or_else(PoisonError::into_inner) = Registered {
            registered: st.plugin_registered,
            error: st.error,
        };
        Ok(Response::new(RegistrationStatusResponse {}))
    }
}

/// Serves the registration service for driver `name`, whose CSI socket is `csi_socket`, on
/// `socket` (a stale socket file is replaced; removed on return) until `shutdown` completes.
/// Returns the kubelet's last registration status.
pub async fn serve_registration(
    name: &str,
    csi_socket: &Path,
    socket: &Path,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<Registered, DriverError> {
    let endpoint: PathBuf = std::path::absolute(csi_socket)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", csi_socket.display())))?;
    if let Ok(m) = fs_err::symlink_metadata(socket)
        && !m.is_dir()
    {
        fs_err::remove_file(socket)?;
    }
    if let Some(dir) = socket.parent() {
        fs_err::create_dir_all(dir)?;
    }
    let listener = UnixListener::bind(socket)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", socket.display())))?;
    let status = Arc::new(Mutex::new(Registered::default()));
    let service = Service {
        name: name.to_owned(),
        endpoint: endpoint.to_string_lossy().into_owned(),
        status: Arc::clone(&status),
    };
    let served = tonic::transport::Server::builder()
        .add_service(RegistrationServer::new(service))
        .serve_with_incoming_shutdown(UnixListenerStream::new(listener), shutdown)
        .await;
    let _ = fs_err::remove_file(socket);
    served?;
    let last = status
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    Ok(last)
}
