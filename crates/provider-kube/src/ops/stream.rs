//! Bare `io` events on a cluster: one I/O pod per volume, fed its slice of the trace while
//! the run goes on (the engine's side is `replay::streams`).
//!
//! The pod runs `iogen replay - --at-origin --result-lines` on the raw block device of the
//! volume's PVC, on the node the provider pins pods to. Its slice travels **streamed over the
//! container's stdin** (the pod `attach` subresource), as a binary cnsreplay trace whose
//! header `origin` is the first request's intended instant on the wall clock. Why streamed,
//! not a ConfigMap or a file: a ConfigMap holds 1 MiB (≈ 70 000 requests of an MSR trace), a
//! file on a volume must be written whole before the run and needs a second volume; a stream
//! needs neither a pre-pass over the trace nor a size limit, uses only the API every cluster
//! serves, and gives the pod its requests exactly as the local provider's stream gets them:
//! [`LOOKAHEAD`] before they are due (longer than locally: the path is apiserver → kubelet →
//! runtime → pipe). A request that still arrives late is issued at once and its lateness
//! counted — the report says so rather than hiding it. Costs: each request crosses the
//! apiserver as one binary-encoded event (15 bytes on average on the decoding benchmark's
//! trace, docs/PERFORMANCE.md), and the node's wall clock must agree with
//! the driver's (NTP; on one host it is the same clock): a skew shifts every request equally.
//!
//! Results come back like an `io_phase`'s: through the pod's log, followed while it runs and
//! kept in `RUNDIR/io/stream-pods/<pod>.log`, ending in iogen's one-line result (counts, the
//! per-bucket intended/issued curve, CO-safe histograms). Ending a stream closes stdin with
//! the trace's end marker; the pod drains what it holds, reports and exits, and the stream
//! ends only once the pod and its VolumeAttachment are gone, so a workload attaching the
//! volume next finds it free. On a stop, requests not yet sent are dropped and counted as
//! never issued. The pod is in the ledger like every object of the run.

use std::io::Write;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::api::{Api, AttachParams};
use replay::{IoStream, IoStreamReport, OpCtx, ProviderError, Submit};
use tokio::io::AsyncWriteExt as _;
use tokio::sync::mpsc;
use trace_format::{Encoding, Event, Header, Io, Name, Op, TraceWriter};

use crate::context::{Kube, io_err};
use crate::kube::objects::{self, PodVolume, k8s_name};
use crate::pods::iogen::still_running;

/// How far ahead of its time a request is handed to the pod's stream.
pub const LOOKAHEAD: Duration = Duration::from_millis(250);

/// Requests queued in the driver for one pod at most (more waits in the engine's reader).
const QUEUE: usize = 1 << 16;

/// How long the feeder gathers requests before one write to the pod (fewer, larger
/// websocket frames; far inside the lookahead).
const GATHER: Duration = Duration::from_millis(2);

/// How long a pod may take to report after its stdin closed, beyond its last request's time.
const REPORT_WAIT: Duration = Duration::from_secs(120);

/// In-flight requests and largest request of a pod's stream.
const DEPTH: u32 = 128;
const MAX_LEN: u64 = 1 << 20;

static SEQ: AtomicU64 = AtomicU64::new(0);

