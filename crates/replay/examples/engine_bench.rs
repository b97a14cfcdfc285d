//! Runs the engine on the sim provider without the CLI: `engine_bench TRACE RUNDIR` replays
//! TRACE with exponential service times (mean 200 µs) and prints dispatch lateness. A quick
//! loop for engine work; `scripts/bench-replay.sh` measures the release CLI end to end.

use std::sync::Arc;

use replay::sim::{Dur, Latency, SimConfig, SimProvider};
use replay::{RunControl, RunOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: engine_bench TRACE RUNDIR";
    let trace = args.next().ok_or(usage)?;
    let dir = args.next().ok_or(usage)?;
    let config = SimConfig {
        default: Latency::Exponential { mean: Dur(200_000) },
        ..SimConfig::default()
    };
    let provider = Arc::new(SimProvider::new(config)?);
    let out = replay::run(
        trace.as_ref(),
        dir.as_ref(),
        &provider,
        &RunOptions::default(),
        &RunControl::new(),
    )?;
    let s = out.summary;
    let l = s.lateness;
    let us = |ns: u64| ns as f64 / 1000.0;
    let mut w = std::io::stdout().lock();
    std::io::Write::write_fmt(
        &mut w,
        format_args!(
            "{} events in {:.2} s ({:.0}/s); lateness p50 {:.1} µs p90 {:.1} p99 {:.1} p99.9 {:.1} max {:.1}; pickup p50 {:.1} µs p99 {:.1} p99.9 {:.1}\n",
            s.dispatched,
            s.wall_seconds,
            s.ops_per_second,
            us(l.p50),
            us(l.p90),
            us(l.p99),
            us(l.p999),
            us(l.max),
            us(s.pickup.p50),
            us(s.pickup.p99),
            us(s.pickup.p999)
        ),
    )?;
    Ok(())
}
