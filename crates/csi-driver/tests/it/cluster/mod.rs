//! Through the real API server, kube-controller-manager, kube-scheduler, kwok and the CSI
//! sidecars of the local test cluster (`testenv/up.sh` with cnsreplay-csi), with the real
//! `kubectl` of the testenv bin dir.
//!
//! Discovery (shared with the Kubernetes provider's tests): `CNSREPLAY_TESTENV` is the path of
//! a running cluster's `testenv.env`. Unset: each test prints one "skipped" line to stderr and
//! passes, unless `CNSREPLAY_REQUIRE_TESTENV=1`, when it fails ([`testkit`]). CI runs every
//! test under `cluster::` (these and `real_node`) once the cluster is up, the rest before it
//! (scripts/test.sh).

mod real_node;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The local cluster ([`testkit::TestEnv`]) running cnsreplay-csi.
pub struct TestEnv(testkit::TestEnv);

/// The local cluster, or `None` (after the skip line) when there is none.
pub fn testenv() -> Option<TestEnv> {
    let env = testkit::testenv()?;
    assert!(
        !env.get("TESTENV_CSI_ROOT").is_empty(),
        "{}: cnsreplay-csi is not running in this cluster (build it before testenv/up.sh)",
        std::env::var("CNSREPLAY_TESTENV").unwrap_or_default()
    );
    Some(TestEnv(env))
}

pub(crate) const TIMEOUT: Duration = Duration::from_secs(90);

impl TestEnv {
    pub(crate) fn get(&self, k: &str) -> &str {
        self.0.get(k)
    }

    pub(crate) fn root(&self) -> PathBuf {
        PathBuf::from(self.get("TESTENV_CSI_ROOT"))
    }

    /// `kubectl ARGS` as the admin: its stdout trimmed, or its stderr.
    pub(crate) fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Result<String, String> {
        self.0
            .kubectl()
            .run(args, stdin)
            .map(|out| out.trim().to_owned())
    }

    pub(crate) fn k(&self, args: &[&str]) -> String {
        self.kubectl(args, None).unwrap_or_else(|e| panic!("{e}"))
    }

    pub(crate) fn apply(&self, ns: &str, yaml: &str) {
        self.kubectl(&["-n", ns, "apply", "-f", "-"], Some(yaml))
            .unwrap_or_else(|e| panic!("{e}\n{yaml}"));
    }

    /// jsonpath of an object; empty when it does not exist.
    pub(crate) fn get_path(&self, ns: &str, obj: &str, path: &str) -> String {
        let jp = format!("jsonpath={path}");
        self.kubectl(&["-n", ns, "get", obj, "-o", &jp], None)
            .unwrap_or_default()
    }

    /// Why pod `pod` is where it is, for a failing test's message: its phase, reason and
    /// message, each container's state, and the pod's events.
    pub(crate) fn pod_story(&self, ns: &str, pod: &str) -> String {
        let status = self.get_path(
            ns,
            &format!("pod/{pod}"),
            "phase={.status.phase} reason={.status.reason} message={.status.message} \
             containers={.status.containerStatuses[*].state} \
             init={.status.initContainerStatuses[*].state}",
        );
        let events = self
            .kubectl(
                &[
                    "-n",
                    ns,
                    "get",
                    "events",
                    "--field-selector",
                    &format!("involvedObject.name={pod}"),
                    "-o",
                    "custom-columns=TYPE:.type,REASON:.reason,MESSAGE:.message",
                ],
                None,
            )
            .unwrap_or_else(|e| e);
        format!("pod {ns}/{pod}: {status}\nevents:\n{events}")
    }

    /// Polls until `f` gives `Some`, or panics naming `what` after the timeout.
    pub(crate) fn wait<T>(&self, what: &str, f: impl FnMut() -> Option<T>) -> T {
        self.wait_for(what, TIMEOUT, f)
    }

