//! A turn on testenv's real kubelet node, held across every test process of a run.
//!
//! scripts/test.sh runs the cluster tests of several crates side by side, and a pod of any
//! test may land on the real node (it has no taint). A test that disturbs the node (stops its
//! kubelet, lowers its attach limit) must have it alone, across processes and threads alike;
//! the others share it. flock(2) locks belong to an open file description, so each turn opens
//! its own files, and two threads of one process exclude each other as two processes do. The
//! lock is released when the turn is dropped or its process ends (a panicking test included).
//!
//! flock alone would let readers starve a writer (a shared lock is granted while an
//! exclusive one waits, and two suites side by side nearly always hold some shared turn), so
//! a second file is a gate: a test passes through it before it takes its turn, and one that
//! wants the node alone holds it while it waits, so it is next. A thread that already holds a
//! turn and asks for another would wait at the gate behind such a test, which waits for the
//! first turn: that is a panic here, not a hang.

use std::cell::Cell;
use std::fs::{File, OpenOptions};
use std::path::Path;
use std::thread::ThreadId;

/// A held turn on the real node; dropping it ends the turn.
#[derive(Debug)]
pub struct NodeTurn {
    _node: File,
    /// The thread that took it (whose count of held turns it is in).
    taker: ThreadId,
}

thread_local! {
    /// Turns this thread took and still holds.
    static HELD: Cell<usize> = const { Cell::new(0) };
}

impl Drop for NodeTurn {
    fn drop(&mut self) {
        if std::thread::current().id() == self.taker {
            HELD.with(|h| h.set(h.get().saturating_sub(1)));
        }
    }
}

impl NodeTurn {
    /// A turn shared with every other test that shares; waits while one has the node alone
    /// or waits for it. `state_dir` is the cluster's (`TESTENV_DIR`).
    pub fn shared(state_dir: &Path) -> Self {
        Self::take(state_dir, false)
    }

    /// The node alone: waits until no other turn is held, and no new turn starts meanwhile.
    pub fn alone(state_dir: &Path) -> Self {
        Self::take(state_dir, true)
    }

    fn take(dir: &Path, alone: bool) -> Self {
        assert!(
            HELD.with(Cell::get) == 0,
            "this thread already holds a turn on the real node: a second one could wait \
             forever behind a test that wants the node alone (take the cluster once per test)"
        );
        let gate = open(dir, GATE);
        gate.lock()
            .unwrap_or_else(|e| panic!("{}: flock: {e}", dir.join(GATE).display()));
        let node = open(dir, NODE);
        if alone {
            node.lock()
        } else {
            node.lock_shared()
        }
        .unwrap_or_else(|e| panic!("{}: flock: {e}", dir.join(NODE).display()));
        drop(gate);
        HELD.with(|h| h.set(h.get() + 1));
        Self {
            _node: node,
            taker: std::thread::current().id(),
        }
    }
}

const GATE: &str = "real-node.gate";
const NODE: &str = "real-node.turn";

fn open(dir: &Path, name: &str) -> File {
    let path = dir.join(name);
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    /// Whether `name` in `dir` can be locked exclusively right now (the lock is let go).
    fn free(dir: &Path, name: &str) -> bool {
        open(dir, name).try_lock().is_ok()
    }

    #[test]
    fn a_test_alone_waits_for_the_shared_turns_and_goes_before_later_ones() {
        let dir = std::env::temp_dir().join(format!("testkit-node-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let first = NodeTurn::shared(&dir);
        let d = dir.clone();
        let second = std::thread::spawn(move || NodeTurn::shared(&d))
            .join()
            .expect("second");
        assert!(free(&dir, GATE), "a shared turn holds no gate");
        assert!(!free(&dir, NODE), "shared turns are held");
        let (tx, rx) = mpsc::channel();
        let (tx2, d) = (tx.clone(), dir.clone());
        let alone = std::thread::spawn(move || {
            let t = NodeTurn::alone(&d);
            tx.send("alone").expect("send");
            // Long enough for the later test to be waiting, were it not behind the gate.
            std::thread::sleep(Duration::from_millis(50));
            tx.send("alone ends").expect("send");
            drop(t);
        });
        // The test that wants the node alone holds the gate while it waits: it is next.
        while free(&dir, GATE) {
            std::thread::yield_now();
        }
        let d = dir.clone();
        let later = std::thread::spawn(move || {
            let _t = NodeTurn::shared(&d);
            tx2.send("later").expect("send");
        });
        std::thread::sleep(Duration::from_millis(20));
        drop((first, second));
        alone.join().expect("alone");
        later.join().expect("later");
        let order: Vec<&str> = rx.try_iter().collect();
        assert_eq!(order, ["alone", "alone ends", "later"]);
        assert!(free(&dir, NODE) && free(&dir, GATE), "every turn ended");
        std::fs::remove_dir_all(&dir).expect("remove");
    }

    #[test]
    fn a_second_turn_in_one_thread_is_a_panic_not_a_hang() {
        let dir = std::env::temp_dir().join(format!("testkit-node2-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let first = NodeTurn::shared(&dir);
        let again = std::panic::catch_unwind(|| NodeTurn::shared(&dir));
        let msg = again.expect_err("a second turn");
        let msg = (msg.downcast_ref::<String>().map(String::as_str))
            .or_else(|| msg.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        assert!(msg.contains("already holds a turn"), "{msg}");
        drop(first);
        // Given back: the thread may take one again.
        drop(NodeTurn::alone(&dir));
        std::fs::remove_dir_all(&dir).expect("remove");
    }
}
