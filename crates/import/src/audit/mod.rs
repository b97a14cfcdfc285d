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
//! `spec.volumes` name PVCs → `attach` (node from `spec.nodeName`), pod delete → `detach`.
//! `at` is `requestReceivedTimestamp` (v1beta1: `timestamp`) minus the earliest mapped
//! request's, which becomes the header `origin`; `observed` is `stageTimestamp −
//! requestReceivedTimestamp`. VolumeAttachment creates are matched to attaches through
//! PV → PVC bindings and recorded in `provenance.parameters` (see `map.rs`).
//!
//! **Memory.** Mapped requests (not lines) are held in memory and sorted as a whole, so the
//! output is in time order whatever the input's disorder; memory grows with the number of
//! storage requests (about 200 bytes each), not with the log's size.
//!
//! **Consistency.** `map.rs` replays the requests against the life cycle the trace checker
//! enforces, so the output always validates: objects used before the log created them become
//! pre-existing volumes in the header, and requests that contradict the state are dropped and
//! counted. The full rules are in `docs/import.md`.

mod map;

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::PathBuf;

use serde_json::{Map, Value};
use trace_format::{AccessMode, Header, Trace, TraceWriter, VolumeMode};

use crate::{BadInput, ImportError, ImportReport, Policy};

/// Options of the audit importer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AuditOptions {
    /// Keep requests that failed (HTTP code ≥ 400) instead of dropping them.
    pub keep_failed: bool,
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
    /// creates, PVC patches.
    pub no_body: u64,
    /// PVC creates at level Metadata, imported with the header defaults.
    pub metadata_volumes: u64,
    /// Mapped PVC patches or updates whose size does not grow the volume (no event).
    pub not_growing: u64,
    /// Requests mapped to a trace operation before the consistency pass.
    pub mapped: u64,
    /// Trace events written.
    pub written: u64,
    /// Volumes used before the log created them, declared in the header.
    pub preexisting: u64,
    /// Requests the consistency pass dropped or changed, by reason (the reason says which).
    pub fixes: BTreeMap<String, u64>,
    /// VolumeAttachment creates, and how many were matched to an attach.
    pub volume_attachments: (u64, u64),
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
    },
    DeletePvc {
        vol: String,
    },
    UpdatePvc {
        vol: String,
        size: Option<u64>,
        pv: Option<String>,
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
    BindPv {
        pv: String,
        vol: String,
    },
    CreateVa {
        pv: String,
    },
}

/// One mapped request, with its sort key.
#[derive(Debug, Clone)]
struct Item {
    /// Nanoseconds since the Unix epoch.
    t: i128,
    seq: u64,
    tenant: Option<String>,
    observed: Option<u64>,
    act: Act,
}

impl Ev<'_> {
    /// Whether the request is on a resource the mapping reads (no subresource).
    fn is_storage(&self) -> bool {
        self.subresource.is_empty()
            && matches!(
                self.resource,
                "persistentvolumeclaims"
                    | "volumesnapshots"
                    | "pods"
                    | "persistentvolumes"
                    | "volumeattachments"
            )
    }
}

/// The fields of an audit event the mapping needs, whatever wrapper it came in.
struct Ev<'v> {
    verb: &'v str,
    resource: &'v str,
    subresource: &'v str,
    namespace: Option<&'v str>,
    name: Option<&'v str>,
    /// The request body (absent at level Metadata).
    request: Option<&'v Value>,
    response: Option<&'v Value>,
}

fn meta_name(o: Option<&Value>) -> Option<&str> {
    o.and_then(|o| get_str(o, &["metadata", "name"]))
}

fn get<'v>(v: &'v Value, path: &[&str]) -> Option<&'v Value> {
    path.iter().try_fold(v, |v, k| v.get(k))
}

fn get_str<'v>(v: &'v Value, path: &[&str]) -> Option<&'v str> {
    get(v, path).and_then(Value::as_str)
}

/// Reads audit log sources into mapped items and counts.
struct Reader<'p> {
    policy: Policy,
    opts: AuditOptions,
    report: &'p mut ImportReport,
    counts: &'p mut AuditCounts,
    items: Vec<Item>,
    file: String,
    line: u64,
}

