//! Runs the engine on the sim provider without the CLI: `engine_bench TRACE RUNDIR` replays
//! TRACE with exponential service times (mean 200 µs) and prints dispatch lateness. A quick
//! loop for engine work (the environment variables LANES, MIN_WAKE_NS, PIN=0|1 and
//! REALTIME=0|1 override the timing options); `scripts/bench-replay.sh` measures the release CLI end to end.

use std::sync::Arc;

use provider_sim::{Dur, Latency, SimConfig, SimProvider};
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
        &RunOptions {
            timing: replay::TimingOptions {
                lanes: env_or("LANES", 0) as usize,
                min_wake_ns: env_or("MIN_WAKE_NS", replay::TimingOptions::default().min_wake_ns),
                pin: env_or("PIN", 1) == 1,
                realtime: env_or("REALTIME", 1) == 1,
            },
            ..RunOptions::default()
        },
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

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
