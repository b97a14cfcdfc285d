//! Shared watches: ONE reflector per resource kind, started in `prepare`, and waiters keyed by
//! a per-kind key (the object name; the PersistentVolume name for VolumeAttachments) that are
//! woken only when an object with their key changes. An operation never opens its own watch
//! and never polls: it registers, checks its condition against the reflector's cache, and
//! sleeps until its key changes. Thousands of objects in flight therefore cost one watch
//! connection per kind and a map entry each.
//!
//! Timing: the watch task takes `Instant::now()` as soon as the reflector yields an event and
//! hands it to the waiters with the notification (and keeps the latest per key), so a wait
//! returns the instant the satisfying event *arrived*, not when the waiting task got to run —
//! on a loaded machine the wake-up delay is milliseconds. Phases and completion use it.
//!
//! Memory: PersistentVolumes and VolumeAttachments carry no run label, so their watches are
//! cluster-wide; a [`KeepFn`] decides, as each event arrives and before it reaches the cache,
//! whether the object is the run's. Foreign objects are decoded one list page or one
//! event at a time and dropped; neither the cache nor the waiter map holds them. The
//! filter is local (no request), so an event of the run's objects is stamped and cached
//! exactly as without it. Metadata-only watches were not used: a VolumeAttachment's key
//! (its PV) and its attach status are in its spec and status, so each event would need a
//! `get` before its waiters could check it.

use std::collections::{HashMap, VecDeque};
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::kube::limiter::Limiter;

/// Computes the waiter key of an object.
pub(crate) type KeyFn<K> = fn(&K) -> Option<String>;

/// Cuts an object down to what the waits read before it is cached ([`keep_all`]: nothing).
pub(crate) type TrimFn<K> = fn(&mut K);

/// A [`TrimFn`] that keeps the whole object.
pub(crate) fn keep_all<K>(_: &mut K) {}

/// Whether an object is the run's (cached, its waiters woken) or foreign (dropped on
/// arrival); the flag says the event is a deletion. Runs on the watch task, on every event
/// of the kind.
pub(crate) type KeepFn<K> = Arc<dyn Fn(&K, bool) -> bool + Send + Sync>;

/// One kind's reflector and its waiters.
pub(crate) struct Watch<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    store: Store<K>,
    waiters: Mutex<Waiters>,
    key: KeyFn<K>,
}

/// When events of a key's current object arrived.
#[derive(Clone, PartialEq)]
struct Seen {
    uid: Option<String>,
    first: Instant,
    last: Instant,
}

/// How long the arrival instant of a deleted object's last event is kept (for a waiter that
/// registers after the deletion arrived).
const KEEP_DELETED: Duration = Duration::from_secs(60);

/// How long a watch may take to list its kind before the start fails.
const LIST_TIMEOUT: Duration = Duration::from_secs(30);

