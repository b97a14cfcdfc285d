//! The report's tables: per run its percentiles by op type and its I/O streams, and what its
//! `modify_volume` operations did to the I/O.

use std::fmt::Write;

use replay::Percentiles;
use trace_format::units::fmt_ns;

use crate::render::num::fmt_num;
use crate::render::svg::esc;
use crate::stats::modify::{self, ModifyEffect};
use crate::stats::summary::RunSummary;

fn pct_cells(p: &Percentiles) -> String {
    let b = p.tool_ns.map(|b| [b.p50, b.p90, b.p99, b.p999, b.max]);
    [p.p50, p.p90, p.p99, p.p999, p.max]
        .iter()
        .enumerate()
        .map(|(i, &v)| cell(v, b.map(|b| b[i])))
        .collect()
}

/// A figure's cell, with the tool's error bound under it when there is one (`tool_ns`: the
/// most the tool's own delay could have added to the figure; docs/replay.md).
fn cell(v: u64, bound: Option<u64>) -> String {
    match bound {
        Some(b) => format!(
            "<td>{}<br><small class=tool title=\"the most the tool's own delay could have \
             added\">≤ {}</small></td>",
            fmt_ns(v as f64),
            fmt_ns(b as f64)
        ),
        None => format!("<td>{}</td>", fmt_ns(v as f64)),
    }
}

/// Run `i` of `n`: its header line, the per-op-type table and its I/O streams' table.
pub(crate) fn table(i: usize, n: usize, s: &RunSummary) -> String {
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
        let sb = o.service.tool_ns.map(|b| [b.p50, b.p99, b.max]);
        let service: String = [o.service.p50, o.service.p99, o.service.max]
            .iter()
            .enumerate()
            .map(|(i, &v)| cell(v, sb.map(|b| b[i])))
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
    if s.ops.values().any(|o| o.response.tool_ns.is_some()) {
        h.push_str(
            "<p class=note>“≤ …” under a figure: the tool's error bound, the most its own \
             delay could have added to that figure (docs/replay.md, The tool's error bound).</p>",
        );
    }
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
pub(crate) fn modify_table(i: usize, effects: &[ModifyEffect]) -> String {
    let mut h = String::new();
    if effects.is_empty() {
        return h;
    }
    let _ = write!(
        h,
        "<h2>Attributes-class changes under I/O (run {})</h2><p>I/O rate of the volume's \
         <code>io_phase</code> units in the {} s before the change was due and the {} s after \
         it completed, and when the class's IOPS limit held from, counted from when the change \
         was due: the first {} ms slot from which the I/O never ran ahead of the limit + {:.0} % \
         by more than one slot's I/Os (a token bucket, which forgives catching up after a \
         stall).</p>\
         <table><tr><th>event</th><th>volume</th><th>class</th><th>outcome</th>\
         <th>response</th><th>kind</th><th>limit IOPS</th><th>before IOPS</th>\
         <th>after IOPS</th><th>limit holds after</th></tr>",
        i + 1,
        modify::WINDOW / 1_000_000_000,
        modify::WINDOW / 1_000_000_000,
        modify::SLOT / 1_000_000,
        modify::TOLERANCE * 100.0
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
