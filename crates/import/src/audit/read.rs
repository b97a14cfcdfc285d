//! Reading audit log sources: lines → mapped requests ([`Item`]s), with counts.
//!
//! A plain audit event line takes the fast path: [`scan::members_into`] finds its top-level
//! values, the few short ones that classify it are parsed, and only a storage request has its
//! bodies parsed into `serde_json::Value`s. Wrapped events (GKE entries, AKS records, batches)
//! and lines the scan cannot follow are parsed whole (the JSON parser then names what is
//! wrong).

use std::borrow::Cow;
use std::collections::VecDeque;
use std::io::BufRead;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::scan;
use super::{Act, AuditCounts, AuditOptions, Item};
use crate::{BadInput, ImportError, ImportReport, Policy};

impl Ev<'_> {
    /// Whether the request is on a resource (or subresource) the mapping reads.
    fn is_storage(&self) -> bool {
        matches!(
            (self.resource, self.subresource),
            (
                "persistentvolumeclaims"
                    | "volumesnapshots"
                    | "pods"
                    | "persistentvolumes"
                    | "volumeattachments"
                    | "volumeattributesclasses"
                    | "volumegroupsnapshots"
                    | "nodes",
                ""
            ) | ("pods", "binding")
                | ("volumeattachments", "status")
        )
    }
}

/// The fields of an audit event the mapping needs, whatever wrapper it came in.
pub(super) struct Ev<'v> {
    pub verb: &'v str,
    pub resource: &'v str,
    pub subresource: &'v str,
    pub namespace: Option<&'v str>,
    pub name: Option<&'v str>,
    /// The request body (absent at level Metadata).
    pub request: Option<&'v Value>,
    pub response: Option<&'v Value>,
}

pub(super) fn meta_name(o: Option<&Value>) -> Option<&str> {
    o.and_then(|o| get_str(o, &["metadata", "name"]))
}

pub(super) fn get<'v>(v: &'v Value, path: &[&str]) -> Option<&'v Value> {
    path.iter().try_fold(v, |v, k| v.get(k))
}

pub(super) fn get_str<'v>(v: &'v Value, path: &[&str]) -> Option<&'v str> {
    get(v, path).and_then(Value::as_str)
}

/// One audit log source being read.
pub(super) struct Source<R> {
    pub name: String,
    r: R,
    line: u64,
    buf: Vec<u8>,
    pub done: bool,
}

impl<R: BufRead> Source<R> {
    pub fn new(name: String, r: R) -> Self {
        Source {
            name,
            r,
            line: 0,
            buf: Vec::with_capacity(4096),
            done: false,
        }
    }
}

/// `objectRef` of an audit event.
#[derive(Deserialize, Default)]
struct ObjectRef<'a> {
    #[serde(borrow, default)]
    resource: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    subresource: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    namespace: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
}

/// `responseStatus` of an audit event.
#[derive(Deserialize, Default)]
struct Status {
    #[serde(default)]
    code: Option<i64>,
}

/// A JSON string value's text (borrowed when it has no escapes); `None` for other values.
fn text(raw: &[u8]) -> Option<Cow<'_, str>> {
    let inner = raw.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    if !inner.contains(&b'\\') {
        return std::str::from_utf8(inner).ok().map(Cow::Borrowed);
    }
    serde_json::from_slice::<String>(raw).ok().map(Cow::Owned)
}

/// Reads audit log lines into mapped items and counts.
pub(super) struct Reader<'p> {
    pub policy: Policy,
    pub opts: AuditOptions,
    pub report: &'p mut ImportReport,
    pub counts: &'p mut AuditCounts,
    /// Items mapped from the lines read so far, not yet taken.
    pub items: VecDeque<Item>,
    src: usize,
    seq: u64,
    file: String,
    line: u64,
    /// The buffer of a line's members, kept empty between lines.
    members: Vec<scan::Member<'static>>,
}

impl<'p> Reader<'p> {
    pub fn new(
        policy: Policy,
        opts: AuditOptions,
        report: &'p mut ImportReport,
        counts: &'p mut AuditCounts,
    ) -> Self {
        Reader {
            policy,
            opts,
            report,
            counts,
            items: VecDeque::new(),
            src: 0,
            seq: 0,
            file: String::new(),
            line: 0,
            members: Vec::with_capacity(24),
        }
    }
}