/// Opens `volume`'s stream: its pod running, attached. `None` for a volume the provider did
/// not create (it takes the per-event path, which refuses it with a reason).
pub(crate) async fn open(
    p: Arc<Kube>,
    volume: Name,
) -> Result<Option<Box<dyn IoStream>>, ProviderError> {
    let Some(vol) = p.state().volumes.get(&volume).cloned() else {
        return Ok(None);
    };
    if !vol.block {
        return Err(ProviderError::new(
            "unsupported",
            format!(
                "bare io on volume {:?} needs a raw block volume in a pod (`volume_mode: \
                 block`, what the block-trace importers write); it is a file-system volume",
                volume.as_str()
            ),
        ));
    }
    let run = p.run()?;
    let ns = p.ns()?.to_owned();
    let seq = SEQ.fetch_add(1, Relaxed);
    let name = k8s_name(&format!("{}-stream-{seq}", volume.as_str()));
    let ledger = Arc::new(replay::Ledger::open(&run.run_dir).map_err(io_err)?);
    let ctx = OpCtx::new(
        Instant::now(),
        u64::MAX / 2 + seq,
        ledger.clone(),
        Arc::default(),
    );
    let pod = stream_pod(&p, &run.run_id, &ns, &name, &volume, &vol.pvc);
    let w = &p.watches()?.pod;
    let created = p.create(&ctx, "pod", &pod, Some(w)).await?;
    let uid = created.uid().unwrap_or_default();
    let node = p.config.node.clone();
    let stream = Stream {
        p: p.clone(),
        ctx,
        name: name.clone(),
        volume: volume.clone(),
        node,
    };
    // Until the pod runs, dropping this (a stop) deletes it.
    let mut guard = crate::pods::lifecycle::PodGuard::new(&p, &ns, &name, &uid);
    let timeout = p.config.op_timeout(trace_format::OpType::Attach);
    let t0 = Instant::now();
    let started =
        match tokio::time::timeout(timeout, p.wait_started(&stream.ctx, &name, &uid)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(mut e)) => {
                // Where the time went: after the pod's last milestone is the kubelet's own
                // verdict (its volume's attach and mount come before it).
                let last = stream
                    .ctx
                    .phases_so_far()
                    .last()
                    .map(|ph| {
                        let since = stream.ctx.now_ns().saturating_sub(ph.at);
                        format!(" ({:.1} s after {})", since as f64 / 1e9, ph.name)
                    })
                    .unwrap_or_default();
                e.message = format!(
                    "the I/O stream pod {ns}/{name} did not start after {:.1} s{last}: {}",
                    t0.elapsed().as_secs_f64(),
                    e.message
                );
                Err(e)
            }
            Err(_) => Err(ProviderError::new(
                "timeout",
                format!(
                    "the I/O stream pod {ns}/{name} did not start within {timeout:?} (--timeout \
                 attach=DUR)"
                ),
            )),
        };
    if let Err(e) = started {
        stream.remove().await;
        guard.disarm();
        return Err(e);
    }
    guard.disarm();
    let dir = run.run_dir.join("io").join("stream-pods");
    fs_err::create_dir_all(&dir).map_err(io_err)?;
    let api: Api<Pod> = Api::namespaced(p.client.clone(), &ns);
    let follow = {
        let (api, name, ns, uid, p) = (api.clone(), name.clone(), ns.clone(), uid, p.clone());
        let path = dir.join(format!("{name}.log"));
        tokio::spawn(async move {
            let running = || {
                p.watches()
                    .is_ok_and(|w| still_running(w.pod.store(), &ns, &name, &uid))
            };
            crate::pods::logs::follow(&api, &name, "iogen", &path, running, |_| {}).await
        })
    };
    let ap = AttachParams::default()
        .container("iogen")
        .stdin(true)
        .stdout(false)
        .stderr(false)
        .max_stdin_buf_size(64 << 10);
    let mut attached = match p.call(api.attach(&name, &ap)).await {
        Ok(a) => a,
        Err(e) => {
            // Most often the container has already exited: its log says why.
            let said = match tokio::time::timeout(Duration::from_secs(10), follow).await {
                Ok(Ok(Ok(f))) => f.text.lines().rev().take(3).collect::<Vec<_>>().join(" / "),
                _ => String::new(),
            };
            stream.remove().await;
            return Err(ProviderError::new(
                "io_failed",
                format!("attaching to the I/O stream pod {ns}/{name}: {e}; its log: {said:?}"),
            ));
        }
    };
    let Some(stdin) = attached.stdin() else {
        follow.abort();
        stream.remove().await;
        return Err(ProviderError::new(
            "io_failed",
            format!("the attach to {ns}/{name} gave no stdin"),
        ));
    };
    let (tx, rx) = mpsc::channel(QUEUE);
    let stop = Arc::new(AtomicBool::new(false));
    let last = Arc::new(Mutex::new(None));
    let feeder = tokio::spawn(feed(
        rx,
        stdin,
        attached,
        volume.clone(),
        stop.clone(),
        last.clone(),
    ));
    Ok(Some(Box::new(KubeStream {
        tx: Some(tx),
        stop,
        last,
        feeder,
        follow,
        stream,
        rt: tokio::runtime::Handle::current(),
        seccomp: p.config.pod.iogen_seccomp_profile.clone(),
    })))
}

