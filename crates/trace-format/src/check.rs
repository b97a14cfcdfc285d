//! The semantic checker: replays a trace's object life cycle without touching storage.
//!
//! Decoding proves an event is well-formed; the checker proves the trace makes sense as a
//! sequence: events in time order with increasing ids, every referenced volume, snapshot and
//! workload alive at that moment (the header's volumes and workloads from the start), no
//! second read-write-once attach, no shrinking resize, no I/O past the end of a volume, no
//! overflowing sums. It keeps one entry per live object (plus
//! a bounded memory of deleted ones, to say *when* a dangling name went away), so it runs in
//! one streaming pass and its memory follows the cluster's size, not the trace's length.
//!
//! After a problem the checker still applies what it can of the event (an attach with one
//! dangling volume still starts the workload), so one mistake does not cascade into a page of
//! follow-on errors.
//!
//! The same pass gathers [`Stats`]: counts, rates and the peaks of live objects.

use std::collections::{BTreeMap, HashMap, VecDeque};

use crate::error::{Diagnostic, Error, Location, Problem};
use crate::io::TraceReader;
use crate::model::*;
use crate::units::Name;

mod cbt;
mod io;
mod objects;
mod stream;

pub use stream::{Checked, EventCheck};

/// How many deleted names per kind the checker remembers for its messages.
const GONE_CAP: usize = 1 << 18;

/// A problem found in one event, before it is given a file and location.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// Field path, e.g. `events[41].attach.volumes[0]`.
    pub path: String,
    /// The problem.
    pub problem: Problem,
}

#[derive(Debug)]
struct Volume {
    size: u64,
    /// The size before the latest growing resize: a later resize may lower the request
    /// again to above it (a recovery from that resize having failed).
    before_grow: Option<u64>,
    access: AccessMode,
    /// Workloads that have it mounted, with their pinned node.
    attached_by: Vec<(Name, Option<Name>)>,
    /// Which volume of this name it is (a name deleted and made again is another volume).
    serial: u64,
}

/// A live snapshot: the volume it was taken of and that volume's size then.
#[derive(Debug)]
struct Snap {
    volume: Name,
    serial: u64,
    size: u64,
    /// Index of the event that took it.
    index: u64,
}

#[derive(Debug)]
struct Workload {
    volumes: Vec<Name>,
}

#[derive(Debug, Default)]
struct Gone {
    at: HashMap<Name, u64>,
    order: VecDeque<Name>,
}

impl Gone {
    fn insert(&mut self, name: Name, at: u64) {
        if self.at.insert(name.clone(), at).is_none() {
            self.order.push_back(name);
        }
        if self.order.len() > GONE_CAP
            && let Some(old) = self.order.pop_front()
        {
            self.at.remove(&old);
        }
    }
    fn get(&self, name: &str) -> Option<u64> {
        self.at.get(name).copied()
    }
}

/// Streaming semantic checker and statistics gatherer. Feed it every event in file order.
#[derive(Debug)]
pub struct Checker {
    defaults: Defaults,
    version: u32,
    classes: std::collections::BTreeSet<Name>,
    volumes: HashMap<Name, Volume>,
    snapshots: HashMap<Name, Snap>,
    /// Volumes made so far (each volume's serial).
    serials: u64,
    /// Group snapshots: their members (volume, its size when taken).
    groups: HashMap<Name, Vec<(Name, u64)>>,
    /// Ordered-write logs a writing `io_phase` made: how many volumes they cover.
    ordered_logs: HashMap<Name, usize>,
    workloads: HashMap<Name, Workload>,
    gone_volumes: Gone,
    gone_snapshots: Gone,
    gone_groups: Gone,
    gone_workloads: Gone,
    prev: Option<(u64, u64)>,
    attached_volumes: u64,
    stats: Stats,
    bucket: Option<u64>,
    bucket_counts: [u64; OpType::ALL.len()],
    bucket_total: u64,
}

