//! Running one I/O phase: validate, prepare the target, start one worker thread per job, feed
//! the interval log, and merge the jobs' results into one [`PhaseResult`].

use fs_err::os::unix::fs::OpenOptionsExt;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, OnceLock};
use std::time::{Duration, Instant};

use trace_format::Load;

use crate::backend::{Backend, BackendConfig, BackendInfo};
use crate::engine::{PhaseSource, Worker};
use crate::generate::{OpGen, Schedule, block_sizes};
use crate::layout;
use crate::ring::{self, AlignedBuf};
use crate::stats::{CpuTime, EngineInfo, Histograms, IntervalLog, Recorder, Summary};
use crate::verify::{GenMap, Verifier, VerifySummary};
use crate::written::{Recording, WriteRecord, WrittenSpec};
use crate::{EngineOptions, Error, PhaseSpec, Stop};

/// The result of a phase: summary, histograms, and whether it was cut short.
#[derive(Debug, Clone)]
pub struct PhaseResult {
    /// The JSON summary.
    pub summary: Summary,
    /// Response, service and lateness histograms per kind (merged over jobs).
    pub histograms: Histograms,
    /// A stop request ended the phase early.
    pub partial: bool,
    /// Every acknowledged write, in acknowledgement order, when the phase recorded them
    /// ([`run_phase_recording`]).
    pub written: Option<Vec<WriteRecord>>,
}

/// Validated phase parameters.
struct Plan {
    region: u64,
    align: u64,
    max_len: u64,
    jobs: u32,
}

fn invalid(field: &'static str, reason: impl Into<String>) -> Error {
    Error::InvalidSpec {
        field,
        reason: reason.into(),
    }
}

fn validate(spec: &PhaseSpec, region: u64) -> Result<Plan, Error> {
    if spec.read_pct > 100 {
        return Err(invalid(
            "read_pct",
            format!("{} is above 100", spec.read_pct),
        ));
    }
    if spec.jobs == 0 || spec.jobs > 1024 {
        return Err(invalid("jobs", format!("{} is not in 1..=1024", spec.jobs)));
    }
    let sizes = block_sizes(&spec.block_size);
    if sizes.is_empty() {
        return Err(invalid(
            "block_size",
            "the mix has no entry with a positive weight",
        ));
    }
    let min = sizes.iter().map(|s| s.0).min().unwrap_or(0);
    let max = sizes.iter().map(|s| s.0).max().unwrap_or(0);
    if min == 0 || max > 64 << 20 {
        return Err(invalid("block_size", "sizes must be in 1 B ..= 64 MiB"));
    }
    if sizes.iter().any(|s| s.0 % min != 0) {
        return Err(invalid(
            "block_size",
            format!("every size must be a multiple of the smallest ({min})"),
        ));
    }
    if (spec.direct || spec.verify) && min % 512 != 0 {
        return Err(invalid(
            "block_size",
            format!("{min} is not a multiple of 512 (needed for direct and verify)"),
        ));
    }
    match &spec.load {
        Load::Depth(d) if *d == 0 || *d > 4096 => {
            return Err(invalid("load.depth", format!("{d} is not in 1..=4096")));
        }
        Load::Rate(r) if !(r.iops.is_finite() && r.iops > 0.0) => {
            return Err(invalid(
                "load.rate.iops",
                format!("{} is not a positive rate", r.iops),
            ));
        }
        _ => {}
    }
    if spec.duration.is_none() && spec.bytes.is_none() && spec.ios.is_none() {
        return Err(invalid(
            "duration",
            "one of duration, bytes or ios must bound the phase",
        ));
    }
    let region = region / min * min;
    let per_job = region / u64::from(spec.jobs) / min * min;
    if per_job < max || (!spec.verify && region < max) {
        return Err(invalid(
            "region",
            format!(
                "{region} B is too small for {} job(s) of {max} B blocks",
                spec.jobs
            ),
        ));
    }
    Ok(Plan {
        region,
        align: min,
        max_len: max,
        jobs: spec.jobs,
    })
}

