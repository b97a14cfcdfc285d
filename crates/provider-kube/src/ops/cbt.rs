//! `snapshot_allocated` and `snapshot_delta` on Kubernetes: changed-block tracking the way a
//! backup application calls it (KEP-3314, [`snapshot_metadata`]). The snapshots' contents give
//! the CSI driver and the base's handle; the driver's SnapshotMetadataService object gives
//! the service's address, audience and CA; a TokenRequest mints a token of the client's
//! ServiceAccount for that audience; the listing streams over TLS.
//!
//! What a user waits for is timed phase by phase on the op's record (`resolved`, `token`,
//! `connected`, `first-range`, `listed`) and, as on the local provider, in
//! `RUNDIR/cbt/<event id>.json` with a notice: time to the first range and in total, ranges
//! and bytes per second. The stream is checked as a client must trust it: ranges in order,
//! not overlapping, inside the volume, and of one size when the service says FIXED_LENGTH — a
//! service breaking that fails the op (class `inconsistent`). A delta is then checked against
//! the written sets of the verify-mode writers on its volume, as on the local provider
//! ([`iogen::delta_check`]): their pods print every acknowledged write after the phase
//! (`iogen phase --written-log -`, [`iogen::written_wire`]), with the Unix time of their
//! clock's origin, and [`collect`] moves the records onto the run clock (same host: exact;
//! another node: NTP's skew) into `io/<event id>.written`. Each phase's blocks carry a salt of
//! its own, so a pod rewriting what an earlier pod wrote changes the bytes even at the same
//! generation. A block written between the snapshots and missing fails the op
//! (`inconsistent`).
//!
//! The token's account: `KubeConfig::cbt_account` when set, else the run's own credentials
//! when they are a ServiceAccount (SelfSubjectReview), else `cnsreplay/cnsreplay`, the
//! account of `deploy/rbac/`. The service lets it list only if it may `get` VolumeSnapshots
//! in the run's namespace (its SubjectAccessReview).

use std::time::Instant;

use futures::StreamExt as _;
use iogen::delta_check::DeltaCheck;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use replay::files::{CbtFile, CbtService, CbtSetup, CbtTiming};
use replay::{OpCtx, ProviderError};
use snapshot_metadata::pb;
use trace_format::{Event, Name, OpType};

use crate::context::{Kube, Written, io_err};
use crate::kube::objects::k8s_name;
use crate::kube::stamp::phase;

/// Ranges per response the client asks for (the service may send fewer).
pub(crate) const MAX_RESULTS: i32 = 1024;

/// The block size a delta is checked at when the trace names none.
const CHECK_BLOCK: u64 = 4096;

/// The run-clock window in which a snapshot of the run was taken.
fn window(t: &crate::context::Taken) -> iogen::delta_check::Window {
    iogen::delta_check::Window {
        requested_ns: t.requested_ns,
        ready_ns: t.ready_ns,
    }
}

/// Checks a delta's `ranges` against the written sets of `volume`'s writers.
fn check_delta(
    p: &Kube,
    volume: &Name,
    base: &Name,
    snapshot: &Name,
    ranges: &[[u64; 2]],
    block: u64,
) -> Result<DeltaCheck, ProviderError> {
    let (writers, taken) = {
        let st = p.state();
        let writers: Vec<Written> = st
            .written
            .iter()
            .filter(|w| w.volume == *volume)
            .cloned()
            .collect();
        let taken = (
            st.snap_taken.get(base).map(window),
            st.snap_taken.get(snapshot).map(window),
        );
        (writers, taken)
    };
    let (Some(b), Some(t)) = taken else {
        return Ok(DeltaCheck {
            not_checked: vec![format!(
                "snapshots {base} and {snapshot}: the run did not see both taken (no window)"
            )],
            ..DeltaCheck::default()
        });
    };
    let mut sets = Vec::new();
    let mut not_checked = Vec::new();
    for w in writers {
        match (&w.record, &w.unchecked) {
            (Some(path), None) => {
                let recs = iogen::written::read_records(path)
                    .map_err(|e| ProviderError::new("io_failed", e.to_string()))?;
                sets.push((w.event, recs));
            }
            (_, why) => not_checked.push(format!(
                "event {}: {}",
                w.event,
                why.as_deref().unwrap_or("no written set")
            )),
        }
    }
    let mut c = iogen::delta_check::check(ranges, block, &sets, b, t);
    c.not_checked = not_checked;
    Ok(c)
}

