//! `io_phase` on a cluster: a pod running the `iogen` image, pinned to the workload's node,
//! mounting the one volume, running `iogen phase` with its interval log on stdout. The log is
//! followed while the pod runs (`pods/logs.rs`: kept in `RUNDIR/io/<event id>.log` as it arrives,
//! across the kubelet's log rotation and dropped connections), so a pod deleted by a detach
//! or an abort still leaves what it measured until then. Its HdrHistogram lines are kept in
//! `RUNDIR/io/<event id>.hlog`, and each interval is put on the with/without-snapshot side of
//! the run's I/O split by whether a snapshot was in flight during it (interval times are
//! offsets from the pod's start, so the split is as exact as the pod's start time).
//!
//! With `io_exec: local` (a test-cluster mode): iogen runs in this process, on its
//! own OS thread, against the block device the CSI driver attached for the volume — the
//! VolumeAttachment's `status.attachmentMetadata.devicePath` on the workload's node (our
//! `cnsreplay-csi` returns its loop device there on ControllerPublish). Valid only where the
//! driver runs on this machine (the local test cluster, whose kwok pods run no containers),
//! and only for Block volumes: raw I/O on a device that holds a file system would corrupt it.
//! The results go where the pod mode puts them (`RUNDIR/io/<event id>.hlog`, plus iogen's
//! summary in `<event id>.json`) and into the run's with/without-snapshot split.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Resource;
use kube::runtime::reflector::ObjectRef;
use replay::{OpCtx, ProviderError};
use trace_format::{Event, IoPhase};

use crate::context::{Kube, LocalIo, io_err};
use crate::kube::objects::PodVolume;
use crate::kube::stamp;
use crate::pods::iogen::{self as iogen_pod, io_pod};
use crate::pods::logs::{pod_backend, split_log};

