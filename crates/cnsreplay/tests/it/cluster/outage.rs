//! Issue 18's force detach on testenv's real node: the node is shut down (its kubelet
//! stopped), the trace's `force_detach` taints it out of service, Kubernetes force-deletes its
//! pod and detaches its volume, and the workload runs again on another node; each step's time
//! is recorded. The kubelet is started again whatever happens, and nothing of the run may be
//! left (its taint included).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::s;
use crate::{kube_run_args, nothing_left, real_node_alone};

/// The real node's kubelet, stopped; started again (same command line) on `start` or drop.
struct StoppedKubelet {
    argv: Vec<String>,
    pidfile: PathBuf,
    log: PathBuf,
    running: bool,
}

impl StoppedKubelet {
    fn stop(dir: &Path) -> Self {
        let pidfile = dir.join("pids/kubelet.pid");
        let rec = std::fs::read_to_string(&pidfile).expect("kubelet pid file");
        let pid = rec.split_whitespace().next().expect("pid").to_owned();
        let argv: Vec<String> = std::fs::read(format!("/proc/{pid}/cmdline"))
            .expect("kubelet cmdline")
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        // A shutdown, not a stop: no chance to clean up.
        let st = Command::new("kill")
            .args(["-KILL", &pid])
            .status()
            .expect("kill");
        assert!(st.success());
        Self {
            argv,
            pidfile,
            log: dir.join("logs/kubelet.log"),
            running: false,
        }
    }

    // The kubelet outlives the test, as testenv's own start leaves it (testenv/down.sh stops
    // it by its pid file).
    #[allow(clippy::zombie_processes)]
    fn start(&mut self) {
        if self.running {
            return;
        }
        self.running = true;
        let log = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&self.log)
            .expect("kubelet log");
        let child = Command::new("setsid")
            .args(&self.argv)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start the kubelet");
        std::fs::write(&self.pidfile, format!("{} {}\n", child.id(), self.argv[0]))
            .expect("pid file");
    }
}

impl Drop for StoppedKubelet {
    fn drop(&mut self) {
        self.start();
    }
}

fn record(run: &Path, id: u64) -> Option<serde_json::Value> {
    std::fs::read_to_string(run.join("events.jsonl"))
        .ok()?
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["id"] == id)
}

pub(crate) fn wait_record(run: &Path, id: u64, within: Duration) -> serde_json::Value {
    let t0 = Instant::now();
    loop {
        if let Some(r) = record(run, id) {
            return r;
        }
        assert!(
            t0.elapsed() < within,
            "no record of event {id} after {within:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn force_detach_of_the_shut_down_real_node_brings_the_workload_up_elsewhere() {
    let Some(c) = real_node_alone() else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let run = tmp.path().join("run");
    let node = c.get("TESTENV_REAL_NODE").to_owned();
    let trace = tmp.path().join("outage.yaml");
    std::fs::write(
        &trace,
        format!(
            "format: cnsreplay-trace\nversion: 2\n\
             defaults: {{storage_class: cnsreplay-csi, volume_size: 64Mi}}\nevents:\n\
             - {{at: 0, id: 1, create_volume: {{volume: data}}}}\n\
             - {{at: 1s, id: 2, attach: {{workload: app, volumes: [data], node: {node}}}}}\n\
             - {{at: 90s, id: 3, force_detach: {{node: {node}}}}}\n\
             - {{at: 160s, id: 4, detach: {{workload: app}}}}\n\
             - {{at: 162s, id: 5, delete_volume: {{volume: data}}}}\n"
        ),
    )
    .expect("trace");
    let kc = c.runner_kubeconfig_for(tmp.path(), &trace);
    let child = Command::new(env!("CARGO_BIN_EXE_cnsreplay"))
        .args(kube_run_args(&c, &kc, s(&trace), &run, false, &[]))
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let attach = wait_record(&run, 2, Duration::from_secs(120));
    assert_eq!(attach["outcome"], "ok", "{attach}");
    // The node goes down.
    let mut kubelet = StoppedKubelet::stop(Path::new(c.get("TESTENV_DIR")));
    let fd = wait_record(&run, 3, Duration::from_secs(300));
    kubelet.start();
    let out = crate::wait_within(child, "cnsreplay run", crate::deadline(600));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fd["outcome"], "ok", "{fd}");
    let phases: Vec<(&str, u64)> = fd["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .filter_map(|p| Some((p["name"].as_str()?, p["at"].as_u64()?)))
        .collect();
    let at = |name: &str| {
        phases
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| *t)
            .unwrap_or_else(|| panic!("no {name} phase: {fd}"))
    };
    // The time of each step from the operation's start (`--nocapture` shows it).
    let started = fd["started"].as_u64().unwrap_or(0);
    #[allow(clippy::print_stderr)]
    {
        for (n, t) in &phases {
            eprintln!(
                "force_detach {n}: {:.3} s",
                t.saturating_sub(started) as f64 / 1e9
            );
        }
    }
    // Taint, pod gone, volume detached, running again: in that order.
    assert!(at("tainted") <= at("pods-gone"), "{fd}");
    assert!(at("pods-gone") <= at("detached"), "{fd}");
    assert!(at("detached") <= at("running-again"), "{fd}");
    for id in [4, 5] {
        let r = record(&run, id).expect("record");
        assert_eq!(r["outcome"], "ok", "{r}");
    }
    // The node is back, without the run's taint.
    let t0 = Instant::now();
    loop {
        let ready = c.kubectl(&[
            "get",
            "node",
            &node,
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
        ]);
        if ready.trim() == "True" {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "node not Ready again"
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    let taints = c.kubectl(&["get", "node", &node, "-o", "jsonpath={.spec.taints}"]);
    assert!(!taints.contains("out-of-service"), "{taints}");
    nothing_left(&c, &run);
}
