//! Why a pod will not start, one classification for every pod the run makes (workload,
//! `io_phase`, I/O stream, fetch), and Warning Events, split into the ones Kubernetes retries
//! by itself and the ones that end an operation.
//!
//! A pod's verdict comes from its status as the kubelet and the scheduler write it
//! ([`pod_failure`]): a container waiting with an image-pull, config or start error, a
//! non-zero exit, the pod `Failed` at admission (`OutOfcpu`, …) or evicted. Those end the
//! operation as soon as the watch shows them. Warning Events are judged by [`warning_verdict`]:
//! a final gRPC code in the message (the CSI driver said the request itself is wrong) or a
//! missing seccomp profile ends it at once; a sandbox the runtime could not create ends it
//! after the failure grace unless the pod starts meanwhile; any other Warning (a
//! `FailedMount` with `Unavailable`, a `ProvisioningFailed` the provisioner retries) is the
//! cluster retrying: counted on the operation's record (`retries`), quoted by its timeout,
//! never its failure.

use k8s_openapi::api::core::v1::{Event as CoreEvent, Pod};
use kube::runtime::reflector::Store;
use replay::ProviderError;

/// Warning Events about a pod watched while it starts.
pub(crate) const POD_WARNINGS: &[&str] = &[
    "FailedAttachVolume",
    "FailedMount",
    "FailedMapVolume",
    "FailedCreatePodSandBox",
];

/// What a pod is for: a workload must keep running; an `io_phase`, stream or fetch pod has
/// started once its container ran, whatever came after (its own result says how it went).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodKind {
    /// An attach's pod: running and ready, or a failure.
    Workload,
    /// A pod that runs a program to its end.
    Job,
}

/// The error class of a Warning Event reason.
pub fn warning_class(reason: &str) -> &'static str {
    match reason {
        "ProvisioningFailed" => "provisioning_failed",
        "FailedAttachVolume" => "attach_failed",
        "FailedMount" | "FailedMapVolume" => "mount_failed",
        "FailedCreatePodSandBox" => "sandbox_failed",
        _ => "warning",
    }
}

/// How a Warning Event is taken (see [`warning_verdict`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarningVerdict {
    /// Kubernetes retries it: counted, not a failure.
    Retried,
    /// It ends the operation now, with this class.
    Final(&'static str),
    /// It ends the operation with this class unless the wait completes within the failure
    /// grace.
    Graced(&'static str),
}

/// gRPC codes (as Go's `status` prints them) that say the request itself is wrong: a retry
/// of the same request gets the same answer.
const FINAL_CODES: [&str; 6] = [
    "InvalidArgument",
    "OutOfRange",
    "Unimplemented",
    "PermissionDenied",
    "Unauthenticated",
    "AlreadyExists",
];

/// Whether a message says a seccomp profile could not be loaded (a `Localhost` profile that
/// is not on the node).
fn seccomp_missing(msg: &str) -> bool {
    let m = msg.to_ascii_lowercase();
    m.contains("seccomp")
        && [
            "no such file",
            "not found",
            "cannot load",
            "failed to load",
            "does not exist",
        ]
        .iter()
        .any(|n| m.contains(n))
}

/// The gRPC code quoted in a message (`rpc error: code = Unavailable desc = …`).
fn grpc_code(msg: &str) -> Option<&str> {
    let (i, m) = msg.match_indices("code = ").next()?;
    let rest = &msg[i + m.len()..];
    Some(
        rest.split(|c: char| !c.is_ascii_alphanumeric())
            .next()
            .unwrap_or(rest),
    )
}

/// How a Warning Event with `reason` and `message` is taken: final when its message quotes a
/// final gRPC code ([`FINAL_CODES`]), an infeasible request or a StorageClass that does not
/// exist, or when it is a sandbox that cannot load its seccomp profile; a sandbox that could
/// not be created otherwise gets the failure grace (the kubelet retries it, but most causes
/// stay); any other Warning is retried.
pub fn warning_verdict(reason: &str, message: &str) -> WarningVerdict {
    if seccomp_missing(message) {
        return WarningVerdict::Final("seccomp_profile_missing");
    }
    if reason == "FailedCreatePodSandBox" {
        return WarningVerdict::Graced("sandbox_failed");
    }
    let final_code = grpc_code(message).is_some_and(|c| FINAL_CODES.contains(&c));
    let class_missing =
        message.contains("storageclass.storage.k8s.io") && message.contains("not found");
    if final_code || message.contains("Infeasible") || class_missing {
        WarningVerdict::Final(warning_class(reason))
    } else {
        WarningVerdict::Retried
    }
}

/// The scheduler's message when the pod is `PodScheduled=False` with reason `Unschedulable`.
pub fn unschedulable(o: &Pod) -> Option<String> {
    o.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| {
            c.type_ == "PodScheduled"
                && c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
        })
        .map(|c| c.message.clone().unwrap_or_default())
}