pub(crate) async fn io_phase(
    p: &Kube,
    ev: &Event,
    ph: &IoPhase,
    ctx: &OpCtx,
) -> Result<(), ProviderError> {
    // The earliest the pod's iogen can have started its clock.
    let call_ns = ctx.now_ns();
    let ns = p.ns()?;
    let wl = p.attached(&ph.workload)?;
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
    if p.config.io_exec == crate::config::IoExec::Local {
        return io_phase_local(p, ev, ph, ctx, &vol.pvc, vol.block, wl.node.as_deref()).await;
    }
    iogen_pod::register(p, ev, ph, vol.block);
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
    let waiting = format!(
        "iogen pod {ns}/{name} (image {}) to start{}",
        p.config.iogen_image,
        wl.node
            .as_deref()
            .map(|n| format!(" on node {n}"))
            .unwrap_or_default()
    );
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
    let ended = iogen_pod::run_to_end(p, ctx, ev.id, &ph.workload, &pod, waiting, live).await?;
    let (ok, at, followed) = (ended.ok, ended.at, ended.log);
    let io_dir = p.run()?.run_dir.join("io");
    stamp::phase(ctx, "logs");
    if followed.reconnects > 0 {
        tracing::warn!(pod = %name, reconnects = followed.reconnects, "the log stream of an iogen pod was reopened");
    }
    let log = followed.text;
    iogen_pod::collect(p, ev, &log, &io_dir, ctx);
    let Some(ok) = ok else {
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
    if !ok {
        return Err(ProviderError::new(
            "io_failed",
            format!("iogen pod {name} failed; its log is in io/{}.log", ev.id),
        ));
    }
    let span = (call_ns, ctx.now_ns());
    let mut report = split_log(&log, span, ctx, &io_dir.join(format!("{}.hlog", ev.id)))?;
    report.backend = pod_backend(&log, p.config.pod.iogen_seccomp_profile.as_deref());
    ctx.report_io(report);
    iogen_pod::finish(p, ctx, &ph.workload, &name).await?;
    Ok(())
}

/// The only CSI driver whose volumes `io_exec: local` writes to: the project's own test
/// driver (`crates/csi-driver`), whose devicePath is a loop device on this machine.
pub const TEST_DRIVER: &str = "csi.cnsreplay.dev";

/// Interval length of the per-phase interval log.
const INTERVAL: Duration = Duration::from_millis(200);

fn fail(class: &str, msg: String) -> ProviderError {
    ProviderError::new(class, msg)
}

/// The PV the run's PVC `pvc` is bound to, from the PVC watch (`not_bound` while it is not).
fn bound_pv(p: &Kube, pvc: &str) -> Result<String, ProviderError> {
    let ns = p.ns()?;
    p.watches()?
        .pvc
        .store()
        .get(&ObjectRef::new(pvc).within(ns))
        .and_then(|o| o.spec.as_ref()?.volume_name.clone())
        .ok_or_else(|| fail("not_bound", format!("PVC {pvc} is not bound")))
}

/// Refuses a volume whose PV is not of the project's test driver.
fn check_driver(p: &Kube, pvc: &str) -> Result<(), ProviderError> {
    let w = p.watches()?;
    let pv = bound_pv(p, pvc)?;
    // The device path is a path on *this* machine only for the project's own test driver;
    // any other driver's path names a device of another machine (or a real disk here).
    let driver =
        w.pv.store()
            .get(&ObjectRef::new(&pv))
            .and_then(|o| Some(o.spec.as_ref()?.csi.as_ref()?.driver.clone()));
    if driver.as_deref() != Some(TEST_DRIVER) {
        return Err(fail(
            "unsupported",
            format!(
                "--kube-io-exec local writes to the device a VolumeAttachment names on the machine \
                 running cnsreplay, so it is allowed only for the project's test driver \
                 {TEST_DRIVER}; PV {pv} of PVC {pvc} is {} (use --kube-io-exec pod)",
                driver.map_or_else(|| "not a CSI volume".to_owned(), |d| format!("driver {d}"))
            ),
        ));
    }
    Ok(())
}

/// The device attached for `pvc` on `node`, from the VolumeAttachment's metadata.
fn device_path(p: &Kube, pvc: &str, node: Option<&str>) -> Result<String, ProviderError> {
    let w = p.watches()?;
    let pv = bound_pv(p, pvc)?;
    w.va.store()
        .state()
        .iter()
        .filter(|va| va.spec.source.persistent_volume_name.as_deref() == Some(pv.as_str()))
        .filter(|va| node.is_none_or(|n| va.spec.node_name == n))
        .filter_map(|va| va.status.as_ref().filter(|s| s.attached))
        .find_map(|s| s.attachment_metadata.as_ref()?.get("devicePath").cloned())
        .ok_or_else(|| {
            fail(
                "no_device",
                format!(
                    "no attached VolumeAttachment with a devicePath for PV {pv} (io_exec local \
                     needs a CSI driver on this machine that returns one, e.g. cnsreplay-csi \
                     running as root)"
                ),
            )
        })
}

async fn io_phase_local(
    p: &Kube,
    ev: &Event,
    ph: &IoPhase,
    ctx: &OpCtx,
    pvc: &str,
    block: bool,
    node: Option<&str>,
) -> Result<(), ProviderError> {
    check_driver(p, pvc)?;
    if !block {
        return Err(fail(
            "unsupported",
            format!(
                "io_exec local runs raw I/O on the attached device: volume {:?} must be a Block \
                 volume (volume_mode: Block), or a file system on it would be corrupted",
                ph.volume
            ),
        ));
    }
    let dev = std::path::PathBuf::from(device_path(p, pvc, node)?);
    let stop = iogen::Stop::new();
    // Dropped by the iogen thread when it ends (the device closed): `LocalIo::ended` returns.
    let (done, rx) = tokio::sync::watch::channel(());
    p.state()
        .workloads
        .get_mut(&ph.workload)
        .ok_or_else(|| fail("not_found", format!("workload {:?}", ph.workload)))?
        .io_local
        .push(LocalIo {
            stop: stop.clone(),
            done: rx,
        });
    let io_dir = p.run()?.run_dir.join("io");
    crate::context::blocking(|| std::fs::create_dir_all(&io_dir)).map_err(io_err)?;
    let hlog = io_dir.join(format!("{}.hlog", ev.id));
    let opts = iogen::EngineOptions {
        interval_log: Some(hlog.clone()),
        interval: INTERVAL,
        seed: ev.id,
        ..iogen::EngineOptions::default()
    };
    let spec = iogen::PhaseSpec::from_trace(ph);
    let start = Instant::now();
    stamp::phase_at(ctx, "running", start);
    ctx.io_started();
    // Dropping this future (timeout, cancel) must stop the I/O too.
    let _stop_on_drop = StopOnDrop(stop.clone());
    let (tx, rx) = tokio::sync::oneshot::channel();
    let st = stop.clone();
    std::thread::Builder::new()
        .name("cnsreplay-iogen".into())
        .spawn(move || {
            let _ = tx.send(iogen::run_phase(&spec, &dev, &opts, &st));
            drop(done);
        })
        .map_err(io_err)?;
    let res = rx
        .await
        .map_err(|_| fail("panic", "the iogen thread ended without a result".into()))?
        .map_err(|e| fail("io_failed", e.to_string()))?;
    stamp::phase(ctx, if res.partial { "io-stopped" } else { "io-done" });
    if let Some(w) = p.state().workloads.get_mut(&ph.workload) {
        w.io_local
            .retain(|l| !Arc::ptr_eq(&l.stop.flag(), &stop.flag()));
    }
    let summary = serde_json::to_vec_pretty(&res.summary).map_err(|e| io_err(e.into()))?;
    let engine = res.summary.engine;
    let span = (
        replay::provider::ns_since(ctx.origin(), start),
        ctx.now_ns(),
    );
    crate::context::blocking(|| -> Result<(), ProviderError> {
        std::fs::write(io_dir.join(format!("{}.json", ev.id)), summary).map_err(io_err)?;
        let log = std::fs::read_to_string(&hlog).map_err(io_err)?;
        let mut report = split_log(&log, span, ctx, &hlog)?;
        report.backend = Some(replay::IoBackend {
            backend: engine.backend_name().to_owned(),
            reason: engine.fallback_reason().map(str::to_owned),
        });
        ctx.report_io(report);
        Ok(())
    })
}

/// Requests a stop of an I/O unit when dropped.
struct StopOnDrop(iogen::Stop);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.request();
    }
}
