//! Bare `io` events through per-volume I/O streams.
//!
//! An `io` event on a volume that no workload of the trace has attached at that point — the
//! shape of every imported block trace: volumes declared in the header, then only `io` — is
//! not dispatched as an operation. The reader thread hands it to the volume's I/O stream
//! ahead of its time (at most [`LOOKAHEAD`] early), and the provider's stream issues it at
//! its intended instant and measures response, service and lateness from that instant, in
//! CO-safe histograms. Why: at 10⁵ requests/s a runtime task and a provider call per request
//! cost more than the I/O itself, and the engine's dispatch tail would become the I/O's
//! lateness; a stream (iogen's on the local provider) has its own thread and ring and waits
//! for each deadline itself.
//!
//! The volume is attached implicitly: the provider opens the stream on the volume's own
//! storage (the local provider: its image file or device), before the request's time and
//! unmeasured. A stream stays open until the trace ends, a stop, or an event that attaches or
//! deletes the volume (the delete waits for the stream's last request: the stream is one of
//! the volume's users). A provider without streams, a volume whose creation is still pending
//! when the reader reaches the request, or a volume a workload holds keep the per-event path.
//!
//! Fidelity is judged per stream ([`StreamFidelity`]): requests dropped (refused, never
//! issued, or not accepted) and reordered must be 0; achieved against intended rate in every
//! full second of the stream's active span (first to last intended request), from the
//! stream's counts per [`IoStreamReport::bucket_ns`] of intended and of issue time.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use trace_format::{Io, Name, Op};

pub use crate::record::stream::{RateWindow, StreamFidelity};

use crate::deps::{Deps, Plan};
use crate::provider::ProviderError;
use crate::record::Percentiles;
use crate::timing::Due;

/// How far ahead of its intended instant a request is handed to its stream: enough to ride
/// out a stalled reader, small enough for a stream's queue at 10⁵ requests/s (5 000).
pub const LOOKAHEAD: Duration = Duration::from_millis(50);

/// The answer of [`IoStream::submit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submit {
    /// Queued; it will be issued at its intended instant (or at once when that has passed).
    Queued,
    /// The stream's queue is full: try again shortly.
    Full,
}

/// A provider's stream of one volume's `io` requests (see the module notes).
pub trait IoStream: Send {
    /// Queues `io` to start at `intended`, without blocking.
    fn submit(&mut self, io: &Io, intended: Instant) -> Result<Submit, ProviderError>;

    /// How long before its intended instant a request is handed over: [`LOOKAHEAD`] unless
    /// the stream's path to its I/O is longer (a pod's, through the apiserver).
    fn lookahead(&self) -> Duration {
        LOOKAHEAD
    }

    /// Ends the stream: waits until every queued request has been issued and completed
    /// (with `stop`, queued requests are dropped and in-flight ones completed), undoes the
    /// implicit attach, and reports.
    fn finish(self: Box<Self>, stop: bool) -> Result<IoStreamReport, ProviderError>;
}

/// What a stream measured.
#[derive(Debug, Clone)]
pub struct IoStreamReport {
    /// What the requests went to (a file or a device).
    pub target: String,
    /// How: engine, O_DIRECT, alignment, placement policy.
    pub flags: Vec<String>,
    /// Requests the stream accepted.
    pub accepted: u64,
    /// Requests that completed without error.
    pub completed: u64,
    /// Requests that failed (included in the histograms at their failure: CO-safe).
    pub errors: u64,
    /// Requests refused on arrival (never issued).
    pub rejected: u64,
    /// Requests issued after one intended later than them.
    pub reordered: u64,
    /// Accepted requests never issued (a stop dropped them).
    pub unissued: u64,
    /// Requests whose offset or length the provider had to change to issue them (alignment,
    /// a target smaller than the volume), by the policy named in `flags`.
    pub adjusted: u64,
    /// Response time (intended → completed), ns, every kind.
    pub response: Histogram<u64>,
    /// Service time (issued → completed), ns.
    pub service: Histogram<u64>,
    /// Issue lateness (intended → issued), ns.
    pub lateness: Histogram<u64>,
    /// The stream's time 0 (bucket 0 starts here).
    pub base: Instant,
    /// Width of `buckets`, ns.
    pub bucket_ns: u64,
    /// Per bucket from `base`: [requests intended, requests issued] in it.
    pub buckets: Vec<[u32; 2]>,
    /// The stream's CPU time per request, µs.
    pub cpu_per_request_us: f64,
    /// When its last request had completed (or the stream ended).
    pub ended: Instant,
}