/// Statistics of a trace.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Stats {
    /// Number of events.
    pub events: u64,
    /// Time of the last event, ns from trace start (the trace's duration).
    pub duration_ns: u64,
    /// Events per second over the duration (0 for a trace shorter than 1 ns).
    pub mean_rate: f64,
    /// Most events in any one-second window `[k s, (k+1) s)`.
    pub peak_rate: u64,
    /// Per operation type, in tag order; types with no events are left out.
    pub ops: BTreeMap<OpType, OpStats>,
    /// Most volumes that existed at once (pre-existing ones included).
    pub peak_live_volumes: u64,
    /// Most volumes attached (mounted by at least one workload) at once.
    pub peak_attached_volumes: u64,
    /// Most workloads running at once.
    pub peak_running_workloads: u64,
    /// Most snapshots that existed at once.
    pub peak_live_snapshots: u64,
    /// Bytes read by `io` events (exact: a u64 length per event cannot overflow it).
    pub io_read_bytes: u128,
    /// Bytes written by `io` events.
    pub io_write_bytes: u128,
}

/// Statistics of one operation type.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct OpStats {
    /// Number of events.
    pub count: u64,
    /// Events per second over the trace's duration.
    pub mean_rate: f64,
    /// Most events of this type in any one-second window.
    pub peak_rate: u64,
}

fn dangling(kind: &'static str, name: &Name, gone: &Gone) -> Problem {
    Problem::Dangling {
        kind,
        name: name.clone(),
        gone_at: gone.get(name),
    }
}

/// Something a newer format version introduced, in a trace of an older one.
fn since_problem(what: &str, version: u32) -> Problem {
    Problem::InvalidValue(format!(
        "`{what}` needs format version 2 or later; this trace says version {version}"
    ))
}

/// Something format version 3 introduced, in a trace of an older one.
fn since3_problem(what: &str, version: u32) -> Problem {
    Problem::InvalidValue(format!(
        "`{what}` needs format version 3 or later; this trace says version {version}"
    ))
}

fn undeclared_class(class: &Name) -> Problem {
    Problem::Dangling {
        kind: "attributes class",
        name: class.clone(),
        gone_at: None,
    }
}

impl Checker {
    /// Every finding of the header and `events` in order (tests of the trace tools: what
    /// they write must replay).
    #[cfg(test)]
    pub(crate) fn findings_of(header: &Header, events: &[Event]) -> Vec<Finding> {
        let (mut c, mut findings) = Checker::new(header);
        for (i, e) in events.iter().enumerate() {
            c.check(e, i as u64, &mut findings);
        }
        findings
    }

    /// Starts from the header: its defaults, pre-existing volumes and pre-running workloads
    /// (checked like attaches at t = 0). Problems in the header (duplicate or zero-sized
    /// declarations, a workload mounting an undeclared volume or breaking an access mode) are
    /// returned with `header.…` paths.
    pub fn new(header: &Header) -> (Self, Vec<Finding>) {
        let mut c = Checker {
            defaults: header.defaults.clone(),
            version: header.version,
            classes: header.attributes_classes.keys().cloned().collect(),
            volumes: HashMap::new(),
            snapshots: HashMap::new(),
            serials: 0,
            groups: HashMap::new(),
            ordered_logs: HashMap::new(),
            workloads: HashMap::new(),
            gone_volumes: Gone::default(),
            gone_snapshots: Gone::default(),
            gone_groups: Gone::default(),
            gone_workloads: Gone::default(),
            prev: None,
            attached_volumes: 0,
            stats: Stats::default(),
            bucket: None,
            bucket_counts: [0; OpType::ALL.len()],
            bucket_total: 0,
        };
        let mut out = Vec::new();
        if header.defaults.volume_size == Some(0) {
            out.push(Finding {
                path: "header.defaults.volume_size".into(),
                problem: Problem::InvalidValue("the default volume size must not be 0".into()),
            });
        }
        if header.version < 2 && header.defaults.group_snapshot_class.is_some() {
            out.push(Finding {
                path: "header.defaults.group_snapshot_class".into(),
                problem: since_problem("group_snapshot_class", header.version),
            });
        }
        if header.version < 2 && !header.attributes_classes.is_empty() {
            out.push(Finding {
                path: "header.attributes_classes".into(),
                problem: since_problem("attributes_classes", header.version),
            });
        }
        for (i, v) in header.volumes.iter().enumerate() {
            if let Some(class) = &v.attributes_class {
                if header.version < 2 {
                    out.push(Finding {
                        path: format!("header.volumes[{i}].attributes_class"),
                        problem: since_problem("attributes_class", header.version),
                    });
                } else if !c.classes.contains(class) {
                    out.push(Finding {
                        path: format!("header.volumes[{i}].attributes_class"),
                        problem: undeclared_class(class),
                    });
                }
            }
            let size = c.defaults.volume_size(v.size);
            if size == 0 {
                out.push(Finding {
                    path: format!("header.volumes[{i}].size"),
                    problem: Problem::InvalidValue("a volume size must not be 0".into()),
                });
            }
            c.serials += 1;
            let vol = Volume {
                size,
                before_grow: None,
                access: c.defaults.access_mode(v.access_mode),
                attached_by: Vec::new(),
                serial: c.serials,
            };
            if c.volumes.insert(v.name.clone(), vol).is_some() {
                out.push(Finding {
                    path: format!("header.volumes[{i}].name"),
                    problem: Problem::Duplicate {
                        kind: "volume",
                        name: v.name.clone(),
                    },
                });
            }
        }
        for (i, w) in header.workloads.iter().enumerate() {
            // Checked like an attach at t = 0, with paths into the header.
            let p = |field: &str| -> String {
                let field = match field {
                    "attach.workload" => "name",
                    f => f.strip_prefix("attach.").unwrap_or(f),
                };
                format!("header.workloads[{i}].{field}")
            };
            let a = Attach {
                workload: w.name.clone(),
                volumes: w.volumes.clone(),
                node: w.node.clone(),
                wait_for_room: false,
            };
            c.attach(&a, &p, &mut |path, problem| {
                out.push(Finding { path, problem });
            });
        }
        c.peaks();
        (c, out)
    }

