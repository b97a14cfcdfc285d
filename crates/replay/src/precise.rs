//! Waiting for an absolute deadline with microsecond precision.
//!
//! OS sleeps overshoot by the thread's timer slack (50 µs by default on Linux) and tokio's
//! timer wheel rounds to whole milliseconds. The timing thread therefore lowers its own timer
//! slack to 1 µs and sleeps until each absolute deadline (`origin + offset`, so error never
//! accumulates the way it does with relative sleeps). It does not spin: measured on this
//! 2-core machine at 100 k events/s, a thread that spins (even yielding between checks) is
//! runnable all the time, so the scheduler time-slices it against the runtime's workers and
//! it stalls for whole slices (2–3 ms), while a thread that sleeps wins the core back on every
//! wake-up. It also asks for a higher priority (nice −10: needs root or `CAP_SYS_NICE`), so the
//! workers it feeds cannot delay it; when it may not, the run says so in its notices.

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
    let tid = rustix::thread::gettid();
    if let Err(e) = rustix::process::setpriority_process(Some(tid), TIMING_NICE) {
        notices.push(format!(
            "could not raise the timing thread's priority to nice {TIMING_NICE} ({e}; needs root \
             or CAP_SYS_NICE); dispatch lateness may be higher on a busy machine"
        ));
    }
    notices
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
