//! The check of a trace before `run`, `sweep` and `capacity` replay it, and what `run
//! --preflight-only` checks and prints besides (the run directory; kube's findings).
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

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use trace_format::{Error, TraceReader, check_trace_until};

/// Located problems after which the check stops reading.
pub(crate) const STOP_AFTER: u64 = 20;

/// Checks `trace`; logs its problems and returns `None` when it has any, else its statistics
/// (`trace stats`'s). An unreadable file is an error.
pub(crate) fn check(trace: &Path) -> anyhow::Result<Option<trace_format::check::Stats>> {
    let file = trace.display().to_string();
    let t0 = std::time::Instant::now();
    let reader = match TraceReader::open(trace) {
        Ok(r) => r,
        Err(Error::Invalid(d)) => {
            tracing::error!("{d}");
            tracing::error!(
                "{file}: refusing to run a trace with problems (--no-check skips this check)"
            );
            return Ok(None);
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
        return Ok(Some(r.stats));
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
    Ok(None)
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

/// `run --preflight-only`'s check of the run directory `dir`, creating nothing: it must be
/// absent or an empty directory (as the run requires), and its nearest existing ancestor a
/// directory this process can create in (tried with a temporary file, removed at once: the
/// permission bits do not tell, e.g. for root on `/proc`). A failure is an error naming the
/// directory (the command could not run: exit 2).
pub(crate) fn output_dir(dir: &Path) -> anyhow::Result<()> {
    let refuse = |why: String| anyhow::anyhow!("-o {}: {why}", dir.display());
    if dir.exists() {
        if !dir.is_dir() {
            return Err(refuse("exists and is not a directory".into()));
        }
        let mut entries = fs_err::read_dir(dir).map_err(|e| refuse(e.to_string()))?;
        if entries.next().is_some() {
            return Err(refuse(
                "is not empty: a run directory must be new or empty".into(),
            ));
        }
        return try_create_in(dir).map_err(refuse);
    }
    let mut parent = dir.parent();
    while let Some(p) = parent {
        let p = if p.as_os_str().is_empty() {
            Path::new(".")
        } else {
            p
        };
        if p.exists() {
            if !p.is_dir() {
                return Err(refuse(format!(
                    "cannot be created: {} is not a directory",
                    p.display()
                )));
            }
            return try_create_in(p).map_err(|e| refuse(format!("cannot be created: {e}")));
        }
        parent = p.parent();
    }
    Ok(())
}

/// Creates and removes a temporary file in `dir`.
fn try_create_in(dir: &Path) -> Result<(), String> {
    tempfile::Builder::new()
        .prefix(".cnsreplay-preflight-")
        .tempfile_in(dir)
        .map(drop)
        .map_err(|e| format!("{}: cannot write there ({e})", dir.display()))
}

/// What `--preflight-only` found usable: each class and node the trace will use, with where
/// it is first used, and the capabilities its classes were checked for.
pub(crate) fn write_preflight(
    trace: &Path,
    uses: &provider_kube::TraceUses,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let name = |c: &Option<String>| c.clone().unwrap_or_else(|| "(the cluster default)".into());
    writeln!(
        out,
        "pre-flight passed for {} on kube (nothing was created):",
        trace.display()
    )?;
    for (c, at) in &uses.storage_classes {
        writeln!(out, "  StorageClass {}: first used by {at}", name(c))?;
    }
    for (c, at) in &uses.snapshot_classes {
        writeln!(out, "  VolumeSnapshotClass {}: first used by {at}", name(c))?;
    }
    for (n, (at, pods)) in &uses.nodes {
        let how = if *pods { ", schedulable" } else { "" };
        writeln!(out, "  node {n}{how}: first used by {at}")?;
    }
    for (need, u) in &uses.needs {
        writeln!(
            out,
            "  {} on StorageClass {}: supported ({} event(s), first {})",
            need.capability.op(),
            name(&need.storage_class),
            u.events.len().max(1),
            u.first
        )?;
    }
    let ops: Vec<&str> = uses.ops.iter().map(|o| o.name()).collect();
    writeln!(
        out,
        "  credentials: may make the requests of {}",
        ops.join(", ")
    )
}
