//! The record sink: one thread that owns `events.jsonl`, the histograms and the interval logs,
//! so the dispatch and completion paths only send a message. Records are streamed and flushed
//! every second, so a crash leaves a readable prefix (at most the last, torn line is lost).

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use futures::channel::mpsc::UnboundedReceiver;

use hdrhistogram::Histogram;
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use trace_format::OpType;

use crate::line;
use crate::live::Live;
use crate::provider::IoReport;
use crate::record::{EventRecord, IoPhaseBackend, IoSplit, OpSummary, Outcome, Percentiles};
use crate::validity::WindowSums;

/// Highest value tracked: one hour in ns. Larger values saturate.
/// Pause after draining the channel (see `run`).
const BATCH_PAUSE: Duration = Duration::from_millis(1);
const MAX_NS: u64 = 3_600_000_000_000;

pub(crate) fn histogram() -> Histogram<u64> {
    // Three significant digits from 1 ns to an hour: fixed bounds, cannot fail.
    Histogram::new_with_bounds(1, MAX_NS, 3).expect("constant, valid histogram bounds")
}

/// One finished event.
pub(crate) struct Done {
    pub record: EventRecord,
    pub io: Vec<IoReport>,
    /// For an event that waited and reached the provider: its resume lateness, ns.
    pub resume_lateness: Option<u64>,
}

/// A message to the sink: one event (an operation that finished on its own task), or the
/// events a dispatch batch finished inline (one channel message for many events).
pub(crate) enum ToSink {
    One(Box<Done>),
    Batch(Vec<Done>),
}

/// Bytes of `events.jsonl` gathered before they are written out.
const WRITE_CHUNK: usize = 1 << 20;

#[derive(Default)]
struct OpHists {
    count: u64,
    ok: u64,
    failed: u64,
    response: Option<Histogram<u64>>,
    service: Option<Histogram<u64>>,
    lateness: Option<Histogram<u64>>,
    dep_wait: Option<Histogram<u64>>,
    queue: Option<Histogram<u64>>,
    /// Response less the engine's delay measured for the event (start or resume lateness):
    /// what the tool's error bound is computed from (`crate::bound`).
    less_engine: Option<Histogram<u64>>,
    interval: Option<[Histogram<u64>; 3]>,
    log: Option<BufWriter<fs_err::File>>,
}

fn rec(h: &mut Option<Histogram<u64>>, v: u64) {
    h.get_or_insert_with(histogram).saturating_record(v);
}

fn pct(h: Option<&Histogram<u64>>) -> Percentiles {
    h.map(Percentiles::of).unwrap_or_default()
}

/// What the sink hands back at the end.
pub(crate) struct SinkResult {
    pub ops: BTreeMap<String, OpSummary>,
    pub errors: BTreeMap<String, u64>,
    pub lateness: Percentiles,
    pub pickup: Percentiles,
    pub start_lateness: Percentiles,
    pub waited: u64,
    pub resume_lateness: Percentiles,
    /// `io_phase` units' issue lateness and service times, when a provider reported them.
    pub io_issue: Option<(Percentiles, Percentiles)>,
    /// Per window of intended time (index = intended / window): sums for the rate check.
    pub windows: BTreeMap<u64, WindowSums>,
    pub io: IoSplit,
    /// Per op type, the histograms its tool error bounds are computed from.
    pub bound_inputs: BTreeMap<String, BoundInputs>,
    /// The I/O responses with and without a snapshot in flight, and iogen's issue lateness.
    pub io_hists: IoHists,
    pub dispatched: u64,
    pub ok: u64,
    pub failed: u64,
    pub last_completed: u64,
}

/// The histograms an op type's tool error bounds are computed from.
pub(crate) struct BoundInputs {
    pub response: Histogram<u64>,
    /// Response less the engine's measured delay of each event.
    pub less_engine: Histogram<u64>,
    pub service: Histogram<u64>,
}

/// The I/O histograms behind the summary's I/O split.
pub(crate) struct IoHists {
    pub with_snapshot: Histogram<u64>,
    pub without_snapshot: Histogram<u64>,
    /// iogen's issue lateness, when a provider reported it.
    pub issue_lateness: Option<Histogram<u64>>,
}

pub(crate) struct Sink {
    run_dir: PathBuf,
    events: fs_err::File,
    /// Lines not yet written to `events`.
    pending: Vec<u8>,
    ops: BTreeMap<OpType, OpHists>,
    errors: BTreeMap<String, u64>,
    lateness: Histogram<u64>,
    pickup: Histogram<u64>,
    start_lateness: Histogram<u64>,
    waited: u64,
    resume_lateness: Histogram<u64>,
    window_ns: u64,
    windows: BTreeMap<u64, WindowSums>,
    io_with: Histogram<u64>,
    io_without: Histogram<u64>,
    /// `io_phase` units' own issue lateness and service times, when reported.
    io_issue: Option<(Histogram<u64>, Histogram<u64>)>,
    /// The I/O engine of each event whose provider reported it.
    backends: Vec<IoPhaseBackend>,
    last_completed: u64,
    start_wall: SystemTime,
    interval_start: Duration,
    origin: Instant,
    live: Arc<Live>,
}

