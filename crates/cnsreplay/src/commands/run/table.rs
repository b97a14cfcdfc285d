//! The table `run` prints at the end (without `--json`): operations, streams, the verdict.

use std::collections::BTreeMap;
use std::io::Write;

use replay::{CompletionState, Percentiles, Summary, Verdict};
use trace_format::OpType;

use trace_format::units::fmt_ms_compact;

pub(super) fn write_table(s: &Summary, out: &mut dyn Write) -> std::io::Result<()> {
    let state = match s.state {
        CompletionState::Complete => "complete".to_owned(),
        _ => format!(
            "INTERRUPTED ({})",
            s.reason.as_deref().unwrap_or("unknown reason")
        ),
    };
    writeln!(
        out,
        "{state}: {} events on {} in {:.1}s ({}/s), {} ok, {} failed; dispatch lateness p99 {} max {}",
        s.dispatched,
        s.provider,
        s.wall_seconds,
        per_s(s.ops_per_second),
        s.ok,
        s.failed,
        fmt_ms_compact(s.lateness.p99, 3),
        fmt_ms_compact(s.lateness.max, 3)
    )?;
    write_verdict(s, out)?;
    writeln!(out)?;
    // Wide enough for the longest op name of the run (`snapshot_allocated`, …).
    let w = s.ops.keys().map(String::len).max().unwrap_or(0).max(16);
    writeln!(
        out,
        "{:<w$} {:>7} {:>6} | {:>10} {:>10} {:>10} {:>10} | {:>10} {:>10} {:>10} {:>10}",
        "operation",
        "count",
        "failed",
        "resp p50",
        "p90",
        "p99",
        "max",
        "svc p50",
        "p90",
        "p99",
        "max"
    )?;
    let row = |p: &Percentiles| [p.p50, p.p90, p.p99, p.max].map(|n| fmt_ms_compact(n, 3));
    // Under each row, the most the tool's own delay could have added to each figure
    // (`tool_ns`, docs/replay.md: The tool's error bound); `-` where it was not measured.
    let tool = |p: &Percentiles| match &p.tool_ns {
        Some(b) => [b.p50, b.p90, b.p99, b.max].map(|n| format!("≤{}", fmt_ms_compact(n, 2))),
        None => std::array::from_fn(|_| "-".to_owned()),
    };
    for (op, o) in &s.ops {
        let (r, v) = (row(&o.response), row(&o.service));
        writeln!(
            out,
            "{op:<w$} {:>7} {:>6} | {:>10} {:>10} {:>10} {:>10} | {:>10} {:>10} {:>10} {:>10}",
            o.count, o.failed, r[0], r[1], r[2], r[3], v[0], v[1], v[2], v[3]
        )?;
        if o.response.tool_ns.is_some() || o.service.tool_ns.is_some() {
            let (r, v) = (tool(&o.response), tool(&o.service));
            writeln!(
                out,
                "{:<w$} {:>7} {:>6} | {:>10} {:>10} {:>10} {:>10} | {:>10} {:>10} {:>10} {:>10}",
                "  tool", "", "", r[0], r[1], r[2], r[3], v[0], v[1], v[2], v[3]
            )?;
        }
    }
    write_streams(s, out)?;
    if s.io.with_snapshot.count + s.io.without_snapshot.count > 0 {
        writeln!(out)?;
        let p999 = |p: &Percentiles| match &p.tool_ns {
            Some(b) => format!(
                "{} (tool ≤ {})",
                fmt_ms_compact(p.p999, 3),
                fmt_ms_compact(b.p999, 2)
            ),
            None => fmt_ms_compact(p.p999, 3),
        };
        writeln!(
            out,
            "I/O p99.9: {} without a snapshot in flight ({} I/Os), {} with ({} I/Os){}",
            p999(&s.io.without_snapshot),
            s.io.without_snapshot.count,
            p999(&s.io.with_snapshot),
            s.io.with_snapshot.count,
            if s.io.without_snapshot.tool_ns.is_some() || s.io.with_snapshot.tool_ns.is_some() {
                ""
            } else {
                "; the tool's bound not measured (iogen's issue lateness not reported)"
            }
        )?;
    }
    if !s.io.backends.is_empty() {
        let io_phases = s.ops.get(OpType::IoPhase.name()).map_or(0, |o| o.count);
        let counts: Vec<String> =
            s.io.backend_counts()
                .iter()
                .map(|(b, n)| format!("{b} in {n}"))
                .collect();
        writeln!(
            out,
            "I/O backend: {} of {io_phases} io_phases",
            counts.join(", ")
        )?;
    }
    if !s.errors.is_empty() {
        writeln!(out)?;
        let errs: BTreeMap<_, _> = s.errors.iter().collect();
        for (class, n) in errs {
            writeln!(out, "errors: {class}: {n}")?;
        }
    }
    if s.cleaned_up > 0 || !s.cleanup_failures.is_empty() {
        writeln!(
            out,
            "cleanup: removed {} leftover object(s); {} could not be removed",
            s.cleaned_up,
            s.cleanup_failures.len()
        )?;
        for f in &s.cleanup_failures {
            writeln!(out, "  {f}")?;
        }
    }
    Ok(())
}

