//! `analyze report RUN... -o report.html`: one self-contained HTML page (inline SVG, no
//! scripts, no network) with
//! - `cdf`: CDF of control-op response time per op type and run (the seed paper's Figure 1),
//! - `io-timeline-N`: I/O response time over time with control operations marked (Figure 2;
//!   lines at control-op starts, shaded bands while snapshots run), per run with I/O: p50/p99
//!   of single `io` events per time bucket, and p50/p99/p99.9 per tenant of `io_phase` units
//!   from their interval histograms ([`crate::phase_io`]),
//! - `rate-N`: intended vs achieved rate over time, per run,
//! - `cut-N-ID`: a group snapshot's consistency check ([`crate::cut`]), `cbt-N`: a run's
//!   changed-block listings and their written-set checks ([`crate::cbt`]),
//! - percentile tables per run.
//!
//! Every figure is a `<figure data-figure="NAME" data-points="N">`, N being the points
//! plotted, so a test (or a person) can check that each rendered with data.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use hdrhistogram::Histogram;
use replay::Percentiles;
use trace_format::OpType;
use trace_format::units::fmt_ns;

use crate::Result;
use crate::hist::{at, coarse};
use crate::load::{Accumulator, Rec, Run};
use crate::phase_io::{self, Spans};
use crate::summary::{RunStats, RunSummary, summarize};
use crate::svg::{COLORS, Dash, Mark, Plot, Series, esc};

/// Time buckets per timeline figure.
pub const BUCKETS: u64 = 200;
/// Timeline buckets per point of the rate figure.
pub const RATE_GROUP: u64 = 4;
/// Control operations marked at most per timeline (evenly thinned beyond).
pub const MAX_MARKS: usize = 400;

fn fmt_num(v: f64) -> String {
    if v.abs() >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

fn fmt_frac(v: f64) -> String {
    format!("{v:.1}")
}

fn fmt_s(v: f64) -> String {
    format!("{} s", fmt_num(v))
}

struct Timeline {
    width: u64,
    io: Vec<Option<Histogram<u64>>>,
    intended: Vec<u64>,
    completed: Vec<u64>,
    control: Vec<(OpType, u64, u64)>,
    spans: Spans,
}

impl Timeline {
    fn new(width: u64) -> Self {
        let n = BUCKETS as usize;
        Self {
            width,
            io: vec![None; n],
            intended: vec![0; n],
            completed: vec![0; n],
            control: Vec::new(),
            spans: Spans::default(),
        }
    }

    fn idx(&self, t: u64) -> usize {
        ((t / self.width) as usize).min(BUCKETS as usize - 1)
    }
}

impl Accumulator for Timeline {
    fn add(&mut self, r: &Rec<'_>) {
        let (i, c) = (self.idx(r.intended), self.idx(r.completed));
        self.intended[i] += 1;
        self.completed[c] += 1;
        if r.op == OpType::Io {
            self.io[c]
                .get_or_insert_with(coarse)
                .saturating_record(r.response.max(1));
        } else if r.op.is_control() {
            self.control.push((r.op, r.started, r.completed));
        }
        self.spans.add(r);
    }

    fn merge(&mut self, o: Self) {
        for (a, b) in self.io.iter_mut().zip(o.io) {
            crate::hist::merge(a, b);
        }
        for (a, b) in self.intended.iter_mut().zip(o.intended) {
            *a += b;
        }
        for (a, b) in self.completed.iter_mut().zip(o.completed) {
            *a += b;
        }
        self.control.extend(o.control);
        self.spans.merge(o.spans);
    }
}

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
        crate::svg::to_png(&self.svg, scale)
    }
}

