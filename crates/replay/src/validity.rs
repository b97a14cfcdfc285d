//! Run validity: whether a run measured the system under test, or the tool limited it.
//!
//! Every run ends with a [`Verdict`] and the [`Check`]s behind it (`summary.json`,
//! `validity`). The engine's own delay is measured where the provider sees it: **start
//! lateness** = the instant the provider call began − the intended instant, over the events
//! that waited neither for a dependency nor for a concurrency slot (dispatch lateness and
//! pickup are its parts); **resume lateness** for the events that did wait = the call − the
//! later of the intended instant and the release of what they waited for (the system's wait
//! is not the engine's, the delay after it is); **completion lateness** = how late the
//! runtime runs a task woken from outside it (module `probe`). The **dispatch rate** is
//! judged from when the runtime began each event (`dispatched + pickup`): per window of
//! intended time, the mean intended instant and the mean engine delay (begun − intended) of
//! its events; between two windows the engine kept up at `Δ intended / Δ begun` of the
//! intended rate. Means make one stalled event count for little, and a constant delay for
//! nothing: only a delay that *grows* is a rate shortfall. Windows with fewer than
//! `window_events` events are skipped (low rates rely on start lateness).
//!
//! Lateness limits scale with what is measured ([`ValidityOptions::limits`]): 1 % of a
//! reference latency (given, or the smallest median service time), clamped to [20 µs, 10 ms],
//! ten times that for a p99.9. A percentile with fewer than 100 values behind it (1000 for a
//! p99.9) is *not judged*, and says so: with 44 events a p99 is one hiccup.
//!
//! The tool's delay matters in proportion to what it delays, so each op type is judged on its
//! own ([`ops`]) by the size of what the tool could have done to its figures: the tool error
//! bound of every percentile it reports (module `bound`) within `tool` (5 %) of the figure is
//! `valid`, beyond it `imprecise`, with the size (without a bound: its lateness against 1 % of
//! *its* median). A lateness check past its limit fails as `imprecise`, not `engine-bound`:
//! what it did to the figures is in their bounds, and those decide.
//!
//! The verdict: `incomplete` when the run stopped early; `failed` when every provider
//! operation failed (nothing but errors was measured); `engine-bound` when the engine did not
//! keep the schedule (dispatch rate over the run or a window), its workers were saturated, the
//! provider's client throttled, or a stream dropped, reordered or issued late; else from the
//! op types: `partly-valid` when some are `valid` and some `imprecise`, `imprecise` when none
//! is `valid`, `valid` when all are; `not-judged` when nothing was judged. Defaults and the
//! reasoning behind them are in `docs/replay.md` (Run validity).

use crate::record::stream::StreamFidelity;
use crate::record::{ClientThrottling, CompletionState, Percentiles};
use trace_format::units::fmt_ms;

pub mod host;
mod ops;
mod options;
pub use crate::record::verdict::{
    Check, DispatchRate, Limits, OpValidity, RateWindow, Validity, Verdict,
};
pub use ops::IO_PHASE_IO;
pub use options::ValidityOptions;

/// Per window: events, and sums of their intended instants and engine delays (ns).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct WindowSums {
    pub n: u64,
    pub intended: u128,
    pub delay: u128,
}

impl WindowSums {
    fn means(self) -> (f64, f64) {
        let n = self.n as f64;
        (self.intended as f64 / n, self.delay as f64 / n)
    }
}

/// Achieved ÷ intended rate between two windows' mean instants (1 when they coincide).
fn ratio(a: WindowSums, b: WindowSums) -> f64 {
    let ((ia, da), (ib, db)) = (a.means(), b.means());
    let span = ib - ia;
    let begun = (ib + db) - (ia + da);
    if span <= 0.0 || begun <= span {
        1.0
    } else {
        span / begun
    }
}

/// The dispatch rate from per-window sums (keyed by window index, in order).
pub(crate) fn dispatch_rate(
    windows: &std::collections::BTreeMap<u64, WindowSums>,
    o: &ValidityOptions,
) -> Option<DispatchRate> {
    if o.window_ns == 0 {
        return None;
    }
    let judged: Vec<(u64, WindowSums)> = windows
        .iter()
        .filter(|(_, w)| w.n >= o.window_events.max(1))
        .map(|(&k, &w)| (k, w))
        .collect();
    let (first, last) = (judged.first()?.1, judged.last()?.1);
    if judged.len() < 2 {
        return None;
    }
    let events: u64 = judged.iter().map(|(_, w)| w.n).sum();
    let span = (judged.last()?.0 + 1 - judged.first()?.0) as f64 * o.window_ns as f64 / 1e9;
    let intended = events as f64 / span;
    let achieved = intended * ratio(first, last);
    let worst_window = judged
        .windows(2)
        .map(|p| (p[1].0, p[1].1, ratio(p[0].1, p[1].1)))
        .min_by(|a, b| a.2.total_cmp(&b.2))
        .map(|(k, w, r)| {
            let rate = w.n as f64 / (o.window_ns as f64 / 1e9);
            RateWindow {
                start: k * o.window_ns,
                intended: rate,
                achieved: rate * r,
            }
        });
    Some(DispatchRate {
        intended,
        achieved,
        windows: judged.len() as u64,
        worst_window,
    })
}

