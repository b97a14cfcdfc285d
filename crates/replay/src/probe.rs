//! The completion-side probe: how late the engine runs a task woken from outside it.
//!
//! A provider's completion reaches the engine as a wake-up from outside the runtime (the sim's
//! timer thread, a blocking-pool thread, the I/O driver); the engine stamps `completed` when
//! its task runs. A runtime whose workers are busy or descheduled runs it late, and every
//! response time of the run is inflated by as much. The probe measures that delay directly:
//! a thread of its own, every [`PERIOD`], spawns a task onto the runtime from outside (the
//! same inject-queue-and-unpark path) and records how long it took to run. One probe is in
//! flight at a time, so a stalled runtime costs one late sample per stall, not a pile-up.
//! The cost is one wake-up of the thread and one of a worker per period.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::event::Handoff;

/// Time between probes (500 per second: a 1 s run has enough for a p99, 2 s for a p99.9).
pub const PERIOD: Duration = Duration::from_millis(2);

/// A running probe.
pub(crate) struct Probe {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Histogram<u64>>>,
}

impl Probe {
    /// Starts probing `rt`, or the hand-off thread of `handoff` when there is one.
    pub fn start(
        rt: tokio::runtime::Handle,
        handoff: Option<Arc<Handoff>>,
    ) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("cnsreplay-probe".into())
            .spawn(move || {
                let mut h = crate::sink::histogram();
                let mut next = Instant::now() + PERIOD;
                while !flag.load(Relaxed) {
                    std::thread::sleep(next.saturating_duration_since(Instant::now()));
                    next += PERIOD;
                    let (tx, rx) = std::sync::mpsc::sync_channel(1);
                    let sent = Instant::now();
                    match &handoff {
                        Some(h) => h.probe(tx),
                        None => {
                            rt.spawn(async move {
                                let _ = tx.send(Instant::now());
                            });
                        }
                    }
                    // The runtime (or hand-off thread) is gone: nothing more to probe.
                    let Ok(ran) = rx.recv() else { break };
                    h.saturating_record(crate::precise::ns_since(sent, ran).max(1));
                    // After a long stall, do not probe in a burst to catch up.
                    next = next.max(Instant::now());
                }
                h
            })?;
        Ok(Self {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the probe; what it measured.
    pub fn finish(mut self) -> Histogram<u64> {
        self.stop.store(true, Relaxed);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_else(crate::sink::histogram)
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
    }
}
