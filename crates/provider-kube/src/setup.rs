//! `prepare`: the run's namespace, the environment capture (server version, nodes, classes,
//! drivers), the shared watches, the pull check; and the cluster metric scrapes around the
//! clock.

use k8s_openapi::api::core::v1::{Event as CoreEvent, Namespace, Node};
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass, VolumeAttachment};
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, ObjectMeta, PostParams,
};
use kube::runtime::watcher;
use replay::{ProviderError, RunInfo, cluster};
use serde_json::{Value, json};

use crate::context::{Kube, Watches, io_err, uid_detail};
use crate::kube::discovery::{Served, serves};
use crate::kube::metrics::Scrape;
use crate::kube::objects;
use crate::kube::watch::{Watch, keep_all};

impl Kube {
    pub(crate) async fn prepare_async(&self, run: &RunInfo) -> Result<Vec<String>, ProviderError> {
        let mut notices = Vec::new();
        let ns = match &self.config.namespace {
            Some(ns) => ns.clone(),
            None => {
                let ns = format!("cnsreplay-{}", run.run_id);
                let ledger = replay::Ledger::open(&run.run_dir).map_err(io_err)?;
                let id = ns.clone();
                ledger
                    .intend("namespace", &id, Value::Null)
                    .map_err(io_err)?;
                let obj = Namespace {
                    metadata: ObjectMeta {
                        name: Some(ns.clone()),
                        labels: Some([(objects::RUN_LABEL.to_owned(), run.run_id.clone())].into()),
                        ..ObjectMeta::default()
                    },
                    ..Namespace::default()
                };
                let created = self
                    .call(
                        Api::<Namespace>::all(self.client.clone())
                            .create(&PostParams::default(), &obj),
                    )
                    .await?;
                ledger
                    .intend("namespace", &id, uid_detail(&created.metadata))
                    .map_err(io_err)?;
                ns
            }
        };
        let _ = self.ns.set(ns.clone());
        let env = capture(self).await;
        if env.get("volume_snapshot_classes").is_none() {
            notices.push(
                "kube: the VolumeSnapshot API is not installed; snapshot operations will fail"
                    .to_owned(),
            );
        }
        let _ = self.environment.set(env);
        notices.extend(self.ensure_attributes_classes(run).await?);
        let labels = run.owner_label();
        let cfg = watcher::Config::default().labels(&labels);
        let err = |e: String| ProviderError::new("watch_failed", e);
        let l = self.limiter.clone();
        let c = self.client.clone();
        let pvc = Watch::start(
            Api::namespaced(c.clone(), &ns),
            cfg.clone(),
            name_key,
            keep_all,
            l.clone(),
        );
        // A pod's spec is read only for its node: the rest (containers, volumes, the
        // admission's tolerations and token projection) is most of a pod's size, and the
        // watch holds every pod of the run.
        let pod = Watch::start(
            Api::namespaced(c.clone(), &ns),
            cfg.clone(),
            name_key,
            crate::kube::store::pod_node_only,
            l.clone(),
        );
        // PersistentVolumes and VolumeAttachments are made by controllers and carry no run
        // label: these two watches are cluster-wide and cache only the run's objects
        // (kube/foreign.rs). The VolumeAttachment watch starts once the PVs are listed, so that
        // it knows which PVs are foreign. Their lists come in pages of 100, not kube's 500:
        // each page is decoded whole before the filter drops the foreign objects, and with
        // 10 000 foreign PVs and VolumeAttachments 500 cost ~6–13 MB more peak RSS
        // (docs/performance-history.md, watch memory); 10 000 objects take 100 list requests, not 20.
        let foreign = crate::kube::foreign::Foreign::default();
        let pv_va = async {
            let pv = Watch::start_filtered(
                Api::all(c.clone()),
                watcher::Config::default().page_size(100),
                name_key,
                keep_all,
                Some(crate::kube::foreign::keep_pv(ns.clone(), foreign.clone())),
                l.clone(),
            )
            .await?;
            let va = Watch::start_filtered(
                Api::all(c.clone()),
                watcher::Config::default().page_size(100),
                va_key,
                keep_all,
                Some(crate::kube::foreign::keep_va(foreign)),
                l.clone(),
            )
            .await?;
            Ok::<_, String>((pv, va))
        };
        let (pvc, pod, (pv, va)) = futures::try_join!(pvc, pod, pv_va).map_err(err)?;
        let events = match Watch::start(
            Api::namespaced(c.clone(), &ns),
            watcher::Config::default().fields("type=Warning"),
            event_key,
            keep_all,
            l.clone(),
        )
        .await
        {
            Ok(w) => Some(w),
            Err(e) => {
                notices.push(format!(
                    "kube: no Event watch ({e}); failures (ProvisioningFailed, FailedMount, …) \
                     will only show as timeouts"
                ));
                None
            }
        };
        // An optional API the cluster does not serve is known from discovery in one request;
        // starting its watch would instead retry a 404 until the list timeout.
        let snap_served = serves(&c, "snapshot.storage.k8s.io/v1", "volumesnapshots").await;
        let snap = match snap_served {
            Served::No(why) => {
                notices.push(format!(
                    "kube: no VolumeSnapshot watch ({why}); snapshots will fail"
                ));
                None
            }
            Served::Yes | Served::Unknown => match Watch::start(
                Api::namespaced(c.clone(), &ns),
                cfg.clone(),
                name_key,
                keep_all,
                l.clone(),
            )
            .await
            {
                Ok(w) => Some(w),
                Err(e) => {
                    notices.push(format!(
                        "kube: no VolumeSnapshot watch ({e}); snapshots will fail"
                    ));
                    None
                }
            },
        };
        // A cluster without the group snapshot API is common: no notice here, a group
        // snapshot then fails saying why.
        let (groups, groups_missing) = match serves(
            &c,
            "groupsnapshot.storage.k8s.io/v1",
            "volumegroupsnapshots",
        )
        .await
        {
            Served::No(why) => (None, Some(why)),
            Served::Yes | Served::Unknown => {
                match Watch::start(Api::namespaced(c, &ns), cfg, name_key, keep_all, l).await {
                    Ok(w) => (Some(w), None),
                    Err(e) => (None, Some(e)),
                }
            }
        };
        let _ = self.watches.set(Watches {
            pvc,
            pv,
            pod,
            va,
            snap,
            groups,
            groups_missing,
            events,
        });
        if let Some(check) = self.pull_check.get() {
            let t0 = std::time::Instant::now();
            if let Err(e) = self.pull_check(run, check).await {
                // The run ends before its clock: nothing it made stays (its namespace).
                if let Ok(l) = replay::Ledger::open(&run.run_dir)
                    && let Ok(live) = l.live()
                {
                    crate::cleanup::remove_all(self, &run.run_id, Some(&l), &live, true).await;
                }
                return Err(e);
            }
            tracing::info!(
                pods = check.targets.len(),
                seconds = t0.elapsed().as_secs_f64(),
                "pre-flight pull check passed"
            );
        }
        Ok(notices)
    }

