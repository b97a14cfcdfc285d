//! The repo's A/A batches example (`docs/analyze.md`, compare): fabricated run directories of
//! one unchanged system collected as a user comparing two versions would — three batches of
//! the base on three days (A/A batches for calibration), then one batch of the "new" version,
//! which is the same system. Every run: 600 attaches, lognormal 200 ms σ 0.3, multiplied by a
//! per-run slowdown `e^(0.1·Z)` (run-to-run CV ≈ 10 %) and a per-batch shift `e^(0.03·Z)`;
//! 0.2 % of attaches fail. Records have the replay engine's exact shape; the result is
//! deterministic, so the CLI's output on it is a snapshot test.

use std::path::{Path, PathBuf};

use replay::{EventRecord, Outcome};
use trace_format::OpType;

use crate::Result;
use crate::stats::hist::Rng;

/// Runs per batch.
pub const RUNS_PER_BATCH: usize = 4;
/// Attaches per run.
pub const EVENTS: u64 = 600;

/// Writes the trace and the runs under `dir`: `base-DAY-I` (3 batches) and `new-4-I`.
/// Returns (base runs, new runs), each in start order.
pub fn write_aa_batches(dir: &Path) -> Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    fs_err::create_dir_all(dir)?;
    let trace = dir.join("trace.jsonl");
    let mut text = String::from(
        "{\"format\":\"cnsreplay-trace\",\"version\":1,\"provenance\":{\"generator\":\"analyze::compare::example\"}}\n",
    );
    for i in 0..EVENTS {
        text.push_str(&format!(
            "{{\"at\":{},\"id\":{},\"attach\":{{\"workload\":\"w{i}\",\"volumes\":[]}}}}\n",
            i * 10_000_000,
            i + 1
        ));
    }
    fs_err::write(&trace, text)?;
    let header = trace_format::TraceReader::open(&trace)?.header().clone();
    let sha = replay::rundir::sha256_file(&trace)?;
    let mut rng = Rng::new(2026);
    let (mut base, mut new) = (Vec::new(), Vec::new());
    for day in 1..=4u32 {
        let batch = (0.03 * rng.normal()).exp();
        for i in 0..RUNS_PER_BATCH {
            let side = if day < 4 { "base" } else { "new" };
            let run = dir.join(format!("{side}-{day}-{i}"));
            fs_err::create_dir_all(&run)?;
            let slow = batch * (0.1 * rng.normal()).exp();
            let mut events = String::new();
            for id in 1..=EVENTS {
                let at = (id - 1) * 10_000_000;
                let service = (200e6 * slow * (0.3 * rng.normal()).exp()) as u64;
                let mut r = EventRecord::ok(id, OpType::Attach, at, at, at + service.max(1));
                if rng.unit() < 0.002 {
                    r.outcome = Outcome::Error;
                    r.error_class = Some("sim_injected".into());
                }
                events.push_str(&serde_json::to_string(&r).map_err(std::io::Error::other)?);
                events.push('\n');
            }
            fs_err::write(run.join("events.jsonl"), events)?;
            let manifest = serde_json::json!({
                "tool": "cnsreplay 0.1.0",
                "run_id": format!("example-{day}-{i}"),
                "trace": {"path": "../trace.jsonl", "sha256": sha, "header": header},
                "options": {"speed": 1.0},
                "seed": day * 100 + i as u32,
                "host": {"hostname": "example", "kernel": "k", "cpus": 2},
                "provider": {"name": "sim", "config": {}},
                "started": format!("2026-01-0{}T10:{:02}:00Z", day + 4, 2 * i),
                "state": "complete",
                "pid": 1,
            });
            fs_err::write(
                run.join("manifest.json"),
                serde_json::to_vec_pretty(&manifest).map_err(std::io::Error::other)?,
            )?;
            if day < 4 {
                base.push(run);
            } else {
                new.push(run);
            }
        }
    }
    Ok((base, new))
}
