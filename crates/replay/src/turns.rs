//! Turns by name: an async lock per object name, made on first use, for a provider whose
//! operations on one object must not interleave although the trace does not order them.
//!
//! Both providers need it for workloads: a drain names a node, not its workloads, so the
//! reader does not order a later `detach` of a drained workload after the drain; while the
//! drain moves the workload (its volumes released and attached again, or its pod stopped and
//! started again), a detach of it would undo half of the move. Each of detach, abort,
//! reschedule and a drain's move of one workload holds that workload's turn.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::OwnedMutexGuard;

/// One async lock per name (kept for the run: a name's turn is a few bytes).
#[derive(Debug)]
pub struct Turns<K> {
    turns: Mutex<HashMap<K, Arc<tokio::sync::Mutex<()>>>>,
}

impl<K> Default for Turns<K> {
    fn default() -> Self {
        Self {
            turns: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Eq + Hash + Clone> Turns<K> {
    /// Waits for `name`'s turn; it lasts as long as the returned guard.
    pub async fn take(&self, name: &K) -> OwnedMutexGuard<()> {
        let turn = self
            .turns
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(name.clone())
            .or_default()
            .clone();
        turn.lock_owned().await
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::Turns;

    #[tokio::test(flavor = "current_thread")]
    async fn a_name_has_one_turn_and_other_names_do_not_wait_for_it() {
        let turns = Turns::<String>::default();
        let (a_name, b_name) = ("a".to_owned(), "b".to_owned());
        let a = turns.take(&a_name).await;
        // Another name's turn is free.
        let _b = turns.take(&b_name).await;
        // The same name's is not, until the first guard goes.
        let again = turns.take(&a_name);
        tokio::pin!(again);
        assert!(again.as_mut().now_or_never().is_none(), "a's turn is held");
        drop(a);
        let _a2 = again.await;
    }
}
