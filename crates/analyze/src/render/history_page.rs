//! `analyze history --html FILE`: one self-contained page (inline SVG, no script) with a figure
//! per series that has a change point (then the rest, `--html-all`), each build's median as a
//! line over the build index, its runs' lowest and highest values as dots, and every change
//! point as a vertical line at the first build after it; the series table below. The builds'
//! names are listed under each figure (the x axis is the build's position).

use std::fmt::Write;

use crate::render::figures::{Figure, figure};
use crate::render::gate::fmt_change;
use crate::render::svg::{COLORS, Dash, Mark, Plot, Series, esc};
use crate::stats::compare::Metric;
use crate::stats::history::{HistoryReport, Latest};
use trace_format::units::fmt_ns;

fn fmt_index(x: f64) -> String {
    format!("{}", x.round() as i64 + 1)
}

fn fmt_fraction(x: f64) -> String {
    format!("{:.2}%", x * 100.0)
}

fn fmt_latency(x: f64) -> String {
    fmt_ns(x)
}

/// The page and its figures; `all`: a figure for every series, not only those with a change.
pub fn page(r: &HistoryReport, all: bool) -> (String, Vec<Figure>) {
    let index: std::collections::BTreeMap<&str, usize> = r
        .builds
        .iter()
        .enumerate()
        .map(|(i, b)| (b.build.as_str(), i))
        .collect();
    let mut figures = Vec::new();
    let mut order: Vec<&crate::stats::history::Series> = r.series.iter().collect();
    order.sort_by_key(|s| (s.latest != Latest::Regression, s.change_points.is_empty()));
    for s in order {
        if !all && s.change_points.is_empty() {
            continue;
        }
        let at = |b: &str| index.get(b).copied().unwrap_or(0) as f64;
        let pts = |f: fn(&crate::stats::history::SeriesPoint) -> f64| -> Vec<(f64, f64)> {
            s.points.iter().map(|p| (at(&p.build), f(p))).collect()
        };
        let latency = s.metric.is_latency();
        let plot = Plot {
            title: format!("{} {}", s.op, s.metric.name()),
            x_label: "build (position)".into(),
            y_label: if latency {
                "latency".into()
            } else {
                "failed fraction".into()
            },
            x_log: false,
            y_log: latency,
            x_fmt: fmt_index,
            y_fmt: if s.metric == Metric::ErrorRate {
                fmt_fraction
            } else {
                fmt_latency
            },
            series: vec![
                Series {
                    name: "median of the build's runs".into(),
                    points: pts(|p| p.value),
                    color: COLORS[0].into(),
                    dash: Dash::Solid,
                },
                Series {
                    name: "lowest run".into(),
                    points: pts(|p| p.low),
                    color: COLORS[5].into(),
                    dash: Dash::Points,
                },
                Series {
                    name: "highest run".into(),
                    points: pts(|p| p.high),
                    color: COLORS[1].into(),
                    dash: Dash::Points,
                },
            ],
            marks: s
                .change_points
                .iter()
                .map(|c| {
                    let x = at(&c.build) - 0.5;
                    Mark {
                        x0: x,
                        x1: x,
                        color: COLORS[3].into(),
                    }
                })
                .collect(),
            mark_legend: vec![("change point".into(), COLORS[3].into())],
        };
        let changes: Vec<String> = s
            .change_points
            .iter()
            .map(|c| format!("since {} ({})", c.build, fmt_change(s.metric, c.change)))
            .collect();
        let id = format!(
            "history-{}-{}",
            s.op.replace(|c: char| !c.is_ascii_alphanumeric(), "-"),
            s.metric.name().replace('.', "")
        );
        figures.push(figure(
            id,
            format!(
                "{} {} over {} builds{}",
                s.op,
                s.metric.name(),
                s.points.len(),
                if changes.is_empty() {
                    ": no change point".to_owned()
                } else {
                    format!(": {}", changes.join(", "))
                }
            ),
            &plot,
        ));
    }
    let mut html = String::from(
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>cnsreplay history</title>\
         <style>body{font-family:sans-serif;margin:24px;max-width:1352px;color:#222}figure{margin:16px 0}\
         table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #bbb;padding:2px 5px}\
         th{background:#eee}figcaption,.note{font-size:12px;color:#444}</style></head><body>\
         <h1>cnsreplay history</h1>",
    );
    let _ = write!(
        html,
        "<p>{} builds{}: ",
        r.builds.len(),
        r.options
            .by
            .as_ref()
            .map_or(String::new(), |k| format!(" by <code>{}</code>", esc(k)))
    );
    for (i, b) in r.builds.iter().enumerate() {
        let _ = write!(html, "{} = <code>{}</code> ", i + 1, esc(&b.build));
    }
    html.push_str("</p>");
    if figures.is_empty() {
        html.push_str("<p>No series has a change point.</p>");
    }
    for f in &figures {
        html.push_str(&f.html());
    }
    html.push_str(
        "<table><tr><th>operation</th><th>metric</th><th>latest</th><th>change points</th></tr>",
    );
    for s in &r.series {
        let cps: Vec<String> = s
            .change_points
            .iter()
            .map(|c| {
                format!(
                    "{} ({}, p {:.4})",
                    c.build,
                    fmt_change(s.metric, c.change),
                    c.p
                )
            })
            .collect();
        let _ = write!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{:?}</td><td>{}</td></tr>",
            esc(&s.op),
            s.metric.name(),
            s.latest,
            esc(&cps.join(", "))
        );
    }
    html.push_str("</table>");
    for n in &r.notes {
        let _ = write!(html, "<p class=note>{}</p>", esc(n));
    }
    html.push_str("</body></html>\n");
    (html, figures)
}
