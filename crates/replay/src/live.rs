//! Live counters of a running replay, shared with the progress bar and the Prometheus
//! endpoint. Plain atomics where the engine's hot path counts (dispatch); the per-op-type
//! outcomes and latency histograms are updated by the record sink (one thread, which sees every
//! record) under a mutex a scrape takes briefly.
//!
//! The histograms are Prometheus histograms with fixed 1-2-5 buckets from 10 µs to 1000 s:
//! `histogram_quantile` over them lands within one bucket of the run's own HdrHistogram
//! percentiles (3 significant digits), which is the agreement the summary can be checked to.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use trace_format::OpType;

use crate::record::{EventRecord, Outcome};

/// Upper bounds (seconds) of the latency histograms' buckets: 1-2-5 from 10 µs to 1000 s.
pub const BUCKETS: [f64; 25] = [
    1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 0.1, 0.2, 0.5, 1.0,
    2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0,
];

/// [`BUCKETS`] in nanoseconds: a record finds its bucket without a float division (the sink
/// files every record here).
const BUCKETS_NS: [u64; BUCKETS.len()] = {
    let mut ns = [0; BUCKETS.len()];
    let mut i = 0;
    while i < BUCKETS.len() {
        ns[i] = (BUCKETS[i] * 1e9 + 0.5) as u64;
        i += 1;
    }
    ns
};

/// A Prometheus histogram: counts per bucket (not cumulative; the last is +Inf), sum, count.
#[derive(Debug, Clone, Default)]
pub struct PromHistogram {
    counts: [u64; BUCKETS.len() + 1],
    sum_ns: u128,
    count: u64,
}

impl PromHistogram {
    /// Records one value in nanoseconds.
    pub fn record(&mut self, ns: u64) {
        self.record_n(ns, 1);
    }

    /// Records `n` values of `ns` nanoseconds each.
    pub fn record_n(&mut self, ns: u64, n: u64) {
        let i = BUCKETS_NS.partition_point(|b| *b < ns);
        self.counts[i] += n;
        self.sum_ns += u128::from(ns) * u128::from(n);
        self.count += n;
    }

    /// Writes the histogram `name` with `labels` (e.g. `op="attach"`).
    fn write(&self, out: &mut String, name: &str, labels: &str) {
        let mut cum = 0;
        for (i, b) in BUCKETS.iter().enumerate() {
            cum += self.counts[i];
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{b}\"}} {cum}");
        }
        cum += self.counts[BUCKETS.len()];
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {cum}");
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", self.sum_ns as f64 / 1e9);
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", self.count);
    }
}

