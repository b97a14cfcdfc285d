//! Getting run directories out of the cluster: what `cnsreplay fetch` does after an in-cluster
//! run (deploy/kustomize) wrote its run directory to a PersistentVolumeClaim.
//!
//! As `kubectl cp` does, a pod that mounts the volume runs an archiver and its stdout comes
//! back through the API server's `exec` stream: a pod of the cnsreplay image (the image is
//! `FROM scratch`, there is no `tar` in it) mounts the claim read-only with `cnsreplay idle`
//! as its process, and `cnsreplay pack PATH` is exec'd in it. `exec`, not the pod's own
//! output: the kubelet does not copy an exec's stdout into the container log. The stream is
//! handed to the caller's reader on a blocking thread as it arrives (no copy of the archive
//! in memory or on disk), and the pod is deleted by its UID afterwards — also when the copy
//! fails or the caller stops it.
//!
//! The pod is PSS-restricted like every pod of a run: non-root, no capabilities, read-only
//! root file system, `RuntimeDefault` seccomp. An archive counts only when `pack` exits 0:
//! a stream cut short is an error, never a partial directory presented as complete.
//!
//! It stays in this crate (its top layer) rather than beside its command in `crates/cnsreplay`:
//! the pod is built and judged with the provider's own pieces (the kubeconfig client, the
//! restricted container, the pull secrets, [`crate::pods::verdict::pod_failure`]), which would
//! otherwise become public API, and the command would take on `kube` and `futures` as
//! dependencies of its own.

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, PersistentVolumeClaimVolumeSource, Pod, PodSecurityContext, PodSpec, SeccompProfile,
    Volume, VolumeMount,
};
use kube::api::{Api, AttachParams, DeleteParams, ObjectMeta, PostParams, Preconditions};
use kube::runtime::wait::{await_condition, conditions};
use tokio::io::AsyncReadExt;

use crate::config::PodOptions;
use crate::config::{KubeConfig, KubeError};

/// Where the claim is mounted in the fetch pod.
pub const FETCH_MOUNT: &str = "/data";

/// What to fetch, from where.
#[derive(Debug, Clone)]
pub struct FetchOptions {
    /// Namespace of the claim (and of the fetch pod).
    pub namespace: String,
    /// The PersistentVolumeClaim the run directories are on.
    pub pvc: String,
    /// The cnsreplay image (its binary at `/cnsreplay`, as deploy/cnsreplay.Containerfile).
    pub image: String,
    /// The directory to pack, relative to the claim's root (e.g. `runs` or `runs/NAME`).
    pub path: String,
    /// Placement, user and pull secrets of the fetch pod (as for a run's pods).
    pub pod: PodOptions,
    /// How long the pod may take to start (image pull, attach, mount).
    pub start_timeout: Duration,
}

/// Why a fetch failed.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The client could not be built.
    #[error(transparent)]
    Kube(#[from] KubeError),
    /// A request to the API server failed.
    #[error("{what}: {source}")]
    Api {
        /// What was being done.
        what: String,
        /// The API error.
        source: kube::Error,
    },
    /// The fetch pod did not reach Running.
    #[error("the fetch pod {pod} did not start ({class}): {why}")]
    NotStarted {
        /// namespace/name.
        pod: String,
        /// The error class, as for a run's pods (`image_pull_failed`, `pod_rejected`, …;
        /// [`crate::pods::verdict::pod_failure`]), or `timeout`.
        class: String,
        /// Its phase, the container's waiting reason or the scheduler's message.
        why: String,
    },
    /// `cnsreplay pack` failed in the pod (its stderr and exit status).
    #[error("`cnsreplay pack {path}` in {pod} failed: {why}")]
    Pack {
        /// namespace/name.
        pod: String,
        /// The packed path.
        path: String,
        /// Its status message and stderr.
        why: String,
    },
    /// The caller's reader failed (e.g. a bad archive, a full disk).
    #[error("unpacking: {0}")]
    Unpack(std::io::Error),
    /// Stopped by the caller (Ctrl-C).
    #[error("interrupted")]
    Interrupted,
}

/// What a fetch did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchReport {
    /// namespace/name of the fetch pod (deleted).
    pub pod: String,
    /// The node it ran on.
    pub node: String,
    /// Bytes of archive received.
    pub bytes: u64,
}