/// What a verdict is judged from.
#[derive(Debug, Clone)]
pub struct Measured<'a> {
    /// How the run ended.
    pub state: CompletionState,
    /// Why it stopped early.
    pub reason: Option<&'a str>,
    /// Events that reached the provider or failed on the way (markers excluded).
    pub operations: u64,
    /// Of those, the ones that succeeded.
    pub operations_ok: u64,
    /// Start lateness of the events that did not wait.
    pub start_lateness: &'a Percentiles,
    /// Events that waited for a dependency or a slot.
    pub waited: u64,
    /// Resume lateness of the events that waited: provider call − max(intended, the instant
    /// what they waited for was released).
    pub resume_lateness: &'a Percentiles,
    /// Completion lateness: how late the runtime ran a task woken from outside it (the
    /// engine's probe, module `probe`).
    pub completion_lateness: &'a Percentiles,
    /// iogen's own issue lateness inside `io_phase` units (submission − intended), when the
    /// provider reported it, with the I/O service time it is judged against.
    pub io_lateness: Option<(&'a Percentiles, &'a Percentiles)>,
    /// The median service time of each op type the engine called (its name and ns; not
    /// `io_phase`, a unit of many I/Os, nor stream-fed `io`, judged by its streams): the
    /// smallest is the reference of the run's scaled limits when none is given, and each is
    /// its own op type's ([`Validity::ops`]).
    pub medians: Vec<(&'a str, u64)>,
    /// The latency blocks each op type reports, with their tool bounds (`tool_ns`, module
    /// `bound`): what its verdict is judged by ([`ops`]); `io_phase I/O` for the I/O split.
    pub reported: Vec<Reported<'a>>,
    /// Dispatch rate, when enough windows had enough events.
    pub rate: Option<&'a DispatchRate>,
    /// Mean busy fraction of the runtime's workers over the run.
    pub workers_busy: Option<f64>,
    /// Client-side throttling the provider reported.
    pub throttling: &'a [ClientThrottling],
    /// Bare `io` events' streams.
    pub streams: &'a [StreamFidelity],
    /// The machine's steal over the run's clock ([`host`]).
    pub host_steal_ns: Option<u64>,
}

/// An op type's reported latency blocks (`response`, `service`; for `io_phase I/O` the I/O
/// split), each with its tool bound when one was measured.
#[derive(Debug, Clone, Copy)]
pub struct Reported<'a> {
    /// The op type, as in [`Measured::medians`], or [`IO_PHASE_IO`].
    pub op: &'a str,
    /// `(name, block)`.
    pub blocks: [(&'static str, &'a Percentiles); 2],
}

/// The checks of a run as they are made.
struct Checks {
    checks: Vec<Check>,
    /// Whether a timing check (lateness, dispatch rate, stream order) was judged.
    timing_judged: bool,
}

impl Checks {
    fn add(
        &mut self,
        name: &str,
        passed: bool,
        fails_as: Verdict,
        (value, limit, unit): (f64, f64, &str),
        message: String,
    ) {
        self.checks.push(Check {
            check: name.to_owned(),
            passed,
            judged: true,
            fails_as,
            value,
            limit,
            unit: unit.to_owned(),
            message,
        });
    }

    /// A timing check (it counts for `not-judged`).
    fn timing(&mut self, name: &str, passed: bool, value: (f64, f64, &str), message: String) {
        self.timing_as(name, passed, Verdict::EngineBound, value, message);
    }

    /// A timing check failing as `fails_as`.
    fn timing_as(
        &mut self,
        name: &str,
        passed: bool,
        fails_as: Verdict,
        value: (f64, f64, &str),
        message: String,
    ) {
        self.timing_judged = true;
        self.add(name, passed, fails_as, value, message);
    }

