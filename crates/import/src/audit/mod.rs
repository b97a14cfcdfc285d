//! Kubernetes audit logs (`audit.k8s.io/v1` JSON lines) → control-operation traces.
//!
//! **Input.** One JSON value per line: an audit `Event`, an `EventList` (`items`), a GKE Cloud
//! Logging entry (`protoPayload` of `@type` `…google.cloud.audit.AuditLog`), an AKS diagnostic
//! record (`category` `kube-audit`/`kube-audit-admin`, the event as a JSON string in
//! `properties.log`) or an Azure `{"records":[…]}` batch. A file whose first line is not a
//! whole JSON value is read as one document (a pretty-printed `{"records":[…]}` export).
//! Several files are merged by time.
//!
//! **Filter.** Only stage `ResponseComplete` counts (GKE entries count unless their
//! `operation` says the request is not finished); requests that failed (HTTP code ≥ 400, or a
//! non-zero GKE status) are dropped unless [`AuditOptions::keep_failed`]. Everything is
//! counted in [`AuditCounts`] and reported as warnings.
//!
//! **Mapping** (names are `namespace/name`, the namespace is the tenant): PVC create/delete →
//! `create_volume`/`delete_volume` (size, class, access mode, volume mode and data source
//! from `requestObject` at level Request or RequestResponse; defaults, with a warning, at
//! level Metadata); PVC patch/update that grows `spec.resources.requests.storage` →
//! `resize`; VolumeSnapshot create/delete → `snapshot`/`delete_snapshot`; pod create whose
//! `spec.volumes` name PVCs → `attach` (node from `spec.nodeName` or the scheduler's
//! `pods/binding`), pod delete → `detach`. `at` is `requestReceivedTimestamp` (v1beta1:
//! `timestamp`) minus the earliest mapped request's, which becomes the header `origin`;
//! `observed` is `stageTimestamp − requestReceivedTimestamp`, but for an attach the time from
//! the pod create to its last volume's VolumeAttachment reported attached on its node (see
//! `order.rs`).
//!
//! **Order and memory** (`order.rs`). Sources are read side by side and merged by time
//! through a reorder window; attaches wait a bounded time for their binding and attachment.
//! Events are written as they leave (to a spool when the header is needed first: it is
//! complete only at the end). Memory is the window's requests plus the objects the log
//! names, not the log: a plain audit line is classified from a structural scan (`scan.rs`)
//! without being parsed.
//!
//! **Consistency.** `map.rs` replays the requests against the life cycle the trace checker
//! enforces, so the output always validates: objects used before the log created them become
//! pre-existing volumes in the header, and requests that contradict the state are dropped and
//! counted. The full rules are in `docs/import.md`.

mod map;
mod order;
mod read;
mod request;
mod scan;

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::PathBuf;

use trace_format::{AccessMode, Event, Header, Trace, TraceWriter, VolumeMode};

use crate::{ImportError, ImportReport, Policy};

/// Options of the audit importer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuditOptions {
    /// Keep requests that failed (HTTP code ≥ 400) instead of dropping them.
    pub keep_failed: bool,
    /// How far (ns) a request may come before one already read in the same file (an API
    /// server writes an event when the request completes, stamped when it was received) and
    /// still be put in order; one further back is bad input. Default 120 s (twice the API
    /// server's default request timeout).
    pub reorder_window: u64,
    /// How long (ns) an attach waits for its pod's binding and its volumes' VolumeAttachments
    /// to report attached before it is written without them. Default 600 s.
    pub attach_horizon: u64,
}

impl Default for AuditOptions {
    fn default() -> Self {
        AuditOptions {
            keep_failed: false,
            reorder_window: 120_000_000_000,
            attach_horizon: 600_000_000_000,
        }
    }
}