    /// [`TestEnv::wait`] with its own deadline.
    pub(crate) fn wait_for<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut f: impl FnMut() -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(v) = f() {
                return v;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Polls until `obj`'s `path` is `want`; a pod that never gets there fails the test
    /// with its [`TestEnv::pod_story`].
    pub(crate) fn wait_path(&self, ns: &str, obj: &str, path: &str, want: &str) {
        let deadline = Instant::now() + TIMEOUT;
        while self.get_path(ns, obj, path) != want {
            if Instant::now() >= deadline {
                let story = match obj.strip_prefix("pod/") {
                    Some(pod) => self.pod_story(ns, pod),
                    None => self.k(&["-n", ns, "describe", obj]),
                };
                panic!("timed out waiting for {obj} {path} = {want}\n{story}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub(crate) fn wait_gone(&self, ns: &str, obj: &str) {
        self.wait(&format!("{obj} gone"), || {
            self.kubectl(
                &["-n", ns, "get", obj, "--ignore-not-found", "-o", "name"],
                None,
            )
            .ok()
            .filter(String::is_empty)
        });
    }

    /// A fresh namespace for one test.
    pub(crate) fn namespace(&self, test: &str) -> String {
        let ns = format!("csi-it-{test}-{}", std::process::id());
        self.k(&["create", "namespace", &ns]);
        ns
    }

    /// The PV of a bound PVC and the image backing it.
    pub(crate) fn backing(&self, ns: &str, pvc: &str) -> (String, PathBuf) {
        let pv = self.get_path(ns, &format!("pvc/{pvc}"), "{.spec.volumeName}");
        let handle = self.get_path("", &format!("pv/{pv}"), "{.spec.csi.volumeHandle}");
        assert!(!handle.is_empty(), "PV {pv} has a CSI volume handle");
        (
            pv,
            self.root().join("volumes").join(format!("{handle}.img")),
        )
    }
}

pub(crate) fn pvc_yaml(
    name: &str,
    class: &str,
    size: &str,
    block: bool,
    source: Option<&str>,
) -> String {
    let mode = if block { "Block" } else { "Filesystem" };
    let source = source.map_or(String::new(), |s| {
        format!(
            "  dataSource: {{name: {s}, kind: VolumeSnapshot, apiGroup: snapshot.storage.k8s.io}}\n"
        )
    });
    format!(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: {name}}}\nspec:\n  \
         accessModes: [ReadWriteOnce]\n  storageClassName: {class}\n  volumeMode: {mode}\n  \
         resources: {{requests: {{storage: {size}}}}}\n{source}"
    )
}

fn pod_yaml(name: &str, pvc: &str, node: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  \
         nodeSelector: {{kubernetes.io/hostname: {node}}}\n  \
         containers: [{{name: c, image: busybox, volumeMounts: [{{name: v, mountPath: /data}}]}}]\n  \
         volumes: [{{name: v, persistentVolumeClaim: {{claimName: {pvc}}}}}]\n"
    )
}

pub(crate) fn loops_of(image: &Path) -> Vec<String> {
    local_storage::loops_of(image)
}

/// The VolumeAttachment of a PV, once it reports attached.
fn attachment_of(env: &TestEnv, pv: &str) -> Option<(String, String)> {
    let out = env
        .kubectl(
            &[
                "get",
                "volumeattachments",
                "-o",
                "jsonpath={range .items[*]}{.metadata.name} {.spec.source.persistentVolumeName} {.spec.nodeName} {.status.attached}{\"\\n\"}{end}",
            ],
            None,
        )
        .ok()?;
    out.lines().find_map(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        (w.len() == 4 && w[1] == pv && w[3] == "true").then(|| (w[0].to_owned(), w[2].to_owned()))
    })
}

fn iogen_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("IOGEN_BIN") {
        return p.into();
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"),
        PathBuf::from,
    );
    let p = target.join("debug/iogen");
    assert!(
        p.exists(),
        "{}: the iogen binary is missing (cargo build -p iogen, or set IOGEN_BIN)",
        p.display()
    );
    p
}