pub(crate) fn open_target(target: &Path, direct: bool, write: bool) -> Result<File, Error> {
    let mut o = fs_err::OpenOptions::new();
    o.read(true).write(write);
    if direct {
        o.custom_flags(libc::O_DIRECT);
    }
    Ok(o.open(target)?.into_parts().0)
}

/// The offset and length alignment O_DIRECT needs on `target` (512 or 4096 bytes, found by
/// reading one block), or `None` when its file system refuses O_DIRECT (tmpfs, say).
pub fn direct_alignment(target: &Path) -> Result<Option<u64>, Error> {
    use std::os::unix::fs::FileExt;
    let file = match open_target(target, true, false) {
        Ok(f) => f,
        Err(Error::Io(e)) if e.raw_os_error() == Some(libc::EINVAL) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut buf = AlignedBuf::new(8192);
    for align in [512u64, 4096] {
        let n = align as usize;
        match file.read_at(&mut buf.as_mut_slice()[n..2 * n], align) {
            Ok(_) => return Ok(Some(align)),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
            Err(e) => return Err(Error::Io(e)),
        }
    }
    Ok(None)
}

struct JobOut {
    rec: Recorder,
    info: BackendInfo,
    verify: Option<VerifySummary>,
    elapsed: u64,
    cpu: (Duration, Duration),
    stopped: bool,
    /// The acknowledged writes on the record's clock (empty unless recorded).
    written: Vec<WriteRecord>,
}

/// Blocking: runs one I/O phase against a file or block device (creates/extends a regular
/// file to `region`, or a new one to [`crate::DEFAULT_NEW_FILE_SIZE`], if needed; see
/// `layout`); returns when done or when `stop` is requested (then the result is marked
/// partial). When it fails, a file it created is removed and one it extended is truncated
/// back; a stop while the file is laid out is such a failure ([`Error::Interrupted`]).
pub fn run_phase(
    spec: &PhaseSpec,
    target: &Path,
    opts: &EngineOptions,
    stop: &Stop,
) -> Result<PhaseResult, Error> {
    run_phase_recording(spec, target, opts, stop, None)
}

/// [`run_phase`] that, with `written`, also records every acknowledged write (see
/// [`crate::written`]) and writes the record file at the end, also after a stop.
pub fn run_phase_recording(
    spec: &PhaseSpec,
    target: &Path,
    opts: &EngineOptions,
    stop: &Stop,
    written: Option<&WrittenSpec>,
) -> Result<PhaseResult, Error> {
    // A spec that cannot run is refused before anything is laid out (without a region, all
    // but the region's size, which is checked once the target's is known).
    validate(spec, spec.region.unwrap_or(u64::MAX))?;
    let layout = layout::prepare(target, spec.region, stop)?;
    if layout.size == 0 {
        return Err(invalid(
            "region",
            format!("{} is an empty device", target.display()),
        ));
    }
    let plan = validate(spec, spec.region.unwrap_or(layout.size).min(layout.size))?;
    let r = run_planned(spec, plan, target, opts, stop, written)?;
    layout.keep();
    Ok(r)
}

fn run_planned(
    spec: &PhaseSpec,
    plan: Plan,
    target: &Path,
    opts: &EngineOptions,
    stop: &Stop,
    written: Option<&WrittenSpec>,
) -> Result<PhaseResult, Error> {
    let map = if spec.verify {
        let m = match &spec.verify_state {
            Some(p) if p.exists() => GenMap::load(p, plan.align, plan.region)?,
            _ => GenMap::new(plan.align, plan.region),
        };
        Some(m)
    } else {
        None
    };
    let (iv_tx, iv_rx) = mpsc::channel();
    let mut ivlog = match &opts.interval_log {
        Some(p) => Some(IntervalLog::create(p, plan.jobs as usize, opts.interval)?),
        None => None,
    };
    let proc0 = ring::cpu_time(false);
    // Job threads are not scoped and not joined: each sends its result, and one whose requests
    // were abandoned after a stop may sit in the kernel when it exits (a thread that submitted
    // io_uring requests cannot exit before its io-wq workers are done) without holding up the
    // phase's result.
    let n = plan.jobs as usize;
    let ctx = Arc::new(JobCtx {
        spec: spec.clone(),
        plan,
        target: target.to_path_buf(),
        opts: opts.clone(),
        stop: stop.clone(),
        map,
        barrier: Barrier::new(n),
        start: OnceLock::new(),
        written: written.map(|w| w.origin),
    });
    let (res_tx, res_rx) = mpsc::channel();
    for j in 0..ctx.plan.jobs {
        let tx = ivlog.as_ref().map(|_| (opts.interval, iv_tx.clone()));
        let (ctx, res_tx) = (Arc::clone(&ctx), res_tx.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("iogen-job-{j}"))
            .spawn(move || {
                let _ = res_tx.send(run_job(&ctx, j, tx));
            });
        if let Err(e) = spawned {
            // Jobs already started wait at the barrier for ever; they hold nothing open yet
            // but their target and ring.
            stop.request();
            return Err(Error::Io(e));
        }
    }
    drop((iv_tx, res_tx));
    let mut iv_err = None;
    if let Some(log) = &mut ivlog {
        for msg in iv_rx.iter() {
            if let Err(e) = log.add(&msg) {
                stop.request();
                iv_err = Some(e);
                break;
            }
        }
    }
    // A job that panicked sends nothing: the iterator ends when every sender is gone.
    let mut results: Vec<Result<JobOut, Error>> = res_rx.iter().take(n).collect();
    results.resize_with(n, || Err(Error::WorkerPanicked));
    if let Some(e) = iv_err {
        return Err(e);
    }
    if let Some(log) = ivlog {
        log.finish()?;
    }
    let proc1 = ring::cpu_time(false);
    let mut rec = Recorder::new(None);
    let mut summary = Summary {
        target: target.display().to_string(),
        kernel: ring::kernel_release(),
        config: Some(spec.clone()),
        ..Default::default()
    };
    let (mut user, mut sys, mut elapsed, mut partial) =
        (Duration::ZERO, Duration::ZERO, 0u64, false);
    let mut verify: Option<VerifySummary> = None;
    let mut records = Vec::new();
    for r in results {
        let mut j = r?;
        records.append(&mut j.written);
        rec.merge(&j.rec)?;
        user += j.cpu.0;
        sys += j.cpu.1;
        elapsed = elapsed.max(j.elapsed);
        partial |= j.stopped;
        if summary.engine.engine.is_empty() {
            summary.engine = EngineInfo {
                engine: j.info.engine.to_owned(),
                flags: j.info.flags,
                notes: j.info.notes,
            };
        }
        if let Some(v) = j.verify {
            verify
                .get_or_insert_with(|| VerifySummary {
                    unit: v.unit,
                    ..Default::default()
                })
                .merge(&v);
        }
    }
    if let (Some(m), Some(p)) = (&ctx.map, &spec.verify_state) {
        m.save(p)?;
    }
    let written = match written {
        // An empty path: the caller takes the records from the result only.
        Some(w) if w.path.as_os_str().is_empty() => {
            records.sort_by_key(|r| (r.acked_ns, r.offset));
            Some(records)
        }
        Some(w) => {
            crate::written::write_records(&w.path, &mut records)?;
            Some(records)
        }
        None => None,
    };
    let elapsed = Duration::from_nanos(elapsed);
    rec.summarize(&mut summary, elapsed);
    summary.partial = partial;
    summary.verify = verify;
    if let Load::Rate(r) = &spec.load {
        summary.intended_iops = Some(r.iops);
        // The intended window: the configured duration, or, when the run ended early (a stop,
        // a byte or I/O count), the time it actually ran.
        let window = match spec.duration {
            Some(d) if !partial => d,
            Some(d) => d.min(elapsed),
            None => elapsed,
        }
        .as_secs_f64()
        .max(1e-9);
        summary.offered_iops = Some((summary.ios + summary.errors) as f64 / window);
    }
    let ios = (summary.ios + summary.errors).max(1) as f64;
    summary.cpu = CpuTime {
        user_s: user.as_secs_f64(),
        sys_s: sys.as_secs_f64(),
        per_io_us: (user + sys).as_secs_f64() * 1e6 / ios,
        process_user_s: proc1.0.saturating_sub(proc0.0).as_secs_f64(),
        process_sys_s: proc1.1.saturating_sub(proc0.1).as_secs_f64(),
    };
    Ok(PhaseResult {
        summary,
        histograms: rec.hists,
        partial,
        written,
    })
}

/// `total` split over `jobs`: job `j`'s share.
fn share(total: u64, jobs: u32, j: u32) -> u64 {
    let (q, r) = (total / u64::from(jobs), total % u64::from(jobs));
    q + u64::from(u64::from(j) < r)
}

/// What every job of a phase shares.
struct JobCtx {
    spec: PhaseSpec,
    plan: Plan,
    target: PathBuf,
    opts: EngineOptions,
    stop: Stop,
    map: Option<GenMap>,
    barrier: Barrier,
    start: OnceLock<Instant>,
    /// The origin of the written-set record's clock, when the phase records one.
    written: Option<Instant>,
}

fn run_job(
    ctx: &JobCtx,
    j: u32,
    iv: Option<(Duration, mpsc::Sender<crate::stats::IntervalMsg>)>,
) -> Result<JobOut, Error> {
    let JobCtx {
        spec,
        plan,
        target,
        opts,
        stop,
        map,
        barrier,
        start,
        written,
    } = ctx;
    let map = map.as_ref();
    ring::tight_timer_slack();
    let seed = opts.seed ^ (u64::from(j) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    // Verify jobs own disjoint slices; otherwise every job uses the whole region.
    let (start_off, len) = if spec.verify {
        let per = plan.region / u64::from(plan.jobs) / plan.align * plan.align;
        (per * u64::from(j), per)
    } else {
        (0, plan.region)
    };
    let opgen = OpGen::new(
        spec.pattern,
        spec.read_pct,
        &spec.block_size,
        start_off,
        len,
        plan.align,
        seed,
    );
    let (slots, schedule) = match &spec.load {
        Load::Depth(d) => (*d as usize, None),
        Load::Rate(r) => {
            let phase = f64::from(j) / f64::from(plan.jobs);
            let s = Schedule::new(
                r.arrival,
                r.iops / f64::from(plan.jobs),
                phase,
                seed ^ 0xa77,
            );
            (spec.max_inflight.max(1) as usize, Some(s))
        }
    };
    let open_loop = schedule.is_some();
    let cfg = BackendConfig {
        slots,
        buf_len: plan.max_len as usize,
        defer_taskrun: !open_loop,
    };
    // The worker (and its filled buffers) is ready before the clock starts.
    let worker = open_target(target, spec.direct, spec.read_pct < 100 || spec.verify)
        .and_then(|f| Backend::open(f, &cfg, opts))
        .map(|b| {
            let mut w = Worker::new(b, Recorder::new(iv), map.map(Verifier::new));
            w.set_spin(opts.spin);
            w.set_spinners(opts.spinners);
            w.written = written.map(|_| Recording::default());
            w
        });
    // Every job reaches the barrier, even on error, so the others are not left waiting.
    barrier.wait();
    let mut w = worker?;
    w.set_base(*start.get_or_init(Instant::now));
    let mut info = w.backend.info();
    if open_loop && ring::short_time_slice() {
        info.flags.push("sched_slice_100us".to_owned());
    }
    let mut src = PhaseSource::new(
        opgen,
        schedule,
        spec.duration.map(|d| d.as_nanos() as u64),
        spec.ios.map(|n| share(n, plan.jobs, j)),
        spec.bytes.map(|n| share(n, plan.jobs, j)),
        spec.verify,
    );
    let run = w.run(&mut src, stop);
    let Worker {
        backend,
        rec,
        verifier,
        written: recording,
        base,
        last_completion,
        ..
    } = w;
    let pool_cpu = backend.finish();
    let stopped = run?;
    let me = ring::cpu_time(true);
    Ok(JobOut {
        rec,
        info,
        verify: verifier.map(|v| v.summary),
        elapsed: last_completion,
        cpu: (me.0 + pool_cpu.0, me.1 + pool_cpu.1),
        stopped,
        written: match (recording, written) {
            (Some(r), Some(origin)) => r.finish(base, *origin),
            _ => Vec::new(),
        },
    })
}
