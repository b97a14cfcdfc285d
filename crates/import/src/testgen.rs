//! Generators of realistic importer inputs, for tests, benchmarks and fuzz seeds.
//!
//! The audit log generator writes `audit.k8s.io/v1` events shaped like a kube-apiserver's
//! (fields, stages, levels, controllers' requests) for a storage workload's life cycle. It is
//! a stand-in: a later issue records a real API server's audit log and replaces it.

use std::fmt::Write as _;

use serde_json::{Value, json};

/// Microseconds → RFC 3339 with microseconds, as the API server writes them.
fn ts(us: u64) -> String {
    let t = jiff::Timestamp::from_microsecond(1_763_700_000_000_000 + us as i64)
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    format!("{t:.6}")
}

/// One audit event as a JSON line.
struct Ev<'a> {
    us: u64,
    latency_us: u64,
    stage: &'a str,
    level: &'a str,
    verb: &'a str,
    user: &'a str,
    resource: &'a str,
    group: &'a str,
    subresource: Option<&'a str>,
    namespace: Option<&'a str>,
    name: Option<&'a str>,
    code: u16,
    request: Option<Value>,
}

impl Ev<'_> {
    fn line(&self, id: u64) -> String {
        let mut object_ref = json!({"resource": self.resource, "apiVersion": "v1"});
        if !self.group.is_empty() {
            object_ref["apiGroup"] = json!(self.group);
        }
        if let Some(ns) = self.namespace {
            object_ref["namespace"] = json!(ns);
        }
        if let Some(n) = self.name {
            object_ref["name"] = json!(n);
        }
        if let Some(s) = self.subresource {
            object_ref["subresource"] = json!(s);
        }
        let prefix = if self.group.is_empty() {
            "/api/v1".to_owned()
        } else {
            format!("/apis/{}/v1", self.group)
        };
        let mut uri = prefix;
        if let Some(ns) = self.namespace {
            let _ = write!(uri, "/namespaces/{ns}");
        }
        let _ = write!(uri, "/{}", self.resource);
        if let (Some(n), false) = (self.name, self.verb == "create") {
            let _ = write!(uri, "/{n}");
        }
        let mut v = json!({
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "level": self.level,
            "auditID": format!("00000000-0000-4000-8000-{id:012x}"),
            "stage": self.stage,
            "requestURI": uri,
            "verb": self.verb,
            "user": {"username": self.user, "groups": ["system:authenticated"]},
            "sourceIPs": ["10.0.0.2"],
            "userAgent": "kubectl/v1.33.1 (linux/amd64) kubernetes/8adc0f0",
            "objectRef": object_ref,
            "requestReceivedTimestamp": ts(self.us),
            "stageTimestamp": ts(self.us + if self.stage == "ResponseComplete" { self.latency_us } else { 0 }),
            "annotations": {"authorization.k8s.io/decision": if self.code == 403 { "forbid" } else { "allow" }},
        });
        if self.stage == "ResponseComplete" {
            v["responseStatus"] = if self.code >= 400 {
                json!({"metadata": {}, "status": "Failure", "reason": "Forbidden", "code": self.code})
            } else {
                json!({"metadata": {}, "code": self.code})
            };
        }
        if let (Some(r), true) = (&self.request, self.level != "Metadata") {
            v["requestObject"] = r.clone();
        }
        v.to_string()
    }
}

fn pvc(ns: &str, name: &str, size: &str, source: Option<(&str, &str)>) -> Value {
    let mut spec = json!({
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": size}},
        "storageClassName": "csi-standard",
        "volumeMode": "Filesystem",
    });
    if let Some((kind, src)) = source {
        let group = if kind == "VolumeSnapshot" {
            json!("snapshot.storage.k8s.io")
        } else {
            Value::Null
        };
        spec["dataSource"] = json!({"kind": kind, "name": src, "apiGroup": group});
    }
    json!({"kind": "PersistentVolumeClaim", "apiVersion": "v1",
           "metadata": {"name": name, "namespace": ns}, "spec": spec, "status": {}})
}

