//! Live counters of a running replay, shared with the progress bar and the Prometheus
//! endpoint. Plain atomics: the engine only increments, readers take relaxed snapshots.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// Counters updated by the engine while it runs.
#[derive(Debug, Default)]
pub struct Live {
    /// Events read from the trace and dispatched.
    pub dispatched: AtomicU64,
    /// Events completed (any outcome).
    pub done: AtomicU64,
    /// Events failed.
    pub failed: AtomicU64,
    /// Events dispatched more than 1 ms after their intended time.
    pub late: AtomicU64,
    /// Largest dispatch lateness so far, ns.
    pub worst_lag_ns: AtomicU64,
    /// Total events in the trace when known up front (0 = unknown).
    pub total: AtomicU64,
    /// Set when the run has finished.
    pub finished: AtomicBool,
}

impl Live {
    /// Events in flight.
    pub fn in_flight(&self) -> u64 {
        self.dispatched
            .load(Relaxed)
            .saturating_sub(self.done.load(Relaxed))
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
            self.dispatched.load(Relaxed),
        );
        metric(
            "events_done_total",
            "counter",
            "Events completed.",
            self.done.load(Relaxed),
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
        s
    }
}

/// Serves `live` as Prometheus text on `addr` (any path) from a background thread until the
/// run finishes. Returns the bound address (useful with port 0).
pub fn serve_metrics(addr: SocketAddr, live: Arc<Live>) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)?;
    let bound = listener.local_addr()?;
    listener.set_nonblocking(true)?;
    std::thread::Builder::new()
        .name("cnsreplay-metrics".into())
        .spawn(move || {
            while !live.finished.load(Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let _ = respond(stream, &live);
                    }
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
                }
            }
        })?;
    Ok(bound)
}

fn respond(stream: std::net::TcpStream, live: &Live) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(2)))?;
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