fn gvk(kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(
        "snapshot.storage.k8s.io",
        "v1",
        kind,
    ))
}

/// A ready snapshot's content: its driver, CSI handle and source volume handle, and the PVC
/// it was taken of.
struct Content {
    pvc: Option<String>,
    driver: String,
    handle: String,
    source: Option<String>,
}

impl Kube {
    /// The content of the run's snapshot `snap` (trace name).
    async fn content(&self, snap: &Name) -> Result<Content, ProviderError> {
        let ns = self.ns()?;
        let name = k8s_name(snap);
        let vs: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), ns, &gvk("VolumeSnapshot"));
        let s = self.call(vs.get(&name)).await?;
        let st = &s.data["status"];
        if st["readyToUse"] != true {
            return Err(ProviderError::new(
                "not_ready",
                format!("VolumeSnapshot {ns}/{name} (snapshot {snap}) is not ready to use"),
            ));
        }
        let Some(bound) = st["boundVolumeSnapshotContentName"].as_str() else {
            return Err(ProviderError::new(
                "not_ready",
                format!("VolumeSnapshot {ns}/{name} (snapshot {snap}) is bound to no content"),
            ));
        };
        let vsc: Api<DynamicObject> =
            Api::all_with(self.client.clone(), &gvk("VolumeSnapshotContent"));
        let c = self.call(vsc.get(bound)).await?;
        let handle = c.data["status"]["snapshotHandle"].as_str().ok_or_else(|| {
            ProviderError::new(
                "not_ready",
                format!("VolumeSnapshotContent {bound} (snapshot {snap}) has no snapshotHandle"),
            )
        })?;
        Ok(Content {
            pvc: s.data["spec"]["source"]["persistentVolumeClaimName"]
                .as_str()
                .map(str::to_owned),
            driver: c.data["spec"]["driver"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            handle: handle.to_owned(),
            source: c.data["spec"]["source"]["volumeHandle"]
                .as_str()
                .map(str::to_owned),
        })
    }

    /// The ServiceAccount whose token is sent: see the module docs.
    pub(crate) async fn cbt_account(&self) -> Result<(String, String), ProviderError> {
        if let Some(a) = &self.config.cbt_account {
            return split_account(a).ok_or_else(|| {
                ProviderError::new(
                    "invalid",
                    format!("--cbt-account {a:?} is not NAMESPACE/NAME"),
                )
            });
        }
        let api: Api<SelfSubjectReview> = Api::all(self.client.clone());
        let me = self
            .call(api.create(&PostParams::default(), &SelfSubjectReview::default()))
            .await?;
        let user = me
            .status
            .and_then(|s| s.user_info)
            .and_then(|u| u.username)
            .unwrap_or_default();
        Ok(user
            .strip_prefix("system:serviceaccount:")
            .and_then(|r| r.split_once(':'))
            .map_or_else(
                || ("cnsreplay".to_owned(), "cnsreplay".to_owned()),
                |(n, a)| (n.to_owned(), a.to_owned()),
            ))
    }
}

/// `NAMESPACE/NAME`.
pub(crate) fn split_account(a: &str) -> Option<(String, String)> {
    let (n, a) = a.split_once('/')?;
    (!n.is_empty() && !a.is_empty() && !a.contains('/')).then(|| (n.to_owned(), a.to_owned()))
}

#[allow(clippy::needless_pass_by_value)] // used as `map_err(service_err)`
fn service_err(e: snapshot_metadata::Error) -> ProviderError {
    let class = match &e {
        snapshot_metadata::Error::NoService { .. } => "unsupported",
        snapshot_metadata::Error::Invalid { .. } => "invalid",
        _ => "api_error",
    };
    ProviderError::new(class, e.to_string())
}