/// An audit log of `cycles` storage life cycles (one line per event, RFC 3339 µs times,
/// nearly sorted as an API server writes them: each line is logged at its `stageTimestamp`).
///
/// Cycle `i`, in namespace `team-<i % 3>`: a PVC create (RequestReceived and ResponseComplete
/// stages), the provisioner's PV create and the PV controller's binding update, a pod create
/// mounting the PVC, its binding, a VolumeAttachment, a snapshot, a resize patch, a denied
/// (403) PVC create, a PVC `get`, then pod, snapshot, PVC and attachment deletes. Every
/// fourth cycle's pod also mounts `shared-<ns>`, a PVC never created in the log, so the
/// import declares it as pre-existing; every fifth cycle restores a second PVC from the
/// snapshot.
pub fn audit_log(cycles: u64) -> String {
    audit_log_with_noise(cycles, 0)
}

/// [`audit_log`] with `noise` more lines per cycle of what dominates a real API server's log
/// and means nothing for storage: Metadata-level reads and watches, node and pod status
/// patches, config map and endpoint updates (spread over the cycle, written after it).
pub fn audit_log_with_noise(cycles: u64, noise: u64) -> String {
    let mut out = String::new();
    let mut id = 0u64;
    let mut push = |out: &mut String, ev: Ev<'_>| {
        id += 1;
        out.push_str(&ev.line(id));
        out.push('\n');
    };
    for i in 0..cycles {
        let ns = format!("team-{}", i % 3);
        let ns = ns.as_str();
        let t = i * 10_000_000; // 10 s per cycle
        let pvc_name = format!("data-{i}");
        let pv = format!("pvc-{i:08x}-0000-4000-8000-000000000000");
        let pod = format!("app-{i}");
        let snap = format!("snap-{i}");
        let node = format!("node-{}", i % 2);
        let base = Ev {
            us: t,
            latency_us: 4_000 + (i * 37) % 3_000,
            stage: "ResponseComplete",
            level: "RequestResponse",
            verb: "create",
            user: "alice",
            resource: "persistentvolumeclaims",
            group: "",
            subresource: None,
            namespace: Some(ns),
            name: Some(&pvc_name),
            code: 201,
            request: Some(pvc(ns, &pvc_name, "10Gi", None)),
        };
        push(
            &mut out,
            Ev {
                stage: "RequestReceived",
                ..base.clone_shallow()
            },
        );
        push(&mut out, base.clone_shallow());
        push(
            &mut out,
            Ev {
                us: t + 900_000,
                user: "system:serviceaccount:kube-system:csi-provisioner",
                resource: "persistentvolumes",
                namespace: None,
                name: Some(&pv),
                level: "Request",
                request: Some(json!({"kind": "PersistentVolume", "apiVersion": "v1",
                "metadata": {"name": pv},
                "spec": {"capacity": {"storage": "10Gi"}, "csi": {"driver": "csi.example.com", "volumeHandle": pv},
                         "claimRef": {"kind": "PersistentVolumeClaim", "namespace": ns, "name": pvc_name}}})),
                ..base.clone_shallow()
            },
        );
        push(
            &mut out,
            Ev {
                us: t + 1_000_000,
                verb: "update",
                user: "system:kube-controller-manager",
                code: 200,
                level: "Request",
                request: Some({
                    let mut p = pvc(ns, &pvc_name, "10Gi", None);
                    p["spec"]["volumeName"] = json!(pv);
                    p
                }),
                ..base.clone_shallow()
            },
        );
        let mut volumes = vec![
            json!({"name": "data", "persistentVolumeClaim": {"claimName": pvc_name}}),
            json!({"name": "kube-api-access", "projected": {"sources": []}}),
        ];
        let shared = format!("shared-{ns}");
        if i % 4 == 0 {
            volumes.push(json!({"name": "shared", "persistentVolumeClaim": {"claimName": shared, "readOnly": true}}));
        }
        push(
            &mut out,
            Ev {
                us: t + 2_000_000,
                user: "system:serviceaccount:kube-system:replicaset-controller",
                resource: "pods",
                name: Some(&pod),
                level: "Request",
                request: Some(json!({"kind": "Pod", "apiVersion": "v1",
                "metadata": {"name": pod, "namespace": ns, "labels": {"app": "db"}},
                "spec": {"volumes": volumes, "containers": [{"name": "db", "image": "postgres:17"}]}})),
                ..base.clone_shallow()
            },
        );
        push(
            &mut out,
            Ev {
                us: t + 2_050_000,
                user: "system:kube-scheduler",
                resource: "pods",
                subresource: Some("binding"),
                name: Some(&pod),
                level: "Request",
                request: Some(
                    json!({"kind": "Binding", "apiVersion": "v1", "metadata": {"name": pod},
                                 "target": {"kind": "Node", "name": node}}),
                ),
                ..base.clone_shallow()
            },
        );
        let va = format!("csi-{i:016x}");
        push(
            &mut out,
            Ev {
                us: t + 2_300_000,
                user: "system:kube-controller-manager",
                resource: "volumeattachments",
                group: "storage.k8s.io",
                namespace: None,
                name: Some(&va),
                level: "Request",
                request: Some(
                    json!({"kind": "VolumeAttachment", "apiVersion": "storage.k8s.io/v1",
                "metadata": {"name": va},
                "spec": {"attacher": "csi.example.com", "nodeName": node, "source": {"persistentVolumeName": pv}}}),
                ),
                ..base.clone_shallow()
            },
        );
        push(
            &mut out,
            Ev {
                us: t + 2_800_000,
                verb: "patch",
                user: "system:serviceaccount:kube-system:csi-attacher",
                resource: "volumeattachments",
                subresource: Some("status"),
                group: "storage.k8s.io",
                namespace: None,
                name: Some(&va),
                code: 200,
                level: "Request",
                request: Some(
                    json!({"status": {"attached": true, "attachmentMetadata": {"devicePath": "/dev/loop7"}}}),
                ),
                ..base.clone_shallow()
            },
        );
        push(
            &mut out,
            Ev {
                us: t + 4_000_000,
                resource: "volumesnapshots",
                group: "snapshot.storage.k8s.io",
                name: Some(&snap),
                request: Some(
                    json!({"kind": "VolumeSnapshot", "apiVersion": "snapshot.storage.k8s.io/v1",
                "metadata": {"name": snap, "namespace": ns},
                "spec": {"volumeSnapshotClassName": "csi-snapclass", "source": {"persistentVolumeClaimName": pvc_name}}}),
                ),
                ..base.clone_shallow()
            },
        );
        push(
            &mut out,
            Ev {
                us: t + 5_000_000,
                verb: "patch",
                code: 200,
                request: Some(json!({"spec": {"resources": {"requests": {"storage": "20Gi"}}}})),
                ..base.clone_shallow()
            },
        );
        let restored = format!("restored-{i}");
        if i % 5 == 0 {
            push(
                &mut out,
                Ev {
                    us: t + 5_500_000,
                    name: Some(&restored),
                    request: Some(pvc(ns, &restored, "20Gi", Some(("VolumeSnapshot", &snap)))),
                    ..base.clone_shallow()
                },
            );
        }
        push(
            &mut out,
            Ev {
                us: t + 5_800_000,
                user: "mallory",
                name: Some("forbidden"),
                code: 403,
                level: "Metadata",
                ..base.clone_shallow()
            },
        );
        push(
            &mut out,
            Ev {
                us: t + 6_000_000,
                verb: "get",
                code: 200,
                level: "Metadata",
                ..base.clone_shallow()
            },
        );
        let delete =
            |us: u64, resource: &'static str, group: &'static str, name: &str, ns: Option<&str>| {
                (us, resource, group, name.to_owned(), ns.map(str::to_owned))
            };
        let mut deletes = vec![
            delete(t + 7_000_000, "pods", "", &pod, Some(ns)),
            delete(
                t + 8_000_000,
                "volumesnapshots",
                "snapshot.storage.k8s.io",
                &snap,
                Some(ns),
            ),
            delete(
                t + 9_000_000,
                "persistentvolumeclaims",
                "",
                &pvc_name,
                Some(ns),
            ),
            delete(
                t + 9_500_000,
                "volumeattachments",
                "storage.k8s.io",
                &va,
                None,
            ),
        ];
        if i % 5 == 0 {
            deletes.push(delete(
                t + 9_600_000,
                "persistentvolumeclaims",
                "",
                &restored,
                Some(ns),
            ));
        }
        for (us, resource, group, name, dns) in &deletes {
            push(
                &mut out,
                Ev {
                    us: *us,
                    verb: "delete",
                    code: 200,
                    resource,
                    group,
                    name: Some(name),
                    namespace: dns.as_deref(),
                    level: "Request",
                    request: Some(
                        json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}),
                    ),
                    ..base.clone_shallow()
                },
            );
        }
        const NOISE: [(&str, &str, &str, Option<&str>, &str); 6] = [
            ("get", "configmaps", "", None, "ResponseComplete"),
            ("list", "pods", "", None, "ResponseComplete"),
            (
                "watch",
                "endpointslices",
                "discovery.k8s.io",
                None,
                "ResponseStarted",
            ),
            ("patch", "nodes", "", Some("status"), "ResponseComplete"),
            ("patch", "pods", "", Some("status"), "ResponseComplete"),
            ("update", "configmaps", "", None, "ResponseComplete"),
        ];
        for k in 0..noise {
            let (verb, resource, group, subresource, stage) = NOISE[(k % 6) as usize];
            let name = format!("obj-{}", k % 50);
            push(
                &mut out,
                Ev {
                    us: t + k * 9_900_000 / noise,
                    latency_us: 300 + (k * 13) % 900,
                    stage,
                    verb,
                    user: "system:node:node-0",
                    resource,
                    group,
                    subresource,
                    name: (verb != "list" && verb != "watch").then_some(name.as_str()),
                    code: 200,
                    level: "Metadata",
                    request: None,
                    ..base.clone_shallow()
                },
            );
        }
    }
    out
}