impl Reader<'_> {
    fn bad(&self, field: impl Into<String>, message: impl Into<String>) -> BadInput {
        BadInput {
            file: self.file.clone(),
            line: self.line,
            record: false,
            field: field.into(),
            message: message.into(),
        }
    }

    /// Reads one source, line by line.
    fn source(&mut self, name: &str, mut r: impl BufRead) -> Result<(), ImportError> {
        self.file = name.to_owned();
        self.line = 0;
        let mut buf = Vec::new();
        loop {
            buf.clear();
            if r.read_until(b'\n', &mut buf)? == 0 {
                return Ok(());
            }
            self.line += 1;
            if buf.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let parsed = serde_json::from_slice::<Value>(&buf);
            let value = match parsed {
                Ok(v) => v,
                Err(e) if e.is_eof() && self.line == 1 => {
                    // A pretty-printed document: the whole source is one value.
                    r.read_to_end(&mut buf)?;
                    match serde_json::from_slice::<Value>(&buf) {
                        Ok(v) => v,
                        Err(e) => {
                            let b = self.bad("line", format!("not JSON: {e}"));
                            return self.report.bad(self.policy, b);
                        }
                    }
                }
                Err(e) => {
                    let b = self.bad("line", format!("not JSON: {e}"));
                    self.report.bad(self.policy, b)?;
                    continue;
                }
            };
            self.value(&value, "")?;
        }
    }

    /// Dispatches one JSON value by its shape; bad values follow the policy.
    fn value(&mut self, v: &Value, prefix: &str) -> Result<(), ImportError> {
        match self.shape(v, prefix) {
            Ok(()) => Ok(()),
            Err(Shape::Bad(b)) => self.report.bad(self.policy, *b),
            Err(Shape::Fatal(e)) => Err(e),
        }
    }

    fn shape(&mut self, v: &Value, prefix: &str) -> Result<(), Shape> {
        let field = |f: &str| format!("{prefix}{f}");
        let Some(obj) = v.as_object() else {
            let what = if prefix.is_empty() { "line" } else { prefix };
            return Err(self
                .bad(what.trim_end_matches('.'), "not a JSON object")
                .into());
        };
        let list = obj.get("records").map(|r| ("records", r)).or_else(|| {
            (obj.get("kind").and_then(Value::as_str) == Some("EventList"))
                .then(|| obj.get("items").map(|i| ("items", i)))
                .flatten()
        });
        if let Some((key, list)) = list {
            let Some(list) = list.as_array() else {
                return Err(self.bad(field(key), "not an array").into());
            };
            for (i, item) in list.iter().enumerate() {
                self.value(item, &format!("{prefix}{key}[{i}]."))?;
            }
            return Ok(());
        }
        if let Some(pp) = obj.get("protoPayload") {
            return self.gke(obj, pp, prefix).map_err(Shape::from);
        }
        if let Some(cat) = obj.get("category").and_then(Value::as_str) {
            if !cat.starts_with("kube-audit") {
                self.counts.foreign += 1;
                return Ok(());
            }
            let Some(log) = get_str(v, &["properties", "log"]) else {
                return Err(self
                    .bad(
                        field("properties.log"),
                        "missing (a kube-audit record holds the event as a JSON string there)",
                    )
                    .into());
            };
            let inner: Value = serde_json::from_str(log).map_err(|e| {
                self.bad(
                    field("properties.log"),
                    format!("not a JSON audit event: {e}"),
                )
            })?;
            return self.shape(&inner, &field("properties.log."));
        }
        if obj.contains_key("stage") || obj.get("kind").and_then(Value::as_str) == Some("Event") {
            return self.audit(v, prefix).map_err(Shape::from);
        }
        Err(self
            .bad(
                if prefix.is_empty() {
                    "line"
                } else {
                    prefix.trim_end_matches('.')
                },
                "not a Kubernetes audit event (no stage), GKE log entry (no protoPayload) or \
                 AKS record (no category)",
            )
            .into())
    }

    /// A plain `audit.k8s.io` event.
    fn audit(&mut self, v: &Value, prefix: &str) -> Result<(), BadInput> {
        let before = self.counts.events;
        let r = self.audit_event(v, prefix);
        if r.is_err() {
            // A bad event counts in the report's skipped lines, not in the events read.
            self.counts.events = before;
        }
        r
    }

    fn audit_event(&mut self, v: &Value, prefix: &str) -> Result<(), BadInput> {
        let field = |f: &str| format!("{prefix}{f}");
        let Some(stage) = v.get("stage").and_then(Value::as_str) else {
            return Err(self.bad(field("stage"), "missing stage"));
        };
        self.counts.events += 1;
        if stage != "ResponseComplete" {
            self.counts.other_stage += 1;
            return Ok(());
        }
        let code = get(v, &["responseStatus", "code"]).and_then(Value::as_i64);
        if !self.failed(code.is_some_and(|c| c >= 400)) {
            return Ok(());
        }
        let level = v.get("level").and_then(Value::as_str).unwrap_or("Metadata");
        let body = matches!(level, "Request" | "RequestResponse");
        let ev = Ev {
            verb: get_str(v, &["verb"]).unwrap_or(""),
            resource: get_str(v, &["objectRef", "resource"]).unwrap_or(""),
            subresource: get_str(v, &["objectRef", "subresource"]).unwrap_or(""),
            namespace: get_str(v, &["objectRef", "namespace"]),
            name: get_str(v, &["objectRef", "name"]),
            request: v.get("requestObject").filter(|_| body),
            response: v.get("responseObject"),
        };
        if !ev.is_storage() {
            return self.unrelated().map(|_: Option<()>| ());
        }
        // Times first, so that a request is counted only once it is known to be good.
        let (t_field, t_text) = ["requestReceivedTimestamp", "timestamp"]
            .iter()
            .find_map(|k| Some((*k, v.get(*k)?.as_str()?)))
            .ok_or_else(|| self.bad(field("requestReceivedTimestamp"), "missing"))?;
        let t = self.time(&field(t_field), t_text)?;
        let observed = match get_str(v, &["stageTimestamp"]) {
            Some(s) if t_field == "requestReceivedTimestamp" => {
                let end = self.time(&field("stageTimestamp"), s)?;
                u64::try_from(end - t).ok()
            }
            _ => None,
        };
        let Some((act, tenant)) = self.act(&ev, prefix)? else {
            return Ok(());
        };
        self.push(t, tenant, observed, act);
        Ok(())
    }

    /// A GKE Cloud Logging entry holding a Kubernetes audit record.
    fn gke(
        &mut self,
        entry: &Map<String, Value>,
        pp: &Value,
        prefix: &str,
    ) -> Result<(), BadInput> {
        let before = self.counts.events;
        let r = self.gke_entry(entry, pp, prefix);
        if r.is_err() {
            self.counts.events = before;
        }
        r
    }

    fn gke_entry(
        &mut self,
        entry: &Map<String, Value>,
        pp: &Value,
        prefix: &str,
    ) -> Result<(), BadInput> {
        let field = |f: &str| format!("{prefix}{f}");
        let method = get_str(pp, &["methodName"]).unwrap_or("");
        let is_audit = get_str(pp, &["@type"]).is_some_and(|t| t.ends_with("AuditLog"));
        let Some(rest) = method.strip_prefix("io.k8s.").filter(|_| is_audit) else {
            self.counts.foreign += 1;
            return Ok(());
        };
        self.counts.events += 1;
        let op = entry.get("operation");
        let unfinished = op.is_some_and(|o| {
            o.get("last").and_then(Value::as_bool) != Some(true)
                && o.get("first").and_then(Value::as_bool) == Some(true)
        });
        if unfinished {
            self.counts.other_stage += 1;
            return Ok(());
        }
        let code = get(pp, &["status", "code"]).and_then(Value::as_i64);
        if !self.failed(code.is_some_and(|c| c != 0)) {
            return Ok(());
        }
        // `io.k8s.<group…>.<version>.<resource>[.<subresource>].<verb>`.
        let parts: Vec<&str> = rest.split('.').collect();
        let version = parts.iter().position(|p| is_version(p));
        let (resource, subresource, verb) = match (version, parts.split_last()) {
            (Some(i), Some((verb, head))) if i + 1 < head.len() => (
                head.get(i + 1).copied().unwrap_or(""),
                head.get(i + 2).copied().unwrap_or(""),
                *verb,
            ),
            _ => ("", "", ""),
        };
        // `<group>/<version>/namespaces/<ns>/<resource>/<name>[/<sub>]`.
        let rn: Vec<&str> = get_str(pp, &["resourceName"])
            .unwrap_or("")
            .split('/')
            .collect();
        let namespace = rn
            .iter()
            .position(|s| *s == "namespaces")
            .and_then(|i| rn.get(i + 1).copied());
        let name = rn
            .iter()
            .position(|s| *s == resource)
            .and_then(|i| rn.get(i + 1).copied());
        let ev = Ev {
            verb,
            resource,
            subresource,
            namespace,
            name,
            request: pp.get("request"),
            response: pp.get("response"),
        };
        if !ev.is_storage() {
            return self.unrelated().map(|_: Option<()>| ());
        }
        let text = entry
            .get("timestamp")
            .and_then(Value::as_str)
            .ok_or_else(|| self.bad(field("timestamp"), "missing"))?;
        let t = self.time(&field("timestamp"), text)?;
        let Some((act, tenant)) = self.act(&ev, &field("protoPayload."))? else {
            return Ok(());
        };
        self.push(t, tenant, None, act);
        Ok(())
    }

    /// Whether a request goes on, counting failed ones.
    fn failed(&mut self, failed: bool) -> bool {
        if !failed {
            return true;
        }
        if self.opts.keep_failed {
            self.counts.failed_kept += 1;
            true
        } else {
            self.counts.failed += 1;
            false
        }
    }

    fn push(&mut self, t: i128, tenant: Option<String>, observed: Option<u64>, act: Act) {
        self.counts.mapped += 1;
        let seq = self.items.len() as u64;
        self.items.push(Item {
            t,
            seq,
            tenant,
            observed,
            act,
        });
    }

    fn time(&self, field: &str, text: &str) -> Result<i128, BadInput> {
        text.parse::<jiff::Timestamp>()
            .map(jiff::Timestamp::as_nanosecond)
            .map_err(|e| self.bad(field, format!("{text:?} is not an RFC 3339 time: {e}")))
    }

    /// Maps a completed request; `None` when it means nothing for storage (counted).
    fn act(
        &mut self,
        ev: &Ev<'_>,
        prefix: &str,
    ) -> Result<Option<(Act, Option<String>)>, BadInput> {
        let field = |f: &str| format!("{prefix}{f}");
        let req = ev.request;
        let name = ev
            .name
            .or_else(|| meta_name(req))
            .or_else(|| meta_name(ev.response));
        let namespace = ev
            .namespace
            .or_else(|| req.and_then(|o| get_str(o, &["metadata", "namespace"])));
        let qualify = |n: &str| match namespace {
            Some(ns) => format!("{ns}/{n}"),
            None => n.to_owned(),
        };
        let tenant = namespace.map(str::to_owned);
        let act = match (ev.resource, ev.subresource, ev.verb) {
            ("persistentvolumeclaims", "", "create") => {
                let Some(n) = name else {
                    return Err(self.bad(field("objectRef.name"), "a PVC create without a name"));
                };
                let vol = qualify(n);
                match req {
                    None => {
                        self.counts.metadata_volumes += 1;
                        Act::CreatePvc {
                            vol,
                            size: None,
                            class: None,
                            access: None,
                            mode: None,
                            source: None,
                            pv: None,
                        }
                    }
                    Some(o) => self.pvc(o, &field("requestObject."), vol, &qualify)?,
                }
            }
            ("persistentvolumeclaims", "", "delete") => match name {
                Some(n) => Act::DeletePvc { vol: qualify(n) },
                None => return self.unrelated(),
            },
            ("persistentvolumeclaims", "", "update" | "patch") => {
                let (Some(n), Some(o)) = (name, req) else {
                    self.counts.no_body += u64::from(name.is_some());
                    return if name.is_some() {
                        Ok(None)
                    } else {
                        self.unrelated()
                    };
                };
                let f = field("requestObject.");
                let size = self.patched_size(o, &f)?;
                let pv = get_str(o, &["spec", "volumeName"]).map(str::to_owned);
                if size.is_none() && pv.is_none() {
                    return self.unrelated();
                }
                Act::UpdatePvc {
                    vol: qualify(n),
                    size,
                    pv,
                }
            }
            ("volumesnapshots", "", "create") => {
                let (Some(n), Some(o)) = (name, req) else {
                    self.counts.no_body += 1;
                    return Ok(None);
                };
                let Some(pvc) = get_str(o, &["spec", "source", "persistentVolumeClaimName"]) else {
                    // Pre-provisioned (volumeSnapshotContentName): no volume to snapshot.
                    return self.unrelated();
                };
                Act::CreateSnap {
                    snap: qualify(n),
                    vol: qualify(pvc),
                    class: get_str(o, &["spec", "volumeSnapshotClassName"]).map(str::to_owned),
                }
            }
            ("volumesnapshots", "", "delete") => match name {
                Some(n) => Act::DeleteSnap { snap: qualify(n) },
                None => return self.unrelated(),
            },
            ("pods", "", "create") => {
                let Some(o) = req else {
                    self.counts.no_body += 1;
                    return Ok(None);
                };
                let Some(n) = name else {
                    return Err(self.bad(
                        field("objectRef.name"),
                        "a pod create without a name (generateName pods need level \
                         RequestResponse for the name)",
                    ));
                };
                let pvcs: Vec<String> = get(o, &["spec", "volumes"])
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|v| get_str(v, &["persistentVolumeClaim", "claimName"]))
                    .map(&qualify)
                    .collect();
                if pvcs.is_empty() {
                    self.counts.pods_without_pvcs += 1;
                    return Ok(None);
                }
                Act::CreatePod {
                    pod: qualify(n),
                    pvcs,
                    node: get_str(o, &["spec", "nodeName"]).map(str::to_owned),
                }
            }
            ("pods", "", "delete") => match name {
                Some(n) => Act::DeletePod { pod: qualify(n) },
                None => return self.unrelated(),
            },
            ("persistentvolumes", "", "create") => {
                let claim = req.and_then(|o| get(o, &["spec", "claimRef"]));
                match (name, claim) {
                    (Some(pv), Some(c)) => {
                        match (get_str(c, &["namespace"]), get_str(c, &["name"])) {
                            (Some(ns), Some(n)) => Act::BindPv {
                                pv: pv.to_owned(),
                                vol: format!("{ns}/{n}"),
                            },
                            _ => return self.unrelated(),
                        }
                    }
                    _ => return self.unrelated(),
                }
            }
            ("volumeattachments", "", "create") => {
                match req.and_then(|o| get_str(o, &["spec", "source", "persistentVolumeName"])) {
                    Some(pv) => {
                        self.counts.volume_attachments.0 += 1;
                        Act::CreateVa { pv: pv.to_owned() }
                    }
                    None => return self.unrelated(),
                }
            }
            _ => return self.unrelated(),
        };
        Ok(Some((act, tenant)))
    }

    fn unrelated<T>(&mut self) -> Result<Option<T>, BadInput> {
        self.counts.unrelated += 1;
        Ok(None)
    }

    /// The volume fields of a PVC body.
    fn pvc(
        &self,
        o: &Value,
        f: &str,
        vol: String,
        qualify: &dyn Fn(&str) -> String,
    ) -> Result<Act, BadInput> {
        let size = match get_str(o, &["spec", "resources", "requests", "storage"]) {
            None => None,
            Some(q) => Some(self.quantity(&format!("{f}spec.resources.requests.storage"), q)?),
        };
        let first_mode = get(o, &["spec", "accessModes"])
            .and_then(Value::as_array)
            .and_then(|a| a.first());
        let access = match first_mode {
            None => None,
            Some(m) => Some(match m.as_str().unwrap_or("") {
                "ReadWriteOnce" => AccessMode::ReadWriteOnce,
                "ReadWriteOncePod" => AccessMode::ReadWriteOncePod,
                "ReadOnlyMany" => AccessMode::ReadOnlyMany,
                "ReadWriteMany" => AccessMode::ReadWriteMany,
                other => {
                    return Err(self.bad(
                        format!("{f}spec.accessModes[0]"),
                        format!("unknown access mode {other:?}"),
                    ));
                }
            }),
        };
        let mode = match get_str(o, &["spec", "volumeMode"]) {
            None => None,
            Some("Filesystem") => Some(VolumeMode::Filesystem),
            Some("Block") => Some(VolumeMode::Block),
            Some(other) => {
                return Err(self.bad(
                    format!("{f}spec.volumeMode"),
                    format!("unknown volume mode {other:?}, expected Filesystem or Block"),
                ));
            }
        };
        let ds = get(o, &["spec", "dataSource"]).or_else(|| get(o, &["spec", "dataSourceRef"]));
        let source = ds.and_then(|d| {
            let n = qualify(get_str(d, &["name"])?);
            match get_str(d, &["kind"])? {
                "VolumeSnapshot" => Some(Src::Snapshot(n)),
                "PersistentVolumeClaim" => Some(Src::Volume(n)),
                _ => None,
            }
        });
        Ok(Act::CreatePvc {
            vol,
            size,
            class: get_str(o, &["spec", "storageClassName"]).map(str::to_owned),
            access,
            mode,
            source,
            pv: get_str(o, &["spec", "volumeName"]).map(str::to_owned),
        })
    }

    /// The storage size a PVC update or patch asks for: a whole object, a merge patch, or a
    /// JSON patch replacing `/spec/resources/requests/storage`.
    fn patched_size(&self, o: &Value, f: &str) -> Result<Option<u64>, BadInput> {
        if let Some(ops) = o.as_array() {
            for (i, op) in ops.iter().enumerate() {
                if get_str(op, &["path"]) == Some("/spec/resources/requests/storage")
                    && let Some(q) = get_str(op, &["value"])
                {
                    return self.quantity(&format!("{f}[{i}].value"), q).map(Some);
                }
            }
            return Ok(None);
        }
        match get_str(o, &["spec", "resources", "requests", "storage"]) {
            None => Ok(None),
            Some(q) => self
                .quantity(&format!("{f}spec.resources.requests.storage"), q)
                .map(Some),
        }
    }

    fn quantity(&self, field: &str, q: &str) -> Result<u64, BadInput> {
        match trace_format::units::parse_bytes(q) {
            Ok(0) => Err(self.bad(field, "a size of 0 bytes")),
            Ok(n) => Ok(n),
            Err(e) => Err(self.bad(field, e.to_string())),
        }
    }
}

