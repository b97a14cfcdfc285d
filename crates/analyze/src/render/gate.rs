//! Verdicts where a release gate reads them: JUnit XML (what GitHub Actions test reporters,
//! GitLab's `artifacts:reports:junit`, Jenkins and Prow read; ClusterLoader2 writes it for the
//! same reason) and a Markdown table a person reads on a pull request (`$GITHUB_STEP_SUMMARY`,
//! a merge-request note), in benchstat's old / new / delta-with-interval form.
//!
//! Every verdict command (`compare`, `qos`, `capacity`, `history`) turns its report into one
//! [`Gate`]: one [`Case`] per judged row — op type × metric, tenant × target, SLO, series —
//! and both formats are written from it, so the two never disagree with each other or with
//! the command's exit code. A case is a `failure` for a regression or a violated target, with
//! the interval and evidence in its message; `skipped` for what the data cannot decide
//! (inconclusive, insufficient data, not judged), with the reason and the runs needed; passed
//! otherwise. The Markdown sorts rows by outcome (failures first) under a one-line verdict.
//! The JUnit layout follows the de-facto schema of the Jenkins/Ant reports (`testsuites` →
//! `testsuite` → `testcase` with `failure`/`skipped`, counts on both levels), which
//! `junitparser` and the CI reporters read.

use std::fmt::Write as _;

use crate::stats::capacity::CapacityReport;
use crate::stats::compare::{CompareReport, DesignKind, Metric, Row, Verdict};
use crate::stats::history::{ChangePoint, HistoryReport, Latest};
use crate::stats::point::PointEval;
use crate::stats::qos::QosReport;
use crate::stats::slo::Slo;
use trace_format::units::fmt_ns;

/// What became of one judged row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    /// A regression, a violated target or SLO.
    Failure,
    /// Not decided by the data (inconclusive, insufficient data, not judged).
    Skipped,
    /// Judged and fine.
    Passed,
}

impl Outcome {
    fn mark(self) -> &'static str {
        match self {
            Outcome::Failure => "❌",
            Outcome::Skipped => "⚠️",
            Outcome::Passed => "✅",
        }
    }
}

/// One judged row: a JUnit testcase and a Markdown table row.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// The testcase's class: the command and the row's group (`compare.attach`).
    pub class: String,
    /// The testcase's name (`p99`, `tenant-a read p99<=5ms`).
    pub name: String,
    /// Its outcome.
    pub outcome: Outcome,
    /// The verdict in a few words (`regression`, `inconclusive`), the Markdown's first column.
    pub verdict: String,
    /// The message of a failure or a skip (also the Markdown's last column).
    pub message: String,
    /// The table's cells between the verdict and the message, one per [`Gate::columns`].
    pub cells: Vec<String>,
}

/// A verdict command's result in the gate's terms.
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    /// The command (`analyze compare`), the suite's name.
    pub command: String,
    /// The one-line verdict on top of the Markdown.
    pub headline: String,
    /// What was judged, as `name = value` properties (runs, thresholds, design).
    pub properties: Vec<(String, String)>,
    /// Column titles of the Markdown table between the verdict and the message.
    pub columns: Vec<String>,
    /// The rows.
    pub cases: Vec<Case>,
    /// Notes printed under the table (and as the suite's `system-out`).
    pub notes: Vec<String>,
}

impl Gate {
    /// Failures, skipped, passed.
    pub fn counts(&self) -> (usize, usize, usize) {
        let n = |o: Outcome| self.cases.iter().filter(|c| c.outcome == o).count();
        (n(Outcome::Failure), n(Outcome::Skipped), n(Outcome::Passed))
    }

