//! Ordered writes and the cut check on a cluster (`io_phase.ordered`, docs/replay.md).
//!
//! The local provider runs iogen in-process and reads its log file; here both halves run in
//! pods on the workload's node, whose only way back is their log. The writing phase's pod
//! mounts the phase's volumes (`volume`, then `with`) and runs `iogen ordered --log -`: every
//! acknowledged write is a line of the pod's log, followed into `RUNDIR/io/ID.log` as it
//! arrives, and rebuilt into `RUNDIR/io/ID.ordered.log` (the local provider's binary form)
//! when the pod has ended. The checking phase's pod mounts the restored copies and runs
//! `iogen scan` with the log's header only: it prints what every block holds, and the
//! provider decides here with the log ([`iogen::cut::report`]), so the log never has to
//! reach the node. A log without its end line (the writer was stopped or deleted) is not
//! checked: writes acknowledged after its last line could be on the members.
//!
//! `RUNDIR/io/ID.cut.json` has the verdict and how the snapshots were taken as the API shows
//! them: request → ready (the provider's own clock, from its watch), the members' creation
//! times (`status.creationTime`: one-second resolution) and each written volume's longest
//! pause between acknowledged writes overlapping its snapshot operation (iogen's ack times
//! on the node's wall clock, placed on the run's clock: as exact as the two clocks agree).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use kube::Resource;
use replay::files::{CutFile, CutMember, SnapshotTaken};
use replay::{OpCtx, ProviderError};
use trace_format::{BlockSize, Event, IoPhase, Load, Name, Ordered, Pattern};

use crate::context::{Kube, OrderedRun, Taken, io_err};
use crate::kube::objects::{self, DATA_FILE, PodVolume};
use crate::kube::stamp;
use crate::pods::iogen as iogen_pod;

/// Publishes the writer's end however its phase ends (also when the engine drops it).
struct DoneOnDrop {
    tx: tokio::sync::watch::Sender<Option<Result<PathBuf, String>>>,
    result: Option<Result<PathBuf, String>>,
}

impl Drop for DoneOnDrop {
    fn drop(&mut self) {
        let r = self
            .result
            .take()
            .unwrap_or_else(|| Err("the writing phase ended before its pod did".into()));
        let _ = self.tx.send(Some(r));
    }
}

/// iogen's error line in a pod's log, as ` (iogen: …)`, or nothing.
fn last_error(log: &str) -> String {
    log.lines()
        .rev()
        .find(|l| l.starts_with("iogen:"))
        .map_or_else(String::new, |l| format!(" ({l})"))
}

fn invalid(msg: impl Into<String>) -> ProviderError {
    ProviderError::new("invalid", msg)
}

/// Where volume `i` of a pod holds the data (`DATA_FILE` on a file system, the device).
fn target(i: usize, block: bool) -> String {
    if block {
        objects::mount_path(i, true)
    } else {
        format!("{}/{DATA_FILE}", objects::mount_path(i, false))
    }
}

/// The arguments of the writer's `iogen ordered`.
pub(crate) fn ordered_args(
    ph: &IoPhase,
    volumes: &[PodVolume],
    seed: u64,
) -> Result<Vec<String>, String> {
    let BlockSize::Fixed(block) = ph.block_size else {
        return Err("ordered writes use one block size".into());
    };
    let Load::Depth(writers) = ph.load else {
        return Err("ordered writes run closed-loop (`load.depth` writers)".into());
    };
    if ph.duration.is_none() && ph.bytes.is_none() {
        return Err("ordered writes need a `duration` or `bytes`".into());
    }
    let mut a: Vec<String> = vec![
        "ordered".into(),
        "--log".into(),
        "-".into(),
        "--bs".into(),
        block.to_string(),
        "--writers".into(),
        writers.to_string(),
        "--seed".into(),
        seed.to_string(),
    ];
    // A file-system volume's data file is created at the region (iogen's default size for
    // a new file when the trace gives none); a device is used whole unless told.
    let region = ph.region.or_else(|| {
        volumes
            .iter()
            .any(|v| !v.block)
            .then_some(iogen::DEFAULT_NEW_FILE_SIZE)
    });
    if let Some(r) = region {
        a.extend(["--size".into(), r.to_string()]);
    }
    if ph.pattern == Pattern::Sequential {
        a.push("--sequential".into());
    }
    if let Some(d) = ph.duration {
        a.extend(["--runtime".into(), format!("{d}ns")]);
    }
    if let Some(b) = ph.bytes {
        a.extend(["--writes".into(), (b / block).max(1).to_string()]);
    }
    if ph.direct {
        a.push("--direct".into());
    }
    for (i, v) in volumes.iter().enumerate() {
        a.extend(["--target".into(), target(i, v.block)]);
    }
    Ok(a)
}

