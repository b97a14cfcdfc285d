//! `cnsreplay-csi`: a CSI driver (Identity, Controller, Node over a Unix socket, tonic) whose
//! storage work is the `local` provider's ([`local_storage`], shared with it): a volume is an image
//! file under the driver's root (ext4 for mount volumes, raw for block volumes); publish
//! attaches it as a loop device (as root), stage mounts it, node publish bind-mounts it;
//! snapshots and clones are reflink-or-full copies; expansion grows the file, the loop
//! device and the file system; the SnapshotMetadata service lists a snapshot's allocated and
//! changed blocks from the images themselves ([`metadata`]).
//!
//! Why: behind the real Kubernetes controllers and CSI sidecars, with zero injected latency
//! it isolates Kubernetes' own share of provisioning and attach time; with latency
//! distributions ([`latency`]) it stands in for a slow provider at any scale. Every call's
//! provider time goes to `ROOT/ops.jsonl` ([`state::OpRecord`]).
//!
//! Idempotency follows the spec: names are the keys of CreateVolume and CreateSnapshot, a
//! repeated publish returns the same context, deletes of unknown ids succeed; two calls on the
//! same object at once get ABORTED (the sidecars retry). State is persisted in
//! `ROOT/state.json` after every change ([`state`]). Without root, volumes are plain files and
//! publish/stage/mount only record (no loop devices, no mounts).
//!
//! ## Layers
//!
//! Lowest first; a module imports only from its own layer or below (checked by
//! `scripts/check-layers.py`). The wire types are the `csi-proto` crate's ([`pb`]), the storage
//! the `local-storage` crate's; [`to_i64`], the one helper every layer needs, is defined here.
//!
//! 1. `latency`, `state` — injected latency; the persisted state and the call log
//! 2. `access`, `driver` — what a request's capabilities ask for; the shared driver, a call's life
//! 3. `snapshot`, `volume`, `throttle` — snapshot work; volume work; I/O limits on the node
//! 4. `controller`, `group`, `metadata`, `node` (apart) — the CSI services
//! 5. `server`, `registration` — serving them, and registering with the kubelet

mod access;
mod controller;
mod driver;
mod group;
pub mod latency;
pub mod metadata;
mod node;
mod registration;
mod server;
mod snapshot;
pub mod state;
pub mod throttle;
mod volume;

/// The generated CSI wire types ([`csi_proto`]), where this crate used to generate them.
pub use csi_proto::{pb, pb_registration};
pub use driver::{Driver, DriverConfig, DriverError};
pub use registration::{Registered, check_socket_name, kubelet_authority, serve_registration};
pub use server::{Served, serve};

/// The wire's `int64` for a size or count (saturating; sizes here never come near it).
pub(crate) fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