    /// The JUnit XML document.
    pub fn junit(&self) -> String {
        let (failures, skipped, _) = self.counts();
        let tests = self.cases.len();
        let name = xml(&format!("cnsreplay {}", self.command));
        let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let _ = writeln!(
            s,
            "<testsuites name=\"{name}\" tests=\"{tests}\" failures=\"{failures}\" \
             errors=\"0\" skipped=\"{skipped}\" time=\"0\">"
        );
        let _ = writeln!(
            s,
            "  <testsuite name=\"{name}\" tests=\"{tests}\" failures=\"{failures}\" \
             errors=\"0\" skipped=\"{skipped}\" time=\"0\">"
        );
        if !self.properties.is_empty() {
            s.push_str("    <properties>\n");
            for (k, v) in &self.properties {
                let _ = writeln!(
                    s,
                    "      <property name=\"{}\" value=\"{}\"/>",
                    xml(k),
                    xml(v)
                );
            }
            s.push_str("    </properties>\n");
        }
        for c in &self.cases {
            let _ = write!(
                s,
                "    <testcase classname=\"{}\" name=\"{}\" time=\"0\"",
                xml(&c.class),
                xml(&c.name)
            );
            let detail = self
                .columns
                .iter()
                .zip(&c.cells)
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
                .join("\n");
            match c.outcome {
                Outcome::Passed => {
                    let _ = writeln!(
                        s,
                        ">\n      <system-out>{}</system-out>\n    </testcase>",
                        xml(&format!("{}\n{detail}", c.verdict))
                    );
                }
                Outcome::Failure => {
                    let _ = writeln!(
                        s,
                        ">\n      <failure message=\"{}\" type=\"{}\">{}</failure>\n    </testcase>",
                        xml(&c.message),
                        xml(&c.verdict),
                        xml(&detail)
                    );
                }
                Outcome::Skipped => {
                    let _ = writeln!(
                        s,
                        ">\n      <skipped message=\"{}\"/>\n    </testcase>",
                        xml(&format!("{}: {}", c.verdict, c.message))
                    );
                }
            }
        }
        if !self.notes.is_empty() {
            let _ = writeln!(
                s,
                "    <system-out>{}</system-out>",
                xml(&self.notes.join("\n"))
            );
        }
        s.push_str("  </testsuite>\n</testsuites>\n");
        s
    }

    /// The Markdown: a heading with the one-line verdict, the table (failures, then skipped,
    /// then passed; the command's order within each), the notes.
    pub fn markdown(&self) -> String {
        let (failures, skipped, passed) = self.counts();
        let mut s = format!(
            "### cnsreplay {}\n\n**{}**\n\n",
            self.command,
            md(&self.headline)
        );
        let _ = writeln!(
            s,
            "{failures} failed, {skipped} undecided, {passed} passed{}\n",
            if self.properties.is_empty() {
                String::new()
            } else {
                format!(
                    " — {}",
                    self.properties
                        .iter()
                        .map(|(k, v)| format!("{k}: {}", md(v)))
                        .collect::<Vec<_>>()
                        .join("; ")
                )
            }
        );
        if !self.cases.is_empty() {
            let mut head = vec!["verdict".to_owned()];
            head.extend(self.columns.iter().cloned());
            head.push("why".to_owned());
            let _ = writeln!(s, "| {} |", head.join(" | "));
            let _ = writeln!(s, "|{}", "---|".repeat(head.len()));
            let mut rows: Vec<&Case> = self.cases.iter().collect();
            rows.sort_by_key(|c| c.outcome);
            for c in rows {
                let mut cells = vec![format!("{} {}", c.outcome.mark(), md(&c.verdict))];
                cells.extend(c.cells.iter().map(|v| md(v)));
                cells.push(md(&c.message));
                let _ = writeln!(s, "| {} |", cells.join(" | "));
            }
            s.push('\n');
        }
        for n in &self.notes {
            let _ = writeln!(s, "- {}", md(n));
        }
        s
    }
}

/// Text as XML 1.0 character data or an attribute value: the five entities escaped, the
/// characters XML 1.0 forbids (controls but tab, newline, return) dropped.
fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\t' | '\r' => out.push(' '),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