impl Sink {
    pub fn create(
        run_dir: &Path,
        origin: Instant,
        start_wall: SystemTime,
        window_ns: u64,
        live: Arc<Live>,
    ) -> std::io::Result<Self> {
        fs_err::create_dir_all(run_dir.join("histograms"))?;
        let events = fs_err::File::create(run_dir.join("events.jsonl"))?;
        Ok(Self {
            run_dir: run_dir.to_owned(),
            events,
            pending: Vec::with_capacity(WRITE_CHUNK + 4096),
            ops: BTreeMap::new(),
            errors: BTreeMap::new(),
            lateness: histogram(),
            pickup: histogram(),
            start_lateness: histogram(),
            waited: 0,
            resume_lateness: histogram(),
            window_ns,
            windows: BTreeMap::new(),
            io_with: histogram(),
            io_without: histogram(),
            io_issue: None,
            backends: Vec::new(),
            last_completed: 0,
            start_wall,
            interval_start: Duration::ZERO,
            origin,
            live,
        })
    }

    /// Consumes records until every sender is gone.
    ///
    /// The channel is futures' unbounded one, whose send never waits for another sender (a
    /// node swapped onto a list, and a wake-up of this thread): std's `mpsc` makes a sender
    /// that finds its block full spin until the sender filling it has linked the next one,
    /// and a real-time timing lane spinning on a thread it preempted stops that thread
    /// (docs/replay.md, *Starting a batch*). This thread parks between looks, woken by the
    /// first record after it parked.
    pub fn run(mut self, mut rx: UnboundedReceiver<ToSink>) -> std::io::Result<SinkResult> {
        let waker = Waker::from(Arc::new(crate::precise::Unpark::current()));
        let mut cx = Context::from_waker(&waker);
        let mut last_flush = Instant::now();
        loop {
            match rx.poll_next_unpin(&mut cx) {
                Poll::Ready(Some(m)) => {
                    self.take(&m)?;
                    // Take what else is queued, then pause: at high event rates this thread
                    // wakes ~1000 times a second instead of once per record, leaving the cores
                    // to the timing lanes and the workers. Records wait in the channel.
                    while let Poll::Ready(Some(m)) = rx.poll_next_unpin(&mut cx) {
                        self.take(&m)?;
                    }
                    std::thread::sleep(BATCH_PAUSE);
                }
                Poll::Ready(None) => break,
                Poll::Pending => std::thread::park_timeout(Duration::from_millis(200)),
            }
            if last_flush.elapsed() >= Duration::from_secs(1) {
                self.write_pending()?;
                self.write_intervals()?;
                last_flush = Instant::now();
            }
        }
        self.write_pending()?;
        self.write_intervals()?;
        for h in self.ops.values_mut() {
            if let Some(l) = h.log.as_mut() {
                l.flush()?;
            }
        }
        Ok(self.finish())
    }

    fn take(&mut self, m: &ToSink) -> std::io::Result<()> {
        // Records are read in place, not moved out of their message one by one, and the live
        // counters are locked once per message, not once per event.
        let done = match m {
            ToSink::One(d) => std::slice::from_ref(&**d),
            ToSink::Batch(v) => v.as_slice(),
        };
        self.live.observe(done.iter().map(|d| &d.record));
        for d in done {
            self.add(d);
        }
        if self.pending.len() >= WRITE_CHUNK {
            self.write_pending()?;
        }
        Ok(())
    }

    /// Writes the lines gathered so far to `events.jsonl`.
    fn write_pending(&mut self) -> std::io::Result<()> {
        self.events.write_all(&self.pending)?;
        self.pending.clear();
        Ok(())
    }

