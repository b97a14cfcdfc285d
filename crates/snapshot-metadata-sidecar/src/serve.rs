//! The service: authenticate, authorize, resolve the VolumeSnapshot, forward to the CSI
//! driver and stream its answers back unchanged.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Instant;

use anyhow::Context as _;
use csi_proto::pb as csi;
use futures::{Stream, StreamExt as _};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use snapshot_metadata::pb;
use tokio::net::{TcpListener, UnixStream};
use tonic::transport::{Channel, Endpoint, Identity, Server, ServerTlsConfig};
use tonic::{Request, Response, Status};

/// What the service runs with.
pub(crate) struct Config {
    pub kube: kube::Client,
    pub socket: PathBuf,
    pub driver: String,
    pub listen: SocketAddr,
    pub address_file: Option<PathBuf>,
    pub cert: Vec<u8>,
    pub key: Vec<u8>,
}

/// Serves until SIGTERM or Ctrl-C.
pub(crate) async fn run(c: Config) -> anyhow::Result<()> {
    let path = c.socket.clone();
    let csi = Endpoint::from_static("http://localhost").connect_with_connector_lazy(
        tower::service_fn(move |_: tonic::transport::Uri| {
            let p = path.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(p).await?)) }
        }),
    );
    let listener = TcpListener::bind(c.listen)
        .await
        .with_context(|| format!("listen on {}", c.listen))?;
    let bound = listener.local_addr()?;
    if let Some(f) = &c.address_file {
        fs_err::write(f, bound.to_string())?;
    }
    tracing::info!(
        "serving snapshotmetadata.SnapshotMetadata for driver {} on {bound} (TLS), CSI socket {}",
        c.driver,
        c.socket.display()
    );
    let svc = Sidecar {
        kube: c.kube,
        csi,
        driver: c.driver,
    };
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    Server::builder()
        .tls_config(ServerTlsConfig::new().identity(Identity::from_pem(c.cert, c.key)))
        .context("TLS identity (--tls-cert, --tls-key)")?
        .add_service(pb::snapshot_metadata_server::SnapshotMetadataServer::new(
            svc,
        ))
        .serve_with_incoming_shutdown(
            tokio_stream::wrappers::TcpListenerStream::new(listener),
            async move {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            },
        )
        .await
        .context("gRPC server")
}

struct Sidecar {
    kube: kube::Client,
    csi: Channel,
    driver: String,
}

type Answers<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

fn api_status(what: &str, e: &kube::Error) -> Status {
    Status::internal(format!("{what}: {e}"))
}

fn required(field: &str, v: &str) -> Result<(), Status> {
    if v.is_empty() {
        Err(Status::invalid_argument(format!("{field} is required")))
    } else {
        Ok(())
    }
}