/// Text as one cell of a GFM table: pipes escaped, line breaks as spaces, and the characters
/// that would start markup (`<`, `*`, `_`, backquote, `[`) escaped.
fn md(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '|' | '\\' | '*' | '_' | '`' | '[' | ']' | '<' | '>' => {
                out.push('\\');
                out.push(c);
            }
            '\n' | '\r' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A metric's value as the tables print it: a duration, or the error rate in percent.
pub fn fmt_value(m: Metric, v: f64) -> String {
    if m == Metric::ErrorRate {
        format!("{:.2}%", v * 100.0)
    } else {
        fmt_ns(v)
    }
}

/// A change as the tables print it: relative in percent, the error rate in points.
pub fn fmt_change(m: Metric, v: f64) -> String {
    if m == Metric::ErrorRate {
        format!("{:+.2}pp", v * 100.0)
    } else if v.is_finite() {
        format!("{:+.1}%", v * 100.0)
    } else {
        "∞".to_owned()
    }
}

/// A compare row's verdict in words, with the runs that would decide an inconclusive one.
pub fn compare_verdict(r: &CompareReport, row: &Row) -> String {
    match row.verdict {
        Verdict::Regression => "REGRESSION".to_owned(),
        Verdict::Improvement => "improvement".to_owned(),
        Verdict::NoChange => "no change".to_owned(),
        Verdict::Inconclusive if row.tool_undecided => format!(
            "inconclusive (the tool's own delay could have made it: tool ≤ {:.1} % base, \
             {:.1} % new)",
            row.tool_base.unwrap_or(0.0) * 100.0,
            row.tool_new.unwrap_or(0.0) * 100.0
        ),
        Verdict::Inconclusive => match row.runs_needed {
            Some(n) if r.design.kind == DesignKind::BatchBaseline => {
                format!("inconclusive ({n} runs a side, in batches, would decide it)")
            }
            Some(n) => format!("inconclusive ({n} runs a side would decide it)"),
            None if row.df > 0.0 => "inconclusive (more runs cannot decide it)".to_owned(),
            None => "inconclusive".to_owned(),
        },
        Verdict::InsufficientData => format!(
            "insufficient data (< {} events in a run)",
            row.required_events
        ),
    }
}

/// The interval of a compare row's change, `[-1.2%, +3.4%]`, or `-`.
pub fn compare_interval(row: &Row) -> String {
    match (row.ci_low, row.ci_high) {
        (Some(l), Some(h)) => fmt_interval(row.metric, l, h),
        _ => "-".to_owned(),
    }
}

/// An interval of changes, `[-1.2%, +3.4%]`.
pub fn fmt_interval(m: Metric, lo: f64, hi: f64) -> String {
    format!("[{}, {}]", fmt_change(m, lo), fmt_change(m, hi))
}

/// A history change point's levels, change with its interval and p, and whether the newest
/// build is still past it: `200.0 ms → 300.0 ms, +50.0% [+41.0%, +59.1%], p 0.0002`.
pub fn change_point_text(m: Metric, c: &ChangePoint) -> String {
    format!(
        "{} → {}, {} {}, p {:.4}{}",
        fmt_value(m, c.before),
        fmt_value(m, c.after),
        fmt_change(m, c.change),
        fmt_interval(m, c.ci_low, c.ci_high),
        c.p,
        if c.still_past {
            "; latest build still past it"
        } else {
            ""
        }
    )
}

/// `analyze compare`: one case per row; rows a partly-valid run could not measure are
/// skipped cases of their own (they hold the exit code at 3).
pub fn compare(r: &CompareReport) -> Gate {
    let mut cases = Vec::new();
    for row in &r.rows {
        let (outcome, verdict) = match row.verdict {
            Verdict::Regression => (Outcome::Failure, "regression"),
            Verdict::Improvement => (Outcome::Passed, "improvement"),
            Verdict::NoChange => (Outcome::Passed, "no change"),
            Verdict::Inconclusive => (Outcome::Skipped, "inconclusive"),
            Verdict::InsufficientData => (Outcome::Skipped, "insufficient data"),
        };
        let interval = compare_interval(row);
        let tolerance = fmt_change(row.metric, row.tolerance);
        let message = match row.verdict {
            Verdict::Regression | Verdict::Improvement | Verdict::NoChange => format!(
                "{} {}: {} → {} ({}, {:.0}% interval {interval}, threshold ±{}, p(Holm) {:.3})",
                row.op,
                row.metric.name(),
                fmt_value(row.metric, row.base),
                fmt_value(row.metric, row.new),
                fmt_change(row.metric, row.change),
                (1.0 - r.options.alpha) * 100.0,
                tolerance.trim_start_matches('+'),
                row.p_holm
            ),
            _ => compare_verdict(r, row),
        };
        let runs = match (row.verdict, row.runs_needed) {
            (Verdict::Inconclusive, _) if row.tool_undecided => "a quieter host".to_owned(),
            (Verdict::Inconclusive, Some(n)) => format!("{n} a side"),
            (Verdict::Inconclusive, None) if row.df > 0.0 => "more cannot decide".to_owned(),
            _ => String::new(),
        };
        cases.push(Case {
            class: format!("compare.{}", row.op),
            name: row.metric.name().to_owned(),
            outcome,
            verdict: verdict.to_owned(),
            message,
            cells: vec![
                row.op.clone(),
                row.metric.name().to_owned(),
                fmt_value(row.metric, row.base),
                fmt_value(row.metric, row.new),
                fmt_change(row.metric, row.change),
                interval,
                runs,
            ],
        });
    }
    for e in &r.engine_bound {
        let op = e.split(':').next().unwrap_or(e).to_owned();
        cases.push(Case {
            class: format!("compare.{op}"),
            name: "not judged".to_owned(),
            outcome: Outcome::Skipped,
            verdict: "not judged".to_owned(),
            message: format!("the tool's own delay is too large against its latencies: {e}"),
            cells: vec![
                op,
                "all".to_owned(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ],
        });
    }
    let headline = match r.exit_code() {
        1 => format!(
            "REGRESSION: {} of {} rows slower beyond their threshold",
            r.regressions,
            r.rows.len()
        ),
        3 => format!(
            "INCONCLUSIVE: no regression shown, but {} row(s) undecided{}",
            r.inconclusive + r.insufficient + r.engine_bound.len(),
            r.runs_needed
                .map(|n| format!(" ({n} runs a side would decide them)"))
                .unwrap_or_default()
        ),
        _ => format!(
            "no regression: every row within its threshold or better ({} improvement(s))",
            r.improvements
        ),
    };
    let mut properties = vec![
        ("base".to_owned(), r.base.join(" ")),
        ("new".to_owned(), r.new.join(" ")),
        ("design".to_owned(), r.design.summary.clone()),
    ];
    if !r.label_differences.is_empty() {
        properties.push(("labels".to_owned(), r.label_differences.join("; ")));
    }
    let mut notes = r.notes.clone();
    if !r.manifest_differences.is_empty() {
        notes.push(format!(
            "the runs' manifests differ in more than the seed (unless this is the system \
             under test, the comparison measures it too): {}",
            r.manifest_differences.join("; ")
        ));
    }
    if !r.unmatched.is_empty() {
        notes.push(format!("not in every run: {}", r.unmatched.join(", ")));
    }
    Gate {
        command: "analyze compare".to_owned(),
        headline,
        properties,
        columns: [
            "operation",
            "metric",
            "base",
            "new",
            "change",
            "interval",
            "runs needed",
        ]
        .map(str::to_owned)
        .to_vec(),
        cases,
        notes,
    }
}

/// `analyze qos`: one case per tenant × target, a failure when a window violated it, skipped
/// when the run had no window with its tenant's I/O.
pub fn qos(r: &QosReport) -> Gate {
    let cases: Vec<Case> = r
        .targets
        .iter()
        .map(|t| {
            let (outcome, verdict) = if t.windows == 0 {
                (Outcome::Skipped, "no data")
            } else if t.violated > 0 {
                (Outcome::Failure, "violated")
            } else {
                (Outcome::Passed, "met")
            };
            let worst = t
                .violations
                .iter()
                .max_by_key(|v| v.value_ns)
                .map(|v| fmt_ns(v.value_ns as f64))
                .unwrap_or_default();
            Case {
                class: format!("qos.{}", t.target.tenant),
                name: t.target.spec.clone(),
                outcome,
                verdict: verdict.to_owned(),
                message: t.sentence.clone(),
                cells: vec![
                    t.target.tenant.clone(),
                    t.target.spec.clone(),
                    format!("{} of {}", t.violated, t.windows),
                    worst,
                ],
            }
        })
        .collect();
    let violated = r.targets.iter().filter(|t| t.violated > 0).count();
    Gate {
        command: "analyze qos".to_owned(),
        headline: if violated > 0 {
            format!("VIOLATED: {violated} of {} targets", r.targets.len())
        } else {
            format!("every target met in every window ({})", r.targets.len())
        },
        properties: vec![
            ("run".to_owned(), r.run.clone()),
            ("window".to_owned(), fmt_ns(r.window_ns as f64)),
        ],
        columns: ["tenant", "target", "windows violated", "worst window"]
            .map(str::to_owned)
            .to_vec(),
        cases,
        notes: Vec::new(),
    }
}

/// A capacity answer in the gate's terms: the points judged, the highest sustained one (the
/// answer's point), the answer's sentence.
pub struct CapacityInput<'a> {
    /// `analyze capacity` or `capacity`.
    pub command: &'a str,
    /// The sweep or search directory.
    pub dir: &'a str,
    /// The SLOs.
    pub slos: &'a [Slo],
    /// Every point.
    pub points: Vec<&'a PointEval>,
    /// The highest sustained point (None: no point passed).
    pub sustained: Option<&'a PointEval>,
    /// Offered rate of the sustained point's `all` throughput (what the answer calls the
    /// capacity), and the answer in one sentence.
    pub answer: &'a str,
}

/// `analyze capacity`'s input from its report.
pub fn capacity_of(r: &CapacityReport) -> CapacityInput<'_> {
    CapacityInput {
        command: "analyze capacity",
        dir: &r.sweep,
        slos: &r.slos,
        points: r.points.iter().collect(),
        sustained: r
            .max_speed
            .and_then(|s| r.points.iter().find(|p| p.pass && p.speed == s)),
        answer: &r.answer,
    }
}

