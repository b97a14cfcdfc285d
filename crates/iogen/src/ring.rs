//! The io_uring wrapper and the few raw system calls iogen needs: the only module with
//! `unsafe`.
//!
//! [`Ring`] owns everything the kernel may touch while a request is in flight: the ring, the
//! file (registered as fixed file 0) and one page-aligned buffer per slot (registered as fixed
//! buffers). Slots are the only handle callers get: a slot is marked in flight from `push`
//! until its completion is reaped, the safe buffer accessors refuse in-flight slots, and `Drop`
//! waits for every in-flight request before the buffers are freed (or leaks them if it cannot).
//!
//! Setup follows fio's `t/io_uring`: ask for the wanted flags and, on `EINVAL`, retry without
//! them one at a time; registered buffers and files fall back to plain ones when registration
//! fails. [`RingFlags::names`] reports what actually ran.
//!
//! Every wait is bounded (`IORING_ENTER_EXT_ARG` timeout, or on kernels before 5.11 one pending
//! `IORING_OP_TIMEOUT`), so callers can look at their stop flag. A stop may cancel what is in
//! flight ([`Ring::cancel_in_flight`]) and, if the kernel still holds requests after that,
//! abandon them ([`Ring::abandon`]): the buffers are leaked, never freed under the kernel.

use std::alloc::{Layout, alloc_zeroed, dealloc, handle_alloc_error};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;
use std::time::{Duration, Instant};

use io_uring::{IoUring, opcode, squeue, types};

/// Alignment of every I/O buffer (enough for O_DIRECT on any device).
pub(crate) const ALIGN: usize = 4096;

/// `user_data` of the timeout request that bounds waits on kernels without `EXT_ARG`.
const TAG_TIMEOUT: u64 = u64::MAX;
/// `user_data` of cancel requests. Neither tag is a slot, so `reap` never mistakes them.
const TAG_CANCEL: u64 = u64::MAX - 1;
/// `Drop` cancels requests still in flight after this long, and abandons them after
/// [`DROP_ABANDON`] (the worker does the same, with accounting, when a stop is requested).
const DROP_CANCEL: Duration = Duration::from_secs(1);
const DROP_ABANDON: Duration = Duration::from_secs(5);

/// A zeroed heap buffer aligned to [`ALIGN`], freed on drop.
pub(crate) struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the buffer is the unique owner of its allocation (like `Vec<u8>`), so moving it to
// another thread moves that ownership.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes (rounded up to a whole number of [`ALIGN`] pages).
    pub(crate) fn new(len: usize) -> Self {
        let len = len.max(1).div_ceil(ALIGN) * ALIGN;
        let layout = Self::layout(len);
        // SAFETY: the layout has a non-zero size; the allocation is owned by the returned
        // `AlignedBuf` and freed with the same layout in `Drop`.
        let raw = unsafe { alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            handle_alloc_error(layout)
        };
        Self { ptr, len }
    }

    fn layout(len: usize) -> Layout {
        Layout::from_size_align(len, ALIGN)
            .unwrap_or_else(|_| handle_alloc_error(Layout::new::<u8>()))
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        // SAFETY: `self` owns `len` initialised (zeroed) bytes at `ptr` for its whole life.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with exactly this layout, freed once.
        unsafe { dealloc(self.ptr.as_ptr(), Self::layout(self.len)) }
    }
}

/// The setup flags a ring asks for, and after setup, the ones it runs with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RingFlags {
    pub sqpoll: bool,
    pub iopoll: bool,
    pub single_issuer: bool,
    pub coop_taskrun: bool,
    pub defer_taskrun: bool,
    pub fixed_buffers: bool,
    pub fixed_files: bool,
}

impl RingFlags {
    /// Names of the enabled flags, in a fixed order.
    pub(crate) fn names(&self) -> Vec<String> {
        [
            (self.sqpoll, "sqpoll"),
            (self.iopoll, "iopoll"),
            (self.single_issuer, "single_issuer"),
            (self.coop_taskrun, "coop_taskrun"),
            (self.defer_taskrun, "defer_taskrun"),
            (self.fixed_buffers, "fixed_buffers"),
            (self.fixed_files, "fixed_files"),
        ]
        .into_iter()
        .filter(|(on, _)| *on)
        .map(|(_, n)| n.to_owned())
        .collect()
    }

