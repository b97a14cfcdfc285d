//! The CSI v1 wire types, generated from `proto/` at build time (pure-Rust `protox`, no system
//! `protoc`): the services `cnsreplay-csi` serves and the SnapshotMetadata service the
//! metadata sidecar calls on it ([`pb`]), and the kubelet's plugin registration
//! ([`pb_registration`]). A crate of its own so that the sidecar, which only speaks the
//! protocol, does not link the driver.

#[allow(
    missing_docs,
    clippy::all,
    clippy::pedantic,
    unused_qualifications,
    rust_2018_idioms
)]
/// Code generated from `proto/csi.proto` and `proto/snapshot_metadata.proto` (CSI v1 wire
/// format).
pub mod pb {
    tonic::include_proto!("csi.v1");
}

#[allow(
    missing_docs,
    clippy::all,
    clippy::pedantic,
    unused_qualifications,
    rust_2018_idioms
)]
/// Code generated from `proto/pluginregistration.proto` (the kubelet's plugin registration).
pub mod pb_registration {
    tonic::include_proto!("pluginregistration");
}
