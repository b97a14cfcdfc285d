//! The tests that need testenv's cluster (`CNSREPLAY_TESTENV`, testenv/README.md), most of
//! them its real kubelet node: each skips (one line) without it, or fails when
//! `CNSREPLAY_REQUIRE_TESTENV=1` / `CNSREPLAY_REQUIRE_REAL_NODE=1`. CI runs them after the
//! fast part of the suite, selected by their path (`cargo test -p cnsreplay --test it --
//! cluster::`); the harness they share is `crate::harness::cluster`.
//!
//! ## Layers
//!
//! Lowest first; a module imports only from its own layer or below (checked by
//! `scripts/check-layers.py`).
//!
//! 1. `outage` — stopping the real node's kubelet
//! 2. `attach_limit`, `cbt_kube`, `cleanup_run_id`, `group`, `group_cut`, `in_cluster`, `least_privilege`, `local_path`, `modify`, `real_node` (apart) — the tests

mod attach_limit;
mod cbt_kube;
mod cleanup_run_id;
mod group;
mod group_cut;
mod in_cluster;
mod least_privilege;
mod local_path;
mod modify;
mod outage;
mod real_node;
