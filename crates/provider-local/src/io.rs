//! I/O on local volumes: `io_phase` runs iogen on its own OS thread against the volume's
//! target (stoppable by detach/abort through its `iogen::Stop`), writing
//! `RUNDIR/io/<event id>.json` (iogen's summary) and `<event id>.hlog` (its interval log,
//! 200 ms intervals). Each interval is classified by whether a snapshot was in flight during
//! it, and the two halves are reported to the engine's I/O split. Single `io` events are one
//! pread/pwrite/fsync each on the same target.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use replay::provider::IoReport;
use replay::{IoStream, IoStreamReport, OpCtx, ProviderError, Submit};
use trace_format::{Event, Io, IoKind, IoPhase};

use crate::config::StreamCpus;
use crate::context::{LocalProvider, blocking, lock};
use crate::sys::io_err;
use crate::target::{
    DATA_FILE, StopOnDrop, data_len, ensure_file, io_target, is_device, register_io, volume_size,
};
use crate::{cbt, ordered};

/// Interval length of the per-phase interval log.
const INTERVAL: Duration = Duration::from_millis(200);

pub(crate) async fn io_phase(
    p: &LocalProvider,
    ev: &Event,
    ph: &IoPhase,
    ctx: Arc<OpCtx>,
) -> Result<(), ProviderError> {
    if let Some(o) = &ph.ordered {
        return if ph.read_pct == 0 {
            ordered::write(p, ev, ph, o, ctx).await
        } else {
            ordered::check(p, ev, ph, o, ctx).await
        };
    }
    let target = io_target(p, &ph.volume)?;
    let len = data_len(volume_size(p, &ph.volume), ph.region);
    ensure_file(&target, len)?;
    let stop = iogen::Stop::new();
    register_io(p, &ph.workload, &stop)?;
    let io_dir = p.run()?.run_dir.join("io");
    let log = io_dir.join(format!("{}.hlog", ev.id));
    // A verify-mode writer records its written set for the changed-block checks.
    let written = cbt::register_written(p, ev.id, ph, &target, &io_dir, ctx.origin())?;
    let opts = iogen::EngineOptions {
        engine: p.config.io_engine,
        interval_log: Some(log.clone()),
        interval: INTERVAL,
        seed: ev.id,
        spinners: p.config.io_spinners,
        ..iogen::EngineOptions::default()
    };
    let mut spec = iogen::PhaseSpec::from_trace(ph);
    if !is_device(&target) {
        spec.region = Some(spec.region.unwrap_or(len).min(len));
    }
    if written.is_some() {
        cbt::carry_generations(p, ph, &mut spec, &io_dir)?;
    }
    let start_ns = ctx.now_ns();
    // If the engine drops this future (timeout, or cancel after a stop's grace period), the
    // I/O must stop too, or it would keep the volume busy under cleanup.
    let _stop_on_drop = StopOnDrop(stop.clone());
    // A volume that can be modified has a blkio cgroup: the phase's thread joins it before
    // it starts any I/O (its workers and io_uring's are born there), so a modify's limit
    // binds this I/O too, also mid-flight.
    let cgroup = lock(&*p.volume(&ph.volume)?).cgroup.clone();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("cnsreplay-iogen".into())
        .spawn(move || {
            let joined = cgroup
                .as_deref()
                .map_or(Ok(()), local_storage::throttle::join_current_thread)
                .map_err(io_err);
            let _ = tx.send(joined.and_then(|()| {
                iogen::run_phase_recording(&spec, &target, &opts, &stop, written.as_ref())
                    .map_err(|e| ProviderError::new("io_failed", e.to_string()))
            }));
        })
        .map_err(io_err)?;
    // Its stop is registered with the workload and its thread runs: a detach or abort of the
    // workload may now come (and stop it).
    ctx.io_started();
    // iogen writes an interval histogram every INTERVAL: read them as they come (the live
    // per-tenant I/O metrics), and the rest once it is done.
    let mut tail = LogTail::new(log.clone());
    let mut rx = rx;
    let res = loop {
        tokio::select! {
            r = &mut rx => break r,
            () = tokio::time::sleep(INTERVAL) => tail.poll(&ctx),
        }
    };
    tail.poll(&ctx);
    let res =
        res.map_err(|_| ProviderError::new("panic", "the iogen thread ended without a result"))??;
    ctx.phase(if res.partial { "io-stopped" } else { "io-done" });
    cbt::written_done(p, ev.id);
    let summary = serde_json::to_vec_pretty(&res.summary).map_err(|e| io_err(e.into()))?;
    fs_err::write(io_dir.join(format!("{}.json", ev.id)), summary).map_err(io_err)?;
    let span = (start_ns, ctx.now_ns());
    let elapsed = (res.summary.elapsed_s * 1e9) as u64;
    if let Ok(mut split) = split_by_snapshot(&log, span, elapsed, &ctx) {
        // iogen's own issue lateness, every kind together (judged by the engine).
        let (mut lateness, mut service) = (hist(), hist());
        for (_, h) in res.histograms.iter() {
            // These auto-resize: adding cannot fail.
            let _ = lateness.add(&h.lateness);
            let _ = service.add(&h.service);
        }
        split.issue = Some(replay::provider::IssueLateness { lateness, service });
        let engine = &res.summary.engine;
        split.backend = Some(replay::IoBackend {
            backend: engine.backend_name().to_owned(),
            reason: match engine.fallback_reason() {
                Some(r) => Some(r.to_owned()),
                None if engine.backend_name() != "io_uring" => {
                    Some("the provider's io_engine asks for the thread-pool engine".to_owned())
                }
                None => None,
            },
        });
        ctx.report_io(split);
    }
    Ok(())
}