/// A stream's per-second rate curve, `RUNDIR/io/streams/<volume>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateCurve {
    /// The volume.
    pub volume: String,
    /// Second (from the run origin) of the first entry.
    pub first_second: u64,
    /// Per second: [requests intended, requests issued].
    pub per_second: Vec<[u64; 2]>,
}

/// One stream's end, as the reader leaves it for the summary.
#[derive(Debug)]
pub(crate) struct Ended {
    volume: Name,
    /// Requests routed to it (submitted or failed to submit).
    requests: u64,
    /// Of those, not accepted (the stream was closed or refused them).
    not_accepted: u64,
    report: Result<IoStreamReport, ProviderError>,
}

/// Opens a provider's streams for volumes (`None`: the provider has none), one answer per
/// volume; returns promptly once the stop flag is set.
pub(crate) type Opener = Box<
    dyn FnMut(&[Name], &AtomicBool) -> Vec<Result<Option<Box<dyn IoStream>>, ProviderError>> + Send,
>;

/// What the reader hands over at the end: every stream's end, notices.
#[derive(Debug, Default)]
pub(crate) struct Collected {
    pub ended: Vec<Ended>,
    pub notices: Vec<String>,
}

struct Open {
    stream: Box<dyn IoStream>,
    /// The first routed request's plan: keeps the stream a user of its volume until it ends.
    hold: Option<Plan>,
    requests: u64,
    not_accepted: u64,
}

/// The reader's side: routes bare `io` events to streams.
pub(crate) struct Router {
    open: Opener,
    origin: Arc<OnceLock<Instant>>,
    stop: Arc<AtomicBool>,
    streams: HashMap<Name, Open>,
    /// Volumes whose stream the provider declined or failed to open.
    per_event: HashSet<Name>,
    collected: Arc<Mutex<Collected>>,
    closers: Vec<std::thread::JoinHandle<()>>,
    /// The header's volumes, opened together with the first stream (then emptied).
    header: Vec<Name>,
    /// The longest lookahead of the streams opened so far, ns: the clock starts at least
    /// this long after the first stream is set up, so requests due at time 0 are handed over
    /// as early as later ones.
    lead: Arc<AtomicU64>,
    /// The run's live counters: requests handed to a stream are counted in `streamed`.
    live: Arc<crate::Live>,
}

impl Router {
    /// A router; `header` names the volumes the trace header declares.
    pub(crate) fn new(
        open: Opener,
        origin: Arc<OnceLock<Instant>>,
        stop: Arc<AtomicBool>,
        collected: Arc<Mutex<Collected>>,
        header: Vec<Name>,
        lead: Arc<AtomicU64>,
        live: Arc<crate::Live>,
    ) -> Self {
        Self {
            open,
            origin,
            stop,
            streams: HashMap::new(),
            per_event: HashSet::new(),
            collected,
            closers: Vec::new(),
            header,
            lead,
            live,
        }
    }

    /// Opens the streams of `volumes` together; the ones that do not open take the per-event
    /// path.
    fn open_all(&mut self, volumes: &[Name]) {
        let answers = (self.open)(volumes, &self.stop);
        for (volume, answer) in volumes.iter().zip(answers) {
            match answer {
                Ok(Some(stream)) => {
                    let ahead = u64::try_from(stream.lookahead().as_nanos()).unwrap_or(u64::MAX);
                    self.lead.fetch_max(ahead, Relaxed);
                    self.streams.insert(
                        volume.clone(),
                        Open {
                            stream,
                            hold: None,
                            requests: 0,
                            not_accepted: 0,
                        },
                    );
                }
                Ok(None) => {
                    self.per_event.insert(volume.clone());
                }
                Err(e) if e.class == "cancelled" && self.stop.load(Relaxed) => {
                    self.per_event.insert(volume.clone());
                }
                Err(e) => {
                    self.notice(format!(
                        "volume {:?}: its I/O stream could not be opened ({e}); its io events \
                         go one call at a time",
                        volume.as_str()
                    ));
                    self.per_event.insert(volume.clone());
                }
            }
        }
    }

