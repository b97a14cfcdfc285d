//! The io_phase pod as the provider renders it (kwok pods run no containers, so I/O cannot
//! run in the test cluster; this checks the manifest instead).

use provider_kube::KubeConfig;
use provider_kube::objects::PodVolume;
use trace_format::{Event, Op};

fn phase_event() -> Event {
    let t = "format: cnsreplay-trace\nversion: 1\nevents:\n  - {at: 1s, tenant: db, io_phase: {workload: db-pod-0, volume: db-0, pattern: random, read_pct: 70, block_size: 8Ki, load: {depth: 4}, duration: 10s}}\n";
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.yaml");
    std::fs::write(&p, t).unwrap();
    trace_format::TraceReader::open(&p)
        .unwrap()
        .events()
        .next()
        .unwrap()
        .unwrap()
}

#[test]
fn iogen_pod_manifest() {
    let ev = phase_event();
    let Op::IoPhase(ph) = &ev.op else { panic!() };
    let cfg = KubeConfig {
        iogen_image: "registry.example/cnsreplay/iogen:0.1.0".into(),
        ..KubeConfig::default()
    };
    let vol = PodVolume {
        claim: "db-0".into(),
        block: false,
    };
    let pod = provider_kube::io_pod(
        &cfg,
        "1700000000000-42",
        "cnsreplay-run",
        &ev,
        ph,
        &vol,
        Some("node-1"),
    );
    let v = serde_json::to_value(&pod).unwrap();
    assert_eq!(v["metadata"]["name"], "db-pod-0-io-0");
    assert_eq!(
        v["metadata"]["labels"]["cnsreplay.io/run"],
        "1700000000000-42"
    );
    assert_eq!(v["metadata"]["labels"]["cnsreplay.io/role"], "io");
    assert_eq!(v["metadata"]["labels"]["cnsreplay.io/workload"], "db-pod-0");
    assert_eq!(v["metadata"]["labels"]["cnsreplay.io/tenant"], "db");
    let c = &v["spec"]["containers"][0];
    assert_eq!(c["image"], "registry.example/cnsreplay/iogen:0.1.0");
    assert_eq!(c["volumeMounts"][0]["mountPath"], "/data/0");
    assert_eq!(v["spec"]["restartPolicy"], "Never");
    assert_eq!(
        v["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"],
        "db-0"
    );
    assert_eq!(
        v["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            [0]["matchFields"][0]["values"][0],
        "node-1"
    );
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(args[0], "phase");
    assert_eq!(&args[2..4], ["--target", "/data/0/cnsreplay-io.dat"]);
    assert_eq!(&args[4..6], ["--interval-log", "/dev/stdout"]);
    // The snippet is what iogen itself parses.
    let parsed = iogen::parse_phase_snippet(args[1]).unwrap();
    assert_eq!(
        (parsed.read_pct, parsed.duration),
        (70, Some(10_000_000_000))
    );
    // The shipped template names the same image placeholder, mount and arguments.
    let tpl = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/iogen-pod.yaml"
    ))
    .unwrap();
    for needle in [
        "cnsreplay.io/run",
        "/data/0",
        "--interval-log",
        "/dev/stdout",
        "restartPolicy: Never",
        "persistentVolumeClaim",
    ] {
        assert!(tpl.contains(needle), "deploy/iogen-pod.yaml lacks {needle}");
    }
    // And exactly the security context the provider renders.
    let mut filled = tpl;
    for p in [
        "NAMESPACE",
        "NAME",
        "RUN_ID",
        "WORKLOAD",
        "NODE",
        "CLAIM",
        "IMAGE",
        "PHASE",
    ] {
        filled = filled.replace(&format!("${{{p}}}"), "placeholder");
    }
    let tpl: serde_json::Value = serde_saphyr::from_str(&filled).unwrap();
    assert_eq!(
        tpl["spec"]["securityContext"], v["spec"]["securityContext"],
        "pod securityContext of deploy/iogen-pod.yaml"
    );
    assert_eq!(
        tpl["spec"]["containers"][0]["securityContext"], c["securityContext"],
        "container securityContext of deploy/iogen-pod.yaml"
    );
}

