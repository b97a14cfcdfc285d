//! Environment capture (the seed paper's U1: say what the numbers were measured on): server
//! version, nodes, StorageClasses with their provisioners (and whether each is a CSI driver),
//! CSIDrivers and VolumeSnapshotClasses. Anything the credentials may not read is recorded as an error string
//! in its place rather than failing the run.

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde_json::{Value, json};

use crate::Kube;

fn err_value(e: &kube::Error) -> Value {
    json!({ "error": e.to_string() })
}

/// Captures the cluster as seen by the provider's client.
pub(crate) async fn capture(p: &Kube) -> Value {
    let c = p.client.clone();
    let lp = ListParams::default();
    let mut out = serde_json::Map::new();
    p.limiter.acquire().await;
    out.insert(
        "server_version".into(),
        match c.apiserver_version().await {
            Ok(v) => json!({
                "git_version": v.git_version,
                "major": v.major,
                "minor": v.minor,
                "platform": v.platform,
            }),
            Err(e) => err_value(&e),
        },
    );
    p.limiter.acquire().await;
    out.insert(
        "nodes".into(),
        match Api::<Node>::all(c.clone()).list(&lp).await {
            Ok(l) => l
                .items
                .iter()
                .map(|n| {
                    let st = n.status.as_ref();
                    let info = st.and_then(|s| s.node_info.as_ref());
                    json!({
                        "name": n.metadata.name,
                        "unschedulable": n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false),
                        "kubelet_version": info.map(|i| i.kubelet_version.clone()),
                        "os_image": info.map(|i| i.os_image.clone()),
                        "kernel": info.map(|i| i.kernel_version.clone()),
                        "container_runtime": info.map(|i| i.container_runtime_version.clone()),
                        "capacity": st.and_then(|s| s.capacity.as_ref()).map(|c| {
                            c.iter().map(|(k, v)| (k.clone(), json!(v.0))).collect::<serde_json::Map<_, _>>()
                        }),
                        "labels": n.metadata.labels,
                    })
                })
                .collect(),
            Err(e) => err_value(&e),
        },
    );
    // Which provisioners are CSI drivers (a CSIDriver object of that name), for each class.
    p.limiter.acquire().await;
    let drivers = Api::<CSIDriver>::all(c.clone()).list(&lp).await;
    let csi = |prov: &str| {
        drivers.as_ref().ok().map(|l| {
            l.items
                .iter()
                .any(|d| d.metadata.name.as_deref() == Some(prov))
        })
    };
    p.limiter.acquire().await;
    out.insert(
        "storage_classes".into(),
        match Api::<StorageClass>::all(c.clone()).list(&lp).await {
            Ok(l) => l
                .items
                .iter()
                .map(|s| {
                    let default = s.metadata.annotations.as_ref().is_some_and(|a| {
                        a.get("storageclass.kubernetes.io/is-default-class")
                            .is_some_and(|v| v == "true")
                    });
                    json!({
                        "name": s.metadata.name,
                        "provisioner": s.provisioner,
                        "volume_binding_mode": s.volume_binding_mode,
                        "reclaim_policy": s.reclaim_policy,
                        "allow_volume_expansion": s.allow_volume_expansion,
                        "parameters": s.parameters,
                        "default": default,
                        "csi": csi(&s.provisioner),
                    })
                })
                .collect(),
            Err(e) => err_value(&e),
        },
    );
    out.insert(
        "csi_drivers".into(),
        match &drivers {
            Ok(l) => l
                .items
                .iter()
                .map(|d| {
                    json!({
                        "name": d.metadata.name,
                        "attach_required": d.spec.attach_required,
                        "pod_info_on_mount": d.spec.pod_info_on_mount,
                        "storage_capacity": d.spec.storage_capacity,
                        "volume_lifecycle_modes": d.spec.volume_lifecycle_modes,
                    })
                })
                .collect(),
            Err(e) => err_value(e),
        },
    );
    let gvk = GroupVersionKind::gvk("snapshot.storage.k8s.io", "v1", "VolumeSnapshotClass");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "volumesnapshotclasses");
    p.limiter.acquire().await;
    match Api::<DynamicObject>::all_with(c, &ar).list(&lp).await {
        Ok(l) => {
            let v: Vec<Value> = l
                .items
                .iter()
                .map(|o| {
                    json!({
                        "name": o.metadata.name,
                        "driver": o.data.get("driver"),
                        "deletion_policy": o.data.get("deletionPolicy"),
                        "parameters": o.data.get("parameters"),
                    })
                })
                .collect();
            out.insert("volume_snapshot_classes".into(), v.into());
        }
        // 404: the snapshot CRDs are not installed; the key stays absent.
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => {
            out.insert("volume_snapshot_classes".into(), err_value(&e));
        }
    }
    Value::Object(out)
}
