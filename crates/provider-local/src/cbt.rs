//! `snapshot_allocated` and `snapshot_delta` on the local provider: the ranges come from the
//! snapshot images themselves ([`local_storage::cbt`]), timed as a backup client sees them (time to
//! the first range, total, ranges and bytes per second), and written to
//! `RUNDIR/cbt/<event id>.json` with a one-line notice in the run summary.
//!
//! A delta is also checked against the written sets that verify-mode `io_phase` writers on the
//! volume recorded (`RUNDIR/io/<event id>.written`): every block a write put there after the
//! base snapshot was ready and before the later one was requested must be in the delta (a
//! missing one fails the op, class `inconsistent`); delta blocks that no write around the
//! window touched are counted as extra, not a failure (file-system metadata, or writes of
//! another kind). Verify mode matters: each of its writes carries its own generation, so a
//! rewritten block always differs in content. The check needs the record's offsets to be the
//! image's: a raw block volume written with O_DIRECT (a buffered write acknowledged in the loop
//! device's page cache is not yet in the image a snapshot copies), or a directory volume's
//! data file. A file-system volume's data file sits at offsets only its file system knows, so
//! there the ranges are listed and timed but not checked.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use iogen::written::WrittenSpec;
use replay::files::{CbtFile, CbtTiming};
use replay::{OpCtx, ProviderError};
use trace_format::{Event, IoPhase, Name, OpType, SnapshotAllocated, SnapshotDelta};

use crate::context::{LocalProvider, Snap, Taken, WrittenPhase, blocking, lock};
use crate::sys::io_err;
use crate::target::{DATA_FILE, is_device};
use local_storage::cbt::{self as scan, CbtError, Listed, Range};

/// Registers a writing verify-mode phase's written set (`None` for any other phase).
pub(crate) fn register_written(
    p: &LocalProvider,
    event: u64,
    ph: &IoPhase,
    target: &Path,
    io_dir: &Path,
    origin: Instant,
) -> Result<Option<WrittenSpec>, ProviderError> {
    if !ph.verify || ph.read_pct == 100 {
        return Ok(None);
    }
    let volume = lock(&*p.volume(&ph.volume)?).image.clone();
    let device = is_device(target);
    // Without loop devices a volume is a directory whose data file is what is listed: its
    // offsets are the record's.
    let unchecked = if p.loop_mode() || device {
        iogen::delta_check::uncheckable(device, ph.direct)
    } else {
        None
    };
    let record = io_dir.join(format!("{event}.written"));
    p.state().written.push(WrittenPhase {
        event,
        volume,
        record: record.clone(),
        unchecked,
        done: false,
    });
    Ok(Some(WrittenSpec {
        path: record,
        origin,
    }))
}

/// Makes a recording phase continue the write generations of earlier ones on the same volume
/// (and shape: block size and region), so a block it rewrites gets new content even when an
/// earlier phase wrote it: iogen's verify map, kept per volume under `RUNDIR/io/`. Without it
/// each phase would start again at generation 1 and could rewrite a block with the bytes it
/// held, a change no content comparison can see.
pub(crate) fn carry_generations(
    p: &LocalProvider,
    ph: &IoPhase,
    spec: &mut iogen::PhaseSpec,
    io_dir: &Path,
) -> Result<(), ProviderError> {
    let image = lock(&*p.volume(&ph.volume)?).image.clone();
    let stem = image
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    let unit = match &ph.block_size {
        trace_format::BlockSize::Fixed(n) => *n,
        trace_format::BlockSize::Mix(m) => m.iter().map(|s| s.size).min().unwrap_or(0),
    };
    let region = spec
        .region
        .map_or_else(|| "all".to_owned(), |r| r.to_string());
    spec.verify_state = Some(io_dir.join(format!("gens-{stem}-{unit}-{region}.state")));
    Ok(())
}

/// Marks a phase's written set as complete (its record file is written).
pub(crate) fn written_done(p: &LocalProvider, event: u64) {
    if let Some(w) = p.state().written.iter_mut().find(|w| w.event == event) {
        w.done = true;
    }
}

fn snap(p: &LocalProvider, name: &Name) -> Result<Arc<Snap>, ProviderError> {
    p.state()
        .snapshots
        .get(name)
        .cloned()
        .ok_or_else(|| ProviderError::new("not_found", format!("snapshot {name:?} does not exist")))
}

/// The file a snapshot's blocks are listed from: its image, or a directory volume's data file.
fn listed_file(p: &LocalProvider, s: &Snap) -> PathBuf {
    if p.loop_mode() {
        s.image.clone()
    } else {
        s.image.join(DATA_FILE)
    }
}

fn cbt_err(e: &CbtError) -> ProviderError {
    match e {
        CbtError::BlockSize(_) => ProviderError::new("invalid", e.to_string()),
        _ => ProviderError::new("io_failed", e.to_string()),
    }
}

/// Runs a listing on the blocking pool, timing it and collecting its ranges.
async fn timed(
    ctx: &Arc<OpCtx>,
    list: impl FnOnce(&mut dyn FnMut(Range) -> ControlFlow<()>) -> Result<Listed, CbtError>
    + Send
    + 'static,
) -> Result<(Vec<Range>, Listed, CbtTiming), ProviderError> {
    let ctx = ctx.clone();
    blocking(move || {
        let start = Instant::now();
        let mut first = None;
        let mut ranges = Vec::new();
        let listed = list(&mut |r| {
            if first.is_none() {
                first = Some(start.elapsed().as_nanos() as u64);
                ctx.phase("first-range");
            }
            ranges.push(r);
            ControlFlow::Continue(())
        })
        .map_err(|e| cbt_err(&e))?;
        let total = start.elapsed().as_nanos() as u64;
        ctx.phase("listed");
        let secs = (total as f64 / 1e9).max(1e-9);
        let timing = CbtTiming {
            first_range_ns: first,
            total_ns: total,
            ranges: listed.ranges,
            bytes: listed.bytes,
            ranges_per_s: listed.ranges as f64 / secs,
            bytes_per_s: listed.bytes as f64 / secs,
            read_bytes: Some(listed.read_bytes),
        };
        Ok((ranges, listed, timing))
    })
    .await
}

