//! [`KubeProvider`]: the `Provider` impl, the provider's runtime, each operation spawned on it
//! under its timeout and tracked while in flight.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use replay::ledger::LedgerEntry;
use replay::provider::CleanupReport;
use replay::{ClientThrottling, OpCtx, Provider, ProviderError, RunInfo};
use trace_format::{Event, OpType};

use crate::config::{KubeConfig, KubeError, client_for};
use crate::context::{Kube, Pending, PullCheck, State};
use crate::kube::limiter::{ClientStats, Limiter};
use crate::kube::stamp;
use crate::preflight::uses::TraceUses;

/// The kube provider.
pub struct KubeProvider {
    inner: Arc<Kube>,
    /// The provider's own runtime: the client's connections, the watches and every operation
    /// run here (the engine's runtime has no I/O driver), and it serves the blocking
    /// `prepare`/`cleanup`.
    rt: tokio::runtime::Runtime,
}

impl std::fmt::Debug for KubeProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeProvider")
            .field("config", &self.inner.config)
            .field("namespace", &self.inner.ns.get())
            .field("watches", &self.inner.watches.get())
            .finish_non_exhaustive()
    }
}

impl KubeProvider {
    /// Builds the provider (reads the kubeconfig; contacts nothing yet).
    pub fn new(config: KubeConfig) -> Result<Self, KubeError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .thread_name("cnsreplay-kube")
            .build()?;
        let client = rt.block_on(client_for(&config))?;
        let inner = Arc::new(Kube {
            limiter: Arc::new(Limiter::new(config.qps, config.burst)),
            config,
            client,
            run: OnceLock::new(),
            ns: OnceLock::new(),
            watches: OnceLock::new(),
            environment: OnceLock::new(),
            state: Mutex::new(State::default()),
            baseline: Mutex::new(None),
            inflight: Mutex::new(BTreeMap::new()),
            claim_node_changed: tokio::sync::Notify::new(),
            stop: OnceLock::new(),
            retried: Mutex::new(BTreeMap::new()),
            pull_check: OnceLock::new(),
            csinodes: tokio::sync::OnceCell::new(),
            workload_turns: replay::turns::Turns::default(),
        });
        Ok(Self { inner, rt })
    }

    /// Rebuilds the provider from the configuration a manifest recorded.
    pub fn from_config(v: &serde_json::Value) -> Result<Self, KubeError> {
        Self::new(serde_json::from_value(v.clone())?)
    }

    /// The configuration.
    pub fn kube_config(&self) -> &KubeConfig {
        &self.inner.config
    }

    /// Throttling counters so far.
    pub fn client_stats(&self) -> ClientStats {
        self.inner.limiter.stats()
    }

    /// Notices about throttling for the run summary (empty when there was none).
    pub fn throttle_notices(&self) -> Vec<String> {
        self.client_stats()
            .notices(self.inner.config.qps, self.inner.config.burst)
    }

    /// A notice of the failures the cluster retried during the run's operations (none when
    /// there were none): they were not failures of those operations, and their records list
    /// them under `retries`.
    pub fn retry_notices(&self) -> Vec<String> {
        let r = self
            .inner
            .retried
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if r.is_empty() {
            return Vec::new();
        }
        let each: Vec<String> = r
            .iter()
            .map(|(reason, (ops, n))| {
                format!(
                    "{reason} {n} time{} in {ops} operation{}",
                    if *n == 1 { "" } else { "s" },
                    if *ops == 1 { "" } else { "s" }
                )
            })
            .collect();
        vec![format!(
            "kube: the cluster reported failures it retried by itself: {}; not counted as \
             failed operations (each record lists them under `retries`)",
            each.join(", ")
        )]
    }

    /// The namespace of the run (after `prepare`).
    pub fn namespace(&self) -> Option<&str> {
        self.inner.ns.get().map(String::as_str)
    }

    /// The names of the PersistentVolumes and VolumeAttachments the provider's watches hold
    /// now (after `prepare`; empty before): the run's, never the rest of the cluster's.
    pub fn cached_volume_objects(&self) -> (Vec<String>, Vec<String>) {
        let Some(w) = self.inner.watches.get() else {
            return (Vec::new(), Vec::new());
        };
        let names = |v: Vec<Option<String>>| {
            let mut v: Vec<String> = v.into_iter().flatten().collect();
            v.sort();
            v
        };
        (
            names(
                w.pv.store()
                    .state()
                    .iter()
                    .map(|o| o.metadata.name.clone())
                    .collect(),
            ),
            names(
                w.va.store()
                    .state()
                    .iter()
                    .map(|o| o.metadata.name.clone())
                    .collect(),
            ),
        )
    }

    /// The cluster as captured by `prepare` (server version, nodes, classes, drivers).
    pub fn environment(&self) -> serde_json::Value {
        self.inner.environment()
    }

    /// Checks before the clock starts that every StorageClass, VolumeSnapshotClass, node and
    /// namespace `trace` will use (after the header's defaults and this configuration)
    /// exists and is usable; the error names each missing one, where the trace uses it and
    /// what the cluster has. Also plans the pull check `prepare` runs once the run's
    /// namespace exists (unless `pull_check` is off; `preflight/pull.rs`).
    pub fn preflight(&self, trace: &std::path::Path) -> Result<TraceUses, KubeError> {
        let uses = TraceUses::scan(&self.inner.config, trace).map_err(KubeError::Trace)?;
        self.rt
            .block_on(self.inner.preflight(&uses))
            .map_err(KubeError::Preflight)?;
        if self.inner.config.pull_check
            && let Some(c) = PullCheck::plan(&self.inner.config, &uses)
        {
            let _ = self.inner.pull_check.set(c);
        }
        Ok(uses)
    }

    /// The operations in flight and what each waits for (for a deadline's report).
    pub fn pending(&self) -> Vec<Pending> {
        self.inner
            .inflight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }
}