/// The fetch pod: the claim read-only at [`FETCH_MOUNT`], `cnsreplay idle` as its process.
pub fn fetch_pod(opts: &FetchOptions) -> Pod {
    let labels = BTreeMap::from([
        ("app.kubernetes.io/name".to_owned(), "cnsreplay".to_owned()),
        ("cnsreplay.io/role".to_owned(), "fetch".to_owned()),
    ]);
    let o = &opts.pod;
    Pod {
        metadata: ObjectMeta {
            generate_name: Some("cnsreplay-fetch-".into()),
            namespace: Some(opts.namespace.clone()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            restart_policy: Some("Never".into()),
            termination_grace_period_seconds: Some(1),
            automount_service_account_token: Some(false),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                run_as_user: Some(o.run_as_user),
                run_as_group: Some(o.run_as_user),
                seccomp_profile: Some(SeccompProfile {
                    type_: "RuntimeDefault".into(),
                    localhost_profile: None,
                }),
                ..PodSecurityContext::default()
            }),
            node_selector: (!o.node_selector.is_empty()).then(|| o.node_selector.clone()),
            tolerations: (!o.tolerations.is_empty()).then(|| o.tolerations.clone()),
            image_pull_secrets: crate::kube::objects::pull_secrets(o),
            containers: vec![Container {
                name: "fetch".into(),
                image: Some(opts.image.clone()),
                command: Some(vec!["/cnsreplay".into(), "idle".into()]),
                security_context: Some(crate::kube::objects::restricted_container()),
                volume_mounts: Some(vec![VolumeMount {
                    name: "runs".into(),
                    mount_path: FETCH_MOUNT.into(),
                    read_only: Some(true),
                    ..VolumeMount::default()
                }]),
                ..Container::default()
            }],
            volumes: Some(vec![Volume {
                name: "runs".into(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: opts.pvc.clone(),
                    read_only: Some(true),
                }),
                ..Volume::default()
            }]),
            ..PodSpec::default()
        }),
        status: None,
    }
}

/// A blocking reader over the chunks the exec stream delivers.
struct ChunkReader {
    rx: tokio::sync::mpsc::Receiver<Vec<u8>>,
    chunk: Vec<u8>,
    at: usize,
}