/// What the audit importer read, kept, ignored and dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditCounts {
    /// Audit events read (after unwrapping GKE, AKS and batch wrappers).
    pub events: u64,
    /// Events of a stage other than `ResponseComplete` (ignored).
    pub other_stage: u64,
    /// Failed requests dropped (code ≥ 400).
    pub failed: u64,
    /// Failed requests kept (with [`AuditOptions::keep_failed`]).
    pub failed_kept: u64,
    /// Completed requests on other resources or with other verbs (ignored).
    pub unrelated: u64,
    /// Wrapper records that hold no audit event (other AKS categories, non-audit GKE entries).
    pub foreign: u64,
    /// Pod creates whose volumes name no PVC (ignored).
    pub pods_without_pvcs: u64,
    /// Requests whose level (Metadata) lacks the body they need (ignored): pod and snapshot
    /// creates, PVC patches, pod bindings, VolumeAttachment status writes.
    pub no_body: u64,
    /// PVC creates at level Metadata, imported with the header defaults.
    pub metadata_volumes: u64,
    /// Mapped PVC patches or updates whose size does not grow the volume (no event).
    pub not_growing: u64,
    /// Requests mapped to a trace operation or to what an attach needs (bindings,
    /// VolumeAttachments), before the consistency pass.
    pub mapped: u64,
    /// Trace events written.
    pub written: u64,
    /// Volumes used before the log created them, declared in the header.
    pub preexisting: u64,
    /// Requests the consistency pass dropped or changed, by reason (the reason says which).
    pub fixes: BTreeMap<String, u64>,
    /// Pod bindings read, and how many gave a waiting attach its node.
    pub bindings: (u64, u64),
    /// VolumeAttachment creates and status writes read, and how many completed an attach's
    /// observed time.
    pub volume_attachments: (u64, u64),
    /// Attaches written with an observed time (pod create → every volume attached), and
    /// without one (not every volume reported attached within the horizon, or the pod was
    /// deleted first, or the log ended).
    pub attach_observed: (u64, u64),
    /// The most requests held at once (reorder window and waiting attaches): the importer's
    /// memory, which does not grow with the log.
    pub max_held: u64,
}

/// The whole result of an audit import held in memory.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditImport {
    /// The trace.
    pub trace: Trace,
    /// Bad lines, events and warnings.
    pub report: ImportReport,
    /// What was read, kept and ignored.
    pub counts: AuditCounts,
}

/// A volume's data source in a PVC.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Src {
    Snapshot(String),
    Volume(String),
}

/// A request mapped to what it means for storage.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Act {
    CreatePvc {
        vol: String,
        size: Option<u64>,
        class: Option<String>,
        access: Option<AccessMode>,
        mode: Option<VolumeMode>,
        source: Option<Src>,
        pv: Option<String>,
        /// `spec.volumeAttributesClassName`.
        attributes_class: Option<String>,
        /// `metadata.labels` (what a VolumeGroupSnapshot's selector matches).
        labels: BTreeMap<String, String>,
    },
    DeletePvc {
        vol: String,
    },
    UpdatePvc {
        vol: String,
        size: Option<u64>,
        pv: Option<String>,
        /// `spec.volumeAttributesClassName`.
        attributes_class: Option<String>,
        /// Label changes (`None`: removed).
        labels: BTreeMap<String, Option<String>>,
    },
    /// A VolumeGroupSnapshot created over the PVCs its selector matches.
    CreateGroup {
        group: String,
        namespace: Option<String>,
        selector: BTreeMap<String, String>,
        class: Option<String>,
    },
    DeleteGroup {
        group: String,
    },
    /// A member VolumeSnapshot the snapshot controller made for a group (owned by it).
    CreateMember {
        snap: String,
        group: String,
        vol: String,
    },
    /// A node's taints written: whether they hold the out-of-service taint.
    Taint {
        node: String,
        out_of_service: bool,
    },
    /// A VolumeAttributesClass created, with its parameters.
    CreateVac {
        name: String,
        params: BTreeMap<String, String>,
    },
    CreateSnap {
        snap: String,
        vol: String,
        class: Option<String>,
    },
    DeleteSnap {
        snap: String,
    },
    CreatePod {
        pod: String,
        pvcs: Vec<String>,
        node: Option<String>,
    },
    DeletePod {
        pod: String,
    },
    /// The scheduler's `pods/binding`: the node of a pod.
    BindPod {
        pod: String,
        node: String,
    },
    BindPv {
        pv: String,
        vol: String,
    },
    CreateVa {
        va: String,
        pv: String,
        node: Option<String>,
    },
    /// A VolumeAttachment status write saying whether it is attached.
    VaStatus {
        va: String,
        attached: bool,
    },
    DeleteVa {
        va: String,
    },
}

/// One mapped request, with its sort key `(t, src, seq)`.
#[derive(Debug, Clone)]
struct Item {
    /// Nanoseconds since the Unix epoch.
    t: i128,
    /// Index of the source it came from.
    src: usize,
    /// Read order within its source.
    seq: u64,
    /// Line in its source (for messages).
    line: u64,
    tenant: Option<String>,
    observed: Option<u64>,
    act: Act,
}

/// Imports audit logs from readers (`(name, reader)`, the name for messages and provenance)
/// into a trace in memory. See the module documentation.
pub fn read_audit<R: BufRead>(
    sources: Vec<(String, R)>,
    opts: AuditOptions,
    policy: Policy,
) -> Result<AuditImport, ImportError> {
    let mut events = Vec::new();
    let (header, report, counts) = run(sources, opts, policy, &mut |e| {
        events.push(e);
        Ok(())
    })?;
    Ok(AuditImport {
        trace: Trace { header, events },
        report,
        counts,
    })
}

