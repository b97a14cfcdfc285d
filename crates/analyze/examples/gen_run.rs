//! Writes a synthetic run directory for benchmarks: `manifest.json` naming a small trace, and
//! `events.jsonl` with N records in exactly the replay engine's shape (`replay::EventRecord`):
//! a mix of op types (90% `io`, the rest control ops), lognormal service times from a seed,
//! completion order by completion instant within each 1 s batch, 0.5% failures.
//!
//!   cargo run --release -p analyze --example gen_run -- N RUNDIR [SEED] [SCALE]
//!
//! SCALE multiplies every attach service time (1.0 by default): two directories with
//! different seeds (or SCALE 1.2) make a compare benchmark.

use std::io::Write;

use analyze::hist::Rng;
use replay::{EventRecord, Outcome};
use trace_format::OpType;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: gen_run N RUNDIR [SEED] [SCALE]";
    let n: u64 = args.get(1).ok_or(usage)?.parse()?;
    let dir = std::path::PathBuf::from(args.get(2).ok_or(usage)?);
    let seed: u64 = args.get(3).map_or(Ok(1), |s| s.parse())?;
    let scale: f64 = args.get(4).map_or(Ok(1.0), |s| s.parse())?;
    fs_err::create_dir_all(&dir)?;
    let trace = dir.join("trace.jsonl");
    fs_err::write(
        &trace,
        "{\"format\":\"cnsreplay-trace\",\"version\":1,\"provenance\":{\"generator\":\"gen_run\"}}\n\
         {\"at\":0,\"id\":1,\"marker\":{\"name\":\"synthetic\"}}\n",
    )?;
    let manifest = serde_json::json!({
        "tool": "cnsreplay 0.1.0 (gen_run)",
        "run_id": format!("gen-run-{seed}"),
        "trace": {
            "path": trace.display().to_string(),
            "sha256": replay::rundir::sha256_file(&trace)?,
            "header": trace_format::TraceReader::open(&trace)?.header(),
        },
        "options": {"speed": 1.0},
        "seed": seed,
        "host": {"hostname": "bench", "kernel": "", "cpus": 2},
        "provider": {"name": "sim", "config": {}},
        "started": "2026-01-01T00:00:00Z",
        "finished": "2026-01-01T00:01:40Z",
        "state": "complete",
        "pid": 1,
    });
    fs_err::write(
        dir.join("manifest.json"),
        serde_json::to_vec_pretty(&manifest)?,
    )?;
    let mut w =
        std::io::BufWriter::with_capacity(1 << 20, fs_err::File::create(dir.join("events.jsonl"))?);
    let mut rng = Rng::new(seed);
    let control = [
        OpType::CreateVolume,
        OpType::Attach,
        OpType::Snapshot,
        OpType::Detach,
        OpType::DeleteVolume,
    ];
    // 100k events per second of intended time.
    let gap = 10_000u64;
    for id in 1..=n {
        let op = if id % 10 == 0 {
            control[(id / 10 % 5) as usize]
        } else {
            OpType::Io
        };
        let median = if op == OpType::Io { 200e3 } else { 20e6 };
        let z = (-2.0 * rng.unit().ln()).sqrt() * (std::f64::consts::TAU * rng.unit()).cos();
        let mut service = median * (0.5 * z).exp();
        if op == OpType::Attach {
            service *= scale;
        }
        let intended = id * gap;
        let lateness = (rng.unit() * 20e3) as u64;
        let mut r = EventRecord::ok(
            id,
            op,
            intended,
            intended + lateness,
            intended + lateness + service as u64,
        );
        r.during_snapshot = op == OpType::Io && rng.unit() < 0.1;
        if rng.unit() < 0.005 {
            r.outcome = Outcome::Error;
            r.error_class = Some("sim_injected".into());
            r.error = Some(format!("injected failure of {op}"));
        }
        serde_json::to_writer(&mut w, &r)?;
        w.write_all(b"\n")?;
    }
    w.flush()?;
    Ok(())
}
