//! The Kubernetes SnapshotMetadata API (KEP-3314, `cbt.storage.k8s.io`) from the backup
//! client's side, as the API's own documentation tells a client to call it:
//!
//! 1. find the SnapshotMetadataService object named after the snapshot's CSI driver (it is
//!    cluster-scoped; its spec gives the service's TCP `address`, the `audience` its tokens
//!    must carry and the `caCert` that signs its TLS certificate) — [`service`];
//! 2. mint a short-lived token of a ServiceAccount for exactly that audience (TokenRequest) —
//!    [`token`]; the service checks it with a TokenReview and then asks the API server
//!    (SubjectAccessReview) whether that account may `get` VolumeSnapshots in the namespace;
//! 3. call `GetMetadataAllocated` / `GetMetadataDelta` ([`pb`]) over TLS verified against
//!    `caCert` ([`connect`]), naming snapshots by namespace and VolumeSnapshot name (a delta's
//!    base by its CSI snapshot handle).
//!
//! Why a crate of its own: both sides need the schema — cnsreplay's kube provider calls it,
//! and testenv's stand-in for the upstream sidecar (`snapshot-metadata-sidecar`) serves it —
//! and neither should pull the other's dependencies. It takes `k8s-openapi` without a version
//! feature, like every library here.

use k8s_openapi::ByteString;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde::Deserialize;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

#[allow(
    missing_docs,
    clippy::all,
    clippy::pedantic,
    unused_qualifications,
    rust_2018_idioms
)]
/// Code generated from `proto/schema.proto` (package `snapshotmetadata`).
pub mod pb {
    tonic::include_proto!("snapshotmetadata");
}

/// The API group of the SnapshotMetadataService object.
pub const GROUP: &str = "cbt.storage.k8s.io";
/// The version served by Kubernetes 1.36's CRD.
pub const VERSION: &str = "v1beta1";
/// The object's kind.
pub const KIND: &str = "SnapshotMetadataService";
/// The object's plural resource name (for RBAC and access reviews).
pub const PLURAL: &str = "snapshotmetadataservices";

/// The shortest lifetime TokenRequest accepts, which is also all a listing needs.
pub const TOKEN_SECONDS: i64 = 600;

/// Why the service could not be found, a token minted or a channel opened.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No SnapshotMetadataService object names the driver (or the API is not installed).
    #[error(
        "no SnapshotMetadataService {driver:?} ({GROUP}/{VERSION}): the CSI driver {driver} \
         advertises no changed-block tracking service on this cluster (or the {GROUP} API is \
         not installed)"
    )]
    NoService {
        /// The CSI driver's name (the object's name).
        driver: String,
    },
    /// The object exists but its spec is unusable.
    #[error("SnapshotMetadataService {name}: spec.{field}: {why}")]
    Invalid {
        /// The object's name.
        name: String,
        /// The spec field.
        field: &'static str,
        /// What is wrong with it.
        why: String,
    },
    /// An API request failed.
    #[error("{what}: {source}")]
    Api {
        /// The request.
        what: String,
        /// The client's error.
        source: kube::Error,
    },
    /// The API server answered a TokenRequest without a token.
    #[error("the TokenRequest for ServiceAccount {account} was answered without a token")]
    NoToken {
        /// `namespace/name`.
        account: String,
    },
    /// The TLS channel could not be set up or connected.
    #[error("TLS channel to {address} (SnapshotMetadataService {name}): {source}")]
    Connect {
        /// The object's name.
        name: String,
        /// The address it advertises.
        address: String,
        /// The transport's error.
        source: tonic::transport::Error,
    },
}

/// What a SnapshotMetadataService object advertises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    /// The object's name: the CSI driver's.
    pub name: String,
    /// The audience its tokens must carry.
    pub audience: String,
    /// `host:port` of its gRPC endpoint.
    pub address: String,
    /// PEM of the CA that signs its certificate.
    pub ca_cert: Vec<u8>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    audience: String,
    address: String,
    ca_cert: ByteString,
}

/// The API resource of the object (for [`Api::all_with`]).
pub fn resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, VERSION, KIND), PLURAL)
}

/// The SnapshotMetadataService of CSI driver `driver`.
pub async fn service(client: &kube::Client, driver: &str) -> Result<Service, Error> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource());
    let obj = match api.get_opt(driver).await {
        Ok(Some(o)) => o,
        Ok(None) => {
            return Err(Error::NoService {
                driver: driver.to_owned(),
            });
        }
        Err(source) => {
            return Err(Error::Api {
                what: format!("get SnapshotMetadataService {driver}"),
                source,
            });
        }
    };
    parse(driver, &obj.data)
}

