//! What the workspace's integration tests share, written once: finding the local test
//! cluster of `testenv/` ([`testenv`]), running its `kubectl` ([`Kubectl`]), writing a
//! credential ([`write_secret`]), the first line of a test trace ([`trace`]), the rule for
//! a missing prerequisite ([`skip`]: a failure when `CNSREPLAY_REQUIRE_<WHAT>=1`, else a
//! skip that says so) and a turn on the cluster's real node across test processes
//! ([`NodeTurn`]).
//!
//! A dev-dependency only (`publish = false`), with no dependency but `serde_json`.
//!
//! ## Layers
//!
//! Lowest first; a module imports only from its own layer or below (checked by
//! `scripts/check-layers.py`).
//!
//! 1. `skip`, `secret`, `trace`, `node` — the rules, builders and locks that need nothing else
//! 2. `kubectl` — the cluster's `kubectl` as the admin
//! 3. `testenv` — the cluster of `CNSREPLAY_TESTENV`

pub mod kubectl;
pub mod node;
pub mod secret;
pub mod skip;
pub mod testenv;
pub mod trace;

pub use kubectl::Kubectl;
pub use node::NodeTurn;
pub use secret::write_secret;
pub use testenv::{TestEnv, testenv, testenv_alone};
