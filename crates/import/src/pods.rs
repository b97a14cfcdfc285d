//! Pod lifecycle CSVs → pod lifetimes (for fitting) and attach/detach traces.
//!
//! **Formats.** Comma separated, no quoting. A first line naming the columns locates them by
//! name: `name`, `creation_time`, `deletion_time`, and optionally `namespace` and
//! `pod_phase` (other columns are ignored), which reads both the Alibaba GPU 2023 pod list
//! (`name,cpu_milli,…,pod_phase,creation_time,deletion_time,scheduled_time`) and a generic
//! `name,creation_time,deletion_time[,namespace]`. Without such a line the columns are
//! positional: `name,creation_time,deletion_time[,namespace]`. Times are either numbers of
//! seconds (relative, fractions allowed to the nanosecond) or RFC 3339 instants; one file uses
//! one kind.
//!
//! **Times.** `start_ns` is nanoseconds since the earliest creation time of the file (the
//! Alibaba list starts at 0, so its times are kept as they are).
//!
//! **Censoring** (derived from the Alibaba list: every row has a deletion time; the 34 latest,
//! all `Running`, share the file's maximum time 12902960 s, the end of observation, while
//! `Failed`/`Succeeded`/`Pending` pods never reach it). A pod is right-censored — still alive
//! when observation ended — when its deletion time is empty, or `0` while its creation time
//! is not, or its phase is `Running` and its deletion time is the file's maximum time. The end
//! of observation is the maximum creation or deletion time in the file; a censored pod's
//! duration runs to it.
//!
//! **Trace.** [`import_pods`] writes `attach` (no volumes; tenant = namespace) at creation and
//! `detach` at deletion, none for censored pods. Workload names are `namespace/name` when the
//! file has namespaces. Events are sorted by time (an attach before a detach at the same time).
//!
//! **Bad input.** A row with missing fields, an unparsable time, a deletion before its
//! creation, a duplicate name, or a mix of numeric and RFC 3339 times is a located
//! [`BadInput`] under the [`Policy`].

use std::collections::{BTreeMap, HashSet};
use std::io::BufRead;
use std::path::Path;

use trace_format::{Attach, Event, Name, Op, Trace, WorkloadRef};

use crate::{BadInput, ImportError, ImportReport, Policy};

/// One pod's life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lifetime {
    /// Pod name (without namespace).
    pub name: String,
    /// Namespace, when the file has one.
    pub tenant: Option<String>,
    /// Creation, nanoseconds since the earliest creation in the file.
    pub start_ns: u64,
    /// Time alive, nanoseconds (to the end of observation when censored).
    pub duration_ns: u64,
    /// Still alive at the end of observation: the true duration is at least `duration_ns`.
    pub censored: bool,
}

/// Column positions.
struct Cols {
    name: usize,
    creation: usize,
    deletion: usize,
    namespace: Option<usize>,
    phase: Option<usize>,
}

/// A time as read: relative seconds or an absolute instant, both in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Time {
    Rel(i128),
    Abs(i128),
}

struct Row {
    name: String,
    tenant: Option<String>,
    created: i128,
    deleted: Option<i128>,
    running: bool,
}

/// Parses `seconds[.fraction]` into nanoseconds, exactly.
fn seconds(s: &str) -> Option<i128> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() || frac.len() > 9 || !int.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let i: i128 = int.parse().ok()?;
    let f: i128 = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<9}").parse().ok()?
    };
    i.checked_mul(1_000_000_000)?.checked_add(f)
}

fn time(s: &str) -> Option<Time> {
    seconds(s).map(Time::Rel).or_else(|| {
        s.parse::<jiff::Timestamp>()
            .ok()
            .map(|t| Time::Abs(t.as_nanosecond()))
    })
}

