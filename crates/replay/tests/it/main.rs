//! Engine tests against the sim provider: coordinated omission, dependencies, concurrency
//! caps, timeouts, fail-fast and the run directory's states.

mod co;
mod engine;
mod setup;
mod timing;
mod validity;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use provider_sim::{SimConfig, SimProvider};
use replay::{EventRecord, RunControl, RunOptions, RunOutcome};
use trace_format::{Encoding, Event, Header, Op, TraceWriter};

/// Writes `events` as a JSON Lines trace in `dir`.
pub fn write_trace(dir: &Path, events: &[(u64, Op)]) -> PathBuf {
    let path = dir.join("trace.jsonl");
    let mut w =
        TraceWriter::create(&path, Some(Encoding::Jsonl), &Header::default()).expect("create");
    for (i, (at, op)) in events.iter().enumerate() {
        w.write(&Event {
            at: *at,
            id: i as u64,
            tenant: None,
            observed: None,
            op: op.clone(),
        })
        .expect("write");
    }
    w.finish().expect("finish");
    path
}

/// Runs a trace on the sim provider with `yaml` as its configuration.
pub fn run_sim(dir: &Path, events: &[(u64, Op)], yaml: &str, opts: &RunOptions) -> RunOutcome {
    let trace = write_trace(dir, events);
    let cfg = SimConfig::from_yaml(yaml, "test").expect("sim config");
    let p = Arc::new(SimProvider::new(cfg).expect("sim"));
    replay::run(&trace, &dir.join("run"), &p, opts, &RunControl::new()).expect("run")
}

/// The records of a run directory, in completion order.
pub fn records(run: &Path) -> Vec<EventRecord> {
    fs_err::read_to_string(run.join("events.jsonl"))
        .expect("events.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("record"))
        .collect()
}

/// `cordon_node` needs no object, so it exercises the engine alone.
pub fn cordon(n: &str) -> Op {
    Op::CordonNode(trace_format::NodeRef { node: n.into() })
}

/// One millisecond in ns.
pub const MS: u64 = 1_000_000;

/// Tests that load the CPUs (blocking providers, busy lanes) and the coordinated-omission test,
/// whose analytic bound needs the CPUs, take turns.
pub static CPU_HEAVY: std::sync::Mutex<()> = std::sync::Mutex::new(());