/// A rate with the precision it needs: `0.25`, `3.5`, `31767`.
fn per_s(v: f64) -> String {
    if v >= 100.0 || v == 0.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The fidelity of bare `io` events' streams, one line per volume.
fn write_streams(s: &Summary, out: &mut dyn Write) -> std::io::Result<()> {
    if s.io_streams.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(
        out,
        "{:<16} {:>9} {:>7} {:>7} | {:>10} {:>10} {:>9} | {:>10} {:>10} {:>10} | {:>10}",
        "I/O stream",
        "requests",
        "dropped",
        "reorder",
        "intended/s",
        "achieved/s",
        "worst 1 s",
        "late p50",
        "p99",
        "p99.9",
        "resp p99"
    )?;
    for f in &s.io_streams {
        let worst = f
            .worst_window
            .map_or_else(|| "-".to_owned(), |w| format!("{:.2}%", w.error * 100.0));
        writeln!(
            out,
            "{:<16} {:>9} {:>7} {:>7} | {:>10.0} {:>10.0} {:>9} | {:>10} {:>10} {:>10} | {:>10}",
            f.volume,
            f.requests,
            f.dropped,
            f.reordered,
            f.intended_rate,
            f.achieved_rate,
            worst,
            fmt_ms_compact(f.lateness.p50, 3),
            fmt_ms_compact(f.lateness.p99, 3),
            fmt_ms_compact(f.lateness.p999, 3),
            fmt_ms_compact(f.response.p99, 3)
        )?;
        if let Some(e) = &f.error {
            writeln!(out, "  error: {e}")?;
        }
    }
    if let Some(f) = s.io_streams.first() {
        writeln!(out, "  on {}: {}", f.target, f.flags.join("; "))?;
    }
    Ok(())
}

/// The tolerance the op types' bounds were held to (`--validity tool`), in words.
fn tolerance(s: &Summary) -> String {
    match s
        .validity
        .as_ref()
        .and_then(|v| v.limits.as_ref())
        .and_then(|l| l.tool_tolerance)
    {
        Some(t) => format!("{:.1} %", t * 100.0),
        None => "the tolerance".to_owned(),
    }
}

/// The verdict line: for a valid run the engine's delay in brief, otherwise every failed
/// check with its evidence.
fn write_verdict(s: &Summary, out: &mut dyn Write) -> std::io::Result<()> {
    let sl = &s.start_lateness;
    writeln!(
        out,
        "engine delay: start lateness p50 {} p99 {} p99.9 {} max {} ({} events that did not wait, \
         {} that waited); pickup p99 {}",
        fmt_ms_compact(sl.p50, 3),
        fmt_ms_compact(sl.p99, 3),
        fmt_ms_compact(sl.p999, 3),
        fmt_ms_compact(sl.max, 3),
        sl.count,
        s.waited,
        fmt_ms_compact(s.pickup.p99, 3)
    )?;
    if let Some(r) = &s.dispatch_rate {
        writeln!(
            out,
            "dispatch rate: {:.0} of {:.0} events/s intended",
            r.achieved, r.intended
        )?;
    }
    let Some(v) = &s.validity else {
        return writeln!(
            out,
            "verdict: none (summary written before verdicts existed)"
        );
    };
    let judged = v.checks.iter().filter(|c| c.judged).count();
    match v.verdict {
        Verdict::Valid => writeln!(out, "verdict: valid ({judged} checks passed)")?,
        Verdict::NotJudged => writeln!(
            out,
            "verdict: NOT JUDGED (too few events to tell whether the engine kept up)"
        )?,
        Verdict::PartlyValid | Verdict::Imprecise => {
            let valid = v.valid_ops();
            writeln!(
                out,
                "verdict: {} ({}the tool's own delay could have added more than {} to some of \
                 the figures of the rest: they stand with their bounds, the `tool` rows)",
                v.verdict.name().to_uppercase().replace('-', " "),
                if valid.is_empty() {
                    String::new()
                } else {
                    format!("valid for {valid}; ")
                },
                tolerance(s)
            )?;
            for o in v.imprecise_ops() {
                writeln!(out, "  {}: {}", o.op, o.evidence)?;
            }
            // An engine check past its limit that the bounds took in, said once.
            for c in v.failed() {
                writeln!(out, "  {}: {}", c.check, c.message)?;
            }
        }
        _ => {
            writeln!(out, "verdict: {}", v.verdict.name().to_uppercase())?;
            for c in v.failed() {
                writeln!(out, "  {}: {}", c.check, c.message)?;
            }
        }
    }
    if let Some(stall) = v.host_stall() {
        writeln!(out, "  host: {stall}")?;
    }
    if let Some(l) = &v.limits {
        writeln!(
            out,
            "  lateness limits: p99 {}, p99.9 {} ({})",
            fmt_ms_compact(l.p99_ns, 3),
            fmt_ms_compact(l.p999_ns, 3),
            l.basis
        )?;
    }
    for c in v.not_judged() {
        writeln!(out, "  {}: {}", c.check, c.message)?;
    }
    Ok(())
}