impl Provider for KubeProvider {
    fn name(&self) -> &'static str {
        "kube"
    }

    fn config(&self) -> serde_json::Value {
        serde_json::to_value(&self.inner.config).unwrap_or_default()
    }

    fn prepare(&self, run: &RunInfo) -> Result<Vec<String>, ProviderError> {
        let _ = self.inner.run.set(run.clone());
        self.rt.block_on(self.inner.prepare_async(run))
    }

    fn environment(&self) -> serde_json::Value {
        KubeProvider::environment(self)
    }

    fn before_clock(&self) {
        if self.inner.config.csi_metrics.is_empty() && !self.inner.config.apiserver_metrics {
            return;
        }
        let s = self.inner.scrape(&self.rt);
        *self
            .inner
            .baseline
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(s);
    }

    fn cluster_timing(&self) -> Option<replay::cluster::ClusterTiming> {
        let before = self
            .inner
            .baseline
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()?;
        let after = self.inner.scrape(&self.rt);
        Some(crate::kube::metrics::timing(&before, &after))
    }

    /// The client rate limiter's waits: they go into the run's verdict (any throttled
    /// request makes the run `engine-bound` by default).
    fn client_throttling(&self) -> Vec<ClientThrottling> {
        let s = self.client_stats();
        let c = &self.inner.config;
        vec![ClientThrottling {
            limiter: format!(
                "kube client rate limiter (--kube-qps {}, --kube-burst {})",
                c.qps, c.burst
            ),
            requests: s.requests,
            throttled: s.throttled_requests,
            waited_ns: (s.throttled_seconds * 1e9) as u64,
            max_wait_ns: (s.max_wait_seconds * 1e9) as u64,
        }]
    }

    fn open_io_stream(
        &self,
        volume: &trace_format::Name,
    ) -> Result<Option<Box<dyn replay::IoStream>>, ProviderError> {
        self.rt
            .block_on(crate::ops::stream::open(self.inner.clone(), volume.clone()))
    }

    /// The volumes' pods start together; a stop deletes the ones still starting.
    fn open_io_streams(
        &self,
        volumes: &[trace_format::Name],
        stop: &std::sync::atomic::AtomicBool,
    ) -> Vec<Result<Option<Box<dyn replay::IoStream>>, ProviderError>> {
        self.rt.block_on(crate::ops::stream::open_all(
            self.inner.clone(),
            volumes,
            stop,
        ))
    }

    fn finish_notices(&self) -> Vec<String> {
        let mut notices = self.throttle_notices();
        notices.extend(self.retry_notices());
        notices.extend(self.inner.state().notices.clone());
        for n in &notices {
            tracing::warn!("{n}");
        }
        notices
    }

    async fn execute(&self, ev: Arc<Event>, ctx: Arc<OpCtx>) -> Result<(), ProviderError> {
        // The client's connections are made where its futures are polled, and the engine's
        // runtime has no I/O driver: run the operation on the provider's runtime. Dropping
        // the returned future (timeout, cancel) aborts it. The task is spawned by a plain
        // function so that this future holds only its handle (see `spawn_op`).
        let _inflight = Inflight::new(&self.inner, ctx.event_id, ev.op.op_type());
        let mut task = self.spawn_op(ev, ctx);
        match (&mut task.0).await {
            Ok(r) => r,
            Err(e) => Err(ProviderError::new("panic", e.to_string())),
        }
    }

    fn cleanup(&self, run: &RunInfo, leftovers: &[LedgerEntry]) -> CleanupReport {
        self.rt
            .block_on(crate::cleanup::cleanup(&self.inner, run, leftovers))
    }
}

