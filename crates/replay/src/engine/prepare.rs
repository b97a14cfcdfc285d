//! Before the clock: the options checked, the run directory and its manifest created, the
//! provider prepared, the runtime built, and the volumes and workloads the trace header
//! declares set up (unmeasured).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use trace_format::{Attach, CreateVolume, Event, Op, TraceReader};

use crate::Error;
use crate::deps::{Deps, Key};
use crate::ledger::Ledger;
use crate::provider::{OpCtx, Provider, RunInfo, SnapshotTimeline};
use crate::record::CompletionState;
use crate::rundir::{HostInfo, Manifest, ProviderInfo, RunDir, TraceInfo, sha256_file};
use crate::timing;

use super::{Prepared, RunControl, RunOptions};

/// Checks the options, creates the run directory and its manifest (`running`), prepares the
/// provider, builds the runtime, creates the volumes the trace header declares and then
/// attaches the workloads it declares (before the clock starts, unmeasured, up to
/// [`SETUP_IN_FLIGHT`] at a time). If one of those fails, what was made is cleaned up and the
/// manifest says `interrupted`.
pub(super) fn prepare<P: Provider>(
    trace: &Path,
    run_dir: &Path,
    provider: &Arc<P>,
    opts: &RunOptions,
    control: &RunControl,
) -> Result<Prepared, Error> {
    check_options(opts)?;
    let sha256 = sha256_file(trace)?;
    let reader = TraceReader::open(trace)?;
    let rd = RunDir::create(run_dir)?;
    let abs_dir = fs_err::canonicalize(run_dir)?;
    let header = reader.header().clone();
    let started_wall = jiff::Timestamp::now();
    let info = RunInfo {
        run_dir: abs_dir,
        // Unique per run, also for several runs started by one process in one millisecond.
        run_id: {
            static RUNS: AtomicU64 = AtomicU64::new(0);
            let n = RUNS.fetch_add(1, Relaxed);
            format!(
                "{}-{}-{n}",
                started_wall.as_millisecond(),
                std::process::id()
            )
        },
        header: header.clone(),
        stop: Some(control.stop_flag()),
    };
    let mut manifest = Manifest {
        tool: opts.tool.clone(),
        run_id: info.run_id.clone(),
        trace: TraceInfo {
            path: trace.display().to_string(),
            sha256,
            header: header.clone(),
        },
        // With the lane count this machine resolved `lanes: 0` to.
        options: serde_json::to_value(RunOptions {
            timing: opts.timing.resolved(),
            ..opts.clone()
        })
        .unwrap_or_default(),
        seed: opts.seed,
        host: HostInfo::current(),
        provider: ProviderInfo {
            name: provider.name().to_owned(),
            config: provider.config(),
            environment: serde_json::Value::Null,
        },
        started: started_wall,
        origin: None,
        finished: None,
        state: CompletionState::Running,
        reason: None,
        pid: std::process::id(),
        merged: None,
        labels: opts.labels.clone(),
    };
    let written = Instant::now();
    rd.write_manifest(&manifest)?;
    // The manifest holds the trace header, which for a steady-state trace declares hundreds
    // of thousands of objects (tens of MB of JSON): it is written again with the origin just
    // before the clock starts, and that must not make the first events late.
    let manifest_write = written.elapsed();
    let ledger = Arc::new(Ledger::open(rd.path())?);
    let notices = provider.prepare(&info).map_err(|source| Error::Provider {
        provider: provider.name().to_owned(),
        source,
    })?;
    manifest.provider.environment = provider.environment();
    if !manifest.provider.environment.is_null() {
        rd.write_manifest(&manifest)?;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(opts.workers.max(1))
        .enable_time()
        .thread_name("cnsreplay-worker")
        .build()?;
    let snapshots = Arc::new(SnapshotTimeline::default());
    let mut deps = Deps::default();
    // Pre-existing volumes first, then the pre-running workloads that mount them.
    let n_vol = header.volumes.len();
    let setup: Vec<Arc<Event>> = header
        .volumes
        .iter()
        .map(|v| {
            Op::CreateVolume(CreateVolume {
                volume: v.name.clone(),
                size: v.size,
                storage_class: v.storage_class.clone(),
                access_mode: v.access_mode,
                volume_mode: v.volume_mode,
                source: None,
            })
        })
        .chain(header.workloads.iter().map(|w| {
            Op::Attach(Attach {
                workload: w.name.clone(),
                volumes: w.volumes.clone(),
                node: w.node.clone(),
                wait_for_room: false,
            })
        }))
        .enumerate()
        .map(|(i, op)| {
            let tenant = i
                .checked_sub(n_vol)
                .and_then(|j| header.workloads[j].tenant.clone());
            Arc::new(Event {
                at: 0,
                id: u64::MAX - i as u64,
                tenant,
                observed: None,
                op,
            })
        })
        .collect();
    let (volumes, workloads) = setup.split_at(n_vol);
    // Pre-existing volumes with an attributes class get it by a modify once they exist.
    let classes: Vec<Arc<Event>> = header
        .volumes
        .iter()
        .filter_map(|v| Some((v, v.attributes_class.clone()?)))
        .enumerate()
        .map(|(i, (v, class))| {
            Arc::new(Event {
                at: 0,
                id: u64::MAX - (setup.len() + i) as u64,
                tenant: None,
                observed: None,
                op: Op::ModifyVolume(trace_format::ModifyVolume {
                    volume: v.name.clone(),
                    class,
                }),
            })
        })
        .collect();
    // In order, each stage once the one before has succeeded.
    let failed = [
        (volumes, "pre-existing volumes"),
        (&classes[..], "attributes classes of pre-existing volumes"),
        (workloads, "pre-running workloads"),
    ]
    .into_iter()
    .find_map(|(evs, what)| set_up(&rt, provider, &ledger, &snapshots, evs, what).err());
    if let Some((ev, source)) = failed {
        // Nothing was replayed, but objects may exist already (this one half-made, or
        // earlier ones): remove them before reporting, and leave the run marked.
        drop(rt);
        let leftovers = ledger.live()?;
        if !leftovers.is_empty() {
            provider.cleanup(&info, &leftovers);
        }
        manifest.state = CompletionState::Interrupted;
        manifest.reason = Some(match ev.as_ref().map(|e| &e.op) {
            Some(Op::CreateVolume(c)) => {
                format!("creating pre-existing volume {} failed: {source}", c.volume)
            }
            Some(Op::Attach(a)) => {
                format!(
                    "attaching pre-running workload {} failed: {source}",
                    a.workload
                )
            }
            Some(Op::ModifyVolume(m)) => format!(
                "giving pre-existing volume {} attributes class {} failed: {source}",
                m.volume, m.class
            ),
            _ => format!("setting up the header's objects failed: {source}"),
        });
        manifest.finished = Some(jiff::Timestamp::now());
        rd.write_manifest(&manifest)?;
        return Err(Error::Provider {
            provider: provider.name().to_owned(),
            source,
        });
    }
    for v in &header.volumes {
        deps.exists(Key::Volume(v.name.clone()));
    }
    for w in &header.workloads {
        deps.running(&w.name, &w.volumes);
    }
    Ok(Prepared {
        rd,
        manifest,
        info,
        ledger,
        rt,
        snapshots,
        reader: Some((reader, deps)),
        notices,
        streams: Arc::default(),
        manifest_write,
    })
}

/// Most setup operations (pre-existing volumes, pre-running workloads) in flight at once: a
/// steady-state trace declares tens of thousands, which one at a time would take hours on a
/// cluster.
const SETUP_IN_FLIGHT: usize = 64;

/// Runs the setup events `evs` on the provider, unmeasured, up to [`SETUP_IN_FLIGHT`] at a
/// time, logging progress. At the first failure it starts no more, waits for those in flight
/// and returns the failed event (`None` for a task that panicked) with its error.
fn set_up<P: Provider>(
    rt: &tokio::runtime::Runtime,
    provider: &Arc<P>,
    ledger: &Arc<Ledger>,
    snapshots: &Arc<SnapshotTimeline>,
    evs: &[Arc<Event>],
    what: &str,
) -> Result<(), (Option<Arc<Event>>, crate::provider::ProviderError)> {
    if evs.is_empty() {
        return Ok(());
    }
    let started = Instant::now();
    tracing::info!("setting up {} {what} before the clock", evs.len());
    let result = rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        let mut next = evs.iter().cloned();
        let mut failed = None;
        let (mut done, mut logged) = (0usize, Instant::now());
        loop {
            while failed.is_none() && set.len() < SETUP_IN_FLIGHT {
                let Some(ev) = next.next() else { break };
                let p = provider.clone();
                let ctx = Arc::new(OpCtx::new(
                    Instant::now(),
                    ev.id,
                    ledger.clone(),
                    snapshots.clone(),
                ));
                set.spawn(async move {
                    let r = p.execute(ev.clone(), ctx).await;
                    (ev, r)
                });
            }
            let Some(joined) = set.join_next().await else {
                break;
            };
            done += 1;
            let err = match joined {
                Ok((_, Ok(()))) => None,
                Ok((ev, Err(e))) => Some((Some(ev), e)),
                Err(e) => Some((
                    None,
                    crate::provider::ProviderError::new("internal", format!("setup task: {e}")),
                )),
            };
            if failed.is_none() {
                failed = err;
            }
            if logged.elapsed() >= Duration::from_secs(5) {
                logged = Instant::now();
                tracing::info!("{what}: {done} of {} set up", evs.len());
            }
        }
        failed.map_or(Ok(()), Err)
    });
    if result.is_ok() {
        tracing::info!(
            "{} {what} set up in {:.1} s",
            evs.len(),
            started.elapsed().as_secs_f64()
        );
    }
    result
}

fn check_options(opts: &RunOptions) -> Result<(), Error> {
    if !(opts.speed.is_finite() && opts.speed > 0.0) {
        return Err(Error::Options(format!(
            "speed must be > 0, got {}",
            opts.speed
        )));
    }
    if opts.timing.lanes > timing::MAX_LANES {
        return Err(Error::Options(format!(
            "at most {} timing lanes, got {}",
            timing::MAX_LANES,
            opts.timing.lanes
        )));
    }
    if opts.concurrency.values().any(|&n| n == 0) {
        return Err(Error::Options(
            "a concurrency limit must be at least 1".into(),
        ));
    }
    Ok(())
}
