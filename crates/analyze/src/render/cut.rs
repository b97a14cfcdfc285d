//! The report's figure per consistency check of a group (or of separate) snapshots: what the
//! writes did around the cut.
//!
//! Each `io/ID.cut.json` ([`replay::files::CutFile`], a checking `io_phase.ordered`,
//! docs/replay.md) names the writer's log, its members and how their snapshots were taken. The
//! figure draws, per written volume, its acknowledged writes over the run's time (cumulative:
//! a pause is a flat stretch), with each snapshot's request → ready as a band and each
//! volume's longest pause around it as a marker, and the verdict in the title. The log is iogen's binary ordered-write log beside
//! the check (`io/<writer id>.ordered.log`); its acks are on the writer's wall clock, placed on
//! the run's by the manifest's origin, as the check placed them.

use std::path::Path;

use replay::files::CutFile;

use crate::render::svg::{COLORS, Dash, Mark, Plot, Series};
use crate::{Error, Result, Run};

/// Points kept per volume's line.
const MAX_POINTS: usize = 600;

fn bad(file: &Path, message: String) -> Error {
    Error::RunFile {
        file: file.to_owned(),
        message,
    }
}

/// One figure per check of the run (`i`: the run's index, `n`: how many runs).
pub(crate) fn plots(run: &Run, i: usize, n: usize) -> Result<Vec<(String, String, Plot)>> {
    let origin = run.origin_ns();
    let mut out = Vec::new();
    for (id, path) in crate::stats::load::event_files(&run.path, "io", ".cut.json")? {
        let f: CutFile =
            serde_json::from_slice(&fs_err::read(&path)?).map_err(|e| bad(&path, e.to_string()))?;
        // The log beside the check (the run directory may have moved since).
        let log_path = f
            .log_file
            .file_name()
            .map(|n| run.path.join("io").join(n))
            .unwrap_or_default();
        let log = iogen::OrderedLog::read(&log_path).map_err(|e| bad(&log_path, e.to_string()))?;
        let shift = i128::from(log.header.start_unix_ns) - origin;
        let on_run = |ns: u64| (shift + i128::from(ns)) as f64 / 1e9;
        let mut series = Vec::new();
        for (v, m) in f.members.iter().enumerate() {
            let acks: Vec<f64> = log
                .records
                .iter()
                .filter(|r| r.volume as usize == v && !r.failed)
                .map(|r| on_run(r.ack_ns))
                .collect();
            let step = acks.len().div_ceil(MAX_POINTS).max(1);
            let mut points: Vec<(f64, f64)> = acks
                .iter()
                .enumerate()
                .step_by(step)
                .map(|(k, &t)| (t, (k + 1) as f64))
                .collect();
            if let Some(&last) = acks.last()
                && points.last().is_some_and(|p| p.0 < last)
            {
                points.push((last, acks.len() as f64));
            }
            series.push(Series {
                name: m.volume.clone(),
                points,
                color: COLORS[v % COLORS.len()].to_owned(),
                // A chained writer's volumes climb together: each its own stroke too.
                dash: Dash::of_run(v),
            });
        }
        let mut marks = Vec::new();
        let mut legend: Vec<(String, String)> = Vec::new();
        let snap_color = "#bbbbbb".to_owned();
        for m in &f.members {
            if let Some(t) = &m.taken {
                marks.push(Mark {
                    x0: t.requested_ns as f64 / 1e9,
                    x1: t.ready_ns as f64 / 1e9,
                    color: snap_color.clone(),
                });
                if !legend.iter().any(|(n, _)| *n == t.by) {
                    legend.push((t.by.clone(), snap_color.clone()));
                }
            }
        }
        for (v, m) in f.members.iter().enumerate() {
            if let (Some(p), Some(from)) = (m.pause.pause_ns, m.pause.pause_from_ns) {
                marks.push(Mark {
                    x0: from as f64 / 1e9,
                    x1: (from + p) as f64 / 1e9,
                    color: COLORS[v % COLORS.len()].to_owned(),
                });
            }
        }
        legend.push(("write pause".into(), "#444444".into()));
        let run_label = if n > 1 {
            format!("run {} ", i + 1)
        } else {
            String::new()
        };
        let verdict = f.verdict.split(':').next().unwrap_or_default().to_owned();
        let plot = Plot {
            title: format!(
                "{run_label}Cut check, event {id} (log {}): {verdict}",
                f.log
            ),
            x_label: "run time (s)".into(),
            y_label: "writes acknowledged".into(),
            x_log: false,
            y_log: false,
            x_fmt: |v| format!("{v:.1}"),
            y_fmt: |v| format!("{v:.0}"),
            series,
            marks,
            mark_legend: legend,
        };
        out.push((
            format!("cut-{}-{id}", i + 1),
            format!(
                "{run_label}Writes acknowledged per volume around the snapshots checked by \
                 event {id} (grey: each snapshot's request → ready; a band in a volume's \
                 colour, \"write pause\": its longest pause between acknowledged writes \
                 overlapping its snapshot). {}",
                f.verdict
            ),
            plot,
        ));
    }
    Ok(out)
}
