//! An iogen pod: its object ([`io_pod`]), a verify-mode writer's written set learnt from its
//! log (`register`, `collect`), and one run of an iogen pod to its end.

use std::path::Path;

use iogen::written::WriteRecord;
use k8s_openapi::api::core::v1::Pod;
use replay::OpCtx;
use trace_format::{Event, IoPhase};

use crate::config::KubeConfig;
use crate::context::{Kube, Written};
use crate::kube::objects::{self, DATA_FILE, PodVolume, k8s_name};

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
    let block = volume.block;
    let name = k8s_name(&format!("{}-io-{}", ph.workload, ev.id));
    let mut meta = objects::meta(&name, namespace, run_id, ev.tenant.as_deref());
    meta.labels
        .get_or_insert_with(Default::default)
        .insert("cnsreplay.io/role".into(), "io".into());
    let target = if block {
        objects::mount_path(0, true)
    } else {
        format!("{}/{DATA_FILE}", objects::mount_path(0, false))
    };
    objects::pod(
        meta,
        &ph.workload,
        std::slice::from_ref(volume),
        node,
        &config.iogen_image,
        Some(objects::iogen_args(ph, &target, ev.id)),
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
