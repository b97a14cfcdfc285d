//! `analyze summary`'s table: a run's events, rates and verdict; per op type its latency
//! percentiles with the tool's bound beside each; the cluster's own timing (CSI calls, the
//! API server) and the I/O, with and without control operations in flight.

use std::io::Write;

use analyze::summary::RunSummary;
use trace_format::units::fmt_ns;

pub(super) fn write_summary(s: &RunSummary, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "{}: {} events on {} at speed {} ({}), {} failed; intended {:.2}/s, achieved {:.2}/s; \
         lateness p99 {}",
        s.run,
        s.events,
        s.provider,
        s.speed,
        s.state,
        s.failed,
        s.intended_rate,
        s.achieved_rate,
        fmt_ns(s.lateness.p99 as f64)
    )?;
    if !s.labels.is_empty() {
        let l: Vec<String> = s.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        writeln!(out, "labels: {}", l.join(", "))?;
    }
    match &s.validity {
        Some(v) if v.verdict == replay::Verdict::Valid => writeln!(out, "verdict: valid")?,
        Some(v) if v.verdict == replay::Verdict::NotJudged => writeln!(
            out,
            "verdict: not judged (too few events to tell whether the engine kept up): {}",
            v.evidence()
        )?,
        Some(v) => writeln!(out, "verdict: {}: {}", v.verdict, v.evidence())?,
        None => writeln!(out, "verdict: none recorded")?,
    }
    writeln!(
        out,
        "{:<16} {:>8} {:>6} {:>9} {:>9} {:>13} | {:>9} {:>9} {:>9} {:>9} {:>9} | {:>9} {:>9} | {:>9} {:>9}",
        "operation",
        "count",
        "failed",
        "int/s",
        "ach/s",
        "peak int/ach",
        "resp p50",
        "p90",
        "p99",
        "p99.9",
        "max",
        "svc p50",
        "p99",
        "late p99",
        "dep p99"
    )?;
    for (op, o) in &s.ops {
        let f = |v: u64| fmt_ns(v as f64);
        writeln!(
            out,
            "{op:<16} {:>8} {:>6} {:>9.2} {:>9.2} {:>13} | {:>9} {:>9} {:>9} {:>9} {:>9} | {:>9} {:>9} | {:>9} {:>9}",
            o.count,
            o.failed,
            o.intended_rate,
            o.achieved_rate,
            format!("{}/{}", o.intended_peak, o.achieved_peak),
            f(o.response.p50),
            f(o.response.p90),
            f(o.response.p99),
            f(o.response.p999),
            f(o.response.max),
            f(o.service.p50),
            f(o.service.p99),
            f(o.lateness.p99),
            f(o.dep_wait.p99)
        )?;
        // The most the tool's own delay could have added to each figure (`tool_ns`).
        if let (Some(b), Some(sb)) = (&o.response.tool_ns, &o.service.tool_ns) {
            let t = |v: u64| format!("≤{}", fmt_ns(v as f64));
            writeln!(
                out,
                "{:<16} {:>8} {:>6} {:>9} {:>9} {:>13} | {:>9} {:>9} {:>9} {:>9} {:>9} | {:>9} {:>9} |",
                "  tool",
                "",
                "",
                "",
                "",
                "",
                t(b.p50),
                t(b.p90),
                t(b.p99),
                t(b.p999),
                t(b.max),
                t(sb.p50),
                t(sb.p99)
            )?;
        }
        if let Some(ob) = &o.observed {
            writeln!(
                out,
                "{:<16} {:>8} {:>6} {:>9} {:>9} {:>13} | {:>9} {:>9} {:>9} {:>9} {:>9} |",
                "  observed",
                ob.count,
                "",
                "",
                "",
                "",
                f(ob.p50),
                f(ob.p90),
                f(ob.p99),
                f(ob.p999),
                f(ob.max)
            )?;
        }
        // The storage part as the CSI sidecars timed it, under the op that made the calls.
        let csi = s.cluster.as_ref().and_then(|c| {
            let m = replay::cluster::csi_method_of(op)?;
            Some((m, c.csi.get(m)?))
        });
        if let Some((m, c)) = csi {
            let sec = |le: Option<f64>| {
                le.map_or_else(|| "> max".to_owned(), |v| format!("≤{}", fmt_ns(v * 1e9)))
            };
            writeln!(
                out,
                "{:<16} {:>8} {:>6} {:>9} {:>9} {:>13} | {:>9} {:>9} {:>9} {:>9} {:>9} | mean {}",
                "  CSI call",
                c.count,
                "",
                "",
                "",
                m,
                sec(c.p50_le),
                sec(c.p90_le),
                sec(c.p99_le),
                "",
                "",
                fmt_ns(c.sum_seconds / c.count.max(1) as f64 * 1e9)
            )?;
        }
    }
    if let Some(c) = &s.cluster {
        if !c.csi.is_empty() {
            writeln!(
                out,
                "CSI call rows: the sidecars' csi_sidecar_operations_seconds during the run \
                 (percentiles as the bound of their bucket, the first 0-100 ms; the mean is exact)"
            )?;
        }
        if !c.apiserver.is_empty() {
            writeln!(
                out,
                "API server requests during the run (count, p50, p99, mean):"
            )?;
        }
        for (k, v) in &c.apiserver {
            writeln!(
                out,
                "  {k:<40} {:>6} {:>9} {:>9} {:>9}",
                v.count,
                fmt_ns(v.p50 * 1e9),
                fmt_ns(v.p99 * 1e9),
                fmt_ns(v.sum_seconds / v.count.max(1) as f64 * 1e9)
            )?;
        }
        for e in &c.errors {
            writeln!(out, "cluster metrics not read: {e}")?;
        }
    }
    for f in &s.io_streams {
        let worst = f.worst_window.map_or_else(
            || "no full second".to_owned(),
            |w| format!("worst second {:.3} % off", w.error * 100.0),
        );
        writeln!(
            out,
            "I/O stream {}: {} requests, {} dropped, {} reordered, {} errors; {:.0}/s intended, \
             {:.0}/s achieved, {worst}; issue lateness p50 {} p99 {} p99.9 {}; response p99 {}",
            f.volume,
            f.requests,
            f.dropped,
            f.reordered,
            f.errors,
            f.intended_rate,
            f.achieved_rate,
            fmt_ns(f.lateness.p50 as f64),
            fmt_ns(f.lateness.p99 as f64),
            fmt_ns(f.lateness.p999 as f64),
            fmt_ns(f.response.p99 as f64)
        )?;
        let p = |p: &replay::Percentiles| {
            format!(
                "p50 {} p90 {} p99 {} p99.9 {} max {}",
                fmt_ns(p.p50 as f64),
                fmt_ns(p.p90 as f64),
                fmt_ns(p.p99 as f64),
                fmt_ns(p.p999 as f64),
                fmt_ns(p.max as f64)
            )
        };
        if let Some(o) = s.io_streams_observed.get(&f.volume) {
            writeln!(out, "  recorded (trace observed) {}", p(o))?;
        }
        writeln!(out, "  replayed (response)       {}", p(&f.response))?;
    }
    if !s.errors.is_empty() {
        let errs: Vec<String> = s.errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
        writeln!(out, "errors: {}", errs.join(", "))?;
    }
    for u in &s.io_units {
        let kinds: Vec<String> = u
            .kinds
            .iter()
            .map(|(k, v)| {
                format!(
                    "{k} {:.0} IOPS {:.1} MiB/s p50 {} p99 {} p99.9 {}",
                    v.iops,
                    v.mib_s,
                    fmt_ns(v.p50 as f64),
                    fmt_ns(v.p99 as f64),
                    fmt_ns(v.p999 as f64)
                )
            })
            .collect();
        writeln!(
            out,
            "io unit {}: {:.0} IOPS, {:.1} MiB/s, {} I/Os, {} errors{}; {}",
            u.id,
            u.iops,
            u.mib_s,
            u.ios,
            u.errors,
            if u.partial { " (partial)" } else { "" },
            kinds.join("; ")
        )?;
    }
    for n in &s.notes {
        writeln!(out, "note: {n}")?;
    }
    Ok(())
}