/// The class of a container waiting reason that means it will not run as it is, if it is one.
fn waiting_class(reason: &str, message: &str) -> Option<&'static str> {
    Some(match reason {
        "ErrImagePull" | "ImagePullBackOff" | "InvalidImageName" | "ErrImageNeverPull" => {
            "image_pull_failed"
        }
        "CreateContainerConfigError" | "CreateContainerError" | "RunContainerError"
            if seccomp_missing(message) =>
        {
            "seccomp_profile_missing"
        }
        "CreateContainerConfigError" => "container_config_failed",
        "CreateContainerError" | "RunContainerError" | "CrashLoopBackOff" => "container_failed",
        _ => return None,
    })
}

/// The class of a pod that ended (`Failed`) with `reason` before it ran: evicted, refused at
/// the node's admission (`OutOfcpu`, `OutOfmemory`, `NodeAffinity`, …) or otherwise failed.
fn ended_class(reason: Option<&str>) -> &'static str {
    match reason {
        Some("Evicted") => "evicted",
        Some(r)
            if r.starts_with("OutOf")
                || r.contains("Admission")
                || matches!(
                    r,
                    "NodeAffinity" | "NodePorts" | "NodeName" | "PodOSNotSupported" | "Preempting"
                ) =>
        {
            "pod_rejected"
        }
        _ => "pod_failed",
    }
}

/// Whether a [`PodKind::Job`] pod has started: it runs, or a container of it ran already.
pub fn pod_started(o: &Pod) -> bool {
    let Some(st) = o.status.as_ref() else {
        return false;
    };
    matches!(st.phase.as_deref(), Some("Running" | "Succeeded"))
        || st.container_statuses.iter().flatten().any(|c| {
            c.state
                .as_ref()
                .is_some_and(|s| s.running.is_some() || s.terminated.is_some())
        })
}

/// The kubelet's `PodReadyToStartContainers` condition is `True`: the pod's volumes are
/// mounted and its sandbox is up, so only its images and containers remain.
pub fn ready_to_start_containers(o: &Pod) -> bool {
    o.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "PodReadyToStartContainers" && c.status == "True")
        })
}

/// Why a workload pod will never become ready, if it is known already (see
/// [`pod_failure_as`]).
pub fn pod_failure(o: &Pod, name: &str) -> Option<ProviderError> {
    pod_failure_as(o, name, PodKind::Workload)
}

/// Why a pod of `kind` will never start (a workload: never become ready), if it is known
/// already, with the kubelet's or the node's reason and message quoted:
/// - a container waiting with an image that cannot be pulled (`image_pull_failed`, naming the
///   image), a `Localhost` seccomp profile that is not on the node
///   (`seccomp_profile_missing`), a config it cannot be created with
///   (`container_config_failed`: a missing ConfigMap, Secret or user), or one that cannot be
///   created or started or keeps crashing (`container_failed`);
/// - a workload's container that exited non-zero (`container_failed`);
/// - the pod ended: evicted (`evicted`), refused by the node's admission (`pod_rejected`:
///   `OutOfcpu`, `OutOfmemory`, …) or otherwise (`pod_failed`) — for a [`PodKind::Job`] only
///   before its container ran.
pub fn pod_failure_as(o: &Pod, name: &str, kind: PodKind) -> Option<ProviderError> {
    let st = o.status.as_ref()?;
    let statuses = st
        .init_container_statuses
        .iter()
        .flatten()
        .chain(st.container_statuses.iter().flatten());
    for c in statuses {
        let state = c.state.as_ref();
        if let Some(wt) = state.and_then(|s| s.waiting.as_ref())
            && let Some(reason) = wt.reason.as_deref()
        {
            let message = wt.message.as_deref().unwrap_or("(no message)");
            let Some(class) = waiting_class(reason, message) else {
                continue;
            };
            return Some(ProviderError::new(
                class,
                format!(
                    "pod {name} container {} (image {}): {reason}: {message}",
                    c.name, c.image
                ),
            ));
        }
        if kind == PodKind::Workload
            && let Some(t) = state.and_then(|s| s.terminated.as_ref())
            && t.exit_code != 0
        {
            return Some(ProviderError::new(
                "container_failed",
                format!(
                    "pod {name} container {} exited with code {}{}{}",
                    c.name,
                    t.exit_code,
                    t.reason
                        .as_deref()
                        .map(|r| format!(" ({r})"))
                        .unwrap_or_default(),
                    t.message
                        .as_deref()
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default()
                ),
            ));
        }
    }
    let ended = match kind {
        PodKind::Workload => matches!(st.phase.as_deref(), Some("Failed" | "Succeeded")),
        PodKind::Job => st.phase.as_deref() == Some("Failed") && !pod_started(o),
    };
    ended.then(|| {
        ProviderError::new(
            ended_class(st.reason.as_deref()),
            format!(
                "pod {name} ended ({}{}) before it {}{}",
                st.phase.as_deref().unwrap_or_default(),
                st.reason
                    .as_deref()
                    .map(|r| format!(", reason {r}"))
                    .unwrap_or_default(),
                match kind {
                    PodKind::Workload => "was ready",
                    PodKind::Job => "ran",
                },
                st.message
                    .as_deref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            ),
        )
    })
}