impl Sidecar {
    /// TokenReview for the service's audience, then a SubjectAccessReview: may that user
    /// `get` VolumeSnapshots in `namespace`?
    async fn authorize(&self, token: &str, namespace: &str) -> Result<String, Status> {
        let audience = snapshot_metadata::service(&self.kube, &self.driver)
            .await
            .map_err(|e| Status::internal(e.to_string()))?
            .audience;
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_owned(),
                audiences: Some(vec![audience.clone()]),
            },
            ..TokenReview::default()
        };
        let r = Api::<TokenReview>::all(self.kube.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| api_status("TokenReview", &e))?;
        let st = r.status.unwrap_or_default();
        let for_us = st.audiences.as_ref().is_some_and(|a| a.contains(&audience));
        let user = match (st.authenticated, for_us, st.user) {
            (Some(true), true, Some(u)) => u,
            _ => {
                return Err(Status::unauthenticated(format!(
                    "the security token is not valid for audience {audience:?}{}",
                    st.error.map(|e| format!(": {e}")).unwrap_or_default()
                )));
            }
        };
        let name = user.username.clone().unwrap_or_default();
        self.may_get_snapshots(user, namespace).await?;
        Ok(name)
    }

    async fn may_get_snapshots(&self, u: UserInfo, namespace: &str) -> Result<(), Status> {
        let sar = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    verb: Some("get".to_owned()),
                    namespace: Some(namespace.to_owned()),
                    group: Some("snapshot.storage.k8s.io".to_owned()),
                    version: Some("v1".to_owned()),
                    resource: Some("volumesnapshots".to_owned()),
                    ..ResourceAttributes::default()
                }),
                user: u.username.clone(),
                groups: u.groups,
                uid: u.uid,
                extra: u.extra,
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let r = Api::<SubjectAccessReview>::all(self.kube.clone())
            .create(&PostParams::default(), &sar)
            .await
            .map_err(|e| api_status("SubjectAccessReview", &e))?;
        let st = r.status.unwrap_or_default();
        if st.allowed && st.denied != Some(true) {
            Ok(())
        } else {
            Err(Status::permission_denied(format!(
                "{} may not get volumesnapshots in namespace {namespace}{}",
                u.username.unwrap_or_default(),
                st.reason.map(|r| format!(": {r}")).unwrap_or_default()
            )))
        }
    }

    /// The CSI handle of VolumeSnapshot `namespace/name`, which must be ready and bound to a
    /// ready content of this driver.
    async fn handle(&self, namespace: &str, name: &str) -> Result<String, Status> {
        let gvk = |k| GroupVersionKind::gvk("snapshot.storage.k8s.io", "v1", k);
        let vs: Api<DynamicObject> = Api::namespaced_with(
            self.kube.clone(),
            namespace,
            &ApiResource::from_gvk(&gvk("VolumeSnapshot")),
        );
        let s = vs
            .get_opt(name)
            .await
            .map_err(|e| api_status("get VolumeSnapshot", &e))?
            .ok_or_else(|| {
                Status::unavailable(format!("VolumeSnapshot {namespace}/{name} does not exist"))
            })?;
        let st = &s.data["status"];
        if st["readyToUse"] != true {
            return Err(Status::unavailable(format!(
                "VolumeSnapshot {namespace}/{name} is not ready to use"
            )));
        }
        let content = st["boundVolumeSnapshotContentName"]
            .as_str()
            .ok_or_else(|| {
                Status::unavailable(format!(
                    "VolumeSnapshot {namespace}/{name} is bound to no VolumeSnapshotContent"
                ))
            })?;
        let vsc: Api<DynamicObject> = Api::all_with(
            self.kube.clone(),
            &ApiResource::from_gvk(&gvk("VolumeSnapshotContent")),
        );
        let c = vsc
            .get(content)
            .await
            .map_err(|e| api_status("get VolumeSnapshotContent", &e))?;
        let driver = c.data["spec"]["driver"].as_str().unwrap_or_default();
        if driver != self.driver {
            return Err(Status::invalid_argument(format!(
                "VolumeSnapshot {namespace}/{name} is of CSI driver {driver:?}; this service \
                 serves {:?}",
                self.driver
            )));
        }
        if c.data["status"]["readyToUse"] != true {
            return Err(Status::unavailable(format!(
                "VolumeSnapshotContent {content} is not ready to use"
            )));
        }
        c.data["status"]["snapshotHandle"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| {
                Status::unavailable(format!("VolumeSnapshotContent {content} has no handle"))
            })
    }

    /// What both calls do first: the request names a token, a namespace and a snapshot (the
    /// field `snapshot.0`), the token is valid and its user may read the namespace's
    /// snapshots, and the snapshot resolves. The user's name and the snapshot's CSI handle.
    async fn admit(
        &self,
        token: &str,
        namespace: &str,
        snapshot: (&str, &str),
    ) -> Result<(String, String), Status> {
        required("security_token", token)?;
        required("namespace", namespace)?;
        required(snapshot.0, snapshot.1)?;
        let user = self.authorize(token, namespace).await?;
        Ok((user, self.handle(namespace, snapshot.1).await?))
    }

    fn client(&self) -> csi::snapshot_metadata_client::SnapshotMetadataClient<Channel> {
        csi::snapshot_metadata_client::SnapshotMetadataClient::new(self.csi.clone())
    }
}

