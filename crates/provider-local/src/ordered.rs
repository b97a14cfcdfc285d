//! Ordered writes and the cut check (`io_phase.ordered`, docs/replay.md).
//!
//! A writing phase (`read_pct` 0) runs iogen's ordered writes on the volume and its `with`
//! volumes together (their I/O targets, as any `io_phase`), logging every write in ack order to
//! `RUNDIR/io/ID.ordered.log` (its counts in `ID.ordered.json`, which `analyze` does not take
//! for an I/O unit's summary), registered under the log's name. A checking phase
//! (`read_pct` 100) waits until that writer has ended (its log is then complete), reads its
//! volumes — restored copies, in the writer's order — and decides with `iogen::verify_cut`
//! whether they are one consistent cut. It writes `RUNDIR/io/ID.cut.json`: the verdict, and
//! how the snapshots the copies came from were taken — request → cut (every member frozen),
//! cut → ready, the spread of the members' own creation instants — and the pause each
//! written volume's acknowledgements saw around its snapshot (the longest gap between two
//! consecutive acks that overlaps the snapshot operation), on the run's clock. A torn or
//! damaged state fails the phase with class `inconsistent`, naming the write that breaks it.

use std::path::PathBuf;
use std::sync::Arc;

use replay::files::{CutFile, CutMember, SnapshotTaken};
use replay::{OpCtx, ProviderError};
use trace_format::{BlockSize, Event, IoPhase, Load, Name, Ordered};

use crate::context::{LocalProvider, OrderedRun, Taken, blocking, lock};
use crate::sys::io_err;
use crate::target::{StopOnDrop, data_len, ensure_file, io_target, register_io, volume_size};

/// Marks the writer ended however its phase ends (also when the engine drops it).
struct DoneOnDrop(tokio::sync::watch::Sender<bool>);

impl Drop for DoneOnDrop {
    fn drop(&mut self) {
        let _ = self.0.send(true);
    }
}

fn invalid(msg: String) -> ProviderError {
    ProviderError::new("invalid", msg)
}