/// What the Warning Events about an operation's objects say so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Warned {
    /// Retried ones per reason: times reported, last message.
    pub(crate) retried: Vec<(String, u32, String)>,
    /// The latest Warning of any kind, quoted.
    pub(crate) last: Option<String>,
    /// A Warning that ends the operation (at once, or after the grace), quoted.
    pub(crate) verdict: Option<(WarningVerdict, String)>,
}

/// Judges the Warning Events in `s` about the objects `objs` (name, UID) with one of
/// `reasons`.
pub(crate) fn warned(s: &Store<CoreEvent>, objs: &[(&str, &str)], reasons: &[&str]) -> Warned {
    let mut w = Warned::default();
    let mut events: Vec<_> = s
        .state()
        .into_iter()
        .filter(|e| {
            e.involved_object.uid.as_deref().is_some_and(|u| {
                objs.iter()
                    .any(|(n, uid)| *uid == u && e.involved_object.name.as_deref() == Some(n))
            }) && e.reason.as_deref().is_some_and(|r| reasons.contains(&r))
            // The volume is still attached elsewhere for a pod being deleted (a volume
            // handed from one workload to the next): the attach-detach controller retries
            // until that detach is done. A wait, not a failure; the op's timeout bounds it.
            && !e
                .message
                .as_deref()
                .is_some_and(|m| m.contains("Multi-Attach error"))
        })
        .collect();
    events.sort_by_key(|e| {
        e.last_timestamp
            .as_ref()
            .map(|t| t.0)
            .or_else(|| e.event_time.as_ref().map(|t| t.0))
    });
    for e in &events {
        let reason = e.reason.as_deref().unwrap_or_default();
        let msg = e.message.as_deref().unwrap_or("(no message)");
        let count = e
            .count
            .unwrap_or(1)
            .max(e.series.as_ref().and_then(|s| s.count).unwrap_or(1))
            .max(1);
        let count = u32::try_from(count).unwrap_or(0);
        let quoted = format!(
            "Warning {reason} on {} {}{}: {msg}",
            e.involved_object.kind.as_deref().unwrap_or("object"),
            e.involved_object.name.as_deref().unwrap_or_default(),
            if count > 1 {
                format!(" ({count} times)")
            } else {
                String::new()
            }
        );
        match warning_verdict(reason, msg) {
            WarningVerdict::Retried => match w.retried.iter_mut().find(|(r, _, _)| r == reason) {
                Some(x) => {
                    x.1 = x.1.saturating_add(count);
                    msg.clone_into(&mut x.2);
                }
                None => w.retried.push((reason.to_owned(), count, msg.to_owned())),
            },
            v @ WarningVerdict::Final(_) => {
                if !matches!(w.verdict, Some((WarningVerdict::Final(_), _))) {
                    w.verdict = Some((v, quoted.clone()));
                }
            }
            v @ WarningVerdict::Graced(_) => {
                if w.verdict.is_none() {
                    w.verdict = Some((v, quoted.clone()));
                }
            }
        }
        w.last = Some(quoted);
    }
    w
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    use kube::runtime::{reflector, watcher};

    use super::{POD_WARNINGS, WarningVerdict, grpc_code, warned, warning_verdict};

    fn event(
        name: &str,
        pod_uid: &str,
        reason: &str,
        msg: &str,
        count: i32,
        at: &str,
    ) -> CoreEvent {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "ns", "uid": name},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "ns", "uid": pod_uid},
            "reason": reason, "message": msg, "type": "Warning", "count": count,
            "lastTimestamp": at,
        }))
        .expect("an Event")
    }

    /// The kubelet's Events about one pod: retried ones are summed per reason (an Event's
    /// `count` is how often it repeated), other pods' and Multi-Attach ones are ignored, the
    /// latest is quoted, and a final one decides.
    #[test]
    fn warnings_about_a_pod_are_counted_and_judged() {
        let (store, mut writer) = reflector::store::<CoreEvent>();
        let mut add = |e: CoreEvent| writer.apply_watcher_event(&watcher::Event::Apply(e));
        let unavailable = "MountVolume.MountDevice failed: rpc error: code = Unavailable desc = x";
        add(event(
            "e1",
            "u1",
            "FailedMount",
            unavailable,
            3,
            "2026-01-01T00:00:01Z",
        ));
        add(event(
            "e2",
            "u1",
            "FailedMount",
            "timed out waiting",
            2,
            "2026-01-01T00:00:05Z",
        ));
        add(event(
            "e3",
            "u2",
            "FailedMount",
            "another pod",
            9,
            "2026-01-01T00:00:06Z",
        ));
        add(event(
            "e4",
            "u1",
            "FailedAttachVolume",
            "Multi-Attach error for volume \"pvc-1\"",
            4,
            "2026-01-01T00:00:07Z",
        ));
        let w = warned(&store, &[("p", "u1")], POD_WARNINGS);
        assert_eq!(
            w.retried,
            vec![("FailedMount".to_owned(), 5, "timed out waiting".to_owned())]
        );
        assert!(w.verdict.is_none());
        assert!(
            w.last
                .as_deref()
                .is_some_and(|l| l.contains("timed out waiting") && l.contains("(2 times)")),
            "{:?}",
            w.last
        );
        add(event(
            "e5",
            "u1",
            "FailedMount",
            "MountVolume.MountDevice failed: rpc error: code = InvalidArgument desc = bad",
            1,
            "2026-01-01T00:00:08Z",
        ));
        let w = warned(&store, &[("p", "u1")], POD_WARNINGS);
        assert!(
            matches!(&w.verdict, Some((WarningVerdict::Final("mount_failed"), m)) if m.contains("InvalidArgument")),
            "{:?}",
            w.verdict
        );
    }

    #[test]
    fn warnings_kubernetes_retries_are_told_from_final_ones() {
        let mount = |code: &str| {
            format!(
                "MountVolume.MountDevice failed for volume \"pvc-1\" : rpc error: code = {code} \
                 desc = injected failure (failRate)"
            )
        };
        assert_eq!(grpc_code(&mount("Unavailable")), Some("Unavailable"));
        assert_eq!(
            warning_verdict("FailedMount", &mount("Unavailable")),
            WarningVerdict::Retried
        );
        assert_eq!(
            warning_verdict("FailedMount", &mount("Internal")),
            WarningVerdict::Retried
        );
        assert_eq!(
            warning_verdict("FailedMount", &mount("InvalidArgument")),
            WarningVerdict::Final("mount_failed")
        );
        assert_eq!(
            warning_verdict(
                "ProvisioningFailed",
                "failed to provision volume with StorageClass \"c\": rpc error: code = \
                 OutOfRange desc = 5Gi exceeds maxSize 2Gi"
            ),
            WarningVerdict::Final("provisioning_failed")
        );
        // A code named only in the description is not the error's code.
        assert_eq!(
            warning_verdict(
                "FailedAttachVolume",
                "AttachVolume.Attach failed: rpc error: code = Aborted desc = not InvalidArgument"
            ),
            WarningVerdict::Retried
        );
        // No gRPC code: the cluster retries (local-path's helper pod, a mount timeout).
        assert_eq!(
            warning_verdict(
                "ProvisioningFailed",
                "failed to provision volume with StorageClass \"local-path\": failed to create \
                 volume pvc-1: create process timeout after 120 seconds"
            ),
            WarningVerdict::Retried
        );
        assert_eq!(
            warning_verdict(
                "ProvisioningFailed",
                "storageclass.storage.k8s.io \"nope\" not found"
            ),
            WarningVerdict::Final("provisioning_failed")
        );
        assert_eq!(
            warning_verdict(
                "FailedCreatePodSandBox",
                "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup \
                 network for sandbox"
            ),
            WarningVerdict::Graced("sandbox_failed")
        );
        assert_eq!(
            warning_verdict(
                "FailedCreatePodSandBox",
                "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to \
                 generate sandbox container spec options: failed to generate seccomp spec \
                 opts: cannot load seccomp profile \"/var/lib/kubelet/seccomp/x.json\": open \
                 /var/lib/kubelet/seccomp/x.json: no such file or directory"
            ),
            WarningVerdict::Final("seccomp_profile_missing")
        );
    }
}
