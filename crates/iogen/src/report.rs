//! Human-readable tables of results (the binary prints them; the library only formats).

use std::fmt::Write;

use crate::stats::{EngineInfo, KindSummary, Summary};
use crate::{StreamResult, SuiteEntry};

fn header(out: &mut String, s: &Summary) {
    let _ = writeln!(
        out,
        "target {}  engine {} [{}]  kernel {}",
        s.target,
        s.engine.engine,
        s.engine.flags.join(","),
        s.kernel
    );
    for n in &s.engine.notes {
        let _ = writeln!(out, "  note: {n}");
    }
    let _ = write!(
        out,
        "{:.2} s  {} I/Os  {:.0} IOPS  {:.1} MiB/s  errors {}  cpu {:.2} µs/IO",
        s.elapsed_s, s.ios, s.iops, s.mib_s, s.errors, s.cpu.per_io_us
    );
    if let Some(r) = s.intended_iops {
        let _ = write!(out, "  intended {r:.0} IOPS");
    }
    if let Some(o) = s.offered_iops {
        let _ = write!(out, "  offered {o:.0} IOPS");
    }
    if s.partial {
        let _ = write!(out, "  (PARTIAL: stopped early)");
    }
    out.push('\n');
}

/// The engine of a phase's table ([`render_phase`]) read back from text that holds it (an
/// iogen pod's log, where the table follows the interval log): its name (`io_uring`,
/// `sync`), flags and notes (a fallback's reason). The last table's, when there are several;
/// `None` without one (iogen stopped before it printed it).
pub fn engine_in_table(text: &str) -> Option<EngineInfo> {
    let mut found = None;
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(rest) = line
            .strip_prefix("target ")
            .and_then(|l| l.rfind("  engine ").map(|i| &l[i + "  engine ".len()..]))
        else {
            continue;
        };
        let (engine, rest) = rest.split_once(' ').unwrap_or((rest, ""));
        let flags = rest
            .strip_prefix('[')
            .and_then(|r| r.split_once(']'))
            .map(|(f, _)| f.split(',').filter(|f| !f.is_empty()).map(str::to_owned))
            .into_iter()
            .flatten()
            .collect();
        let notes = lines
            .clone()
            .map_while(|l| l.strip_prefix("  note: "))
            .map(str::to_owned)
            .collect();
        found = Some(EngineInfo {
            engine: engine.to_owned(),
            flags,
            notes,
        });
    }
    found
}

fn kinds(out: &mut String, s: &Summary) {
    let _ = writeln!(
        out,
        "{:<6} {:<9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "kind", "metric", "IOPS", "MiB/s", "mean µs", "p50", "p90", "p99", "p99.9", "max"
    );
    for (name, k) in &s.kinds {
        row(out, name, k);
    }
}

fn row(out: &mut String, name: &str, k: &KindSummary) {
    for (m, p) in [
        ("response", &k.response),
        ("service", &k.service),
        ("lateness", &k.lateness),
    ] {
        let _ = writeln!(
            out,
            "{:<6} {:<9} {:>10.0} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
            name, m, k.iops, k.mib_s, p.mean_us, p.p50_us, p.p90_us, p.p99_us, p.p99_9_us, p.max_us
        );
    }
}

/// A phase's summary as a table.
pub fn render_phase(s: &Summary) -> String {
    let mut out = String::new();
    header(&mut out, s);
    kinds(&mut out, s);
    if let Some(v) = &s.verify {
        let _ = writeln!(
            out,
            "verify: unit {} B, {} written, {} checked, {} intact (no generation known), {} unwritten, {} MISMATCHES",
            v.unit, v.written, v.checked, v.intact, v.unwritten, v.mismatches
        );
        for m in &v.listed {
            let actual = m.actual_gen.map_or("-".to_owned(), |g| g.to_string());
            let _ = writeln!(
                out,
                "  offset {} expected gen {} actual {} ({:?})",
                m.offset, m.expected_gen, actual, m.kind
            );
        }
    }
    out
}

/// A stream's summary as a table.
pub fn render_stream(r: &StreamResult) -> String {
    render_phase(&r.summary)
}

/// The suite as the classic summary table.
pub fn render_suite(entries: &[SuiteEntry]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<22} {:>12} {:>12} {:>14} {:>12}",
        "test", "IOPS", "MiB/s", "avg lat µs", "p99 µs"
    );
    for e in entries {
        let s = &e.result.summary;
        let (mean, p99) = s.kinds.values().fold((0.0f64, 0.0f64), |(m, p), k| {
            (
                m + k.response.mean_us * k.ios as f64,
                p.max(k.response.p99_us),
            )
        });
        let mean = mean / (s.ios.max(1) as f64);
        let _ = writeln!(
            out,
            "{:<22} {:>12.0} {:>12.1} {:>14.1} {:>12.1}",
            e.name, s.iops, s.mib_s, mean, p99
        );
    }
    if let Some(e) = entries.first() {
        let s = &e.result.summary;
        let _ = writeln!(
            out,
            "engine {} [{}], kernel {}",
            s.engine.engine,
            s.engine.flags.join(","),
            s.kernel
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{engine_in_table, render_phase};
    use crate::stats::{EngineInfo, Summary};

    /// The engine, its flags and a fallback's note come back out of a rendered table, also
    /// amid an interval log; text without a table has none.
    #[test]
    fn the_engine_is_read_back_from_a_rendered_table() {
        let mut s = Summary {
            target: "/mnt/v0/data".into(),
            engine: EngineInfo {
                engine: "sync".into(),
                flags: vec!["threads=4".into()],
                notes: vec![
                    "io_uring setup failed (Operation not permitted (os error 1)); fell back to \
                     the thread-pool engine"
                        .into(),
                ],
            },
            kernel: "6.1.0".into(),
            ..Summary::default()
        };
        let log = format!(
            "#[StartTime: 1.0 (seconds since epoch)]\nTag=read,0.0,0.2,0.1,HISTFAKE\n{}",
            render_phase(&s)
        );
        assert_eq!(engine_in_table(&log), Some(s.engine.clone()));
        s.engine = EngineInfo {
            engine: "io_uring".into(),
            flags: vec!["single_issuer".into(), "fixed_buffers".into()],
            notes: Vec::new(),
        };
        assert_eq!(engine_in_table(&render_phase(&s)), Some(s.engine.clone()));
        assert_eq!(
            engine_in_table("#[StartTime: 1.0]\nTag=read,0.0,0.2,0.1,HISTFAKE\n"),
            None
        );
    }
}
