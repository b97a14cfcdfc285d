//! Cleanup: removes the run's ledger objects after a run (or a crash) — pods, then
//! VolumeSnapshots, then PVCs (and waits for their `Delete`-policy PVs to go, so the volumes'
//! attachments and storage are gone too), then the run's namespace, then uncordons — each
//! with a UID precondition, so nothing the run did not create is ever deleted.
//!
//! Without the ledger (the client machine lost, the run's pod deleted), [`find_run_objects`]
//! finds the same objects on the cluster: every object the run creates carries its run label
//! (`cnsreplay.io/run=<run id>`, the run id unique), and a node it cordons carries the
//! [`CORDON_ANNOTATION`]; what is found is removed the same way, by the UID it was found with.

use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use replay::RunInfo;
use replay::ledger::LedgerEntry;
use replay::provider::CleanupReport;
use serde_json::json;

use crate::context::Kube;
use crate::kube::nodes::CORDON_ANNOTATION;
use crate::kube::objects::{self, VolumeSnapshot};
use crate::kube::request::delete_params;

/// Order in which cleanup removes kinds: users before what they use.
fn rank(kind: &str) -> u8 {
    match kind {
        "pod" => 0,
        // A group's member VolumeSnapshots go with it.
        "volumesnapshot" | "volumegroupsnapshot" => 1,
        "pvc" => 2,
        // Its protection finalizer holds a class until no claim uses it.
        "namespace" | "volumeattributesclass" => 3,
        _ => 4,
    }
}

const CLEANUP_WAIT: Duration = Duration::from_secs(120);
/// Objects removed at once (each with its own watch until it is gone); the client's QPS
/// limit paces the deletes themselves.
const CLEANUP_CONCURRENCY: usize = 64;

/// Removes one ledger entry. Ok(true): deleted; Ok(false): already gone or not ours.
/// With `stopped` (the cleanup of a run stopped by Ctrl-C) a namespace is deleted but its
/// finalization is not waited for: everything the run made in it was removed (and waited
/// for) before, by [`rank`], and the namespace controller's own sweep of an empty namespace
/// takes seconds, more than the 2 s a stopped run has to exit.
async fn remove(p: &Kube, run_id: &str, e: &LedgerEntry, stopped: bool) -> Result<bool, String> {
    let uid = e
        .detail
        .get("uid")
        .and_then(|u| u.as_str())
        .map(str::to_owned);
    let (ns, name) = match e.id.split_once('/') {
        Some((ns, n)) => (Some(ns), n),
        None => (None, e.id.as_str()),
    };
    let c = p.client.clone();
    macro_rules! delete_owned {
        ($api:expr) => {
            delete_owned!($api, true)
        };
        ($api:expr, $wait:expr) => {{
            let api = $api;
            p.limiter.acquire().await;
            let cur = api.get_opt(name).await.map_err(|e| e.to_string())?;
            let Some(cur) = cur else { return Ok(false) };
            let cur_uid = cur.uid().unwrap_or_default();
            let ours = match &uid {
                Some(u) => *u == cur_uid,
                // Crashed between create and recording the UID: ours only if it carries this
                // run's label (the run id is unique).
                None => cur.labels().get(objects::RUN_LABEL).map(String::as_str) == Some(run_id),
            };
            if !ours {
                return Ok(false);
            }
            p.limiter.acquire().await;
            match api
                .delete(name, &delete_params(Some(cur_uid.clone()), None))
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => return Ok(false),
                Err(e) => return Err(e.to_string()),
            }
            if !$wait {
                tracing::info!(
                    "{} {}: deleted; not waiting for its finalization after the stop",
                    e.kind,
                    e.id
                );
                return Ok(true);
            }
            tokio::time::timeout(
                CLEANUP_WAIT,
                await_condition(api, name, conditions::is_deleted(&cur_uid)),
            )
            .await
            .map_err(|_| format!("still there after {CLEANUP_WAIT:?}"))?
            .map_err(|e| e.to_string())?;
            Ok(true)
        }};
    }
    match (e.kind.as_str(), ns) {
        ("pod", Some(ns)) => delete_owned!(Api::<Pod>::namespaced(c, ns)),
        ("pvc", Some(ns)) => {
            // Its PV, when the provisioner deletes it with the claim: the run is not clean
            // until that PV (and with it the volume's attachment and storage) is gone too. We
            // only wait for it; the PV is the provisioner's to delete.
            let api = Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns);
            p.limiter.acquire().await;
            let pv_name = api
                .get_opt(name)
                .await
                .ok()
                .flatten()
                .and_then(|o| o.spec?.volume_name);
            let removed = async { delete_owned!(api) }.await?;
            if let Some(pv_name) = pv_name {
                wait_pv_deleted(p, &c, &pv_name).await?;
            }
            Ok(removed)
        }
        ("volumesnapshot", Some(ns)) => delete_owned!(Api::<VolumeSnapshot>::namespaced(c, ns)),
        ("volumegroupsnapshot", Some(ns)) => {
            delete_owned!(Api::<objects::VolumeGroupSnapshot>::namespaced(c, ns))
        }
        ("namespace", None) => delete_owned!(
            Api::<k8s_openapi::api::core::v1::Namespace>::all(c),
            !stopped
        ),
        ("volumeattributesclass", None) => {
            delete_owned!(Api::<k8s_openapi::api::storage::v1::VolumeAttributesClass>::all(c))
        }
        ("cordon", None) => {
            let api: Api<Node> = Api::all(c);
            // Cordoned by another run since (or by someone who also annotated it): not ours.
            let Some(n) = owned_node(p, &api, name, uid.as_deref(), CORDON_ANNOTATION, |r| {
                r.is_none_or(|r| r == run_id)
            })
            .await?
            else {
                return Ok(false);
            };
            if n.spec.as_ref().and_then(|s| s.unschedulable) != Some(true) {
                return Ok(false);
            }
            p.limiter.acquire().await;
            api.patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({
                    "metadata": {"annotations": {CORDON_ANNOTATION: null}},
                    "spec": {"unschedulable": false},
                })),
            )
            .await
            .map_err(|e| e.to_string())?;
            Ok(true)
        }
        ("out-of-service", None) => {
            let api: Api<Node> = Api::all(c);
            // Tainted by someone else since (or annotated by another run): not ours.
            if owned_node(
                p,
                &api,
                name,
                uid.as_deref(),
                crate::kube::nodes::OUT_OF_SERVICE_ANNOTATION,
                |r| r == Some(run_id),
            )
            .await?
            .is_none()
            {
                return Ok(false);
            }
            crate::kube::nodes::patch_taint(&p.limiter, &api, name, None)
                .await
                .map_err(|e| e.to_string())?;
            Ok(true)
        }
        (k, _) => Err(format!("unknown ledger kind {k:?}")),
    }
}