#[test]
fn block_volume_targets_the_device() {
    let ev = phase_event();
    let Op::IoPhase(ph) = &ev.op else { panic!() };
    let vol = PodVolume {
        claim: "db-0".into(),
        block: true,
    };
    let pod = provider_kube::io_pod(&KubeConfig::default(), "r", "ns", &ev, ph, &vol, None);
    let v = serde_json::to_value(&pod).unwrap();
    let c = &v["spec"]["containers"][0];
    assert_eq!(c["volumeDevices"][0]["devicePath"], "/dev/cnsreplay/0");
    assert_eq!(c["args"][3], "/dev/cnsreplay/0");
    assert!(v["spec"]["affinity"].is_null());
}

/// A pod log with iogen's table and its interval log: only the histogram lines are kept, and
/// every response interval lands on the without-snapshot side when no snapshot ran.
#[test]
fn pod_log_histograms_are_collected() {
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let mut h = iogen::Histograms::new();
    for i in 1..=1000u64 {
        h.record(trace_format::IoKind::Read, i * 1000, i * 900, 100);
    }
    let hlog = dir.path().join("h.hlog");
    iogen::write_histograms(&hlog, &h).unwrap();
    let log = format!(
        "== io_phase db-pod-0 on target (/data/0/cnsreplay-io.dat)\nread: 1000 IOs\n{}",
        std::fs::read_to_string(&hlog).unwrap()
    );
    let ctx = replay::OpCtx::new(
        std::time::Instant::now(),
        7,
        Arc::new(replay::Ledger::disabled()),
        Arc::new(replay::SnapshotTimeline::default()),
    );
    let out = dir.path().join("7.hlog");
    let r = provider_kube::split_log(&log, (0, 0), &ctx, &out).unwrap();
    assert_eq!(r.without_snapshot.len(), 1000);
    assert_eq!(r.with_snapshot.len(), 0);
    assert!(!std::fs::read_to_string(&out).unwrap().contains("io_phase"));
}

/// The pod's interval log is placed on the run's time axis by its `#[StartTime]` (the node's
/// clock), as `analyze` places it: a one-second interval logged 10 s after the origin counts
/// as "with snapshot" only for a snapshot window at 10.2–10.5 s, not for one at 0.2–0.5 s
/// (where the call started, its lower bound).
#[test]
fn pod_intervals_are_placed_by_the_log_start_time() {
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let mut h = iogen::Histograms::new();
    for i in 1..=100u64 {
        h.record(trace_format::IoKind::Write, i * 1000, i * 900, 100);
    }
    let hlog = dir.path().join("h.hlog");
    iogen::write_histograms(&hlog, &h).unwrap();
    let origin_wall = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_800_000_000);
    let start = 1_800_000_010.0;
    let text: String = std::fs::read_to_string(&hlog)
        .unwrap()
        .lines()
        .map(|l| {
            if l.starts_with("#[StartTime: ") {
                format!("#[StartTime: {start:.3} (seconds since epoch), then]\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    assert_eq!(
        iogen::log_start_time(text.as_bytes()),
        Some(1_800_000_010_000_000_000)
    );
    let with_window = |from_ms: u64, to_ms: u64| {
        let snaps = Arc::new(replay::SnapshotTimeline::default());
        let i = snaps.begin(from_ms * 1_000_000);
        snaps.end(i, to_ms * 1_000_000);
        let ctx = replay::OpCtx::new(
            std::time::Instant::now(),
            7,
            Arc::new(replay::Ledger::disabled()),
            snaps,
        )
        .with_origin_wall(origin_wall);
        let span = (0, 20_000_000_000);
        provider_kube::split_log(&text, span, &ctx, &dir.path().join("7.hlog")).unwrap()
    };
    let during = with_window(10_200, 10_500);
    assert_eq!(
        (during.with_snapshot.len(), during.without_snapshot.len()),
        (100, 0)
    );
    let before = with_window(200, 500);
    assert_eq!(
        (before.with_snapshot.len(), before.without_snapshot.len()),
        (0, 100)
    );
}

fn pod_with_status(status: &serde_json::Value) -> k8s_openapi::api::core::v1::Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "iogen", "image": "reg/iogen:1"}]},
        "status": status,
    }))
    .unwrap()
}