/// A label value as the exposition format quotes it.
fn label_value(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The I/O of one tenant and kind (`read`, `write`, …) that `io_phase` units reported from
/// iogen's interval histograms (one per second) as they arrived.
#[derive(Debug, Clone, Default)]
pub struct IoLive {
    /// Requests completed.
    pub requests: u64,
    /// Their response times.
    pub response: PromHistogram,
}

/// What the sink has seen of one op type.
#[derive(Debug, Clone, Default)]
pub struct OpMetrics {
    /// Records (any outcome).
    pub done: u64,
    /// Failed records by error class.
    pub failed: BTreeMap<String, u64>,
    /// Response time (completed − intended).
    pub response: PromHistogram,
    /// Service time (completed − started).
    pub service: PromHistogram,
    /// Start lateness (started − intended, of events that did not wait for a dependency).
    pub start_lateness: PromHistogram,
}

/// Counters updated by the engine while it runs.
#[derive(Debug, Default)]
pub struct Live {
    /// Events completed (any outcome).
    pub done: AtomicU64,
    /// Events failed.
    pub failed: AtomicU64,
    /// Bare `io` requests handed to per-volume I/O streams (module `streams`): they are not
    /// in `done` (a stream reports its completions when it ends).
    pub streamed: AtomicU64,
    /// Events dispatched more than 1 ms after their intended time.
    pub late: AtomicU64,
    /// Largest dispatch lateness so far, ns.
    pub worst_lag_ns: AtomicU64,
    /// Total events in the trace when known up front (0 = unknown).
    pub total: AtomicU64,
    /// Set when the run has finished.
    pub finished: AtomicBool,
    /// Events dispatched per op type (indexed by the op's tag); their sum is
    /// [`Live::dispatched`].
    pub dispatched_by_op: [AtomicU64; OpType::ALL.len()],
    /// Per op type, from the records.
    pub ops: Mutex<BTreeMap<OpType, OpMetrics>>,
    /// `io_phase` I/O per (tenant, kind), from the providers' interval histograms
    /// (`OpCtx::io_interval`).
    pub io: Mutex<BTreeMap<(String, String), IoLive>>,
}

impl Live {
    /// Events read from the trace and dispatched.
    pub fn dispatched(&self) -> u64 {
        self.dispatched_by_op.iter().map(|c| c.load(Relaxed)).sum()
    }

    /// Counts one dispatched event of `op` (the engine's timing lanes).
    pub fn dispatched_op(&self, op: OpType) {
        if let Some(c) = self.dispatched_by_op.get(op as usize) {
            c.fetch_add(1, Relaxed);
        }
    }

    /// Adds finished events' records under one lock (the sink, once per message it takes).
    pub fn observe<'a>(&self, records: impl IntoIterator<Item = &'a EventRecord>) {
        let mut ops = self.ops.lock().unwrap_or_else(PoisonError::into_inner);
        for r in records {
            let m = ops.entry(r.op).or_default();
            m.done += 1;
            if r.outcome == Outcome::Error {
                let class = r.error_class.as_deref().unwrap_or("unknown");
                *m.failed.entry(class.to_owned()).or_default() += 1;
            }
            m.response.record(r.response);
            m.service.record(r.service);
            if let Some(l) = r.start_lateness {
                m.start_lateness.record(l);
            }
        }
    }

    /// Adds one interval histogram (response times, ns) of `tenant`'s I/O of `kind`.
    pub fn observe_io(&self, tenant: &str, kind: &str, h: &hdrhistogram::Histogram<u64>) {
        let mut io = self.io.lock().unwrap_or_else(PoisonError::into_inner);
        let m = io.entry((tenant.to_owned(), kind.to_owned())).or_default();
        m.requests += h.len();
        for v in h.iter_recorded() {
            m.response
                .record_n(v.value_iterated_to(), v.count_at_value());
        }
    }

    /// Events in flight.
    pub fn in_flight(&self) -> u64 {
        self.dispatched().saturating_sub(self.done.load(Relaxed))
    }

    /// Prometheus text exposition of the counters.
    pub fn prometheus(&self) -> String {
        let mut s = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, v: u64| {
            let _ = write!(
                s,
                "# HELP cnsreplay_{name} {help}\n# TYPE cnsreplay_{name} {kind}\ncnsreplay_{name} {v}\n"
            );
        };
        metric(
            "events_dispatched_total",
            "counter",
            "Events dispatched.",
            self.dispatched(),
        );
        metric(
            "events_done_total",
            "counter",
            "Events completed.",
            self.done.load(Relaxed),
        );
        metric(
            "io_streamed_total",
            "counter",
            "Bare io requests handed to per-volume I/O streams (not in events_done_total).",
            self.streamed.load(Relaxed),
        );
        metric(
            "events_failed_total",
            "counter",
            "Events failed.",
            self.failed.load(Relaxed),
        );
        metric(
            "events_late_total",
            "counter",
            "Events dispatched more than 1 ms late.",
            self.late.load(Relaxed),
        );
        metric(
            "events_in_flight",
            "gauge",
            "Events in flight.",
            self.in_flight(),
        );
        metric(
            "worst_lag_nanoseconds",
            "gauge",
            "Largest dispatch lateness so far.",
            self.worst_lag_ns.load(Relaxed),
        );
        self.per_op(&mut s);
        self.per_tenant_io(&mut s);
        s
    }

    /// The labelled I/O families, by tenant and kind.
    fn per_tenant_io(&self, s: &mut String) {
        let io = self
            .io
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if io.is_empty() {
            return;
        }
        let labels = |(tenant, kind): &(String, String)| {
            format!(
                "tenant=\"{}\",kind=\"{}\"",
                label_value(tenant),
                label_value(kind)
            )
        };
        let _ = writeln!(
            s,
            "# HELP cnsreplay_io_requests_total I/O requests of io_phase units (iogen), by tenant \
             and kind, as their interval histograms arrive.\n\
             # TYPE cnsreplay_io_requests_total counter"
        );
        for (k, m) in &io {
            let _ = writeln!(
                s,
                "cnsreplay_io_requests_total{{{}}} {}",
                labels(k),
                m.requests
            );
        }
        let _ = writeln!(
            s,
            "# HELP cnsreplay_io_response_seconds Response time of io_phase I/O requests \
             (iogen, from their intended issue time), by tenant and kind.\n\
             # TYPE cnsreplay_io_response_seconds histogram"
        );
        for (k, m) in &io {
            m.response
                .write(s, "cnsreplay_io_response_seconds", &labels(k));
        }
    }

    /// The labelled per-op-type families.
    fn per_op(&self, s: &mut String) {
        let ops = self
            .ops
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let dispatched: Vec<(OpType, u64)> = OpType::ALL
            .iter()
            .map(|o| (*o, self.dispatched_by_op[*o as usize].load(Relaxed)))
            .filter(|(o, n)| *n > 0 || ops.contains_key(o))
            .collect();
        let head = |s: &mut String, name: &str, kind: &str, help: &str| {
            let _ = writeln!(
                s,
                "# HELP cnsreplay_{name} {help}\n# TYPE cnsreplay_{name} {kind}"
            );
        };
        head(
            s,
            "op_dispatched_total",
            "counter",
            "Events dispatched, by op type.",
        );
        for (o, n) in &dispatched {
            let _ = writeln!(s, "cnsreplay_op_dispatched_total{{op=\"{o}\"}} {n}");
        }
        head(
            s,
            "op_done_total",
            "counter",
            "Events finished (any outcome), by op type.",
        );
        for (o, _) in &dispatched {
            let n = ops.get(o).map_or(0, |m| m.done);
            let _ = writeln!(s, "cnsreplay_op_done_total{{op=\"{o}\"}} {n}");
        }
        head(
            s,
            "op_failed_total",
            "counter",
            "Events failed, by op type and error class.",
        );
        for (o, m) in &ops {
            for (class, n) in &m.failed {
                let class = class.replace(['\\', '"', '\n'], "_");
                let _ = writeln!(
                    s,
                    "cnsreplay_op_failed_total{{op=\"{o}\",class=\"{class}\"}} {n}"
                );
            }
        }
        head(
            s,
            "op_in_flight",
            "gauge",
            "Events dispatched and not yet finished, by op type.",
        );
        for (o, n) in &dispatched {
            let done = ops.get(o).map_or(0, |m| m.done);
            let _ = writeln!(
                s,
                "cnsreplay_op_in_flight{{op=\"{o}\"}} {}",
                n.saturating_sub(done)
            );
        }
        for (name, help, pick) in [
            (
                "op_response_seconds",
                "Response time (completed - intended: coordinated-omission-safe), by op type.",
                (|m: &OpMetrics| &m.response) as fn(&OpMetrics) -> &PromHistogram,
            ),
            (
                "op_service_seconds",
                "Service time (completed - started), by op type.",
                |m| &m.service,
            ),
            (
                "op_start_lateness_seconds",
                "Start lateness (started - intended, events that waited for nothing), by op type.",
                |m| &m.start_lateness,
            ),
        ] {
            head(s, name, "histogram", help);
            for (o, m) in &ops {
                pick(m).write(
                    s,
                    &format!("cnsreplay_{name}"),
                    &format!("op=\"{}\"", o.name()),
                );
            }
        }
    }
}

