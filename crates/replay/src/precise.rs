//! Waiting for an absolute deadline with microsecond precision.
//!
//! OS sleeps overshoot by the thread's timer slack (50 µs by default on Linux) and tokio's
//! timer wheel rounds to whole milliseconds. The timing thread therefore lowers its own timer
//! slack to 1 µs and sleeps until each absolute deadline (`origin + offset`, so error never
//! accumulates the way it does with relative sleeps). It does not spin: on this 2-core
//! machine at 100 k events/s, yield-spinning in the last 20 µs gave lateness p90 0.73 ms and
//! p99 1.83 ms, pure sleeping p90 82–86 µs and p99 0.42–0.50 ms (docs/PERFORMANCE.md, Replay
//! engine) — our reading: a thread that is always runnable gets time-sliced against the
//! workers, while one that sleeps wins its core back at each wake-up. It also asks for a
//! higher priority (nice −10: needs root or `CAP_SYS_NICE`), so the workers it feeds delay it
//! less; when it may not, the run says so in its notices.
//!
//! While a run lasts it also holds a CPU wake-up latency request of 0 µs on
//! `/dev/cpu_dma_latency` (the kernel's PM QoS interface, as cyclictest does), which keeps idle
//! CPUs out of deep idle states. On this VM an idle CPU sometimes took its timer interrupt a
//! whole 4 ms tick late (seen with `perf` as `hrtimer_expire_entry` 4006 µs after expiry,
//! on the idle task); with the request held, dispatch lateness p99.9 fell from 2.1–3.4 ms to
//! 0.69–1.12 ms in 4 runs (docs/PERFORMANCE.md, Replay engine). Idle CPUs then poll instead
//! of halting, which costs power, not time of the run's threads; the request ends with the run.

use std::num::NonZeroU64;
use std::time::{Duration, Instant};

/// Timer slack the timing thread asks for, ns.
pub const TIMER_SLACK_NS: u64 = 1_000;

/// Nice value the timing thread asks for.
pub const TIMING_NICE: i32 = -10;

/// Prepares the calling thread to be a timing thread: 1 µs timer slack and nice −10. Returns
/// a notice for each setting it could not make (the thread still works, less precisely).
pub fn prepare_timing_thread() -> Vec<String> {
    let mut notices = Vec::new();
    if let Err(e) = rustix::thread::set_current_timer_slack(NonZeroU64::new(TIMER_SLACK_NS)) {
        notices.push(format!(
            "could not lower the timing thread's timer slack to {TIMER_SLACK_NS} ns ({e}); \
             dispatch lateness may be higher"
        ));
    }
    if let Err(e) = raise_priority() {
        notices.push(format!(
            "could not raise the timing thread's priority to nice {TIMING_NICE} ({e}; needs root \
             or CAP_SYS_NICE); dispatch lateness may be higher on a busy machine"
        ));
    }
    notices
}

/// A held CPU wake-up latency request; dropping it ends the request.
#[derive(Debug)]
pub struct CpuLatencyRequest {
    _file: fs_err::File,
}

/// Asks the kernel to keep CPU wake-up latency at 0 µs for as long as the returned request
/// is held. Without permission (root) or the PM QoS device, returns a notice instead.
pub fn request_cpu_latency() -> Result<CpuLatencyRequest, String> {
    use std::io::Write;
    let open = fs_err::OpenOptions::new()
        .write(true)
        .open("/dev/cpu_dma_latency");
    open.and_then(|mut f| f.write_all(&0i32.to_ne_bytes()).map(|()| f))
        .map(|f| CpuLatencyRequest { _file: f })
        .map_err(|e| {
            format!(
                "could not hold a 0 µs CPU wake-up latency request ({e}); an idle CPU may take \
                 its timer interrupt late and dispatch lateness may be higher"
            )
        })
}

/// Sets the calling thread's nice value to [`TIMING_NICE`].
pub fn raise_priority() -> rustix::io::Result<()> {
    rustix::process::setpriority_process(Some(rustix::thread::gettid()), TIMING_NICE)
}

/// Waits until `deadline`, returning early (false) if `stop()` becomes true. Checks `stop`
/// at least every 50 ms.
pub fn wait_until(deadline: Instant, mut stop: impl FnMut() -> bool) -> bool {
    loop {
        if stop() {
            return false;
        }
        let now = Instant::now();
        if now >= deadline {
            return true;
        }
        std::thread::sleep((deadline - now).min(Duration::from_millis(50)));
    }
}
