//! The kubelet's plugin registration (`pluginregistration.v1`), served by the driver itself
//! (no node-driver-registrar): on a socket in the kubelet's `plugins_registry` directory the
//! kubelet calls GetInfo (type `CSIPlugin`, driver name, the CSI socket), then dials the CSI
//! socket (NodeGetInfo) and writes the node's CSINode, then NotifyRegistrationStatus. The
//! socket is removed on shutdown, which the kubelet takes as the plugin's deregistration.
//!
//! The socket's file name must contain an `@`. The kubelet dials the registration socket by
//! its path without `WithAuthority` (unlike its CSI client, which sends `localhost`), so
//! grpc-go sends the path, percent-encoded, as the HTTP/2 `:authority`
//! (`%2Fvar%2Flib%2F…`). The `http` crate under tonic/h2 accepts `%` only in an authority's
//! userinfo and resets every such stream with PROTOCOL_ERROR; an `@` in the file name makes
//! everything before it userinfo, so `csi.cnsreplay.dev@reg.sock` registers and
//! `csi.cnsreplay.dev-reg.sock` never does. [`kubelet_authority`] is that encoding;
//! [`check_socket_name`] refuses a name the kubelet could not reach, before anything listens.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use tokio_stream::wrappers::UnixListenerStream;
use tonic::{Request, Response, Status};

use crate::driver::DriverError;
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

/// The `:authority` the kubelet's gRPC client (grpc-go's `encodeAuthority` of a passthrough
/// target) sends when it dials the registration socket at `path`: every byte outside
/// RFC 3986's unreserved, sub-delims and `:[]@` percent-encoded.
pub fn kubelet_authority(path: &Path) -> String {
    let mut out = String::new();
    for &b in path.as_os_str().as_encoded_bytes() {
        let keep = b.is_ascii_alphanumeric() || b"-_.~!$&'()*+,;=:[]@".contains(&b);
        if keep {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Refuses a registration socket whose path, as the kubelet sends it ([`kubelet_authority`]),
/// the gRPC server here would reject: the file name needs an `@` followed by a plain host
/// name (letters, digits, `-`, `.`), e.g. `csi.cnsreplay.dev@reg.sock`.
pub fn check_socket_name(socket: &Path) -> Result<(), DriverError> {
    let authority = kubelet_authority(socket);
    let name = socket
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let host_ok = name.rsplit_once('@').is_some_and(|(_, host)| {
        !host.is_empty()
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
    });
    if host_ok
        && authority
            .parse::<tonic::codegen::http::uri::Authority>()
            .is_ok()
    {
        return Ok(());
    }
    Err(DriverError::RegistrationSocketName {
        path: socket.to_owned(),
        authority,
    })
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
    check_socket_name(socket)?;
    let endpoint: PathBuf = std::path::absolute(csi_socket)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", csi_socket.display())))?;
    let listener = crate::server::bind_socket(socket)?;
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