    /// Drops the first still-enabled setup flag, in fio's retry order; false if none is left.
    fn drop_one(&mut self) -> Option<&'static str> {
        let order: [(&mut bool, &'static str); 5] = [
            (&mut self.sqpoll, "sqpoll"),
            (&mut self.iopoll, "iopoll"),
            (&mut self.defer_taskrun, "defer_taskrun"),
            (&mut self.single_issuer, "single_issuer"),
            (&mut self.coop_taskrun, "coop_taskrun"),
        ];
        for (flag, name) in order {
            if *flag {
                *flag = false;
                return Some(name);
            }
        }
        None
    }
}

/// What a slot's request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RingOp {
    Read,
    Write,
    /// Punch a hole (discard) in the byte range.
    Trim,
    /// fdatasync.
    Flush,
}

/// One io_uring instance with its file and buffers. Not `Send`: it lives and dies on the
/// thread that built it (single-issuer rings require that).
pub(crate) struct Ring {
    // Field order matters: the ring is dropped (closed) before the buffers are freed.
    ring: IoUring,
    bufs: Vec<AlignedBuf>,
    in_flight: Vec<bool>,
    n_in_flight: usize,
    file: File,
    flags: RingFlags,
    /// Setup flags dropped on EINVAL and registrations that failed, for the report.
    pub(crate) dropped: Vec<String>,
    ext_arg: bool,
    /// Without `EXT_ARG`: a timeout request is pending (at most one at a time).
    timeout_armed: bool,
    /// Its duration; the kernel reads it when the request is submitted.
    timeout_ts: types::Timespec,
    /// Requests were abandoned: the buffers are leaked, the registrations left to the kernel.
    abandoned: bool,
}

impl Ring {
    /// Builds a ring of `slots` entries with one `buf_len` buffer per slot over `file`.
    pub(crate) fn new(
        file: File,
        slots: usize,
        buf_len: usize,
        want: RingFlags,
    ) -> io::Result<Ring> {
        let slots = slots.clamp(1, 4096);
        let entries = u32::try_from(slots.next_power_of_two()).unwrap_or(4096);
        let mut flags = want;
        let mut dropped = Vec::new();
        let ring = loop {
            let mut b = IoUring::builder();
            b.setup_cqsize(entries * 2);
            if flags.sqpoll {
                b.setup_sqpoll(1000);
            }
            if flags.iopoll {
                b.setup_iopoll();
            }
            if flags.single_issuer {
                b.setup_single_issuer();
            }
            if flags.coop_taskrun {
                b.setup_coop_taskrun();
            }
            if flags.defer_taskrun {
                b.setup_defer_taskrun();
            }
            match b.build(entries) {
                Ok(r) => break r,
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => match flags.drop_one() {
                    Some(name) => dropped.push(format!("{name}: EINVAL")),
                    None => return Err(e),
                },
                Err(e) => return Err(e),
            }
        };
        let bufs: Vec<AlignedBuf> = (0..slots).map(|_| AlignedBuf::new(buf_len)).collect();
        let iovecs: Vec<libc::iovec> = bufs
            .iter()
            .map(|b| libc::iovec {
                iov_base: b.ptr.as_ptr().cast(),
                iov_len: b.len,
            })
            .collect();
        flags.fixed_buffers = want.fixed_buffers
            && slots <= usize::from(u16::MAX)
            // SAFETY: every iovec points into a buffer owned by `bufs`, which moves into the
            // returned `Ring` (heap allocations do not move) and outlives the ring: `ring` is
            // declared first and so dropped (unregistered and closed) before `bufs` is freed.
            && match unsafe { ring.submitter().register_buffers(&iovecs) } {
                Ok(()) => true,
                Err(e) => {
                    dropped.push(format!("fixed_buffers: {e}"));
                    false
                }
            };
        flags.fixed_files = want.fixed_files
            && match ring.submitter().register_files(&[file.as_raw_fd()]) {
                Ok(()) => true,
                Err(e) => {
                    dropped.push(format!("fixed_files: {e}"));
                    false
                }
            };
        let ext_arg = ring.params().is_feature_ext_arg();
        Ok(Ring {
            ring,
            in_flight: vec![false; slots],
            bufs,
            n_in_flight: 0,
            file,
            flags,
            dropped,
            ext_arg,
            timeout_armed: false,
            timeout_ts: types::Timespec::new(),
            abandoned: false,
        })
    }

    pub(crate) fn flags(&self) -> RingFlags {
        self.flags
    }

    /// Keeps the kernel's I/O workers of this ring (io-wq: the threads that carry out
    /// requests the submitting call cannot finish without blocking, such as a buffered write
    /// that must allocate pages) on `cpus`, off the submitting thread's CPU.
    pub(crate) fn set_worker_cpus(&self, cpus: &[usize]) -> io::Result<()> {
        self.ring.submitter().register_iowq_aff(&cpu_set(cpus))
    }

