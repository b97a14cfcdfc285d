//! Shared watches: ONE reflector per resource kind, started in `prepare`, and waiters keyed by
//! a per-kind key (the object name; the PersistentVolume name for VolumeAttachments) that are
//! woken only when an object with their key changes. An operation never opens its own watch
//! and never polls: it registers, checks its condition against the reflector's cache, and
//! sleeps until its key changes. Thousands of objects in flight therefore cost one watch
//! connection per kind and a map entry each.

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::limiter::Limiter;

/// Computes the waiter key of an object.
pub(crate) type KeyFn<K> = fn(&K) -> Option<String>;

/// One kind's reflector and its waiters.
pub(crate) struct Watch<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    store: Store<K>,
    waiters: Mutex<HashMap<String, watch::Sender<u64>>>,
    key: KeyFn<K>,
}

impl<K> Debug for Watch<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("cached", &self.store.len())
            .finish_non_exhaustive()
    }
}

impl<K> Watch<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Default + Send + Sync,
{
    /// Starts the reflector on the current runtime. Returns once its first list is cached.
    pub(crate) async fn start(
        api: Api<K>,
        config: watcher::Config,
        key: KeyFn<K>,
        limiter: Arc<Limiter>,
    ) -> Result<Arc<Self>, String> {
        let (store, writer) = reflector::store::<K>();
        let this = Arc::new(Self {
            store,
            waiters: Mutex::new(HashMap::new()),
            key,
        });
        let me = this.clone();
        let stream = reflector::reflector(writer, watcher(api, config).default_backoff());
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(ev) = stream.next().await {
                match ev {
                    Ok(watcher::Event::Apply(o) | watcher::Event::Delete(o)) => me.notify(&o),
                    Ok(watcher::Event::InitDone) => me.notify_all(),
                    Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => {}
                    Err(e) => {
                        limiter.watch_errors.fetch_add(1, Relaxed);
                        tracing::warn!(
                            "watch error ({}): {e}",
                            K::kind(&K::DynamicType::default())
                        );
                    }
                }
            }
        });
        tokio::time::timeout(
            std::time::Duration::from_secs(30),
            this.store.wait_until_ready(),
        )
        .await
        .map_err(|_| {
            format!(
                "the {} watch did not list within 30 s (RBAC: list and watch needed)",
                K::kind(&K::DynamicType::default())
            )
        })?
        .map_err(|e| e.to_string())?;
        Ok(this)
    }

    fn notify(&self, o: &K) {
        let Some(k) = (self.key)(o) else { return };
        let w = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(tx) = w.get(&k) {
            tx.send_modify(|v| *v += 1);
        }
    }

    fn notify_all(&self) {
        let w = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
        for tx in w.values() {
            tx.send_modify(|v| *v += 1);
        }
    }

    /// The reflector's cache.
    pub(crate) fn store(&self) -> &Store<K> {
        &self.store
    }

    /// Waits until `check` (run against the cache) returns `Some`, re-checking only when an
    /// object with key `key` changed (or the watch relisted). Cancel-safe: a dropped wait
    /// removes its registration.
    pub(crate) async fn wait_for<T>(
        &self,
        key: &str,
        mut check: impl FnMut(&Store<K>) -> Option<T>,
    ) -> T {
        let rx = {
            let mut w = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
            w.entry(key.to_owned())
                .or_insert_with(|| watch::channel(0).0)
                .subscribe()
        };
        let mut reg = Registration {
            waiters: &self.waiters,
            key,
            rx: Some(rx),
        };
        loop {
            if let Some(t) = check(&self.store) {
                return t;
            }
            let Some(rx) = reg.rx.as_mut() else {
                return std::future::pending().await;
            };
            if rx.changed().await.is_err() {
                // The sender lives in the map while a receiver exists; not reachable.
                return std::future::pending().await;
            }
        }
    }
}

/// A waiter's registration; dropping it unregisters the key when it was the last waiter.
struct Registration<'a> {
    waiters: &'a Mutex<HashMap<String, watch::Sender<u64>>>,
    key: &'a str,
    rx: Option<watch::Receiver<u64>>,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        drop(self.rx.take());
        let mut w = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
        if w.get(self.key).is_some_and(|tx| tx.receiver_count() == 0) {
            w.remove(self.key);
        }
    }
}
