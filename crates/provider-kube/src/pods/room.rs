//! Waiting for room on a node: the CSINode change log, started by the first attach that
//! waits for room (`attach.wait_for_room`).

use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt as _;
use k8s_openapi::api::storage::v1::CSINode;
use kube::api::Api;
use kube::runtime::{WatchStreamExt as _, watcher};

use crate::context::Kube;
use crate::kube::room::CsiNodeLog;

impl Kube {
    /// The CSINode log, started on first use (its first list done before it returns); None
    /// when CSINodes cannot be watched (said once as a notice).
    pub(crate) async fn csinode_log(&self) -> Option<Arc<CsiNodeLog>> {
        let cell = self
            .csinodes
            .get_or_init(|| async {
                let log = Arc::new(CsiNodeLog::default());
                let api: Api<CSINode> = Api::all(self.client.clone());
                let mut stream = watcher(api, watcher::Config::default())
                    .default_backoff()
                    .boxed();
                // The first list, to the end, before anything is judged against it.
                loop {
                    match stream.next().await {
                        Some(Ok(watcher::Event::InitApply(n))) => log.saw(&n, Instant::now()),
                        Some(Ok(watcher::Event::InitDone)) => break,
                        Some(Ok(_)) => {}
                        Some(Err(e)) => {
                            let msg = format!(
                                "kube: no CSINode watch ({e}); an attach that waits for room \
                                 has no `csinode-updated` phase"
                            );
                            tracing::warn!("{msg}");
                            self.state().notices.push(msg);
                            return None;
                        }
                        None => return None,
                    }
                }
                let l = log.clone();
                tokio::spawn(async move {
                    while let Some(ev) = stream.next().await {
                        if let Ok(watcher::Event::Apply(n) | watcher::Event::InitApply(n)) = ev {
                            l.saw(&n, Instant::now());
                        }
                    }
                });
                Some(log)
            })
            .await;
        cell.clone()
    }
}
