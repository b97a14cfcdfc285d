//! Waiting for an absolute deadline with microsecond precision.
//!
//! OS sleeps overshoot by the thread's timer slack (50 µs by default on Linux) and tokio's
//! timer wheel rounds to whole milliseconds. A timing lane therefore lowers its own timer
//! slack to 1 µs and sleeps until each absolute deadline (`origin + offset`, so error never
//! accumulates the way it does with relative sleeps). It does not spin: on this 2-core
//! machine at 100 k events/s, yield-spinning in the last 20 µs gave lateness p90 0.73 ms and
//! p99 1.83 ms, pure sleeping p90 82–86 µs and p99 0.42–0.50 ms (docs/performance-history.md,
//! Replay engine) — our reading: a thread that is always runnable gets time-sliced against the
//! workers, while one that sleeps wins its core back at each wake-up. It runs real-time
//! (SCHED_FIFO) when permitted, else at nice −10 (both need root or `CAP_SYS_NICE`); when
//! neither is allowed, the run says so in its notices. The module notes of `timing` say why.
//!
//! While a run lasts it also holds a CPU wake-up latency request of 0 µs on
//! `/dev/cpu_dma_latency` (the kernel's PM QoS interface, as cyclictest does), which keeps idle
//! CPUs out of deep idle states. On this VM an idle CPU sometimes took its timer interrupt a
//! whole 4 ms tick late (seen with `perf` as `hrtimer_expire_entry` 4006 µs after expiry,
//! on the idle task); with the request held, dispatch lateness p99.9 fell from 2.1–3.4 ms to
//! 0.69–1.12 ms in 4 runs (docs/performance-history.md, Replay engine). Idle CPUs then poll instead
//! of halting, which costs power, not time of the run's threads; the request ends with the run.

use std::num::NonZeroU64;
use std::time::{Duration, Instant};

/// Timer slack a timing lane asks for, ns.
pub const TIMER_SLACK_NS: u64 = 1_000;

/// Nice value a timing lane asks for when it may not run real-time.
pub const TIMING_NICE: i32 = -10;

/// Prepares the calling thread to be a timing lane: 1 µs timer slack, then SCHED_FIFO at
/// [`TIMING_RT_PRIORITY`] when `realtime` (falling back to nice −10), else nice −10. Returns a
/// notice for each setting it could not make (the thread still works, less precisely).
///
/// It allocates once first, so that the thread's allocator state is set up while the thread
/// still has normal priority: an allocator may take a spin lock for that (snmalloc's pool of
/// per-thread allocators), and a real-time thread spinning on a lock held by a thread it
/// preempted keeps that thread off its CPU. With both lanes spinning so, nothing of normal
/// priority ran until the kernel's real-time throttling stopped them: the run stood still
/// for ~950 ms (docs/PERFORMANCE.md). [`leave_timing_thread`] undoes the priority before the
/// thread ends, when its allocator state is handed back.
pub fn prepare_timing_thread(realtime: bool) -> Vec<String> {
    drop(std::hint::black_box(vec![0u8; 64]));
    let mut notices = Vec::new();
    if let Err(e) = rustix::thread::set_current_timer_slack(NonZeroU64::new(TIMER_SLACK_NS)) {
        notices.push(format!(
            "could not lower the timing lanes' timer slack to {TIMER_SLACK_NS} ns ({e}); \
             dispatch lateness may be higher"
        ));
    }
    let rt = if realtime {
        match make_realtime(TIMING_RT_PRIORITY) {
            Ok(()) => return notices,
            Err(e) => Some(e),
        }
    } else {
        None
    };
    let nice = raise_priority();
    match (rt, nice) {
        (Some(rt), Ok(())) => notices.push(format!(
            "could not make the timing lanes real-time (SCHED_FIFO {TIMING_RT_PRIORITY}: {rt}; \
             needs root, CAP_SYS_NICE or an RLIMIT_RTPRIO); they run at nice {TIMING_NICE} \
             instead, and dispatch lateness will be higher on a busy machine"
        )),
        (Some(rt), Err(e)) => notices.push(format!(
            "could not make the timing lanes real-time (SCHED_FIFO {TIMING_RT_PRIORITY}: {rt}) \
             nor raise them to nice {TIMING_NICE} ({e}); needs root or CAP_SYS_NICE; they run \
             at the default priority, and dispatch lateness will be higher on a busy machine"
        )),
        (None, Err(e)) => notices.push(format!(
            "could not raise the timing lanes' priority to nice {TIMING_NICE} ({e}; needs root \
             or CAP_SYS_NICE); dispatch lateness may be higher on a busy machine"
        )),
        (None, Ok(())) => {}
    }
    notices
}

/// Returns a timing lane to normal scheduling (SCHED_OTHER, nice 0) before it ends: what a
/// thread's end does (its allocator state handed back, thread-local destructors) must not
/// run real-time, for the reason [`prepare_timing_thread`] gives. Best effort: a failure
/// only leaves the thread as it was.
pub fn leave_timing_thread() {
    use thread_priority::{NormalThreadSchedulePolicy, ThreadPriority, ThreadSchedulePolicy};
    let _ = thread_priority::set_thread_priority_and_policy(
        thread_priority::thread_native_id(),
        ThreadPriority::Crossplatform(0u8.try_into().unwrap_or_default()),
        ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Other),
    );
    let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), 0);
}

