//! The sim provider through the real engine: the queueing model's saturation rate and queue
//! growth against the analytic numbers, and its configuration.

mod config;
mod queue;
mod setup;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use provider_sim::{SimConfig, SimProvider};
use replay::{EventRecord, RunControl, RunOptions, RunOutcome};
use trace_format::{Encoding, Event, Header, Op, TraceWriter};

/// Writes `n` `cordon_node` events (no objects: the engine alone) every `gap` ns.
pub fn even_trace(dir: &Path, n: u64, gap: u64) -> PathBuf {
    let path = dir.join("trace.jsonl");
    let mut w =
        TraceWriter::create(&path, Some(Encoding::Jsonl), &Header::default()).expect("create");
    for i in 0..n {
        w.write(&Event {
            at: i * gap,
            id: i,
            tenant: None,
            observed: None,
            op: Op::CordonNode(trace_format::NodeRef { node: "n".into() }),
        })
        .expect("write");
    }
    w.finish().expect("finish");
    path
}

/// Runs `trace` on the sim with this YAML configuration.
pub fn run(dir: &Path, trace: &Path, yaml: &str) -> (RunOutcome, Vec<EventRecord>) {
    let cfg = SimConfig::from_yaml(yaml, "test").expect("sim config");
    let p = Arc::new(SimProvider::new(cfg).expect("sim"));
    let out_dir = dir.join("run");
    let out = replay::run(
        trace,
        &out_dir,
        &p,
        &RunOptions::default(),
        &RunControl::new(),
    )
    .expect("run");
    let recs = fs_err::read_to_string(out_dir.join("events.jsonl"))
        .expect("events.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("record"))
        .collect();
    (out, recs)
}

/// Offered and achieved rate (per s) over the middle 80 % of intended and completion instants.
pub fn rates(recs: &[EventRecord]) -> (f64, f64) {
    let mut i: Vec<u64> = recs.iter().map(|r| r.intended).collect();
    let mut c: Vec<u64> = recs.iter().map(|r| phase(r, "served")).collect();
    i.sort_unstable();
    c.sort_unstable();
    let (lo, hi) = (i.len() / 10, i.len() - 1 - i.len() / 10);
    let per_s = |v: &[u64]| (hi - lo) as f64 / ((v[hi] - v[lo]) as f64 / 1e9);
    (per_s(&i), per_s(&c))
}

/// A phase's end instant.
pub fn phase(r: &EventRecord, name: &str) -> u64 {
    r.phases
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("event {} has no {name} phase", r.id))
        .at
}

/// The time an operation waited in the sim's queue: service start − the sim took the call.
pub fn wait(r: &EventRecord) -> u64 {
    phase(r, "queue") - phase(r, "arrived")
}

/// Its service: completion − service start.
pub fn service(r: &EventRecord) -> u64 {
    phase(r, "served") - phase(r, "queue")
}

/// One millisecond in ns.
pub const MS: u64 = 1_000_000;
