//! Waiting for an absolute deadline with microsecond precision.
//!
//! OS sleeps overshoot by the thread's timer slack (50 µs by default on Linux) and tokio's
//! timer wheel rounds to whole milliseconds. So the timing thread lowers its own timer slack
//! to 1 µs (`/proc/<tid>/timerslack_ns`, writable by the thread's owner, no privilege needed),
//! sleeps until shortly before the deadline, then spins, yielding the core between checks
//! (measured: a pure `spin_loop` spin is several times later on a loaded 2-core machine,
//! because a thread that never blocks loses every wake-up preemption, while a thread that
//! mostly sleeps wins them). Deadlines are absolute (`origin + offset`), so error never
//! accumulates the way it does with relative sleeps.

use std::time::{Duration, Instant};

/// How long before a deadline to stop sleeping and start spinning.
pub const SPIN_WINDOW: Duration = Duration::from_micros(20);

/// Timer slack the timing thread asks for, ns.
pub const TIMER_SLACK_NS: u64 = 1_000;

/// Lowers the calling thread's timer slack to [`TIMER_SLACK_NS`] so its sleeps end within
/// microseconds of the requested time. Linux only; elsewhere (or without /proc) an error.
pub fn tighten_timer_slack() -> std::io::Result<()> {
    // `/proc/thread-self` links to `<pid>/task/<tid>`; `/proc/<tid>/timerslack_ns` is the
    // per-thread file (there is no `timerslack_ns` under `task/`).
    let link = std::fs::read_link("/proc/thread-self")?;
    let tid = link
        .file_name()
        .and_then(|t| t.to_str())
        .ok_or_else(|| std::io::Error::other("unexpected /proc/thread-self link"))?
        .to_owned();
    fs_err::write(
        format!("/proc/{tid}/timerslack_ns"),
        TIMER_SLACK_NS.to_string(),
    )
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
        let left = deadline - now;
        if left > SPIN_WINDOW {
            std::thread::sleep((left - SPIN_WINDOW).min(Duration::from_millis(50)));
        } else {
            std::thread::yield_now();
        }
    }
}