/// The CSI driver's response `$a` as the API's `pb::$T` (the same three fields), with its
/// count of ranges.
macro_rules! passed_on {
    ($a:expr, $t:ident) => {{
        let n = $a.block_metadata.len();
        let b = pb::$t {
            block_metadata_type: $a.block_metadata_type,
            volume_capacity_bytes: $a.volume_capacity_bytes,
            block_metadata: blocks($a.block_metadata),
        };
        (b, n)
    }};
}

fn blocks(v: Vec<csi::BlockMetadata>) -> Vec<pb::BlockMetadata> {
    v.into_iter()
        .map(|b| pb::BlockMetadata {
            byte_offset: b.byte_offset,
            size_bytes: b.size_bytes,
        })
        .collect()
}

/// Passes the driver's stream on, logging how many ranges went out when it ends.
fn relay<A, B>(
    s: tonic::Streaming<A>,
    what: String,
    start: Instant,
    mut map: impl FnMut(A) -> (B, usize) + Send + 'static,
) -> Answers<B>
where
    A: Send + 'static,
    B: Send + 'static,
{
    let mut ranges = 0;
    let mut done = false;
    Box::pin(s.map(move |r| {
        r.map(|a| {
            let (b, n) = map(a);
            ranges += n;
            b
        })
    }))
    .chain(futures::stream::poll_fn(move |_| {
        if !done {
            done = true;
            tracing::info!("{what}: {ranges} ranges in {:?}", start.elapsed());
        }
        std::task::Poll::Ready(None)
    }))
    .boxed()
}

#[tonic::async_trait]
impl pb::snapshot_metadata_server::SnapshotMetadata for Sidecar {
    type GetMetadataAllocatedStream = Answers<pb::GetMetadataAllocatedResponse>;
    type GetMetadataDeltaStream = Answers<pb::GetMetadataDeltaResponse>;

    async fn get_metadata_allocated(
        &self,
        req: Request<pb::GetMetadataAllocatedRequest>,
    ) -> Result<Response<Self::GetMetadataAllocatedStream>, Status> {
        let start = Instant::now();
        let r = req.into_inner();
        let (user, id) = self
            .admit(
                &r.security_token,
                &r.namespace,
                ("snapshot_name", &r.snapshot_name),
            )
            .await?;
        let s = self
            .client()
            .get_metadata_allocated(csi::GetMetadataAllocatedRequest {
                snapshot_id: id,
                starting_offset: r.starting_offset,
                max_results: r.max_results,
                secrets: Default::default(),
            })
            .await?
            .into_inner();
        let what = format!(
            "GetMetadataAllocated {}/{} for {user}",
            r.namespace, r.snapshot_name
        );
        Ok(Response::new(relay(s, what, start, |a| {
            passed_on!(a, GetMetadataAllocatedResponse)
        })))
    }

    async fn get_metadata_delta(
        &self,
        req: Request<pb::GetMetadataDeltaRequest>,
    ) -> Result<Response<Self::GetMetadataDeltaStream>, Status> {
        let start = Instant::now();
        let r = req.into_inner();
        required("base_snapshot_id", &r.base_snapshot_id)?;
        let (user, id) = self
            .admit(
                &r.security_token,
                &r.namespace,
                ("target_snapshot_name", &r.target_snapshot_name),
            )
            .await?;
        let s = self
            .client()
            .get_metadata_delta(csi::GetMetadataDeltaRequest {
                base_snapshot_id: r.base_snapshot_id.clone(),
                target_snapshot_id: id,
                starting_offset: r.starting_offset,
                max_results: r.max_results,
                secrets: Default::default(),
            })
            .await?
            .into_inner();
        let what = format!(
            "GetMetadataDelta {} → {}/{} for {user}",
            r.base_snapshot_id, r.namespace, r.target_snapshot_name
        );
        Ok(Response::new(relay(s, what, start, |a| {
            passed_on!(a, GetMetadataDeltaResponse)
        })))
    }
}