/// Reads pod lifetimes from any reader; `file` names it in messages.
pub fn read_lifetimes_from(
    file: &str,
    mut r: impl BufRead,
    policy: &Policy,
) -> Result<(Vec<Lifetime>, ImportReport), ImportError> {
    let mut report = ImportReport::default();
    let mut buf = Vec::new();
    let mut line = 0u64;
    let mut cols: Option<Cols> = None;
    let mut kind: Option<bool> = None; // Some(true): absolute times.
    let mut rows: Vec<Row> = Vec::new();
    let mut names = HashSet::new();
    loop {
        buf.clear();
        if r.read_until(b'\n', &mut buf)? == 0 {
            break;
        }
        line += 1;
        let bad = |field: &str, message: String| BadInput {
            file: file.to_owned(),
            line,
            record: false,
            field: field.to_owned(),
            message,
        };
        let text = match std::str::from_utf8(&buf) {
            Ok(t) => t.trim_end_matches(['\n', '\r']),
            Err(e) => {
                report.bad(*policy, bad("line", format!("not UTF-8 text: {e}")))?;
                continue;
            }
        };
        if text.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = text.split(',').map(str::trim).collect();
        if cols.is_none() {
            let pos = |n: &str| fields.iter().position(|f| *f == n);
            if let (Some(name), Some(creation), Some(deletion)) =
                (pos("name"), pos("creation_time"), pos("deletion_time"))
            {
                cols = Some(Cols {
                    name,
                    creation,
                    deletion,
                    namespace: pos("namespace"),
                    phase: pos("pod_phase"),
                });
                continue;
            }
            cols = Some(Cols {
                name: 0,
                creation: 1,
                deletion: 2,
                namespace: (fields.len() > 3).then_some(3),
                phase: None,
            });
        }
        let Some(c) = cols.as_ref() else { continue };
        let row = (|| {
            let field = |i: usize, what: &str| {
                fields
                    .get(i)
                    .copied()
                    .ok_or_else(|| bad(what, format!("missing {what} (column {})", i + 1)))
            };
            let name = field(c.name, "name")?;
            if name.is_empty() {
                return Err(bad("name", "empty name".to_owned()));
            }
            let tenant = match c.namespace {
                Some(i) => Some(field(i, "namespace")?).filter(|s| !s.is_empty()),
                None => None,
            };
            let parse = |what: &str, s: &str| -> Result<Time, BadInput> {
                time(s).ok_or_else(|| {
                    bad(
                        what,
                        format!("{s:?} is neither seconds (e.g. 12.5) nor an RFC 3339 time"),
                    )
                })
            };
            let created = parse("creation_time", field(c.creation, "creation_time")?)?;
            let del_text = field(c.deletion, "deletion_time")?;
            let deleted = if del_text.is_empty() {
                None
            } else {
                Some(parse("deletion_time", del_text)?)
            };
            let mut value = |what: &str, t: Time| match (t, kind) {
                (Time::Rel(v), None | Some(false)) => {
                    kind = Some(false);
                    Ok(v)
                }
                (Time::Abs(v), None | Some(true)) => {
                    kind = Some(true);
                    Ok(v)
                }
                _ => Err(bad(
                    what,
                    "the file mixes numeric and RFC 3339 times".to_owned(),
                )),
            };
            let created = value("creation_time", created)?;
            let deleted = match deleted {
                None => None,
                // `0` for a pod created later means "not deleted".
                Some(Time::Rel(0)) if created > 0 => None,
                Some(t) => Some(value("deletion_time", t)?),
            };
            if let Some(d) = deleted
                && d < created
            {
                return Err(bad(
                    "deletion_time",
                    "deletion is before creation".to_owned(),
                ));
            }
            let key = match tenant {
                Some(ns) => format!("{ns}/{name}"),
                None => name.to_owned(),
            };
            if names.contains(&key) {
                return Err(bad("name", format!("pod {key:?} is listed twice")));
            }
            names.insert(key);
            let running = c
                .phase
                .and_then(|i| fields.get(i))
                .is_some_and(|p| *p == "Running");
            Ok(Row {
                name: name.to_owned(),
                tenant: tenant.map(str::to_owned),
                created,
                deleted,
                running,
            })
        })();
        match row {
            Ok(r) => rows.push(r),
            Err(b) => report.bad(*policy, b)?,
        }
    }
    let first = rows.iter().map(|r| r.created).min().unwrap_or(0);
    let end = rows
        .iter()
        .map(|r| r.deleted.unwrap_or(r.created).max(r.created))
        .max()
        .unwrap_or(0);
    let ns = |v: i128| u64::try_from(v).unwrap_or(u64::MAX);
    let out = rows
        .into_iter()
        .map(|r| {
            let censored = match r.deleted {
                None => true,
                Some(d) => r.running && d == end,
            };
            let until = if censored {
                end
            } else {
                r.deleted.unwrap_or(end)
            };
            Lifetime {
                name: r.name,
                tenant: r.tenant,
                start_ns: ns(r.created - first),
                duration_ns: ns(until - r.created),
                censored,
            }
        })
        .collect::<Vec<_>>();
    let censored = out.iter().filter(|l| l.censored).count();
    if censored > 0 {
        report.warnings.push(format!(
            "{censored} pods were still alive at the end of observation (right-censored)"
        ));
    }
    if kind == Some(true) {
        report.warnings.push(format!(
            "times are RFC 3339; start_ns counts from the earliest creation ({})",
            jiff::Timestamp::from_nanosecond(first)
                .map(|t| t.to_string())
                .unwrap_or_default()
        ));
    }
    Ok((out, report))
}