fn grpc_err(what: &str, s: &tonic::Status) -> ProviderError {
    let class = match s.code() {
        tonic::Code::Unauthenticated => "unauthenticated",
        tonic::Code::PermissionDenied => "forbidden",
        tonic::Code::NotFound => "not_found",
        tonic::Code::InvalidArgument => "invalid",
        tonic::Code::Unavailable => "not_ready",
        _ => "cbt_failed",
    };
    ProviderError::new(class, format!("{what}: {:?}: {}", s.code(), s.message()))
}

/// One response of either call.
struct Answer {
    kind: i32,
    capacity: i64,
    blocks: Vec<pb::BlockMetadata>,
}

impl From<pb::GetMetadataAllocatedResponse> for Answer {
    fn from(a: pb::GetMetadataAllocatedResponse) -> Self {
        Answer {
            kind: a.block_metadata_type,
            capacity: a.volume_capacity_bytes,
            blocks: a.block_metadata,
        }
    }
}

impl From<pb::GetMetadataDeltaResponse> for Answer {
    fn from(a: pb::GetMetadataDeltaResponse) -> Self {
        Answer {
            kind: a.block_metadata_type,
            capacity: a.volume_capacity_bytes,
            blocks: a.block_metadata,
        }
    }
}

type Answers = futures::stream::BoxStream<'static, Result<Answer, tonic::Status>>;

/// Either call's stream as [`Answer`]s.
fn answers<T: Into<Answer> + Send + 'static>(
    r: Result<tonic::Response<tonic::Streaming<T>>, tonic::Status>,
) -> Result<Answers, tonic::Status> {
    Ok(r?.into_inner().map(|a| a.map(Into::into)).boxed())
}

/// Checks a stream's ranges as they come: in order, not overlapping, inside the volume, and
/// of one size when the service says FIXED_LENGTH.
#[derive(Debug, Default)]
pub(crate) struct StreamCheck {
    end: u64,
    fixed: Option<u64>,
}

impl StreamCheck {
    pub(crate) fn add(
        &mut self,
        kind: i32,
        capacity: i64,
        b: &pb::BlockMetadata,
    ) -> Result<(), String> {
        let (off, len) = (b.byte_offset, b.size_bytes);
        if off < 0 || len <= 0 {
            return Err(format!("range ({off}, {len}) is negative or empty"));
        }
        let (off, len) = (off as u64, len as u64);
        if off < self.end {
            return Err(format!(
                "range at {off} starts before the end of the previous one ({})",
                self.end
            ));
        }
        if capacity > 0 && off + len > capacity as u64 {
            return Err(format!(
                "range ({off}, {len}) ends past the volume's {capacity} bytes"
            ));
        }
        if kind == pb::BlockMetadataType::FixedLength as i32 {
            match self.fixed {
                Some(f) if f != len => {
                    return Err(format!(
                        "FIXED_LENGTH ranges of {f} bytes, then one of {len} at {off}"
                    ));
                }
                _ => self.fixed = Some(len),
            }
        }
        self.end = off + len;
        Ok(())
    }
}