/// Imports audit log files, merged by time, and writes the trace to the writer
/// `writer_factory` makes from the header (finished on success).
pub fn import_audit(
    paths: &[PathBuf],
    opts: AuditOptions,
    policy: Policy,
    writer_factory: impl FnOnce(Header) -> Result<TraceWriter, trace_format::Error>,
) -> Result<(ImportReport, AuditCounts), ImportError> {
    import_audit_sources(&crate::Source::files(paths), opts, policy, writer_factory)
}

/// [`import_audit`] from any [`crate::Source`]s (spooled pipes, bytes in memory).
///
/// The header (origin, pre-existing volumes) is known only at the end of the log, so events
/// go to a binary spool file first and are copied behind the header at the end.
pub fn import_audit_sources(
    sources: &[crate::Source],
    opts: AuditOptions,
    policy: Policy,
    writer_factory: impl FnOnce(Header) -> Result<TraceWriter, trace_format::Error>,
) -> Result<(ImportReport, AuditCounts), ImportError> {
    let sources = sources
        .iter()
        .map(|s| s.open().map(|r| (s.name(), r)))
        .collect::<Result<Vec<_>, _>>()?;
    let spool = tempfile::NamedTempFile::new()?;
    let path = spool.path().to_owned();
    let mut w = TraceWriter::new(
        spool.reopen()?,
        trace_format::Encoding::Binary,
        &Header::default(),
    )?;
    let (header, report, counts) = run(sources, opts, policy, &mut |e| {
        w.write(&e).map_err(ImportError::from)
    })?;
    w.finish()?;
    let mut out = writer_factory(header)?;
    let back = trace_format::TraceReader::open_as(&path, Some(trace_format::Encoding::Binary))?;
    for e in back.events() {
        out.write(&e?)?;
    }
    out.finish()?;
    Ok((report, counts))
}

/// Reads the sources in time order through the reorder window, the attach enrichment and the
/// consistency pass, handing each event to `sink`; returns the header for those events.
fn run<R: BufRead>(
    sources: Vec<(String, R)>,
    opts: AuditOptions,
    policy: Policy,
    sink: &mut dyn FnMut(Event) -> Result<(), ImportError>,
) -> Result<(Header, ImportReport, AuditCounts), ImportError> {
    let mut report = ImportReport::default();
    let mut counts = AuditCounts::default();
    let names: Vec<String> = sources.iter().map(|(n, _)| n.clone()).collect();
    let mut mapper = map::Mapper::new(opts);
    order::merge(
        sources,
        opts,
        policy,
        &mut report,
        &mut counts,
        &mut |item, counts| mapper.item(item, counts, sink),
    )?;
    let header = mapper.finish(names, &mut counts);
    report.events = counts.written;
    warnings(&counts, &mut report);
    Ok((header, report, counts))
}

fn warnings(c: &AuditCounts, report: &mut ImportReport) {
    let mut w = |n: u64, what: &str| {
        if n > 0 {
            report.warnings.push(format!("{n} {what}"));
        }
    };
    w(
        c.other_stage,
        "events of a stage other than ResponseComplete were ignored",
    );
    w(
        c.failed,
        "failed requests (code >= 400) were dropped (keep them with --keep-failed)",
    );
    w(c.failed_kept, "failed requests (code >= 400) were kept");
    w(
        c.unrelated,
        "completed requests concern no storage operation and were ignored",
    );
    w(
        c.foreign,
        "wrapper records hold no Kubernetes audit event and were ignored",
    );
    w(
        c.pods_without_pvcs,
        "pod creates mount no PVC and were ignored",
    );
    w(
        c.no_body,
        "pod/snapshot creates or PVC patches were logged at level Metadata (no request body) \
         and were ignored",
    );
    w(
        c.metadata_volumes,
        "PVC creates were logged at level Metadata: size, class and modes are the header defaults",
    );
    w(
        c.not_growing,
        "PVC updates do not change the requested size and were ignored",
    );
    w(
        c.preexisting,
        "volumes used before the log created them are declared in the header",
    );
    for (reason, n) in &c.fixes {
        w(*n, reason);
    }
    let (bindings, bound) = c.bindings;
    w(
        bindings - bound,
        "pod bindings named no pod waiting in the log (created before it, or bound after the \
         attach horizon)",
    );
    let (with, without) = c.attach_observed;
    w(
        without,
        &format!(
            "attaches have no observed time ({with} have one): not every volume's \
             VolumeAttachment reported attached on the pod's node within the attach horizon \
             (no attacher, level Metadata, a pod deleted first, or the log's end)"
        ),
    );
}

impl AuditCounts {
    /// Events read but not mapped: `events == ignored() + mapped`.
    pub fn ignored(&self) -> u64 {
        self.other_stage + self.failed + self.unrelated + self.pods_without_pvcs + self.no_body
    }
}
