//! After the run: the summary built from what the sink collected, the streams and the
//! verdict, and `summary.json` and the final manifest written.

use std::sync::atomic::Ordering::SeqCst;
use std::time::Instant;

use trace_format::OpType;

use crate::Error;
use crate::bound::{self, Unseen};
use crate::provider::Provider;
use crate::record::{CompletionState, Percentiles, Summary};
use crate::rundir::RunDir;
use crate::sink::SinkResult;
use crate::streams::{self, StreamFidelity};
use crate::validity::{self, Measured, Reported, Verdict};

use super::{Finished, RunOptions, RunOutcome};

/// Builds the summary, writes `summary.json` and the final manifest, and marks the live
/// counters finished.
pub(super) fn summarize<P: Provider>(f: Finished<'_, P>) -> Result<RunOutcome, Error> {
    let Finished {
        rd,
        mut manifest,
        provider,
        opts,
        control,
        stopped,
        workers_busy,
        completion_lateness,
        sunk,
        cleanup,
        mut notices,
        origin,
        streams,
        cluster,
        host_steal_ns,
    } = f;
    let mut sunk = sunk;
    notices.extend(streams.notices);
    sunk.last_completed = sunk
        .last_completed
        .max(streams::last_end(&streams.ended, origin));
    let io_streams = stream_results(rd, &streams.ended, origin, opts, &mut sunk)?;
    tool_bounds(&mut sunk, &completion_lateness, !io_streams.is_empty());
    let wall = sunk.last_completed as f64 / 1e9;
    notices.extend(provider.finish_notices());
    let io_phases = sunk.ops.get(OpType::IoPhase.name()).map_or(0, |o| o.count);
    notices.extend(sunk.io.backend_notice(io_phases));
    notices.extend(streams::threads_notice(&io_streams));
    let client_throttling = provider.client_throttling();
    let dispatch_rate = validity::dispatch_rate(&sunk.windows, &opts.validity);
    let state = if stopped {
        CompletionState::Interrupted
    } else {
        CompletionState::Complete
    };
    let reason = stopped.then(|| control.reason());
    let provider_ops = || {
        sunk.ops
            .iter()
            .filter(|(op, _)| *op != OpType::Marker.name())
    };
    // What the lateness is judged against: the median service time of each op type the
    // engine called (not `io_phase`, a unit of many I/Os; not stream-fed `io`, judged by its
    // streams).
    let medians: Vec<(&str, u64)> = sunk
        .ops
        .iter()
        .filter(|(op, o)| {
            o.service.count > 0
                && *op != OpType::Marker.name()
                && *op != OpType::IoPhase.name()
                && (*op != OpType::Io.name() || io_streams.is_empty())
        })
        .map(|(op, o)| (op.as_str(), o.service.p50))
        .collect();
    // What each op type's verdict is judged by: the bounds of the figures it reports.
    let mut reported: Vec<Reported<'_>> = medians
        .iter()
        .filter_map(|&(op, _)| {
            sunk.ops.get(op).map(|o| Reported {
                op,
                blocks: [("response", &o.response), ("service", &o.service)],
            })
        })
        .collect();
    reported.push(Reported {
        op: validity::IO_PHASE_IO,
        blocks: [
            ("I/O without a snapshot", &sunk.io.without_snapshot),
            ("I/O with a snapshot", &sunk.io.with_snapshot),
        ],
    });
    let validity = validity::judge(
        &Measured {
            state,
            reason: reason.as_deref(),
            operations: provider_ops().map(|(_, o)| o.count).sum(),
            operations_ok: provider_ops().map(|(_, o)| o.ok).sum(),
            start_lateness: &sunk.start_lateness,
            waited: sunk.waited,
            resume_lateness: &sunk.resume_lateness,
            completion_lateness: &completion_lateness,
            io_lateness: sunk.io_issue.as_ref().map(|(l, s)| (l, s)),
            medians,
            reported,
            rate: dispatch_rate.as_ref(),
            workers_busy,
            throttling: &client_throttling,
            streams: &io_streams,
            host_steal_ns,
        },
        &opts.validity,
    );
    if matches!(
        validity.verdict,
        Verdict::EngineBound | Verdict::Failed | Verdict::PartlyValid | Verdict::Imprecise
    ) {
        notices.push(format!(
            "verdict {}: {}",
            validity.verdict,
            validity.evidence()
        ));
    }
    let summary = Summary {
        state,
        reason,
        provider: provider.name().to_owned(),
        speed: opts.speed,
        dispatched: sunk.dispatched,
        ok: sunk.ok,
        failed: sunk.failed,
        errors: sunk.errors,
        wall_seconds: wall,
        ops_per_second: if wall > 0.0 {
            sunk.dispatched as f64 / wall
        } else {
            0.0
        },
        lateness: sunk.lateness,
        pickup: sunk.pickup,
        start_lateness: sunk.start_lateness,
        waited: sunk.waited,
        resume_lateness: sunk.resume_lateness,
        completion_lateness,
        dispatch_rate,
        workers_busy,
        client_throttling,
        validity: Some(validity),
        ops: sunk.ops,
        io: sunk.io,
        io_streams,
        cluster,
        cleaned_up: cleanup.removed,
        cleanup_failures: cleanup.failed,
        notices,
    };
    rd.write_summary(&summary)?;
    // The limits the run was held to, beside the options they were resolved from.
    if let (Some(l), Some(v)) = (
        summary.validity.as_ref().and_then(|v| v.limits.as_ref()),
        manifest.options.get_mut("validity"),
    ) && let (Some(obj), Ok(l)) = (v.as_object_mut(), serde_json::to_value(l))
    {
        obj.insert("limits".to_owned(), l);
    }
    manifest.state = summary.state;
    manifest.reason.clone_from(&summary.reason);
    manifest.finished = Some(jiff::Timestamp::now());
    rd.write_manifest(&manifest)?;
    control.live().finished.store(true, SeqCst);
    Ok(RunOutcome { manifest, summary })
}