impl KubeProvider {
    /// Cleans up run `run_id` without its ledger: finds its objects on the cluster by its run
    /// label (in the configured namespace when there is one, else in all, with the run-owned
    /// namespaces; and the nodes it cordoned by their annotation) and removes them as a ledger
    /// cleanup would, each by the UID it was found with. Returns what was found and the report.
    pub fn cleanup_run_id(
        &self,
        run_id: &str,
    ) -> Result<(Vec<LedgerEntry>, CleanupReport), KubeError> {
        self.rt.block_on(async {
            let ns = self.inner.config.namespace.as_deref();
            let found = crate::cleanup::find_run_objects(&self.inner, run_id, ns)
                .await
                .map_err(KubeError::Cleanup)?;
            let report = crate::cleanup::remove_all(&self.inner, run_id, None, &found, false).await;
            Ok((found, report))
        })
    }

    /// Spawns one operation on the provider's runtime under its timeout.
    ///
    /// Memory per operation in flight is what a run waiting on a slow cluster holds tens of
    /// thousands of. `ops::execute` boxes each op's own future, so the task holds a few
    /// hundred bytes and its op's box; and this is a plain function because a future built
    /// in an `async` body and moved into another stays in that body's state as well:
    /// `execute`'s state held the spawned future a second time (19 KB an operation before,
    /// for any op).
    fn spawn_op(&self, ev: Arc<Event>, ctx: Arc<OpCtx>) -> AbortOnDrop<Result<(), ProviderError>> {
        let this = self.inner.clone();
        let id = ctx.event_id;
        let timeout = this.config.timeout(&ev);
        let op = ev.op.op_type();
        let call = crate::ops::execute(this.clone(), ev, ctx.clone());
        AbortOnDrop(self.rt.spawn(stamp::scope(async move {
            let r = tokio::time::timeout(timeout, call).await;
            this.count_retries(&ctx);
            match r {
                Ok(r) => r,
                Err(_) => Err(ProviderError::new(
                    "timeout",
                    format!(
                        "{op} did not complete within {timeout:?} (--timeout {op}=DUR); \
                         waiting for {}",
                        this.waiting_for(id)
                            .unwrap_or_else(|| "nothing recorded".into())
                    ),
                )),
            }
        })))
    }
}

/// An operation's entry in `Kube::inflight`, removed when it ends (or is dropped).
struct Inflight {
    kube: Arc<Kube>,
    id: u64,
}

impl Inflight {
    fn new(kube: &Arc<Kube>, id: u64, op: OpType) -> Self {
        kube.inflight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                id,
                Pending {
                    event_id: id,
                    op,
                    waiting_for: "its first API call".into(),
                },
            );
        Self {
            kube: kube.clone(),
            id,
        }
    }
}

impl Drop for Inflight {
    fn drop(&mut self) {
        self.kube
            .inflight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
    }
}

/// Aborts its task when dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);
impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
