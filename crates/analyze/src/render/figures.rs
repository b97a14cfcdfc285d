//! The report's own figures (`cdf`, `io-timeline-N`, `rate-N`, `stream-N-K`; docs in
//! `render/report.rs`), and [`Figure`], what every figure of the report becomes.

use hdrhistogram::Histogram;
use trace_format::OpType;
use trace_format::units::fmt_ns;

use crate::Result;
use crate::render::num::{fmt_frac, fmt_s};
use crate::render::svg::{self, COLORS, Dash, Mark, Plot, Series};
use crate::stats::hist::at;
use crate::stats::report_data::{ReportData, Timeline};
use crate::stats::summary;

/// Timeline buckets per point of the rate figure.
pub const RATE_GROUP: u64 = 4;
/// Control operations marked at most per timeline (evenly thinned beyond).
pub const MAX_MARKS: usize = 400;

/// A rendered figure.
#[derive(Debug, Clone)]
pub struct Figure {
    /// File-name-safe id (`cdf`, `io-timeline-1`, `rate-1`).
    pub id: String,
    /// Caption.
    pub caption: String,
    /// Points plotted.
    pub points: usize,
    /// The SVG document.
    pub svg: String,
}

impl Figure {
    /// The figure as PNG at `scale` × its SVG size (see [`crate::to_png`]).
    pub fn png(&self, scale: f32) -> Result<Vec<u8>> {
        svg::to_png(&self.svg, scale)
    }

    /// The figure as a page shows it: `<figure data-figure="ID" data-points="N">` with the SVG
    /// inline and the caption (a test, or a person, checks that each rendered with data).
    pub fn html(&self) -> String {
        format!(
            "<figure id=\"fig-{}\" data-figure=\"{}\" data-points=\"{}\">{}<figcaption>{}</figcaption></figure>",
            self.id,
            self.id,
            self.points,
            self.svg,
            svg::esc(&self.caption)
        )
    }
}

/// A figure of one plot.
pub(crate) fn figure(id: String, caption: String, plot: &Plot) -> Figure {
    Figure {
        id,
        caption,
        points: plot.points(),
        svg: plot.render(),
    }
}

fn cdf_points(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    let mut qs: Vec<f64> = (0..=100).map(|i| f64::from(i) / 100.0).collect();
    qs.extend([0.995, 0.999, 0.9999]);
    qs.sort_by(f64::total_cmp);
    let mut pts: Vec<(f64, f64)> = qs
        .iter()
        .map(|&q| (h.value_at_quantile(q) as f64, q))
        .collect();
    pts.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
    pts
}

fn label(i: usize, n: usize) -> String {
    if n == 1 {
        String::new()
    } else {
        format!("run {} ", i + 1)
    }
}

/// `cdf`: control-operation response time of every run.
pub(crate) fn cdf_figure(runs: &[ReportData]) -> Figure {
    // Every line its own colour (in series order) and every run its own dash, so runs stay
    // apart in colour and in greyscale print.
    let mut series = Vec::new();
    for (i, l) in runs.iter().enumerate() {
        for (op, a) in &l.stats.ops {
            let Some(h) = a.response.as_ref().filter(|_| op.is_control()) else {
                continue;
            };
            series.push(Series {
                name: format!("{}{op}", label(i, runs.len())),
                points: cdf_points(h),
                color: COLORS[series.len() % COLORS.len()].to_owned(),
                dash: Dash::of_run(i),
            });
        }
    }
    let plot = Plot {
        title: "Control-operation response time (CDF)".into(),
        x_label: "response time (completed − intended), log scale".into(),
        y_label: "fraction of operations ≤ x".into(),
        x_log: true,
        y_log: false,
        x_fmt: fmt_ns,
        y_fmt: |v| format!("{v:.1}"),
        series,
        marks: Vec::new(),
        mark_legend: Vec::new(),
    };
    figure(
        "cdf".into(),
        "CDF of control-operation response time per op type and run (Figure 1 style).".into(),
        &plot,
    )
}

fn marks(t: &Timeline) -> (Vec<Mark>, Vec<(String, String)>) {
    let mut ctl = t.control.clone();
    ctl.sort_by_key(|c| c.1);
    let step = ctl.len().div_ceil(MAX_MARKS).max(1);
    let mut legend: Vec<(String, String)> = Vec::new();
    let mut out = Vec::new();
    for &(op, s, e) in ctl.iter().step_by(step) {
        let color = COLORS[(op as usize) % COLORS.len()].to_owned();
        let (x0, x1) = if matches!(op, OpType::Snapshot | OpType::GroupSnapshot) {
            (s as f64 / 1e9, e as f64 / 1e9)
        } else {
            (s as f64 / 1e9, s as f64 / 1e9)
        };
        if !legend.iter().any(|(n, _)| n == op.name()) {
            legend.push((op.name().to_owned(), color.clone()));
        }
        out.push(Mark { x0, x1, color });
    }
    (out, legend)
}

/// Tenant line colours of the I/O timeline (the control-op marks use [`COLORS`] by op type).
const TENANT_COLORS: [&str; 4] = ["#0072B2", "#D55E00", "#009E73", "#CC79A7"];