/// The arguments of the checker's `iogen scan`.
pub(crate) fn scan_args(header: &iogen::ordered::LogHeader, volumes: &[PodVolume]) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "scan".into(),
        "--header".into(),
        serde_json::to_string(header).unwrap_or_default(),
    ];
    for (i, v) in volumes.iter().enumerate() {
        a.extend(["--target".into(), target(i, v.block)]);
    }
    a
}

/// The pod's volumes, checked against the workload's: the phase's volumes in order.
fn pod_volumes(p: &Kube, ph: &IoPhase) -> Result<(Vec<PodVolume>, Option<String>), ProviderError> {
    let wl = p.attached(&ph.workload)?;
    let mut out = Vec::new();
    for v in ph.volumes() {
        if !wl.volumes.contains(v) {
            return Err(ProviderError::new(
                "not_found",
                format!("workload {:?} does not mount volume {v:?}", ph.workload),
            ));
        }
        let vs = p.volume(v);
        out.push(PodVolume {
            claim: vs.pvc,
            block: vs.block,
        });
    }
    Ok((out, wl.node))
}

/// Runs one iogen pod with `args` on the workload's node to its end and returns its log
/// (also in `RUNDIR/io/ID.log`) and whether it succeeded; None when it was deleted under us
/// (a detach or an abort stopped it).
async fn run_pod(
    p: &Kube,
    ev: &Event,
    ph: &IoPhase,
    ctx: &OpCtx,
    volumes: &[PodVolume],
    node: Option<&str>,
    args: Vec<String>,
) -> Result<(Option<bool>, String), ProviderError> {
    let ns = p.ns()?;
    let pod = iogen_pod::iogen_pod(&p.config, &p.run()?.run_id, ns, ev, ph, volumes, node, args);
    let name = pod.meta().name.clone().unwrap_or_default();
    let waiting = format!("iogen pod {ns}/{name} to start");
    let ended = iogen_pod::run_to_end(p, ctx, ev.id, &ph.workload, &pod, waiting, |_| {}).await?;
    let (ok, text) = (ended.ok, ended.log.text);
    stamp::phase_at(
        ctx,
        if ok.is_some() {
            "io-done"
        } else {
            "io-stopped"
        },
        ended.at,
    );
    if ok.is_some() {
        iogen_pod::finish(p, ctx, &ph.workload, &name).await?;
    } else {
        iogen_pod::forget(p, &ph.workload, &name);
    }
    Ok((ok, text))
}