    /// Before `op` is planned: ends the streams of volumes it attaches or deletes.
    pub(crate) fn before(&mut self, op: &Op) {
        if self.streams.is_empty() {
            return;
        }
        match op {
            Op::Attach(a) => {
                for v in &a.volumes {
                    self.close(v, false);
                }
            }
            Op::DeleteVolume(v) => self.close(&v.volume, false),
            _ => {}
        }
    }

    /// Takes a bare `io` event into its volume's stream, or gives it back for the per-event
    /// path. Blocks until the event is at most [`LOOKAHEAD`] ahead of its time. `planned` is
    /// called once the event's stream is open (or the event given back), before the wait for
    /// the origin: the run's clock starts only after the first stream's setup.
    pub(crate) fn route(&mut self, due: Due, deps: &Deps, planned: &dyn Fn()) -> Option<Due> {
        let due = self.open_for(due, deps);
        planned();
        self.submit(due)
    }

    /// Opens the stream `due` needs; gives the event back (`Err`) when it takes the
    /// per-event path.
    fn open_for(&mut self, due: Due, deps: &Deps) -> Result<Due, Due> {
        let Op::Io(io) = &due.ev.op else {
            return Err(due);
        };
        if deps.attached(&io.volume)
            || due.plan.waits_pending()
            || self.per_event.contains(&io.volume)
        {
            return Err(due);
        }
        if !self.streams.contains_key(&io.volume) {
            // The first stream of a block trace's shape: its other volumes (the header's,
            // held by no workload) are opened with it, together and before the clock starts,
            // rather than when their first request is already due; one that never sees a
            // request is not reported.
            let mut volumes = vec![io.volume.clone()];
            for v in std::mem::take(&mut self.header) {
                if !volumes.contains(&v)
                    && !self.streams.contains_key(&v)
                    && !self.per_event.contains(&v)
                    && !deps.attached(&v)
                {
                    volumes.push(v);
                }
            }
            self.open_all(&volumes);
            if !self.streams.contains_key(&io.volume) {
                return Err(due);
            }
        }
        Ok(due)
    }

    /// Hands a routed event to its open stream at most its lookahead before its time.
    fn submit(&mut self, due: Result<Due, Due>) -> Option<Due> {
        let due = match due {
            Ok(d) => d,
            Err(d) => return Some(d),
        };
        let Op::Io(io) = &due.ev.op else {
            return Some(due);
        };
        let origin = self.wait_origin()?;
        let at = origin + Duration::from_nanos(due.intended);
        let ahead = self
            .streams
            .get(&io.volume)
            .map_or(LOOKAHEAD, |o| o.stream.lookahead());
        loop {
            let now = Instant::now();
            if self.stop.load(Relaxed) {
                return None;
            }
            match at.checked_duration_since(now + ahead) {
                Some(w) if w > Duration::ZERO => {
                    std::thread::sleep(w.min(Duration::from_millis(20)));
                }
                _ => break,
            }
        }
        let Some(open) = self.streams.get_mut(&io.volume) else {
            return Some(due);
        };
        open.requests += 1;
        loop {
            match open.stream.submit(io, at) {
                Ok(Submit::Queued) => {
                    self.live.streamed.fetch_add(1, Relaxed);
                    break;
                }
                Ok(Submit::Full) if !self.stop.load(Relaxed) => {
                    std::thread::sleep(Duration::from_micros(50));
                }
                Ok(Submit::Full) | Err(_) => {
                    open.not_accepted += 1;
                    break;
                }
            }
        }
        let Due { plan, .. } = due;
        if open.hold.is_none() {
            open.hold = Some(plan);
        }
        None
    }

