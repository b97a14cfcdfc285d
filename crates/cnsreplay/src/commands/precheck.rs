//! The check of a trace before `run`, `sweep` and `capacity` replay it.
//!
//! `validate`'s checker ([`trace_format::check::Checker`]) in one streaming pass before the
//! run directory is created, so a trace with problems is refused with its located problems
//! (exit 1) instead of surfacing mid-run as a wrong verdict, or a truncated binary trace
//! replaying to its cut. The work is bounded: reading stops after [`STOP_AFTER`] located
//! problems, and memory follows the checker's (the live objects, not the trace's length).
//! `run --no-check` skips it for a trace checked already.
//!
//! A speed below 1 can push a late event's time (or an `io_phase`'s end) past the largest time
//! offset; [`check_speed`] finds the first such event before anything is created, so a run at
//! `--speed 1e-12` is refused before its volumes exist rather than failing mid-way.

use std::path::Path;

use anyhow::Context;
use trace_format::{Error, TraceReader, check_trace_until};

/// Located problems after which the check stops reading.
pub(crate) const STOP_AFTER: u64 = 20;

/// Checks `trace`; logs its problems and returns false when it has any. An unreadable file
/// is an error.
pub(crate) fn check(trace: &Path) -> anyhow::Result<bool> {
    let file = trace.display().to_string();
    let t0 = std::time::Instant::now();
    let reader = match TraceReader::open(trace) {
        Ok(r) => r,
        Err(Error::Invalid(d)) => {
            tracing::error!("{d}");
            tracing::error!(
                "{file}: refusing to run a trace with problems (--no-check skips this check)"
            );
            return Ok(false);
        }
        Err(e) => return Err(e).with_context(|| format!("cannot read {file}")),
    };
    let pb = super::spinner("checking the trace");
    let r = check_trace_until(reader, &file, STOP_AFTER as usize, STOP_AFTER, |n| {
        pb.set_position(n);
    })
    .with_context(|| format!("cannot read {file}"))?;
    pb.finish_and_clear();
    let events = r.events;
    if r.is_valid() {
        tracing::info!(
            "{file}: checked, {events} events in {:.1} s",
            t0.elapsed().as_secs_f64()
        );
        return Ok(true);
    }
    for d in &r.diagnostics {
        tracing::error!("{d}");
    }
    let problems = r.problems;
    let stopped = if r.aborted {
        " (reading stopped: the rest cannot be decoded)".to_owned()
    } else if problems >= STOP_AFTER {
        format!(" (reading stopped at {STOP_AFTER} problems)")
    } else {
        String::new()
    };
    tracing::error!(
        "{file}: refusing to run: {problems} problem{} in {events} events{stopped}; `cnsreplay \
         validate {file}` lists them all, --no-check skips this check",
        if problems == 1 { "" } else { "s" },
    );
    Ok(false)
}

/// Checks that every event of `trace` still has a time (and every `io_phase` an end) at
/// `speed` ([`trace_format::rewrite::compress`]); logs the first that does not, located, and
/// returns false. A speed of 1 or more never overflows, so only slower speeds read the trace.
pub(crate) fn check_speed(
    trace: &Path,
    speed: f64,
    io_rate: trace_format::rewrite::IoRate,
) -> anyhow::Result<bool> {
    if speed >= 1.0 {
        return Ok(true);
    }
    let file = trace.display().to_string();
    let reader = TraceReader::open(trace).with_context(|| format!("cannot read {file}"))?;
    for (n, item) in reader.enumerate() {
        let (mut ev, loc) = item.with_context(|| format!("cannot read {file}"))?;
        if let Err(e) = trace_format::rewrite::compress(&mut ev, speed, io_rate) {
            let d = trace_format::Diagnostic {
                file,
                location: loc,
                path: format!("events[{}].{}", loc.record.unwrap_or(n as u64), e.field),
                problem: e.problem,
            };
            tracing::error!("--speed {speed}: {d}");
            return Ok(false);
        }
    }
    Ok(true)
}