/// Real-time priority of the timing lanes (SCHED_FIFO, 1–99): low, so that anything the
/// machine's administrator made real-time still comes first.
pub const TIMING_RT_PRIORITY: u8 = 10;

/// Makes the calling thread a SCHED_FIFO thread at `priority`.
fn make_realtime(priority: u8) -> Result<(), String> {
    use thread_priority::{
        RealtimeThreadSchedulePolicy, ThreadPriority, ThreadPriorityValue, ThreadSchedulePolicy,
    };
    let prio = ThreadPriorityValue::try_from(priority)?;
    thread_priority::set_thread_priority_and_policy(
        thread_priority::thread_native_id(),
        ThreadPriority::Crossplatform(prio),
        ThreadSchedulePolicy::Realtime(RealtimeThreadSchedulePolicy::Fifo),
    )
    .map_err(|e| match e {
        thread_priority::Error::OS(code) => std::io::Error::from_raw_os_error(code).to_string(),
        other => format!("{other:?}"),
    })
}

/// Pins the calling thread to `cpu`.
pub fn pin_to_cpu(cpu: usize) -> rustix::io::Result<()> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set)
}

/// The CPUs this process may run on, in order.
pub fn allowed_cpus() -> Vec<usize> {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..rustix::thread::CpuSet::MAX_CPU)
            .filter(|&i| set.is_set(i))
            .collect(),
        Err(_) => Vec::new(),
    }
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

/// A waker that unparks one thread: how a thread of its own (the sink, the hand-off thread)
/// waits for a futures channel or the futures it polls, without a runtime.
#[derive(Debug)]
pub struct Unpark(std::thread::Thread);

impl Unpark {
    /// Wakes the calling thread.
    pub fn current() -> Self {
        Self(std::thread::current())
    }
}

impl std::task::Wake for Unpark {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        self.0.unpark();
    }
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

/// Nanoseconds from `origin` to `t` (0 when `t` is earlier).
pub fn ns_since(origin: Instant, t: Instant) -> u64 {
    u64::try_from(t.saturating_duration_since(origin).as_nanos()).unwrap_or(u64::MAX)
}

/// What looking at the clock costs on this host: a thread that sleeps on an absolute grid of
/// `period_ns` (the timing lanes' grid at high event rates), measured by its own CPU clock.
///
/// On the benchmark VM a timer wake-up costs 30–70 µs of CPU (the kernel's timer and
/// interrupt paths under the hypervisor), so a thread looking at the clock every 40 µs takes a
/// whole CPU and still cannot keep its grid (docs/PERFORMANCE.md, *The host's timing floor*):
/// every timing design that sleeps pays it, and one that spins pays the CPU outright.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WakeCost {
    /// The grid the thread slept on, ns.
    pub period_ns: u64,
    /// Wake-ups measured.
    pub wakes: u64,
    /// The thread's CPU time per wake-up, ns (its own CPU clock, kernel time included).
    pub cpu_ns_per_wake: u64,
    /// Wall time per wake-up, ns: above `period_ns` when the host cannot keep the grid.
    pub wall_ns_per_wake: u64,
}

impl WakeCost {
    /// The share of one CPU a thread waking at every point of the grid takes.
    pub fn cpu_share(&self) -> f64 {
        self.cpu_ns_per_wake as f64 / self.wall_ns_per_wake.max(1) as f64
    }
}

/// Measures [`WakeCost`] on a thread of its own (with the timing lanes' timer slack and no
/// priority of its own) for `length`, at a grid of `period`.
pub fn wake_cost(period: Duration, length: Duration) -> std::io::Result<WakeCost> {
    let period = period.max(Duration::from_micros(1));
    std::thread::Builder::new()
        .name("cnsreplay-wakecost".into())
        .spawn(move || {
            let _ = rustix::thread::set_current_timer_slack(NonZeroU64::new(TIMER_SLACK_NS));
            let cpu = || {
                let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
                Duration::new(t.tv_sec.unsigned_abs(), t.tv_nsec.unsigned_abs() as u32)
            };
            let (start, cpu0) = (Instant::now(), cpu());
            let end = start + length;
            let mut next = start;
            let mut wakes = 0u64;
            while next < end {
                next += period;
                wait_until(next, || false);
                wakes += 1;
            }
            let wall = start.elapsed();
            let used = cpu().saturating_sub(cpu0);
            let per = |d: Duration| {
                u64::try_from(d.as_nanos() / u128::from(wakes.max(1))).unwrap_or(u64::MAX)
            };
            WakeCost {
                period_ns: u64::try_from(period.as_nanos()).unwrap_or(u64::MAX),
                wakes,
                cpu_ns_per_wake: per(used),
                wall_ns_per_wake: per(wall),
            }
        })?
        .join()
        .map_err(|_| std::io::Error::other("the wake-cost thread panicked"))
}