    /// Checks one event (the `index`-th in the file), appends its problems to `out` and
    /// applies its effect.
    pub fn check(&mut self, ev: &Event, index: u64, out: &mut Vec<Finding>) {
        let p = |field: &str| -> String {
            if field.is_empty() {
                format!("events[{index}]")
            } else {
                format!("events[{index}].{field}")
            }
        };
        let mut push = |path: String, problem: Problem| out.push(Finding { path, problem });

        if let Some((prev_at, prev_id)) = self.prev {
            if ev.at < prev_at {
                push(
                    p("at"),
                    Problem::TimeInversion {
                        at: ev.at,
                        previous: prev_at,
                    },
                );
            }
            if ev.id <= prev_id {
                push(
                    p("id"),
                    Problem::IdNotIncreasing {
                        id: ev.id,
                        previous: prev_id,
                    },
                );
            }
        }
        let since = ev.op.op_type().since();
        if since > self.version {
            let name = ev.op.op_type().name();
            push(
                p(name),
                if since >= 3 {
                    since3_problem(name, self.version)
                } else {
                    since_problem(name, self.version)
                },
            );
        }
        // Keep the latest time so that one early event is one error, not a run of them.
        let at = self.prev.map_or(ev.at, |(a, _)| a.max(ev.at));
        self.prev = Some((at, ev.id));
        self.count(ev);

        match &ev.op {
            Op::CreateVolume(c) => self.create_volume(c, &p, &mut push),
            Op::DeleteVolume(d) => match self.volumes.get(&d.volume) {
                None => push(
                    p("delete_volume.volume"),
                    dangling("volume", &d.volume, &self.gone_volumes),
                ),
                Some(v) if !v.attached_by.is_empty() => push(
                    p("delete_volume.volume"),
                    Problem::StillAttached {
                        volume: d.volume.clone(),
                        by: v.attached_by[0].0.clone(),
                    },
                ),
                Some(_) => {
                    self.volumes.remove(&d.volume);
                    self.gone_volumes.insert(d.volume.clone(), ev.at);
                }
            },
            Op::Attach(a) => self.attach(a, &p, &mut push),
            Op::Detach(w) => {
                self.end_workload(&w.workload, ev.at, &p("detach.workload"), &mut push);
            }
            Op::AbortWorkload(w) => {
                self.end_workload(&w.workload, ev.at, &p("abort_workload.workload"), &mut push);
            }
            Op::Snapshot(s) => match self.volumes.get(&s.volume) {
                None => push(
                    p("snapshot.volume"),
                    dangling("volume", &s.volume, &self.gone_volumes),
                ),
                Some(v) => {
                    if self.snapshots.contains_key(&s.snapshot) {
                        push(
                            p("snapshot.snapshot"),
                            Problem::Duplicate {
                                kind: "snapshot",
                                name: s.snapshot.clone(),
                            },
                        );
                    } else {
                        let snap = Snap {
                            volume: s.volume.clone(),
                            serial: v.serial,
                            size: v.size,
                            index,
                        };
                        self.snapshots.insert(s.snapshot.clone(), snap);
                        self.gone_snapshots.at.remove(&s.snapshot);
                    }
                }
            },
            Op::DeleteSnapshot(s) => {
                if self.snapshots.remove(&s.snapshot).is_some() {
                    self.gone_snapshots.insert(s.snapshot.clone(), ev.at);
                } else {
                    push(
                        p("delete_snapshot.snapshot"),
                        dangling("snapshot", &s.snapshot, &self.gone_snapshots),
                    );
                }
            }
            Op::Resize(r) => match self.volumes.get_mut(&r.volume) {
                None => push(
                    p("resize.volume"),
                    dangling("volume", &r.volume, &self.gone_volumes),
                ),
                Some(v) if r.size > v.size => {
                    v.before_grow = Some(v.size);
                    v.size = r.size;
                }
                // Lowering the request of a resize that failed: above the size before it
                // (Kubernetes' rule: more than the claim's `status.capacity`).
                Some(v) if r.size < v.size && v.before_grow.is_some_and(|f| r.size > f) => {
                    v.size = r.size;
                }
                Some(v) => push(
                    p("resize.size"),
                    match v.before_grow {
                        Some(floor) if r.size < v.size => Problem::BadRecovery {
                            volume: r.volume.clone(),
                            from: v.size,
                            to: r.size,
                            floor,
                        },
                        _ => Problem::NotGrowing {
                            volume: r.volume.clone(),
                            from: v.size,
                            to: r.size,
                        },
                    },
                ),
            },
            Op::GroupSnapshot(g) => self.group_snapshot(g, &p, &mut push),
            Op::DeleteGroupSnapshot(g) => {
                if self.groups.remove(&g.group).is_some() {
                    self.gone_groups.insert(g.group.clone(), ev.at);
                } else {
                    push(
                        p("delete_group_snapshot.group"),
                        dangling("group snapshot", &g.group, &self.gone_groups),
                    );
                }
            }
            Op::ModifyVolume(m) => {
                if !self.volumes.contains_key(&m.volume) {
                    push(
                        p("modify_volume.volume"),
                        dangling("volume", &m.volume, &self.gone_volumes),
                    );
                }
                if !self.classes.contains(&m.class) {
                    push(p("modify_volume.class"), undeclared_class(&m.class));
                }
            }
            Op::Reschedule(r) => {
                if !self.workloads.contains_key(&r.workload) {
                    push(
                        p("reschedule.workload"),
                        dangling("workload", &r.workload, &self.gone_workloads),
                    );
                }
            }
            Op::CordonNode(_) | Op::DrainNode(_) | Op::ForceDetach(_) | Op::Marker(_) => {}
            Op::Io(io) => self.io(io, &p, &mut push),
            Op::IoPhase(ph) => self.io_phase(ph, &p, &mut push),
            Op::SnapshotAllocated(s) => self.snapshot_allocated(s, &p, &mut push),
            Op::SnapshotDelta(d) => self.snapshot_delta(d, &p, &mut push),
        }
        self.peaks();
    }

