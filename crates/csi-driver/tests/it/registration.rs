//! The kubelet's plugin registration served by the driver: GetInfo names the driver and its CSI
//! socket, NotifyRegistrationStatus is recorded, the socket is gone after shutdown.

use csi_driver::pb_registration::registration_client::RegistrationClient;
use csi_driver::pb_registration::{InfoRequest, RegistrationStatus};

use crate::harness::connect;

#[tokio::test]
async fn registration_reports_the_driver_and_records_the_kubelets_answer() {
    let tmp = tempfile::tempdir().unwrap();
    let csi = tmp.path().join("csi/csi.sock");
    let reg = tmp
        .path()
        .join("plugins_registry/csi.cnsreplay.dev-reg.sock");
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
    let mut client = RegistrationClient::new(connect(&reg).await);
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