/// The writing phase.
pub(crate) async fn write(
    p: &Kube,
    ev: &Event,
    ph: &IoPhase,
    o: &Ordered,
    ctx: &OpCtx,
) -> Result<(), ProviderError> {
    let (volumes, node) = pod_volumes(p, ph)?;
    let args = ordered_args(ph, &volumes, ev.id).map_err(invalid)?;
    let (tx, rx) = tokio::sync::watch::channel(None);
    let mut done = DoneOnDrop { tx, result: None };
    p.state().ordered.insert(
        o.log.clone(),
        OrderedRun {
            volumes: ph.volumes().cloned().collect(),
            done: rx,
        },
    );
    let (ok, text) = run_pod(p, ev, ph, ctx, &volumes, node.as_deref(), args).await?;
    let io_dir = p.run()?.run_dir.join("io");
    let pod_log = io_dir.join(format!("{}.log", ev.id));
    let parsed = iogen::cut_wire::parse_log_text(&text, &pod_log);
    let bin = io_dir.join(format!("{}.ordered.log", ev.id));
    match (&parsed, ok) {
        (Ok(log), _) => {
            fs_err::write(&bin, log.to_bytes()).map_err(io_err)?;
            done.result = Some(Ok(bin));
        }
        (Err(e), _) => done.result = Some(Err(e.to_string())),
    }
    match ok {
        None => Ok(()),
        Some(false) => Err(ProviderError::new(
            "io_failed",
            format!(
                "the ordered writer's pod failed; its log is in io/{}.log{}",
                ev.id,
                last_error(&text)
            ),
        )),
        Some(true) => parsed
            .map(drop)
            .map_err(|e| ProviderError::new("io_failed", e.to_string())),
    }
}

/// Seconds since the epoch of an RFC 3339 time.
fn epoch_s(t: &str) -> Option<i64> {
    t.parse::<jiff::Timestamp>().ok().map(|t| t.as_second())
}