/// Node `name` when it is still the node the ledger recorded (`uid`) and its `annotation`
/// (the run that marked it) passes `ours`; `None` otherwise.
async fn owned_node(
    p: &Kube,
    api: &Api<Node>,
    name: &str,
    uid: Option<&str>,
    annotation: &str,
    ours: impl Fn(Option<&str>) -> bool,
) -> Result<Option<Node>, String> {
    p.limiter.acquire().await;
    let Some(n) = api.get_opt(name).await.map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    if uid.is_some() && n.uid().as_deref() != uid {
        return Ok(None);
    }
    let mark = n.annotations().get(annotation).map(String::as_str);
    Ok(ours(mark).then_some(n))
}

/// Waits until PV `name` is gone when its reclaim policy is `Delete` (a `Retain` PV stays).
async fn wait_pv_deleted(p: &Kube, c: &kube::Client, name: &str) -> Result<(), String> {
    let api: Api<PersistentVolume> = Api::all(c.clone());
    p.limiter.acquire().await;
    let Some(pv) = api.get_opt(name).await.map_err(|e| e.to_string())? else {
        return Ok(());
    };
    let reclaim = pv
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_reclaim_policy.as_deref());
    if reclaim != Some("Delete") {
        return Ok(());
    }
    let uid = pv.uid().unwrap_or_default();
    tokio::time::timeout(
        CLEANUP_WAIT,
        await_condition(api, name, conditions::is_deleted(&uid)),
    )
    .await
    .map_err(|_| format!("its PV {name} still there after {CLEANUP_WAIT:?}"))?
    .map_err(|e| e.to_string())?;
    Ok(())
}

/// Removes the ledger's leftovers: pods, then snapshots, then PVCs, then the run's
/// namespace, then uncordons; each group in parallel, each object with a UID precondition.
pub(crate) async fn cleanup(p: &Kube, run: &RunInfo, leftovers: &[LedgerEntry]) -> CleanupReport {
    let ledger = replay::Ledger::open(&run.run_dir).ok();
    remove_all(p, &run.run_id, ledger.as_ref(), leftovers, run.stopped()).await
}

