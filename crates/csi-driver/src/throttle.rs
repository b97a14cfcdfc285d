//! A volume's attributes class on the node: ControllerModifyVolume's mutable parameters (and
//! CreateVolume's) become the kernel's block throttle for the volume's loop device, written
//! into the blkio cgroup of every container of every pod that has the volume published here
//! ([`local_storage::throttle`] has the vocabulary and why it is the kernel's throttle).
//!
//! cgroup v1 throttling binds only the cgroup it is written to, so the limit goes to each
//! pod's cgroup and each container cgroup in it (`POD_CGROUPS/[qos/]pod<UID>/<container>`,
//! the kubelet's cgroupfs layout). A container may start after the volume is published, so a
//! reconcile pass runs every [`PASS`] as well as at once inside ControllerModifyVolume, which
//! returns only after the limit is written to every container that exists then: when the
//! resizer reports the claim modified, the limit holds. Pods are found by the UID in each
//! published target path (`…/pods/<UID>/volumes/…` for mounts, `…/publish/<PV>/<UID>` for raw
//! block devices).

use std::path::{Path, PathBuf};
use std::time::Duration;

use local_storage::throttle::{self, Limits};

use crate::driver::Driver;
use crate::state::VolumeRec;

/// How often the node re-applies limits to containers started since.
pub const PASS: Duration = Duration::from_millis(25);

/// The pod UID in a published target path.
fn pod_uid(target: &Path) -> Option<String> {
    let parts: Vec<&str> = target.iter().filter_map(|c| c.to_str()).collect();
    if let Some(i) = parts.iter().position(|c| *c == "pods") {
        return parts.get(i + 1).map(|s| (*s).to_owned());
    }
    // Raw block: …/volumeDevices/publish/<PV>/<UID>.
    parts
        .iter()
        .rposition(|c| *c == "publish")
        .and_then(|i| parts.get(i + 2))
        .map(|s| (*s).to_owned())
}

/// The cgroups of pod `uid` under `root`: the pod's own and its containers'.
fn pod_cgroups(root: &Path, uid: &str) -> Vec<PathBuf> {
    let name = format!("pod{uid}");
    let mut pods = Vec::new();
    let Ok(top) = std::fs::read_dir(root) else {
        return pods;
    };
    for e in top.flatten() {
        let p = e.path();
        if !p.is_dir() {
            continue;
        }
        if e.file_name().to_str() == Some(name.as_str()) {
            pods.push(p);
        } else if let Ok(qos) = std::fs::read_dir(&p) {
            // besteffort/, burstable/
            pods.extend(
                qos.flatten()
                    .filter(|q| q.file_name().to_str() == Some(name.as_str()))
                    .map(|q| q.path()),
            );
        }
    }
    let mut out = Vec::new();
    for pod in pods {
        if let Ok(cs) = std::fs::read_dir(&pod) {
            out.extend(cs.flatten().map(|c| c.path()).filter(|c| c.is_dir()));
        }
        out.push(pod);
    }
    out
}

/// Whether `cg` already has exactly `want` for `dev` (a lifted limit: no rule).
fn in_force(cg: &Path, dev: &str, want: &Limits) -> bool {
    throttle::read(cg, dev).is_ok_and(|have| {
        have.0
            .iter()
            .zip(want.0)
            .all(|(h, w)| w.is_none_or(|w| *h == (w > 0).then_some(w)))
    })
}

impl Driver {
    /// The blkio directory under which the kubelet makes pod cgroups, if this node has one.
    pub(crate) fn pod_cgroup_root(&self) -> Option<PathBuf> {
        self.config()
            .pod_cgroups
            .clone()
            .or_else(|| throttle::blkio_root().map(|r| r.join("kubepods")))
    }

    /// Writes the limits of `v` into the cgroups of the containers using it on this node
    /// (only where they differ). Returns how many cgroups were written, or the first error.
    pub(crate) fn throttle_volume(&self, v: &VolumeRec) -> Result<usize, String> {
        let (Some(dev), Some(root)) = (&v.loop_dev, self.pod_cgroup_root()) else {
            return Ok(0);
        };
        if v.limits == Limits::default() {
            return Ok(0);
        }
        let num = throttle::dev_number(Path::new(dev)).map_err(|e| e.to_string())?;
        let mut written = 0;
        for uid in v.targets.iter().filter_map(|t| pod_uid(t)) {
            for cg in pod_cgroups(&root, &uid) {
                if in_force(&cg, &num, &v.limits) {
                    continue;
                }
                match throttle::apply(&cg, &num, &v.limits) {
                    Ok(()) => written += 1,
                    // A container that ended between the listing and the write.
                    Err(_) if !cg.exists() => {}
                    Err(e) => return Err(e.to_string()),
                }
            }
        }
        Ok(written)
    }

    /// One pass over every published volume with limits.
    pub(crate) fn throttle_pass(&self) {
        let vols: Vec<VolumeRec> = self
            .state()
            .volumes
            .values()
            .filter(|v| v.loop_dev.is_some() && v.limits != Limits::default())
            .cloned()
            .collect();
        for v in vols {
            if let Err(e) = self.throttle_volume(&v) {
                tracing::warn!(volume = %v.id, "applying its I/O limits: {e}");
            }
        }
    }

    /// Why this node cannot apply I/O limits, if it cannot.
    pub(crate) fn cannot_throttle(&self) -> Option<String> {
        if !self.loop_mode() {
            return Some(
                "volumes are plain files here (not root): there is no device to throttle".into(),
            );
        }
        match self.pod_cgroup_root() {
            None => Some("this node has no cgroup v1 blkio hierarchy to throttle in".into()),
            Some(_) => None,
        }
    }
}

/// Re-applies limits every [`PASS`] until `shutdown` completes (containers started after
/// their volume was published get them too).
pub async fn run(driver: Driver, shutdown: impl Future<Output = ()>) {
    let mut shutdown = std::pin::pin!(shutdown);
    let mut tick = tokio::time::interval(PASS);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = &mut shutdown => return,
            _ = tick.tick() => {
                let d = driver.clone();
                let _ = tokio::task::spawn_blocking(move || d.throttle_pass()).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pod_uid_comes_from_either_kind_of_target_path() {
        assert_eq!(
            pod_uid(Path::new(
                "/var/lib/kubelet/pods/1f2e/volumes/kubernetes.io~csi/pvc-9/mount"
            ))
            .as_deref(),
            Some("1f2e")
        );
        assert_eq!(
            pod_uid(Path::new(
                "/k/plugins/kubernetes.io/csi/volumeDevices/publish/pvc-9/77aa"
            ))
            .as_deref(),
            Some("77aa")
        );
        assert_eq!(pod_uid(Path::new("/tmp/target")), None);
    }

    #[test]
    fn pod_cgroups_are_found_in_any_qos_class() {
        let d = tempfile::tempdir().unwrap();
        for p in [
            "besteffort/podA/c1",
            "besteffort/podA/c2",
            "burstable/podB/c3",
            "podC/c4",
        ] {
            std::fs::create_dir_all(d.path().join(p)).unwrap();
        }
        let mut a = pod_cgroups(d.path(), "A");
        a.sort();
        assert_eq!(
            a,
            [
                "besteffort/podA",
                "besteffort/podA/c1",
                "besteffort/podA/c2"
            ]
            .map(|p| d.path().join(p))
        );
        assert_eq!(pod_cgroups(d.path(), "C").len(), 2);
        assert!(pod_cgroups(d.path(), "D").is_empty());
    }
}
