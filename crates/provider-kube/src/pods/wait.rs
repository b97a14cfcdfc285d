//! Waiting on what the run made: a condition on a watch judged against the Warning Events
//! about its objects (`or_warning`), a pod until it runs or fails (`pod_wait`,
//! `wait_started`), a PVC until it is Bound, and the run's stop.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::runtime::reflector::ObjectRef;
use replay::{OpCtx, ProviderError};

use crate::context::Kube;
use crate::kube::stamp;
use crate::kube::store::get;
use crate::pods::verdict::{
    POD_WARNINGS, PodKind, Warned, WarningVerdict, pod_failure_as, pod_started,
    ready_to_start_containers, unschedulable, warned,
};

/// How a workload pod meets `Unschedulable`: fail after the failure grace, or (`wait`, the
/// trace's `attach.wait_for_room`) wait, with when it was first seen (`since`) and the
/// CSINode changes to time the wait by (`kube/room.rs`).
#[derive(Debug, Default)]
pub(crate) struct Room {
    pub(crate) wait: bool,
    pub(crate) since: std::sync::Mutex<Option<Instant>>,
    pub(crate) csinodes: Option<Arc<crate::kube::room::CsiNodeLog>>,
}

/// What ended a wait of [`Kube::or_warning`].
enum Next<T> {
    Done(T),
    Expired,
    Changed(Warned),
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

    pub(crate) async fn wait_pvc_bound(
        &self,
        ctx: &OpCtx,
        name: &str,
        uid: &str,
        warnings: &[&str],
    ) -> Result<(Arc<PersistentVolumeClaim>, Instant), ProviderError> {
        let ns = self.ns()?;
        let w = self.watches()?;
        let bound = w.pvc.wait_for(name, |s| {
            let o = get(s, ns, name, uid)?;
            match o.status.as_ref().and_then(|s| s.phase.as_deref()) {
                Some("Bound") => Some(Ok(o)),
                Some("Lost") => Some(Err(ProviderError::new(
                    "lost",
                    format!("PVC {name} is Lost"),
                ))),
                _ => None,
            }
        });
        let (r, at) = self.or_warning(ctx, bound, &[(name, uid)], warnings).await;
        Ok((r?, at))
    }
}
