//! The operations: each creates/patches/deletes through the rate-limited client and then
//! waits on the shared watches (see `kube::watch`) for its completion condition, reporting
//! the phases it passes. One module per family; [`execute`] dispatches an event to its op.
//!
//! ## Layers
//!
//! Lowest first; a module imports only from its own layer or below (checked by
//! `scripts/check-layers.py`).
//!
//! 1. `cbt`, `group`, `io`, `modify`, `ordered`, `outage`, `snapshot`, `stream`, `volume`, `workload` (apart) — the families
//!
//! What several families need lives a layer down (`pods`: the pod life cycle and the one iogen
//! pod run; `kube`: get/gone, the snapshot-error verdict, node marks; `context`: the types
//! `State` stores), so no family imports another and [`execute`] is the only code that sees
//! them all.

mod cbt;
mod group;
mod io;
mod modify;
mod ordered;
mod outage;
mod snapshot;
pub(crate) mod stream;
mod volume;
mod workload;

use std::sync::Arc;

use replay::{OpCtx, ProviderError};
use trace_format::{Event, Op};

use crate::context::Kube;

/// Runs one operation. Each op's future is boxed: this future is then a few hundred bytes
/// whatever the op, and an operation in flight holds only its own op's state, not the largest
/// op's (`KubeProvider::spawn_op`).
pub(crate) async fn execute(
    p: Arc<Kube>,
    ev: Arc<Event>,
    ctx: Arc<OpCtx>,
) -> Result<(), ProviderError> {
    let p = &*p;
    let ctx = &*ctx;
    match &ev.op {
        Op::CreateVolume(c) => Box::pin(p.create_volume(&ev, c, ctx)).await,
        Op::DeleteVolume(v) => Box::pin(p.delete_volume(&v.volume, ctx)).await,
        Op::Attach(a) => {
            let node = a
                .node
                .as_deref()
                .map(str::to_owned)
                .or_else(|| p.config.node.clone());
            let wl = Box::pin(p.start_pod(
                ctx,
                &a.workload,
                &a.volumes,
                node.as_deref(),
                ev.tenant.as_deref(),
                a.wait_for_room,
            ))
            .await?;
            p.state().workloads.insert(a.workload.clone(), wl);
            Ok(())
        }
        Op::Detach(w) => {
            let _turn = p.workload_turn(&w.workload).await;
            Box::pin(p.stop_workload(ctx, &w.workload, false))
                .await
                .map(drop)
        }
        Op::AbortWorkload(w) => {
            let _turn = p.workload_turn(&w.workload).await;
            Box::pin(p.stop_workload(ctx, &w.workload, true))
                .await
                .map(drop)
        }
        Op::Reschedule(r) => {
            let _turn = p.workload_turn(&r.workload).await;
            Box::pin(p.reschedule(ctx, &r.workload, r.node.as_deref())).await
        }
        Op::CordonNode(n) => Box::pin(p.cordon(ctx, &n.node)).await,
        Op::DrainNode(n) => Box::pin(workload::drain(p, ctx, &n.node)).await,
        Op::Snapshot(s) => Box::pin(p.snapshot(&ev, s, ctx)).await,
        Op::DeleteSnapshot(s) => Box::pin(p.delete_snapshot(&s.snapshot, ctx)).await,
        Op::Resize(r) => Box::pin(p.resize(r, ctx)).await,
        Op::ModifyVolume(m) => Box::pin(p.modify_volume(m, ctx)).await,
        Op::GroupSnapshot(g) => Box::pin(p.group_snapshot(&ev, g, ctx)).await,
        Op::DeleteGroupSnapshot(g) => Box::pin(p.delete_group_snapshot(&g.group, ctx)).await,
        Op::ForceDetach(n) => Box::pin(p.force_detach(ctx, &n.node)).await,
        Op::IoPhase(ph)
            if p.config.io_exec == crate::config::IoExec::Local && ph.ordered.is_some() =>
        {
            Err(ProviderError::new(
                "unsupported",
                "io_phase.ordered runs its writer and checker in pods (`--io-exec pod`)",
            ))
        }
        Op::IoPhase(ph) => match &ph.ordered {
            Some(o) if ph.read_pct == 0 => Box::pin(ordered::write(p, &ev, ph, o, ctx)).await,
            Some(o) => Box::pin(ordered::check(p, &ev, ph, o, ctx)).await,
            None => Box::pin(io::io_phase(p, &ev, ph, ctx)).await,
        },
        Op::Io(_) => Err(ProviderError::new(
            "unsupported",
            "single `io` requests on a volume a workload holds cannot be sent into its pod one \
             by one (bare `io`, on a raw block volume no workload holds, goes to the volume's \
             I/O stream pod); convert them to `io_phase` events",
        )),
        Op::Marker(_) => Ok(()),
        Op::SnapshotAllocated(s) => {
            Box::pin(cbt::list(p, &ev, None, &s.snapshot, s.block_size, ctx)).await
        }
        Op::SnapshotDelta(d) => {
            Box::pin(cbt::list(
                p,
                &ev,
                Some(&d.base),
                &d.snapshot,
                d.block_size,
                ctx,
            ))
            .await
        }
    }
}
