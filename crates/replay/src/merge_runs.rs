//! Run directories of one split trace (`trace split`, each part by its own driver from one
//! `--start-at` instant) as one run directory, so that `analyze` sees the whole trace.
//!
//! Why records and not summaries: percentiles do not add up (the p99 of three runs is not a
//! mean of their p99s). Every event's record is copied into one `events.jsonl`, its times
//! (`intended`, `dispatched`, `started`, `completed`, phase instants) moved onto the earliest
//! run's origin by the difference of the origins, so whatever `analyze` computes from the
//! merged directory is what one run holding all the events would give — its histograms are
//! built from the same values. A `marker` that every part replayed (`trace split` copies them)
//! is kept once.
//!
//! Only the runs of every part of one split, at one speed, on one provider, each once, are
//! merged ([`crate::identity`], purpose `Merge`): anything else would count events twice or
//! put unrelated events on one clock. The merged manifest is the whole trace's (`trace.sha256`
//! the split trace's, the speed the parts'), lists the parts (`merged`), and carries the worst
//! part's verdict (`merged.validity`, each check naming its part), so `analyze` refuses the
//! merged run as it refuses that part. There is no `summary.json`: the parts' are theirs.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Value, json};

use crate::Error;
use crate::identity::{Purpose, RunIdentity, combinable};
use crate::record::CompletionState;
use crate::record::{Validity, Verdict};
use crate::rundir::{Manifest, Merged, MergedPart, RunDir};

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
    let ids: Vec<RunIdentity> = manifests.iter().map(|(m, _)| RunIdentity::of(m)).collect();
    let pairs: Vec<(&Path, &RunIdentity)> = runs.iter().map(PathBuf::as_path).zip(&ids).collect();
    combinable(Purpose::Merge, &pairs)?;
    let labels = merged_labels(runs, &manifests)?;
    let mut validities = Vec::new();
    for r in runs {
        validities.push(part_validity(r)?);
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
    let mut m: Manifest = first.clone();
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
    m.labels = labels;
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
    // The whole trace: the one the parts were split from (checked above: every part).
    if let Some(s) = &ids[0].split {
        m.trace.sha256 = s.of.clone();
    }
    m.trace.header.provenance.parameters.retain(|k, _| {
        ![
            trace_format::split_part::PART,
            trace_format::split_part::PARTS,
            trace_format::split_part::OF,
        ]
        .contains(&k.as_str())
    });
    // The parts' common options (one speed: checked above), and which runs they were.
    if let Some(o) = m.options.as_object_mut() {
        o.insert(
            "merged_from".into(),
            json!(
                runs.iter()
                    .map(|r| r.display().to_string())
                    .collect::<Vec<_>>()
            ),
        );
    }
    m.merged = Some(Merged {
        parts: runs
            .iter()
            .zip(&manifests)
            .zip(&validities)
            .map(|((r, (pm, _)), v)| MergedPart {
                path: r.display().to_string(),
                run_id: pm.run_id.clone(),
                trace_sha256: pm.trace.sha256.clone(),
                speed: pm.options["speed"].as_f64().unwrap_or(1.0),
                state: pm.state,
                verdict: v.as_ref().map(|v| v.verdict),
                options: pm.options.clone(),
            })
            .collect(),
        validity: worst_validity(runs, &validities),
    });
    rd.write_manifest(&m)?;
    Ok(MergedRuns {
        runs: runs.iter().map(|r| r.display().to_string()).collect(),
        events,
        duplicate_markers,
        origin_spread_ns: u64::try_from(latest.duration_since(base).as_nanos()).unwrap_or(0),
    })
}

/// A part's verdict from its `summary.json`; `None` when it has none (a crashed run, or one
/// from before verdicts). A summary that exists and does not parse is an error.
fn part_validity(run: &Path) -> Result<Option<Validity>, Error> {
    if !run.join("summary.json").exists() {
        return Ok(None);
    }
    Ok(RunDir::open(run).summary()?.validity)
}

/// How bad a verdict is for `analyze`: admitted ones first, then the refused in the order
/// the engine ranks failed checks (`engine-bound`, `failed`, `incomplete`).
fn severity(v: Verdict) -> u8 {
    match v {
        Verdict::Valid => 0,
        Verdict::NotJudged => 1,
        Verdict::PartlyValid => 2,
        Verdict::Imprecise => 3,
        Verdict::EngineBound => 4,
        Verdict::Failed => 5,
        Verdict::Incomplete => 6,
    }
}

