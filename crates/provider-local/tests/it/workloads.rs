//! Workloads moved while they are detached: a drain or a reschedule releases a workload's
//! volumes and attaches them again, and a detach of the same workload due at the same moment
//! must not slip in between (it would release the volumes the move then attaches again, for
//! no workload: the volume's delete would fail `still_attached`).

use provider_local::Mode;

use crate::{HEADER, Run, loops_settled, modes};

/// A workload on `n1` and its move, due together with its detach; then the volume's delete.
fn trace(mv: &str) -> String {
    format!(
        "{HEADER}events:
  - {{at: 0, id: 1, create_volume: {{volume: v, size: 4Mi}}}}
  - {{at: 0, id: 2, attach: {{workload: w, volumes: [v], node: n1}}}}
  - {{at: 0, id: 3, {mv}}}
  - {{at: 0, id: 4, detach: {{workload: w}}}}
  - {{at: 0, id: 5, delete_volume: {{volume: v}}}}
"
    )
}

/// Runs the trace of `mv` with events 3 (the move) and 4 (the detach) together, `first`
/// polled first, and checks that the volume ends detached and deletable.
fn move_beside_detach(mode: Mode, mv: &str, first: u64) {
    let run = Run::start(mode, &trace(mv));
    run.ok(1);
    run.ok(2);
    let second = if first == 3 { 4 } else { 3 };
    let (a, b) = run.exec_together(first, second);
    for (id, r) in [(first, a), (second, b)] {
        if let Err(e) = r {
            panic!(
                "{mode:?}, {mv}, event {first} first: event {id} failed: {}: {}",
                e.class, e.message
            );
        }
    }
    let image = run.object("vol-v-");
    if let Err(e) = run.exec(5) {
        panic!(
            "{mode:?}, {mv}, event {first} first: the volume's delete after the detach failed \
             ({}: {}); the ledger still holds {:?}",
            e.class,
            e.message,
            run.leftovers()
        );
    }
    if mode == Mode::Loop {
        loops_settled(&image, 0);
    }
    assert_eq!(
        run.leftovers(),
        ["root objects"],
        "{mode:?}, {mv}, event {first} first: nothing but the objects directory is left"
    );
}

#[test]
fn a_detach_due_with_a_drain_or_reschedule_of_its_workload_waits_for_the_move() {
    for mode in modes() {
        for mv in [
            "drain_node: {node: n1}",
            "force_detach: {node: n1}",
            "reschedule: {workload: w, node: n2}",
        ] {
            // The move first: the detach must wait for it and detach the moved workload.
            move_beside_detach(mode, mv, 3);
            // The detach first: the move finds no workload (a drain) or fails `not found`
            // (a reschedule, which names it).
            if mv.starts_with("reschedule") {
                continue;
            }
            move_beside_detach(mode, mv, 4);
        }
    }
}