    /// Scrapes every configured endpoint now (on the provider's runtime for the API server).
    pub(crate) fn scrape(&self, rt: &tokio::runtime::Runtime) -> Scrape {
        let mut s = Scrape::default();
        for url in &self.config.csi_metrics {
            match crate::kube::metrics::http_get(url) {
                Ok(text) => {
                    for (k, h) in cluster::csi_histograms(&text) {
                        s.csi.entry(k).or_default().add(&h);
                    }
                    for (k, h) in cluster::queue_histograms(&text) {
                        s.queues.entry(k).or_default().add(&h);
                    }
                    if let Some(h) = cluster::client_limiter_histogram(&text) {
                        s.limiters.insert(url.clone(), h);
                    }
                    s.sources.push(url.clone());
                }
                Err(e) => s.errors.push(format!("{url}: {e}")),
            }
        }
        if self.config.apiserver_metrics {
            let req = http::Request::get("/metrics").body(Vec::new());
            let text = match req {
                Ok(r) => rt
                    .block_on(self.client.request_text(r))
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match text {
                Ok(t) => {
                    s.api = cluster::apiserver_histograms(&t);
                    s.apf_wait = cluster::apf_wait_histograms(&t);
                    s.apf_rejected = cluster::apf_rejected_counts(&t);
                    s.sources.push("apiserver /metrics".into());
                }
                Err(e) => s.errors.push(format!("apiserver /metrics: {e}")),
            }
        }
        s
    }
}

fn name_key<K: kube::Resource>(o: &K) -> Option<String> {
    o.meta().name.clone()
}

fn event_key(o: &CoreEvent) -> Option<String> {
    o.involved_object.name.clone()
}

fn va_key(o: &VolumeAttachment) -> Option<String> {
    o.spec.source.persistent_volume_name.clone()
}

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
