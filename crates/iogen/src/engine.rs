//! The worker loop shared by phases and streams: one backend, one thread, one clock.
//!
//! A [`Source`] says what to issue next and when: now (`Ready`), at an absolute deadline
//! (`At`), nothing until more requests arrive (`Idle`), or never again (`Done`). Each turn of
//! the loop fills every free slot with ready requests, stamps them with one submission time,
//! and submits them in the same system call that waits for the next completion, so a closed
//! loop refills each freed slot at once and keeps its queue full. Open loops block until
//! ~[`SPIN_NS`] before the next deadline (in the kernel waiting for completions, or in an
//! absolute `clock_nanosleep` when nothing is in flight), then spin on the clock while polling
//! completions, and go back to the top of the loop as soon as a completion arrives or the
//! deadline passes. Completions are stamped once per reaped batch, and that stamp is the
//! loop's "now" for the next turn. Closed-loop requests have no intended time: theirs is their
//! submission time.
//!
//! Spinning is rationed process-wide ([`SpinToken`]): by default at most one fewer workers than
//! the process may use CPUs spin at once (`EngineOptions::spinners`), so a spinning worker
//! never takes the last CPU from the workers, the kernel's I/O threads and (in the replay
//! engine) the timing lane whose turn is due; a worker that finds no token sleeps to its
//! deadline instead. Without the ration, five open-loop phases on two CPUs spun in each
//! other's turns (docs/PERFORMANCE.md, *iogen's issue lateness in the main job*).
//!
//! Every wait is bounded by [`STOP_POLL`], so a stop request is seen within that. After a
//! stop nothing new is issued; what is in flight gets [`CANCEL_AFTER`] to complete, is then
//! cancelled, and after [`ABANDON_AFTER`] is given up on (counted as errors), so a stop always
//! ends the run with partial results, even on storage that never answers.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use trace_format::IoKind;

use crate::backend::Backend;
use crate::generate::{GenOp, OpGen, Rng, Schedule};
use crate::ring::RingOp;
use crate::stats::Recorder;
use crate::verify::Verifier;
use crate::written::Recording;
use crate::{Error, Stop};

/// Spin (instead of sleeping) this close to a deadline.
pub(crate) const SPIN_NS: u64 = 50_000;
/// The spin margin grows by how late recent timed wake-ups were, up to this much: on a busy
/// or virtual machine a sleeping thread may wake 100 µs–1 ms after its timer, and spinning
/// that much longer before each deadline is cheap next to issuing late. Each wake-up's
/// lateness decays by 1/[`OVERSLEEP_DECAY`] per later wake-up.
pub(crate) const MAX_MARGIN_NS: u64 = 1_000_000;
const OVERSLEEP_DECAY: u64 = 64;
/// Workers spinning now, over every worker of the process.
static SPINNING: AtomicUsize = AtomicUsize::new(0);

/// The right to spin before a deadline: one of `max` per process, given back on drop.
struct SpinToken(&'static AtomicUsize);

impl SpinToken {
    fn take(max: usize) -> Option<Self> {
        Self::take_from(&SPINNING, max)
    }

    fn take_from(count: &'static AtomicUsize, max: usize) -> Option<Self> {
        count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| SpinToken(count))
    }
}

impl Drop for SpinToken {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// How many workers may spin at once by default: the CPUs this process may use, less one (at
/// least one).
fn default_spinners() -> usize {
    static MAX: OnceLock<usize> = OnceLock::new();
    *MAX.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, std::num::NonZero::get)
            .saturating_sub(1)
            .max(1)
    })
}

/// Longest blocking wait: the stop flag is checked at least this often.
pub(crate) const STOP_POLL: Duration = Duration::from_millis(100);
/// After a stop, in-flight requests are cancelled after this long...
pub(crate) const CANCEL_AFTER: Duration = Duration::from_secs(1);
/// ...and given up on (recorded as errors, buffers leaked) after this long.
pub(crate) const ABANDON_AFTER: Duration = Duration::from_secs(5);

/// One request a source hands out.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Item {
    pub kind: IoKind,
    pub offset: u64,
    pub len: u64,
    /// Intended start, ns from the worker's base; `None` = closed loop.
    pub intended: Option<u64>,
}

