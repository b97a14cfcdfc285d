//! Waiting for an absolute deadline with microsecond precision.
//!
//! OS sleeps overshoot by tens of microseconds (timer slack) and tokio's timer wheel rounds to
//! whole milliseconds. So: sleep until ~100 µs before the deadline, then spin. The spin does
//! not yield: on a busy machine `sched_yield` hands the core to another runnable thread for a
//! whole time slice (milliseconds), which is exactly the lateness this avoids. Deadlines are absolute (`origin + offset`), so error never accumulates
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
            std::hint::spin_loop();
        }
    }
}