    fn count(&mut self, ev: &Event) {
        let t = ev.op.op_type() as usize;
        self.stats.events += 1;
        self.stats.duration_ns = self.stats.duration_ns.max(ev.at);
        self.stats.ops.entry(ev.op.op_type()).or_default().count += 1;
        let bucket = ev.at / 1_000_000_000;
        if self.bucket != Some(bucket) {
            self.flush_bucket();
            self.bucket = Some(bucket);
        }
        self.bucket_counts[t] += 1;
        self.bucket_total += 1;
    }

    fn flush_bucket(&mut self) {
        for (i, n) in self.bucket_counts.iter_mut().enumerate() {
            if *n > 0 {
                let s = self.stats.ops.entry(OpType::ALL[i]).or_default();
                s.peak_rate = s.peak_rate.max(*n);
                *n = 0;
            }
        }
        self.stats.peak_rate = self.stats.peak_rate.max(self.bucket_total);
        self.bucket_total = 0;
    }

    fn peaks(&mut self) {
        let s = &mut self.stats;
        s.peak_live_volumes = s.peak_live_volumes.max(self.volumes.len() as u64);
        s.peak_attached_volumes = s.peak_attached_volumes.max(self.attached_volumes);
        s.peak_running_workloads = s.peak_running_workloads.max(self.workloads.len() as u64);
        s.peak_live_snapshots = s.peak_live_snapshots.max(self.snapshots.len() as u64);
    }

