//! What differs between the compared runs besides the measurements: manifest fields a user
//! sets, and labels; printed under the verdicts so a change of setup is not read as a
//! regression.

use std::collections::{BTreeMap, BTreeSet};

use crate::stats::load::Run;

/// Manifest fields (flattened, `options.speed`) whose values differ between runs, other than
/// what differs between any two runs (seed, start time, run id, pid, the host's state) and
/// what each run computes rather than a user sets (the lateness limits it was held to,
/// `options.validity.limits`: scaled from its own measured latencies), with the base side's
/// and the new side's values.
pub(super) fn manifest_differences(base: &[Run], new: &[Run]) -> Vec<String> {
    fn flatten(prefix: &str, v: &serde_json::Value, out: &mut BTreeMap<String, String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    flatten(&key, x, out);
                }
            }
            other => {
                out.insert(prefix.to_owned(), other.to_string());
            }
        }
    }
    const SAME_FOR_NO_RUN: [&str; 16] = [
        "options.validity.limits",
        "run_id",
        "merged",
        "options.merged_from",
        "seed",
        "options.seed",
        "options.start_at",
        "started",
        "origin",
        "finished",
        "pid",
        "state",
        "reason",
        "trace.path",
        "provider.environment",
        "labels",
    ];
    let fields = |r: &Run| {
        let mut out = BTreeMap::new();
        if let Ok(v) = serde_json::to_value(&r.manifest) {
            flatten("", &v, &mut out);
        }
        out.retain(|k, _| {
            !SAME_FOR_NO_RUN
                .iter()
                .any(|s| k == s || k.starts_with(&format!("{s}.")))
                && !k.starts_with("host.")
        });
        out
    };
    let (fb, fnew): (Vec<_>, Vec<_>) = (
        base.iter().map(fields).collect(),
        new.iter().map(fields).collect(),
    );
    let keys: BTreeSet<&String> = fb.iter().chain(&fnew).flat_map(|m| m.keys()).collect();
    let values = |side: &[BTreeMap<String, String>], k: &String| -> BTreeSet<String> {
        side.iter()
            .map(|m| m.get(k).cloned().unwrap_or_else(|| "(absent)".to_owned()))
            .collect()
    };
    let join = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(" | ");
    keys.into_iter()
        .filter_map(|k| {
            let (vb, vn) = (values(&fb, k), values(&fnew, k));
            (vb.len() > 1 || vn.len() > 1 || vb != vn)
                .then(|| format!("{k}: {} vs {}", join(&vb), join(&vn)))
        })
        .collect()
}

/// Labels whose values differ between the sides or within one, `build: 1041 vs 1042` (a
/// side's several values joined by ` | `; `(absent)` for a run without the label).
pub(super) fn label_differences(base: &[Run], new: &[Run]) -> Vec<String> {
    let keys: BTreeSet<&String> = base
        .iter()
        .chain(new)
        .flat_map(|r| r.manifest.labels.keys())
        .collect();
    let values = |side: &[Run], k: &String| -> BTreeSet<String> {
        side.iter()
            .map(|r| {
                r.manifest
                    .labels
                    .get(k)
                    .cloned()
                    .unwrap_or_else(|| "(absent)".to_owned())
            })
            .collect()
    };
    let join = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(" | ");
    keys.into_iter()
        .filter_map(|k| {
            let (vb, vn) = (values(base, k), values(new, k));
            (vb.len() > 1 || vn.len() > 1 || vb != vn)
                .then(|| format!("{k}: {} vs {}", join(&vb), join(&vn)))
        })
        .collect()
}
