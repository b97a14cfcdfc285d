//! Integration tests of the kube provider. The tests under `cluster::` run against the local
//! cluster (`testenv/`): set `CNSREPLAY_TESTENV` to its `testenv.env`; without it each prints
//! a skip notice (and fails when `CNSREPLAY_REQUIRE_TESTENV=1`). The others need no cluster;
//! CI runs them first and `cluster::` once the cluster is up (scripts/test.sh).

mod cluster;
mod common;
mod grants;
mod render;