/// The spec of object `name` (its JSON without metadata).
pub fn parse(name: &str, data: &serde_json::Value) -> Result<Service, Error> {
    let invalid = |field, why: String| Error::Invalid {
        name: name.to_owned(),
        field,
        why,
    };
    let spec = data
        .get("spec")
        .ok_or_else(|| invalid("", "the object has no spec".to_owned()))?;
    let s: Spec = serde_json::from_value(spec.clone()).map_err(|e| invalid("", e.to_string()))?;
    if s.audience.is_empty() {
        return Err(invalid("audience", "empty".to_owned()));
    }
    host(&s.address).map_err(|why| invalid("address", why))?;
    if s.ca_cert.0.is_empty() {
        return Err(invalid("caCert", "empty".to_owned()));
    }
    Ok(Service {
        name: name.to_owned(),
        audience: s.audience,
        address: s.address,
        ca_cert: s.ca_cert.0,
    })
}

/// The host of a `host:port` address (an IPv6 host in brackets, without them), which the
/// service's certificate must name.
pub fn host(address: &str) -> Result<&str, String> {
    let (h, port) = address
        .rsplit_once(':')
        .ok_or_else(|| format!("{address:?} is not host:port"))?;
    port.parse::<u16>()
        .map_err(|_| format!("{address:?}: port {port:?} is not a port number"))?;
    let h = h
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(h);
    if h.is_empty() {
        return Err(format!("{address:?} has no host"));
    }
    Ok(h)
}

/// A token of ServiceAccount `namespace/account` for `audience`, valid [`TOKEN_SECONDS`].
pub async fn token(
    client: &kube::Client,
    namespace: &str,
    account: &str,
    audience: &str,
) -> Result<String, Error> {
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let req = TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: Some(vec![audience.to_owned()]),
            expiration_seconds: Some(TOKEN_SECONDS),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    let out = api
        .create_token_request(account, &PostParams::default(), &req)
        .await
        .map_err(|source| Error::Api {
            what: format!(
                "TokenRequest for ServiceAccount {namespace}/{account} (audience {audience:?})"
            ),
            source,
        })?;
    out.status
        .and_then(|s| s.token)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| Error::NoToken {
            account: format!("{namespace}/{account}"),
        })
}

/// A TLS channel to the service, its certificate verified against the service's `caCert`
/// for the address's host.
pub async fn connect(s: &Service) -> Result<Channel, Error> {
    let err = |source| Error::Connect {
        name: s.name.clone(),
        address: s.address.clone(),
        source,
    };
    let host = host(&s.address).map_err(|why| Error::Invalid {
        name: s.name.clone(),
        field: "address",
        why,
    })?;
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(&s.ca_cert))
        .domain_name(host);
    Endpoint::from_shared(format!("https://{}", s.address))
        .map_err(err)?
        .tls_config(tls)
        .map_err(err)?
        .connect()
        .await
        .map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_is_read_as_the_api_publishes_it() {
        let data = serde_json::json!({"spec": {
            "audience": "cnsreplay-cbt",
            "address": "127.0.0.1:6443",
            "caCert": "LS0tLS1CRUdJTg==",
        }});
        let s = parse("cnsreplay-csi.dev", &data).unwrap();
        assert_eq!(s.audience, "cnsreplay-cbt");
        assert_eq!(s.ca_cert, b"-----BEGIN");
        assert_eq!(host(&s.address).unwrap(), "127.0.0.1");
    }

    #[test]
    fn an_unusable_spec_names_its_field() {
        let data = serde_json::json!({"spec": {
            "audience": "a", "address": "no-port", "caCert": "LS0t",
        }});
        let e = parse("d", &data).unwrap_err().to_string();
        assert!(
            e.starts_with("SnapshotMetadataService d: spec.address:"),
            "{e}"
        );
        let data = serde_json::json!({"spec": {
            "audience": "", "address": "h:1", "caCert": "LS0t",
        }});
        let e = parse("d", &data).unwrap_err().to_string();
        assert_eq!(e, "SnapshotMetadataService d: spec.audience: empty");
        assert_eq!(host("[::1]:443").unwrap(), "::1");
        assert!(host(":443").is_err());
    }
}