/// Opens the streams of `volumes` together (see [`open`]); once `stop` is set, returns at
/// once with class `cancelled` for every volume, the pods that were starting deleted (and
/// the streams already open ended, their pods removed by the run's cleanup).
pub(crate) async fn open_all(
    p: Arc<Kube>,
    volumes: &[Name],
    stop: &AtomicBool,
) -> Vec<Result<Option<Box<dyn IoStream>>, ProviderError>> {
    let opens = futures::future::join_all(volumes.iter().map(|v| open(p.clone(), v.clone())));
    let stopped = async {
        while !stop.load(Relaxed) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::select! {
        r = opens => r,
        () = stopped => volumes
            .iter()
            .map(|_| Err(ProviderError::new("cancelled", "the run was stopped while its I/O stream pods started")))
            .collect(),
    }
}

/// The pod of a volume's stream (exposed for rendering and review).
fn stream_pod(p: &Kube, run_id: &str, ns: &str, name: &str, volume: &Name, pvc: &str) -> Pod {
    let mut meta = objects::meta(name, ns, run_id, None);
    meta.labels
        .get_or_insert_with(Default::default)
        .insert("cnsreplay.io/role".into(), "io-stream".into());
    let device = objects::mount_path(0, true);
    let args = vec![
        "replay".into(),
        "-".into(),
        "--target".into(),
        format!("{}={device}", volume.as_str()),
        "--direct".into(),
        "--at-origin".into(),
        "--result-lines".into(),
        "--depth".into(),
        DEPTH.to_string(),
        "--max-len".into(),
        MAX_LEN.to_string(),
    ];
    let mut pod = objects::pod(
        meta,
        name,
        &[PodVolume {
            claim: pvc.to_owned(),
            block: true,
        }],
        p.config.node.as_deref(),
        &p.config.iogen_image,
        Some(args),
        &p.config.pod,
    );
    if let Some(c) = pod.spec.as_mut().and_then(|s| s.containers.first_mut()) {
        c.stdin = Some(true);
        c.stdin_once = Some(true);
    }
    pod
}

/// What the feeder did.
#[derive(Debug, Default)]
struct Fed {
    sent: u64,
    /// Taken from the engine and never sent (a stop).
    unsent: u64,
    error: Option<String>,
}

/// A `Write` the trace writer encodes into, emptied after each batch.
#[derive(Clone, Default)]
struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Sink {
    fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// Sends the requests to the pod as a binary trace, in batches, until the engine closes the
/// channel; then the trace's end and the end of stdin, and waits for the attach to end.
async fn feed(
    mut rx: mpsc::Receiver<(Io, Instant)>,
    mut stdin: impl tokio::io::AsyncWrite + Unpin,
    attached: kube::api::AttachedProcess,
    volume: Name,
    stop: Arc<AtomicBool>,
    last: Arc<Mutex<Option<Instant>>>,
) -> Fed {
    let mut fed = Fed::default();
    let sink = Sink::default();
    let anchor = iogen::WallAnchor::now();
    let mut writer: Option<(TraceWriter, Instant)> = None;
    let mut next_id = 0u64;
    let mut batch = Vec::new();
    let mut failed = false;
    while let Some(first) = rx.recv().await {
        batch.clear();
        batch.push(first);
        tokio::time::sleep(GATHER).await;
        while let Ok(m) = rx.try_recv() {
            batch.push(m);
        }
        if failed || stop.load(Relaxed) {
            fed.unsent += batch.len() as u64;
            continue;
        }
        let res = encode(&mut writer, &sink, &anchor, &mut next_id, &batch);
        let bytes = sink.take();
        let sent = match res {
            Ok(()) => stdin.write_all(&bytes).await.map_err(|e| e.to_string()),
            Err(e) => Err(e),
        };
        match sent {
            Ok(()) => fed.sent += batch.len() as u64,
            Err(e) => {
                fed.error = Some(format!(
                    "sending volume {:?}'s requests: {e}",
                    volume.as_str()
                ));
                fed.unsent += batch.len() as u64;
                failed = true;
            }
        }
        *last.lock().unwrap_or_else(PoisonError::into_inner) = batch.last().map(|b| b.1);
    }
    if !failed {
        // A stream that never got a request still ends with a valid (empty) trace.
        let ended = match writer.take() {
            Some((w, _)) => w.finish(),
            None => {
                let header = Header {
                    origin: jiff::Timestamp::from_nanosecond(i128::from(
                        anchor.unix_ns(Instant::now()),
                    ))
                    .ok(),
                    ..Header::default()
                };
                TraceWriter::new(sink.clone(), Encoding::Binary, &header).and_then(|w| w.finish())
            }
        };
        let bytes = sink.take();
        let closed = match ended {
            Ok(()) => match stdin.write_all(&bytes).await {
                Ok(()) => stdin.shutdown().await.map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            },
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = closed {
            fed.error = Some(format!("ending volume {:?}'s trace: {e}", volume.as_str()));
        }
    }
    drop(stdin);
    // The attach ends when the container's process does; the result is in its log.
    let _ = tokio::time::timeout(REPORT_WAIT, attached.join()).await;
    fed
}

fn encode(
    writer: &mut Option<(TraceWriter, Instant)>,
    sink: &Sink,
    anchor: &iogen::WallAnchor,
    next_id: &mut u64,
    batch: &[(Io, Instant)],
) -> Result<(), String> {
    for (io, at) in batch {
        if writer.is_none() {
            // The slice's time 0 is its first request's intended instant.
            let origin = jiff::Timestamp::from_nanosecond(i128::from(anchor.unix_ns(*at)))
                .map_err(|e| e.to_string())?;
            let header = Header {
                origin: Some(origin),
                ..Header::default()
            };
            let w = TraceWriter::new(sink.clone(), Encoding::Binary, &header)
                .map_err(|e| e.to_string())?;
            *writer = Some((w, *at));
        }
        let Some((w, origin)) = writer.as_mut() else {
            continue;
        };
        let ev = Event {
            at: u64::try_from(at.saturating_duration_since(*origin).as_nanos()).unwrap_or(u64::MAX),
            id: *next_id,
            tenant: None,
            observed: None,
            op: Op::Io(io.clone()),
        };
        *next_id += 1;
        w.write(&ev).map_err(|e| e.to_string())?;
    }
    if let Some((w, _)) = writer.as_mut() {
        w.flush().map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The pod of a stream, for removing it.
struct Stream {
    p: Arc<Kube>,
    ctx: OpCtx,
    name: String,
    volume: Name,
    node: Option<String>,
}

impl Stream {
    /// Deletes the pod and waits until it and its VolumeAttachment are gone.
    async fn remove(&self) {
        let r = self
            .p
            .stop_pod(
                &self.ctx,
                &self.name,
                std::slice::from_ref(&self.volume),
                self.node.as_deref(),
                Some(0),
            )
            .await;
        if let Err(e) = r
            && e.class != "not_found"
        {
            tracing::warn!(pod = %self.name, error = %e, "removing an I/O stream pod");
        }
    }
}

struct KubeStream {
    tx: Option<mpsc::Sender<(Io, Instant)>>,
    stop: Arc<AtomicBool>,
    last: Arc<Mutex<Option<Instant>>>,
    feeder: tokio::task::JoinHandle<Fed>,
    follow: tokio::task::JoinHandle<Result<crate::pods::logs::Followed, ProviderError>>,
    stream: Stream,
    rt: tokio::runtime::Handle,
    /// The pod's Localhost seccomp profile (None: `RuntimeDefault`), for a fallback's reason.
    seccomp: Option<String>,
}

impl IoStream for KubeStream {
    fn submit(&mut self, io: &Io, intended: Instant) -> Result<Submit, ProviderError> {
        let Some(tx) = &self.tx else {
            return Err(ProviderError::new("io_failed", "the stream has ended"));
        };
        match tx.try_send((io.clone(), intended)) {
            Ok(()) => Ok(Submit::Queued),
            Err(mpsc::error::TrySendError::Full(_)) => Ok(Submit::Full),
            Err(mpsc::error::TrySendError::Closed(_)) => Err(ProviderError::new(
                "io_failed",
                "the stream's feeder has stopped",
            )),
        }
    }

    fn lookahead(&self) -> Duration {
        LOOKAHEAD
    }

    fn finish(mut self: Box<Self>, stop: bool) -> Result<IoStreamReport, ProviderError> {
        if stop {
            self.stop.store(true, Relaxed);
        }
        drop(self.tx.take());
        let rt = self.rt.clone();
        rt.block_on(self.end())
    }
}

impl KubeStream {
    async fn end(self) -> Result<IoStreamReport, ProviderError> {
        let KubeStream {
            feeder,
            follow,
            stream,
            last,
            seccomp,
            ..
        } = self;
        let fed = feeder.await.unwrap_or_else(|e| Fed {
            error: Some(format!("the feeder failed: {e}")),
            ..Fed::default()
        });
        // The pod exits after its last request; give it until then plus the report wait.
        let due = last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .map_or(Duration::ZERO, |l| {
                l.saturating_duration_since(Instant::now())
            });
        let followed = match tokio::time::timeout(due + REPORT_WAIT, follow).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => Err(ProviderError::new("io_failed", e.to_string())),
            Err(_) => Err(ProviderError::new(
                "io_failed",
                format!("pod {} did not end within {REPORT_WAIT:?}", stream.name),
            )),
        };
        stream.remove().await;
        let ended = Instant::now();
        let text = followed?.text;
        let log = format!("io/stream-pods/{}.log", stream.name);
        let line = text
            .lines()
            .find_map(iogen::StreamLine::parse)
            .ok_or_else(|| {
                let why = fed.error.clone().unwrap_or_else(|| "no result line".into());
                ProviderError::new(
                    "io_failed",
                    format!(
                        "pod {} reported no result ({why}); its log is in {log}",
                        stream.name
                    ),
                )
            })?
            .map_err(|e| ProviderError::new("io_failed", format!("{log}: {e}")))?;
        report(&line, &fed, ended, seccomp.as_deref())
    }
}

/// The engine's report of a pod's result line (`fed`: what the driver did not send).
fn report(
    line: &iogen::StreamLine,
    fed: &Fed,
    ended: Instant,
    seccomp: Option<&str>,
) -> Result<IoStreamReport, ProviderError> {
    let h = line
        .histograms()
        .map_err(|e| ProviderError::new("io_failed", e.to_string()))?;
    let new = || hdrhistogram::Histogram::<u64>::new(3).expect("3 significant digits are valid");
    let (mut response, mut service, mut lateness) = (new(), new(), new());
    for (_, k) in h.iter() {
        // These auto-resize: adding cannot fail.
        let _ = response.add(&k.response);
        let _ = service.add(&k.service);
        let _ = lateness.add(&k.lateness);
    }
    let base = iogen::WallAnchor::now()
        .instant(line.base_unix_ns)
        .ok_or_else(|| ProviderError::new("io_failed", "the stream's base is out of range"))?;
    let mut flags = line.flags.clone();
    flags.push(format!(
        "in pod: requests streamed over stdin {} ms ahead; {} reached the pod after their \
         intended instant",
        LOOKAHEAD.as_millis(),
        line.arrived_late
    ));
    if let Some(e) = &fed.error {
        flags.push(e.clone());
    }
    if flags.first().is_some_and(|f| f == "sync") {
        flags.push(match seccomp {
            None => {
                "io_uring refused or unavailable: the pod ran under the RuntimeDefault seccomp \
                     profile, which refuses io_uring (kubectl apply -k deploy/seccomp, then \
                     --iogen-seccomp-profile cnsreplay/iogen.json)"
                    .to_owned()
            }
            Some(p) => {
                format!("io_uring refused or unavailable under the Localhost seccomp profile {p}")
            }
        });
    }
    Ok(IoStreamReport {
        target: line.target.clone(),
        flags,
        accepted: line.accepted + fed.unsent,
        completed: line.completed,
        errors: line.errors,
        rejected: line.rejected,
        reordered: line.reordered,
        unissued: line.unissued + fed.unsent,
        adjusted: line.adjusted,
        response,
        service,
        lateness,
        base,
        bucket_ns: line.bucket_ns,
        buckets: line.buckets.clone(),
        cpu_per_request_us: line.cpu_per_request_us,
        ended,
    })
}