impl Reader<'_> {
    pub(super) fn bad(&self, field: impl Into<String>, message: impl Into<String>) -> BadInput {
        BadInput {
            file: self.file.clone(),
            line: self.line,
            record: false,
            field: field.into(),
            message: message.into(),
        }
    }

    /// Reads lines of source `idx` until one maps to an item or the source ends.
    pub fn pull<R: BufRead>(&mut self, idx: usize, s: &mut Source<R>) -> Result<(), ImportError> {
        self.src = idx;
        self.file.clone_from(&s.name);
        while self.items.is_empty() && !s.done {
            s.buf.clear();
            if s.r.read_until(b'\n', &mut s.buf)? == 0 {
                s.done = true;
                return Ok(());
            }
            s.line += 1;
            self.line = s.line;
            let line = s.buf.trim_ascii();
            if line.is_empty() {
                continue;
            }
            // One allocation for every line's members: emptied, a `Vec` can change the
            // lifetime it borrows with (collecting in place reuses its buffer).
            let mut m: Vec<scan::Member<'_>> = std::mem::take(&mut self.members)
                .into_iter()
                .map(|_| (&[][..], &[][..]))
                .collect();
            let fast = match scan::members_into(line, &mut m) {
                Ok(()) => self.fast(&m),
                Err(_) => Ok(false),
            };
            m.clear();
            self.members = m.into_iter().map(|_| (&[][..], &[][..])).collect();
            if fast? {
                continue;
            }
            let parsed = serde_json::from_slice::<Value>(&s.buf);
            let value = match parsed {
                Ok(v) => v,
                Err(e) if e.is_eof() && s.line == 1 => {
                    // A pretty-printed document: the whole source is one value.
                    s.r.read_to_end(&mut s.buf)?;
                    s.done = true;
                    match serde_json::from_slice::<Value>(&s.buf) {
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
        Ok(())
    }

    /// A plain audit event from its scanned members; `false` when the line is not one (a
    /// wrapper or a batch: the caller parses it whole).
    fn fast(&mut self, m: &[scan::Member<'_>]) -> Result<bool, ImportError> {
        let member = |k: &str| scan::get(m, k);
        let kind = member("kind").and_then(text);
        let wrapped = member("records").is_some()
            || member("protoPayload").is_some()
            || member("category").is_some()
            || kind.as_deref() == Some("EventList");
        if wrapped || (member("stage").is_none() && kind.as_deref() != Some("Event")) {
            return Ok(false);
        }
        let before = self.counts.events;
        match self.fast_event(m) {
            Ok(()) => Ok(true),
            Err(b) => {
                self.counts.events = before;
                self.report.bad(self.policy, b).map(|()| true)
            }
        }
    }

    fn fast_event(&mut self, m: &[scan::Member<'_>]) -> Result<(), BadInput> {
        let member = |k: &str| scan::get(m, k);
        let Some(stage) = member("stage").and_then(text) else {
            return Err(self.bad("stage", "missing stage"));
        };
        self.counts.events += 1;
        if stage != "ResponseComplete" {
            self.counts.other_stage += 1;
            return Ok(());
        }
        let status: Status = match member("responseStatus") {
            Some(raw) => serde_json::from_slice(raw)
                .map_err(|e| self.bad("responseStatus", format!("not a status: {e}")))?,
            None => Status::default(),
        };
        if !self.failed(status.code.is_some_and(|c| c >= 400)) {
            return Ok(());
        }
        let object_ref: ObjectRef<'_> = match member("objectRef") {
            Some(raw) => serde_json::from_slice(raw)
                .map_err(|e| self.bad("objectRef", format!("not an object reference: {e}")))?,
            None => ObjectRef::default(),
        };
        let verb = member("verb").and_then(text);
        let level = member("level").and_then(text);
        let body = matches!(level.as_deref(), Some("Request" | "RequestResponse"));
        let mut ev = Ev {
            verb: verb.as_deref().unwrap_or(""),
            resource: object_ref.resource.as_deref().unwrap_or(""),
            subresource: object_ref.subresource.as_deref().unwrap_or(""),
            namespace: object_ref.namespace.as_deref(),
            name: object_ref.name.as_deref(),
            request: None,
            response: None,
        };
        if !ev.is_storage() {
            self.counts.unrelated += 1;
            return Ok(());
        }
        let value = |k: &str| -> Result<Option<Value>, BadInput> {
            match member(k) {
                None => Ok(None),
                Some(raw) => serde_json::from_slice(raw)
                    .map(Some)
                    .map_err(|e| self.bad(k, format!("not JSON: {e}"))),
            }
        };
        let request = if body { value("requestObject")? } else { None };
        let response = if ev.name.is_none() {
            value("responseObject")?
        } else {
            None
        };
        ev.request = request.as_ref().filter(|v| !v.is_null());
        ev.response = response.as_ref();
        let (t_field, t_text) = ["requestReceivedTimestamp", "timestamp"]
            .iter()
            .find_map(|k| Some((*k, member(k).and_then(text)?)))
            .ok_or_else(|| self.bad("requestReceivedTimestamp", "missing"))?;
        let t = self.time(t_field, &t_text)?;
        let observed = match member("stageTimestamp").and_then(text) {
            Some(s) if t_field == "requestReceivedTimestamp" => {
                let end = self.time("stageTimestamp", &s)?;
                u64::try_from(end - t).ok()
            }
            _ => None,
        };
        let Some((act, tenant)) = self.act(&ev, "")? else {
            return Ok(());
        };
        self.push(t, tenant, observed, act);
        Ok(())
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
        self.seq += 1;
        self.items.push_back(Item {
            t,
            src: self.src,
            seq: self.seq,
            line: self.line,
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