/// `iogen run` in verify mode over the first 16 MiB of `target`: `write` lays down
/// self-describing blocks and saves the generation map to `state`; `read` checks them.
fn iogen_verify(target: &Path, state: &Path, write: bool) -> Result<(), String> {
    let out = Command::new(iogen_bin())
        .args(["run", "--target"])
        .arg(target)
        .args(["--rw", if write { "write" } else { "read" }])
        .args([
            "--bs",
            "4k",
            "--size",
            "16m",
            "--bytes",
            "16m",
            "--iodepth",
            "4",
        ])
        .args(["--engine", "sync", "--verify", "--verify-state"])
        .arg(state)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "iogen on {}: {}",
            target.display(),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

#[test]
fn pvc_binds_pod_attaches_resize_grows_and_deletes_leave_nothing() {
    let Some(env) = testenv() else { return };
    let ns = env.namespace("lifecycle");
    env.apply(&ns, &pvc_yaml("data", "cnsreplay-csi", "64Mi", false, None));
    env.wait_path(&ns, "pvc/data", "{.status.phase}", "Bound");
    let (pv, image) = env.backing(&ns, "data");
    assert!(image.exists(), "{} exists", image.display());
    assert_eq!(fs_err::metadata(&image).unwrap().len(), 64 << 20);

    env.apply(&ns, &pod_yaml("user", "data", "testenv-node-2"));
    let (va, node) = env.wait("VolumeAttachment attached", || attachment_of(&env, &pv));
    assert_eq!(node, "testenv-node-2");
    env.wait_path(&ns, "pod/user", "{.status.phase}", "Running");
    if local_storage::is_root() {
        assert_eq!(loops_of(&image).len(), 1, "attached = one loop device");
    }

    // Resize with the pod running: the controller grows file, loop device and file system.
    env.k(&[
        "-n",
        &ns,
        "patch",
        "pvc/data",
        "-p",
        r#"{"spec":{"resources":{"requests":{"storage":"128Mi"}}}}"#,
    ]);
    env.wait_path(&ns, "pvc/data", "{.status.capacity.storage}", "128Mi");
    assert_eq!(fs_err::metadata(&image).unwrap().len(), 128 << 20);

    env.k(&["-n", &ns, "delete", "pod/user", "--wait=false"]);
    env.wait_gone("", &format!("volumeattachment/{va}"));
    assert!(loops_of(&image).is_empty(), "detached = no loop device");
    env.k(&["-n", &ns, "delete", "pvc/data", "--wait=false"]);
    env.wait_gone("", &format!("pv/{pv}"));
    assert!(!image.exists(), "{} removed", image.display());
    env.k(&["delete", "namespace", &ns, "--wait=false"]);
}

#[test]
fn snapshot_becomes_ready_and_a_restored_pvc_has_the_data() {
    let Some(env) = testenv() else { return };
    let ns = env.namespace("snapshot");
    let state_dir = tempfile::tempdir().unwrap();
    let vstate = state_dir.path().join("verify.state");
    env.apply(&ns, &pvc_yaml("src", "cnsreplay-csi", "32Mi", true, None));
    env.wait_path(&ns, "pvc/src", "{.status.phase}", "Bound");
    let (src_pv, src_img) = env.backing(&ns, "src");
    iogen_verify(&src_img, &vstate, true).unwrap();

    env.apply(
        &ns,
        "apiVersion: snapshot.storage.k8s.io/v1\nkind: VolumeSnapshot\nmetadata: {name: snap}\n\
         spec:\n  volumeSnapshotClassName: cnsreplay-csi\n  source: {persistentVolumeClaimName: src}\n",
    );
    env.wait_path(&ns, "volumesnapshot/snap", "{.status.readyToUse}", "true");
    let content = env.get_path(
        &ns,
        "volumesnapshot/snap",
        "{.status.boundVolumeSnapshotContentName}",
    );
    let handle = env.get_path(
        "",
        &format!("volumesnapshotcontent/{content}"),
        "{.status.snapshotHandle}",
    );
    let snap_img = env.root().join("snapshots").join(format!("{handle}.img"));
    assert!(snap_img.exists());

    // Overwrite the source afterwards: the restore must still have the snapshot's data.
    fs_err::write(&src_img, vec![0u8; 16 << 20]).unwrap();
    assert!(
        iogen_verify(&src_img, &vstate, false).is_err(),
        "the source was overwritten"
    );

    env.apply(
        &ns,
        &pvc_yaml("restored", "cnsreplay-csi", "32Mi", true, Some("snap")),
    );
    env.wait_path(&ns, "pvc/restored", "{.status.phase}", "Bound");
    let (restored_pv, restored_img) = env.backing(&ns, "restored");
    iogen_verify(&restored_img, &vstate, false).unwrap();

    env.k(&[
        "-n",
        &ns,
        "delete",
        "pvc/restored",
        "pvc/src",
        "volumesnapshot/snap",
        "--wait=false",
    ]);
    env.wait_gone("", &format!("pv/{restored_pv}"));
    env.wait_gone("", &format!("pv/{src_pv}"));
    env.wait_gone("", &format!("volumesnapshotcontent/{content}"));
    for f in [&src_img, &restored_img, &snap_img] {
        assert!(!f.exists(), "{} removed", f.display());
    }
    env.k(&["delete", "namespace", &ns, "--wait=false"]);
}

#[test]
fn wait_for_first_consumer_binds_when_the_pod_is_scheduled() {
    let Some(env) = testenv() else { return };
    let ns = env.namespace("wffc");
    env.apply(
        &ns,
        &pvc_yaml("late", "cnsreplay-csi-wffc", "16Mi", false, None),
    );
    // No consumer yet: the PVC waits (the event says so) and nothing is provisioned.
    env.wait("WaitForFirstConsumer event", || {
        env.kubectl(
            &[
                "-n",
                &ns,
                "get",
                "events",
                "--field-selector",
                "involvedObject.name=late",
                "-o",
                "jsonpath={.items[*].reason}",
            ],
            None,
        )
        .ok()
        .filter(|r| r.contains("WaitForFirstConsumer"))
    });
    assert_eq!(env.get_path(&ns, "pvc/late", "{.status.phase}"), "Pending");
    env.apply(&ns, &pod_yaml("consumer", "late", "testenv-node-3"));
    env.wait_path(&ns, "pvc/late", "{.status.phase}", "Bound");
    let (pv, image) = env.backing(&ns, "late");
    let (va, node) = env.wait("VolumeAttachment attached", || attachment_of(&env, &pv));
    assert_eq!(node, "testenv-node-3");
    env.k(&["-n", &ns, "delete", "pod/consumer", "--wait=false"]);
    env.wait_gone("", &format!("volumeattachment/{va}"));
    env.k(&["-n", &ns, "delete", "pvc/late", "--wait=false"]);
    env.wait_gone("", &format!("pv/{pv}"));
    assert!(!image.exists());
    assert!(loops_of(&image).is_empty());
    env.k(&["delete", "namespace", &ns, "--wait=false"]);
}
