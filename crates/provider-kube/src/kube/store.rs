//! What the shared watches hold: an object by name and UID, whether it is gone, and what the
//! pod watch keeps of a pod.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};
use replay::ProviderError;

pub(crate) fn get<K>(s: &Store<K>, ns: &str, name: &str, uid: &str) -> Option<Arc<K>>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    s.get(&ObjectRef::new(name).within(ns))
        .filter(|o| o.meta().uid.as_deref() == Some(uid))
}

pub(crate) fn gone<K>(s: &Store<K>, ns: Option<&str>, name: &str, uid: &str) -> bool
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    let r = ObjectRef::new(name);
    let r = match ns {
        Some(ns) => r.within(ns),
        None => r,
    };
    s.get(&r)
        .is_none_or(|o| o.meta().uid.as_deref() != Some(uid))
}

pub(crate) fn missing(what: &str, name: &str) -> ProviderError {
    ProviderError::new(
        "not_found",
        format!("{what} {name:?} does not exist in this run"),
    )
}

/// What the pod watch caches of a pod's spec: its node (the waits read nothing else of it).
pub(crate) fn pod_node_only(p: &mut Pod) {
    if let Some(s) = p.spec.as_mut() {
        *s = PodSpec {
            node_name: s.node_name.take(),
            ..PodSpec::default()
        };
    }
}