/// Waiters per key, and the arrival instants of the events per key.
#[derive(Default)]
struct Waiters {
    tx: HashMap<String, watch::Sender<Option<Instant>>>,
    last: HashMap<String, Seen>,
    /// Keys whose object was deleted, oldest first: pruned from `last` after
    /// [`KEEP_DELETED`].
    deleted: VecDeque<(Instant, String)>,
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
        trim: TrimFn<K>,
        limiter: Arc<Limiter>,
    ) -> Result<Arc<Self>, String> {
        Self::start_filtered(api, config, key, trim, None, limiter).await
    }

    /// [`Self::start`], caching only the objects `keep` accepts (all when None). An object
    /// that was kept and no longer is leaves the cache as if deleted.
    pub(crate) async fn start_filtered(
        api: Api<K>,
        config: watcher::Config,
        key: KeyFn<K>,
        trim: TrimFn<K>,
        keep: Option<KeepFn<K>>,
        limiter: Arc<Limiter>,
    ) -> Result<Arc<Self>, String> {
        let (store, writer) = reflector::store::<K>();
        let this = Arc::new(Self {
            store,
            waiters: Mutex::new(Waiters::default()),
            key,
        });
        let me = this.clone();
        let cache = this.store.clone();
        // The cache keeps what the waits read: foreign objects not at all (`keep`), of the
        // run's the managed fields and kubectl's last-applied copy are dropped, then what
        // `trim` cuts (a pod's spec but its node).
        let stream = reflector::reflector(
            writer,
            watcher(api, config)
                .default_backoff()
                .filter_map(move |ev| std::future::ready(filter(ev, keep.as_ref(), &cache)))
                .modify(move |o| {
                    o.managed_fields_mut().clear();
                    o.annotations_mut()
                        .remove("kubectl.kubernetes.io/last-applied-configuration");
                    trim(o);
                }),
        );
        // Errors before the first list completes are the start's failure (a missing CRD, a
        // refused list), reported by its error below: they are not restarts of a running
        // watch and must not raise the "observed late" notice.
        let listed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let first_error: Arc<Mutex<Option<String>>> = Arc::default();
        let (listed2, first_error2) = (listed.clone(), first_error.clone());
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(ev) = stream.next().await {
                let at = Instant::now();
                match ev {
                    Ok(watcher::Event::Apply(o)) => me.notify(&o, at, false),
                    Ok(watcher::Event::Delete(o)) => me.notify(&o, at, true),
                    Ok(watcher::Event::InitDone) => {
                        listed2.store(true, Relaxed);
                        me.notify_all(at);
                    }
                    Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => {}
                    Err(e) if !listed2.load(Relaxed) => {
                        tracing::debug!(
                            "watch of {} not listed yet: {e}",
                            K::kind(&K::DynamicType::default())
                        );
                        *first_error2.lock().unwrap_or_else(PoisonError::into_inner) =
                            Some(e.to_string());
                    }
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
        let ready = tokio::time::timeout(LIST_TIMEOUT, this.store.wait_until_ready()).await;
        let failed = match ready {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some(format!(
                "the {} watch did not list within {} s ({}; RBAC: list and watch needed)",
                K::kind(&K::DynamicType::default()),
                LIST_TIMEOUT.as_secs(),
                first_error
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take()
                    .unwrap_or_else(|| "no answer".to_owned())
            )),
        };
        if let Some(e) = failed {
            // A watch that never listed must not keep retrying (and logging) for the rest of
            // the run.
            task.abort();
            return Err(e);
        }
        Ok(this)
    }

    fn notify(&self, o: &K, at: Instant, deleted: bool) {
        let Some(k) = (self.key)(o) else { return };
        let mut w = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(tx) = w.tx.get(&k) {
            tx.send_replace(Some(at));
        }
        while let Some((t, _)) = w.deleted.front()
            && at.saturating_duration_since(*t) > KEEP_DELETED
        {
            let Some((t, old)) = w.deleted.pop_front() else {
                break;
            };
            if w.last.get(&old).is_some_and(|s| s.last == t) {
                w.last.remove(&old);
            }
        }
        if deleted {
            w.deleted.push_back((at, k.clone()));
        }
        let uid = o.meta().uid.clone();
        match w.last.get_mut(&k) {
            Some(s) if s.uid == uid => s.last = at,
            _ => {
                w.last.insert(
                    k,
                    Seen {
                        uid,
                        first: at,
                        last: at,
                    },
                );
            }
        }
    }

    /// When the first event of the object with key `key` and UID `uid` arrived (for a
    /// create: its ADDED event, which may be seen before the create's response is).
    pub(crate) fn first_seen(&self, key: &str, uid: &str) -> Option<Instant> {
        let w = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
        w.last
            .get(key)
            .filter(|s| s.uid.as_deref() == Some(uid))
            .map(|s| s.first)
    }

    fn notify_all(&self, at: Instant) {
        let w = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
        for tx in w.tx.values() {
            tx.send_replace(Some(at));
        }
    }

    /// The reflector's cache.
    pub(crate) fn store(&self) -> &Store<K> {
        &self.store
    }

    /// Waits until `check` (run against the cache) returns `Some`, re-checking only when an
    /// object with key `key` changed (or the watch relisted). Returns the value and the
    /// instant the event that satisfied it arrived (when it was satisfied at once: the
    /// arrival of the key's latest event, or now when none is known). Cancel-safe: a dropped
    /// wait removes its registration.
    pub(crate) async fn wait_for<T>(
        &self,
        key: &str,
        mut check: impl FnMut(&Store<K>) -> Option<T>,
    ) -> (T, Instant) {
        let rx = {
            let mut w = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
            w.tx.entry(key.to_owned())
                .or_insert_with(|| watch::channel(None).0)
                .subscribe()
        };
        let mut reg = Registration {
            waiters: &self.waiters,
            key,
            rx: Some(rx),
        };
        let mut arrived = None;
        loop {
            if let Some(t) = check(&self.store) {
                let at = arrived.or_else(|| {
                    let w = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
                    w.last.get(key).map(|s| s.last)
                });
                return (t, at.unwrap_or_else(Instant::now));
            }
            let Some(rx) = reg.rx.as_mut() else {
                return std::future::pending().await;
            };
            if rx.changed().await.is_err() {
                // The sender lives in the map while a receiver exists; not reachable.
                return std::future::pending().await;
            }
            arrived = *rx.borrow_and_update();
        }
    }
}

/// Drops the events of objects `keep` refuses, turning an update of a cached object that is
/// no longer kept into its deletion.
fn filter<K>(
    ev: Result<watcher::Event<K>, watcher::Error>,
    keep: Option<&KeepFn<K>>,
    cache: &Store<K>,
) -> Option<Result<watcher::Event<K>, watcher::Error>>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone + Default,
{
    let Some(keep) = keep else { return Some(ev) };
    let cached = |o: &K| cache.get(&ObjectRef::from_obj(o)).is_some();
    match ev {
        Ok(watcher::Event::InitApply(o)) => {
            keep(&o, false).then_some(Ok(watcher::Event::InitApply(o)))
        }
        Ok(watcher::Event::Apply(o)) => {
            if keep(&o, false) {
                Some(Ok(watcher::Event::Apply(o)))
            } else {
                cached(&o).then_some(Ok(watcher::Event::Delete(o)))
            }
        }
        Ok(watcher::Event::Delete(o)) => {
            (keep(&o, true) || cached(&o)).then_some(Ok(watcher::Event::Delete(o)))
        }
        other => Some(other),
    }
}

/// A waiter's registration; dropping it unregisters the key when it was the last waiter.
struct Registration<'a> {
    waiters: &'a Mutex<Waiters>,
    key: &'a str,
    rx: Option<watch::Receiver<Option<Instant>>>,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        drop(self.rx.take());
        let mut w = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
        if w.tx
            .get(self.key)
            .is_some_and(|tx| tx.receiver_count() == 0)
        {
            w.tx.remove(self.key);
        }
    }
}
