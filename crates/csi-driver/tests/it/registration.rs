//! The kubelet's plugin registration served by the driver: GetInfo names the driver and its CSI
//! socket, NotifyRegistrationStatus is recorded, the socket is gone after shutdown.

use csi_driver::pb_registration::registration_client::RegistrationClient;
use csi_driver::pb_registration::{InfoRequest, RegistrationStatus};

use std::path::Path;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint};

/// Connects as the kubelet does: HTTP/2 with the socket path, percent-encoded, as `:authority`.
async fn connect_as_the_kubelet(socket: &Path) -> Result<Channel, tonic::transport::Error> {
    let path = socket.to_owned();
    let uri = format!("http://{}", csi_driver::kubelet_authority(socket));
    Endpoint::from_shared(uri)
        .expect("the authority parses")
        .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
            let p = path.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(p).await?)) }
        }))
        .await
}

#[tokio::test]
async fn registration_reports_the_driver_and_records_the_kubelets_answer() {
    let tmp = tempfile::tempdir().unwrap();
    let csi = tmp.path().join("csi/csi.sock");
    let reg = tmp
        .path()
        .join("plugins_registry/csi.cnsreplay.dev@reg.sock");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn({
        let (csi, reg) = (csi.clone(), reg.clone());
        async move {
            csi_driver::serve_registration("csi.cnsreplay.dev", &csi, &reg, async {
                let _ = stopped.await;
            })
            .await
        }
    });
    for _ in 0..200 {
        if reg.exists() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let mut client = RegistrationClient::new(connect_as_the_kubelet(&reg).await.unwrap());
    let info = client.get_info(InfoRequest {}).await.unwrap().into_inner();
    assert_eq!(info.r#type, "CSIPlugin");
    assert_eq!(info.name, "csi.cnsreplay.dev");
    assert_eq!(info.endpoint, csi.display().to_string());
    assert_eq!(info.supported_versions, ["1.0.0"]);
    client
        .notify_registration_status(RegistrationStatus {
            plugin_registered: false,
            error: "version 1.0.0 not supported".into(),
        })
        .await
        .unwrap();
    stop.send(()).unwrap();
    let last = server.await.unwrap().unwrap();
    assert!(!last.registered);
    assert_eq!(last.error, "version 1.0.0 not supported");
    assert!(
        !reg.exists(),
        "the registration socket is removed on shutdown"
    );
}

#[test]
fn a_socket_name_the_kubelet_cannot_reach_is_refused_with_the_authority_it_would_send() {
    let bad = Path::new("/var/lib/kubelet/plugins_registry/csi.cnsreplay.dev-reg.sock");
    assert_eq!(
        csi_driver::kubelet_authority(bad),
        "%2Fvar%2Flib%2Fkubelet%2Fplugins_registry%2Fcsi.cnsreplay.dev-reg.sock"
    );
    let err = csi_driver::check_socket_name(bad).unwrap_err().to_string();
    assert!(err.contains("csi.cnsreplay.dev-reg.sock"), "{err}");
    assert!(err.contains("%2Fvar%2Flib"), "{err}");
    assert!(err.contains("put an `@`"), "{err}");
    for bad in [
        "/r/plugins_registry/x@",
        "/r/plugins_registry/x@y%z.sock",
        "/r/a@b/plugins_registry/x.sock",
    ] {
        assert!(
            csi_driver::check_socket_name(Path::new(bad)).is_err(),
            "{bad}"
        );
    }
    let good = Path::new("/var/lib/kubelet/plugins_registry/csi.cnsreplay.dev@reg.sock");
    csi_driver::check_socket_name(good).unwrap();
}

/// What the kubelet met before the rule: a server on a name without `@` resets its streams.
#[test]
fn the_kubelets_authority_without_an_at_sign_is_what_the_server_rejects() {
    let authority = csi_driver::kubelet_authority(Path::new("/tmp/x/csi-reg.sock"));
    assert!(
        authority
            .parse::<tonic::codegen::http::uri::Authority>()
            .is_err(),
        "{authority}: if this parses, the `@` rule is no longer needed"
    );
}
