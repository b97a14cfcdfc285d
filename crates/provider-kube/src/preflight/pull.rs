//! The pull check: before the clock starts, one short-lived pod per node the trace pins pods
//! to (and one wherever the run's node selection lets the scheduler put it, when some of its
//! pods are not pinned) with the images the run's pods will use — the workload image when
//! the trace attaches, iogen when it has `io_phase` or bare `io` events — and iogen's
//! container under the `Localhost` seccomp profile the run gives iogen pods. iogen's
//! container runs `iogen --version` and exits; the pod is deleted (grace 0) as soon as every
//! container has run, without waiting for it to go.
//!
//! A pull that fails ends the run's `prepare` with the image's name and the kubelet's
//! reason (class `image_pull_failed`), a missing profile with `seccomp_profile_missing`
//! (the classes of [`crate::pods::verdict`]), a node that has no room with `unschedulable` after the
//! failure grace — before the trace's first operation, instead of in its first attach or
//! `io_phase`. A stop (Ctrl-C) meanwhile ends it at once (`cancelled`). The run's namespace,
//! when the run made one, is removed again. It runs only
//! for a run whose trace was scanned by `KubeProvider::preflight` (the CLI's runs),
//! and `--no-pull-check` skips it. What it costs is one pod start per target
//! (docs/kubernetes.md, "Pre-flight").

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::{Container, Pod, PodSecurityContext, PodSpec, SeccompProfile};
use kube::ResourceExt;
use kube::api::Api;
use replay::{Ledger, OpCtx, ProviderError, RunInfo, SnapshotTimeline};
use trace_format::OpType;

use crate::config::KubeConfig;
use crate::context::{Kube, PullCheck, io_err};
use crate::kube::objects::{self, k8s_name};
use crate::kube::request::delete_params;
use crate::pods::verdict::{POD_WARNINGS, PodKind};
use crate::preflight::uses::TraceUses;

impl PullCheck {
    /// What a trace with `uses` needs checked under `config`; None when its run starts no pod.
    pub fn plan(config: &KubeConfig, uses: &TraceUses) -> Option<Self> {
        let mut images = BTreeMap::new();
        if uses.ops.contains(&OpType::Attach) || uses.header_workloads {
            images.insert("workload".to_owned(), config.pause_image.clone());
        }
        if (uses.ops.contains(&OpType::IoPhase) && config.io_exec == crate::config::IoExec::Pod)
            || uses.ops.contains(&OpType::Io)
        {
            images.insert("iogen".to_owned(), config.iogen_image.clone());
        }
        if images.is_empty() {
            return None;
        }
        let mut targets: Vec<Option<String>> = uses
            .nodes
            .iter()
            .filter(|(_, (_, placed))| *placed)
            .map(|(n, _)| Some(n.clone()))
            .collect();
        if uses.unpinned || targets.is_empty() {
            targets.push(None);
        }
        Some(Self { images, targets })
    }
}

/// The pull check's pod number `i` on `node` (None: wherever the scheduler puts it within the
/// run's node selection and tolerations), as the run's own pods would run there.
pub fn pull_check_pod(
    config: &KubeConfig,
    check: &PullCheck,
    run_id: &str,
    namespace: &str,
    i: usize,
    node: Option<&str>,
) -> Pod {
    // The run id in the name: runs sharing a namespace (`--namespace`, the parallel drivers of
    // a split trace) check at the same time.
    let name = k8s_name(&format!("pull-check-{run_id}-{i}"));
    let mut meta = objects::meta(&name, namespace, run_id, None);
    meta.labels
        .get_or_insert_with(Default::default)
        .insert("cnsreplay.io/role".into(), "pull-check".into());
    let opts = &config.pod;
    let containers = check
        .images
        .iter()
        .map(|(c, image)| {
            let mut sc = objects::restricted_container();
            let iogen = c == "iogen";
            if iogen && let Some(p) = &opts.iogen_seccomp_profile {
                sc.seccomp_profile = Some(SeccompProfile {
                    type_: "Localhost".into(),
                    localhost_profile: Some(p.clone()),
                });
            }
            Container {
                name: c.clone(),
                image: Some(image.clone()),
                args: iogen.then(|| vec!["--version".to_owned()]),
                security_context: Some(sc),
                ..Container::default()
            }
        })
        .collect();
    Pod {
        metadata: meta,
        spec: Some(PodSpec {
            affinity: node.map(objects::on_node),
            restart_policy: Some("Never".into()),
            termination_grace_period_seconds: Some(0),
            automount_service_account_token: Some(false),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                run_as_user: Some(opts.run_as_user),
                run_as_group: Some(opts.run_as_user),
                seccomp_profile: Some(SeccompProfile {
                    type_: "RuntimeDefault".into(),
                    localhost_profile: None,
                }),
                ..PodSecurityContext::default()
            }),
            node_selector: (!opts.node_selector.is_empty()).then(|| opts.node_selector.clone()),
            tolerations: (!opts.tolerations.is_empty()).then(|| opts.tolerations.clone()),
            image_pull_secrets: objects::pull_secrets(opts),
            containers,
            ..PodSpec::default()
        }),
        status: None,
    }
}