    pub(crate) fn slots(&self) -> usize {
        self.bufs.len()
    }

    pub(crate) fn buf_len(&self) -> usize {
        self.bufs.first().map_or(0, AlignedBuf::len)
    }

    /// The buffer of a slot that is not in flight.
    pub(crate) fn buf(&self, slot: usize) -> &[u8] {
        assert!(!self.in_flight[slot], "buffer of in-flight slot {slot}");
        self.bufs[slot].as_slice()
    }

    /// The buffer of a slot that is not in flight, for filling.
    pub(crate) fn buf_mut(&mut self, slot: usize) -> &mut [u8] {
        assert!(!self.in_flight[slot], "buffer of in-flight slot {slot}");
        self.bufs[slot].as_mut_slice()
    }

    /// Queues a request on a free slot (submitted by the next `submit`/`wait`).
    pub(crate) fn push(
        &mut self,
        slot: usize,
        op: RingOp,
        offset: u64,
        len: u32,
    ) -> io::Result<()> {
        assert!(!self.in_flight[slot], "slot {slot} is already in flight");
        let len = match op {
            RingOp::Read | RingOp::Write => {
                len.min(u32::try_from(self.bufs[slot].len).unwrap_or(u32::MAX))
            }
            RingOp::Trim | RingOp::Flush => len,
        };
        let ptr = self.bufs[slot].ptr.as_ptr();
        let idx = slot as u16;
        macro_rules! build {
            ($fd:expr) => {
                match op {
                    RingOp::Read if self.flags.fixed_buffers => {
                        opcode::ReadFixed::new($fd, ptr, len, idx)
                            .offset(offset)
                            .build()
                    }
                    RingOp::Read => opcode::Read::new($fd, ptr, len).offset(offset).build(),
                    RingOp::Write if self.flags.fixed_buffers => {
                        opcode::WriteFixed::new($fd, ptr, len, idx)
                            .offset(offset)
                            .build()
                    }
                    RingOp::Write => opcode::Write::new($fd, ptr, len).offset(offset).build(),
                    RingOp::Trim => opcode::Fallocate::new($fd, u64::from(len))
                        .offset(offset)
                        .mode(libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE)
                        .build(),
                    RingOp::Flush => opcode::Fsync::new($fd)
                        .flags(types::FsyncFlags::DATASYNC)
                        .build(),
                }
            };
        }
        let entry: squeue::Entry = if self.flags.fixed_files {
            build!(types::Fixed(0))
        } else {
            build!(types::Fd(self.file.as_raw_fd()))
        }
        .user_data(slot as u64);
        // Submit what is already queued before queuing this one: each request reaches the
        // device as soon as it is ready (like fio's default `iodepth_batch_submit=1`; with a
        // virtio disk this gave ~20% more IOPS at QD32 than submitting a batch under one plug),
        // while the last one of a batch rides on the enter that waits for completions.
        self.submit()?;
        // SAFETY: the entry's buffer is `self.bufs[slot]`, owned by this `Ring`; the slot is
        // marked in flight below, so the safe accessors refuse it until its completion is
        // reaped, and `Drop` waits for all in-flight slots before freeing the buffers (or leaks
        // them). The file it names is `self.file` (or fixed file 0 registered from it), owned
        // likewise.
        unsafe { self.push_entry(&entry)? };
        self.in_flight[slot] = true;
        self.n_in_flight += 1;
        Ok(())
    }