    /// The p99 and p99.9 checks of one lateness (`what`: `start lateness`, …; `population`:
    /// `events that did not wait`, …): each judged only with `min_events` (p99) or ten
    /// times as many (p99.9) values behind it, else recorded as not judged, in words.
    /// `share_of`: the measured latency a judged value is also said as a share of (with a
    /// given reference, whose limits say nothing of what was measured). `fails_as`:
    /// `imprecise` for the delays the op types' bounds take in (their verdicts decide), else
    /// `engine-bound` (a stream's issue lateness: a stream has no bound).
    #[allow(clippy::too_many_arguments)]
    fn lateness(
        &mut self,
        fails_as: Verdict,
        prefix: &str,
        what: &str,
        population: &str,
        l: &Percentiles,
        limits: &Limits,
        share_of: Option<(&str, u64)>,
    ) {
        // No event of the kind (no event waited, no I/O reported): nothing to say. Start
        // lateness is always said, as the check a reader looks for first.
        if l.count == 0 && prefix != "start_lateness" {
            return;
        }
        for (pct, value, limit, need) in [
            ("p99", l.p99, limits.p99_ns, limits.min_events),
            (
                "p99.9",
                l.p999,
                limits.p999_ns,
                limits.min_events.saturating_mul(10),
            ),
        ] {
            let name = format!("{prefix}.{pct}");
            let v = (value as f64, limit as f64, "ns");
            if l.count < need.max(1) {
                let measured = if l.count == 0 {
                    String::new()
                } else {
                    format!(
                        " (measured {}, limit {})",
                        fmt_ms(value, 3),
                        fmt_ms(limit, 3)
                    )
                };
                self.checks.push(Check {
                    check: name,
                    passed: true,
                    judged: false,
                    fails_as,
                    value: v.0,
                    limit: v.1,
                    unit: v.2.to_owned(),
                    message: format!(
                        "{what} {pct} not judged: {} {population}, fewer than the {need} a \
                         {pct} needs{measured}",
                        l.count
                    ),
                });
                continue;
            }
            let share = share_of
                .filter(|(_, m)| *m > 0)
                .map(|(op, m)| {
                    format!(
                        "; {:.1} % of the measured {op} median service time {}",
                        value as f64 / m as f64 * 100.0,
                        fmt_ms(m, 3)
                    )
                })
                .unwrap_or_default();
            self.timing_as(
                &name,
                value <= limit,
                fails_as,
                v,
                format!(
                    "{what} {pct} {} (limit {}) over {} {population}{share}",
                    fmt_ms(value, 3),
                    fmt_ms(limit, 3),
                    l.count
                ),
            );
        }
    }
}

/// A stream's checks: nothing dropped or reordered, issue lateness within the limits scaled
/// from the stream's own median service time, every full second's issued count within the
/// rate tolerance of its intended one.
fn stream_checks(f: &StreamFidelity, o: &ValidityOptions, c: &mut Checks) {
    let v = &f.volume;
    let lost = f.dropped + f.reordered;
    c.timing(
        "io_stream.order",
        lost == 0,
        (lost as f64, 0.0, "count"),
        format!(
            "volume {v:?}: {} of {} requests dropped, {} reordered{}",
            f.dropped,
            f.requests,
            f.reordered,
            f.error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        ),
    );
    let measured = (f.service.count > 0).then_some(("I/O", f.service.p50));
    let limits = o.limits(measured);
    c.lateness(
        Verdict::EngineBound,
        "io_stream.lateness",
        &format!("volume {v:?}: issue lateness"),
        &format!(
            "requests (service time p99 {}: a request waits when the stream's whole queue \
             depth is in flight)",
            fmt_ms(f.service.p99, 3)
        ),
        &f.lateness,
        &limits,
        o.reference_ns.and(measured),
    );
    if let Some(w) = &f.worst_window {
        c.timing(
            "io_stream.rate.window",
            w.error <= o.rate_tolerance,
            (w.error, o.rate_tolerance, "ratio"),
            format!(
                "volume {v:?}: worst second ({} s from the origin) issued {} of {} intended \
                 ({:.2} % off, limit {:.1} %; {} seconds judged)",
                w.start,
                w.issued,
                w.intended,
                w.error * 100.0,
                o.rate_tolerance * 100.0,
                f.windows
            ),
        );
    }
}

