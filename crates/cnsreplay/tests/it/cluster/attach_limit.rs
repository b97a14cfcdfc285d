//! Issue 35's attach-limit chain on testenv's real node: cnsreplay-csi reports a per-node
//! volume limit it reads from a file at every NodeGetInfo, and the kubelet copies it into the
//! node's CSINode every 10 s (`nodeAllocatableUpdatePeriodSeconds`). With the limit at 2,
//! `traces/attach-limit-chain.yaml` fills the node, an attach without `wait_for_room` fails
//! with class `attach_limit`, and one with it waits; the test then raises the limit to 3 and
//! the waiting attach's record must time the chain in order: unschedulable → csinode-updated
//! (not before the limit was raised) → scheduled → attached → running. The node is taken
//! alone (a limit of 2 would starve other tests' pods), and its limit is lifted again before
//! the turn ends, also when the test fails.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::outage::wait_record;
use crate::{Cluster, kube_run_args, nothing_left, real_node_alone};

/// A limit no test comes near: what the node has outside this test.
const LIFTED: i64 = 1000;

/// The node's volume limit for cnsreplay-csi, set through the driver's file, until dropped.
struct Limit<'a> {
    c: &'a Cluster,
}

impl<'a> Limit<'a> {
    /// Sets the limit and waits until the node's CSINode shows it.
    fn set(c: &'a Cluster, n: i64) -> Self {
        std::fs::write(c.get("TESTENV_CSI_MAX_VOLUMES_FILE"), format!("{n}\n")).expect("limit");
        wait_count(c, n);
        Limit { c }
    }
}

impl Drop for Limit<'_> {
    fn drop(&mut self) {
        let _ = std::fs::write(
            self.c.get("TESTENV_CSI_MAX_VOLUMES_FILE"),
            format!("{LIFTED}\n"),
        );
        if !std::thread::panicking() {
            wait_count(self.c, LIFTED);
        }
    }
}

/// The real node's CSINode allocatable count for the driver.
fn count(c: &Cluster) -> String {
    c.kubectl(&[
        "get",
        "csinode",
        c.get("TESTENV_REAL_NODE"),
        "-o",
        &format!(
            "jsonpath={{.spec.drivers[?(@.name==\"{}\")].allocatable.count}}",
            c.get("TESTENV_CSI_DRIVER")
        ),
    ])
}

fn wait_count(c: &Cluster, n: i64) {
    let t0 = Instant::now();
    loop {
        let got = count(c);
        if got.trim() == n.to_string() {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the node's CSINode count is {got:?}, not {n}, 60 s after the driver's limit was \
             set (the kubelet refreshes it every nodeAllocatableUpdatePeriodSeconds)"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A phase's instant in a record, ns since the run origin.
fn phase(r: &serde_json::Value, name: &str) -> u64 {
    r["phases"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == name))
        .and_then(|p| p["at"].as_u64())
        .unwrap_or_else(|| panic!("no phase {name:?} in {r}"))
}

#[test]
fn the_attach_limit_chain_on_the_real_node() {
    let Some(c) = real_node_alone() else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let run = tmp.path().join("run");
    let trace = "traces/attach-limit-chain.yaml";
    let limit = Limit::set(&c, 2);
    let kc = c.runner_kubeconfig_for(tmp.path(), trace);
    let child = Command::new(env!("CARGO_BIN_EXE_cnsreplay"))
        .args(kube_run_args(
            &c,
            &kc,
            trace,
            &run,
            true,
            &["--kube-failure-grace", "5s"],
        ))
        .current_dir(crate::workspace())
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // `first` holds both slots; `third` fails at the limit once the grace is over.
    let first = wait_record(&run, 5, Duration::from_secs(120));
    assert_eq!(first["outcome"], "ok", "{first}");
    let third = wait_record(&run, 7, Duration::from_secs(120));
    assert_eq!(third["outcome"], "error", "{third}");
    assert_eq!(third["error_class"], "attach_limit", "{third}");
    assert!(
        third["error"]
            .as_str()
            .is_some_and(|m| m.contains("exceed max volume count")),
        "{third}"
    );
    // Room for one more: `second` (waiting) gets it.
    let raised = std::time::SystemTime::now();
    std::fs::write(c.get("TESTENV_CSI_MAX_VOLUMES_FILE"), "3\n").expect("limit");
    let out = crate::wait_within(child, "cnsreplay run", crate::deadline(600));
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("manifest.json")).expect("manifest"))
            .expect("json");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let second = wait_record(&run, 6, Duration::ZERO);
    assert_eq!(second["outcome"], "ok", "{second}");
    let chain = [
        "unschedulable",
        "csinode-updated",
        "scheduled",
        "attached",
        "running",
    ];
    let t: Vec<u64> = chain.iter().map(|p| phase(&second, p)).collect();
    assert!(t.windows(2).all(|w| w[0] <= w[1]), "out of order: {second}");
    // The CSINode changed after the limit was raised, not before (the run's origin is on
    // this machine's wall clock; 10 ms for reading the clocks apart).
    let origin: jiff::Timestamp = m["origin"]
        .as_str()
        .expect("origin")
        .parse()
        .expect("rfc 3339");
    let raised_ns = jiff::Timestamp::try_from(raised)
        .expect("time")
        .as_nanosecond()
        - origin.as_nanosecond();
    assert!(
        i128::from(t[1]) + 10_000_000 >= raised_ns,
        "csinode-updated at {} ns, before the limit was raised at {raised_ns} ns: {second}",
        t[1]
    );
    #[allow(clippy::print_stderr)]
    {
        eprintln!(
            "attach-limit chain: unschedulable {:.1} s; limit raised → csinode-updated {:.1} s, \
             → scheduled {:.0} ms, → attached {:.0} ms, → running {:.0} ms",
            (t[2] - t[0]) as f64 / 1e9,
            (i128::from(t[1]) - raised_ns) as f64 / 1e9,
            (t[2] - t[1]) as f64 / 1e6,
            (t[3] - t[1]) as f64 / 1e6,
            (t[4] - t[1]) as f64 / 1e6,
        );
    }
    // Every other event as the trace says: the detach of `third`, which never ran, finds
    // nothing to stop.
    for id in [1, 2, 3, 4, 8, 9, 11, 12, 13, 14] {
        let r = wait_record(&run, id, Duration::ZERO);
        assert_eq!(r["outcome"], "ok", "{r}");
    }
    let r = wait_record(&run, 10, Duration::ZERO);
    assert_eq!(r["outcome"], "error", "{r}");
    drop(limit);
    nothing_left(&c, &run);
}
