//! Waiting for an absolute deadline with microsecond precision.
//!
//! OS sleeps overshoot by tens of microseconds (timer slack) and tokio's timer wheel rounds to
//! whole milliseconds. So: sleep until ~100 µs before the deadline, then spin, yielding the
//! core between checks (measured: a pure `spin_loop` spin is several times later on a loaded
//! 2-core machine, because a thread that never blocks loses every wake-up preemption). Deadlines are absolute (`origin + offset`), so error never accumulates
//! the way it does with relative sleeps.

use std::time::{Duration, Instant};

/// How long before a deadline to stop sleeping and start spinning.
pub const SPIN_WINDOW: Duration = Duration::from_micros(100);

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
