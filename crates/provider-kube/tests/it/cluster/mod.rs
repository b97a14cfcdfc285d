//! The tests that need testenv's cluster (`CNSREPLAY_TESTENV`), selected in CI by their path
//! (`cargo test -p provider-kube --test it -- cluster::`). Their helpers: `crate::common`.
//!
//! ## Layers
//!
//! Lowest first; a module imports only from its own layer or below (checked by
//! `scripts/check-layers.py`).
//!
//! 1. `pod_path` — the real node's pod path, and its helpers the others use
//! 2. `access`, `audit_import`, `capability`, `csi`, `discovery`, `experiment`, `experiment2`, `failures`, `fidelity`, `foreign`, `ownership`, `pull_check`, `rbac`, `seccomp`, `workloads` (apart) — the tests

mod access;
mod audit_import;
mod capability;
mod csi;
mod discovery;
mod experiment;
mod experiment2;
mod failures;
mod fidelity;
mod foreign;
mod ownership;
mod pod_path;
mod pull_check;
mod rbac;
mod seccomp;
mod workloads;
