//! Run identity: which run a directory holds and what it measured — its id, the trace it
//! replayed (by hash; for a part of a split trace, which part of which trace; for a generated
//! trace, the model it came from), the speed, the provider and its settings, and for a merged
//! run its parts — and the one rule deciding whether runs may be combined ([`combinable`]).
//!
//! Everything is derived from `manifest.json` ([`RunIdentity::of`]); nothing is stored twice.
//! Runs are combined for three purposes, each with its own rule (docs/run-dir.md, *Run
//! identity*):
//! - **merge** (`merge-runs`): the runs of the parts of one `trace split`, every part once, at
//!   one speed, on one provider. Anything else would count events twice (the same trace, the
//!   same run) or put unrelated events on one clock.
//! - **points** of one capacity curve (`sweep`, `capacity`, `analyze capacity`): one trace —
//!   or one model generated at several rates — on one provider with one configuration (the
//!   seed aside); the speed is what varies.
//! - **compare**: one trace, unless compared by op type only; every other difference is
//!   `compare`'s to report, not to refuse.
//!
//! A refusal names both runs and the field that differs ([`CombineError`]).

use std::path::{Path, PathBuf};

use serde_json::Value;
use trace_format::Header;
use trace_format::rewrite::IoRate;
use trace_format::split_part::{self, SplitPart};

use crate::rundir::Manifest;

/// What a run is, for deciding what it may be combined with.
#[derive(Debug, Clone, PartialEq)]
pub struct RunIdentity {
    /// `manifest.run_id`.
    pub run_id: String,
    /// SHA-256 of the trace replayed (of a merged run: of the trace its parts were split
    /// from).
    pub trace_sha256: String,
    /// The trace is a part of a split trace (`trace split`).
    pub split: Option<SplitPart>,
    /// The trace was generated (`synth`) at a target rate: the generator, seed and
    /// parameters, the target's rate and the host count solved from it left out — the same
    /// for every rate of one model.
    pub generated: Option<String>,
    /// Replay speed (`options.speed`, 1 when absent).
    pub speed: f64,
    /// What the speed did to `io_phase` rates (`options.io_rate`: `keep` when absent).
    pub io_rate: IoRate,
    /// Provider name.
    pub provider: String,
    /// Provider configuration, without its `seed`.
    pub provider_config: Value,
    /// A single run or a merge of runs.
    pub kind: RunKind,
}

/// A single run, or one merged from the runs of a split trace's parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunKind {
    /// One `run`.
    Single,
    /// Made by `merge-runs`.
    Merged {
        /// The parts' run ids.
        parts: Vec<String>,
    },
}

impl RunIdentity {
    /// The identity a manifest records.
    pub fn of(m: &Manifest) -> Self {
        let mut id = Self::planned(
            &m.trace.sha256,
            &m.trace.header,
            m.options["speed"].as_f64().unwrap_or(1.0),
            &m.provider.name,
            &m.provider.config,
        );
        id.run_id = m.run_id.clone();
        id.io_rate = serde_json::from_value(m.options["io_rate"].clone()).unwrap_or_default();
        if let Some(x) = &m.merged {
            id.kind = RunKind::Merged {
                parts: x.parts.iter().map(|p| p.run_id.clone()).collect(),
            };
        }
        id
    }

    /// The identity a run of the trace (its file's SHA-256 and its header) at `speed` on a
    /// provider with this name and configuration will have, before it runs (its run id is
    /// not known yet: empty).
    pub fn planned(
        trace_sha256: &str,
        header: &Header,
        speed: f64,
        provider: &str,
        config: &Value,
    ) -> Self {
        let mut provider_config = config.clone();
        if let Some(o) = provider_config.as_object_mut() {
            o.remove("seed");
        }
        let prov = &header.provenance;
        // A model generated at a target rate: the same model at every rate. The target's
        // rate and the host count solved from it are what a rate changes.
        let generated = match (&prov.generator, prov.parameters.get("target")) {
            (Some(g), Some(_)) => {
                let params: Vec<String> = prov
                    .parameters
                    .iter()
                    .filter(|(k, _)| *k != "hosts" && !k.starts_with("split"))
                    .map(|(k, v)| match (k.as_str(), v.split_once('=')) {
                        ("target", Some((op, _))) => format!("target={op}"),
                        _ => format!("{k}={v}"),
                    })
                    .collect();
                Some(format!(
                    "{g} seed {} {}",
                    prov.seed.map_or("none".to_owned(), |s| s.to_string()),
                    params.join(" ")
                ))
            }
            _ => None,
        };
        Self {
            run_id: String::new(),
            trace_sha256: trace_sha256.to_owned(),
            split: split_part::split_part(header),
            generated,
            speed,
            io_rate: IoRate::Keep,
            provider: provider.to_owned(),
            provider_config,
            kind: RunKind::Single,
        }
    }

