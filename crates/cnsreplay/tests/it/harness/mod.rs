//! The harness of the CLI suite, apart from its tests: every name here is re-exported at the
//! suite's root (`crate::ok`, `crate::Cluster`, …), which is how the tests reach it.
//!
//! ## Layers
//!
//! Lowest first; a module imports only from its own layer or below (checked by
//! `scripts/check-layers.py`).
//!
//! 1. `cli` — running the binary, its output, paths as arguments
//! 2. `runs`, `schema` — traces and runs the tests make and read; JSON checked against schemas
//! 3. `cluster` — testenv's cluster and real node, for the tests under `cluster::`

mod cli;
mod cluster;
mod runs;
mod schema;

pub(crate) use cli::*;
pub(crate) use cluster::*;
pub(crate) use runs::*;
pub(crate) use schema::*;