fn write_file(p: &LocalProvider, f: &CbtFile) -> Result<PathBuf, ProviderError> {
    let dir = p.run()?.run_dir.join("cbt");
    fs_err::create_dir_all(&dir).map_err(io_err)?;
    let path = dir.join(format!("{}.json", f.event));
    let json = serde_json::to_vec_pretty(f).map_err(|e| io_err(e.into()))?;
    fs_err::write(&path, json).map_err(io_err)?;
    p.state().cbt_notices.push(f.notice());
    Ok(path)
}

/// The run-clock window in which a snapshot was taken.
fn window(t: &Taken) -> iogen::delta_check::Window {
    iogen::delta_check::Window {
        requested_ns: t.requested_ns,
        ready_ns: t.ready_ns,
    }
}

/// A listing as the local provider writes it: no base and no check (a delta adds them), and
/// nothing of what only the kube provider measures (the service, its token, its responses).
fn local_file(
    event: u64,
    op: OpType,
    volume: String,
    snapshot: String,
    (block, image_size): (u64, u64),
    timing: CbtTiming,
    ranges: &[Range],
) -> CbtFile {
    CbtFile {
        event,
        op,
        volume,
        base: None,
        snapshot,
        block_size: Some(block),
        image_size,
        timing,
        check: None,
        ranges: pairs(ranges),
        requested_block_size: None,
        block_metadata_type: None,
        service: None,
        account: None,
        setup: None,
        responses: None,
    }
}

fn pairs(ranges: &[Range]) -> Vec<[u64; 2]> {
    ranges.iter().map(|r| [r.offset, r.len]).collect()
}

/// `snapshot_allocated`.
pub(crate) async fn allocated(
    p: &LocalProvider,
    ev: &Event,
    s: &SnapshotAllocated,
    ctx: Arc<OpCtx>,
) -> Result<(), ProviderError> {
    let sn = snap(p, &s.snapshot)?;
    let file = listed_file(p, &sn);
    let block = s.block_size.unwrap_or(scan::DEFAULT_BLOCK);
    let (ranges, listed, timing) =
        timed(&ctx, move |f| scan::allocated(&file, block, 0, f)).await?;
    let out = local_file(
        ev.id,
        OpType::SnapshotAllocated,
        sn.volume.to_string(),
        s.snapshot.to_string(),
        (block, listed.size),
        timing,
        &ranges,
    );
    write_file(p, &out).map(drop)
}

/// `snapshot_delta`.
pub(crate) async fn delta(
    p: &LocalProvider,
    ev: &Event,
    d: &SnapshotDelta,
    ctx: Arc<OpCtx>,
) -> Result<(), ProviderError> {
    let (base, target) = (snap(p, &d.base)?, snap(p, &d.snapshot)?);
    if base.of != target.of {
        return Err(ProviderError::new(
            "invalid",
            format!(
                "snapshots {:?} (of volume {:?}) and {:?} (of volume {:?}) are not of one volume",
                d.base, base.volume, d.snapshot, target.volume
            ),
        ));
    }
    let (fb, ft) = (listed_file(p, &base), listed_file(p, &target));
    let block = d.block_size.unwrap_or(scan::DEFAULT_BLOCK);
    let (ranges, listed, timing) = timed(&ctx, move |f| scan::delta(&fb, &ft, block, 0, f)).await?;
    let phases: Vec<WrittenPhase> = p
        .state()
        .written
        .iter()
        .filter(|w| w.volume == target.of)
        .cloned()
        .collect();
    let (base2, target2) = (base.clone(), target.clone());
    let ranges2 = ranges.clone();
    let check = blocking(move || {
        let mut sets = Vec::new();
        let mut not_checked = Vec::new();
        for w in phases {
            match (w.unchecked, w.done) {
                (Some(why), _) => not_checked.push(format!("event {}: {why}", w.event)),
                (None, false) => not_checked.push(format!(
                    "event {}: still running or failed (no complete written set)",
                    w.event
                )),
                (None, true) => {
                    let recs = iogen::written::read_records(&w.record)
                        .map_err(|e| ProviderError::new("io_failed", e.to_string()))?;
                    sets.push((w.event, recs));
                }
            }
        }
        let mut c = iogen::delta_check::check(
            &pairs(&ranges2),
            block,
            &sets,
            window(&base2.taken),
            window(&target2.taken),
        );
        c.not_checked = not_checked;
        Ok(c)
    })
    .await?;
    ctx.phase("checked");
    let err = check
        .failure(&target.volume, &d.base, &d.snapshot)
        .map(|m| ProviderError::new("inconsistent", m));
    let out = CbtFile {
        base: Some(d.base.to_string()),
        check: Some(check),
        ..local_file(
            ev.id,
            OpType::SnapshotDelta,
            target.volume.to_string(),
            d.snapshot.to_string(),
            (block, listed.size),
            timing,
            &ranges,
        )
    };
    let path = write_file(p, &out)?;
    match err {
        Some(mut e) => {
            e.message = format!("{} ({})", e.message, path.display());
            Err(e)
        }
        None => Ok(()),
    }
}
