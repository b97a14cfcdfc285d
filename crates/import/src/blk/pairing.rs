//! Pairing issues (`D`) with completions (`C`), shared by the binary and text importers: pass
//! 1's extents and header, and pass 2's completion-window queue that writes events in issue
//! order.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use trace_format::{Event, Header, Io, IoKind, Name, Op, TraceWriter, VolumeDecl};

use super::{COMPLETION_WINDOW_NS, Phase, SECTOR};
use crate::{ImportError, ImportReport};

/// A `D` or `C` of a request, in either input format.
#[derive(Debug, Clone, Copy)]
pub(super) struct Req {
    pub(super) phase: Phase,
    pub(super) time: u64,
    pub(super) device: u32,
    /// `None` for a request without data.
    pub(super) sector: Option<u64>,
    pub(super) bytes: u64,
    pub(super) kind: Option<IoKind>,
}

/// A record or line that is not a request.
#[derive(Debug, Clone, Copy)]
pub(super) enum Other {
    Notify,
    Action,
    /// A request whose sector × 512 + bytes does not fit in 64 bits.
    Overflow,
}

/// What pass 1 learns: the earliest issue and each device's furthest byte.
#[derive(Default)]
pub(super) struct Extents {
    pub(super) first_issue: Option<u64>,
    ends: BTreeMap<u32, u64>,
}

impl Extents {
    pub(super) fn add(&mut self, q: &Req) {
        if q.phase != Phase::Issue || q.kind.is_none() {
            return;
        }
        self.first_issue = Some(self.first_issue.map_or(q.time, |t| t.min(q.time)));
        let end = q
            .sector
            .map_or(0, |s| s.saturating_mul(SECTOR).saturating_add(q.bytes));
        let e = self.ends.entry(q.device).or_insert(0);
        *e = (*e).max(end);
    }

    /// The header, and each device's volume name.
    pub(super) fn header(
        &self,
        source_format: &str,
        files: Vec<String>,
    ) -> (Header, HashMap<u32, Name>) {
        let mut names = HashMap::new();
        let mut volumes = Vec::new();
        let mut parameters = BTreeMap::new();
        for (&dev, &end) in &self.ends {
            let (major, minor) = (dev >> 20, dev & 0xf_ffff);
            let name = Name::new(&format!("dev-{major}-{minor}"));
            parameters.insert(format!("device.{name}"), format!("{major},{minor}"));
            volumes.push(VolumeDecl {
                name: name.clone(),
                size: Some(crate::volume_size(end)),
                storage_class: None,
                access_mode: None,
                // Device-level requests: the volume is a raw block device (no file system).
                volume_mode: Some(trace_format::VolumeMode::Block),
                attributes_class: None,
            });
            names.insert(dev, name);
        }
        parameters.insert("time_origin".to_owned(), "first_issue".to_owned());
        parameters.insert(
            "completion_window".to_owned(),
            format!("{}s", COMPLETION_WINDOW_NS / 1_000_000_000),
        );
        let header = crate::header(source_format, files, parameters, volumes);
        (header, names)
    }
}

/// Pairing key: device, sector (`None` without data), kind.
type Key = (u32, Option<u64>, IoKind);

struct Pending {
    key: Key,
    offset: u64,
    len: u64,
    observed: Option<u64>,
}

#[derive(Default)]
struct Counts {
    notify: u64,
    overflow: u64,
    other: u64,
    no_kind: u64,
    redispatched: u64,
    timed_out: u64,
    never_completed: u64,
    unmatched: u64,
    raised: u64,
}

/// The queue keys of the open requests of one pairing key, oldest first. Nearly always one,
/// kept inline so that a request allocates nothing here. Invariant: `first` is `None` only
/// when `rest` is empty.
#[derive(Default)]
struct Open {
    first: Option<(u64, u64)>,
    rest: VecDeque<(u64, u64)>,
}

impl Open {
    fn iter(&self) -> impl Iterator<Item = &(u64, u64)> {
        self.first.iter().chain(self.rest.iter())
    }

    fn push_back(&mut self, k: (u64, u64)) {
        if self.first.is_none() {
            self.first = Some(k);
        } else {
            self.rest.push_back(k);
        }
    }

    fn pop_front(&mut self) -> Option<(u64, u64)> {
        let k = self.first.take();
        self.first = self.rest.pop_front();
        k
    }

    fn remove(&mut self, k: (u64, u64)) {
        if self.first == Some(k) {
            self.pop_front();
        } else {
            self.rest.retain(|o| *o != k);
        }
    }

    fn is_empty(&self) -> bool {
        self.first.is_none()
    }
}

/// FxHash (rustc's): the pairing map is hashed once per request, where SipHash showed in
/// profiles; its keys come from the trace being imported, not from an adversary.
#[derive(Default, Clone, Copy)]
struct Fx(u64);