    fn trace_text(&self) -> String {
        match &self.split {
            Some(s) => format!(
                "{} (part {} of {} of {})",
                self.trace_sha256, s.part, s.parts, s.of
            ),
            None => self.trace_sha256.clone(),
        }
    }
}

/// What runs are combined for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// `merge-runs`: the parts of one split trace into one run.
    Merge,
    /// Points of one capacity curve (`sweep`, `capacity`, `analyze capacity`).
    Points,
    /// `analyze compare`; `by_op_type` admits runs of different traces.
    Compare {
        /// Op types are compared, whatever the traces.
        by_op_type: bool,
    },
}

impl std::fmt::Display for Purpose {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Purpose::Merge => "merged",
            Purpose::Points => "points of one capacity curve",
            Purpose::Compare { .. } => "compared",
        })
    }
}

/// Why runs may not be combined.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CombineError {
    /// The same run twice (one directory, or a copy: the same run id).
    #[error("{a} and {b} are the same run (run id {run_id}): it would count twice if {purpose}")]
    SameRun {
        /// One run directory.
        a: PathBuf,
        /// The other.
        b: PathBuf,
        /// Their run id.
        run_id: String,
        /// What they were to be combined for.
        purpose: Purpose,
    },
    /// A field of the two runs' identities differs where the purpose needs it equal (or is
    /// equal where it needs it to differ).
    #[error("{a} and {b} cannot be {purpose}: {field} {a_value} vs {b_value}; {why}")]
    Differ {
        /// One run directory.
        a: PathBuf,
        /// The other.
        b: PathBuf,
        /// The manifest field, e.g. `trace.sha256`, `options.speed`, `provider.config`.
        field: &'static str,
        /// Its value in `a`.
        a_value: String,
        /// Its value in `b`.
        b_value: String,
        /// What they were to be combined for.
        purpose: Purpose,
        /// Why that matters, and what would be combinable.
        why: String,
    },
    /// Runs of some parts of a split trace, not of all.
    #[error(
        "{a}: part(s) {} of the {parts} parts of trace {of} have no run here; merge the runs of \
         every part",
        missing.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
    )]
    MissingParts {
        /// The first run given.
        a: PathBuf,
        /// SHA-256 of the trace that was split.
        of: String,
        /// How many parts it was split into.
        parts: u32,
        /// The part numbers without a run.
        missing: Vec<u32>,
    },
}

/// Whether `runs` (directory, identity) may be combined for `purpose`: `Ok` when they may,
/// else the first pair that may not, naming both and the field. Directories are compared as
/// the files they are (through links and `..`).
pub fn combinable(
    purpose: Purpose,
    runs: &[(&Path, &RunIdentity)],
) -> Result<(), Box<CombineError>> {
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned());
    let reals: Vec<PathBuf> = runs.iter().map(|(p, _)| real(p)).collect();
    for (i, (pa, a)) in runs.iter().enumerate() {
        for (j, (pb, b)) in runs.iter().enumerate().skip(i + 1) {
            // A planned run has no id yet (empty).
            let same = (!a.run_id.is_empty() && a.run_id == b.run_id) || reals[i] == reals[j];
            // Comparing a run with itself is a sanity check, not a double count.
            if same && !matches!(purpose, Purpose::Compare { .. }) {
                return Err(Box::new(CombineError::SameRun {
                    a: pa.to_path_buf(),
                    b: pb.to_path_buf(),
                    run_id: a.run_id.clone(),
                    purpose,
                }));
            }
            pair(purpose, pa, a, pb, b)?;
        }
    }
    if purpose == Purpose::Merge
        && let Some((p0, first)) = runs.first()
        && let Some(s) = &first.split
    {
        let missing: Vec<u32> = (1..=s.parts)
            .filter(|n| {
                !runs
                    .iter()
                    .any(|(_, r)| r.split.as_ref().map(|x| x.part) == Some(*n))
            })
            .collect();
        if !missing.is_empty() {
            return Err(Box::new(CombineError::MissingParts {
                a: p0.to_path_buf(),
                of: s.of.clone(),
                parts: s.parts,
                missing,
            }));
        }
    }
    Ok(())
}