/// Whether a method-name part is an API version (`v1`, `v1beta1`, `v2alpha1`).
fn is_version(p: &str) -> bool {
    let Some(rest) = p.strip_prefix('v') else {
        return false;
    };
    let digits = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    if digits.len() == rest.len() {
        return false;
    }
    let tail = digits
        .strip_prefix("alpha")
        .or_else(|| digits.strip_prefix("beta"))
        .unwrap_or(digits);
    tail.chars().all(|c| c.is_ascii_digit()) && (tail.is_empty() || digits != tail)
}

/// A value that is bad (follows the policy) or an error that stops the import.
enum Shape {
    Bad(Box<BadInput>),
    Fatal(ImportError),
}

impl From<BadInput> for Shape {
    fn from(b: BadInput) -> Self {
        Shape::Bad(Box::new(b))
    }
}

impl From<ImportError> for Shape {
    fn from(e: ImportError) -> Self {
        Shape::Fatal(e)
    }
}

/// Imports audit logs from readers (`(name, reader)`, the name for messages and provenance)
/// into a trace in memory. See the module documentation.
pub fn read_audit<R: BufRead>(
    sources: Vec<(String, R)>,
    opts: AuditOptions,
    policy: Policy,
) -> Result<AuditImport, ImportError> {
    let mut report = ImportReport::default();
    let mut counts = AuditCounts::default();
    let names: Vec<String> = sources.iter().map(|(n, _)| n.clone()).collect();
    let mut reader = Reader {
        policy,
        opts,
        report: &mut report,
        counts: &mut counts,
        items: Vec::new(),
        file: String::new(),
        line: 0,
    };
    for (name, r) in sources {
        reader.source(&name, r)?;
    }
    let mut items = std::mem::take(&mut reader.items);
    // Stable: equal times keep file order, then line order.
    items.sort_by_key(|i| (i.t, i.seq));
    let trace = map::map(items, names, opts, &mut counts);
    report.events = trace.events.len() as u64;
    warnings(&counts, &mut report);
    Ok(AuditImport {
        trace,
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
    let imp = read_audit(sources, opts, policy)?;
    let mut w = writer_factory(imp.trace.header.clone())?;
    for e in &imp.trace.events {
        w.write(e)?;
    }
    w.finish()?;
    Ok((imp.report, imp.counts))
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
    let (va, matched) = c.volume_attachments;
    w(
        va,
        &format!(
            "VolumeAttachment creates were read ({matched} matched to an attach, recorded in \
             provenance.parameters)"
        ),
    );
}

impl AuditCounts {
    /// Events read but not mapped: `events == ignored() + mapped`.
    pub fn ignored(&self) -> u64 {
        self.other_stage + self.failed + self.unrelated + self.pods_without_pvcs + self.no_body
    }
}
