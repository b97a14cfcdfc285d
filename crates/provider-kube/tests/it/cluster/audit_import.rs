//! The round trip a partner-trace user makes: a replay on the cluster, the API server's audit
//! log of it, and the audit importer reading that log back into a trace. The imported trace
//! must hold the replay's operations in order, each attach with the node the scheduler bound
//! its pod to (two pods of one node sharing a ReadWriteOnce volume keep it), and an observed
//! attach time from the VolumeAttachments the external-attacher reported attached — a time
//! the replay itself measured as its `attached` phase.

use import::audit::{AuditOptions, read_audit};
use trace_format::{Op, OpType};

use crate::common::*;

#[test]
fn a_replay_reads_back_from_the_audit_log() {
    let Some(env) = testenv() else { return };
    let audit = env
        .vars()
        .get("TESTENV_AUDIT_LOG")
        .cloned()
        .expect("testenv.env has no TESTENV_AUDIT_LOG");
    let rt = rt();
    let c = rt.block_on(client(&env));
    if csi_driver(&env, &rt, &c, false).is_none() {
        return;
    }
    // Both pods pinned to one node: the scheduler still binds them (node affinity).
    let t = "format: cnsreplay-trace\nversion: 1\n\
             defaults: {storage_class: cnsreplay-csi, volume_size: 1Gi, access_mode: ReadWriteOnce}\n\
             events:\n\
             - {at: 0s, create_volume: {volume: data}}\n\
             - {at: 1s, attach: {workload: app-a, volumes: [data], node: testenv-node-2}}\n\
             - {at: 3s, attach: {workload: app-b, volumes: [data], node: testenv-node-2}}\n\
             - {at: 5s, detach: {workload: app-a}}\n\
             - {at: 6s, detach: {workload: app-b}}\n\
             - {at: 8s, delete_volume: {volume: data}}\n";
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.yaml");
    std::fs::write(&trace, t).unwrap();
    let run_dir = dir.path().join("run");
    let (out, p) = replay_run(&trace, &run_dir, provider(&env, "cnsreplay-csi", &trace));
    assert_eq!(out.summary.failed, 0);
    let ns = p.namespace().expect("the run's namespace").to_owned();
    let replayed = events(&run_dir);
    // The audit backend writes asynchronously to the responses.
    std::thread::sleep(std::time::Duration::from_secs(2));

    // The whole log, with every other test's requests in it, as a user would import it.
    let file = std::fs::File::open(&audit).unwrap();
    let imp = read_audit(
        vec![(audit, std::io::BufReader::new(file))],
        AuditOptions::default(),
        import::Policy::default(),
    )
    .expect("import the audit log");
    let mine: Vec<_> = imp
        .trace
        .events
        .iter()
        .filter(|e| e.tenant.as_deref() == Some(ns.as_str()))
        .collect();
    let ops: Vec<OpType> = mine.iter().map(|e| e.op.op_type()).collect();
    assert_eq!(
        ops,
        [
            OpType::CreateVolume,
            OpType::Attach,
            OpType::Attach,
            OpType::Detach,
            OpType::Detach,
            OpType::DeleteVolume,
        ],
        "{mine:?}"
    );
    let vol = format!("{ns}/data");
    for e in &mine {
        if let Op::Attach(a) = &e.op {
            assert_eq!(a.node.as_deref(), Some("testenv-node-2"), "{e:?}");
            assert_eq!(
                a.volumes.iter().map(|v| v.as_str()).collect::<Vec<_>>(),
                [vol.as_str()],
                "the shared ReadWriteOnce volume stays in both attaches: {e:?}"
            );
        }
    }
    // The first pod waited for the attachment; the second found the volume attached on its
    // node (observed 0). The replay's own `attached` phase of the first attach is the same
    // interval seen from the client: both exist and are positive.
    let observed: Vec<Option<u64>> = mine
        .iter()
        .filter(|e| e.op.op_type() == OpType::Attach)
        .map(|e| e.observed)
        .collect();
    assert!(observed[0].is_some_and(|o| o > 0), "{observed:?}");
    assert_eq!(observed[1], Some(0), "{observed:?}");
    let first = replayed
        .iter()
        .find(|r| r.op == OpType::Attach)
        .expect("the replayed attach");
    assert!(
        first.phases.iter().any(|p| p.name == "attached"),
        "{:?}",
        first.phases
    );
    let left = rt.block_on(run_objects(&c, &out.manifest.run_id));
    assert!(left.is_empty(), "left behind: {left:?}");
}
