//! The two engines behind one slot-based interface: io_uring ([`Ring`]) and a portable pool of
//! threads doing `pread`/`pwrite` (for kernels or sandboxes without io_uring, and on request).
//!
//! Both hand out numbered slots, each with its own aligned buffer; a request occupies a slot
//! from `push` until its completion comes back from `wait`/`poll` as `(slot, result)`, where
//! the result is bytes transferred or a negated errno, exactly like a CQE.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::ring::{self, AlignedBuf, Ring, RingFlags, RingOp};
use crate::{EngineChoice, EngineOptions, Error, SyncStall};

/// Which engine a backend runs and with which flags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct BackendInfo {
    pub engine: &'static str,
    pub flags: Vec<String>,
    pub notes: Vec<String>,
}

/// One engine instance, owned by one worker thread.
pub(crate) enum Backend {
    Uring(Box<Ring>),
    Sync(SyncPool),
}

/// How a worker wants its backend built.
pub(crate) struct BackendConfig {
    pub slots: usize,
    pub buf_len: usize,
    /// Ask for deferred task work (cheapest for closed loops that always block in the kernel;
    /// open loops that spin on the completion queue want completions posted promptly instead).
    pub defer_taskrun: bool,
}

impl Backend {
    /// Builds the engine `opts` asks for over `file`, falling back from io_uring to the
    /// thread pool under [`EngineChoice::Auto`].
    pub(crate) fn open(
        file: File,
        cfg: &BackendConfig,
        opts: &EngineOptions,
    ) -> Result<Backend, Error> {
        if opts.engine == EngineChoice::Sync {
            return SyncPool::new(file, cfg, opts.sync_stall, Vec::new()).map(Backend::Sync);
        }
        let want = RingFlags {
            sqpoll: opts.sqpoll,
            iopoll: opts.iopoll,
            single_issuer: true,
            // Open loops spin on the completion queue: completions must be posted without
            // waiting for the task to enter the kernel, so no cooperative task running there.
            coop_taskrun: cfg.defer_taskrun,
            defer_taskrun: cfg.defer_taskrun && !opts.sqpoll,
            fixed_buffers: true,
            fixed_files: true,
        };
        let clone = file.try_clone()?;
        match Ring::new(file, cfg.slots, cfg.buf_len, want) {
            Ok(r) => Ok(Backend::Uring(Box::new(r))),
            Err(e) if opts.engine == EngineChoice::Auto => {
                let note =
                    format!("io_uring setup failed ({e}); fell back to the thread-pool engine");
                SyncPool::new(clone, cfg, opts.sync_stall, vec![note]).map(Backend::Sync)
            }
            Err(e) => Err(Error::RingSetup(e)),
        }
    }

    pub(crate) fn info(&self) -> BackendInfo {
        match self {
            Backend::Uring(r) => BackendInfo {
                engine: "io_uring",
                flags: r.flags().names(),
                notes: r.dropped.clone(),
            },
            Backend::Sync(p) => BackendInfo {
                engine: "sync",
                flags: vec![format!("threads={}", p.threads.len())],
                notes: p.notes.clone(),
            },
        }
    }

    /// Keeps the ring's kernel I/O workers on `cpus` (see [`crate::CpuPlacement`]); the
    /// thread-pool engine has none (its threads are ours and inherit the caller's CPU).
    pub(crate) fn set_worker_cpus(&self, cpus: &[usize]) -> io::Result<()> {
        match self {
            Backend::Uring(r) => r.set_worker_cpus(cpus),
            Backend::Sync(_) => Ok(()),
        }
    }

    pub(crate) fn slots(&self) -> usize {
        match self {
            Backend::Uring(r) => r.slots(),
            Backend::Sync(p) => p.bufs.len(),
        }
    }

    pub(crate) fn buf_len(&self) -> usize {
        match self {
            Backend::Uring(r) => r.buf_len(),
            Backend::Sync(p) => p.buf_len,
        }
    }

    pub(crate) fn buf(&self, slot: usize) -> &[u8] {
        match self {
            Backend::Uring(r) => r.buf(slot),
            Backend::Sync(p) => p.bufs[slot].as_ref().map_or(&[], AlignedBuf::as_slice),
        }
    }