/// Judges a run.
pub fn judge(m: &Measured<'_>, o: &ValidityOptions) -> Validity {
    let mut c = Checks {
        checks: Vec::new(),
        timing_judged: false,
    };
    let complete = m.state == CompletionState::Complete;
    c.add(
        "completion",
        complete,
        Verdict::Incomplete,
        (f64::from(u8::from(complete)), 1.0, "count"),
        if complete {
            "every event was dispatched and finished".into()
        } else {
            format!(
                "the run stopped early ({})",
                m.reason.unwrap_or("state not complete")
            )
        },
    );
    let some_ok = m.operations == 0 || m.operations_ok > 0;
    c.add(
        "outcomes",
        some_ok,
        Verdict::Failed,
        (m.operations_ok as f64, 1.0, "count"),
        if some_ok {
            format!(
                "{} of {} operations succeeded",
                m.operations_ok, m.operations
            )
        } else {
            format!(
                "every one of the {} operations failed: nothing but errors was measured",
                m.operations
            )
        },
    );
    let reference = m.medians.iter().copied().min_by_key(|(_, p50)| *p50);
    let limits = o.limits(reference);
    // A given reference says nothing of what was measured: each judged lateness is then also
    // said as a share of the smallest measured median.
    let share_of = o.reference_ns.and(reference);
    c.lateness(
        Verdict::Imprecise,
        "start_lateness",
        "start lateness",
        "events that did not wait",
        m.start_lateness,
        &limits,
        share_of,
    );
    c.lateness(
        Verdict::Imprecise,
        "resume_lateness",
        "resume lateness (provider call after the wait ended)",
        "events that waited",
        m.resume_lateness,
        &limits,
        share_of,
    );
    c.lateness(
        Verdict::Imprecise,
        "completion_lateness",
        "completion lateness (a woken task run by the runtime)",
        "probes",
        m.completion_lateness,
        &limits,
        share_of,
    );
    if let Some((late, service)) = m.io_lateness {
        let io = (service.count > 0).then_some(("iogen I/O", service.p50));
        let io_limits = o.limits(io);
        c.lateness(
            Verdict::Imprecise,
            "io_phase.lateness",
            "iogen issue lateness",
            "I/Os of io_phase units",
            late,
            &io_limits,
            o.reference_ns.and(io),
        );
    }
    if let Some(r) = m.rate {
        let floor = 1.0 - o.rate_tolerance;
        let run = if r.intended > 0.0 {
            r.achieved / r.intended
        } else {
            1.0
        };
        c.timing(
            "dispatch_rate",
            run >= floor,
            (run, floor, "ratio"),
            format!(
                "dispatch rate {:.0} of {:.0} events/s intended over the run ({:.1} %, floor \
                 {:.1} %)",
                r.achieved,
                r.intended,
                run * 100.0,
                floor * 100.0
            ),
        );
        if let Some(w) = &r.worst_window {
            let wr = if w.intended > 0.0 {
                w.achieved / w.intended
            } else {
                1.0
            };
            c.timing(
                "dispatch_rate.window",
                wr >= floor,
                (wr, floor, "ratio"),
                format!(
                    "worst window (intended {:.3}–{:.3} s): dispatch rate {:.0} of {:.0} \
                     events/s ({:.1} %, floor {:.1} %; {} windows of {} s judged)",
                    w.start as f64 / 1e9,
                    (w.start + o.window_ns) as f64 / 1e9,
                    w.achieved,
                    w.intended,
                    wr * 100.0,
                    floor * 100.0,
                    r.windows,
                    o.window_ns as f64 / 1e9
                ),
            );
        }
    }
    if let Some(b) = m.workers_busy {
        c.add(
            "workers_busy",
            b <= o.workers_busy,
            Verdict::EngineBound,
            (b, o.workers_busy, "fraction"),
            format!(
                "runtime workers busy {:.1} % of the run (limit {:.1} %)",
                b * 100.0,
                o.workers_busy * 100.0
            ),
        );
    }
    for f in m.streams {
        stream_checks(f, o, &mut c);
    }
    for t in m.throttling {
        let f = if t.requests > 0 {
            t.throttled as f64 / t.requests as f64
        } else {
            0.0
        };
        c.add(
            "client_throttling",
            f <= o.throttled,
            Verdict::EngineBound,
            (f, o.throttled, "fraction"),
            format!(
                "{}: {} of {} requests waited in the client ({:.3} s in total, longest {}; \
                 limit {:.1} % of requests)",
                t.limiter,
                t.throttled,
                t.requests,
                t.waited_ns as f64 / 1e9,
                fmt_ms(t.max_wait_ns, 3),
                o.throttled * 100.0
            ),
        );
    }
    let Checks {
        checks,
        timing_judged,
    } = c;
    let ops = ops::judge_ops(m, o, &checks);
    let has = |v: Verdict| ops.iter().any(|op| op.verdict == v);
    let verdict = [Verdict::Incomplete, Verdict::Failed, Verdict::EngineBound]
        .into_iter()
        .find(|v| checks.iter().any(|c| !c.passed && c.fails_as == *v))
        .unwrap_or_else(|| {
            // A lateness past its limit with no op type to size it against is imprecise.
            let late = checks
                .iter()
                .any(|c| !c.passed && c.fails_as == Verdict::Imprecise);
            match (has(Verdict::Valid), has(Verdict::Imprecise)) {
                (true, true) => Verdict::PartlyValid,
                (false, true) => Verdict::Imprecise,
                _ if late && ops.is_empty() => Verdict::Imprecise,
                (true, false) => Verdict::Valid,
                (false, false) if timing_judged => Verdict::Valid,
                (false, false) => Verdict::NotJudged,
            }
        });
    Validity {
        verdict,
        checks,
        limits: Some(limits),
        ops,
        host_steal_ns: m.host_steal_ns,
    }
}

#[cfg(test)]
mod tests;