/// What ends a pod's start, classified from its status as the kubelet and the scheduler write
/// it (image-pull and mount failures need a real kubelet; this checks the classification).
#[test]
fn pod_failures_are_classified_with_the_kubelets_reason() {
    let waiting = |reason: &str, message: &str| {
        pod_with_status(
            &serde_json::json!({"phase": "Pending", "containerStatuses": [{
            "name": "iogen", "image": "reg/iogen:1", "imageID": "", "ready": false,
            "restartCount": 0, "state": {"waiting": {"reason": reason, "message": message}}}]}),
        )
    };
    for (reason, class) in [
        ("ErrImagePull", "image_pull_failed"),
        ("ImagePullBackOff", "image_pull_failed"),
        ("InvalidImageName", "image_pull_failed"),
        ("CrashLoopBackOff", "container_failed"),
        ("CreateContainerConfigError", "container_config_failed"),
        ("CreateContainerError", "container_failed"),
        ("RunContainerError", "container_failed"),
    ] {
        let e = provider_kube::pod_failure(&waiting(reason, "pull access denied"), "p")
            .unwrap_or_else(|| panic!("{reason} not classified"));
        assert_eq!(e.class, class, "{reason}");
        assert!(
            e.message.contains(reason) && e.message.contains("pull access denied"),
            "{}",
            e.message
        );
    }
    // The image is named: a new user's first mistake is an image no registry has.
    let e = provider_kube::pod_failure(&waiting("ErrImagePull", "not found"), "p").unwrap();
    assert!(e.message.contains("image reg/iogen:1"), "{}", e.message);
    // A Localhost seccomp profile that is not on the node: its own class, whichever of the
    // kubelet's reasons carries it.
    let seccomp = "failed to create containerd container: cannot load seccomp profile \
                   \"/var/lib/kubelet/seccomp/cnsreplay/iogen.json\": open \
                   /var/lib/kubelet/seccomp/cnsreplay/iogen.json: no such file or directory";
    for reason in ["CreateContainerError", "CreateContainerConfigError"] {
        let e = provider_kube::pod_failure(&waiting(reason, seccomp), "p").unwrap();
        assert_eq!(e.class, "seccomp_profile_missing", "{reason}");
        assert!(e.message.contains("iogen.json"), "{}", e.message);
    }
    // Still creating: not a failure.
    assert!(provider_kube::pod_failure(&waiting("ContainerCreating", ""), "p").is_none());
    // Refused by the node's admission, evicted: the pod ends Failed with a reason, for every
    // kind of pod (none of its containers ran).
    for (reason, class) in [
        ("OutOfcpu", "pod_rejected"),
        ("OutOfmemory", "pod_rejected"),
        ("UnexpectedAdmissionError", "pod_rejected"),
        ("Evicted", "evicted"),
        ("Shutdown", "pod_failed"),
    ] {
        let failed = pod_with_status(&serde_json::json!({"phase": "Failed", "reason": reason,
            "message": "Pod was rejected: Node didn't have enough resource: cpu"}));
        for kind in [
            provider_kube::PodKind::Workload,
            provider_kube::PodKind::Job,
        ] {
            let e = provider_kube::pod_failure_as(&failed, "p", kind)
                .unwrap_or_else(|| panic!("{reason} not classified for {kind:?}"));
            assert_eq!(e.class, class, "{reason} {kind:?}");
            assert!(
                e.message.contains(reason) && e.message.contains("enough resource"),
                "{}",
                e.message
            );
        }
    }
    let exited = pod_with_status(
        &serde_json::json!({"phase": "Running", "containerStatuses": [{
        "name": "iogen", "image": "reg/iogen:1", "imageID": "", "ready": false,
        "restartCount": 0, "state": {"terminated": {"exitCode": 2, "reason": "Error",
        "message": "open /data/0: permission denied"}}}]}),
    );
    let e = provider_kube::pod_failure(&exited, "p").unwrap();
    assert_eq!(e.class, "container_failed");
    assert!(e.message.contains("code 2") && e.message.contains("permission denied"));
    let ok = pod_with_status(
        &serde_json::json!({"phase": "Succeeded", "containerStatuses": [{
        "name": "iogen", "image": "reg/iogen:1", "imageID": "", "ready": false,
        "restartCount": 0, "state": {"terminated": {"exitCode": 0}}}]}),
    );
    assert_eq!(
        provider_kube::pod_failure(&ok, "p").unwrap().class,
        "pod_failed",
        "a workload pod that ended is not ready"
    );
    // An `io_phase` or stream pod that ran has started, however it ended: its own result
    // (log, exit code) says how the I/O went.
    for done in [&ok, &exited] {
        assert!(provider_kube::pod_started(done));
        assert!(provider_kube::pod_failure_as(done, "p", provider_kube::PodKind::Job).is_none());
    }
    assert!(!provider_kube::pod_started(&waiting("ErrImagePull", "")));
    let unsched = pod_with_status(&serde_json::json!({"phase": "Pending", "conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."}]}));
    assert!(
        provider_kube::unschedulable(&unsched)
            .unwrap()
            .contains("didn't match")
    );
    assert!(provider_kube::pod_failure(&unsched, "p").is_none());
    for (reason, class) in [
        ("ProvisioningFailed", "provisioning_failed"),
        ("FailedAttachVolume", "attach_failed"),
        ("FailedMount", "mount_failed"),
        ("FailedCreatePodSandBox", "sandbox_failed"),
    ] {
        assert_eq!(provider_kube::warning_class(reason), class);
    }
}