/// Serves `live` as Prometheus text on `addr` (any path) from a background thread until the
/// run has finished (its summary written) and `linger` more has passed, so a scraper gets the
/// final values. Returns the bound address (useful with port 0) and the thread, which the
/// caller joins to keep the process up for the linger.
pub fn serve_metrics(
    addr: SocketAddr,
    live: Arc<Live>,
    linger: Duration,
) -> std::io::Result<(SocketAddr, std::thread::JoinHandle<()>)> {
    let listener = TcpListener::bind(addr)?;
    let bound = listener.local_addr()?;
    listener.set_nonblocking(true)?;
    let handle = std::thread::Builder::new()
        .name("cnsreplay-metrics".into())
        .spawn(move || {
            let mut finished_at: Option<Instant> = None;
            loop {
                if live.finished.load(Relaxed) {
                    let at = *finished_at.get_or_insert_with(Instant::now);
                    if at.elapsed() >= linger {
                        break;
                    }
                }
                match listener.accept() {
                    Ok((stream, _)) => {
                        let _ = respond(stream, &live);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        })?;
    Ok((bound, handle))
}

fn respond(stream: std::net::TcpStream, live: &Live) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    // Read the request head up to the blank line; the path does not matter.
    while reader.read_line(&mut line)? > 2 {
        line.clear();
    }
    let body = live.prometheus();
    let mut w = stream;
    write!(
        w,
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value on a bucket's bound counts in that bucket (`le` is inclusive); the cumulative
    /// counts, sum and count are what Prometheus expects.
    #[test]
    fn histogram_buckets_are_inclusive_and_cumulative() {
        let mut h = PromHistogram::default();
        for ns in [1_000_000, 1_000_001, 5, 2_000_000_000_000] {
            h.record(ns);
        }
        let mut s = String::new();
        h.write(&mut s, "x", "op=\"attach\"");
        let line = |le: &str| {
            s.lines()
                .find(|l| l.starts_with(&format!("x_bucket{{op=\"attach\",le=\"{le}\"}}")))
                .and_then(|l| l.rsplit(' ').next())
                .map(str::to_owned)
        };
        assert_eq!(line("0.00001").as_deref(), Some("1"), "{s}");
        assert_eq!(line("0.001").as_deref(), Some("2"), "{s}");
        assert_eq!(line("0.002").as_deref(), Some("3"), "{s}");
        assert_eq!(line("1000").as_deref(), Some("3"), "{s}");
        assert_eq!(line("+Inf").as_deref(), Some("4"), "{s}");
        assert!(s.contains("x_count{op=\"attach\"} 4"), "{s}");
        assert!(s.contains("x_sum{op=\"attach\"} 2000.002000006"), "{s}");
    }

    /// The bucket is found on integer nanoseconds; it is the one the bounds in seconds give
    /// (`le` inclusive), on a bound, beside it and anywhere between.
    #[test]
    fn integer_buckets_are_the_bounds_in_seconds() {
        let by_seconds = |ns: u64| BUCKETS.partition_point(|b| *b < ns as f64 / 1e9);
        let by_ns = |ns: u64| BUCKETS_NS.partition_point(|b| *b < ns);
        for b in BUCKETS_NS {
            for ns in [b - 1, b, b + 1] {
                assert_eq!(by_ns(ns), by_seconds(ns), "{ns} ns");
            }
        }
        proptest::proptest!(|(ns in 0..2_000_000_000_000u64)| {
            proptest::prop_assert_eq!(by_ns(ns), by_seconds(ns), "{} ns", ns);
        });
    }
}