    pub(crate) fn buf_mut(&mut self, slot: usize) -> &mut [u8] {
        match self {
            Backend::Uring(r) => r.buf_mut(slot),
            Backend::Sync(p) => p.bufs[slot]
                .as_mut()
                .map_or(&mut [], AlignedBuf::as_mut_slice),
        }
    }

    pub(crate) fn push(
        &mut self,
        slot: usize,
        op: RingOp,
        offset: u64,
        len: u32,
    ) -> io::Result<()> {
        match self {
            Backend::Uring(r) => r.push(slot, op, offset, len),
            Backend::Sync(p) => p.push(slot, op, offset, len),
        }
    }

    pub(crate) fn submit(&mut self) -> io::Result<()> {
        match self {
            Backend::Uring(r) => r.submit(),
            Backend::Sync(_) => Ok(()),
        }
    }

    /// Waits for at least `min` completions, at most `timeout`.
    pub(crate) fn wait(
        &mut self,
        min: usize,
        timeout: Duration,
        out: &mut Vec<(usize, i32)>,
    ) -> io::Result<()> {
        match self {
            Backend::Uring(r) => r.wait(min, timeout, out),
            Backend::Sync(p) => {
                p.wait(min, timeout, out);
                Ok(())
            }
        }
    }

    pub(crate) fn poll(&mut self, out: &mut Vec<(usize, i32)>) -> io::Result<()> {
        match self {
            Backend::Uring(r) => r.poll(out),
            Backend::Sync(p) => {
                p.wait(0, Duration::ZERO, out);
                Ok(())
            }
        }
    }

    /// Asks for everything in flight to be cancelled (io_uring only; a blocked `pread` cannot
    /// be interrupted).
    pub(crate) fn cancel(&mut self) -> io::Result<()> {
        match self {
            Backend::Uring(r) => r.cancel_in_flight(),
            Backend::Sync(_) => Ok(()),
        }
    }

    /// Gives up on what is in flight: its buffers are leaked (io_uring) or left with the pool
    /// threads, which are not waited for. Only dropping or finishing the backend is allowed
    /// afterwards.
    pub(crate) fn abandon(&mut self) {
        match self {
            Backend::Uring(r) => r.abandon(),
            Backend::Sync(p) => p.abandoned = true,
        }
    }

    /// CPU time of helper threads (the pool's), user + system, once they have exited.
    pub(crate) fn finish(self) -> (Duration, Duration) {
        match self {
            Backend::Uring(r) => {
                drop(r);
                (Duration::ZERO, Duration::ZERO)
            }
            Backend::Sync(p) => p.shutdown(),
        }
    }
}

struct Job {
    slot: usize,
    op: RingOp,
    offset: u64,
    len: usize,
    buf: AlignedBuf,
}

struct Done {
    slot: usize,
    res: i32,
    buf: AlignedBuf,
}

/// A pool of threads doing blocking I/O; buffers travel with their requests.
pub(crate) struct SyncPool {
    bufs: Vec<Option<AlignedBuf>>,
    buf_len: usize,
    tx: Option<Sender<Job>>,
    rx: Receiver<Done>,
    threads: Vec<JoinHandle<()>>,
    cpu_ns: Arc<[AtomicU64; 2]>,
    in_flight: usize,
    notes: Vec<String>,
    /// Requests were given up on: `shutdown` does not wait for the threads.
    abandoned: bool,
}

