//! Whether the API server serves an optional API (snapshots, group snapshots), from discovery.

use kube::Client;

/// Whether the API server serves a resource, from discovery.
#[derive(Debug)]
pub(crate) enum Served {
    Yes,
    /// Not served, and why (the group version is unknown, or lacks the resource).
    No(String),
    /// Discovery failed for another reason: try the resource and let its own error tell.
    Unknown,
}

/// Asks discovery whether `group_version` (e.g. `snapshot.storage.k8s.io/v1`) serves
/// `plural`. One GET; a 404 means the group version is not installed (no CRD).
pub(crate) async fn serves(client: &Client, group_version: &str, plural: &str) -> Served {
    match client.list_api_group_resources(group_version).await {
        Ok(list) if list.resources.iter().any(|r| r.name == plural) => Served::Yes,
        Ok(_) => Served::No(format!("{group_version} is served without {plural}")),
        Err(kube::Error::Api(st)) if st.code == 404 => {
            Served::No(format!("the API server does not serve {group_version}"))
        }
        Err(e) => {
            tracing::debug!("discovery of {group_version}: {e}; trying its watch");
            Served::Unknown
        }
    }
}
