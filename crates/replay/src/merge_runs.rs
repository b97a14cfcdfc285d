//! Run directories of one split trace (`trace split`, each part by its own driver from one
//! `--start-at` instant) as one run directory, so that `analyze` sees the whole trace.
//!
//! Why records and not summaries: percentiles do not add up (the p99 of three runs is not a
//! mean of their p99s). Every event's record is copied into one `events.jsonl`, its times
//! (`intended`, `dispatched`, `started`, `completed`, phase instants) moved onto the earliest
//! run's origin by the difference of the origins, so whatever `analyze` computes from the
//! merged directory is what one run holding all the events would give — its histograms are
//! built from the same values. A `marker` that every part replayed (`trace split` copies them)
//! is kept once. There is no `summary.json` (its verdict was each driver's; see theirs), and
//! the manifest says what was merged (`options.merged_from`).

use std::collections::HashSet;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Value, json};

use crate::Error;
use crate::record::CompletionState;
use crate::rundir::RunDir;

/// What [`merge_runs`] made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MergedRuns {
    /// The runs merged, in the order given.
    pub runs: Vec<String>,
    /// Records written.
    pub events: u64,
    /// Marker records left out because another part had replayed the same marker.
    pub duplicate_markers: u64,
    /// Latest origin minus earliest (ns): how far apart the drivers' clocks started.
    pub origin_spread_ns: u64,
}

/// Merges `runs` into the new run directory `out`.
pub fn merge_runs(out: &Path, runs: &[PathBuf]) -> Result<MergedRuns, Error> {
    if runs.len() < 2 {
        return Err(Error::Options("merge-runs needs two runs or more".into()));
    }
    let mut manifests = Vec::new();
    for r in runs {
        let m = RunDir::open(r).manifest()?;
        if m.state == CompletionState::Running {
            return Err(Error::Options(format!(
                "{}: still running (process {})",
                r.display(),
                m.pid
            )));
        }
        let origin = m.origin.ok_or_else(|| {
            Error::Options(format!("{}: the run's clock never started", r.display()))
        })?;
        manifests.push((m, origin));
    }
    let base = manifests.iter().map(|(_, o)| *o).min().unwrap_or_default();
    let latest = manifests.iter().map(|(_, o)| *o).max().unwrap_or_default();
    let rd = RunDir::create(out)?;
    let path = out.join("events.jsonl");
    let mut w = BufWriter::new(fs_err::File::create(&path)?);
    let mut seen_markers: HashSet<u64> = HashSet::new();
    let (mut events, mut duplicate_markers) = (0u64, 0u64);
    for (r, (_, origin)) in runs.iter().zip(&manifests) {
        let shift = u64::try_from(origin.duration_since(base).as_nanos()).unwrap_or(0);
        let file = r.join("events.jsonl");
        let reader = BufReader::new(fs_err::File::open(&file)?);
        for (i, line) in reader.lines().enumerate() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            // The file named with the line: the parser's own position is within the line.
            let mut v: Value = serde_json::from_str(&line).map_err(|source| Error::Json {
                file: PathBuf::from(format!("{}:{}", file.display(), i + 1)),
                source,
            })?;
            if v["op"] == "marker"
                && let Some(id) = v["id"].as_u64()
                && !seen_markers.insert(id)
            {
                duplicate_markers += 1;
                continue;
            }
            for k in ["intended", "dispatched", "started", "completed"] {
                if let Some(t) = v[k].as_u64() {
                    v[k] = json!(t + shift);
                }
            }
            if let Some(phases) = v["phases"].as_array_mut() {
                for p in phases {
                    if let Some(t) = p["at"].as_u64() {
                        p["at"] = json!(t + shift);
                    }
                }
            }
            serde_json::to_writer(&mut w, &v).map_err(std::io::Error::other)?;
            w.write_all(b"\n")?;
            events += 1;
        }
    }
    w.flush()?;
    let (first, _) = &manifests[0];
    let mut m = first.clone();
    m.run_id = format!(
        "merged-{}",
        manifests
            .iter()
            .map(|(m, _)| m.run_id.as_str())
            .collect::<Vec<_>>()
            .join("+")
    );
    m.origin = Some(base);
    m.started = manifests
        .iter()
        .map(|(m, _)| m.started)
        .min()
        .unwrap_or(m.started);
    m.finished = manifests.iter().filter_map(|(m, _)| m.finished).max();
    m.pid = std::process::id();
    let bad: Vec<String> = runs
        .iter()
        .zip(&manifests)
        .filter(|(_, (m, _))| m.state != CompletionState::Complete)
        .map(|(r, (m, _))| {
            format!(
                "{}: {}{}",
                r.display(),
                m.state,
                m.reason
                    .as_deref()
                    .map(|s| format!(" ({s})"))
                    .unwrap_or_default()
            )
        })
        .collect();
    m.state = manifests
        .iter()
        .map(|(m, _)| m.state)
        .find(|s| *s != CompletionState::Complete)
        .unwrap_or(CompletionState::Complete);
    m.reason = (!bad.is_empty()).then(|| format!("merged runs not complete: {}", bad.join("; ")));
    m.trace.path = format!(
        "merged: {}",
        manifests
            .iter()
            .map(|(m, _)| m.trace.path.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    m.options = json!({
        "merged_from": runs.iter().map(|r| r.display().to_string()).collect::<Vec<_>>(),
        "options": manifests.iter().map(|(m, _)| m.options.clone()).collect::<Vec<_>>(),
    });
    rd.write_manifest(&m)?;
    Ok(MergedRuns {
        runs: runs.iter().map(|r| r.display().to_string()).collect(),
        events,
        duplicate_markers,
        origin_spread_ns: u64::try_from(latest.duration_since(base).as_nanos()).unwrap_or(0),
    })
}