/// The rule of `purpose` for one pair.
fn pair(
    purpose: Purpose,
    pa: &Path,
    a: &RunIdentity,
    pb: &Path,
    b: &RunIdentity,
) -> Result<(), Box<CombineError>> {
    let differ = |field: &'static str, av: String, bv: String, why: &str| {
        Err(Box::new(CombineError::Differ {
            a: pa.to_path_buf(),
            b: pb.to_path_buf(),
            field,
            a_value: av,
            b_value: bv,
            purpose,
            why: why.to_owned(),
        }))
    };
    match purpose {
        Purpose::Merge => {
            if a.trace_sha256 == b.trace_sha256 {
                return differ(
                    "trace.sha256",
                    a.trace_sha256.clone(),
                    "the same".into(),
                    "runs of one trace replay the same events: merged, every event would count \
                     twice (merge-runs merges the runs of the parts of one `trace split`)",
                );
            }
            let parts_of_one = match (&a.split, &b.split) {
                (Some(x), Some(y)) => x.of == y.of && x.parts == y.parts && x.part != y.part,
                _ => false,
            };
            if !parts_of_one {
                return differ(
                    "trace",
                    a.trace_text(),
                    b.trace_text(),
                    "merge-runs merges the runs of the parts of one `trace split` (each part \
                     once), not runs of unrelated traces",
                );
            }
            if a.speed != b.speed {
                return differ(
                    "options.speed",
                    a.speed.to_string(),
                    b.speed.to_string(),
                    "parts replayed at different speeds are not one replay of the trace; run \
                     every part at one speed",
                );
            }
            if a.provider != b.provider {
                return differ(
                    "provider.name",
                    a.provider.clone(),
                    b.provider.clone(),
                    "parts replayed against different providers are not one system under test",
                );
            }
            if a.io_rate != b.io_rate {
                return differ(
                    "options.io_rate",
                    a.io_rate.name().into(),
                    b.io_rate.name().into(),
                    "parts whose I/O rates the speed treated differently are not one replay",
                );
            }
        }
        Purpose::Points => {
            let same_workload = a.trace_sha256 == b.trace_sha256
                || (a.generated.is_some() && a.generated == b.generated);
            if !same_workload {
                return differ(
                    "trace.sha256",
                    a.trace_text(),
                    b.trace_text(),
                    "the points of one capacity curve replay one trace (or one model at \
                     several rates); keep each trace's runs in a directory of their own",
                );
            }
            if a.provider != b.provider {
                return differ(
                    "provider.name",
                    a.provider.clone(),
                    b.provider.clone(),
                    "the points of one capacity curve measure one system",
                );
            }
            if a.io_rate != b.io_rate {
                return differ(
                    "options.io_rate",
                    a.io_rate.name().into(),
                    b.io_rate.name().into(),
                    "the points of one capacity curve vary the speed with one treatment of \
                     I/O rates (--io-rate)",
                );
            }
            if a.provider_config != b.provider_config {
                return differ(
                    "provider.config",
                    config_difference(&a.provider_config, &b.provider_config),
                    config_difference(&b.provider_config, &a.provider_config),
                    "the points of one capacity curve measure one system with one setup",
                );
            }
        }
        Purpose::Compare { by_op_type } => {
            if !by_op_type && a.trace_sha256 != b.trace_sha256 {
                return differ(
                    "trace.sha256",
                    a.trace_text(),
                    b.trace_text(),
                    "the runs replayed different traces; compare them by op type only \
                     (--by-op-type) if that is what you mean",
                );
            }
        }
    }
    Ok(())
}