/// The writing phase.
pub(crate) async fn write(
    p: &LocalProvider,
    ev: &Event,
    ph: &IoPhase,
    o: &Ordered,
    ctx: Arc<OpCtx>,
) -> Result<(), ProviderError> {
    let BlockSize::Fixed(block) = ph.block_size else {
        return Err(invalid("ordered writes use one block size".into()));
    };
    let Load::Depth(writers) = ph.load else {
        return Err(invalid(
            "ordered writes run closed-loop (`load.depth` writers)".into(),
        ));
    };
    let names: Vec<Name> = ph.volumes().cloned().collect();
    let mut targets = Vec::with_capacity(names.len());
    let mut region = u64::MAX;
    for n in &names {
        targets.push(io_target(p, n)?);
        region = region.min(data_len(volume_size(p, n), ph.region));
    }
    for t in &targets {
        ensure_file(t, region)?;
    }
    let io_dir = p.run()?.run_dir.join("io");
    fs_err::create_dir_all(&io_dir).map_err(io_err)?;
    let log = io_dir.join(format!("{}.ordered.log", ev.id));
    let (tx, rx) = tokio::sync::watch::channel(false);
    let _done = DoneOnDrop(tx);
    p.state().ordered.insert(
        o.log.clone(),
        OrderedRun {
            log: log.clone(),
            volumes: names,
            done: rx,
        },
    );
    let stop = iogen::Stop::new();
    register_io(p, &ph.workload, &stop)?;
    let _stop_on_drop = StopOnDrop(stop.clone());
    let spec = iogen::OrderedSpec {
        targets,
        block,
        region: Some(region),
        writers,
        pattern: ph.pattern,
        duration: ph.duration.map(std::time::Duration::from_nanos),
        writes: ph.bytes.map(|b| (b / block).max(1)),
        direct: ph.direct,
        log,
        seed: ev.id,
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("cnsreplay-ordered".into())
        .spawn(move || {
            let _ = tx.send(
                iogen::run_ordered(&spec, &stop)
                    .map_err(|e| ProviderError::new("io_failed", e.to_string())),
            );
        })
        .map_err(io_err)?;
    let res = rx
        .await
        .map_err(|_| ProviderError::new("panic", "the ordered writer ended without a result"))??;
    let json = serde_json::to_vec_pretty(&res).map_err(|e| io_err(e.into()))?;
    fs_err::write(io_dir.join(format!("{}.ordered.json", ev.id)), json).map_err(io_err)?;
    if let Some(e) = &res.error {
        return Err(ProviderError::new("io_failed", e.clone()));
    }
    ctx.phase(if res.partial { "io-stopped" } else { "io-done" });
    Ok(())
}

/// The checking phase.
pub(crate) async fn check(
    p: &LocalProvider,
    ev: &Event,
    ph: &IoPhase,
    o: &Ordered,
    ctx: Arc<OpCtx>,
) -> Result<(), ProviderError> {
    let (run, restored) =
        replay::ordered::check_opening(&p.state().ordered, o, ph, |r| r.volumes.len())?;
    let mut done = run.done.clone();
    // The sender marks the end on drop, so this never waits for a writer that is gone.
    let _ = done.wait_for(|d| *d).await;
    ctx.phase("writes-done");
    let mut targets = Vec::with_capacity(restored.len());
    let mut sources = Vec::with_capacity(restored.len());
    for n in &restored {
        targets.push(io_target(p, n)?);
        sources.push(
            lock(&*p.volume(n)?)
                .source
                .as_ref()
                .map(|s| s.taken.clone()),
        );
    }
    let log_file = run.log.clone();
    let (report, log) = blocking(move || {
        let members: Vec<&std::path::Path> = targets.iter().map(PathBuf::as_path).collect();
        let fail = |e: iogen::Error| ProviderError::new("io_failed", e.to_string());
        let report = iogen::verify_cut(&log_file, &members).map_err(fail)?;
        Ok((report, iogen::OrderedLog::read(&log_file).map_err(fail)?))
    })
    .await?;
    ctx.phase("checked");
    // The log's clock (ns since its start, on this machine's wall clock) on the run's.
    let shift =
        i128::from(log.header.start_unix_ns) - replay::provider::epoch_ns(ctx.origin_wall());
    let on_run = |ns: u64| u64::try_from((shift + i128::from(ns)).max(0)).unwrap_or(0);
    let taken: Vec<&Taken> = sources.iter().flatten().collect();
    let min = |f: fn(&Taken) -> u64| taken.iter().map(|t| f(t)).min();
    let max = |f: fn(&Taken) -> u64| taken.iter().map(|t| f(t)).max();
    let members: Vec<CutMember> = run
        .volumes
        .iter()
        .zip(&restored)
        .zip(&sources)
        .enumerate()
        .map(|(v, ((volume, restored), taken))| {
            let window = taken.as_ref().map(|t| (t.requested_ns, t.ready_ns));
            let p = iogen::cut::write_pause(&log, v as u32, on_run, window);
            CutMember {
                volume: volume.to_string(),
                restored: restored.to_string(),
                taken: taken.as_ref().map(SnapshotTaken::from),
                pause: p,
            }
        })
        .collect();
    let file = CutFile {
        log: o.log.to_string(),
        log_file: run.log.clone(),
        verdict: report
            .verdict
            .describe_with(&run.volumes.iter().map(|n| n.as_str()).collect::<Vec<_>>()),
        request_to_cut_ns: max(|t| t.cut_ns)
            .zip(min(|t| t.requested_ns))
            .map(|(c, r)| c.saturating_sub(r)),
        cut_to_ready_ns: max(|t| t.ready_ns)
            .zip(max(|t| t.cut_ns))
            .map(|(r, c)| r.saturating_sub(c)),
        creation_spread_ns: max(|t| t.created_ns)
            .zip(min(|t| t.created_ns))
            .map(|(a, b)| a - b),
        request_to_ready_ns: None,
        api_creation_spread_s: None,
        report,
        members,
    };
    p.state().cut_notices.push(file.notice(ev.id));
    replay::ordered::write_cut(&p.run()?.run_dir, ev.id, &file)?;
    ctx.phase("consistent");
    Ok(())
}