    /// Queues an entry, submitting first if the submission queue is full.
    ///
    /// # Safety
    /// Whatever the entry points to must stay valid until its completion is reaped (or, for
    /// timeouts and cancels, until it is submitted).
    unsafe fn push_entry(&mut self, entry: &squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: forwarded to the caller.
            if unsafe { self.ring.submission().push(entry) }.is_ok() {
                return Ok(());
            }
            self.ring.submit()?;
        }
    }

    /// Asks the kernel to cancel every request in flight (their completions then carry
    /// `-ECANCELED`; requests already at the device usually complete normally).
    pub(crate) fn cancel_in_flight(&mut self) -> io::Result<()> {
        for slot in 0..self.in_flight.len() {
            if self.in_flight[slot] {
                let e = opcode::AsyncCancel::new(slot as u64)
                    .build()
                    .user_data(TAG_CANCEL);
                // SAFETY: a cancel request points to no memory.
                unsafe { self.push_entry(&e)? };
            }
        }
        self.submit()
    }

    /// Gives up on the requests still in flight: their buffers are leaked (the kernel may
    /// still write into them) and the ring must not be used again except to drop it.
    pub(crate) fn abandon(&mut self) {
        std::mem::forget(std::mem::take(&mut self.bufs));
        self.in_flight.iter_mut().for_each(|f| *f = false);
        self.n_in_flight = 0;
        self.abandoned = true;
    }

    /// Submits queued requests without waiting.
    /// (A busy or interrupted submission leaves the requests queued for the next one.)
    pub(crate) fn submit(&mut self) -> io::Result<()> {
        if !self.ring.submission().is_empty() {
            match self.ring.submit() {
                Ok(_) => {}
                Err(e) if transient(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Submits queued requests, waits for at least `min` completions (at most `timeout`), and
    /// appends every available completion as `(slot, result)`.
    pub(crate) fn wait(
        &mut self,
        min: usize,
        timeout: Duration,
        out: &mut Vec<(usize, i32)>,
    ) -> io::Result<()> {
        let min = min.min(self.n_in_flight);
        let r = if min == 0 && !self.flags.defer_taskrun {
            self.submit().map(|()| 0)
        } else if self.ext_arg {
            // With nothing to wait for, a zero timeout still posts deferred completions (only
            // an enter with GETEVENTS runs them); ETIME when there is none.
            let ts = types::Timespec::from(if min == 0 { Duration::ZERO } else { timeout });
            let args = types::SubmitArgs::new().timespec(&ts);
            self.ring.submitter().submit_with_args(min.max(1), &args)
        } else if timeout < Duration::from_micros(100) {
            self.submit()?;
            std::thread::sleep(timeout.min(Duration::from_micros(20)));
            Ok(0)
        } else {
            // Kernels before 5.11: one pending timeout request bounds every wait (a wait may
            // last until an earlier, longer timeout fires).
            if !self.timeout_armed {
                self.timeout_ts = types::Timespec::from(timeout);
                let e = opcode::Timeout::new(&self.timeout_ts)
                    .build()
                    .user_data(TAG_TIMEOUT);
                // SAFETY: the timespec lives in `self`, and the kernel reads it when the request
                // is submitted, which `submit_and_wait` below does.
                unsafe { self.push_entry(&e)? };
                self.timeout_armed = true;
            }
            self.ring.submit_and_wait(min.max(1))
        };
        match r {
            Ok(_) => {}
            Err(e) if transient(&e) || e.raw_os_error() == Some(libc::ETIME) => {}
            Err(e) => return Err(e),
        }
        self.reap(out);
        Ok(())
    }

    /// Appends completions already in the completion queue (no system call unless the ring
    /// defers its task work, which only an enter runs).
    pub(crate) fn poll(&mut self, out: &mut Vec<(usize, i32)>) -> io::Result<()> {
        if self.flags.defer_taskrun && self.n_in_flight > 0 {
            return self.wait(0, Duration::ZERO, out);
        }
        self.submit()?;
        self.reap(out);
        Ok(())
    }

    fn reap(&mut self, out: &mut Vec<(usize, i32)>) {
        for cqe in self.ring.completion() {
            if cqe.user_data() == TAG_TIMEOUT {
                self.timeout_armed = false;
                continue;
            }
            let slot = cqe.user_data() as usize;
            if let Some(f) = self.in_flight.get_mut(slot)
                && *f
            {
                *f = false;
                self.n_in_flight -= 1;
                out.push((slot, cqe.result()));
            }
        }
    }
}

/// An enter that failed for now (interrupted, or the kernel is short of completion space or
/// memory): retried by the next one.
fn transient(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINTR | libc::EBUSY | libc::EAGAIN)
    )
}

impl Drop for Ring {
    fn drop(&mut self) {
        let mut sink = Vec::new();
        let start = Instant::now();
        let mut cancelled = false;
        while self.n_in_flight > 0 {
            let waited = start.elapsed();
            if !cancelled && waited >= DROP_CANCEL {
                cancelled = true;
                let _ = self.cancel_in_flight();
            }
            if waited >= DROP_ABANDON
                || self.wait(1, Duration::from_millis(100), &mut sink).is_err()
            {
                // The kernel may still write into the buffers: never free them.
                self.abandon();
                break;
            }
            sink.clear();
        }
        if self.flags.fixed_files && !self.abandoned {
            // Release the file now: closing the ring tears it down in the background, and a
            // caller that unmounts the target right after the run must not find it busy.
            let _ = self.ring.submitter().unregister_files();
        }
    }
}

/// Deallocates (punches a hole in) a byte range, keeping the file size.
pub(crate) fn punch_hole(file: &File, offset: u64, len: u64) -> io::Result<()> {
    let (Ok(off), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    };
    // SAFETY: plain system call on a descriptor owned by `file`, no pointers involved.
    let r = unsafe {
        libc::fallocate(
            file.as_raw_fd(),
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            off,
            len,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// User and system CPU time of the calling thread (`who = RUSAGE_THREAD`) or process.
pub(crate) fn cpu_time(thread: bool) -> (Duration, Duration) {
    let who = if thread {
        libc::RUSAGE_THREAD
    } else {
        libc::RUSAGE_SELF
    };
    // SAFETY: `rusage` is plain old data; zeroed is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable `rusage` owned by this stack frame.
    if unsafe { libc::getrusage(who, &mut ru) } != 0 {
        return (Duration::ZERO, Duration::ZERO);
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

/// The running kernel's release string (`uname -r`).
pub(crate) fn kernel_release() -> String {
    // SAFETY: `utsname` is plain old data; zeroed is a valid value.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable `utsname` owned by this stack frame.
    if unsafe { libc::uname(&mut u) } != 0 {
        return "unknown".to_owned();
    }
    let bytes: Vec<u8> = u
        .release
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A CPU set of the given CPUs (those past the set's capacity are ignored).
fn cpu_set(cpus: &[usize]) -> libc::cpu_set_t {
    // SAFETY: `cpu_set_t` is a plain bit mask; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        if c < libc::CPU_SETSIZE as usize {
            // SAFETY: `c` is inside the set's capacity (checked above); `set` is owned here.
            unsafe { libc::CPU_SET(c, &mut set) };
        }
    }
    set
}

/// The CPUs the calling thread may run on (its affinity mask: `taskset`, a cgroup's cpuset).
pub(crate) fn allowed_cpus() -> io::Result<Vec<usize>> {
    let mut set = cpu_set(&[]);
    // SAFETY: `set` is a valid, writable `cpu_set_t` of the size passed; pid 0 is this thread.
    let r = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: `i` is inside the set's capacity; `set` is a valid, initialised set.
        .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
        .collect())
}

/// Binds the calling thread to `cpus`.
pub(crate) fn pin_thread(cpus: &[usize]) -> io::Result<()> {
    let set = cpu_set(cpus);
    // SAFETY: `set` is a valid `cpu_set_t` of the size passed, read only; pid 0 is this thread.
    let r = unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sets the calling thread's timer slack to 1 ns so short sleeps wake on time.
pub(crate) fn tight_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer argument and affects only this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// `CLOCK_MONOTONIC` now, in ns (the clock `Instant` uses).
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec owned by this stack frame.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec.max(0) as u64 * 1_000_000_000 + ts.tv_nsec.max(0) as u64
}

/// Sleeps until `CLOCK_MONOTONIC` reaches `deadline_ns` (an absolute deadline, so time spent
/// before the call, or a preemption just before it, does not push the wake-up later).
pub(crate) fn sleep_until(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as _, // time_t (its name is deprecated on musl)
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `ts` is a valid timespec; the remainder pointer may be null with TIMER_ABSTIME.
    // An interrupted sleep (EINTR) simply returns early; callers re-check the clock.
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
}

/// Asks the scheduler for a short time slice (100 µs) for the calling thread, keeping its
/// policy and nice value. Since Linux 6.12 a fair-class task with a shorter slice gets an
/// earlier virtual deadline, so a timer wake-up preempts a CPU-bound neighbour instead of
/// waiting for its slice to end; older kernels ignore it. Unprivileged; returns whether the
/// kernel accepted it.
pub(crate) fn short_time_slice() -> bool {
    // SAFETY: getpriority takes plain integers; -1 with errno set would only mean "unknown",
    // and then nice 0 is asked for (the default).
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    // SAFETY: `sched_attr` is plain old data; zeroed is a valid value.
    let mut attr: libc::sched_attr = unsafe { std::mem::zeroed() };
    attr.size = size_of::<libc::sched_attr>() as u32;
    attr.sched_policy = libc::SCHED_OTHER as u32;
    attr.sched_nice = nice.clamp(-20, 19);
    attr.sched_runtime = 100_000;
    // SAFETY: pid 0 is the calling thread; `attr` is a valid sched_attr of the size it names.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            0,
            &attr as *const libc::sched_attr,
            0,
        )
    };
    r == 0
}