/// An iogen interval log read while it is written: each poll hands the intervals completed
/// since the last one to [`OpCtx::io_interval`].
struct LogTail {
    path: PathBuf,
    /// Open once iogen has created it; each poll reads on from where the last one ended.
    file: Option<std::fs::File>,
    feed: iogen::IntervalFeed,
    warned: bool,
}

impl LogTail {
    fn new(path: PathBuf) -> Self {
        Self {
            path,
            file: None,
            feed: iogen::IntervalFeed::default(),
            warned: false,
        }
    }

    fn poll(&mut self, ctx: &OpCtx) {
        use std::io::Read;
        if self.file.is_none() {
            // Not there yet: iogen creates it when the phase starts.
            self.file = std::fs::File::open(&self.path).ok();
        }
        let Some(f) = self.file.as_mut() else {
            return;
        };
        let mut buf = Vec::new();
        if f.read_to_end(&mut buf).is_err() {
            return;
        }
        match self.feed.push(&buf) {
            Ok(ivs) => {
                for (kind, h) in ivs {
                    ctx.io_interval(&kind, &h);
                }
            }
            Err(e) if !self.warned => {
                self.warned = true;
                tracing::warn!("live I/O metrics of {}: {e}", self.path.display());
            }
            Err(_) => {}
        }
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
    replay::provider::io_report_from_interval_log(&bytes, ctx, span, Some(elapsed))
}

pub(crate) async fn single_io(
    p: &LocalProvider,
    io: &Io,
    ctx: Arc<OpCtx>,
) -> Result<(), ProviderError> {
    let BareTarget {
        path: target, len, ..
    } = bare_target(p, &io.volume)?;
    let io = io.clone();
    blocking(move || {
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

/// Where bare `io` (no workload holds the volume) goes.
pub(crate) struct BareTarget {
    /// The file or device.
    pub(crate) path: PathBuf,
    /// The bytes the requests may address.
    pub(crate) len: u64,
    /// Whether it is a file-system volume's image (loop mode, not attached): the trace's
    /// offsets are its bytes, so a write lands on the file system's blocks.
    pub(crate) file_system: bool,
}

/// Where bare `io` goes: the volume's own storage — in loop mode its image file (block-level:
/// the trace's offsets are the volume's bytes, as on the traced device), or the loop device or
/// data file of a volume still attached; in directory mode its data file, sized as the volume.
pub(crate) fn bare_target(
    p: &LocalProvider,
    name: &trace_format::Name,
) -> Result<BareTarget, ProviderError> {
    let vol = p.volume(name)?;
    let (image, size, attached, block) = {
        let g = vol
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (
            g.image.clone(),
            g.size,
            g.mount.is_some() || g.loop_dev.is_some(),
            g.block,
        )
    };
    if attached {
        let path = io_target(p, name)?;
        let len = if is_device(&path) {
            size
        } else {
            data_len(size, None)
        };
        return Ok(BareTarget {
            path,
            len,
            file_system: false,
        });
    }
    Ok(if p.loop_mode() {
        BareTarget {
            path: image,
            len: size,
            file_system: !block,
        }
    } else {
        BareTarget {
            path: image.join(DATA_FILE),
            len: size,
            file_system: false,
        }
    })
}

/// Writes every byte of a sparse file target once before the clock starts (as fio lays out a
/// job's file), so the replay's writes overwrite allocated blocks and its reads read the disk:
/// on a sparse image a write allocates blocks (the file system's allocator and journal in
/// the kernel's I/O workers) and a read of a hole returns zeros without touching the disk,
/// neither of which the traced device did. Files over `max` bytes stay sparse. Says which.
fn lay_out(target: &Path, size: u64, max: u64) -> Result<&'static str, ProviderError> {
    use std::io::Write as _;
    use std::os::unix::fs::MetadataExt as _;
    if is_device(target) {
        return Ok("a device: used as it is");
    }
    let meta = fs_err::metadata(target).map_err(io_err)?;
    let len = meta.len().min(size);
    if meta.blocks().saturating_mul(512) >= len {
        return Ok("laid out (every block allocated)");
    }
    if len > max {
        return Ok(
            "sparse (larger than --local-io-layout-max): writes allocate, reads of holes skip the disk",
        );
    }
    let mut f = fs_err::OpenOptions::new()
        .write(true)
        .open(target)
        .map_err(io_err)?;
    // Non-zero bytes, so no layer can skip them as zeros.
    let chunk = vec![0x5Au8; 1 << 20];
    let mut done = 0u64;
    while done < len {
        let n = usize::try_from((len - done).min(chunk.len() as u64)).unwrap_or(chunk.len());
        f.write_all(&chunk[..n]).map_err(io_err)?;
        done += n as u64;
    }
    f.file().sync_all().map_err(io_err)?;
    Ok("laid out before the clock started (every byte written once)")
}

/// A stream's spin margin: the configured one, else iogen's 50 µs when every volume the
/// header declares can have a CPU of its own beside the engine's (fewer volumes than CPUs),
/// else 0 — spinning streams that share CPUs take each other's turns (docs/PERFORMANCE.md,
/// Block-trace replay: 4 volumes on 2 CPUs, p99 254–333 µs spinning, 114–132 µs not).
fn stream_spin(p: &LocalProvider) -> Result<Duration, ProviderError> {
    if let Some(ns) = p.config.stream_spin_ns {
        return Ok(Duration::from_nanos(ns));
    }
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    Ok(if p.run()?.header.volumes.len() < cpus {
        Duration::from_micros(50)
    } else {
        Duration::ZERO
    })
}

/// Where the stream of `name` runs: see [`StreamCpus`].
fn stream_cpus(
    p: &LocalProvider,
    name: &trace_format::Name,
    sparse: bool,
) -> Result<Option<iogen::CpuPlacement>, ProviderError> {
    let volumes = &p.run()?.header.volumes;
    let index = volumes.iter().position(|v| &v.name == name).unwrap_or(0);
    let allowed =
        iogen::allowed_cpus().map_err(|e| ProviderError::new("io_failed", e.to_string()))?;
    place_stream(
        &p.config.stream_cpus,
        index,
        volumes.len(),
        sparse,
        &allowed,
    )
    .map_err(|m| ProviderError::new("invalid_config", m))
}

/// Where the stream of the `index`-th of `volumes` header volumes runs (see
/// [`StreamCpus`]), on a process that may use `allowed` CPUs; `sparse`: the stream's
/// target has blocks still to allocate, so its writes go to the kernel's I/O workers.
fn place_stream(
    cpus: &StreamCpus,
    index: usize,
    volumes: usize,
    sparse: bool,
    allowed: &[usize],
) -> Result<Option<iogen::CpuPlacement>, String> {
    let reserved: Vec<usize> = match cpus {
        StreamCpus::None => return Ok(None),
        StreamCpus::Auto if !sparse || volumes >= allowed.len() => return Ok(None),
        StreamCpus::Auto => allowed.iter().rev().take(volumes).copied().collect(),
        StreamCpus::List(list) => {
            if let Some(c) = list.iter().find(|c| !allowed.contains(c)) {
                return Err(format!(
                    "--local-io-cpus: CPU {c} is not one this process may run on ({allowed:?})"
                ));
            }
            list.clone()
        }
    };
    let Some(&thread) = reserved.get(index % reserved.len().max(1)) else {
        return Ok(None);
    };
    let mut kernel_workers: Vec<usize> = allowed
        .iter()
        .copied()
        .filter(|c| !reserved.contains(c))
        .collect();
    if kernel_workers.is_empty() {
        // Every CPU holds a stream: the workers may go anywhere (not only to the pinned
        // thread's CPU, which they would inherit).
        kernel_workers = allowed.to_vec();
    }
    Ok(Some(iogen::CpuPlacement {
        thread,
        kernel_workers,
    }))
}

/// Opens the stream of a volume's bare `io` events: iogen's stream on [`bare_target`],
/// O_DIRECT where the file system allows it.
pub(crate) fn open_stream(
    p: &LocalProvider,
    name: &trace_format::Name,
) -> Result<Box<dyn IoStream>, ProviderError> {
    let BareTarget {
        path: target,
        len: size,
        file_system,
    } = bare_target(p, name)?;
    ensure_file(&target, size)?;
    // A file-system volume's image holds a file system: writing every byte would destroy it
    // for a later attach, so only raw targets (block volumes, directory-mode data files) are
    // laid out.
    let laid_out = if file_system {
        "a file-system volume's image: not laid out (bare writes overwrite its bytes where the \
         trace writes)"
    } else {
        lay_out(&target, size, p.config.stream_layout_max)?
    };
    // Whether writes will allocate: blocks missing below the addressed length.
    let (size, sparse) = if is_device(&target) {
        (size, false)
    } else {
        use std::os::unix::fs::MetadataExt as _;
        let meta = fs_err::metadata(&target).map_err(io_err)?;
        let len = meta.len().min(size.max(1));
        (len, meta.blocks().saturating_mul(512) < len)
    };
    let align =
        iogen::direct_alignment(&target).map_err(|e| ProviderError::new("io", e.to_string()))?;
    let opts = iogen::EngineOptions {
        engine: p.config.io_engine,
        stream_depth: p.config.stream_depth,
        stream_max_len: p.config.stream_max_len,
        spin: Some(stream_spin(p)?),
        spinners: p.config.io_spinners,
        cpus: stream_cpus(p, name, sparse)?,
        ..iogen::EngineOptions::default()
    };
    let (tx, handle) = iogen::start_stream(&target, align.is_some(), &opts)
        .map_err(|e| ProviderError::new("io_failed", e.to_string()))?;
    let mut flags = vec![format!(
        "spin {} µs before each request",
        opts.spin.unwrap_or_default().as_micros()
    )];
    flags.push(match align {
        Some(a) => format!("O_DIRECT, {a}-byte aligned"),
        None => "buffered (the file system refuses O_DIRECT)".to_owned(),
    });
    let place = iogen::Placement::new(size, align.unwrap_or(1));
    flags.push(place.describe());
    flags.push(laid_out.to_owned());
    Ok(Box::new(LocalStream {
        tx: Some(tx),
        handle,
        target: target.display().to_string(),
        place,
        adjusted: 0,
        flags,
    }))
}

struct LocalStream {
    tx: Option<iogen::IoSubmitter>,
    handle: iogen::StreamHandle,
    target: String,
    place: iogen::Placement,
    adjusted: u64,
    flags: Vec<String>,
}

impl IoStream for LocalStream {
    fn submit(&mut self, io: &Io, intended: Instant) -> Result<Submit, ProviderError> {
        let ((offset, len), changed) = self.place.place(io.kind, io.offset, io.len);
        self.adjusted += u64::from(changed);
        let Some(tx) = &self.tx else {
            return Err(ProviderError::new("io_failed", "the stream has ended"));
        };
        match tx.submit(iogen::IoRequest {
            kind: io.kind,
            offset,
            len,
            intended,
        }) {
            Ok(()) => Ok(Submit::Queued),
            Err(iogen::Error::QueueFull) => Ok(Submit::Full),
            Err(e) => Err(ProviderError::new("io_failed", e.to_string())),
        }
    }

    fn finish(mut self: Box<Self>, stop: bool) -> Result<IoStreamReport, ProviderError> {
        drop(self.tx.take());
        if stop {
            self.handle.stop();
        }
        let r = self
            .handle
            .finish()
            .map_err(|e| ProviderError::new("io_failed", e.to_string()))?;
        let mut flags = vec![r.summary.engine.engine.clone()];
        flags.extend(r.summary.engine.flags.iter().cloned());
        flags.extend(self.flags);
        let (mut response, mut service, mut lateness) = (hist(), hist(), hist());
        for (_, h) in r.histograms.iter() {
            // These auto-resize: adding cannot fail.
            let _ = response.add(&h.response);
            let _ = service.add(&h.service);
            let _ = lateness.add(&h.lateness);
        }
        Ok(IoStreamReport {
            target: self.target,
            flags,
            accepted: r.accepted,
            completed: r.summary.ios,
            errors: r.errors - r.rejected.min(r.errors),
            rejected: r.rejected,
            reordered: r.reordered,
            unissued: r.unissued,
            adjusted: self.adjusted,
            response,
            service,
            lateness,
            base: r.base,
            bucket_ns: iogen::BUCKET_NS,
            buckets: r.buckets,
            cpu_per_request_us: r.summary.cpu.per_io_us,
            ended: Instant::now(),
        })
    }
}

fn hist() -> hdrhistogram::Histogram<u64> {
    hdrhistogram::Histogram::new(3).expect("3 significant digits are valid")
}

#[cfg(test)]
mod tests {
    use super::{is_device, place_stream};
    use crate::config::StreamCpus;

    #[test]
    fn a_device_is_known_by_its_type_not_its_path() {
        assert!(is_device(std::path::Path::new("/dev/null")));
        let dir = tempfile::tempdir_in("/dev/shm")
            .or_else(|_| tempfile::tempdir())
            .unwrap();
        let f = dir.path().join("image");
        std::fs::write(&f, b"x").unwrap();
        assert!(!is_device(&f), "{}", f.display());
        assert!(!is_device(&dir.path().join("missing")));
    }

    fn placed(cpus: &StreamCpus, index: usize, volumes: usize, allowed: &[usize]) -> String {
        match place_stream(cpus, index, volumes, true, allowed) {
            Ok(Some(p)) => format!("{}|{:?}", p.thread, p.kernel_workers),
            Ok(None) => "none".to_owned(),
            Err(e) => e,
        }
    }

    #[test]
    fn auto_binds_streams_of_sparse_targets_from_the_last_cpu_and_workers_to_the_rest() {
        let a = StreamCpus::Auto;
        assert_eq!(placed(&a, 0, 1, &[0, 1]), "1|[0]");
        assert_eq!(placed(&a, 0, 2, &[0, 1, 2, 3]), "3|[0, 1]");
        assert_eq!(placed(&a, 1, 2, &[0, 1, 2, 3]), "2|[0, 1]");
        // A narrowed mask (taskset 4,6,7): only those CPUs.
        assert_eq!(placed(&a, 0, 1, &[4, 6, 7]), "7|[4, 6]");
        // As many volumes as CPUs: no stream gets a CPU of its own, so none is bound.
        assert_eq!(placed(&a, 0, 2, &[0, 1]), "none");
        assert_eq!(placed(&StreamCpus::None, 0, 1, &[0, 1]), "none");
        // A laid-out target: the kernel's workers have nothing to do, and a stream free to
        // move dodges whatever else runs on its CPU.
        assert_eq!(place_stream(&a, 0, 1, false, &[0, 1]), Ok(None));
        // A list applies either way.
        assert!(
            place_stream(&StreamCpus::List(vec![1]), 0, 1, false, &[0, 1])
                .unwrap()
                .is_some()
        );
    }

    #[test]
    fn a_list_cycles_and_is_checked_against_the_allowed_cpus() {
        let l = StreamCpus::List(vec![3, 2]);
        assert_eq!(placed(&l, 0, 3, &[0, 1, 2, 3]), "3|[0, 1]");
        assert_eq!(placed(&l, 1, 3, &[0, 1, 2, 3]), "2|[0, 1]");
        assert_eq!(placed(&l, 2, 3, &[0, 1, 2, 3]), "3|[0, 1]");
        // Every CPU listed: the workers may run anywhere, not only on the thread's CPU.
        assert_eq!(
            placed(&StreamCpus::List(vec![0, 1]), 0, 1, &[0, 1]),
            "0|[0, 1]"
        );
        let e = placed(&l, 0, 1, &[0, 1]);
        assert!(e.contains("--local-io-cpus") && e.contains("CPU 3"), "{e}");
    }
}
