//! What a `modify_volume` did to the I/O running on its volume: the I/O rate before and after
//! the class change, and how long after the change was asked for the new limit held.
//!
//! A tier change is only as good as the moment it takes effect, and the control plane's
//! "modified" says nothing about the data path: the claim can report the new class while the
//! volume still runs at the old rate, or the limit can bind before the API says so. So the
//! verdict comes from the I/O itself, iogen's interval logs (`io/ID.hlog`, one interval per
//! 200 ms of each `io_phase` unit on the volume), not from the operation's completion.
//!
//! Per modify: the I/O rate of each kind the class limits by IOPS (`read_iops`,
//! `write_iops`), in the [`WINDOW`] before the intended instant and in the [`WINDOW`] after
//! completion (cut at the next modify of the volume); and *holds after*: from the intended
//! instant to the end of the last 200 ms slot, up to the end of the after-window, whose rate
//! is above the limit (+[`TOLERANCE`], for interval edges); 0 when none is. A slot is 200 ms
//! of the run's axis counted from the intended instant; each interval's I/Os count in the
//! slot of its midpoint, summed over the volume's units. The first slot holds the I/O done
//! while the change was on its way, so a change that takes effect at once holds after one
//! slot (200 ms, the resolution).

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use trace_format::{IoKind, Op, OpType, TraceReader};

use crate::Result;
use crate::load::{Accumulator, Rec, Run};
use crate::phase_io::{self, PhaseUnit, io_kind_name};

/// The span before and after a modify whose I/O rate is reported.
pub const WINDOW: u64 = 2_000_000_000;
/// The slot the limit is judged in: iogen's interval.
pub const SLOT: u64 = 200_000_000;
/// How far above its limit a slot's rate may be and still count as holding it.
pub const TOLERANCE: f64 = 0.10;

/// One kind's rate around a modify.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct KindEffect {
    /// `read` or `write`.
    pub kind: String,
    /// The class's IOPS limit for the kind (`None`: the class does not limit it).
    pub limit: Option<u64>,
    /// I/Os per second in the window before the intended instant.
    pub before: Option<f64>,
    /// I/Os per second in the window after completion.
    pub after: Option<f64>,
}

/// What one modify did.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ModifyEffect {
    /// Trace event id.
    pub id: u64,
    /// The volume.
    pub volume: String,
    /// The class it moved to.
    pub class: String,
    /// `ok`, `failed`, …
    pub outcome: String,
    /// Intended instant, ns since the run origin.
    pub intended_ns: u64,
    /// completed − intended, ns.
    pub response_ns: u64,
    /// `io_phase` units on the volume with intervals around it.
    pub units: usize,
    /// Per kind with I/O.
    pub kinds: Vec<KindEffect>,
    /// From the intended instant to the end of the last slot (to the end of the
    /// after-window) above the class's IOPS limits, ns (0: none was); `None` when the class
    /// limits no kind by IOPS or there was no I/O after it to judge.
    pub holds_after_ns: Option<u64>,
}

#[derive(Default)]
struct Recs(HashMap<u64, (u64, u64, String)>);

impl Accumulator for Recs {
    fn add(&mut self, r: &Rec<'_>) {
        if r.op == OpType::ModifyVolume {
            self.0
                .insert(r.id, (r.intended, r.completed, format!("{:?}", r.outcome)));
        }
    }
    fn merge(&mut self, o: Self) {
        self.0.extend(o.0);
    }
}

fn iops_limit(params: &BTreeMap<String, String>, kind: IoKind) -> Option<u64> {
    let key = match kind {
        IoKind::Read => "read_iops",
        IoKind::Write => "write_iops",
        _ => return None,
    };
    params
        .get(key)
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&n| n > 0)
}

/// I/Os per slot (relative to `t0`, may be negative) of one kind over `units`.
fn slots(units: &[&PhaseUnit], kind: IoKind, t0: u64) -> BTreeMap<i64, u64> {
    let mut out = BTreeMap::new();
    for u in units {
        for iv in u.intervals.iter().filter(|iv| iv.kind == kind) {
            let rel = iv.mid_ns() as i128 - i128::from(t0);
            let slot = rel.div_euclid(i128::from(SLOT)) as i64;
            *out.entry(slot).or_insert(0) += iv.response.len();
        }
    }
    out
}

fn rate(slots: &BTreeMap<i64, u64>, from: i64, to: i64) -> Option<f64> {
    if to <= from {
        return None;
    }
    let n: u64 = slots.range(from..to).map(|(_, c)| c).sum();
    let have = slots.range(from..to).count();
    (have > 0).then(|| n as f64 / ((to - from) as f64 * SLOT as f64 / 1e9))
}