/// The checking phase.
pub(crate) async fn check(
    p: &Kube,
    ev: &Event,
    ph: &IoPhase,
    o: &Ordered,
    ctx: &OpCtx,
) -> Result<(), ProviderError> {
    let (run, restored) =
        replay::ordered::check_opening(&p.state().ordered, o, ph, |r| r.volumes.len())?;
    let (volumes, node) = pod_volumes(p, ph)?;
    let mut done = run.done.clone();
    p.waiting(ctx, format!("the writer of log {:?} to end", o.log));
    let log_file = match done.wait_for(Option::is_some).await {
        Ok(r) => r.clone(),
        Err(_) => None,
    }
    .unwrap_or_else(|| Err("the writer is gone".into()))
    .map_err(|e| {
        ProviderError::new(
            "not_found",
            format!("log {:?} cannot be checked: {e}", o.log),
        )
    })?;
    stamp::phase(ctx, "writes-done");
    let log = iogen::OrderedLog::read(&log_file)
        .map_err(|e| ProviderError::new("io_failed", e.to_string()))?;
    let args = scan_args(&log.header, &volumes);
    let (ok, text) = run_pod(p, ev, ph, ctx, &volumes, node.as_deref(), args).await?;
    let pod_log = p.run()?.run_dir.join("io").join(format!("{}.log", ev.id));
    match ok {
        None => {
            return Err(ProviderError::new(
                "io_failed",
                "the checker's pod was deleted before it printed its scan",
            ));
        }
        Some(false) => {
            return Err(ProviderError::new(
                "io_failed",
                format!(
                    "the checker's pod failed{}; its log is in io/{}.log",
                    last_error(&text),
                    ev.id
                ),
            ));
        }
        Some(true) => {}
    }
    let fail = |e: iogen::Error| ProviderError::new("io_failed", e.to_string());
    let seen = iogen::cut_wire::parse_scan(&text, &pod_log).map_err(fail)?;
    let report = iogen::cut::report(&log, &seen).map_err(fail)?;
    stamp::phase(ctx, "checked");
    let taken: HashMap<Name, Option<Taken>> = {
        let st = p.state();
        restored
            .iter()
            .map(|n| (n.clone(), st.taken.get(n).cloned()))
            .collect()
    };
    let file = cut_file(
        ctx,
        o,
        &log_file,
        &log,
        &run.volumes,
        &restored,
        &taken,
        report,
    );
    p.state().notices.push(file.notice(ev.id));
    replay::ordered::write_cut(&p.run()?.run_dir, ev.id, &file)?;
    stamp::phase(ctx, "consistent");
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn cut_file(
    ctx: &OpCtx,
    o: &Ordered,
    log_file: &Path,
    log: &iogen::OrderedLog,
    written: &[Name],
    restored: &[Name],
    taken: &HashMap<Name, Option<Taken>>,
    report: iogen::CutReport,
) -> CutFile {
    // The log's clock (ns since its start, on the node's wall clock) on the run's.
    let shift =
        i128::from(log.header.start_unix_ns) - replay::provider::epoch_ns(ctx.origin_wall());
    let on_run = |ns: u64| u64::try_from((shift + i128::from(ns)).max(0)).unwrap_or(0);
    let members: Vec<CutMember> = written
        .iter()
        .zip(restored)
        .enumerate()
        .map(|(v, (volume, restored))| {
            let taken = taken.get(restored).cloned().flatten();
            let window = taken.as_ref().map(|t| (t.requested_ns, t.ready_ns));
            let p = iogen::cut::write_pause(log, v as u32, on_run, window);
            CutMember {
                volume: volume.to_string(),
                restored: restored.to_string(),
                // What the API shows: no member instants, its creationTime instead.
                taken: taken.map(|t| SnapshotTaken {
                    by: t.by,
                    requested_ns: t.requested_ns,
                    ready_ns: t.ready_ns,
                    created_ns: None,
                    cut_ns: None,
                    api_creation_time: t.created,
                }),
                pause: p,
            }
        })
        .collect();
    let t: Vec<&SnapshotTaken> = members.iter().filter_map(|m| m.taken.as_ref()).collect();
    let created: Vec<i64> = t
        .iter()
        .filter_map(|t| t.api_creation_time.as_deref().and_then(epoch_s))
        .collect();
    CutFile {
        log: o.log.to_string(),
        log_file: log_file.to_owned(),
        verdict: report
            .verdict
            .describe_with(&written.iter().map(|n| n.as_str()).collect::<Vec<_>>()),
        request_to_ready_ns: t
            .iter()
            .map(|t| t.ready_ns)
            .max()
            .zip(t.iter().map(|t| t.requested_ns).min())
            .map(|(r, q)| r.saturating_sub(q)),
        api_creation_spread_s: (created.len() == t.len() && !created.is_empty())
            .then(|| created.iter().max().unwrap_or(&0) - created.iter().min().unwrap_or(&0)),
        // The cut instants the local provider measures: the API does not expose them.
        request_to_cut_ns: None,
        cut_to_ready_ns: None,
        creation_spread_ns: None,
        report,
        members,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(yaml: &str) -> IoPhase {
        serde_saphyr::from_str(yaml).expect("io_phase")
    }

    #[test]
    fn the_writer_runs_iogen_ordered_with_the_log_on_stdout_over_every_volume() {
        let ph = phase(
            "{workload: db, volume: a, pattern: random, read_pct: 0, block_size: 4Ki, \
             load: {depth: 2}, duration: 6s, region: 8Mi, direct: true, \
             ordered: {log: w, with: [b]}}",
        );
        let vols = [
            PodVolume {
                claim: "a".into(),
                block: false,
            },
            PodVolume {
                claim: "b".into(),
                block: true,
            },
        ];
        let a = ordered_args(&ph, &vols, 7).expect("args");
        assert_eq!(
            a.join(" "),
            "ordered --log - --bs 4096 --writers 2 --seed 7 --size 8388608 --runtime \
             6000000000ns --direct --target /data/0/cnsreplay-io.dat --target /dev/cnsreplay/1"
        );
        let open = phase(
            "{workload: db, volume: a, pattern: random, read_pct: 0, block_size: 4Ki, \
             load: {rate: {iops: 10}}, duration: 6s, ordered: {log: w}}",
        );
        let e = ordered_args(&open, &vols[..1], 7).unwrap_err();
        assert!(e.contains("closed-loop"), "{e}");
    }
}