/// Every pod the provider makes meets the `restricted` Pod Security Standard's rules, and a
/// raw block volume gets the device's group.
#[test]
fn pods_are_restricted_and_block_pods_get_the_device_group() {
    let ev = phase_event();
    let Op::IoPhase(ph) = &ev.op else { panic!() };
    for block in [false, true] {
        let vol = PodVolume {
            claim: "db-0".into(),
            block,
        };
        let pod = provider_kube::io_pod(&KubeConfig::default(), "r", "ns", &ev, ph, &vol, None);
        let v = serde_json::to_value(&pod).unwrap();
        let sc = &v["spec"]["securityContext"];
        assert_eq!(sc["runAsNonRoot"], true);
        assert_eq!(sc["runAsUser"], 65532);
        assert_eq!(sc["fsGroup"], 65532);
        assert_eq!(sc["fsGroupChangePolicy"], "OnRootMismatch");
        assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault");
        assert_eq!(
            v["spec"]["automountServiceAccountToken"], false,
            "an iogen pod calls no API: it mounts no token"
        );
        let c = &v["spec"]["containers"][0]["securityContext"];
        assert_eq!(c["allowPrivilegeEscalation"], false);
        assert_eq!(c["capabilities"]["drop"][0], "ALL");
        if block {
            assert_eq!(sc["supplementalGroups"][0], 6);
        } else {
            assert!(sc["supplementalGroups"].is_null());
        }
    }
}