    fn wait_origin(&self) -> Option<Instant> {
        loop {
            if let Some(o) = self.origin.get() {
                return Some(*o);
            }
            if self.stop.load(Relaxed) {
                return None;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    fn notice(&self, n: String) {
        self.collected
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .notices
            .push(n);
    }

    /// Ends `volume`'s stream on a thread of its own (it waits for the stream's last
    /// request); its hold on the volume is released after that.
    fn close(&mut self, volume: &Name, stop: bool) {
        let Some(open) = self.streams.remove(volume) else {
            return;
        };
        let (collected, volume) = (self.collected.clone(), volume.clone());
        let spawned = std::thread::Builder::new()
            .name("cnsreplay-stream-end".into())
            .spawn(move || {
                let Open {
                    stream,
                    hold,
                    requests,
                    not_accepted,
                } = open;
                let report = stream.finish(stop);
                drop(hold);
                collected
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .ended
                    .push(Ended {
                        volume,
                        requests,
                        not_accepted,
                        report,
                    });
            });
        match spawned {
            Ok(h) => self.closers.push(h),
            Err(e) => self.notice(format!("a stream could not be ended: {e}")),
        }
    }

    /// Ends every stream (dropping what is queued when the run was stopped) and waits.
    pub(crate) fn finish(mut self) {
        let stop = self.stop.load(Relaxed);
        let volumes: Vec<Name> = self.streams.keys().cloned().collect();
        for v in volumes {
            self.close(&v, stop);
        }
        for h in self.closers.drain(..) {
            let _ = h.join();
        }
    }
}

/// Judges the streams against the run origin: fidelity per stream and its rate curve.
pub(crate) fn fidelity(
    ended: &[Ended],
    origin: Instant,
    min_window: u64,
) -> Vec<(StreamFidelity, Option<RateCurve>)> {
    let mut out: Vec<_> = ended
        .iter()
        .filter(|e| e.requests > 0)
        .map(|e| judge_one(e, origin, min_window))
        .collect();
    out.sort_by(|a, b| a.0.volume.cmp(&b.0.volume));
    out
}

fn judge_one(e: &Ended, origin: Instant, min_window: u64) -> (StreamFidelity, Option<RateCurve>) {
    let mut f = StreamFidelity {
        volume: e.volume.as_str().to_owned(),
        target: String::new(),
        flags: Vec::new(),
        requests: e.requests,
        issued: 0,
        completed: 0,
        errors: 0,
        dropped: e.not_accepted,
        reordered: 0,
        adjusted: 0,
        span: [0.0, 0.0],
        intended_rate: 0.0,
        achieved_rate: 0.0,
        windows: 0,
        worst_window: None,
        lateness: Percentiles::default(),
        response: Percentiles::default(),
        service: Percentiles::default(),
        cpu_per_request_us: 0.0,
        error: None,
    };
    let r = match &e.report {
        Ok(r) => r,
        Err(err) => {
            f.error = Some(err.to_string());
            f.dropped = e.requests;
            return (f, None);
        }
    };
    f.target.clone_from(&r.target);
    f.flags.clone_from(&r.flags);
    f.issued = r.accepted - r.rejected.min(r.accepted) - r.unissued.min(r.accepted);
    f.completed = r.completed;
    f.errors = r.errors;
    f.dropped += r.rejected + r.unissued;
    f.reordered = r.reordered;
    f.adjusted = r.adjusted;
    f.lateness = Percentiles::of(&r.lateness);
    f.response = Percentiles::of(&r.response);
    f.service = Percentiles::of(&r.service);
    f.cpu_per_request_us = r.cpu_per_request_us;
    let curve = per_second(r, origin);
    let Some(curve) = curve else {
        return (f, None);
    };
    // The active span from the bucket counts (a bucket's width of resolution).
    let bucket_s = r.bucket_ns as f64 / 1e9;
    let shift = signed_ns(r.base, origin);
    let first = r.buckets.iter().position(|b| b[0] > 0);
    let last = r.buckets.iter().rposition(|b| b[0] > 0);
    if let (Some(a), Some(b)) = (first, last) {
        let start = (a as f64 * bucket_s + shift as f64 / 1e9).max(0.0);
        let end = ((b + 1) as f64 * bucket_s + shift as f64 / 1e9).max(start);
        f.span = [start, end];
        let len = (end - start).max(bucket_s);
        let intended: u64 = curve.per_second.iter().map(|c| c[0]).sum();
        let issued: u64 = curve.per_second.iter().map(|c| c[1]).sum();
        f.intended_rate = intended as f64 / len;
        f.achieved_rate = issued as f64 / len;
        // Full seconds inside the span.
        for (i, c) in curve.per_second.iter().enumerate() {
            let s = curve.first_second + i as u64;
            if (s as f64) < start || (s + 1) as f64 > end || c[0] < min_window {
                continue;
            }
            f.windows += 1;
            let err = c[1].abs_diff(c[0]) as f64 / c[0] as f64;
            if f.worst_window.is_none_or(|w| err > w.error) {
                f.worst_window = Some(RateWindow {
                    start: s,
                    intended: c[0],
                    issued: c[1],
                    error: err,
                });
            }
        }
    }
    (f, Some(curve))
}

/// Every stream's response, service and lateness histograms merged (the `io` row of the
/// summary when every `io` event was streamed).
pub(crate) fn merged(ended: &[Ended]) -> (Histogram<u64>, Histogram<u64>, Histogram<u64>) {
    let new = || Histogram::new(3).expect("3 significant digits are valid");
    let (mut r, mut s, mut l) = (new(), new(), new());
    for e in ended {
        if let Ok(rep) = &e.report {
            // These auto-resize: adding cannot fail.
            let _ = r.add(&rep.response);
            let _ = s.add(&rep.service);
            let _ = l.add(&rep.lateness);
        }
    }
    (r, s, l)
}

/// When the last stream ended, ns from the origin (0 without streams).
pub(crate) fn last_end(ended: &[Ended], origin: Instant) -> u64 {
    ended
        .iter()
        .filter_map(|e| e.report.as_ref().ok())
        .map(|r| crate::precise::ns_since(origin, r.ended))
        .max()
        .unwrap_or(0)
}

/// `t − origin` in ns (negative when `t` is earlier).
fn signed_ns(t: Instant, origin: Instant) -> i128 {
    match t.checked_duration_since(origin) {
        Some(d) => d.as_nanos() as i128,
        None => -(origin.duration_since(t).as_nanos() as i128),
    }
}

/// The stream's buckets summed per second of the run (a bucket goes to the second its start
/// falls in, so the curve is exact to a bucket's width).
fn per_second(r: &IoStreamReport, origin: Instant) -> Option<RateCurve> {
    if r.buckets.is_empty() || r.bucket_ns == 0 {
        return None;
    }
    let shift = signed_ns(r.base, origin);
    let second = |i: usize| -> u64 {
        let t = shift + i as i128 * i128::from(r.bucket_ns);
        u64::try_from(t.max(0) / 1_000_000_000).unwrap_or(u64::MAX)
    };
    let first = second(0);
    let last = second(r.buckets.len() - 1);
    let n = usize::try_from(last - first + 1).ok()?;
    let mut per = vec![[0u64; 2]; n];
    for (i, b) in r.buckets.iter().enumerate() {
        let s = usize::try_from(second(i) - first).ok()?;
        per[s][0] += u64::from(b[0]);
        per[s][1] += u64::from(b[1]);
    }
    Some(RateCurve {
        volume: String::new(),
        first_second: first,
        per_second: per,
    })
}

/// The run's notice when any stream ran on iogen's thread pool (first flag `sync`) instead of
/// io_uring: for which volumes, with the flags that say why (those naming io_uring). `None`
/// when none did.
pub fn threads_notice(streams: &[StreamFidelity]) -> Option<String> {
    let on: Vec<&StreamFidelity> = streams
        .iter()
        .filter(|s| s.flags.first().is_some_and(|f| f == "sync"))
        .collect();
    if on.is_empty() {
        return None;
    }
    let mut why: Vec<&str> = Vec::new();
    for f in on.iter().flat_map(|s| s.flags.iter().skip(1)) {
        if f.contains("io_uring") && !why.contains(&f.as_str()) {
            why.push(f);
        }
    }
    let mut volumes: Vec<&str> = on.iter().take(10).map(|s| s.volume.as_str()).collect();
    if on.len() > 10 {
        volumes.push("…");
    }
    Some(format!(
        "iogen streams used threads, not io_uring, for {} of {} volumes ({}){}{}",
        on.len(),
        streams.len(),
        volumes.join(", "),
        if why.is_empty() { "" } else { ": " },
        why.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream on the thread pool is named in a notice with the flag that says why; streams
    /// on io_uring give none.
    #[test]
    fn streams_on_threads_are_never_silent() {
        let origin = Instant::now();
        let stream = |v: &str, flags: &[&str]| {
            let mut r = report(origin, vec![[1, 1]]);
            r.flags = flags.iter().map(|f| (*f).to_owned()).collect();
            let e = Ended {
                volume: Name::from(v),
                requests: 1,
                not_accepted: 0,
                report: Ok(r),
            };
            judge_one(&e, origin, 1).0
        };
        let uring = stream("a", &["io_uring", "fixed_buffers"]);
        assert_eq!(threads_notice(std::slice::from_ref(&uring)), None);
        let why = "io_uring refused under the RuntimeDefault seccomp profile";
        let threads = stream("b", &["sync", "threads=4", why]);
        assert_eq!(
            threads_notice(&[uring, threads]).as_deref(),
            Some(
                "iogen streams used threads, not io_uring, for 1 of 2 volumes (b): io_uring \
                 refused under the RuntimeDefault seccomp profile"
            )
        );
    }

    fn report(base: Instant, buckets: Vec<[u32; 2]>) -> IoStreamReport {
        IoStreamReport {
            target: "t".into(),
            flags: vec![],
            accepted: buckets.iter().map(|b| u64::from(b[0])).sum(),
            completed: 0,
            errors: 0,
            rejected: 0,
            reordered: 0,
            unissued: 0,
            adjusted: 0,
            response: Histogram::new(3).unwrap(),
            service: Histogram::new(3).unwrap(),
            lateness: Histogram::new(3).unwrap(),
            base,
            bucket_ns: 10_000_000,
            buckets,
            cpu_per_request_us: 0.0,
            ended: base,
        }
    }

    #[test]
    fn the_worst_second_is_found_on_the_run_axis() {
        let origin = Instant::now();
        // The stream started 20 ms before the origin: its bucket 2 is the run's 0–10 ms.
        let base = origin - Duration::from_millis(20);
        let mut b = vec![[0, 0]; 2];
        b.extend(std::iter::repeat_n([100, 100], 300));
        // Second 1 of the run (buckets 102..202) issues 50 fewer.
        b[150][1] = 50;
        let e = Ended {
            volume: Name::from("v"),
            requests: 30_000,
            not_accepted: 0,
            report: Ok(report(base, b)),
        };
        let (f, curve) = judge_one(&e, origin, 100);
        let curve = curve.unwrap();
        assert_eq!(curve.first_second, 0);
        assert_eq!(curve.per_second[0], [10_000, 10_000]);
        assert_eq!(curve.per_second[1], [10_000, 9_950]);
        assert_eq!(f.windows, 3);
        let w = f.worst_window.unwrap();
        assert_eq!((w.start, w.intended, w.issued), (1, 10_000, 9_950));
        assert!((w.error - 0.005).abs() < 1e-12);
        assert!((f.span[1] - 3.0).abs() < 1e-9, "{:?}", f.span);
        assert!((f.intended_rate - 10_000.0).abs() < 1e-6);
    }

    #[test]
    fn a_stream_that_failed_drops_every_request() {
        let e = Ended {
            volume: Name::from("v"),
            requests: 7,
            not_accepted: 0,
            report: Err(ProviderError::new("io", "gone")),
        };
        let (f, curve) = judge_one(&e, Instant::now(), 1);
        assert!(curve.is_none());
        assert_eq!(f.dropped, 7);
        assert_eq!(f.error.as_deref(), Some("io: gone"));
    }
}
