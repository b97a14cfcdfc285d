//! Integration tests of the kube provider against the local cluster (`testenv/`): set
//! `CNSREPLAY_TESTENV` to its `testenv.env`; without it every cluster test prints a skip
//! notice (and fails when `CNSREPLAY_REQUIRE_TESTENV=1`).

mod access;
mod audit_import;
mod capability;
mod common;
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
mod render;
mod seccomp;
mod workloads;