/// The effect of every `modify_volume` of a run on the I/O of its volume (empty when the
/// run has none); `None` when the run's trace (which says which volume each event is on)
/// is not where its manifest says.
pub fn effects(run: &Run) -> Result<Option<Vec<ModifyEffect>>> {
    let Some(trace) = run.trace_path() else {
        return Ok(None);
    };
    let reader = TraceReader::open(&trace)?;
    let classes = reader.header().attributes_classes.clone();
    let mut modifies = Vec::new();
    let mut phase_volume: HashMap<u64, String> = HashMap::new();
    for ev in reader.events() {
        let ev = ev?;
        match &ev.op {
            Op::ModifyVolume(m) => {
                modifies.push((ev.id, m.volume.to_string(), m.class.to_string()));
            }
            Op::IoPhase(p) => {
                phase_volume.insert(ev.id, p.volume.to_string());
            }
            _ => {}
        }
    }
    if modifies.is_empty() {
        return Ok(Some(Vec::new()));
    }
    let recs = run.scan(Recs::default)?;
    let units = phase_io::run_units(run)?;
    let mut out = Vec::new();
    for (i, (id, volume, class)) in modifies.iter().enumerate() {
        let Some((intended, completed, outcome)) = recs.0.get(id).cloned() else {
            continue;
        };
        // The after-window ends at the next modify of the same volume.
        let next = modifies[i + 1..]
            .iter()
            .find(|(_, v, _)| v == volume)
            .and_then(|(n, _, _)| recs.0.get(n).map(|r| r.0));
        let on: Vec<&PhaseUnit> = units
            .iter()
            .filter(|u| phase_volume.get(&u.id) == Some(volume))
            .filter(|u| {
                u.intervals.iter().any(|iv| {
                    iv.end_ns + WINDOW > intended && iv.start_ns < completed.max(intended) + WINDOW
                })
            })
            .collect();
        let before_from = -((WINDOW / SLOT) as i64);
        let after_from = (completed.saturating_sub(intended)).div_ceil(SLOT) as i64;
        let mut after_to = after_from + (WINDOW / SLOT) as i64;
        if let Some(n) = next {
            after_to = after_to.min((n.saturating_sub(intended) / SLOT) as i64);
        }
        let params = classes
            .iter()
            .find(|(k, _)| k.as_str() == class)
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        let mut kinds = Vec::new();
        let mut holds: Option<i64> = None;
        let mut judged = false;
        for kind in [IoKind::Read, IoKind::Write] {
            let s = slots(&on, kind, intended);
            if s.is_empty() {
                continue;
            }
            let limit = iops_limit(&params, kind);
            kinds.push(KindEffect {
                kind: io_kind_name(kind).to_owned(),
                limit,
                before: rate(&s, before_from, 0),
                after: rate(&s, after_from, after_to),
            });
            let Some(limit) = limit else { continue };
            if after_to <= 0 {
                continue;
            }
            let cap = limit as f64 * (1.0 + TOLERANCE) * SLOT as f64 / 1e9;
            let after: Vec<(i64, u64)> = s.range(0..after_to).map(|(k, c)| (*k, *c)).collect();
            if after.is_empty() {
                continue;
            }
            judged = true;
            // The end of the last slot above the limit (0: none was, it held at once).
            let last_over = after
                .iter()
                .filter(|(_, c)| *c as f64 > cap)
                .map(|(k, _)| k + 1)
                .max()
                .unwrap_or(0);
            holds = Some(holds.map_or(last_over, |h: i64| h.max(last_over)));
        }
        let holds_after_ns = holds.filter(|_| judged).map(|h| h as u64 * SLOT);
        out.push(ModifyEffect {
            id: *id,
            volume: volume.clone(),
            class: class.clone(),
            outcome: outcome.to_lowercase(),
            intended_ns: intended,
            response_ns: completed.saturating_sub(intended),
            units: on.len(),
            kinds,
            holds_after_ns,
        });
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_count_slots_that_have_io() {
        let s: BTreeMap<i64, u64> = [(-2, 400), (-1, 400), (0, 300), (1, 40), (2, 40)].into();
        // 800 I/Os over two 200 ms slots.
        assert_eq!(rate(&s, -2, 0), Some(2000.0));
        assert_eq!(rate(&s, 1, 3), Some(200.0));
        assert_eq!(rate(&s, 5, 7), None);
        assert_eq!(rate(&s, 3, 3), None);
    }

    #[test]
    fn only_positive_whole_iops_limit_a_kind() {
        let p: BTreeMap<String, String> = [
            ("write_iops".to_owned(), "200".to_owned()),
            ("read_iops".to_owned(), "unlimited".to_owned()),
        ]
        .into();
        assert_eq!(iops_limit(&p, IoKind::Write), Some(200));
        assert_eq!(iops_limit(&p, IoKind::Read), None);
        assert_eq!(iops_limit(&p, IoKind::Trim), None);
    }
}