/// What a source has next.
pub(crate) enum Next {
    Ready(Item),
    At(u64),
    Idle,
    Done,
}

/// A supplier of requests for [`Worker::run`].
pub(crate) trait Source {
    /// The next request at time `now` (ns); `busy` tells whether a byte range overlaps
    /// requests in flight (only consulted in verify mode).
    fn next(&mut self, now: u64, busy: &dyn Fn(u64, u64) -> bool) -> Next;
    /// Stop handing out requests (a stop was requested).
    fn stop(&mut self);
    /// Nothing is in flight and nothing is due within `timeout`: a source that can receive
    /// new requests blocks until one arrives or the timeout passes, and returns true. The
    /// default returns false at once, and the worker sleeps instead.
    fn idle_wait(&mut self, _timeout: Duration) -> bool {
        false
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct SlotState {
    kind: Option<IoKind>,
    offset: u64,
    len: u64,
    intended: u64,
    submitted: u64,
}

/// One worker: a backend, its slots and what it records.
pub(crate) struct Worker<'a> {
    pub backend: Backend,
    pub rec: Recorder,
    pub verifier: Option<Verifier<'a>>,
    /// The acknowledged writes, when the phase records its written set.
    pub written: Option<Recording>,
    slots: Vec<SlotState>,
    free: Vec<usize>,
    pub base: Instant,
    /// `CLOCK_MONOTONIC` at `base`, ns (for absolute sleeps).
    base_mono: u64,
    done: Vec<(usize, i32)>,
    pushed: Vec<usize>,
    /// Time of the last completion, ns from the base.
    pub last_completion: u64,
    /// Spin margin before a deadline, ns (see [`SPIN_NS`]).
    spin_ns: u64,
    /// Decaying high-water mark of how late timed wake-ups were, ns (see [`MAX_MARGIN_NS`]).
    oversleep_ns: u64,
    /// The latest timed wake-up seen, ns after its timer.
    pub max_oversleep_ns: u64,
    /// Workers of the process that may spin at once (see [`SpinToken`]).
    spinners: usize,
}

fn ring_op(k: IoKind) -> RingOp {
    match k {
        IoKind::Read => RingOp::Read,
        IoKind::Write => RingOp::Write,
        IoKind::Trim => RingOp::Trim,
        IoKind::Flush => RingOp::Flush,
    }
}

impl<'a> Worker<'a> {
    pub(crate) fn new(
        mut backend: Backend,
        mut rec: Recorder,
        verifier: Option<Verifier<'a>>,
    ) -> Self {
        let n = backend.slots();
        // Writes carry incompressible data, not zeros: random bytes in the first slot,
        // copied to the others (a copy costs a tenth of drawing them, which matters for a
        // stream's setup: 64 slots of 1 MiB).
        let mut rng = Rng::new(0xb0f ^ n as u64);
        if n > 0 {
            for w in backend.buf_mut(0).chunks_mut(8) {
                w.copy_from_slice(&rng.next_u64().to_le_bytes()[..w.len()]);
            }
            let first = backend.buf(0).to_vec();
            for s in 1..n {
                let b = backend.buf_mut(s);
                let k = b.len().min(first.len());
                b[..k].copy_from_slice(&first[..k]);
            }
        }
        rec.set_base_wall(std::time::SystemTime::now());
        Worker {
            backend,
            rec,
            verifier,
            written: None,
            slots: vec![SlotState::default(); n],
            free: (0..n).rev().collect(),
            base_mono: crate::ring::monotonic_ns(),
            base: Instant::now(),
            done: Vec::with_capacity(n),
            pushed: Vec::with_capacity(n),
            last_completion: 0,
            spin_ns: SPIN_NS,
            oversleep_ns: 0,
            max_oversleep_ns: 0,
            spinners: default_spinners(),
        }
    }