/// Reads the pod lifetimes of a CSV file (see the module documentation).
pub fn read_lifetimes(
    path: &Path,
    policy: &Policy,
) -> Result<(Vec<Lifetime>, ImportReport), ImportError> {
    let r = std::io::BufReader::with_capacity(256 << 10, fs_err::File::open(path)?);
    read_lifetimes_from(&path.display().to_string(), r, policy)
}

/// Turns lifetimes into a trace: attach at creation, detach at deletion (none when censored).
pub fn lifetimes_trace(lifetimes: &[Lifetime], file: &str) -> Trace {
    // (time, attach before detach, row).
    let mut order: Vec<(u64, u8, usize)> = Vec::with_capacity(lifetimes.len() * 2);
    for (i, l) in lifetimes.iter().enumerate() {
        order.push((l.start_ns, 0, i));
        if !l.censored {
            order.push((l.start_ns.saturating_add(l.duration_ns), 1, i));
        }
    }
    order.sort_unstable();
    let names: Vec<Name> = lifetimes
        .iter()
        .map(|l| match &l.tenant {
            Some(ns) => Name::new(&format!("{ns}/{}", l.name)),
            None => Name::new(&l.name),
        })
        .collect();
    let mut events = Vec::with_capacity(order.len());
    for (at, kind, i) in order {
        let (Some(l), Some(name)) = (lifetimes.get(i), names.get(i)) else {
            continue;
        };
        let op = if kind == 0 {
            Op::Attach(Attach {
                workload: name.clone(),
                volumes: Vec::new(),
                node: None,
                wait_for_room: false,
            })
        } else {
            Op::Detach(WorkloadRef {
                workload: name.clone(),
            })
        };
        events.push(Event {
            at,
            id: events.len() as u64,
            tenant: l.tenant.as_deref().map(Name::new),
            observed: None,
            op,
        });
    }
    let mut params = BTreeMap::new();
    params.insert(
        "censored".to_owned(),
        "pods alive at the end of observation have no detach".to_owned(),
    );
    let header = crate::header(
        "pod-lifecycle-csv",
        vec![file.to_owned()],
        params,
        Vec::new(),
    );
    Trace { header, events }
}

/// Imports a pod lifecycle CSV as a trace of attaches and detaches.
pub fn import_pods_source(
    src: &crate::Source,
    policy: &Policy,
) -> Result<(Trace, ImportReport), ImportError> {
    let name = src.name();
    let (lifetimes, mut report) = read_lifetimes_from(&name, src.open()?, policy)?;
    let trace = lifetimes_trace(&lifetimes, &name);
    report.events = trace.events.len() as u64;
    Ok((trace, report))
}

/// [`import_pods_source`] of a file.
pub fn import_pods(path: &Path, policy: &Policy) -> Result<(Trace, ImportReport), ImportError> {
    let (lifetimes, mut report) = read_lifetimes(path, policy)?;
    let trace = lifetimes_trace(&lifetimes, &path.display().to_string());
    report.events = trace.events.len() as u64;
    Ok((trace, report))
}
