//! The client level: what talks to the API server and knows nothing of a run's context —
//! the shared watches and their store lookups, the foreign-object filter, the client-side
//! limiter, phase stamps, the object builders (and the snapshot CRDs), request errors,
//! discovery, what the run writes on nodes, the CSINode change log's data, the metric
//! scrapes' data, which snapshot errors are retried.
//!
//! ## Layers
//!
//! Lowest first; a module imports only from its own layer or below (checked by
//! `scripts/check-layers.py`).
//!
//! 1. `discovery`, `limiter`, `metrics`, `objects`, `room`, `snapshot_error`, `stamp`, `store` — leaves
//! 2. `nodes`, `request`, `watch` — what goes through the limiter
//! 3. `foreign` — the PV and VolumeAttachment watches' filter

pub(crate) mod discovery;
pub(crate) mod foreign;
pub mod limiter;
pub(crate) mod metrics;
pub(crate) mod nodes;
pub mod objects;
pub(crate) mod request;
pub(crate) mod room;
pub(crate) mod snapshot_error;
pub(crate) mod stamp;
pub(crate) mod store;
pub(crate) mod watch;