/// A capacity answer: one case per SLO (met at the sustained point, or a failure: violated
/// at every point), and one for the answer (a failure when no point was sustained).
pub fn capacity(c: &CapacityInput<'_>) -> Gate {
    let rate = |p: &PointEval| p.total().map_or(0.0, |t| t.offered_rate);
    let mut cases = Vec::new();
    for (i, slo) in c.slos.iter().enumerate() {
        let at = |p: &PointEval| p.slos.get(i).and_then(|v| v.value_ns);
        let (outcome, verdict, message, value, where_) = match c.sustained {
            Some(p) => (
                Outcome::Passed,
                "met",
                format!(
                    "{} at {:.2}/s, the highest sustained rate: {}",
                    slo.spec,
                    rate(p),
                    at(p).map_or("no events".to_owned(), |v| fmt_ns(v as f64))
                ),
                at(p),
                format!("{:.2}/s", rate(p)),
            ),
            None => {
                // The lowest point: where the SLO had its best chance.
                let low = c
                    .points
                    .iter()
                    .min_by(|a, b| rate(a).total_cmp(&rate(b)))
                    .copied();
                let met_low = low.and_then(|p| p.slos.get(i)).is_some_and(|v| v.met);
                (
                    if met_low {
                        Outcome::Passed
                    } else {
                        Outcome::Failure
                    },
                    if met_low { "met" } else { "violated" },
                    match low {
                        Some(p) => format!(
                            "{} at the lowest rate, {:.2}/s: {}",
                            slo.spec,
                            rate(p),
                            at(p).map_or("no events".to_owned(), |v| fmt_ns(v as f64))
                        ),
                        None => format!("{}: no point", slo.spec),
                    },
                    low.and_then(at),
                    low.map_or(String::new(), |p| format!("{:.2}/s", rate(p))),
                )
            }
        };
        cases.push(Case {
            class: format!("capacity.{}", slo.op),
            name: slo.spec.clone(),
            outcome,
            verdict: verdict.to_owned(),
            message,
            cells: vec![
                slo.spec.clone(),
                where_,
                value.map_or("–".to_owned(), |v| fmt_ns(v as f64)),
            ],
        });
    }
    let (outcome, verdict) = if c.sustained.is_some() {
        (Outcome::Passed, "sustained")
    } else {
        (Outcome::Failure, "not sustained")
    };
    cases.push(Case {
        class: "capacity".to_owned(),
        name: "sustained rate".to_owned(),
        outcome,
        verdict: verdict.to_owned(),
        message: c.answer.to_owned(),
        cells: vec![
            "sustained rate".to_owned(),
            c.sustained
                .map_or("none".to_owned(), |p| format!("{:.2}/s", rate(p))),
            String::new(),
        ],
    });
    let failed = cases
        .iter()
        .filter(|x| x.outcome == Outcome::Failure)
        .count();
    Gate {
        command: c.command.to_owned(),
        headline: if failed > 0 {
            format!("NOT SUSTAINED: {}", c.answer)
        } else {
            c.answer.to_owned()
        },
        properties: vec![
            ("directory".to_owned(), c.dir.to_owned()),
            ("points".to_owned(), c.points.len().to_string()),
        ],
        columns: ["SLO", "at", "value"].map(str::to_owned).to_vec(),
        cases,
        notes: Vec::new(),
    }
}