    fn add(&mut self, d: &Done) {
        let r = &d.record;
        line::write_record(&mut self.pending, r);
        self.pending.push(b'\n');
        self.last_completed = self.last_completed.max(r.completed);
        self.lateness.saturating_record(r.lateness);
        self.pickup.saturating_record(r.pickup);
        if let Some(s) = r.start_lateness {
            self.start_lateness.saturating_record(s);
        }
        self.waited += u64::from(r.waited);
        if let Some(l) = d.resume_lateness {
            self.resume_lateness.saturating_record(l);
        }
        if let Some(k) = r.intended.checked_div(self.window_ns) {
            // The engine's delay until the runtime began the event (not the waits after).
            let w = self.windows.entry(k).or_default();
            w.n += 1;
            w.intended += u128::from(r.intended);
            w.delay += u128::from(r.lateness + r.pickup);
        }
        let h = self.ops.entry(r.op).or_default();
        h.count += 1;
        match r.outcome {
            Outcome::Ok => h.ok += 1,
            Outcome::Error => {
                h.failed += 1;
                let class = r.error_class.clone().unwrap_or_else(|| "unknown".into());
                *self.errors.entry(class).or_default() += 1;
            }
        }
        rec(&mut h.response, r.response);
        let engine_delay = r.start_lateness.or(d.resume_lateness).unwrap_or(0);
        rec(&mut h.less_engine, r.response.saturating_sub(engine_delay));
        rec(&mut h.service, r.service);
        rec(&mut h.lateness, r.lateness);
        if r.dep_wait > 0 {
            rec(&mut h.dep_wait, r.dep_wait);
        }
        if r.queue > 0 {
            rec(&mut h.queue, r.queue);
        }
        let iv = h
            .interval
            .get_or_insert_with(|| [histogram(), histogram(), histogram()]);
        iv[0].saturating_record(r.response);
        iv[1].saturating_record(r.service);
        iv[2].saturating_record(r.lateness);
        if r.op == OpType::Io && r.outcome == Outcome::Ok {
            if r.during_snapshot {
                self.io_with.saturating_record(r.response);
            } else {
                self.io_without.saturating_record(r.response);
            }
        }
        for io in &d.io {
            if let Some(b) = &io.backend {
                self.backends.push(IoPhaseBackend {
                    event: r.id,
                    backend: b.backend.clone(),
                    reason: b.reason.clone(),
                });
            }
            let _ = self.io_with.add(&io.with_snapshot);
            let _ = self.io_without.add(&io.without_snapshot);
            if let Some(i) = &io.issue {
                let (l, s) = self
                    .io_issue
                    .get_or_insert_with(|| (histogram(), histogram()));
                let _ = l.add(&i.lateness);
                let _ = s.add(&i.service);
            }
        }
    }

    /// Writes the interval histograms gathered since the last call to each op's `.hlog`.
    fn write_intervals(&mut self) -> std::io::Result<()> {
        let now = self.origin.elapsed();
        let start = self.interval_start;
        let len = now.saturating_sub(start);
        for (op, h) in &mut self.ops {
            let Some(iv) = h.interval.as_mut() else {
                continue;
            };
            if iv[0].is_empty() {
                continue;
            }
            if h.log.is_none() {
                let path = self.run_dir.join("histograms").join(format!("{op}.hlog"));
                let mut w = BufWriter::new(fs_err::File::create(path)?);
                let mut ser = V2DeflateSerializer::new();
                IntervalLogWriterBuilder::new()
                    .add_comment(&format!(
                        "cnsreplay {op}: tags response, service, lateness; values in ns; \
                         timestamps in s since the run origin"
                    ))
                    .with_start_time(self.start_wall)
                    .begin_log_with(&mut w, &mut ser)?;
                h.log = Some(w);
            }
            let Some(w) = h.log.as_mut() else { continue };
            let mut ser = V2DeflateSerializer::new();
            let mut log = IntervalLogWriterBuilder::new().begin_log_with(w, &mut ser)?;
            for (hist, tag) in iv.iter().zip(["response", "service", "lateness"]) {
                log.write_histogram(hist, start, len, Tag::new(tag))
                    .map_err(|e| std::io::Error::other(format!("{e}")))?;
            }
            for hist in iv.iter_mut() {
                hist.reset();
            }
        }
        self.interval_start = now;
        Ok(())
    }

    fn finish(mut self) -> SinkResult {
        self.backends.sort_by_key(|b| b.event);
        let mut ops = BTreeMap::new();
        let mut bound_inputs = BTreeMap::new();
        let (mut dispatched, mut ok, mut failed) = (0, 0, 0);
        for (op, h) in &mut self.ops {
            if let (Some(response), Some(less_engine), Some(service)) =
                (h.response.clone(), h.less_engine.take(), h.service.clone())
            {
                bound_inputs.insert(
                    op.name().to_owned(),
                    BoundInputs {
                        response,
                        less_engine,
                        service,
                    },
                );
            }
            dispatched += h.count;
            ok += h.ok;
            failed += h.failed;
            ops.insert(
                op.name().to_owned(),
                OpSummary {
                    count: h.count,
                    ok: h.ok,
                    failed: h.failed,
                    response: pct(h.response.as_ref()),
                    service: pct(h.service.as_ref()),
                    lateness: pct(h.lateness.as_ref()),
                    dep_wait: pct(h.dep_wait.as_ref()),
                    queue: pct(h.queue.as_ref()),
                },
            );
        }
        SinkResult {
            ops,
            errors: self.errors,
            lateness: Percentiles::of(&self.lateness),
            pickup: Percentiles::of(&self.pickup),
            start_lateness: Percentiles::of(&self.start_lateness),
            waited: self.waited,
            resume_lateness: Percentiles::of(&self.resume_lateness),
            io_issue: self
                .io_issue
                .as_ref()
                .map(|(l, s)| (Percentiles::of(l), Percentiles::of(s))),
            windows: self.windows,
            io: IoSplit {
                without_snapshot: Percentiles::of(&self.io_without),
                with_snapshot: Percentiles::of(&self.io_with),
                backends: self.backends,
            },
            bound_inputs,
            io_hists: IoHists {
                with_snapshot: self.io_with,
                without_snapshot: self.io_without,
                issue_lateness: self.io_issue.map(|(l, _)| l),
            },
            dispatched,
            ok,
            failed,
            last_completed: self.last_completed,
        }
    }
}
