//! Phase stamps with the arrival instant of the watch event that showed them.
//!
//! Every phase of an operation is recorded through [`phase_at`]: the instant is the arrival of
//! the satisfying watch event (see `kube/watch.rs`), raised to the operation's previous phase so
//! the phases stay in the provider's order (a kwok pod can be `Running` before its volume is
//! attached; the attach still reports `attached` then `running`). The last phase is also the
//! operation's completion (`OpCtx::completed_at`): an operation is done when its condition was
//! seen, not when the task that waited for it got to run. The previous phase lives in a
//! task-local set up by [`scope`] around each operation.

use std::cell::Cell;
use std::time::Instant;

use replay::OpCtx;

tokio::task_local! {
    static LAST: Cell<Option<Instant>>;
}

/// Runs an operation with its own phase clock.
pub(crate) async fn scope<F: Future>(f: F) -> F::Output {
    LAST.scope(Cell::new(None), f).await
}

/// `at` raised to the previous phase, which it becomes; also the operation's completion.
fn advance(ctx: &OpCtx, at: Instant) -> Instant {
    let at = LAST
        .try_with(|last| {
            let at = last.get().map_or(at, |l| l.max(at));
            last.set(Some(at));
            at
        })
        .unwrap_or(at);
    ctx.completed_at(at);
    at
}

/// Marks phase `name` at `at` (raised to the previous phase) and makes it the completion.
pub(crate) fn phase_at(ctx: &OpCtx, name: &str, at: Instant) {
    ctx.phase_at(name, advance(ctx, at));
}

/// The operation completed at `at` (raised to its last phase), without a phase of its own.
pub(crate) fn done_at(ctx: &OpCtx, at: Instant) {
    advance(ctx, at);
}

/// Marks phase `name` now (an API response or a decision of the provider's own).
pub(crate) fn phase(ctx: &OpCtx, name: &str) {
    phase_at(ctx, name, Instant::now());
}
