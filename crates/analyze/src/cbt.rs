//! The report's figure of a run's changed-block listings (`cbt/ID.json`,
//! [`replay::files::CbtFile`], one per `snapshot_allocated` / `snapshot_delta` event of either
//! provider, docs/run-dir.md).
//!
//! One figure per run (`cbt-N`), two panels sharing the run's time axis, each listing a point
//! at its provider-call start (`started` of its record in `events.jsonl`): above, the bytes it
//! listed (allocated bytes of a full listing, changed bytes of a delta); below, the listing's
//! time to the first range and its total (log scale: the first range can be three orders of
//! magnitude sooner). A delta whose written-set check found blocks missing (written between
//! its snapshots, absent from it) is marked by a red line, one with extra blocks (no write
//! around the window touched them) by an orange one. The title is the verdict over the
//! deltas: how many were checked against complete written sets, how many only partly (a
//! writer on the volume still running or unrecordable) or not at all, and the missing blocks.
//! A listing without a record (a crashed run) is left out and counted in the caption.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use iogen::delta_check::DeltaCheck as Check;
use replay::files::CbtFile;
use trace_format::OpType;

use crate::load::{Accumulator, Rec};
use crate::svg::{Dash, Mark, Plot, Series};
use crate::{Error, Result, Run};

/// Provider-call starts of the listing events, by id.
#[derive(Debug, Default)]
struct Starts(HashMap<u64, u64>);

impl Accumulator for Starts {
    fn add(&mut self, r: &Rec<'_>) {
        if matches!(r.op, OpType::SnapshotAllocated | OpType::SnapshotDelta) {
            self.0.insert(r.id, r.started);
        }
    }
    fn merge(&mut self, o: Self) {
        self.0.extend(o.0);
    }
}

/// How a run's deltas were checked.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// Deltas checked against complete written sets of every writer on their volume.
    pub checked: u64,
    /// Deltas checked against some writers' sets, not all.
    pub partly: u64,
    /// Deltas with no written set to check against.
    pub unchecked: u64,
    /// Blocks missing from deltas, summed.
    pub missing: u64,
    /// Extra delta blocks, summed.
    pub extra: u64,
}

impl Verdict {
    fn add(&mut self, c: Option<&Check>) {
        match c {
            Some(c) if !c.phases.is_empty() => {
                if c.not_checked.is_empty() {
                    self.checked += 1;
                } else {
                    self.partly += 1;
                }
                self.missing += c.missing;
                self.extra += c.extra_blocks;
            }
            _ => self.unchecked += 1,
        }
    }

    /// `deltas: 9 checked, 0 missing` (and the partly checked, unchecked and extra when any).
    pub fn text(&self) -> String {
        let mut s = format!(
            "deltas: {} checked, {} missing",
            self.checked + self.partly,
            self.missing
        );
        if self.partly > 0 {
            s += &format!(" ({} only partly)", self.partly);
        }
        if self.unchecked > 0 {
            s += &format!(", {} not checked", self.unchecked);
        }
        if self.extra > 0 {
            s += &format!(", {} extra blocks", self.extra);
        }
        s
    }
}

fn bad(file: &Path, message: String) -> Error {
    Error::RunFile {
        file: file.to_owned(),
        message,
    }
}

const FULL: &str = "#0072B2";
const DELTA: &str = "#009E73";
const MISSING: &str = "#D55E00";
const EXTRA: &str = "#E69F00";