    /// The statistics of everything checked so far.
    pub fn stats(&mut self) -> Stats {
        self.flush_bucket();
        let mut s = self.stats.clone();
        let secs = s.duration_ns as f64 / 1e9;
        let rate = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
        s.mean_rate = rate(s.events);
        for o in s.ops.values_mut() {
            o.mean_rate = rate(o.count);
        }
        s
    }
}

/// The outcome of checking a whole trace.
#[derive(Debug, Clone)]
pub struct Report {
    /// Events read (including ones with problems).
    pub events: u64,
    /// The first `max_diagnostics` problems, in file order.
    pub diagnostics: Vec<Diagnostic>,
    /// Total number of problems, including those beyond the cap.
    pub problems: u64,
    /// Statistics over every event that decoded.
    pub stats: Stats,
    /// Whether reading stopped early at an unrecoverable problem (e.g. truncation).
    pub aborted: bool,
}

impl Report {
    /// True when the trace has no problem.
    pub fn is_valid(&self) -> bool {
        self.problems == 0
    }
}

/// Decodes and checks a whole trace in one streaming pass, keeping at most `max_diagnostics`
/// located problems (all are counted). `progress` is called every 65 536 events with the
/// count so far. Only I/O errors are returned as `Err`.
pub fn check_trace(
    reader: TraceReader,
    file: &str,
    max_diagnostics: usize,
    progress: impl FnMut(u64),
) -> Result<Report, Error> {
    check_trace_until(reader, file, max_diagnostics, u64::MAX, progress)
}

/// [`check_trace`] that stops reading once `stop_after` problems were found (`run`'s check
/// before the clock: a bound on the work, not a full listing). The report's `events` and
/// `stats` then cover what was read.
pub fn check_trace_until(
    reader: TraceReader,
    file: &str,
    max_diagnostics: usize,
    stop_after: u64,
    mut progress: impl FnMut(u64),
) -> Result<Report, Error> {
    let mut report = Report {
        events: 0,
        diagnostics: Vec::new(),
        problems: 0,
        stats: Stats::default(),
        aborted: false,
    };
    let keep = |report: &mut Report, d: Diagnostic| {
        report.problems += 1;
        if report.diagnostics.len() < max_diagnostics {
            report.diagnostics.push(d);
        }
    };
    let (mut checker, header_findings) = Checker::new(reader.header());
    for f in header_findings {
        keep(
            &mut report,
            Diagnostic {
                file: file.to_owned(),
                location: Location::default(),
                path: f.path,
                problem: f.problem,
            },
        );
    }
    let mut findings = Vec::new();
    let mut index = 0u64;
    let binary = reader.encoding() == crate::io::Encoding::Binary;
    for item in reader {
        report.events += 1;
        match item {
            Ok((ev, loc)) => {
                findings.clear();
                checker.check(&ev, index, &mut findings);
                for f in findings.drain(..) {
                    keep(
                        &mut report,
                        Diagnostic {
                            file: file.to_owned(),
                            location: loc,
                            path: f.path,
                            problem: f.problem,
                        },
                    );
                }
            }
            Err(Error::Invalid(d)) => {
                // Binary framing and YAML syntax errors end the stream; a bad text event is
                // skipped and reading goes on.
                if binary || d.location.record.is_none() {
                    report.events -= 1;
                    report.aborted = true;
                }
                keep(&mut report, *d);
            }
            Err(e) => return Err(e),
        }
        index += 1;
        if index.is_multiple_of(65_536) {
            progress(index);
        }
        if report.problems >= stop_after {
            break;
        }
    }
    report.stats = checker.stats();
    Ok(report)
}
