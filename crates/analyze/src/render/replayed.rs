//! Bare I/O streams in the report: recorded vs replayed per volume.
//!
//! A block trace's requests go through per-volume streams (`docs/replay.md`, *Bare I/O
//! streams*) and have no record in `events.jsonl`; what the run keeps of them is each stream's
//! fidelity (requests, rates, lateness and response percentiles, `summary.json`
//! `io_streams`) and its rate by second (`io/streams/*.json`). Beside the replayed response
//! this shows the latency the source recording observed (trace `observed`, per volume, from
//! [`crate::summary`]), as a table and as a percentile plot.

use std::fmt::Write;

use replay::Percentiles;
use trace_format::units::fmt_ns;

use crate::render::svg::{COLORS, Dash, Plot, Series, esc};
use crate::stats::summary::RunSummary;

/// The quantiles drawn for a distribution known by its percentiles.
fn points(p: &Percentiles) -> Vec<(f64, f64)> {
    if p.count == 0 {
        return Vec::new();
    }
    [
        (p.min, 0.0),
        (p.p50, 0.5),
        (p.p90, 0.9),
        (p.p99, 0.99),
        (p.p999, 0.999),
        (p.max, 1.0),
    ]
    .into_iter()
    .map(|(v, q)| ((v.max(1)) as f64, q))
    .collect()
}

/// Recorded (solid) vs replayed (dashed) latency per streamed volume of run `i`; `None`
/// without streams.
pub(crate) fn plot(s: &RunSummary) -> Option<Plot> {
    if s.io_streams.is_empty() {
        return None;
    }
    let mut series = Vec::new();
    for (k, f) in s.io_streams.iter().enumerate() {
        let color = COLORS[k % COLORS.len()].to_owned();
        if let Some(o) = s.io_streams_observed.get(&f.volume) {
            series.push(Series {
                name: format!("{} recorded", f.volume),
                points: points(o),
                color: color.clone(),
                dash: Dash::Solid,
            });
        }
        series.push(Series {
            name: format!("{} replayed", f.volume),
            points: points(&f.response),
            color,
            dash: Dash::Dashed,
        });
    }
    Some(Plot {
        title: format!("Block replay: recorded vs replayed latency — {}", s.run),
        x_label: "latency, log scale (recorded: the trace's observed; replayed: completion − \
                  intended)"
            .into(),
        y_label: "fraction of requests ≤ x".into(),
        x_log: true,
        y_log: false,
        x_fmt: fmt_ns,
        y_fmt: |v| format!("{v:.2}"),
        series,
        marks: Vec::new(),
        mark_legend: Vec::new(),
    })
}

fn cells(p: Option<&Percentiles>) -> String {
    match p {
        Some(p) if p.count > 0 => [p.p50, p.p90, p.p99, p.p999, p.max]
            .iter()
            .map(|&v| format!("<td>{}</td>", fmt_ns(v as f64)))
            .collect(),
        _ => "<td colspan=5>–</td>".to_owned(),
    }
}

/// The recorded-vs-replayed table of run `i` (empty without streams). The recorded columns
/// are left out when the trace carries no observed latency (and that is said).
pub(crate) fn html(i: usize, s: &RunSummary) -> String {
    let mut h = String::new();
    if s.io_streams.is_empty() {
        return h;
    }
    let recorded = !s.io_streams_observed.is_empty();
    let requests: u64 = s.io_streams.iter().map(|f| f.requests).sum();
    let _ = write!(
        h,
        "<h3>Run {}: block replay, recorded vs replayed</h3><p class=streams data-run=\"{}\" \
         data-requests=\"{requests}\">{requests} request(s) replayed through {} per-volume I/O \
         stream(s). ",
        i + 1,
        i + 1,
        s.io_streams.len()
    );
    if recorded {
        h.push_str(
            "Recorded: the latency the source recording observed (trace <code>observed</code>); \
             replayed: completion − intended instant, as measured here.</p>",
        );
    } else {
        h.push_str(
            "The trace carries no observed latency, so only the replayed side is shown.</p>",
        );
    }
    h.push_str(
        "<table class=streams-table><tr><th rowspan=2>volume</th><th rowspan=2>requests</th>",
    );
    if recorded {
        h.push_str("<th colspan=5>recorded latency</th>");
    }
    h.push_str(
        "<th colspan=5>replayed response</th><th rowspan=2>intended/s</th>\
         <th rowspan=2>achieved/s</th><th rowspan=2>worst second</th></tr><tr>",
    );
    for _ in 0..(1 + usize::from(recorded)) {
        h.push_str("<th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th>");
    }
    h.push_str("</tr>");
    for f in &s.io_streams {
        let worst = f.worst_window.map_or_else(
            || "–".to_owned(),
            |w| format!("{:.2} % at {} s", w.error * 100.0, w.start),
        );
        let _ = write!(
            h,
            "<tr data-volume=\"{}\"><td>{}</td><td>{}</td>",
            esc(&f.volume),
            esc(&f.volume),
            f.requests
        );
        if recorded {
            h.push_str(&cells(s.io_streams_observed.get(&f.volume)));
        }
        let _ = write!(
            h,
            "{}<td>{:.0}</td><td>{:.0}</td><td>{}</td></tr>",
            cells(Some(&f.response)),
            f.intended_rate,
            f.achieved_rate,
            esc(&worst)
        );
    }
    h.push_str("</table>");
    h
}
