//! Streamed single requests (a trace's `io` events) against one target, on a dedicated thread
//! and ring.
//!
//! Submitters push requests with their intended start into a bounded queue (a full queue is
//! [`Error::QueueFull`], never a block, so a replay loop cannot be stalled by the data path);
//! the worker keeps them ordered by intended time and issues each at its time, or at once when
//! it is already late, charging the delay to its response time. `finish` waits for the queue
//! to drain after every submitter is dropped.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::Path;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TryRecvError, TrySendError};
use std::time::{Duration, Instant};

use trace_format::IoKind;

use crate::backend::{Backend, BackendConfig};
use crate::engine::{Item, Next, Source, Worker};
use crate::phase::open_target;
use crate::ring;
use crate::stats::{
    CpuTime, EngineInfo, Histograms, IntervalLog, IntervalMsg, Recorder, Summary, kind_index,
};
use crate::{CpuPlacement, EngineOptions, Error, Stop};

/// Capacity of a stream's request queue.
pub const STREAM_QUEUE: usize = 16 * 1024;

/// One request of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoRequest {
    /// Read, write, trim or flush.
    pub kind: IoKind,
    /// Byte offset (ignored for flush).
    pub offset: u64,
    /// Length in bytes (ignored for flush).
    pub len: u64,
    /// When the request should start.
    pub intended: Instant,
}

/// The sending side of a stream: cheap to clone, usable from any thread.
#[derive(Debug, Clone)]
pub struct IoSubmitter {
    tx: SyncSender<IoRequest>,
}

impl IoSubmitter {
    /// Queues a request without blocking: [`Error::QueueFull`] when the queue is full,
    /// [`Error::StreamClosed`] when the worker has stopped.
    pub fn submit(&self, r: IoRequest) -> Result<(), Error> {
        self.tx.try_send(r).map_err(|e| match e {
            TrySendError::Full(_) => Error::QueueFull,
            TrySendError::Disconnected(_) => Error::StreamClosed,
        })
    }
}

/// The worker side of a stream.
#[derive(Debug)]
pub struct StreamHandle {
    done: Receiver<Result<StreamResult, Error>>,
    stop: Stop,
}

impl StreamHandle {
    /// Waits until every submitter is dropped and all queued and in-flight I/O completed.
    /// Call it after dropping your submitters (or after [`StreamHandle::stop`]).
    ///
    /// The worker thread is not joined: after a stop that had to abandon requests it may sit in
    /// the kernel until they end (a thread that submitted io_uring requests cannot exit before
    /// its io-wq workers are done), and the result does not wait for that.
    pub fn finish(self) -> Result<StreamResult, Error> {
        self.done.recv().unwrap_or(Err(Error::WorkerPanicked))
    }

    /// Stops issuing: queued requests are dropped, in-flight ones complete; the result is
    /// marked partial.
    pub fn stop(&self) {
        self.stop.request();
    }
}

/// What a stream did.
#[derive(Debug, Clone)]
pub struct StreamResult {
    /// Summary (no phase config; `offered_iops` is the intended rate of the requests).
    pub summary: Summary,
    /// Response, service and lateness histograms per kind.
    pub histograms: Histograms,
    /// Failed or rejected requests.
    pub errors: u64,
    /// Requests accepted into the stream.
    pub accepted: u64,
    /// Requests refused on arrival (a read or write of 0 bytes or longer than the stream's
    /// buffers): never issued, counted in `errors` too.
    pub rejected: u64,
    /// Requests issued after a request intended later than them (arrived too late to keep
    /// the trace's order): 0 when every request was queued ahead of its time.
    pub reordered: u64,
    /// Accepted requests never issued (a stop dropped them).
    pub unissued: u64,
    /// The stream's time 0: bucket `i` of `buckets` starts at `base + i × BUCKET_NS`.
    pub base: Instant,
    /// Per [`crate::BUCKET_NS`] from `base`: [requests intended, requests issued] then.
    pub buckets: Vec<[u32; 2]>,
}

