//! `io_phase` on a cluster: a pod running the `iogen` image, pinned to the workload's node,
//! mounting the one volume, running `iogen phase` with its interval log on stdout. The log is
//! followed while the pod runs (`logs.rs`: kept in `RUNDIR/io/<event id>.log` as it arrives,
//! across the kubelet's log rotation and dropped connections), so a pod deleted by a detach
//! or an abort still leaves what it measured until then. Its HdrHistogram lines are kept in
//! `RUNDIR/io/<event id>.hlog`, and each interval is put on the with/without-snapshot side of
//! the run's I/O split by whether a snapshot was in flight during it (interval times are
//! offsets from the pod's start, so the split is as exact as the pod's start time).

use std::fmt::Write as _;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use replay::provider::IoReport;
use replay::{OpCtx, ProviderError};
use trace_format::{Event, IoPhase};

use crate::objects::{self, DATA_FILE, PodVolume, k8s_name};
use crate::{Kube, KubeConfig, io_err, stamp};

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

pub(crate) async fn io_phase(
    p: &Kube,
    ev: &Event,
    ph: &IoPhase,
    ctx: &OpCtx,
) -> Result<(), ProviderError> {
    // The earliest the pod's iogen can have started its clock.
    let call_ns = ctx.now_ns();
    let ns = p.ns()?;
    let wl = p
        .state()
        .workloads
        .get(&ph.workload)
        .cloned()
        .ok_or_else(|| {
            ProviderError::new(
                "not_found",
                format!("workload {:?} is not attached", ph.workload),
            )
        })?;
    if !wl.volumes.contains(&ph.volume) {
        return Err(ProviderError::new(
            "not_found",
            format!(
                "workload {:?} does not mount volume {:?}",
                ph.workload, ph.volume
            ),
        ));
    }
    let vol = p
        .state()
        .volumes
        .get(&ph.volume)
        .cloned()
        .ok_or_else(|| ProviderError::new("not_found", format!("volume {:?}", ph.volume)))?;
    if p.config.io_exec == crate::IoExec::Local {
        return crate::io_local::io_phase(p, ev, ph, ctx, &vol.pvc, vol.block, wl.node.as_deref())
            .await;
    }
    crate::cbt::register(p, ev, ph, vol.block);
    let pod = io_pod(
        &p.config,
        &p.run()?.run_id,
        ns,
        ev,
        ph,
        &PodVolume {
            claim: vol.pvc.clone(),
            block: vol.block,
        },
        wl.node.as_deref(),
    );
    let name = pod.meta().name.clone().unwrap_or_default();
    let created = p.create(ctx, "pod", &pod, Some(&p.watches()?.pod)).await?;
    let uid = created.uid().unwrap_or_default();
    if let Some(w) = p.state().workloads.get_mut(&ph.workload) {
        w.io_pods.push(name.clone());
    }
    let w = &p.watches()?.pod;
    p.waiting(
        ctx,
        format!(
            "iogen pod {ns}/{name} (image {}) to start{}",
            p.config.iogen_image,
            wl.node
                .as_deref()
                .map(|n| format!(" on node {n}"))
                .unwrap_or_default()
        ),
    );
    // A pod that will not start (or whose wait is dropped: the op's timeout, a stop) must
    // not hold its volume or keep trying: the guard deletes it.
    let mut guard = crate::ops::PodGuard::new(p, ns, &name, &uid);
    let started = p.wait_started(ctx, &name, &uid).await;
    if started.is_err()
        && let Some(w) = p.state().workloads.get_mut(&ph.workload)
    {
        w.io_pods.retain(|n| *n != name);
    }
    let at = started?;
    guard.disarm();
    stamp::phase_at(ctx, "running", at);
    ctx.io_started();
    let io_dir = p.run()?.run_dir.join("io");
    std::fs::create_dir_all(&io_dir).map_err(io_err)?;
    let api: Api<Pod> = Api::namespaced(p.client.clone(), ns);
    // The pod's own state, from the watch: still there (this uid) and not finished.
    let running = || {
        let store = w.store();
        store
            .get(&ObjectRef::new(&name).within(ns))
            .is_some_and(|o| {
                o.uid().as_deref() == Some(&uid)
                    && !matches!(
                        o.status.as_ref().and_then(|s| s.phase.as_deref()),
                        Some("Succeeded" | "Failed")
                    )
            })
    };
    let log_path = io_dir.join(format!("{}.log", ev.id));
    // iogen prints an interval histogram every 200 ms (`iogen_args`): the live per-tenant
    // I/O metrics.
    let mut feed = iogen::IntervalFeed::default();
    let live = |line: &str| {
        if line.starts_with("Tag=")
            && let Ok(ivs) = feed.push(format!("{line}\n").as_bytes())
        {
            for (kind, h) in ivs {
                ctx.io_interval(&kind, &h);
            }
        }
    };
    let follow = crate::logs::follow(&api, &name, "iogen", &log_path, running, live);
    let finished = w.wait_for(&name, |s| {
        let Some(o) = s.get(&ObjectRef::new(&name).within(ns)) else {
            return Some(None);
        };
        match o.status.as_ref()?.phase.as_deref() {
            Some(ph @ ("Succeeded" | "Failed")) => Some(Some(ph.to_owned())),
            _ => None,
        }
    });
    let (followed, (phase, at)) = tokio::join!(follow, finished);
    let followed = followed?;
    stamp::phase(ctx, "logs");
    if followed.reconnects > 0 {
        tracing::warn!(pod = %name, reconnects = followed.reconnects, "the log stream of an iogen pod was reopened");
    }
    let log = followed.text;
    crate::cbt::collect(p, ev, &log, &io_dir, ctx);
    let Some(phase) = phase else {
        // Deleted under us: abort_workload or detach stopped the I/O. What it logged until
        // then still counts.
        stamp::phase_at(ctx, "io-stopped", at);
        if !log.is_empty() {
            let span = (call_ns, ctx.now_ns());
            let mut report = split_log(&log, span, ctx, &io_dir.join(format!("{}.hlog", ev.id)))?;
            // iogen prints its engine with its table at the end: a pod stopped before that
            // has none (`io.backends` then lacks this event).
            report.backend = pod_backend(&log, p.config.pod.iogen_seccomp_profile.as_deref());
            ctx.report_io(report);
        }
        return Ok(());
    };
    stamp::phase_at(ctx, "io-done", at);
    if phase == "Failed" {
        return Err(ProviderError::new(
            "io_failed",
            format!("iogen pod {name} failed; its log is in io/{}.log", ev.id),
        ));
    }
    let span = (call_ns, ctx.now_ns());
    let mut report = split_log(&log, span, ctx, &io_dir.join(format!("{}.hlog", ev.id)))?;
    report.backend = pod_backend(&log, p.config.pod.iogen_seccomp_profile.as_deref());
    ctx.report_io(report);
    p.stop_pod(ctx, &name, &[], None, Some(0))
        .await
        .or_else(|e| {
            if e.class == "not_found" {
                Ok(())
            } else {
                Err(e)
            }
        })?;
    if let Some(w) = p.state().workloads.get_mut(&ph.workload) {
        w.io_pods.retain(|n| *n != name);
    }
    Ok(())
}