impl Fx {
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for Fx {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.add(u64::from(*b));
        }
    }
    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }
    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
    fn write_isize(&mut self, n: isize) {
        self.add(n as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// Pairs issues with completions and writes events in issue-time order.
pub(super) struct Pairer<'a> {
    origin: u64,
    names: &'a HashMap<u32, Name>,
    writer: TraceWriter,
    /// Requests not yet written, by (issue time, arrival).
    queue: BTreeMap<(u64, u64), Pending>,
    /// Queue keys of requests without completion, oldest first.
    open: HashMap<Key, Open, BuildHasherDefault<Fx>>,
    seq: u64,
    newest: u64,
    last_at: u64,
    counts: Counts,
}

impl<'a> Pairer<'a> {
    pub(super) fn new(origin: u64, names: &'a HashMap<u32, Name>, writer: TraceWriter) -> Self {
        Self {
            origin,
            names,
            writer,
            queue: BTreeMap::new(),
            open: HashMap::default(),
            seq: 0,
            newest: 0,
            last_at: 0,
            counts: Counts::default(),
        }
    }

    pub(super) fn other(&mut self, o: Other) {
        match o {
            Other::Notify => self.counts.notify += 1,
            Other::Action => self.counts.other += 1,
            Other::Overflow => self.counts.overflow += 1,
        }
    }

    pub(super) fn request(&mut self, q: Req, report: &mut ImportReport) -> Result<(), ImportError> {
        self.newest = self.newest.max(q.time);
        let Some(kind) = q.kind else {
            match q.phase {
                Phase::Issue => self.counts.no_kind += 1,
                Phase::Complete => self.counts.unmatched += 1,
            }
            return self.drain(report, false);
        };
        let key = (q.device, q.sector, kind);
        match q.phase {
            Phase::Issue => {
                let open = self.open.entry(key).or_default();
                let again = q.sector.is_some()
                    && open
                        .iter()
                        .any(|k| self.queue.get(k).is_some_and(|p| p.len == q.bytes));
                if again {
                    self.counts.redispatched += 1;
                } else {
                    let k = (q.time, self.seq);
                    self.seq += 1;
                    open.push_back(k);
                    self.queue.insert(
                        k,
                        Pending {
                            key,
                            offset: q.sector.unwrap_or(0).saturating_mul(SECTOR),
                            len: q.bytes,
                            observed: None,
                        },
                    );
                }
            }
            Phase::Complete => {
                let k = match self.open.get_mut(&key) {
                    None => None,
                    Some(open) => {
                        let k = open.pop_front();
                        if open.is_empty() {
                            self.open.remove(&key);
                        }
                        k
                    }
                };
                match k.and_then(|k| Some((k.0, self.queue.get_mut(&k)?))) {
                    Some((t, p)) => p.observed = Some(q.time.saturating_sub(t)),
                    None => self.counts.unmatched += 1,
                }
            }
        }
        self.drain(report, false)
    }

    /// Writes the queue's head while it is complete, timed out, or `all`.
    fn drain(&mut self, report: &mut ImportReport, all: bool) -> Result<(), ImportError> {
        while let Some(entry) = self.queue.first_entry() {
            let (t, _) = *entry.key();
            let p = entry.get();
            if p.observed.is_none() {
                if !all && self.newest.saturating_sub(t) <= COMPLETION_WINDOW_NS {
                    return Ok(());
                }
                if all {
                    self.counts.never_completed += 1;
                } else {
                    self.counts.timed_out += 1;
                }
                let k = *entry.key();
                if let Some(open) = self.open.get_mut(&p.key) {
                    open.remove(k);
                    if open.is_empty() {
                        self.open.remove(&p.key);
                    }
                }
            }
            let p = entry.remove();
            let Some(volume) = self.names.get(&p.key.0) else {
                continue;
            };
            let mut at = t.saturating_sub(self.origin);
            if at < self.last_at {
                self.counts.raised += 1;
                at = self.last_at;
            }
            self.last_at = at;
            self.writer.write(&Event {
                at,
                id: report.events,
                tenant: None,
                observed: p.observed,
                op: Op::Io(Io {
                    volume: volume.clone(),
                    kind: p.key.2,
                    offset: p.offset,
                    len: p.len,
                }),
            })?;
            report.events += 1;
        }
        Ok(())
    }

    pub(super) fn finish(mut self, report: &mut ImportReport) -> Result<(), ImportError> {
        self.drain(report, true)?;
        self.writer.finish()?;
        let c = &self.counts;
        let window = COMPLETION_WINDOW_NS / 1_000_000_000;
        for (n, what) in [
            (
                c.overflow,
                "requests reaching beyond 2^64 bytes (sector × 512 + bytes) produce no event",
            ),
            (
                c.notify,
                "notify records (process names, timestamps, messages) produce no event",
            ),
            (
                c.other,
                "records of actions other than issue (D) and complete (C) produce no event",
            ),
            (
                c.no_kind,
                "issues without data or flush (RWBS N) produce no event",
            ),
            (
                c.redispatched,
                "re-dispatches of a request still in flight (same device, sector, kind and \
                 length) were merged into its first dispatch",
            ),
            (
                c.timed_out,
                &format!(
                    "requests had no completion within {window}s of trace time and have no \
                     observed latency"
                ),
            ),
            (
                c.never_completed,
                "requests had no completion before the end of the trace and have no observed \
                 latency",
            ),
            (
                c.unmatched,
                "completions matched no open issue (e.g. a flush's original request, RWBS NS)",
            ),
            (
                c.raised,
                "event times were raised to the previous event's (input out of time order)",
            ),
        ] {
            if n > 0 {
                report.warnings.push(format!("{n} {what}"));
            }
        }
        Ok(())
    }
}
