//! End-to-end tests of the `cnsreplay` binary: real processes, real files, exit codes and
//! output snapshots.
//!
//! The harness (`harness/`) is apart from the tests, its names re-exported here. The tests
//! that need testenv's cluster live under `cluster::` and the rest need none (some need root
//! and skip without it), so that CI runs the fast part first (`-- --skip cluster::`) and the
//! cluster part once the cluster is up (`-- cluster::`); scripts/test.sh.

mod harness;
#[allow(unused_imports)] // which harness names a build of the suite uses varies
pub(crate) use harness::*;

mod analyze;
mod basics;
mod capacity;
mod cbt;
mod cluster;
mod convert_import;
mod exit_codes;
mod gate;
mod group;
mod group_cut;
mod identity;
mod modify;
mod outputs;
mod precheck;
mod prometheus;
mod report;
mod run;
mod speed;
mod synth;
mod trace_tools;
mod traps;
mod validity;
