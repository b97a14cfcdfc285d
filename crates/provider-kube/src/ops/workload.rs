//! The ops that place and move a workload's pod: `detach`, `abort_workload`, `reschedule`,
//! `cordon_node`, `drain_node` (`attach` is [`crate::pods::lifecycle`]'s `start_pod`, called by
//! the dispatcher).

use futures::future::join_all;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use replay::{OpCtx, ProviderError};
use serde_json::json;
use tokio::sync::OwnedMutexGuard;
use trace_format::Name;

use crate::context::{Kube, WlState, blocking, io_err};
use crate::kube::stamp::phase;
use crate::kube::store::missing;

impl Kube {
    /// Waits for `workload`'s turn. The ops that stop or move its pod (detach, abort,
    /// reschedule, and a drain for each workload it moves) take it for their whole length:
    /// a drain names a node, not the workloads on it, so the trace's order does not keep a
    /// detach of one of them from running while the drain moves it. Without the turn the
    /// detach found the workload gone (between the old pod's stop and the new one's start),
    /// failed, and the moved pod was left holding its claims (seen under a loaded CI: the
    /// claims' deletes then waited for minutes). With it, the detach waits for the move and
    /// stops the moved pod; its response includes that wait.
    pub(crate) async fn workload_turn(&self, workload: &Name) -> OwnedMutexGuard<()> {
        self.workload_turns.take(workload).await
    }

    pub(crate) async fn stop_workload(
        &self,
        ctx: &OpCtx,
        workload: &Name,
        abort: bool,
    ) -> Result<WlState, ProviderError> {
        let wl = self
            .state()
            .workloads
            .remove(workload)
            .ok_or_else(|| missing("workload", workload))?;
        let grace = abort.then_some(0);
        for l in &wl.io_local {
            l.stop.request();
        }
        let io = wl
            .io_pods
            .iter()
            .map(|p| self.stop_pod(ctx, p, &[], None, Some(0)));
        for r in join_all(io).await {
            // An I/O pod that already finished is gone: fine.
            if let Err(e) = r
                && e.class != "not_found"
            {
                return Err(e);
            }
        }
        for l in &wl.io_local {
            l.ended().await;
        }
        if !wl.io_pods.is_empty() || !wl.io_local.is_empty() {
            phase(ctx, "io-stopped");
        }
        self.stop_pod(ctx, &wl.pod, &wl.volumes, wl.node.as_deref(), grace)
            .await?;
        Ok(wl)
    }

    pub(crate) async fn reschedule(
        &self,
        ctx: &OpCtx,
        workload: &Name,
        node: Option<&str>,
    ) -> Result<(), ProviderError> {
        let wl = self.stop_workload(ctx, workload, false).await?;
        let new = self
            .start_pod(
                ctx,
                workload,
                &wl.volumes,
                node,
                wl.tenant.as_deref(),
                false,
            )
            .await?;
        self.state().workloads.insert(workload.clone(), new);
        Ok(())
    }

    /// Marks a node unschedulable; recorded in the ledger so cleanup uncordons it (only when
    /// it was schedulable before: a node someone else cordoned stays as it was).
    pub(crate) async fn cordon(&self, ctx: &OpCtx, node: &str) -> Result<(), ProviderError> {
        let api: Api<Node> = Api::all(self.client.clone());
        let n = self.call(api.get(node)).await?;
        if n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
            phase(ctx, "already-cordoned");
            return Ok(());
        }
        blocking(|| {
            ctx.ledger()
                .intend("cordon", node, json!({ "uid": n.uid() }))
        })
        .map_err(io_err)?;
        let run_id = self.run()?.run_id.clone();
        self.call(api.patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": {"annotations": {crate::kube::nodes::CORDON_ANNOTATION: run_id}},
                "spec": {"unschedulable": true},
            })),
        ))
        .await?;
        phase(ctx, "cordoned");
        Ok(())
    }
}

/// Cordons `node` and moves the run's own pods off it; other tenants of the node are left
/// alone.
pub(crate) async fn drain(p: &Kube, ctx: &OpCtx, node: &str) -> Result<(), ProviderError> {
    p.cordon(ctx, node).await?;
    let on_node: Vec<Name> = p
        .state()
        .workloads
        .iter()
        .filter(|(_, w)| w.node.as_deref() == Some(node))
        .map(|(k, _)| k.clone())
        .collect();
    let moves = on_node.iter().map(|w| async move {
        let _turn = p.workload_turn(w).await;
        // A detach or a reschedule that had the turn first may have stopped or moved it.
        let still_here = p
            .state()
            .workloads
            .get(w)
            .is_some_and(|s| s.node.as_deref() == Some(node));
        if still_here {
            p.reschedule(ctx, w, None).await
        } else {
            Ok(())
        }
    });
    for r in join_all(moves).await {
        r?;
    }
    phase(ctx, "drained");
    Ok(())
}