/// The figure of run `i` of `n` with listings: `(id, caption, panels)`, or `None`.
pub(crate) fn figure(run: &Run, i: usize, n: usize) -> Result<Option<(String, String, Vec<Plot>)>> {
    let paths: Vec<PathBuf> = crate::load::event_files(&run.path, "cbt", ".json")?
        .into_iter()
        .map(|(_, p)| p)
        .collect();
    if paths.is_empty() {
        return Ok(None);
    }
    let starts = run.scan(Starts::default)?.0;
    let mut verdict = Verdict::default();
    let (mut full, mut delta) = (Vec::new(), Vec::new());
    let (mut first, mut total) = (Vec::new(), Vec::new());
    let mut marks = Vec::new();
    let (mut deltas, mut fulls, mut unplaced) = (0u64, 0u64, 0u64);
    for path in &paths {
        let f: CbtFile =
            serde_json::from_slice(&fs_err::read(path)?).map_err(|e| bad(path, e.to_string()))?;
        if f.base.is_some() {
            deltas += 1;
            verdict.add(f.check.as_ref());
        } else {
            fulls += 1;
        }
        let Some(&start) = starts.get(&f.event) else {
            unplaced += 1;
            continue;
        };
        let x = start as f64 / 1e9;
        let mib = f.timing.bytes as f64 / 1048576.0;
        if f.base.is_some() {
            delta.push((x, mib));
        } else {
            full.push((x, mib));
        }
        if let Some(t) = f.timing.first_range_ns {
            first.push((x, t as f64 / 1e6));
        }
        total.push((x, f.timing.total_ns as f64 / 1e6));
        if let Some(c) = &f.check {
            for (bad, color) in [(c.missing, MISSING), (c.extra_blocks, EXTRA)] {
                if bad > 0 {
                    marks.push(Mark {
                        x0: x,
                        x1: x,
                        color: color.to_owned(),
                    });
                }
            }
        }
    }
    let mut legend = Vec::new();
    for (what, color, any) in [
        ("missing blocks", MISSING, verdict.missing > 0),
        ("extra blocks", EXTRA, verdict.extra > 0),
    ] {
        if any {
            legend.push((what.to_owned(), color.to_owned()));
        }
    }
    let points = |name: &str, points: Vec<(f64, f64)>, color: &str| Series {
        name: name.to_owned(),
        points,
        color: color.to_owned(),
        dash: Dash::Points,
    };
    let run_label = if n > 1 {
        format!("run {} ", i + 1)
    } else {
        String::new()
    };
    let bytes = Plot {
        title: format!("{run_label}Changed blocks: {}", verdict.text()),
        x_label: "run time (s)".into(),
        y_label: "listed (MiB)".into(),
        x_log: false,
        y_log: false,
        x_fmt: |v| format!("{v:.1}"),
        y_fmt: |v| format!("{v:.1}"),
        series: vec![
            points("allocated (full)", full, FULL),
            points("changed (delta)", delta, DELTA),
        ],
        marks: marks.clone(),
        mark_legend: legend.clone(),
    };
    let time = Plot {
        title: format!("{run_label}Listing time"),
        x_label: "run time (s)".into(),
        y_label: "listing time".into(),
        x_log: false,
        y_log: true,
        x_fmt: |v| format!("{v:.1}"),
        y_fmt: |v| crate::report::fmt_ns(v * 1e6),
        series: vec![
            points("first range", first, "#CC79A7"),
            points("total", total, "#000000"),
        ],
        marks,
        mark_legend: legend,
    };
    let mut caption = format!(
        "{run_label}Changed-block listings ({fulls} snapshot_allocated, {deltas} \
         snapshot_delta; cbt/ID.json), each at its provider-call start: above, the bytes listed \
         (allocated for a full backup, changed since the base for an incremental one); below, \
         the time to the first range and the total. Deltas are checked against the written sets \
         of the verify-mode writers on their volume: {}; a red line marks a delta with missing \
         blocks (written between its snapshots, not in it), an orange one extra blocks (no \
         write around the window touched them).",
        verdict.text()
    );
    if unplaced > 0 {
        caption += &format!(" Not drawn, without a record in events.jsonl: {unplaced}.");
    }
    Ok(Some((format!("cbt-{}", i + 1), caption, vec![bytes, time])))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(phases: &[u64], not_checked: usize, missing: u64, extra: u64) -> Check {
        Check {
            phases: phases.to_vec(),
            not_checked: vec!["event 9: still running".into(); not_checked],
            missing,
            extra_blocks: extra,
            ..Check::default()
        }
    }

    /// A delta counts as checked when a written set was compared, as only partly checked when
    /// a writer on its volume could not be, and not at all without any; missing and extra
    /// blocks add up over the deltas.
    #[test]
    fn the_verdict_counts_checked_partly_and_unchecked_deltas() {
        let mut v = Verdict::default();
        v.add(Some(&check(&[1], 0, 0, 0)));
        v.add(Some(&check(&[1, 4], 0, 0, 0)));
        assert_eq!(v.text(), "deltas: 2 checked, 0 missing");
        v.add(Some(&check(&[1], 1, 3, 0)));
        v.add(Some(&check(&[], 1, 0, 0)));
        v.add(None);
        v.add(Some(&check(&[2], 0, 0, 5)));
        assert_eq!(
            v,
            Verdict {
                checked: 3,
                partly: 1,
                unchecked: 2,
                missing: 3,
                extra: 5
            }
        );
        assert_eq!(
            v.text(),
            "deltas: 4 checked, 3 missing (1 only partly), 2 not checked, 5 extra blocks"
        );
    }
}
