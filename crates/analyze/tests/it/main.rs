//! Library tests of `analyze` on fabricated run directories: records are written exactly as
//! the replay engine writes them (`replay::EventRecord`), with a manifest naming a real trace.

mod compare;
mod features;
mod history;
mod load;
mod validity;

use std::path::{Path, PathBuf};

use replay::EventRecord;
use trace_format::OpType;

/// Writes a trace (JSON Lines) with `events` (already JSON objects without `at`/`id`; given as
/// `(at_ns, body)`), and `source_format` in the provenance when set. Returns its path.
pub fn write_trace(
    dir: &Path,
    name: &str,
    source_format: Option<&str>,
    events: &[(u64, String)],
) -> PathBuf {
    let mut text = String::from(r#"{"format":"cnsreplay-trace","version":1,"provenance":{"#);
    if let Some(s) = source_format {
        text.push_str(&format!(r#""source_format":"{s}""#));
    }
    text.push_str("}}\n");
    for (i, (at, body)) in events.iter().enumerate() {
        text.push_str(&format!(r#"{{"at":{at},"id":{},{body}}}"#, i + 1));
        text.push('\n');
    }
    let path = dir.join(name);
    fs_err::write(&path, text).expect("write trace");
    path
}

/// A record: op, intended instant, service time; started = intended, no waits.
pub fn rec(id: u64, op: OpType, intended: u64, service: u64) -> EventRecord {
    EventRecord::ok(id, op, intended, intended, intended + service)
}

/// Writes a run directory for `trace` holding `records`, replayed at `speed`.
pub fn write_run(dir: &Path, trace: &Path, speed: f64, records: &[EventRecord]) -> PathBuf {
    write_run_at(dir, trace, speed, records, "2026-01-01T00:00:00Z")
}

/// [`write_run`] of a run that started at `started` (RFC 3339).
pub fn write_run_at(
    dir: &Path,
    trace: &Path,
    speed: f64,
    records: &[EventRecord],
    started: &str,
) -> PathBuf {
    fs_err::create_dir_all(dir).expect("run dir");
    let t = trace_format::TraceReader::open(trace).expect("trace");
    let manifest = serde_json::json!({
        "tool": "cnsreplay 0.1.0",
        // Unique, as a run's id is: the points of a sweep are different runs.
        "run_id": format!("test-run:{}", dir.display()),
        "trace": {
            "path": trace.display().to_string(),
            "sha256": replay::rundir::sha256_file(trace).expect("sha"),
            "header": t.header(),
        },
        "options": {"speed": speed},
        "seed": 0,
        "host": {"hostname": "h", "kernel": "k", "cpus": 2},
        "provider": {"name": "sim", "config": {}},
        "started": started,
        "state": "complete",
        "pid": 1,
    });
    fs_err::write(
        dir.join("manifest.json"),
        serde_json::to_vec_pretty(&manifest).expect("json"),
    )
    .expect("manifest");
    let mut text = String::new();
    for r in records {
        text.push_str(&serde_json::to_string(r).expect("record"));
        text.push('\n');
    }
    fs_err::write(dir.join("events.jsonl"), text).expect("events");
    dir.to_owned()
}

/// A deterministic lognormal-ish latency: `median · e^(sigma·z)` from a seeded generator.
pub fn lognormal(rng: &mut analyze::hist::Rng, median: f64, sigma: f64) -> u64 {
    let z = (-2.0 * rng.unit().ln()).sqrt() * (std::f64::consts::TAU * rng.unit()).cos();
    (median * (sigma * z).exp()) as u64
}