/// Starts a stream against `target` (which must exist), with its own thread and ring.
pub fn start_stream(
    target: &Path,
    direct: bool,
    opts: &EngineOptions,
) -> Result<(IoSubmitter, StreamHandle), Error> {
    let file = open_target(target, direct, true)?;
    let (tx, rx) = mpsc::sync_channel(STREAM_QUEUE);
    let (ready_tx, ready_rx) = mpsc::channel();
    // The result comes back on a channel, not through `join`: see `StreamHandle::finish`.
    let (done_tx, done) = mpsc::channel();
    let stop = Stop::new();
    // The interval log (if asked) is written by its own thread as intervals arrive; created
    // here so that a bad path is an error of this call.
    let (iv, writer) = match &opts.interval_log {
        Some(p) => {
            let mut log = IntervalLog::create(p, 1, opts.interval)?;
            let (iv_tx, iv_rx) = mpsc::channel::<IntervalMsg>();
            let writer = std::thread::Builder::new()
                .name("iogen-ivlog".to_owned())
                .spawn(move || -> Result<(), Error> {
                    for msg in iv_rx.iter() {
                        log.add(&msg)?;
                    }
                    log.finish()
                })?;
            (Some((opts.interval, iv_tx)), Some(writer))
        }
        None => (None, None),
    };
    let (opts, stop2, name) = (opts.clone(), stop.clone(), target.display().to_string());
    std::thread::Builder::new()
        .name("iogen-stream".to_owned())
        .spawn(move || {
            ring::tight_timer_slack();
            let cfg = BackendConfig {
                slots: opts.stream_depth.max(1) as usize,
                buf_len: opts.stream_max_len.max(512) as usize,
                defer_taskrun: false,
            };
            // Bound before the ring exists, so that its kernel workers and the thread pool's
            // threads start from this thread's CPU set.
            if let Some(p) = &opts.cpus
                && let Err(e) = ring::pin_thread(&[p.thread])
            {
                let _ = ready_tx.send(Err(Error::Cpus(p.thread, e)));
                return;
            }
            let backend = match Backend::open(file, &cfg, &opts) {
                Ok(b) => b,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            if let Some(p) = opts.cpus.as_ref().filter(|p| !p.kernel_workers.is_empty())
                && let Err(e) = backend.set_worker_cpus(&p.kernel_workers)
            {
                let _ = ready_tx.send(Err(Error::WorkerCpus(p.kernel_workers.clone(), e)));
                return;
            }
            // Ready only once the buffers are filled, so the first requests are not late.
            let mut rec = Recorder::new(iv);
            rec.keep_buckets();
            let mut w = Worker::new(backend, rec, None);
            w.set_spin(opts.spin);
            w.set_spinners(opts.spinners);
            let base = Instant::now();
            w.set_base(base);
            let _ = ready_tx.send(Ok(()));
            // The worker's recorder (and with it the interval sender) is gone once
            // `run_stream` returns, so the writer ends after the last interval.
            let mut res = run_stream(w, base, rx, &stop2, name, opts.cpus.as_ref());
            if let Some(writer) = writer {
                let logged = writer.join().unwrap_or(Err(Error::WorkerPanicked));
                if let (Ok(_), Err(e)) = (&res, logged) {
                    res = Err(e);
                }
            }
            let _ = done_tx.send(res);
        })?;
    match ready_rx.recv() {
        Ok(Ok(())) => Ok((IoSubmitter { tx }, StreamHandle { done, stop })),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(Error::WorkerPanicked),
    }
}

fn run_stream(
    mut w: Worker<'_>,
    base: Instant,
    rx: Receiver<IoRequest>,
    stop: &Stop,
    target: String,
    cpus: Option<&CpuPlacement>,
) -> Result<StreamResult, Error> {
    let mut info = w.backend.info();
    if ring::short_time_slice() {
        info.flags.push("sched_slice_100us".to_owned());
    }
    if let Some(p) = cpus {
        info.flags.push(p.describe());
    }
    let max_len = w.backend.buf_len() as u64;
    let mut src = StreamSource {
        rx,
        heap: BinaryHeap::new(),
        seq: 0,
        base,
        closed: false,
        stopped: false,
        max_len,
        rejected: [0; 4],
        first: None,
        last: 0,
        accepted: 0,
        issued: 0,
        last_issued: None,
        reordered: 0,
    };
    let partial = w.run(&mut src, stop)?;
    let Worker {
        backend,
        mut rec,
        last_completion,
        max_oversleep_ns,
        ..
    } = w;
    if max_oversleep_ns >= 10_000 {
        info.flags.push(format!(
            "timed wake-ups up to {} µs late (the spin margin grows by it)",
            max_oversleep_ns / 1000
        ));
    }
    let pool = backend.finish();
    let me = ring::cpu_time(true);
    for (c, r) in rec.counts.iter_mut().zip(src.rejected) {
        c.errors += r;
    }
    let mut summary = Summary {
        engine: EngineInfo {
            engine: info.engine.to_owned(),
            flags: info.flags,
            notes: info.notes,
        },
        target,
        kernel: ring::kernel_release(),
        partial,
        ..Default::default()
    };
    let elapsed = Duration::from_nanos(last_completion.saturating_sub(src.first.unwrap_or(0)));
    rec.summarize(&mut summary, elapsed);
    if let Some(first) = src.first {
        let window = (src.last - first) as f64 / 1e9;
        if window > 0.0 {
            summary.offered_iops = Some(src.accepted.saturating_sub(1) as f64 / window);
        }
    }
    let (user, sys) = (me.0 + pool.0, me.1 + pool.1);
    summary.cpu = CpuTime {
        user_s: user.as_secs_f64(),
        sys_s: sys.as_secs_f64(),
        per_io_us: (user + sys).as_secs_f64() * 1e6 / (summary.ios.max(1) as f64),
        ..Default::default()
    };
    let errors = summary.errors;
    Ok(StreamResult {
        summary,
        histograms: rec.hists,
        errors,
        accepted: src.accepted,
        rejected: src.rejected.iter().sum(),
        reordered: src.reordered,
        unissued: src.accepted - src.issued,
        base,
        buckets: rec.buckets.unwrap_or_default(),
    })
}

type Pending = Reverse<(u64, u64, u8, u64, u64)>;

struct StreamSource {
    rx: Receiver<IoRequest>,
    heap: BinaryHeap<Pending>,
    seq: u64,
    base: Instant,
    closed: bool,
    stopped: bool,
    max_len: u64,
    rejected: [u64; 4],
    first: Option<u64>,
    last: u64,
    accepted: u64,
    issued: u64,
    /// (intended, arrival) of the last request issued.
    last_issued: Option<(u64, u64)>,
    reordered: u64,
}

const KINDS: [IoKind; 4] = [IoKind::Read, IoKind::Write, IoKind::Trim, IoKind::Flush];

impl StreamSource {
    fn accept(&mut self, r: IoRequest) {
        let k = kind_index(r.kind);
        if matches!(r.kind, IoKind::Read | IoKind::Write) && (r.len == 0 || r.len > self.max_len) {
            self.rejected[k] += 1;
            return;
        }
        let t = r.intended.saturating_duration_since(self.base).as_nanos() as u64;
        self.first = Some(self.first.map_or(t, |f| f.min(t)));
        self.last = self.last.max(t);
        self.accepted += 1;
        self.seq += 1;
        self.heap
            .push(Reverse((t, self.seq, k as u8, r.offset, r.len)));
    }

    fn drain(&mut self) {
        // Bounded: beyond this the channel fills up and submitters see `QueueFull`.
        while self.heap.len() < STREAM_QUEUE {
            match self.rx.try_recv() {
                Ok(r) => self.accept(r),
                Err(TryRecvError::Empty) => return,
                Err(TryRecvError::Disconnected) => {
                    self.closed = true;
                    return;
                }
            }
        }
    }
}

impl Source for StreamSource {
    fn next(&mut self, now: u64, _busy: &dyn Fn(u64, u64) -> bool) -> Next {
        if self.stopped {
            return Next::Done;
        }
        if !self.closed {
            self.drain();
        }
        match self.heap.peek() {
            Some(Reverse((t, ..))) if *t > now => Next::At(*t),
            Some(_) => {
                let Some(Reverse((t, seq, k, offset, len))) = self.heap.pop() else {
                    return Next::Idle;
                };
                if self.last_issued.is_some_and(|l| l > (t, seq)) {
                    self.reordered += 1;
                }
                self.last_issued = Some((t, seq));
                self.issued += 1;
                Next::Ready(Item {
                    kind: KINDS[usize::from(k)],
                    offset,
                    len,
                    intended: Some(t),
                })
            }
            None if self.closed => Next::Done,
            None => Next::Idle,
        }
    }

    fn stop(&mut self) {
        self.stopped = true;
        self.heap.clear();
    }

    fn idle_wait(&mut self, timeout: Duration) -> bool {
        if self.closed {
            return false;
        }
        match self.rx.recv_timeout(timeout) {
            Ok(req) => self.accept(req),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => self.closed = true,
        }
        true
    }
}