/// Whether every container of the pod has run (is running, or ran and ended): its image was
/// pulled and its container created under its seccomp profile.
fn all_ran(o: &Pod) -> bool {
    let Some(st) = o.status.as_ref() else {
        return false;
    };
    let want = st.container_statuses.as_ref().map_or(0, Vec::len);
    want > 0
        && st.container_statuses.iter().flatten().all(|c| {
            c.state
                .as_ref()
                .is_some_and(|s| s.running.is_some() || s.terminated.is_some())
        })
}

impl Kube {
    /// Runs the pull check ([`PullCheck`]) in the run's namespace: every target at once.
    /// `Err` names the node, the image and the kubelet's reason of the first that failed.
    pub(crate) async fn pull_check(
        &self,
        run: &RunInfo,
        check: &PullCheck,
    ) -> Result<(), ProviderError> {
        let ledger = Arc::new(Ledger::open(&run.run_dir).map_err(io_err)?);
        let checks = check.targets.iter().enumerate().map(|(i, node)| {
            let ledger = ledger.clone();
            async move {
                self.pull_check_one(run, check, &ledger, i, node.as_deref())
                    .await
                    .map_err(|e| {
                        ProviderError::new(
                            &e.class,
                            format!(
                                "pre-flight pull check ({}; --no-pull-check skips it): {}",
                                node.as_deref().map_or_else(
                                    || "a node the scheduler picked".to_owned(),
                                    |n| format!("node {n}")
                                ),
                                e.message
                            ),
                        )
                    })
            }
        });
        let results = futures::future::join_all(checks).await;
        results
            .into_iter()
            .collect::<Result<Vec<()>, _>>()
            .map(drop)
    }

    async fn pull_check_one(
        &self,
        run: &RunInfo,
        check: &PullCheck,
        ledger: &Arc<Ledger>,
        i: usize,
        node: Option<&str>,
    ) -> Result<(), ProviderError> {
        let ns = self.ns()?;
        let w = self.watches()?;
        let mut ctx = OpCtx::new(
            Instant::now(),
            0,
            ledger.clone(),
            Arc::new(SnapshotTimeline::default()),
        );
        // A stop (Ctrl-C) ends the wait at once (class `cancelled`); the pod is deleted below.
        if let Some(stop) = &run.stop {
            ctx = ctx.with_stop(stop.clone());
        }
        let pod = pull_check_pod(&self.config, check, &run.run_id, ns, i, node);
        let name = pod.name_any();
        let created = self.create(&ctx, "pod", &pod, Some(&w.pod)).await?;
        let uid = created.uid().unwrap_or_default();
        let ran = self.pod_wait(&ctx, &name, &uid, PodKind::Job, |o| {
            all_ran(o).then_some(())
        });
        let limit = self.config.op_timeout(OpType::Attach);
        let r = match tokio::time::timeout(
            limit,
            self.or_warning(&ctx, ran, &[(&name, &uid)], POD_WARNINGS),
        )
        .await
        {
            Ok((r, _)) => r,
            Err(_) => Err(ProviderError::new(
                "timeout",
                format!("pod {ns}/{name} did not start within {limit:?}"),
            )),
        };
        // Gone either way, not waited for (grace 0: nothing in it needs a shutdown).
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        self.limiter.acquire().await;
        match api.delete(&name, &delete_params(Some(uid), Some(0))).await {
            Ok(_) => {
                let id = format!("{ns}/{name}");
                crate::context::blocking(|| ledger.release("pod", &id)).map_err(io_err)?;
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {
                let id = format!("{ns}/{name}");
                crate::context::blocking(|| ledger.release("pod", &id)).map_err(io_err)?;
            }
            Err(e) => tracing::warn!(pod = %name, error = %e, "deleting the pull check's pod"),
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The images follow the trace's ops, one pod per pinned node plus one for unpinned pods.
    #[test]
    fn the_check_covers_the_images_and_nodes_the_run_uses() {
        let config = KubeConfig::default();
        let mut uses = TraceUses::default();
        assert_eq!(PullCheck::plan(&config, &uses), None, "no pods, no check");
        uses.ops.insert(OpType::CreateVolume);
        uses.ops.insert(OpType::Attach);
        let c = PullCheck::plan(&config, &uses).unwrap();
        assert_eq!(
            c.images.values().collect::<Vec<_>>(),
            vec![&config.pause_image]
        );
        assert_eq!(c.targets, vec![None]);
        uses.ops.insert(OpType::IoPhase);
        uses.nodes.insert("n1".into(), ("event 2".into(), true));
        uses.nodes
            .insert("n2".into(), ("event 3 (drain)".into(), false));
        let c = PullCheck::plan(&config, &uses).unwrap();
        assert_eq!(c.images.len(), 2);
        assert_eq!(
            c.targets,
            vec![Some("n1".to_owned())],
            "drained nodes get no pod"
        );
        uses.unpinned = true;
        let c = PullCheck::plan(&config, &uses).unwrap();
        assert_eq!(c.targets, vec![Some("n1".to_owned()), None]);
    }
}
