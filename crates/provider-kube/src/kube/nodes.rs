//! What the run writes on nodes: the cordon annotation and the out-of-service taint (set by
//! `force_detach`, taken off by cleanup).

use k8s_openapi::api::core::v1::{Node, Taint};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

/// Annotation on a node the run cordoned: the run id (cleanup without the ledger finds the
/// node by it, and uncordons only a node whose annotation names the run).
pub const CORDON_ANNOTATION: &str = "cnsreplay.io/cordoned-by";

/// The taint of an out-of-service node.
pub const OUT_OF_SERVICE: &str = "node.kubernetes.io/out-of-service";
/// Annotation on a node the run tainted out of service: the run id.
pub const OUT_OF_SERVICE_ANNOTATION: &str = "cnsreplay.io/out-of-service-by";
fn out_of_service() -> Taint {
    Taint {
        key: OUT_OF_SERVICE.into(),
        value: Some("nodeshutdown".into()),
        effect: "NoExecute".into(),
        time_added: None,
    }
}

/// `n`'s taints with (`add`) or without the out-of-service taint, others kept.
pub(crate) fn taints_with(n: &Node, add: bool) -> Vec<Taint> {
    let mut t: Vec<Taint> = n
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|t| t.key != OUT_OF_SERVICE)
        .collect();
    if add {
        t.push(out_of_service());
    }
    t
}

/// Puts the out-of-service taint on node `name` (`add`, annotating it with the run) or takes
/// it and the annotation off, keeping every other taint. The taints are a list the API
/// replaces whole, so the patch carries the node's `resourceVersion`, and a conflict (another
/// writer in between: the node lifecycle controller's own taints) is retried on a fresh read.
pub(crate) async fn patch_taint(
    limiter: &crate::kube::limiter::Limiter,
    api: &Api<Node>,
    name: &str,
    add: Option<&str>,
) -> Result<Node, kube::Error> {
    let mut tries = 0;
    loop {
        limiter.acquire().await;
        let n = api.get(name).await?;
        let patch = json!({
            "metadata": {
                "annotations": {OUT_OF_SERVICE_ANNOTATION: add},
                "resourceVersion": n.resource_version(),
            },
            "spec": {"taints": taints_with(&n, add.is_some())},
        });
        limiter.acquire().await;
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Err(kube::Error::Api(e)) if e.code == 409 && tries < 5 => tries += 1,
            r => return r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NodeSpec;

    #[test]
    fn the_taint_is_added_once_and_removed_alone() {
        let other = Taint {
            key: "dedicated".into(),
            value: Some("db".into()),
            effect: "NoSchedule".into(),
            time_added: None,
        };
        let mut n = Node {
            spec: Some(NodeSpec {
                taints: Some(vec![other.clone()]),
                ..NodeSpec::default()
            }),
            ..Node::default()
        };
        let with = taints_with(&n, true);
        assert_eq!(with, vec![other.clone(), out_of_service()]);
        n.spec.as_mut().unwrap().taints = Some(with);
        assert_eq!(taints_with(&n, true).len(), 2);
        assert_eq!(taints_with(&n, false), vec![other]);
    }
}