/// Each latency block's tool error bound ([`crate::bound`]): an op type's response from the
/// delay the engine measured per event and the completion wake-up delay the probe measured;
/// its service time from the latter alone; the I/O split (when iogen reported its issue
/// lateness) from both iogen's issue lateness and the wake-up delay. The `io` row of a run
/// whose `io` events went through streams holds the streams' latencies: no bound there.
fn tool_bounds(sunk: &mut SinkResult, completion_lateness: &Percentiles, streamed: bool) {
    let wake = Unseen::of(completion_lateness);
    for (op, h) in &sunk.bound_inputs {
        // A marker is the engine's own event, not a latency of the system.
        if op == OpType::Marker.name() || (streamed && op == OpType::Io.name()) {
            continue;
        }
        if let Some(row) = sunk.ops.get_mut(op) {
            row.response.tool_ns = bound::bound(&h.response, &h.less_engine, wake);
            row.service.tool_ns = bound::bound(&h.service, &h.service, wake);
        }
    }
    let io = &sunk.io_hists;
    let unseen = io
        .issue_lateness
        .as_ref()
        .and_then(|l| Unseen::of(&Percentiles::of(l)))
        .zip(wake)
        .map(|(l, w)| l.plus(w));
    sunk.io.with_snapshot.tool_ns = bound::bound(&io.with_snapshot, &io.with_snapshot, unseen);
    sunk.io.without_snapshot.tool_ns =
        bound::bound(&io.without_snapshot, &io.without_snapshot, unseen);
}

/// The streams' fidelity for the summary; their rate curves go to `io/streams/`, and their
/// requests join the `io` row of the summary's operations (count, ok, failed; latencies
/// are in the fidelity).
fn stream_results(
    rd: &RunDir,
    ended: &[streams::Ended],
    origin: Instant,
    opts: &RunOptions,
    sunk: &mut SinkResult,
) -> Result<Vec<StreamFidelity>, Error> {
    if ended.is_empty() {
        return Ok(Vec::new());
    }
    let per_event_io = sunk.ops.get(OpType::Io.name()).is_some_and(|r| r.count > 0);
    let dir = rd.path().join("io").join("streams");
    fs_err::create_dir_all(&dir)?;
    let mut out = Vec::new();
    for (i, (f, curve)) in streams::fidelity(ended, origin, opts.validity.window_events)
        .into_iter()
        .enumerate()
    {
        if let Some(mut c) = curve {
            c.volume.clone_from(&f.volume);
            let safe: String = f
                .volume
                .chars()
                .map(|ch| {
                    if ch.is_ascii_alphanumeric() || "-_.".contains(ch) {
                        ch
                    } else {
                        '_'
                    }
                })
                .collect();
            let path = dir.join(format!("{i:03}-{safe}.json"));
            let bytes = serde_json::to_vec(&c).map_err(|source| Error::Json {
                file: path.clone(),
                source,
            })?;
            fs_err::write(&path, bytes)?;
        }
        let row = sunk.ops.entry(OpType::Io.name().to_owned()).or_default();
        row.count += f.requests;
        row.ok += f.completed;
        row.failed += f.requests - f.completed.min(f.requests);
        sunk.dispatched += f.requests;
        sunk.ok += f.completed;
        sunk.failed += f.requests - f.completed.min(f.requests);
        for (class, n) in [("io_failed", f.errors), ("io_dropped", f.dropped)] {
            if n > 0 {
                *sunk.errors.entry(class.to_owned()).or_default() += n;
            }
        }
        out.push(f);
    }
    if !per_event_io && let Some(row) = sunk.ops.get_mut(OpType::Io.name()) {
        let (response, service, lateness) = streams::merged(ended);
        row.response = Percentiles::of(&response);
        row.service = Percentiles::of(&service);
        row.lateness = Percentiles::of(&lateness);
    }
    Ok(out)
}