/// The worst part's verdict, each check's message prefixed with that part's directory; for
/// a `partly-valid` or `imprecise` worst, the op types any such part judged imprecise are
/// imprecise in the merged run too (and with none left valid, the merged run is imprecise).
fn worst_validity(runs: &[PathBuf], validities: &[Option<Validity>]) -> Option<Validity> {
    let (idx, worst) = validities
        .iter()
        .enumerate()
        .filter_map(|(i, v)| v.as_ref().map(|v| (i, v)))
        // The first of equally bad parts.
        .rev()
        .max_by_key(|(_, v)| severity(v.verdict))?;
    let run = runs[idx].display();
    let mut merged = worst.clone();
    for c in &mut merged.checks {
        c.message = format!("{run}: {}", c.message);
    }
    for o in merged.ops.iter_mut().filter(|o| !o.evidence.is_empty()) {
        o.evidence = format!("{run}: {}", o.evidence);
    }
    let sized = |v: Verdict| matches!(v, Verdict::PartlyValid | Verdict::Imprecise);
    if sized(merged.verdict) {
        for (i, (r, v)) in runs.iter().zip(validities).enumerate() {
            let Some(v) = v.as_ref().filter(|v| i != idx && sized(v.verdict)) else {
                continue;
            };
            for o in v.imprecise_ops() {
                let mut o = o.clone();
                o.evidence = format!("{}: {}", r.display(), o.evidence);
                match merged.ops.iter_mut().find(|x| x.op == o.op) {
                    Some(x) if x.verdict == Verdict::Valid => *x = o,
                    Some(_) => {}
                    None => merged.ops.push(o),
                }
            }
        }
        // Every op type imprecise in some part: the merged run is imprecise as a whole.
        if !merged.ops.iter().any(|o| o.verdict == Verdict::Valid) {
            merged.verdict = Verdict::Imprecise;
        }
    }
    Some(merged)
}

/// The merged run's labels: every label of every part. Parts of one run carry the same
/// labels (`run --label` on each driver); a key with two values means the parts measured
/// different builds, and is refused naming both parts.
fn merged_labels(
    runs: &[PathBuf],
    manifests: &[(Manifest, jiff::Timestamp)],
) -> Result<crate::rundir::Labels, Error> {
    let mut out = crate::rundir::Labels::new();
    let mut from: std::collections::BTreeMap<&str, &Path> = Default::default();
    for (r, (m, _)) in runs.iter().zip(manifests) {
        for (k, v) in &m.labels {
            match out.get(k) {
                Some(w) if w != v => {
                    return Err(Error::Options(format!(
                        "the parts do not belong together: label {k} is {w:?} in {} but {v:?} \
                         in {}",
                        from[k.as_str()].display(),
                        r.display()
                    )));
                }
                Some(_) => {}
                None => {
                    out.insert(k.clone(), v.clone());
                    from.insert(k, r);
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Check, OpValidity};

    fn validity(verdict: Verdict, bound: &[&str]) -> Validity {
        Validity {
            verdict,
            checks: vec![Check {
                check: "start_lateness.p99".into(),
                passed: verdict == Verdict::Valid,
                judged: true,
                fails_as: Verdict::EngineBound,
                value: 2.0,
                limit: 1.0,
                unit: "ns".into(),
                message: "start lateness p99 2 ns".into(),
            }],
            ops: ["attach", "cordon_node", "resize"]
                .iter()
                .map(|op| OpValidity {
                    op: (*op).into(),
                    median_ns: 1,
                    p99_limit_ns: 1,
                    p999_limit_ns: 1,
                    verdict: if bound.contains(op) {
                        Verdict::Imprecise
                    } else {
                        Verdict::Valid
                    },
                    tool_ratio: None,
                    evidence: if bound.contains(op) {
                        format!("{op} late")
                    } else {
                        String::new()
                    },
                })
                .collect(),
            ..Validity::default()
        }
    }

    #[test]
    fn the_worst_part_gives_the_verdict_named_by_that_part() {
        let runs = [PathBuf::from("a"), PathBuf::from("b"), PathBuf::from("c")];
        let v = [
            Some(validity(Verdict::Valid, &[])),
            Some(validity(Verdict::EngineBound, &[])),
            None,
        ];
        let w = worst_validity(&runs, &v).expect("a verdict");
        assert_eq!(w.verdict, Verdict::EngineBound);
        assert_eq!(w.checks[0].message, "b: start lateness p99 2 ns");
        assert_eq!(worst_validity(&runs, &[None, None, None]), None);
    }

    #[test]
    fn partly_valid_parts_leave_every_op_type_any_of_them_could_not_measure() {
        let runs = [PathBuf::from("a"), PathBuf::from("b"), PathBuf::from("c")];
        let v = [
            Some(validity(Verdict::PartlyValid, &["cordon_node"])),
            Some(validity(Verdict::Valid, &[])),
            Some(validity(Verdict::PartlyValid, &["resize"])),
        ];
        let w = worst_validity(&runs, &v).expect("a verdict");
        assert_eq!(w.verdict, Verdict::PartlyValid);
        let bound: Vec<(&str, &str)> = w
            .ops_judged(Verdict::Imprecise)
            .map(|o| (o.op.as_str(), o.evidence.as_str()))
            .collect();
        assert_eq!(
            bound,
            [
                ("cordon_node", "a: cordon_node late"),
                ("resize", "c: resize late")
            ]
        );
        assert_eq!(w.valid_ops(), "attach");
        // Between them the parts leave no op type valid: the merged run is imprecise.
        let v = [
            Some(validity(Verdict::PartlyValid, &["cordon_node", "attach"])),
            Some(validity(Verdict::PartlyValid, &["resize"])),
        ];
        let w = worst_validity(&runs[..2], &v).expect("a verdict");
        assert_eq!(w.verdict, Verdict::Imprecise, "{w:#?}");
    }
}