/// `io-timeline-N`: run `i`'s I/O response time over time, control operations marked; `None`
/// without I/O.
pub(crate) fn io_figure(i: usize, l: &ReportData) -> Option<Figure> {
    let t = &l.timeline;
    let mid = |b: usize| (b as f64 + 0.5) * t.width as f64 / 1e9;
    let line = |p: f64| -> Vec<(f64, f64)> {
        t.io.iter()
            .enumerate()
            .filter_map(|(b, h)| h.as_ref().map(|h| (mid(b), at(h, p) as f64)))
            .collect()
    };
    let mut series = Vec::new();
    let p50 = line(50.0);
    if !p50.is_empty() {
        series.push(Series {
            name: "io p50".into(),
            points: p50,
            color: "#555555".into(),
            dash: Dash::Solid,
        });
        series.push(Series {
            name: "io p99".into(),
            points: line(99.0),
            color: "#000000".into(),
            dash: Dash::Dashed,
        });
    }
    let pw = l.phase_width as f64 / 1e9;
    for (k, (tenant, buckets)) in l.phase.iter().enumerate() {
        let color = TENANT_COLORS[k % TENANT_COLORS.len()];
        for (p, name, dash) in [
            (50.0, "p50", Dash::Solid),
            (99.0, "p99", Dash::Dashed),
            (99.9, "p99.9", Dash::Dotted),
        ] {
            series.push(Series {
                name: format!("{tenant} {name}"),
                points: buckets
                    .iter()
                    .map(|(&b, h)| ((b as f64 + 0.5) * pw, at(h, p) as f64))
                    .collect(),
                color: color.into(),
                dash,
            });
        }
    }
    if series.is_empty() {
        return None;
    }
    let mut what = Vec::new();
    if !t.io.iter().all(Option::is_none) {
        what.push(format!(
            "single io events: p50, p99 per {} bucket",
            fmt_ns(t.width as f64)
        ));
    }
    if !l.phase.is_empty() {
        what.push(format!(
            "io_phase units per tenant: p50, p99, p99.9 per {} bucket from iogen's interval \
             histograms",
            fmt_ns(l.phase_width as f64)
        ));
    }
    let (marks, mark_legend) = marks(t);
    let plot = Plot {
        title: format!("I/O response time over time — {}", l.run.path.display()),
        x_label: "time since the run origin".into(),
        y_label: "I/O response time, log scale".into(),
        x_log: false,
        y_log: true,
        x_fmt: fmt_s,
        y_fmt: fmt_ns,
        series,
        marks,
        mark_legend,
    };
    Some(figure(
        format!("io-timeline-{}", i + 1),
        format!(
            "I/O response time ({}) with control operations marked: lines at their start, \
             shaded while a snapshot runs (Figure 2 style).",
            what.join("; ")
        ),
        &plot,
    ))
}

/// A rate over the run's time: one solid line against one dashed.
fn two_rates(
    title: String,
    y_label: &str,
    (a, pa): (&str, Vec<(f64, f64)>),
    (b, pb): (&str, Vec<(f64, f64)>),
) -> Plot {
    Plot {
        title,
        x_label: "time since the run origin".into(),
        y_label: y_label.into(),
        x_log: false,
        y_log: false,
        x_fmt: fmt_s,
        y_fmt: fmt_frac,
        series: vec![
            Series {
                name: a.into(),
                points: pa,
                color: COLORS[0].into(),
                dash: Dash::Solid,
            },
            Series {
                name: b.into(),
                points: pb,
                color: COLORS[1].into(),
                dash: Dash::Dashed,
            },
        ],
        marks: Vec::new(),
        mark_legend: Vec::new(),
    }
}

/// `rate-N`: run `i`'s intended and achieved event rate over time.
pub(crate) fn rate_figure(i: usize, l: &ReportData) -> Figure {
    let t = &l.timeline;
    // Rates over RATE_GROUP timeline buckets: fewer, steadier points than the latency plot.
    let w = (t.width * RATE_GROUP) as f64 / 1e9;
    let series = |v: &[u64]| -> Vec<(f64, f64)> {
        v.chunks(RATE_GROUP as usize)
            .enumerate()
            .map(|(b, c)| ((b as f64 + 0.5) * w, c.iter().sum::<u64>() as f64 / w))
            .collect()
    };
    let plot = two_rates(
        format!("Intended vs achieved rate — {}", l.run.path.display()),
        "events per second",
        ("intended", series(&t.intended)),
        ("achieved", series(&t.completed)),
    );
    figure(
        format!("rate-{}", i + 1),
        "Events per second by intended instant (intended) and by completion (achieved).".into(),
        &plot,
    )
}

/// Per bare-I/O stream: requests per second of the trace (intended) against the replay
/// (issued), from `io/streams/*.json`.
pub(crate) fn stream_figures(i: usize, l: &ReportData) -> Result<Vec<Figure>> {
    let mut out = Vec::new();
    for (k, c) in summary::stream_curves(&l.run.path)?.iter().enumerate() {
        let pts = |w: usize| -> Vec<(f64, f64)> {
            c.per_second
                .iter()
                .enumerate()
                .map(|(s, v)| ((c.first_second + s as u64) as f64 + 0.5, v[w] as f64))
                .collect()
        };
        let plot = two_rates(
            format!(
                "Block replay, volume {} — {}",
                c.volume,
                l.run.path.display()
            ),
            "requests per second",
            ("trace (intended)", pts(0)),
            ("replay (issued)", pts(1)),
        );
        out.push(figure(
            format!("stream-{}-{}", i + 1, k + 1),
            format!(
                "Requests per second of volume {}'s I/O stream: the trace's, by intended \
                 instant, and the replay's, by issue instant.",
                c.volume
            ),
            &plot,
        ));
    }
    Ok(out)
}