/// The first top-level key of `a` whose value differs in `b`, as `key=value` (the whole
/// value when it is not an object).
fn config_difference(a: &Value, b: &Value) -> String {
    if let (Some(x), Some(y)) = (a.as_object(), b.as_object()) {
        let keys = x.keys().chain(y.keys());
        for k in keys {
            if x.get(k) != y.get(k) {
                return format!("{k}={}", x.get(k).unwrap_or(&Value::Null));
            }
        }
    }
    a.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(run_id: &str, sha: &str, split: Option<(u32, u32)>, speed: f64) -> RunIdentity {
        RunIdentity {
            run_id: run_id.into(),
            trace_sha256: sha.into(),
            split: split.map(|(part, parts)| SplitPart {
                of: "whole".into(),
                part,
                parts,
            }),
            generated: None,
            speed,
            io_rate: IoRate::Keep,
            provider: "sim".into(),
            provider_config: serde_json::json!({"slowdown": 1.0}),
            kind: RunKind::Single,
        }
    }

    fn check(purpose: Purpose, runs: &[(&str, &RunIdentity)]) -> Result<(), Box<CombineError>> {
        let runs: Vec<(&Path, &RunIdentity)> =
            runs.iter().map(|(p, i)| (Path::new(*p), *i)).collect();
        combinable(purpose, &runs)
    }

    #[test]
    fn merge_takes_every_part_of_one_split_once_at_one_speed() {
        let (a, b) = (
            id("1", "pa", Some((1, 2)), 2.0),
            id("2", "pb", Some((2, 2)), 2.0),
        );
        check(Purpose::Merge, &[("a", &a), ("b", &b)]).expect("the two parts");
        let e = check(Purpose::Merge, &[("a", &a), ("a2", &a)]).expect_err("same run");
        assert!(matches!(*e, CombineError::SameRun { .. }), "{e}");
        let again = id("3", "pa", Some((1, 2)), 2.0);
        let e = check(Purpose::Merge, &[("a", &a), ("x", &again), ("b", &b)]).expect_err("twice");
        assert!(
            matches!(
                *e,
                CombineError::Differ {
                    field: "trace.sha256",
                    ..
                }
            ),
            "{e}"
        );
        let other = id("4", "zz", None, 2.0);
        let e = check(Purpose::Merge, &[("a", &a), ("o", &other)]).expect_err("unrelated");
        assert!(
            matches!(*e, CombineError::Differ { field: "trace", .. }),
            "{e}"
        );
        let slow = id("5", "pb", Some((2, 2)), 1.0);
        let e = check(Purpose::Merge, &[("a", &a), ("s", &slow)]).expect_err("speeds");
        assert!(
            matches!(
                *e,
                CombineError::Differ {
                    field: "options.speed",
                    ..
                }
            ),
            "{e}"
        );
        let three = id("6", "pc", Some((1, 3)), 2.0);
        let three_b = id("7", "pd", Some((3, 3)), 2.0);
        let e = check(Purpose::Merge, &[("x", &three), ("y", &three_b)]).expect_err("missing");
        assert!(
            matches!(&*e, CombineError::MissingParts { missing, parts: 3, .. } if *missing == [2]),
            "{e}"
        );
    }

    #[test]
    fn points_share_trace_provider_and_setup_and_may_differ_in_speed_and_seed() {
        let a = id("1", "t", None, 1.0);
        let b = id("2", "t", None, 2.0);
        check(Purpose::Points, &[("a", &a), ("b", &b)]).expect("speeds differ");
        let scaled = RunIdentity {
            io_rate: IoRate::Scale,
            ..b
        };
        let e = check(Purpose::Points, &[("a", &a), ("s", &scaled)]).expect_err("io rates");
        assert!(
            matches!(
                *e,
                CombineError::Differ {
                    field: "options.io_rate",
                    ..
                }
            ),
            "{e}"
        );
        let mut c = id("3", "t", None, 4.0);
        c.provider_config = serde_json::json!({"slowdown": 2.0});
        let e = check(Purpose::Points, &[("a", &a), ("c", &c)]).expect_err("setup");
        assert!(
            e.to_string()
                .contains("provider.config slowdown=1.0 vs slowdown=2.0"),
            "{e}"
        );
        let o = id("4", "u", None, 1.0);
        let e = check(Purpose::Points, &[("a", &a), ("o", &o)]).expect_err("trace");
        assert!(
            matches!(
                *e,
                CombineError::Differ {
                    field: "trace.sha256",
                    ..
                }
            ),
            "{e}"
        );
        // One model generated at two rates: two traces, one curve.
        let (mut g1, mut g2) = (id("5", "r1", None, 1.0), id("6", "r2", None, 1.0));
        g1.generated = Some("synth seed 1 model=m.yaml target=attach".into());
        g2.generated = g1.generated.clone();
        check(Purpose::Points, &[("g1", &g1), ("g2", &g2)]).expect("one model");
    }

    #[test]
    fn compare_refuses_other_traces_unless_by_op_type_and_admits_a_run_with_itself() {
        let a = id("1", "t", None, 1.0);
        let o = id("2", "u", None, 1.0);
        let strict = Purpose::Compare { by_op_type: false };
        check(strict, &[("a", &a), ("a", &a)]).expect("a run with itself");
        let e = check(strict, &[("a", &a), ("o", &o)]).expect_err("traces");
        assert!(e.to_string().contains("--by-op-type"), "{e}");
        check(
            Purpose::Compare { by_op_type: true },
            &[("a", &a), ("o", &o)],
        )
        .expect("by op");
    }

    #[test]
    fn a_generated_traces_identity_leaves_out_its_rate_and_hosts() {
        let mut h = Header::default();
        h.provenance.generator = Some("cnsreplay-synth 0.1.0".into());
        h.provenance.seed = Some(7);
        let p = &mut h.provenance.parameters;
        p.insert("model".into(), "m.yaml".into());
        p.insert("target".into(), "attach=10/s".into());
        p.insert("hosts".into(), "3".into());
        let c = serde_json::json!({"seed": 1, "x": 2});
        let a = RunIdentity::planned("s1", &h, 1.0, "sim", &c);
        let p = &mut h.provenance.parameters;
        p.insert("target".into(), "attach=20/s".into());
        p.insert("hosts".into(), "6".into());
        let b = RunIdentity::planned(
            "s2",
            &h,
            1.0,
            "sim",
            &serde_json::json!({"seed": 2, "x": 2}),
        );
        assert_eq!(a.generated, b.generated);
        assert_eq!(a.provider_config, b.provider_config, "the seed is left out");
        assert!(
            a.generated
                .as_deref()
                .is_some_and(|g| g.contains("target=attach"))
        );
    }
}