/// The pull check's pod: the run's images, iogen's container under the run's Localhost
/// profile running `--version`, pinned to the node when it has one, `restricted`, no token,
/// nothing to wait for at deletion.
#[test]
fn pull_check_pod_manifest() {
    let mut cfg = KubeConfig {
        iogen_image: "reg/cnsreplay/iogen:1".into(),
        pause_image: "reg/pause:3.10".into(),
        ..KubeConfig::default()
    };
    cfg.pod.iogen_seccomp_profile = Some("cnsreplay/iogen.json".into());
    cfg.pod.node_selector.insert("disk".into(), "ssd".into());
    let check = provider_kube::PullCheck {
        images: [
            ("iogen".to_owned(), cfg.iogen_image.clone()),
            ("workload".to_owned(), cfg.pause_image.clone()),
        ]
        .into(),
        targets: vec![Some("n1".into())],
    };
    let pod = provider_kube::pull_check_pod(&cfg, &check, "r1", "ns", 0, Some("n1"));
    let v = serde_json::to_value(&pod).unwrap();
    let spec = &v["spec"];
    assert_eq!(v["metadata"]["labels"]["cnsreplay.io/run"], "r1");
    // Named after the run: runs sharing a namespace check at the same time.
    assert_eq!(v["metadata"]["name"], "pull-check-r1-0");
    assert_eq!(spec["restartPolicy"], "Never");
    assert_eq!(spec["terminationGracePeriodSeconds"], 0);
    assert_eq!(spec["automountServiceAccountToken"], false);
    assert_eq!(spec["nodeSelector"]["disk"], "ssd");
    assert_eq!(
        spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            [0]["matchFields"][0]["values"][0],
        "n1"
    );
    assert_eq!(
        spec["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let cs = spec["containers"].as_array().unwrap();
    assert_eq!(cs.len(), 2);
    let iogen = &cs[0];
    assert_eq!(iogen["image"], "reg/cnsreplay/iogen:1");
    assert_eq!(iogen["args"][0], "--version");
    assert_eq!(
        iogen["securityContext"]["seccompProfile"]["type"],
        "Localhost"
    );
    assert_eq!(
        iogen["securityContext"]["seccompProfile"]["localhostProfile"],
        "cnsreplay/iogen.json"
    );
    let pause = &cs[1];
    assert_eq!(pause["image"], "reg/pause:3.10");
    assert!(pause["securityContext"]["seccompProfile"].is_null());
    for c in cs {
        assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
        assert_eq!(c["securityContext"]["capabilities"]["drop"][0], "ALL");
    }
}

/// The backend an iogen pod's log names: io_uring, or threads with iogen's reason and the
/// profile the pod ran under; none before iogen printed its table.
#[test]
fn an_iogen_pods_backend_comes_from_its_log() {
    let fallback = "#[StartTime: 1.0]\nTag=read,0.0,0.2,0.1,X\ntarget /mnt/v0/data  engine sync \
                    [threads=1]  kernel 6.1\n  note: io_uring setup failed (Operation not \
                    permitted (os error 1)); fell back to the thread-pool engine\n0.20 s  1 I/Os\n";
    let b = provider_kube::pod_backend(fallback, None).unwrap();
    assert_eq!(b.backend, "threads");
    let r = b.reason.unwrap();
    assert!(
        r.contains("Operation not permitted")
            && r.contains("RuntimeDefault")
            && r.contains("deploy/seccomp"),
        "{r}"
    );
    let b = provider_kube::pod_backend(fallback, Some("my/profile.json")).unwrap();
    assert!(
        b.reason
            .unwrap()
            .contains("Localhost seccomp profile my/profile.json")
    );
    let uring = "target /mnt/v0/data  engine io_uring [single_issuer]  kernel 6.1\n";
    let b = provider_kube::pod_backend(uring, None).unwrap();
    assert_eq!((b.backend.as_str(), b.reason), ("io_uring", None));
    assert_eq!(
        provider_kube::pod_backend("Tag=read,0.0,0.2,0.1,X\n", None),
        None
    );
}
