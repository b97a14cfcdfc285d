//! I/O on local volumes: `io_phase` runs iogen on its own OS thread against the volume's
//! target (stoppable by detach/abort through its `iogen::Stop`), writing
//! `RUNDIR/io/<event id>.json` (iogen's summary) and `<event id>.hlog` (its interval log,
//! 200 ms intervals). Each interval is classified by whether a snapshot was in flight during
//! it, and the two halves are reported to the engine's I/O split. Single `io` events are one
//! pread/pwrite/fsync each on the same target.

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use replay::provider::IoReport;
use replay::{OpCtx, ProviderError};
use trace_format::{Event, Io, IoKind, IoPhase};

use crate::LocalProvider;
use crate::ops::{io_target, register_io};
use crate::sys::io_err;

/// The data file I/O runs against on a file-system volume.
pub const DATA_FILE: &str = "cnsreplay-io.dat";

/// Interval length of the per-phase interval log.
const INTERVAL: Duration = Duration::from_millis(200);

/// Makes sure a file target exists and is at least `len` bytes (sparse).
fn ensure_file(target: &Path, len: u64) -> Result<(), ProviderError> {
    if target.starts_with("/dev") {
        return Ok(());
    }
    let f = fs_err::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(target)
        .map_err(io_err)?;
    if f.metadata().map_err(io_err)?.len() < len {
        f.set_len(len).map_err(io_err)?;
    }
    Ok(())
}

/// Size of the data file on a volume of `size` bytes: room for file-system metadata.
fn data_len(size: u64, region: Option<u64>) -> u64 {
    region
        .unwrap_or(size / 4 * 3)
        .min(size / 4 * 3)
        .max(1 << 20)
        & !0xFFFF
}

fn volume_size(p: &LocalProvider, name: &trace_format::Name) -> u64 {
    p.state()
        .volumes
        .get(name)
        .map_or(1 << 30, |v| v.lock().map_or(1 << 30, |g| g.size))
}

pub(crate) async fn io_phase(
    p: &LocalProvider,
    ev: &Event,
    ph: &IoPhase,
    ctx: Arc<OpCtx>,
) -> Result<(), ProviderError> {
    let target = io_target(p, &ph.volume)?;
    let len = data_len(volume_size(p, &ph.volume), ph.region);
    ensure_file(&target, len)?;
    let stop = iogen::Stop::new();
    register_io(p, &ph.workload, &stop)?;
    let io_dir = p.run()?.run_dir.join("io");
    let log = io_dir.join(format!("{}.hlog", ev.id));
    let opts = iogen::EngineOptions {
        engine: p.config.io_engine,
        interval_log: Some(log.clone()),
        interval: INTERVAL,
        seed: ev.id,
        ..iogen::EngineOptions::default()
    };
    let mut spec = iogen::PhaseSpec::from_trace(ph);
    if !target.starts_with("/dev") {
        spec.region = Some(spec.region.unwrap_or(len).min(len));
    }
    let start_ns = ctx.now_ns();
    // If the engine drops this future (timeout, or cancel after a stop's grace period), the
    // I/O must stop too, or it would keep the volume busy under cleanup.
    let _stop_on_drop = StopOnDrop(stop.clone());
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("cnsreplay-iogen".into())
        .spawn(move || {
            let _ = tx.send(iogen::run_phase(&spec, &target, &opts, &stop));
        })
        .map_err(io_err)?;
    let res = rx
        .await
        .map_err(|_| ProviderError::new("panic", "the iogen thread ended without a result"))?
        .map_err(|e| ProviderError::new("io_failed", e.to_string()))?;
    ctx.phase(if res.partial { "io-stopped" } else { "io-done" });
    let summary = serde_json::to_vec_pretty(&res.summary).map_err(|e| io_err(e.into()))?;
    fs_err::write(io_dir.join(format!("{}.json", ev.id)), summary).map_err(io_err)?;
    let span = (start_ns, ctx.now_ns());
    let elapsed = (res.summary.elapsed_s * 1e9) as u64;
    if let Ok(split) = split_by_snapshot(&log, span, elapsed, &ctx) {
        ctx.report_io(split);
    }
    Ok(())
}

/// Requests a stop of an I/O unit when dropped.
struct StopOnDrop(iogen::Stop);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.request();
    }
}

/// Splits an iogen interval log by whether a snapshot was in flight during each interval and
/// sums the response histograms of every kind on each side. The intervals are placed on the
/// run's time axis as `analyze` places them ([`replay::provider::interval_base_ns`]): `span`
/// is the `io_phase` call (ns since the origin), `elapsed` iogen's own run time.
fn split_by_snapshot(
    log: &Path,
    span: (u64, u64),
    elapsed: u64,
    ctx: &OpCtx,
) -> Result<IoReport, ProviderError> {
    let bytes = fs_err::read(log).map_err(io_err)?;
    let base = replay::provider::interval_base_ns(
        iogen::log_start_time(&bytes),
        replay::provider::epoch_ns(ctx.origin_wall()),
        Some(span),
        Some(elapsed),
    );
    let (with_snapshot, without_snapshot) = iogen::split_responses(&bytes, |start, len| {
        let s = base + (start * 1e9) as u64;
        ctx.snapshots().overlaps(s, s + (len * 1e9) as u64)
    })
    .map_err(|e| ProviderError::new("io_failed", e.to_string()))?;
    Ok(IoReport {
        with_snapshot,
        without_snapshot,
    })
}

pub(crate) async fn single_io(
    p: &LocalProvider,
    io: &Io,
    ctx: Arc<OpCtx>,
) -> Result<(), ProviderError> {
    let target = io_target(p, &io.volume)?;
    let len = data_len(volume_size(p, &io.volume), None);
    let io = io.clone();
    crate::blocking(move || {
        ensure_file(&target, len)?;
        let f = fs_err::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&target)
            .map_err(io_err)?;
        let off = if len > io.len {
            io.offset % (len - io.len)
        } else {
            0
        };
        let n = usize::try_from(io.len).unwrap_or(usize::MAX).min(64 << 20);
        match io.kind {
            IoKind::Read => {
                let mut buf = vec![0u8; n];
                f.file().read_at(&mut buf, off).map_err(io_err)?;
            }
            IoKind::Write => {
                let buf = vec![0xA5u8; n];
                f.file().write_all_at(&buf, off).map_err(io_err)?;
            }
            IoKind::Flush => f.file().sync_data().map_err(io_err)?,
            IoKind::Trim => {
                return Err(ProviderError::new(
                    "unsupported",
                    "trim is not supported by the local provider",
                ));
            }
        }
        ctx.phase("io");
        Ok(())
    })
    .await
}