impl Read for ChunkReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.chunk.len() {
            match self.rx.blocking_recv() {
                Some(c) => {
                    self.chunk = c;
                    self.at = 0;
                }
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.chunk.len() - self.at);
        buf[..n].copy_from_slice(&self.chunk[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Fetches `opts.path` from the claim: starts the fetch pod, execs `cnsreplay pack` in it and
/// hands its stdout to `unpack` (on a blocking thread), then deletes the pod; returns what
/// `unpack` returned. `stop` set (Ctrl-C) ends it with [`FetchError::Interrupted`], the pod
/// deleted all the same.
pub fn fetch<F, T>(
    config: &KubeConfig,
    opts: &FetchOptions,
    stop: &AtomicBool,
    unpack: F,
) -> Result<(FetchReport, T), FetchError>
where
    F: FnOnce(&mut dyn Read) -> std::io::Result<T> + Send + 'static,
    T: Send + 'static,
{
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("cnsreplay-fetch")
        .build()
        .map_err(KubeError::Runtime)?;
    rt.block_on(async {
        let client = crate::config::client_for(config).await?;
        let api: Api<Pod> = Api::namespaced(client, &opts.namespace);
        let pod = api
            .create(&PostParams::default(), &fetch_pod(opts))
            .await
            .map_err(|source| FetchError::Api {
                what: format!(
                    "creating a fetch pod in {} for claim {}",
                    opts.namespace, opts.pvc
                ),
                source,
            })?;
        let name = pod.metadata.name.clone().unwrap_or_default();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let work = copy(&api, &name, opts, unpack);
        let interrupted = async {
            while !stop.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        let result = tokio::select! {
            r = work => r,
            () = interrupted => Err(FetchError::Interrupted),
        };
        let removed = remove(&api, &name, &uid).await;
        let report = result?;
        removed?;
        Ok(report)
    })
}

/// Waits for the pod, execs `pack` and feeds its stdout to `unpack`.
async fn copy<F, T>(
    api: &Api<Pod>,
    name: &str,
    opts: &FetchOptions,
    unpack: F,
) -> Result<(FetchReport, T), FetchError>
where
    F: FnOnce(&mut dyn Read) -> std::io::Result<T> + Send + 'static,
    T: Send + 'static,
{
    let full = format!("{}/{name}", opts.namespace);
    let node = wait_running(api, name, &full, opts.start_timeout).await?;
    let path = format!("{FETCH_MOUNT}/{}", opts.path.trim_start_matches('/'));
    let ap = AttachParams::default()
        .container("fetch")
        .stdin(false)
        .stdout(true)
        .stderr(true);
    let mut proc = api
        .exec(name, ["/cnsreplay", "pack", path.as_str()], &ap)
        .await
        .map_err(|source| FetchError::Api {
            what: format!("exec in {full}"),
            source,
        })?;
    let (Some(mut stdout), Some(mut stderr), Some(status)) =
        (proc.stdout(), proc.stderr(), proc.take_status())
    else {
        return Err(FetchError::Pack {
            pod: full,
            path,
            why: "the exec stream has no stdout, stderr or status".into(),
        });
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Vec<u8>>(64);
    let sink = tokio::task::spawn_blocking(move || {
        let mut r = ChunkReader {
            rx,
            chunk: Vec::new(),
            at: 0,
        };
        let res = unpack(&mut r);
        // Whatever `unpack` left unread still has to be received, or the sender blocks.
        let mut rest = Vec::new();
        let _ = r.read_to_end(&mut rest);
        res
    });
    let err_text = tokio::spawn(async move {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s).await;
        s
    });
    let mut bytes = 0u64;
    let mut buf = vec![0u8; 256 << 10];
    loop {
        let n = stdout.read(&mut buf).await.map_err(|e| FetchError::Pack {
            pod: full.clone(),
            path: path.clone(),
            why: format!("reading its output: {e}"),
        })?;
        if n == 0 {
            break;
        }
        bytes += n as u64;
        if tx.send(buf[..n].to_vec()).await.is_err() {
            break;
        }
    }
    drop(tx);
    let st = status.await;
    let said = err_text.await.unwrap_or_default();
    let _ = proc.join().await;
    let unpacked = sink
        .await
        .map_err(|e| FetchError::Unpack(std::io::Error::other(e.to_string())))?;
    match st {
        Some(s) if s.status.as_deref() == Some("Success") => {}
        other => {
            let msg = other.and_then(|s| s.message).unwrap_or_default();
            return Err(FetchError::Pack {
                pod: full,
                path,
                why: format!("{msg} {}", said.trim()).trim().to_owned(),
            });
        }
    }
    let unpacked = unpacked.map_err(FetchError::Unpack)?;
    Ok((
        FetchReport {
            pod: full,
            node,
            bytes,
        },
        unpacked,
    ))
}

/// Waits until the pod runs; returns its node. A pod that will not start says why as soon as
/// its status shows it ([`crate::pods::verdict::pod_failure`], the classes of a run's pods), else after
/// `timeout`.
async fn wait_running(
    api: &Api<Pod>,
    name: &str,
    full: &str,
    timeout: Duration,
) -> Result<String, FetchError> {
    let started = tokio::time::timeout(
        timeout,
        await_condition(api.clone(), name, |p: Option<&Pod>| {
            p.is_none_or(|p| {
                p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                    || crate::pods::verdict::pod_failure(p, full).is_some()
            })
        }),
    )
    .await;
    let pod = api.get(name).await.map_err(|source| FetchError::Api {
        what: format!("reading {full}"),
        source,
    })?;
    if let Some(e) = crate::pods::verdict::pod_failure(&pod, full) {
        return Err(FetchError::NotStarted {
            pod: full.to_owned(),
            class: e.class,
            why: e.message,
        });
    }
    let status = pod.status.clone().unwrap_or_default();
    if started.is_ok() && status.phase.as_deref() == Some("Running") {
        return Ok(pod.spec.and_then(|s| s.node_name).unwrap_or_default());
    }
    let waiting = status
        .container_statuses
        .iter()
        .flatten()
        .filter_map(|c| c.state.as_ref()?.waiting.as_ref())
        .map(|w| {
            format!(
                "{} {}",
                w.reason.clone().unwrap_or_default(),
                w.message.clone().unwrap_or_default()
            )
        })
        .chain(
            status
                .conditions
                .iter()
                .flatten()
                .filter(|c| c.status == "False")
                .filter_map(|c| c.message.clone()),
        )
        .collect::<Vec<_>>()
        .join("; ");
    Err(FetchError::NotStarted {
        pod: full.to_owned(),
        class: if started.is_err() {
            "timeout"
        } else {
            "pod_failed"
        }
        .to_owned(),
        why: format!(
            "phase {}{}{}",
            status.phase.as_deref().unwrap_or("unknown"),
            if started.is_err() {
                format!(" after {} s", timeout.as_secs())
            } else {
                String::new()
            },
            if waiting.is_empty() {
                String::new()
            } else {
                format!(": {}", waiting.trim())
            }
        ),
    })
}

/// Deletes the fetch pod by UID and waits until it is gone.
async fn remove(api: &Api<Pod>, name: &str, uid: &str) -> Result<(), FetchError> {
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &dp).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => return Ok(()),
        Err(source) => {
            return Err(FetchError::Api {
                what: format!("deleting the fetch pod {name}"),
                source,
            });
        }
    }
    let gone = tokio::time::timeout(
        Duration::from_secs(120),
        await_condition(api.clone(), name, conditions::is_deleted(uid)),
    )
    .await;
    if gone.is_err() {
        tracing::warn!("the fetch pod {name} is still terminating after 120 s");
    }
    Ok(())
}