impl<'a> Ev<'a> {
    fn clone_shallow(&self) -> Ev<'a> {
        Ev {
            us: self.us,
            latency_us: self.latency_us,
            stage: self.stage,
            level: self.level,
            verb: self.verb,
            user: self.user,
            resource: self.resource,
            group: self.group,
            subresource: self.subresource,
            namespace: self.namespace,
            name: self.name,
            code: self.code,
            request: self.request.clone(),
        }
    }
}

/// A fio v3 iolog of `n` I/O lines on one file.
pub fn fio_v3(n: u64) -> String {
    let mut s = String::from("fio version 3 iolog\n0 /dev/vdb add\n0 /dev/vdb open\n");
    for i in 0..n {
        let act = if i % 3 == 0 { "write" } else { "read" };
        let _ = writeln!(
            s,
            "{} /dev/vdb {act} {} 4096",
            i * 10,
            (i * 7919 % 65_536) * 4096
        );
    }
    let _ = writeln!(s, "{} /dev/vdb close", n * 10);
    s
}

/// blkparse default output of `n` requests (a `D` and a `C` line each) on device 8,16.
pub fn blkparse(n: u64) -> String {
    let mut s = String::new();
    for i in 0..n {
        let t = i * 20_000;
        let (rwbs, sector) = if i % 3 == 0 {
            ("W", i * 8)
        } else {
            ("R", 1_000_000 + i * 8)
        };
        let _ = writeln!(
            s,
            "  8,16   {}   {:>6}  {:>5}.{:09}  {:>4}  D  {rwbs} {sector} + 8 [fio]",
            i % 2,
            2 * i + 1,
            t / 1_000_000_000,
            t % 1_000_000_000,
            4242
        );
        let c = t + 15_000;
        let _ = writeln!(
            s,
            "  8,16   {}   {:>6}  {:>5}.{:09}     0  C  {rwbs} {sector} + 8 [0]",
            i % 2,
            2 * i + 2,
            c / 1_000_000_000,
            c % 1_000_000_000,
        );
    }
    s
}

