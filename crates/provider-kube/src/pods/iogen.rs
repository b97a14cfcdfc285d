//! An iogen pod: its object ([`io_pod`]), a verify-mode writer's written set learnt from its
//! log (`register`, `collect`), and one run of an iogen pod to its end.

use std::path::Path;
use std::time::Instant;

use iogen::written::WriteRecord;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use replay::{OpCtx, ProviderError};
use trace_format::{Event, IoPhase, Name};

use crate::config::KubeConfig;
use crate::context::{Kube, Written, io_err};
use crate::kube::objects::{self, DATA_FILE, PodVolume, k8s_name};
use crate::kube::stamp;
use crate::pods::lifecycle::PodGuard;
use crate::pods::logs::{self, Followed};

/// The pod of an `io_phase` event: what the provider creates, exposed for rendering and
/// review (`deploy/iogen-pod.yaml` is its template form).
pub fn io_pod(
    config: &KubeConfig,
    run_id: &str,
    namespace: &str,
    ev: &Event,
    ph: &IoPhase,
    volume: &PodVolume,
    node: Option<&str>,
) -> Pod {
    let target = if volume.block {
        objects::mount_path(0, true)
    } else {
        format!("{}/{DATA_FILE}", objects::mount_path(0, false))
    };
    iogen_pod(
        config,
        run_id,
        namespace,
        ev,
        ph,
        std::slice::from_ref(volume),
        node,
        objects::iogen_args(ph, &target, ev.id),
    )
}

/// An iogen pod of phase `ph` running `args` over `volumes`: named `<workload>-io-<event
/// id>`, labelled with the `io` role (the `io_phase` pod and the ordered writer's and
/// checker's).
#[allow(clippy::too_many_arguments)]
pub(crate) fn iogen_pod(
    config: &KubeConfig,
    run_id: &str,
    namespace: &str,
    ev: &Event,
    ph: &IoPhase,
    volumes: &[PodVolume],
    node: Option<&str>,
    args: Vec<String>,
) -> Pod {
    let name = k8s_name(&format!("{}-io-{}", ph.workload, ev.id));
    let mut meta = objects::meta(&name, namespace, run_id, ev.tenant.as_deref());
    meta.labels
        .get_or_insert_with(Default::default)
        .insert("cnsreplay.io/role".into(), "io".into());
    objects::pod(
        meta,
        &ph.workload,
        volumes,
        node,
        &config.iogen_image,
        Some(args),
        &config.pod,
    )
}

/// Registers a writing verify-mode phase before its pod starts (a delta while it runs lists
/// it as not checked).
pub(crate) fn register(p: &Kube, ev: &Event, ph: &IoPhase, block: bool) {
    if !objects::records_written(ph) {
        return;
    }
    let unchecked = iogen::delta_check::uncheckable(block, ph.direct)
        .unwrap_or("still running, or its pod's log gave back no complete written set");
    p.state().written.push(Written {
        event: ev.id,
        volume: ph.volume.clone(),
        record: None,
        unchecked: Some(unchecked.to_owned()),
    });
}

/// Reads the written set out of a finished writer's `log`, moves it onto the run clock and
/// writes `io/<event>.written`; a log without a complete set leaves the phase unchecked
/// (saying why), never half-checked.
pub(crate) fn collect(p: &Kube, ev: &Event, log: &str, io_dir: &Path, ctx: &OpCtx) {
    let mut st = p.state();
    let Some(w) = st.written.iter_mut().find(|w| w.event == ev.id) else {
        return;
    };
    if w.unchecked
        .as_deref()
        .is_some_and(|u| !u.starts_with("still running"))
    {
        return;
    }
    let got = match iogen::written_wire::from_log(log) {
        Ok(Some(g)) => g,
        Ok(None) => {
            w.unchecked = Some("its pod's log holds no written set".to_owned());
            return;
        }
        Err(e) => {
            w.unchecked = Some(format!("its pod's written set: {e}"));
            return;
        }
    };
    // The pod's origin on the run clock (ns; before the run's origin: clamped).
    let shift = got.origin_unix_ns - replay::provider::epoch_ns(ctx.origin_wall());
    let on_run = |t: u64| (i128::from(t) + shift).max(0) as u64;
    let mut records: Vec<WriteRecord> = got
        .records
        .iter()
        .map(|r| WriteRecord {
            submitted_ns: on_run(r.submitted_ns),
            acked_ns: on_run(r.acked_ns),
            ..*r
        })
        .collect();
    let path = io_dir.join(format!("{}.written", ev.id));
    match iogen::written::write_records(&path, &mut records) {
        Ok(()) => {
            w.record = Some(path);
            w.unchecked = None;
        }
        Err(e) => w.unchecked = Some(format!("writing its written set: {e}")),
    }
}