fn figure(id: String, caption: String, plot: &Plot) -> Figure {
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

struct Loaded {
    run: Run,
    stats: RunStats,
    summary: RunSummary,
    timeline: Timeline,
    /// `io_phase` response histograms per tenant and bucket of `phase_width` ns.
    phase: BTreeMap<String, BTreeMap<u64, Histogram<u64>>>,
    phase_width: u64,
    headline: crate::headline::Headline,
}

fn load(path: &Path, allow_invalid: bool) -> Result<Loaded> {
    let run = Run::open_for_analysis(path, allow_invalid)?;
    let stats = RunStats::of(&run)?;
    let summary = summarize(&run, &stats)?;
    let total = stats.total();
    let end = total.completed.1.max(total.intended.1).max(1);
    let width = end.div_ceil(BUCKETS).max(1);
    let timeline = run.scan(|| Timeline::new(width))?;
    let (mut phase, mut phase_width) = (BTreeMap::new(), width);
    let mut units = Vec::new();
    if phase_io::has_units(&run.path)? {
        units = phase_io::units(&run, &timeline.spans)?;
        let tenants = match run.trace_path() {
            Some(t) => phase_io::tenants(&t)?,
            None => Default::default(),
        };
        // Buckets no shorter than an interval, so each bucket holds whole intervals.
        let longest = units
            .iter()
            .flat_map(|u| &u.intervals)
            .map(|iv| iv.end_ns - iv.start_ns)
            .max()
            .unwrap_or(0);
        phase_width = width.max(longest);
        phase = phase_io::by_tenant(&units, &tenants, phase_width);
    }
    let headline = crate::headline::headline(&run, &units)?;
    Ok(Loaded {
        headline,
        run,
        stats,
        summary,
        timeline,
        phase,
        phase_width,
    })
}

fn cdf_figure(runs: &[Loaded]) -> Figure {
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

fn io_figure(i: usize, l: &Loaded) -> Option<Figure> {
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

fn rate_figure(i: usize, l: &Loaded) -> Figure {
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
fn stream_figures(i: usize, l: &Loaded) -> Result<Vec<Figure>> {
    let mut out = Vec::new();
    for (k, c) in crate::summary::stream_curves(&l.run.path)?
        .iter()
        .enumerate()
    {
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

fn pct_cells(p: &Percentiles) -> String {
    [p.p50, p.p90, p.p99, p.p999, p.max]
        .iter()
        .map(|&v| format!("<td>{}</td>", fmt_ns(v as f64)))
        .collect()
}

fn table(i: usize, n: usize, s: &RunSummary) -> String {
    let mut h = String::new();
    let observed = s.ops.values().any(|o| o.observed.is_some());
    let _ = write!(
        h,
        "<h3>{}{}</h3><p>run {} · provider {} · speed {} · state {} · {} events, {} failed · \
         intended {:.2}/s, achieved {:.2}/s</p>",
        if n > 1 {
            format!("Run {}: ", i + 1)
        } else {
            String::new()
        },
        esc(&s.run),
        esc(&s.run_id),
        esc(&s.provider),
        s.speed,
        s.state,
        s.events,
        s.failed,
        s.intended_rate,
        s.achieved_rate
    );
    // Rates and peaks as "intended / achieved" pairs and service without p90/p99.9, so the
    // table fits 1 400 px even with the observed columns; a column no op has is left out.
    let dep_wait = s.ops.values().any(|o| o.dep_wait.count > 0);
    h.push_str(
        "<table class=ops-table><tr><th rowspan=2>op</th><th rowspan=2>count</th>\
         <th rowspan=2>failed</th><th rowspan=2>intended / achieved per s</th>\
         <th rowspan=2>peak intended / achieved in 1 s</th><th colspan=5>response</th>\
         <th colspan=3>service</th><th rowspan=2>lateness p99</th>",
    );
    if dep_wait {
        h.push_str("<th rowspan=2>dep wait p99</th>");
    }
    if observed {
        h.push_str("<th colspan=5>observed (recorded)</th>");
    }
    h.push_str("</tr><tr><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th>");
    h.push_str("<th>p50</th><th>p99</th><th>max</th>");
    if observed {
        h.push_str("<th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th>");
    }
    h.push_str("</tr>");
    for (op, o) in &s.ops {
        let observed = match &o.observed {
            Some(p) => pct_cells(p),
            None if observed => "<td colspan=5>–</td>".to_owned(),
            None => String::new(),
        };
        let dep = if dep_wait {
            format!("<td>{}</td>", fmt_ns(o.dep_wait.p99 as f64))
        } else {
            String::new()
        };
        let service: String = [o.service.p50, o.service.p99, o.service.max]
            .iter()
            .map(|&v| format!("<td>{}</td>", fmt_ns(v as f64)))
            .collect();
        let _ = write!(
            h,
            "<tr><td>{op}</td><td>{}</td><td>{}</td><td>{} / {}</td><td>{} / {}</td>{}{service}\
             <td>{}</td>{dep}{observed}</tr>",
            o.count,
            o.failed,
            fmt_num(o.intended_rate),
            fmt_num(o.achieved_rate),
            o.intended_peak,
            o.achieved_peak,
            pct_cells(&o.response),
            fmt_ns(o.lateness.p99 as f64),
        );
    }
    h.push_str("</table>");
    if !s.io_streams.is_empty() {
        h.push_str(
            "<table><tr><th>I/O stream</th><th>requests</th><th>dropped</th><th>reordered</th>\
             <th>errors</th><th>intended/s</th><th>achieved/s</th><th>worst second</th>\
             <th>lateness p50</th><th>p99</th><th>p99.9</th><th>max</th><th>response p99</th>\
             </tr>",
        );
        for f in &s.io_streams {
            let worst = f.worst_window.map_or_else(
                || "–".to_owned(),
                |w| {
                    format!(
                        "{:.3} % ({} of {} at {} s)",
                        w.error * 100.0,
                        w.issued,
                        w.intended,
                        w.start
                    )
                },
            );
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.0}</td>\
                 <td>{:.0}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
                 </tr>",
                esc(&f.volume),
                f.requests,
                f.dropped,
                f.reordered,
                f.errors,
                f.intended_rate,
                f.achieved_rate,
                esc(&worst),
                fmt_ns(f.lateness.p50 as f64),
                fmt_ns(f.lateness.p99 as f64),
                fmt_ns(f.lateness.p999 as f64),
                fmt_ns(f.lateness.max as f64),
                fmt_ns(f.response.p99 as f64),
            );
        }
        h.push_str("</table><ul class=note>");
        // The targets' descriptions are prose, not values: below the table, free to wrap.
        for f in &s.io_streams {
            let _ = write!(
                h,
                "<li>{}: <code>{}</code> ({})</li>",
                esc(&f.volume),
                esc(&f.target),
                esc(&f.flags.join("; "))
            );
        }
        h.push_str("</ul>");
    }
    h
}

/// The effect of each `modify_volume` on its volume's I/O (empty without one).
fn modify_table(i: usize, effects: &[crate::modify::ModifyEffect]) -> String {
    let mut h = String::new();
    if effects.is_empty() {
        return h;
    }
    let _ = write!(
        h,
        "<h2>Attributes-class changes under I/O (run {})</h2><p>I/O rate of the volume's \
         <code>io_phase</code> units in the {} s before the change was due and the {} s after \
         it completed, and when the class's IOPS limit held from (every {} ms slot within \
         +{:.0} % of it to the end of that window), counted from when the change was due.</p>\
         <table><tr><th>event</th><th>volume</th><th>class</th><th>outcome</th>\
         <th>response</th><th>kind</th><th>limit IOPS</th><th>before IOPS</th>\
         <th>after IOPS</th><th>limit holds after</th></tr>",
        i + 1,
        crate::modify::WINDOW / 1_000_000_000,
        crate::modify::WINDOW / 1_000_000_000,
        crate::modify::SLOT / 1_000_000,
        crate::modify::TOLERANCE * 100.0
    );
    let opt = |v: Option<f64>| v.map_or_else(|| "–".to_owned(), fmt_num);
    for e in effects {
        let holds = e
            .holds_after_ns
            .map_or_else(|| "–".to_owned(), |n| fmt_ns(n as f64));
        if e.kinds.is_empty() {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
                 <td colspan=5>no I/O on the volume around it</td></tr>",
                e.id,
                esc(&e.volume),
                esc(&e.class),
                esc(&e.outcome),
                fmt_ns(e.response_ns as f64)
            );
        }
        for k in &e.kinds {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
                 <td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                e.id,
                esc(&e.volume),
                esc(&e.class),
                esc(&e.outcome),
                fmt_ns(e.response_ns as f64),
                k.kind,
                k.limit.map_or_else(|| "none".to_owned(), |n| n.to_string()),
                opt(k.before),
                opt(k.after),
                holds
            );
        }
    }
    h.push_str("</table>");
    h
}

/// The report: its figures and the HTML page.
#[derive(Debug, Clone)]
pub struct Report {
    /// Figures, in page order.
    pub figures: Vec<Figure>,
    /// The self-contained HTML page.
    pub html: String,
}

/// Builds the report of one or more runs (refusing runs that are not valid unless
/// `allow_invalid`, see [`Run::check_valid`]; admitted ones show their verdict).
pub fn report(runs: &[&Path], allow_invalid: bool) -> Result<Report> {
    let loaded = runs
        .iter()
        .map(|p| load(p, allow_invalid))
        .collect::<Result<Vec<_>>>()?;
    let mut figures = Vec::new();
    let mut absent = Vec::new();
    let cdf = cdf_figure(&loaded);
    if cdf.points > 0 {
        figures.push(cdf);
    } else {
        absent.push("no control operations, so no response-time CDF".to_owned());
    }
    for (i, l) in loaded.iter().enumerate() {
        figures.extend(io_figure(i, l));
        if let Some(p) = crate::replayed::plot(&l.summary) {
            figures.push(figure(
                format!("replayed-{}", i + 1),
                "Recorded vs replayed latency of each streamed volume: the source recording's \
                 (trace observed, solid) and the replay's response (dashed), at min, p50, p90, \
                 p99, p99.9 and max."
                    .into(),
                &p,
            ));
        }
        if l.timeline.intended.iter().any(|&n| n > 0) {
            figures.push(rate_figure(i, l));
        } else {
            absent.push(format!(
                "run {}: no per-event records, so no intended-vs-achieved event rate",
                i + 1
            ));
        }
        figures.extend(stream_figures(i, l)?);
        for (id, caption, plot) in crate::cut::plots(&l.run, i, loaded.len())? {
            figures.push(figure(id, caption, &plot));
        }
        if let Some((id, caption, panels)) = crate::cbt::figure(&l.run, i, loaded.len())? {
            figures.push(Figure {
                id,
                caption,
                points: panels.iter().map(Plot::points).sum(),
                svg: crate::svg::stack(&panels),
            });
        }
    }
    let mut html = String::from(
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>cnsreplay report</title>\
         <style>body{font-family:sans-serif;margin:24px;max-width:1352px;color:#222}figure{margin:16px 0}\
         table{border-collapse:collapse;font-size:12px;margin-bottom:16px}\
         td,th{border:1px solid #bbb;padding:2px 5px;text-align:right}td{white-space:nowrap}\
         th{background:#eee}td:first-child{text-align:left}\
         p code,li code{overflow-wrap:anywhere}.headline{font-size:16px}figcaption,.note,.absent{font-size:12px;color:#444}\
         </style></head><body>\
         <h1>cnsreplay report</h1>",
    );
    let _ = write!(html, "<p>{} run(s): ", loaded.len());
    for (i, l) in loaded.iter().enumerate() {
        let _ = write!(
            html,
            "run {} = <code>{}</code> ",
            i + 1,
            esc(&l.run.path.display().to_string())
        );
        if let Some(note) = l.run.check_valid().err().and_then(|e| e.admitted()) {
            let _ = write!(html, "(<strong>not valid</strong>: {}) ", esc(&note));
        }
    }
    html.push_str("</p><h2>Results</h2>");
    let heads: Vec<_> = loaded
        .iter()
        .map(|l| (&l.headline, l.run.path.display().to_string()))
        .collect();
    let io = crate::headline::html(&heads);
    let any_streams = loaded.iter().any(|l| !l.summary.io_streams.is_empty());
    if io.is_empty() && !any_streams {
        html.push_str("<p>No I/O was measured in these runs.</p>");
    }
    html.push_str(&io);
    for (i, l) in loaded.iter().enumerate() {
        html.push_str(&crate::replayed::html(i, &l.summary));
    }
    html.push_str("<h2>Figures</h2>");
    for a in &absent {
        let _ = write!(html, "<p class=absent>Not drawn: {}.</p>", esc(a));
    }
    for f in &figures {
        let _ = write!(
            html,
            "<figure id=\"fig-{}\" data-figure=\"{}\" data-points=\"{}\">{}<figcaption>{}</figcaption></figure>",
            f.id,
            f.id,
            f.points,
            f.svg,
            esc(&f.caption)
        );
    }
    html.push_str("<h2>Percentiles</h2>");
    for (i, l) in loaded.iter().enumerate() {
        html.push_str(&table(i, loaded.len(), &l.summary));
    }
    for (i, l) in loaded.iter().enumerate() {
        match crate::modify::effects(&l.run)? {
            Some(e) => html.push_str(&modify_table(i, &e)),
            None if l.summary.ops.contains_key("modify_volume") => {
                let _ = write!(
                    html,
                    "<p>Run {}: its trace <code>{}</code> is not where the manifest says (or \
                     has changed), so what its <code>modify_volume</code> operations did to the \
                     I/O cannot be shown.</p>",
                    i + 1,
                    esc(&l.summary.trace)
                );
            }
            None => {}
        }
    }
    html.push_str("</body></html>\n");
    Ok(Report { figures, html })
}