/// Finds run `run_id`'s objects on the cluster, without its ledger: pods, VolumeSnapshots,
/// PVCs and namespaces carrying its run label (in every namespace), and nodes carrying its
/// [`CORDON_ANNOTATION`], as ledger entries with the UID each was found with.
pub(crate) async fn find_run_objects(
    p: &Kube,
    run_id: &str,
    namespace: Option<&str>,
) -> Result<Vec<LedgerEntry>, String> {
    let lp = ListParams::default().labels(&format!("{}={run_id}", objects::RUN_LABEL));
    let c = p.client.clone();
    // In one namespace when the run worked in one it was given (credentials of a namespaced
    // Role cannot list cluster-wide), else in all.
    fn api<K>(c: &kube::Client, ns: Option<&str>) -> Api<K>
    where
        K: kube::Resource<Scope = kube::core::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        match ns {
            Some(ns) => Api::namespaced(c.clone(), ns),
            None => Api::all(c.clone()),
        }
    }
    let entry = |kind: &str, m: &kube::core::ObjectMeta| LedgerEntry {
        kind: kind.to_owned(),
        id: match &m.namespace {
            Some(ns) => format!("{ns}/{}", m.name.as_deref().unwrap_or_default()),
            None => m.name.clone().unwrap_or_default(),
        },
        detail: json!({ "uid": m.uid }),
    };
    let mut out = Vec::new();
    p.limiter.acquire().await;
    for o in api::<Pod>(&c, namespace)
        .list(&lp)
        .await
        .map_err(|e| e.to_string())?
    {
        out.push(entry("pod", &o.metadata));
    }
    p.limiter.acquire().await;
    match api::<VolumeSnapshot>(&c, namespace).list(&lp).await {
        Ok(l) => out.extend(l.items.iter().map(|o| entry("volumesnapshot", &o.metadata))),
        // No snapshot CRD on this cluster: the run made none.
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => return Err(e.to_string()),
    }
    p.limiter.acquire().await;
    match api::<objects::VolumeGroupSnapshot>(&c, namespace)
        .list(&lp)
        .await
    {
        Ok(l) => out.extend(
            l.items
                .iter()
                .map(|o| entry("volumegroupsnapshot", &o.metadata)),
        ),
        // No group snapshot CRD on this cluster: the run made none.
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => return Err(e.to_string()),
    }
    p.limiter.acquire().await;
    for o in api::<PersistentVolumeClaim>(&c, namespace)
        .list(&lp)
        .await
        .map_err(|e| e.to_string())?
    {
        out.push(entry("pvc", &o.metadata));
    }
    if namespace.is_none() {
        p.limiter.acquire().await;
        for o in Api::<k8s_openapi::api::core::v1::Namespace>::all(c.clone())
            .list(&lp)
            .await
            .map_err(|e| e.to_string())?
        {
            out.push(entry("namespace", &o.metadata));
        }
    }
    p.limiter.acquire().await;
    match Api::<k8s_openapi::api::storage::v1::VolumeAttributesClass>::all(c.clone())
        .list(&lp)
        .await
    {
        Ok(l) => out.extend(
            l.items
                .iter()
                .map(|o| entry("volumeattributesclass", &o.metadata)),
        ),
        // No such API (before 1.34), or credentials that may not list cluster-scoped
        // classes: the run could not have made one either.
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 403 => {}
        Err(e) => return Err(e.to_string()),
    }
    p.limiter.acquire().await;
    for n in Api::<Node>::all(c)
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?
    {
        if n.annotations().get(CORDON_ANNOTATION).map(String::as_str) == Some(run_id) {
            out.push(entry("cordon", &n.metadata));
        }
        if n.annotations()
            .get(crate::kube::nodes::OUT_OF_SERVICE_ANNOTATION)
            .map(String::as_str)
            == Some(run_id)
        {
            out.push(entry("out-of-service", &n.metadata));
        }
    }
    Ok(out)
}

/// Removes `leftovers` in [`rank`] order, each group in parallel (at most
/// [`CLEANUP_CONCURRENCY`] at once), releasing each from the
/// ledger (when there is one) once gone (a namespace, after a stop, once deleted: see
/// [`remove`]).
pub(crate) async fn remove_all(
    p: &Kube,
    run_id: &str,
    ledger: Option<&replay::Ledger>,
    leftovers: &[LedgerEntry],
    stopped: bool,
) -> CleanupReport {
    let mut report = CleanupReport::default();
    let mut sorted: Vec<&LedgerEntry> = leftovers.iter().collect();
    sorted.sort_by_key(|e| rank(&e.kind));
    for r in 0..=4 {
        let group: Vec<&LedgerEntry> = sorted
            .iter()
            .copied()
            .filter(|e| rank(&e.kind) == r)
            .collect();
        if group.is_empty() {
            continue;
        }
        let (t0, n, kind) = (std::time::Instant::now(), group.len(), &group[0].kind);
        // Bounded: each removal holds a watch of its object until it is gone, and a run's
        // leftovers may be thousands.
        let results: Vec<(&LedgerEntry, Result<bool, String>)> = futures::stream::iter(group)
            .map(|e| async move { (e, remove(p, run_id, e, stopped).await) })
            .buffer_unordered(CLEANUP_CONCURRENCY)
            .collect()
            .await;
        // Where a cleanup's time goes (the cluster's controllers set its pace).
        tracing::debug!("cleanup: {n} {kind} object(s) done in {:?}", t0.elapsed());
        for (e, res) in results {
            match res {
                Ok(removed) => {
                    if removed {
                        report.removed += 1;
                    } else {
                        report.already_gone += 1;
                    }
                    if let Some(l) = ledger {
                        let _ = l.release(&e.kind, &e.id);
                    }
                }
                Err(m) => report.failed.push(format!("{} {}: {m}", e.kind, e.id)),
            }
        }
    }
    report
}