/// Whether pod `name` (UID `uid`) in `ns` is still there and not finished, from the pod watch's
/// cache: how long its log is followed.
pub(crate) fn still_running(store: &Store<Pod>, ns: &str, name: &str, uid: &str) -> bool {
    store
        .get(&ObjectRef::new(name).within(ns))
        .is_some_and(|o| {
            o.uid().as_deref() == Some(uid)
                && !matches!(
                    o.status.as_ref().and_then(|s| s.phase.as_deref()),
                    Some("Succeeded" | "Failed")
                )
        })
}

/// How an iogen pod's run ended ([`run_to_end`]).
pub(crate) struct Ended {
    /// `Some(true)`: Succeeded, `Some(false)`: Failed, None: deleted under us (a detach or an
    /// abort stopped it).
    pub(crate) ok: Option<bool>,
    /// When the watch showed that end.
    pub(crate) at: Instant,
    /// Its log as followed (also in `RUNDIR/io/<event id>.log`).
    pub(crate) log: Followed,
}

/// Runs the iogen pod `pod` of event `id` (an I/O pod of `workload`, listed in its `io_pods`
/// while it runs) to its end: creates it, waits until it runs (saying `waiting` meanwhile;
/// a pod that will not start, or whose wait is dropped, is deleted by its guard and taken off
/// the workload's list), stamps `running`, follows its log into `RUNDIR/io/<id>.log` (each
/// line also to `live`) until the watch shows it Succeeded, Failed or gone. The pod stays
/// listed: the caller stamps the end, reads the log, then [`finish`]es it as its op needs.
///
/// One run for the per-event `io_phase` pod and the ordered writer's and checker's pods. A
/// bare-`io` stream pod is not run to an end (it is attached and fed over stdin, ended by its
/// stream); it shares [`still_running`]. Changed-block tracking reads the written set out of
/// an `io_phase` pod's log ([`collect`]).
pub(crate) async fn run_to_end(
    p: &Kube,
    ctx: &OpCtx,
    id: u64,
    workload: &Name,
    pod: &Pod,
    waiting: String,
    live: impl FnMut(&str),
) -> Result<Ended, ProviderError> {
    let ns = p.ns()?;
    let name = pod.meta().name.clone().unwrap_or_default();
    let created = p.create(ctx, "pod", pod, Some(&p.watches()?.pod)).await?;
    let uid = created.uid().unwrap_or_default();
    if let Some(w) = p.state().workloads.get_mut(workload) {
        w.io_pods.push(name.clone());
    }
    let w = &p.watches()?.pod;
    p.waiting(ctx, waiting);
    // A pod that will not start (or whose wait is dropped: the op's timeout, a stop) must
    // not hold its volume or keep trying: the guard deletes it.
    let mut guard = PodGuard::new(p, ns, &name, &uid);
    let at = match p.wait_started(ctx, &name, &uid).await {
        Ok(at) => at,
        Err(e) => {
            forget(p, workload, &name);
            return Err(e);
        }
    };
    guard.disarm();
    stamp::phase_at(ctx, "running", at);
    ctx.io_started();
    let io_dir = p.run()?.run_dir.join("io");
    fs_err::create_dir_all(&io_dir).map_err(io_err)?;
    let api: Api<Pod> = Api::namespaced(p.client.clone(), ns);
    // The pod's own state, from the watch: still there (this uid) and not finished.
    let running = || still_running(w.store(), ns, &name, &uid);
    let log_path = io_dir.join(format!("{id}.log"));
    let follow = logs::follow(&api, &name, "iogen", &log_path, running, live);
    let finished = w.wait_for(&name, |s| {
        let Some(o) = s.get(&ObjectRef::new(&name).within(ns)) else {
            return Some(None);
        };
        match o.status.as_ref()?.phase.as_deref() {
            Some("Succeeded") => Some(Some(true)),
            Some("Failed") => Some(Some(false)),
            _ => None,
        }
    });
    let (followed, (ok, at)) = tokio::join!(follow, finished);
    Ok(Ended {
        ok,
        at,
        log: followed?,
    })
}

/// Deletes a finished iogen pod `name` (gone already is fine) and takes it off `workload`'s
/// I/O pods.
pub(crate) async fn finish(
    p: &Kube,
    ctx: &OpCtx,
    workload: &Name,
    name: &str,
) -> Result<(), ProviderError> {
    p.stop_pod(ctx, name, &[], None, Some(0))
        .await
        .or_else(|e| {
            if e.class == "not_found" {
                Ok(())
            } else {
                Err(e)
            }
        })?;
    forget(p, workload, name);
    Ok(())
}

/// Takes iogen pod `name` off `workload`'s I/O pods.
pub(crate) fn forget(p: &Kube, workload: &Name, name: &str) {
    if let Some(w) = p.state().workloads.get_mut(workload) {
        w.io_pods.retain(|n| *n != name);
    }
}