/// `snapshot_allocated` (`base` None) or `snapshot_delta`.
pub(crate) async fn list(
    p: &Kube,
    ev: &Event,
    base: Option<&Name>,
    snapshot: &Name,
    block_size: Option<u64>,
    ctx: &OpCtx,
) -> Result<(), ProviderError> {
    let ns = p.ns()?.to_owned();
    let t0 = Instant::now();
    p.waiting(ctx, format!("the content of snapshot {snapshot}"));
    let target = p.content(snapshot).await?;
    let base_content = match base {
        Some(b) => {
            let c = p.content(b).await?;
            if c.source.is_some() && c.source != target.source {
                return Err(ProviderError::new(
                    "invalid",
                    format!(
                        "snapshots {b} and {snapshot} are not of one volume (their contents' \
                         source volume handles differ: {:?}, {:?})",
                        c.source, target.source
                    ),
                ));
            }
            Some(c)
        }
        None => None,
    };
    p.waiting(ctx, format!("SnapshotMetadataService {}", target.driver));
    p.limiter.acquire().await;
    let svc = snapshot_metadata::service(&p.client, &target.driver)
        .await
        .map_err(service_err)?;
    let resolved = Instant::now();
    phase(ctx, "resolved");
    let (acct_ns, acct) = p.cbt_account().await?;
    p.waiting(ctx, format!("a token of ServiceAccount {acct_ns}/{acct}"));
    p.limiter.acquire().await;
    let token = snapshot_metadata::token(&p.client, &acct_ns, &acct, &svc.audience)
        .await
        .map_err(service_err)?;
    let tokened = Instant::now();
    phase(ctx, "token");
    p.waiting(ctx, format!("a TLS channel to {}", svc.address));
    let ch = snapshot_metadata::connect(&svc)
        .await
        .map_err(service_err)?;
    let connected = Instant::now();
    phase(ctx, "connected");
    let mut client = pb::snapshot_metadata_client::SnapshotMetadataClient::new(ch);
    let what = match base {
        Some(b) => format!("GetMetadataDelta {b} → {ns}/{snapshot}"),
        None => format!("GetMetadataAllocated {ns}/{snapshot}"),
    };
    p.waiting(ctx, format!("{what} at {}", svc.address));
    let start = Instant::now();
    let mut stream = match &base_content {
        Some(bc) => answers(
            client
                .get_metadata_delta(pb::GetMetadataDeltaRequest {
                    security_token: token,
                    namespace: ns.clone(),
                    base_snapshot_id: bc.handle.clone(),
                    target_snapshot_name: k8s_name(snapshot),
                    starting_offset: 0,
                    max_results: MAX_RESULTS,
                })
                .await,
        ),
        None => answers(
            client
                .get_metadata_allocated(pb::GetMetadataAllocatedRequest {
                    security_token: token,
                    namespace: ns.clone(),
                    snapshot_name: k8s_name(snapshot),
                    starting_offset: 0,
                    max_results: MAX_RESULTS,
                })
                .await,
        ),
    }
    .map_err(|s| grpc_err(&what, &s))?;
    let mut first = None;
    let mut ranges = Vec::new();
    let mut bytes = 0u64;
    let mut responses = 0u64;
    let mut kind = 0;
    let mut capacity = 0i64;
    let mut check = StreamCheck::default();
    while let Some(a) = stream.next().await {
        let a = a.map_err(|s| grpc_err(&what, &s))?;
        responses += 1;
        if responses == 1 {
            (kind, capacity) = (a.kind, a.capacity);
        } else if (a.kind, a.capacity) != (kind, capacity) {
            return Err(ProviderError::new(
                "inconsistent",
                format!(
                    "{what}: response {responses} changed the block type or capacity ({}, {} \
                     → {}, {})",
                    kind, capacity, a.kind, a.capacity
                ),
            ));
        }
        if first.is_none() && !a.blocks.is_empty() {
            first = Some(start.elapsed().as_nanos() as u64);
            phase(ctx, "first-range");
        }
        for b in &a.blocks {
            check
                .add(kind, capacity, b)
                .map_err(|e| ProviderError::new("inconsistent", format!("{what}: {e}")))?;
            bytes += b.size_bytes as u64;
            ranges.push([b.byte_offset as u64, b.size_bytes as u64]);
        }
    }
    let total = start.elapsed().as_nanos() as u64;
    phase(ctx, "listed");
    let secs = (total as f64 / 1e9).max(1e-9);
    let kind_name = pb::BlockMetadataType::try_from(kind).map_or_else(
        |_| format!("unknown ({kind})"),
        |k| k.as_str_name().to_owned(),
    );
    // The trace's volume the snapshot is of (by its PVC).
    let volume: Option<Name> = p
        .state()
        .volumes
        .iter()
        .find(|(_, v)| Some(&v.pvc) == target.pvc.as_ref())
        .map(|(n, _)| n.clone());
    let mut file = CbtFile {
        event: ev.id,
        op: if base.is_some() {
            OpType::SnapshotDelta
        } else {
            OpType::SnapshotAllocated
        },
        volume: volume.as_ref().map_or_else(
            || target.pvc.clone().unwrap_or_default(),
            ToString::to_string,
        ),
        base: base.map(ToString::to_string),
        snapshot: snapshot.to_string(),
        block_size: None,
        requested_block_size: block_size,
        block_metadata_type: Some(kind_name),
        image_size: capacity.max(0) as u64,
        service: Some(CbtService {
            name: svc.name.clone(),
            address: svc.address.clone(),
            audience: svc.audience.clone(),
        }),
        account: Some(format!("{acct_ns}/{acct}")),
        setup: Some(CbtSetup {
            resolve_ns: (resolved - t0).as_nanos() as u64,
            token_ns: (tokened - resolved).as_nanos() as u64,
            connect_ns: (connected - tokened).as_nanos() as u64,
        }),
        timing: CbtTiming {
            first_range_ns: first,
            total_ns: total,
            ranges: ranges.len() as u64,
            bytes,
            ranges_per_s: ranges.len() as f64 / secs,
            bytes_per_s: bytes as f64 / secs,
            read_bytes: None,
        },
        responses: Some(responses),
        check: None,
        ranges,
    };
    let mut failed = None;
    if let Some(b) = base {
        let block = block_size.unwrap_or(CHECK_BLOCK);
        let c = match &volume {
            Some(v) => check_delta(p, v, b, snapshot, &file.ranges, block)?,
            None => DeltaCheck {
                not_checked: vec![format!(
                    "snapshot {snapshot}: its volume is not one the run made"
                )],
                ..DeltaCheck::default()
            },
        };
        phase(ctx, "checked");
        failed = c.failure(&file.volume, b, snapshot);
        file.check = Some(c);
    }
    let dir = p.run()?.run_dir.join("cbt");
    fs_err::create_dir_all(&dir).map_err(io_err)?;
    let path = dir.join(format!("{}.json", ev.id));
    let json = serde_json::to_vec_pretty(&file).map_err(|e| io_err(e.into()))?;
    fs_err::write(&path, json).map_err(io_err)?;
    p.state().notices.push(file.notice());
    match failed {
        Some(m) => Err(ProviderError::new(
            "inconsistent",
            format!("{m} ({})", path.display()),
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(o: i64, l: i64) -> pb::BlockMetadata {
        pb::BlockMetadata {
            byte_offset: o,
            size_bytes: l,
        }
    }

    #[test]
    fn a_stream_out_of_order_overlapping_or_past_the_volume_is_refused() {
        let var = pb::BlockMetadataType::VariableLength as i32;
        let fixed = pb::BlockMetadataType::FixedLength as i32;
        let mut c = StreamCheck::default();
        c.add(var, 1 << 20, &b(0, 4096)).unwrap();
        c.add(var, 1 << 20, &b(8192, 65536)).unwrap();
        let e = c.add(var, 1 << 20, &b(65536, 4096)).unwrap_err();
        assert!(
            e.contains("starts before the end of the previous one (73728)"),
            "{e}"
        );
        let e = StreamCheck::default()
            .add(var, 4096, &b(0, 8192))
            .unwrap_err();
        assert!(e.contains("past the volume's 4096 bytes"), "{e}");
        let mut c = StreamCheck::default();
        c.add(fixed, 0, &b(0, 4096)).unwrap();
        let e = c.add(fixed, 0, &b(4096, 8192)).unwrap_err();
        assert!(e.contains("FIXED_LENGTH ranges of 4096 bytes"), "{e}");
        assert!(StreamCheck::default().add(var, 0, &b(0, 0)).is_err());
    }

    #[test]
    fn an_account_is_namespace_slash_name() {
        assert_eq!(
            split_account("cnsreplay/backup"),
            Some(("cnsreplay".to_owned(), "backup".to_owned()))
        );
        assert_eq!(split_account("backup"), None);
        assert_eq!(split_account("a/b/c"), None);
        assert_eq!(split_account("/b"), None);
    }
}