    /// Sets the spin margin before each deadline (`None`: [`SPIN_NS`]).
    pub(crate) fn set_spin(&mut self, spin: Option<Duration>) {
        self.spin_ns = spin.map_or(SPIN_NS, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Sets how many workers of the process may spin at once (`None`: one fewer than its
    /// CPUs, at least one).
    pub(crate) fn set_spinners(&mut self, spinners: Option<usize>) {
        self.spinners = spinners.unwrap_or_else(default_spinners);
    }

    /// Sets the instant all times are measured from (the run's start).
    pub(crate) fn set_base(&mut self, base: Instant) {
        self.base = base;
        let since = base.elapsed();
        self.base_mono = crate::ring::monotonic_ns().saturating_sub(since.as_nanos() as u64);
        self.rec.set_base_wall(
            std::time::SystemTime::now()
                .checked_sub(since)
                .unwrap_or(std::time::UNIX_EPOCH),
        );
    }

    fn now(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    fn in_flight(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Runs until the source is done (or stopped) and nothing is in flight.
    /// Returns whether a stop cut the run short.
    pub(crate) fn run(&mut self, src: &mut dyn Source, stop: &Stop) -> Result<bool, Error> {
        let mut stopped_at: Option<u64> = None;
        let mut cancelled = false;
        let mut now = self.now();
        loop {
            if stopped_at.is_none() && stop.is_requested() {
                stopped_at = Some(now);
                src.stop();
            }
            self.rec.tick(now);
            let (mut deadline, mut idle, mut src_done) = (None, false, false);
            while let Some(&slot) = self.free.last() {
                let next = {
                    let v = self.verifier.as_ref();
                    src.next(now, &|o, l| v.is_some_and(|v| v.is_busy(o, l)))
                };
                match next {
                    Next::Ready(item) => {
                        self.free.pop();
                        self.issue(slot, item)?;
                    }
                    Next::At(t) => {
                        deadline = Some(t);
                        break;
                    }
                    Next::Idle => {
                        idle = true;
                        break;
                    }
                    Next::Done => {
                        src_done = true;
                        break;
                    }
                }
            }
            if !self.pushed.is_empty() {
                // One stamp per batch, taken just before the system call that submits it.
                let t = self.now();
                for &s in &self.pushed {
                    let st = &mut self.slots[s];
                    st.submitted = t;
                    if st.intended == u64::MAX {
                        st.intended = t;
                    }
                }
                self.pushed.clear();
            }
            let in_flight = self.in_flight();
            if src_done && in_flight == 0 {
                break;
            }
            if let Some(at) = stopped_at
                && in_flight > 0
            {
                let waited = Duration::from_nanos(now.saturating_sub(at));
                if waited >= ABANDON_AFTER {
                    self.abandon(now);
                    break;
                }
                if waited >= CANCEL_AFTER && !cancelled {
                    cancelled = true;
                    self.backend.cancel()?;
                }
            }
            match deadline {
                Some(t) => self.wait_until(src, t, in_flight)?,
                None if idle && in_flight == 0 => {
                    src.idle_wait(STOP_POLL);
                }
                None if idle => {
                    self.backend
                        .wait(1, Duration::from_micros(200), &mut self.done)?;
                }
                None => self.backend.wait(1, STOP_POLL, &mut self.done)?,
            }
            now = match self.complete() {
                Some(t) => t,
                None => self.now(),
            };
        }
        self.rec.flush(self.now());
        Ok(stopped_at.is_some())
    }

    /// Gives up on everything in flight: each request is recorded as an error (`ECANCELED`)
    /// completing `now`, and the backend leaks or leaves behind what the kernel still holds.
    fn abandon(&mut self, now: u64) {
        for (slot, st) in self.slots.iter_mut().enumerate() {
            if let Some(kind) = st.kind.take() {
                self.rec
                    .record(kind, st.intended, st.submitted, now, -libc::ECANCELED);
                self.free.push(slot);
            }
        }
        self.backend.abandon();
    }

    fn issue(&mut self, slot: usize, item: Item) -> Result<(), Error> {
        let len32 = u32::try_from(item.len).unwrap_or(u32::MAX);
        if let Some(v) = &mut self.verifier {
            match item.kind {
                IoKind::Write => v.start_write(self.backend.buf_mut(slot), item.offset, item.len),
                IoKind::Read => v.start_read(item.offset, item.len),
                IoKind::Trim | IoKind::Flush => {}
            }
        }
        self.backend
            .push(slot, ring_op(item.kind), item.offset, len32)?;
        self.slots[slot] = SlotState {
            kind: Some(item.kind),
            offset: item.offset,
            len: item.len,
            intended: item.intended.unwrap_or(u64::MAX),
            submitted: 0,
        };
        self.pushed.push(slot);
        Ok(())
    }

    /// Waits for deadline `t` (ns from the base) while reaping completions: blocks until
    /// [`SPIN_NS`] before it (at most [`STOP_POLL`]), then spins on the clock if it gets a
    /// [`SpinToken`], else blocks to `t`. Returns when the deadline has passed, when
    /// completions were reaped, or after the blocking part.
    fn wait_until(&mut self, src: &mut dyn Source, t: u64, in_flight: usize) -> Result<(), Error> {
        let now = self.now();
        let margin = self.margin();
        if t > now + margin {
            let wake = (t - margin).min(now + STOP_POLL.as_nanos() as u64);
            if in_flight > 0 {
                self.backend
                    .wait(1, Duration::from_nanos(wake - now), &mut self.done)?;
            } else {
                self.backend.submit()?;
                if !src.idle_wait(Duration::from_nanos(wake - now)) {
                    self.sleep_until(wake);
                }
            }
            // A wake-up by the timer (not by a completion or an arrival before it).
            let woke = self.now();
            if self.done.is_empty() && woke >= wake {
                self.overslept(woke - wake);
            }
            return Ok(());
        }
        if now >= t {
            return Ok(());
        }
        // Near the deadline: spin if a token is free, else block to the deadline itself.
        let Some(_token) = SpinToken::take(self.spinners) else {
            if in_flight > 0 {
                self.backend
                    .wait(1, Duration::from_nanos(t - now), &mut self.done)?;
            } else {
                self.backend.submit()?;
                self.sleep_until(t);
            }
            return Ok(());
        };
        self.backend.submit()?;
        loop {
            if in_flight > 0 {
                self.backend.poll(&mut self.done)?;
                if !self.done.is_empty() {
                    return Ok(());
                }
            }
            if self.now() >= t {
                return Ok(());
            }
            std::hint::spin_loop();
        }
    }

    /// The spin margin before the next deadline: the configured one, grown by the recent
    /// wake-ups' lateness (at most [`MAX_MARGIN_NS`]); 0 stays 0 (never spin).
    fn margin(&self) -> u64 {
        if self.spin_ns == 0 {
            0
        } else {
            self.spin_ns
                .saturating_add(self.oversleep_ns)
                .min(MAX_MARGIN_NS.max(self.spin_ns))
        }
    }

    fn overslept(&mut self, ns: u64) {
        self.max_oversleep_ns = self.max_oversleep_ns.max(ns);
        self.oversleep_ns = ns.max(self.oversleep_ns - self.oversleep_ns / OVERSLEEP_DECAY);
    }

    /// Sleeps until `t` ns from the base (an absolute deadline).
    fn sleep_until(&self, t: u64) {
        crate::ring::sleep_until(self.base_mono + t);
    }

    /// Records the reaped completions with one timestamp, which it returns.
    fn complete(&mut self) -> Option<u64> {
        if self.done.is_empty() {
            return None;
        }
        let t = self.now();
        self.last_completion = t;
        for i in 0..self.done.len() {
            let (slot, res) = self.done[i];
            let st = self.slots[slot];
            let Some(kind) = st.kind else { continue };
            if let Some(v) = &mut self.verifier {
                let got = usize::try_from(res).unwrap_or(0);
                match kind {
                    IoKind::Write => v.end_write(
                        self.backend.buf(slot),
                        st.offset,
                        st.len,
                        got as u64 == st.len,
                    ),
                    IoKind::Read => v.end_read(self.backend.buf(slot), st.offset, st.len, got),
                    IoKind::Trim | IoKind::Flush => {}
                }
            }
            if let Some(w) = &mut self.written
                && kind == IoKind::Write
                && u64::try_from(res).is_ok_and(|n| n == st.len)
            {
                w.push(st.offset, st.len, st.submitted, t);
            }
            self.rec.record(kind, st.intended, st.submitted, t, res);
            self.slots[slot].kind = None;
            self.free.push(slot);
        }
        self.done.clear();
        Some(t)
    }
}

/// Budget and pacing of one job of a phase.
pub(crate) struct PhaseSource {
    pub opgen: OpGen,
    /// Open loop schedule; `None` = closed loop.
    pub schedule: Option<Schedule>,
    pub end_ns: Option<u64>,
    pub max_ios: Option<u64>,
    pub max_bytes: Option<u64>,
    pub issued: u64,
    pub issued_bytes: u64,
    pub verify: bool,
    held: Option<GenOp>,
    stopped: bool,
}

impl PhaseSource {
    pub(crate) fn new(
        opgen: OpGen,
        schedule: Option<Schedule>,
        end_ns: Option<u64>,
        max_ios: Option<u64>,
        max_bytes: Option<u64>,
        verify: bool,
    ) -> Self {
        PhaseSource {
            opgen,
            schedule,
            end_ns,
            max_ios,
            max_bytes,
            issued: 0,
            issued_bytes: 0,
            verify,
            held: None,
            stopped: false,
        }
    }

    fn exhausted(&self, now: u64) -> bool {
        self.stopped
            || self.max_ios.is_some_and(|m| self.issued >= m)
            || self.max_bytes.is_some_and(|m| self.issued_bytes >= m)
            || match (&self.schedule, self.end_ns) {
                (Some(s), Some(end)) => s.peek() >= end,
                (None, Some(end)) => now >= end,
                _ => false,
            }
    }
}

impl Source for PhaseSource {
    fn next(&mut self, now: u64, busy: &dyn Fn(u64, u64) -> bool) -> Next {
        if self.exhausted(now) {
            return Next::Done;
        }
        let intended = match &self.schedule {
            Some(s) if s.peek() > now => return Next::At(s.peek()),
            Some(s) => Some(s.peek()),
            None => None,
        };
        let mut op = self.held.take().unwrap_or_else(|| self.opgen.next_op());
        if self.verify {
            let mut tries = 0;
            while busy(op.offset, op.len) {
                tries += 1;
                if tries > 8 {
                    // Wait for a completion to free the units (the slot stays free).
                    self.held = Some(op);
                    return Next::Idle;
                }
                op = self.opgen.redraw(op);
            }
        }
        if let Some(s) = &mut self.schedule {
            s.advance();
        }
        self.issued += 1;
        self.issued_bytes += op.len;
        Next::Ready(Item {
            kind: op.kind,
            offset: op.offset,
            len: op.len,
            intended,
        })
    }

    fn stop(&mut self) {
        self.stopped = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// At most `max` tokens are out at once, from any thread; a dropped one can be taken again.
    #[test]
    fn spin_tokens_are_rationed_and_given_back() {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let (a, b) = (
            SpinToken::take_from(&COUNT, 2),
            SpinToken::take_from(&COUNT, 2),
        );
        assert!(a.is_some() && b.is_some());
        let c = std::thread::spawn(|| SpinToken::take_from(&COUNT, 2).is_some())
            .join()
            .expect("thread");
        assert!(!c, "a third token of two");
        drop(a);
        let d = SpinToken::take_from(&COUNT, 2);
        assert!(d.is_some(), "a token given back is taken again");
        drop((b, d));
        assert_eq!(COUNT.load(Ordering::Acquire), 0);
        assert!(default_spinners() >= 1);
    }

    /// `--spinners`: a count ≥ 1 or `all`; 0 and words are refused with the value named.
    #[test]
    fn spinner_counts_read_as_iogen_and_cnsreplay_take_them() {
        assert_eq!(crate::parse_spinners("3"), Ok(3));
        assert_eq!(crate::parse_spinners(" all "), Ok(usize::MAX));
        for bad in ["0", "-1", "many", ""] {
            let e = crate::parse_spinners(bad).expect_err(bad);
            assert!(e.contains(&format!("{:?}", bad.trim())), "{e}");
        }
    }
}