impl SyncPool {
    fn new(
        file: File,
        cfg: &BackendConfig,
        stall: Option<SyncStall>,
        notes: Vec<String>,
    ) -> Result<SyncPool, Error> {
        let slots = cfg.slots.clamp(1, 4096);
        let n_threads = slots.min(64);
        let file = Arc::new(file);
        let (tx, job_rx) = mpsc::channel::<Job>();
        let job_rx = Arc::new(Mutex::new(job_rx));
        let (done_tx, rx) = mpsc::channel::<Done>();
        let cpu_ns = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let counter = Arc::new(AtomicU64::new(0));
        let mut threads = Vec::with_capacity(n_threads);
        for i in 0..n_threads {
            let (file, job_rx, done_tx) = (Arc::clone(&file), Arc::clone(&job_rx), done_tx.clone());
            let (cpu_ns, counter) = (Arc::clone(&cpu_ns), Arc::clone(&counter));
            let t = std::thread::Builder::new()
                .name(format!("iogen-sync-{i}"))
                .spawn(move || {
                    loop {
                        let job = match job_rx.lock() {
                            Ok(rx) => rx.recv(),
                            Err(_) => break,
                        };
                        let Ok(mut job) = job else { break };
                        let n = counter.fetch_add(1, Ordering::Relaxed);
                        if let Some(s) = stall.filter(|s| s.at_io == n) {
                            std::thread::sleep(s.sleep);
                        }
                        let res = do_io(&file, &mut job);
                        if done_tx
                            .send(Done {
                                slot: job.slot,
                                res,
                                buf: job.buf,
                            })
                            .is_err()
                        {
                            break;
                        }
                    }
                    let (u, s) = ring::cpu_time(true);
                    cpu_ns[0].fetch_add(u.as_nanos() as u64, Ordering::Relaxed);
                    cpu_ns[1].fetch_add(s.as_nanos() as u64, Ordering::Relaxed);
                })?;
            threads.push(t);
        }
        Ok(SyncPool {
            bufs: (0..slots)
                .map(|_| Some(AlignedBuf::new(cfg.buf_len)))
                .collect(),
            buf_len: cfg.buf_len.max(1).div_ceil(ring::ALIGN) * ring::ALIGN,
            tx: Some(tx),
            rx,
            threads,
            cpu_ns,
            in_flight: 0,
            notes,
            abandoned: false,
        })
    }

    fn push(&mut self, slot: usize, op: RingOp, offset: u64, len: u32) -> io::Result<()> {
        let buf = self.bufs[slot]
            .take()
            .ok_or_else(|| io::Error::other(format!("slot {slot} is already in flight")))?;
        let len = match op {
            RingOp::Read | RingOp::Write => (len as usize).min(buf.len()),
            RingOp::Trim | RingOp::Flush => len as usize,
        };
        let job = Job {
            slot,
            op,
            offset,
            len,
            buf,
        };
        match self.tx.as_ref().map(|tx| tx.send(job)) {
            Some(Ok(())) => {
                self.in_flight += 1;
                Ok(())
            }
            Some(Err(mpsc::SendError(job))) => {
                self.bufs[slot] = Some(job.buf);
                Err(io::Error::other("thread-pool engine has stopped"))
            }
            None => Err(io::Error::other("thread-pool engine has stopped")),
        }
    }

    fn wait(&mut self, min: usize, timeout: Duration, out: &mut Vec<(usize, i32)>) {
        let min = min.min(self.in_flight);
        let mut got = 0;
        loop {
            let next = if got < min {
                self.rx.recv_timeout(timeout)
            } else {
                self.rx.try_recv().map_err(|_| RecvTimeoutError::Timeout)
            };
            let Ok(d) = next else { break };
            self.bufs[d.slot] = Some(d.buf);
            self.in_flight -= 1;
            out.push((d.slot, d.res));
            got += 1;
        }
    }

    fn shutdown(mut self) -> (Duration, Duration) {
        self.tx = None;
        if self.abandoned {
            // Threads blocked in a system call keep their jobs (and buffers) and end on their
            // own once it returns; their CPU time is not waited for.
            self.threads.clear();
        } else {
            // Bounded like the ring's drop: a thread stuck for good is left behind.
            let mut sink = Vec::new();
            for _ in 0..50 {
                if self.in_flight == 0 {
                    break;
                }
                self.wait(1, Duration::from_millis(100), &mut sink);
            }
            if self.in_flight > 0 {
                self.threads.clear();
            }
        }
        for t in std::mem::take(&mut self.threads) {
            let _ = t.join();
        }
        (
            Duration::from_nanos(self.cpu_ns[0].load(Ordering::Relaxed)),
            Duration::from_nanos(self.cpu_ns[1].load(Ordering::Relaxed)),
        )
    }
}

fn do_io(file: &File, job: &mut Job) -> i32 {
    let r = match job.op {
        RingOp::Read => file.read_at(&mut job.buf.as_mut_slice()[..job.len], job.offset),
        RingOp::Write => file.write_at(&job.buf.as_slice()[..job.len], job.offset),
        RingOp::Trim => ring::punch_hole(file, job.offset, job.len as u64).map(|()| job.len),
        RingOp::Flush => file.sync_data().map(|()| 0),
    };
    match r {
        Ok(n) => i32::try_from(n).unwrap_or(i32::MAX),
        Err(e) => -e.raw_os_error().unwrap_or(libc::EIO),
    }
}
