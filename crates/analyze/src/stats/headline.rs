//! The report's headline: the run's I/O with and without a snapshot in flight, per I/O kind,
//! and its IOPS (the numbers; `render/headline.rs` writes them as HTML).
//!
//! The all-kinds figure is the run's own (`summary.json` `io`, what `cnsreplay run` prints);
//! it is not recomputed. The per-kind split repeats the run's rule with the run's own code:
//! snapshot windows are the `[started, completed]` of `snapshot`/`group_snapshot` records put
//! into a [`replay::SnapshotTimeline`], an `io_phase` interval goes to the "with" side when
//! [`replay::SnapshotTimeline::overlaps`] says so (intervals placed on the run's axis by
//! [`crate::phase_io`], as the providers place them), and a single `io` event by its
//! `during_snapshot` flag (successful ones only, as the run's sink). The kind of a single
//! `io` event comes from the trace; without the trace only the all-kinds row is shown.
//!
//! IOPS of a kind: its I/Os over the span they ran in (first interval start or intended
//! instant to last interval end or completion, at least one second).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use replay::{IoSplit, Outcome, Percentiles, SnapshotTimeline};
use trace_format::{IoKind, Op, OpType, TraceReader};

use crate::Result;
use crate::stats::hist;
use crate::stats::load::{Accumulator, Rec, Run};
use crate::stats::phase_io::{IO_KINDS, PhaseUnit, io_kind_name};

/// One row of the headline table: one I/O kind (or all kinds).
#[derive(Debug, Clone, PartialEq)]
pub struct KindRow {
    /// `read`, `write`, `trim`, `flush`, or `all`.
    pub kind: String,
    /// I/Os completed.
    pub ios: u64,
    /// I/Os per second over the span they ran in.
    pub iops: f64,
    /// Response times with no snapshot in flight.
    pub without: Percentiles,
    /// Response times with a snapshot in flight.
    pub with: Percentiles,
}

/// The headline of one run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Headline {
    /// The run's own split (`summary.json` `io`), when it measured any I/O.
    pub run: Option<IoSplit>,
    /// Per kind, then `all` (empty when the run has no `io`/`io_phase` I/O).
    pub kinds: Vec<KindRow>,
    /// Why a part is missing.
    pub notes: Vec<String>,
}

/// What a scan gathers: snapshot windows and successful single `io` events.
#[derive(Debug, Default)]
struct Acc {
    snaps: Vec<(u64, u64)>,
    /// (id, intended, completed, response, during a snapshot).
    io: Vec<(u64, u64, u64, u64, bool)>,
}

impl Accumulator for Acc {
    fn add(&mut self, r: &Rec<'_>) {
        match r.op {
            OpType::Snapshot | OpType::GroupSnapshot => self.snaps.push((r.started, r.completed)),
            OpType::Io if r.outcome == Outcome::Ok => {
                self.io
                    .push((r.id, r.intended, r.completed, r.response, r.during_snapshot));
            }
            _ => {}
        }
    }

    fn merge(&mut self, o: Self) {
        self.snaps.extend(o.snaps);
        self.io.extend(o.io);
    }
}

#[derive(Default)]
struct Side {
    h: [Option<Histogram<u64>>; 2],
    span: Option<(u64, u64)>,
}

impl Side {
    fn add(&mut self, with: bool, h: &Histogram<u64>, from: u64, to: u64) {
        let dst = self.h[usize::from(with)].get_or_insert_with(hist::latency);
        hist::add_saturating(dst, h);
        self.widen(from, to);
    }

    fn add_one(&mut self, with: bool, v: u64, from: u64, to: u64) {
        hist::record(&mut self.h[usize::from(with)], v);
        self.widen(from, to);
    }

    fn widen(&mut self, from: u64, to: u64) {
        self.span = Some(match self.span {
            Some((a, b)) => (a.min(from), b.max(to)),
            None => (from, to),
        });
    }

    fn row(&self, kind: &str) -> Option<KindRow> {
        let (a, b) = self.span?;
        let pct = |h: &Option<Histogram<u64>>| hist::pct(h.as_ref());
        let (without, with) = (pct(&self.h[0]), pct(&self.h[1]));
        let ios = without.count + with.count;
        if ios == 0 {
            return None;
        }
        let secs = ((b.saturating_sub(a)) as f64 / 1e9).max(1.0);
        Some(KindRow {
            kind: kind.to_owned(),
            ios,
            iops: ios as f64 / secs,
            without,
            with,
        })
    }
}

fn kind_index(k: IoKind) -> usize {
    IO_KINDS.iter().position(|&x| x == k).unwrap_or(0)
}

/// I/O kind per trace event id (`u8::MAX`: not a single `io` event); ids are dense.
fn io_kinds(run: &Run, max_id: u64) -> Result<Option<Vec<u8>>> {
    let Some(path) = run.trace_path() else {
        return Ok(None);
    };
    let mut out = vec![u8::MAX; usize::try_from(max_id).unwrap_or(0).saturating_add(1)];
    for ev in TraceReader::open(&path)?.events() {
        let ev = ev?;
        if ev.id > max_id {
            break;
        }
        if let Op::Io(io) = &ev.op
            && let Some(slot) = usize::try_from(ev.id).ok().and_then(|i| out.get_mut(i))
        {
            *slot = kind_index(io.kind) as u8;
        }
    }
    Ok(Some(out))
}

/// The headline of a run whose `io_phase` units are `units` (see the module docs).
pub fn headline(run: &Run, units: &[PhaseUnit]) -> Result<Headline> {
    let acc = run.scan(Acc::default)?;
    let mut out = Headline {
        run: replay::RunDir::open(&run.path)
            .summary()
            .ok()
            .map(|s| s.io)
            .filter(|s| s.with_snapshot.count + s.without_snapshot.count > 0),
        ..Headline::default()
    };
    let timeline = SnapshotTimeline::default();
    for &(s, e) in &acc.snaps {
        let i = timeline.begin(s);
        timeline.end(i, e);
    }
    let mut kinds: [Side; 4] = Default::default();
    let mut all = Side::default();
    for iv in units.iter().flat_map(|u| &u.intervals) {
        let with = timeline.overlaps(iv.start_ns, iv.end_ns);
        kinds[kind_index(iv.kind)].add(with, &iv.response, iv.start_ns, iv.end_ns);
        all.add(with, &iv.response, iv.start_ns, iv.end_ns);
    }
    if !acc.io.is_empty() {
        let max_id = acc.io.iter().map(|r| r.0).max().unwrap_or(0);
        let by_id = io_kinds(run, max_id)?;
        if by_id.is_none() {
            out.notes.push(format!(
                "single io events are not split by kind: the trace {} is not where the \
                 manifest says (or has changed)",
                run.manifest.trace.path
            ));
        }
        for &(id, intended, completed, response, during) in &acc.io {
            all.add_one(during, response, intended, completed);
            let k = by_id
                .as_ref()
                .and_then(|v| v.get(usize::try_from(id).ok()?).copied())
                .filter(|&k| k != u8::MAX);
            if let Some(k) = k {
                kinds[usize::from(k)].add_one(during, response, intended, completed);
            }
        }
    }
    for (k, side) in IO_KINDS.iter().zip(&kinds) {
        out.kinds.extend(side.row(io_kind_name(*k)));
    }
    out.kinds.extend(all.row("all"));
    Ok(out)
}

/// Per-kind rows keyed by kind, for tests and callers that look one up.
pub fn by_kind(h: &Headline) -> BTreeMap<&str, &KindRow> {
    h.kinds.iter().map(|r| (r.kind.as_str(), r)).collect()
}