/// MSR Cambridge CSV of `n` requests on two disks.
pub fn msr(n: u64) -> String {
    let mut s = String::new();
    for i in 0..n {
        let ty = if i % 3 == 0 { "Write" } else { "Read" };
        let _ = writeln!(
            s,
            "{},usr,{},{ty},{},4096,{}",
            128_166_372_003_061_629 + i * 1_000,
            i % 2,
            (i * 7919 % 65_536) * 4096,
            300 + i % 50
        );
    }
    s
}

/// Alibaba block CSV of `n` requests on three devices.
pub fn alibaba(n: u64) -> String {
    let mut s = String::new();
    for i in 0..n {
        let op = if i % 3 == 0 { 'W' } else { 'R' };
        let _ = writeln!(
            s,
            "{},{op},{},4096,{}",
            i % 3,
            (i * 7919 % 65_536) * 4096,
            1_577_808_000_000_000 + i * 10
        );
    }
    s
}

/// Tencent CBS CSV of `n` requests, 1000 per second.
pub fn tencent(n: u64) -> String {
    let mut s = String::new();
    for i in 0..n {
        let _ = writeln!(
            s,
            "{},{},8,{},{}",
            1_538_323_200 + i / 1000,
            i * 7919 % 65_536 * 8,
            u8::from(i % 3 == 0),
            1000 + i % 4
        );
    }
    s
}