/// The I/O engine an iogen pod's log says it ran on (its table's `engine` line; `None`
/// before iogen printed it), with the reason of a fallback to the thread pool and the seccomp
/// profile the pod ran under (`seccomp`: the `Localhost` profile, None: `RuntimeDefault`,
/// whose containerd and CRI-O profiles refuse io_uring).
pub fn pod_backend(log: &str, seccomp: Option<&str>) -> Option<replay::IoBackend> {
    let engine = iogen::engine_in_table(log)?;
    let backend = engine.backend_name();
    let reason = (backend != "io_uring").then(|| {
        let why = engine
            .fallback_reason()
            .unwrap_or("iogen ran its thread-pool engine");
        match seccomp {
            None => format!(
                "{why}; the pod ran under the RuntimeDefault seccomp profile, which refuses \
                 io_uring: install iogen's profile on the nodes (kubectl apply -k \
                 deploy/seccomp) and pass --iogen-seccomp-profile cnsreplay/iogen.json"
            ),
            Some(p) => format!("{why}; the pod ran under the Localhost seccomp profile {p}"),
        }
    });
    Some(replay::IoBackend {
        backend: backend.to_owned(),
        reason,
    })
}

/// Keeps the HdrHistogram log lines of a pod log (iogen also prints its table there), writes
/// them to `hlog`, and sums the response histograms of every kind into the with/without
/// snapshot halves by interval. The intervals are placed on the run's time axis by the log's
/// `#[StartTime]` (the node's clock) as `analyze` places them
/// ([`replay::provider::interval_base_ns`]), not before `span.0` (the `io_phase` call's
/// start, ns since the origin); `span.1` is when the log was complete.
pub fn split_log(
    log: &str,
    span: (u64, u64),
    ctx: &OpCtx,
    hlog: &std::path::Path,
) -> Result<IoReport, ProviderError> {
    let mut all = String::new();
    for line in log.lines() {
        if line.starts_with("#[")
            || line.starts_with("\"StartTimestamp\"")
            || line.starts_with("Tag=")
        {
            let _ = writeln!(all, "{line}");
        }
    }
    std::fs::write(hlog, &all).map_err(io_err)?;
    let base = replay::provider::interval_base_ns(
        iogen::log_start_time(all.as_bytes()),
        replay::provider::epoch_ns(ctx.origin_wall()),
        Some(span),
        None,
    );
    let (with_snapshot, without_snapshot) = iogen::split_responses(all.as_bytes(), |start, len| {
        let s = base + (start * 1e9) as u64;
        ctx.snapshots().overlaps(s, s + (len * 1e9) as u64)
    })
    .map_err(|e| ProviderError::new("io_failed", e.to_string()))?;
    Ok(IoReport {
        with_snapshot,
        without_snapshot,
        // The pod's interval log carries response times only.
        issue: None,
        backend: None,
    })
}