/// `analyze history`: one case per series, a failure when its latest segment is a regression
/// (the build where it began, the size and its interval in the message), skipped when too few
/// builds had values.
pub fn history(r: &HistoryReport) -> Gate {
    let cases: Vec<Case> = r
        .series
        .iter()
        .map(|s| {
            let (outcome, verdict) = match s.latest {
                Latest::Regression => (Outcome::Failure, "regression"),
                Latest::Improvement => (Outcome::Passed, "improvement"),
                Latest::Steady => (Outcome::Passed, "steady"),
                Latest::Untested => (Outcome::Skipped, "too few builds"),
            };
            let changes: Vec<String> = s
                .change_points
                .iter()
                .map(|c| format!("since {}: {}", c.build, change_point_text(s.metric, c)))
                .collect();
            let message = match s.latest {
                Latest::Untested => format!(
                    "{} build(s) with a value; a change needs {} on either side",
                    s.points.len(),
                    r.options.min_builds
                ),
                _ if changes.is_empty() => "no change point".to_owned(),
                _ => changes.join("; "),
            };
            let last = s.points.last();
            Case {
                class: format!("history.{}", s.op),
                name: s.metric.name().to_owned(),
                outcome,
                verdict: verdict.to_owned(),
                message,
                cells: vec![
                    s.op.clone(),
                    s.metric.name().to_owned(),
                    last.map_or(String::new(), |p| {
                        format!("{} ({})", fmt_value(s.metric, p.value), p.build)
                    }),
                    s.change_points
                        .last()
                        .map_or(String::new(), |c| c.build.clone()),
                    s.change_points.last().map_or(String::new(), |c| {
                        format!(
                            "{} {}",
                            fmt_change(s.metric, c.change),
                            fmt_interval(s.metric, c.ci_low, c.ci_high)
                        )
                    }),
                ],
            }
        })
        .collect();
    let regressed: Vec<String> = r
        .series
        .iter()
        .filter(|s| s.latest == Latest::Regression)
        .filter_map(|s| {
            let c = s.change_points.last()?;
            Some(format!(
                "{} {} {} since {}",
                s.op,
                s.metric.name(),
                fmt_change(s.metric, c.change),
                c.build
            ))
        })
        .collect();
    Gate {
        command: "analyze history".to_owned(),
        headline: match r.exit_code() {
            1 => format!("REGRESSION: {}", regressed.join(", ")),
            3 => "UNTESTED: too few builds to find a change".to_owned(),
            _ => format!(
                "no series is worse now than before its last change ({} change point(s) over \
                 {} builds)",
                r.change_points,
                r.builds.len()
            ),
        },
        properties: vec![
            (
                "builds".to_owned(),
                format!(
                    "{} ({} … {})",
                    r.builds.len(),
                    r.builds.first().map_or("", |b| b.build.as_str()),
                    r.builds.last().map_or("", |b| b.build.as_str())
                ),
            ),
            (
                "method".to_owned(),
                format!(
                    "E-divisive means, permutation test at {:.2e} a series ({} family-wise)",
                    r.series_alpha, r.options.alpha
                ),
            ),
        ],
        columns: ["operation", "metric", "latest", "changed at", "change"]
            .map(str::to_owned)
            .to_vec(),
        cases,
        notes: r.notes.clone(),
    }
}
