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

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event as CoreEvent, Pod};
use kube::runtime::reflector::{ObjectRef, Store};
use replay::{OpCtx, ProviderError};

use crate::{Kube, stamp};

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

/// How a workload pod meets `Unschedulable`: fail after the failure grace, or (`wait`, the
/// trace's `attach.wait_for_room`) wait, with when it was first seen (`since`) and the
/// CSINode changes to time the wait by (`room.rs`).
#[derive(Debug, Default)]
pub(crate) struct Room {
    pub(crate) wait: bool,
    pub(crate) since: std::sync::Mutex<Option<Instant>>,
    pub(crate) csinodes: Option<std::sync::Arc<crate::room::CsiNodeLog>>,
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
struct Warned {
    /// Retried ones per reason: times reported, last message.
    retried: Vec<(String, u32, String)>,
    /// The latest Warning of any kind, quoted.
    last: Option<String>,
    /// A Warning that ends the operation (at once, or after the grace), quoted.
    verdict: Option<(WarningVerdict, String)>,
}

/// What ended a wait of [`Kube::or_warning`].
enum Next<T> {
    Done(T),
    Expired,
    Changed(Warned),
}

/// Judges the Warning Events in `s` about the objects `objs` (name, UID) with one of
/// `reasons`.
fn warned(s: &Store<CoreEvent>, objs: &[(&str, &str)], reasons: &[&str]) -> Warned {
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

impl Kube {
    /// Runs `cond` until it completes, judging the Warning Events about `objs` (name, UID)
    /// with one of `reasons` meanwhile ([`warning_verdict`]): a final one fails the operation
    /// with its class and message; a graced one fails it unless `cond` completes within the
    /// failure grace; retried ones are counted on the record (`OpCtx::retried`) and the
    /// latest is quoted in what the operation waits for (so a timeout names it).
    pub(crate) async fn or_warning<T>(
        &self,
        ctx: &OpCtx,
        cond: impl Future<Output = (Result<T, ProviderError>, Instant)>,
        objs: &[(&str, &str)],
        reasons: &[&str],
    ) -> (Result<T, ProviderError>, Instant) {
        let Some(ev) = self.watches.get().and_then(|w| w.events.clone()) else {
            return cond.await;
        };
        let mut cond = std::pin::pin!(cond);
        let base = self.waiting_for(ctx.event_id).unwrap_or_default();
        let grace = Duration::from_nanos(self.config.failure_grace_ns);
        let mut seen = Warned::default();
        let mut graced: Option<(tokio::time::Instant, &'static str, String)> = None;
        loop {
            let changed = async {
                if objs.is_empty() {
                    return std::future::pending().await;
                }
                let waits = objs.iter().map(|(n, _)| {
                    Box::pin(ev.wait_for(n, |s| {
                        let w = warned(s, objs, reasons);
                        (w != seen).then_some(w)
                    }))
                });
                futures::future::select_all(waits).await.0
            };
            let expired = async {
                match &graced {
                    Some((at, _, _)) => tokio::time::sleep_until(*at).await,
                    None => std::future::pending().await,
                }
            };
            let next = tokio::select! {
                r = &mut cond => Next::Done(r),
                () = expired => Next::Expired,
                (w, _) = changed => Next::Changed(w),
            };
            let w = match next {
                Next::Done(r) => return r,
                Next::Expired => {
                    let (class, msg) = graced
                        .take()
                        .map(|(_, c, m)| (c, m))
                        .unwrap_or(("timeout", String::new()));
                    return (Err(ProviderError::new(class, msg)), Instant::now());
                }
                Next::Changed(w) => w,
            };
            for (reason, count, msg) in &w.retried {
                ctx.retried(reason, *count, msg);
            }
            match &w.verdict {
                Some((WarningVerdict::Final(class), msg)) => {
                    return (Err(ProviderError::new(class, msg.clone())), Instant::now());
                }
                Some((WarningVerdict::Graced(class), msg)) if graced.is_none() => {
                    graced = Some((tokio::time::Instant::now() + grace, class, msg.clone()));
                }
                _ => {}
            }
            if let Some(last) = &w.last {
                self.waiting(ctx, format!("{base} (the cluster retries; last: {last})"));
            }
            seen = w;
        }
    }

    /// Resolves once the run was asked to stop (the operation's stop flag, watched by one
    /// task of the provider every 50 ms); never without a flag.
    pub(crate) async fn stopped(&self, ctx: &OpCtx) {
        let Some(flag) = ctx.stop_flag() else {
            return std::future::pending().await;
        };
        let mut rx = self
            .stop
            .get_or_init(|| {
                let (tx, rx) = tokio::sync::watch::channel(false);
                let flag = flag.clone();
                tokio::spawn(async move {
                    while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    let _ = tx.send(true);
                });
                rx
            })
            .clone();
        if rx.wait_for(|s| *s).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Waits until `done` returns `Some` for pod `name` (UID `uid`), failing as soon as the
    /// pod cannot get there ([`pod_failure_as`]), is deleted or replaced, or stays
    /// `Unschedulable` for longer than the failure grace, or the run is asked to stop (class
    /// `cancelled`: a pod still starting is not waited for; the caller deletes it).
    pub(crate) async fn pod_wait<T>(
        &self,
        ctx: &OpCtx,
        name: &str,
        uid: &str,
        kind: PodKind,
        done: impl FnMut(&Pod) -> Option<T>,
    ) -> (Result<T, ProviderError>, Instant) {
        self.pod_wait_room(ctx, name, uid, kind, &Room::default(), done)
            .await
    }

    /// [`Kube::pod_wait`], meeting `Unschedulable` as `room` says.
    pub(crate) async fn pod_wait_room<T>(
        &self,
        ctx: &OpCtx,
        name: &str,
        uid: &str,
        kind: PodKind,
        room: &Room,
        done: impl FnMut(&Pod) -> Option<T>,
    ) -> (Result<T, ProviderError>, Instant) {
        tokio::select! {
            r = self.pod_wait_inner(ctx, name, uid, kind, room, done) => r,
            () = self.stopped(ctx) => (
                Err(ProviderError::new(
                    "cancelled",
                    format!("the run was stopped while pod {name} was starting"),
                )),
                Instant::now(),
            ),
        }
    }

    async fn pod_wait_inner<T>(
        &self,
        ctx: &OpCtx,
        name: &str,
        uid: &str,
        kind: PodKind,
        room: &Room,
        mut done: impl FnMut(&Pod) -> Option<T>,
    ) -> (Result<T, ProviderError>, Instant) {
        let (ns, w) = match (self.ns(), self.watches()) {
            (Ok(ns), Ok(w)) => (ns, w),
            (Err(e), _) | (_, Err(e)) => return (Err(e), Instant::now()),
        };
        let grace = Duration::from_nanos(self.config.failure_grace_ns);
        let mut unschedulable_since: Option<Instant> = None;
        let mut present = false;
        let base = self.waiting_for(ctx.event_id).unwrap_or_default();
        loop {
            let wait = w.pod.wait_for(name, |s| {
                let Some(o) = s.get(&ObjectRef::new(name).within(ns)) else {
                    // Not seen yet (the create's response can be faster than the watch), or
                    // deleted under the wait (a detach, an abort).
                    return present.then(|| {
                        Err(ProviderError::new(
                            "pod_deleted",
                            format!("pod {ns}/{name} was deleted before it started"),
                        ))
                    });
                };
                if o.metadata.uid.as_deref() != Some(uid) {
                    return Some(Err(ProviderError::new(
                        "pod_deleted",
                        format!("pod {ns}/{name} was replaced before it started"),
                    )));
                }
                present = true;
                if let Some(f) = pod_failure_as(&o, name, kind) {
                    return Some(Err(f));
                }
                if let Some(t) = done(&o) {
                    return Some(Ok(Ok(t)));
                }
                // Unschedulable: report it once, then keep waiting (with the grace).
                unschedulable(&o)
                    .filter(|_| unschedulable_since.is_none())
                    .map(|m| Ok(Err(m)))
            });
            let r = match unschedulable_since {
                // Waiting for room (or not unschedulable): until the operation's timeout.
                Some(t0) if !room.wait => tokio::time::timeout(
                    (t0 + grace).saturating_duration_since(Instant::now()),
                    Box::pin(wait),
                )
                .await
                .ok(),
                _ => Some(Box::pin(wait).await),
            };
            match r {
                Some((Ok(Ok(t)), at)) => return (Ok(t), at),
                Some((Ok(Err(msg)), at)) => {
                    self.waiting(ctx, format!("{base} (Unschedulable: {msg})"));
                    unschedulable_since = Some(at);
                    if room.wait {
                        stamp::phase_at(ctx, "unschedulable", at);
                        *room
                            .since
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(at);
                    }
                }
                Some((Err(e), at)) => return (Err(e), at),
                None => {
                    let msg = w
                        .pod
                        .store()
                        .get(&ObjectRef::new(name).within(ns))
                        .and_then(|o| unschedulable(&o))
                        .unwrap_or_else(|| "no node was found".into());
                    // The scheduler's NodeVolumeLimits says "exceed max volume count".
                    let class = if msg.contains("max volume count") {
                        "attach_limit"
                    } else {
                        "unschedulable"
                    };
                    return (
                        Err(ProviderError::new(
                            class,
                            format!(
                                "pod {ns}/{name} stayed unschedulable for {grace:?}: \
                                 PodScheduled=False reason Unschedulable: {msg}"
                            ),
                        )),
                        Instant::now(),
                    );
                }
            }
        }
    }

    /// Waits until a [`PodKind::Job`] pod (`io_phase`, I/O stream) has started
    /// ([`pod_started`]) and returns when that was seen; fails in seconds with the cluster's
    /// reason when it will not ([`Kube::pod_wait`], [`Kube::or_warning`] with
    /// [`POD_WARNINGS`]). On the way it stamps where a slow start went, as the watch shows
    /// them: `scheduled` (a node), `sandbox-ready` (the kubelet's `PodReadyToStartContainers`:
    /// its volumes attached and mounted, its sandbox up; absent on clusters without it). What
    /// follows that is the image and the container.
    pub(crate) async fn wait_started(
        &self,
        ctx: &OpCtx,
        name: &str,
        uid: &str,
    ) -> Result<Instant, ProviderError> {
        let (mut scheduled, mut sandbox) = (false, false);
        let started = self.pod_wait(ctx, name, uid, PodKind::Job, |o| {
            if !scheduled && o.spec.as_ref().is_some_and(|s| s.node_name.is_some()) {
                scheduled = true;
                stamp::phase_at(ctx, "scheduled", Instant::now());
            }
            if !sandbox && ready_to_start_containers(o) {
                sandbox = true;
                stamp::phase_at(ctx, "sandbox-ready", Instant::now());
            }
            pod_started(o).then_some(())
        });
        let (r, at) = self
            .or_warning(ctx, started, &[(name, uid)], POD_WARNINGS)
            .await;
        r.map(|()| at)
    }
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
