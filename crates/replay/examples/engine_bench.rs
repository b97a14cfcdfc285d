//! Runs the engine without the CLI: `engine_bench TRACE RUNDIR` replays TRACE on the sim
//! provider with exponential service times (mean 200 µs), or on the `noop` provider with
//! `PROVIDER=noop`, and prints the rate, start lateness and its parts, and the verdict. A
//! quick loop for engine work: the environment variables SPEED (replay speed), LANES,
//! MIN_WAKE_NS, PIN=0|1, REALTIME=0|1 and VALIDITY (`KEY=VALUE,…` as `--validity`) override
//! the options; `scripts/bench-replay.sh` measures the release CLI end to end.

use std::sync::Arc;

use provider_sim::{Dur, Latency, SimConfig, SimProvider};
use replay::{Provider, RunControl, RunOptions, RunOutcome};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: engine_bench TRACE RUNDIR";
    let trace = args.next().ok_or(usage)?;
    let dir = args.next().ok_or(usage)?;
    let mut opts = RunOptions {
        speed: std::env::var("SPEED")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1.0),
        timing: replay::TimingOptions {
            lanes: env_or("LANES", 0) as usize,
            min_wake_ns: env_or("MIN_WAKE_NS", replay::TimingOptions::default().min_wake_ns),
            pin: env_or("PIN", 1) == 1,
            realtime: env_or("REALTIME", 1) == 1,
        },
        ..RunOptions::default()
    };
    if let Ok(v) = std::env::var("VALIDITY") {
        for kv in v.split(',') {
            opts.validity.set(kv)?;
        }
    }
    let out = if std::env::var("PROVIDER").as_deref() == Ok("noop") {
        bench(&trace, &dir, &Arc::new(replay::noop::NoopProvider), &opts)?
    } else {
        let config = SimConfig {
            default: Latency::Exponential { mean: Dur(200_000) },
            ..SimConfig::default()
        };
        bench(&trace, &dir, &Arc::new(SimProvider::new(config)?), &opts)?
    };
    let s = out.summary;
    let (l, st) = (&s.lateness, &s.start_lateness);
    let us = |ns: u64| ns as f64 / 1000.0;
    let rate = s.dispatch_rate.clone().unwrap_or_default();
    let v = s.validity.clone().unwrap_or_default();
    let mut w = std::io::stdout().lock();
    std::io::Write::write_fmt(
        &mut w,
        format_args!(
            "{} events in {:.2} s ({:.0}/s completed); dispatch rate {:.0} of {:.0}/s; start \
             lateness p50 {:.1} µs p99 {:.1} p99.9 {:.1} max {:.1}; lateness p50 {:.1} µs p99 \
             {:.1} p99.9 {:.1}; pickup p50 {:.1} µs p99 {:.1} p99.9 {:.1}; workers busy {:.0} %; \
             verdict {}{}{}\n",
            s.dispatched,
            s.wall_seconds,
            s.ops_per_second,
            rate.achieved,
            rate.intended,
            us(st.p50),
            us(st.p99),
            us(st.p999),
            us(st.max),
            us(l.p50),
            us(l.p99),
            us(l.p999),
            us(s.pickup.p50),
            us(s.pickup.p99),
            us(s.pickup.p999),
            100.0 * s.workers_busy.unwrap_or(0.0),
            v.verdict,
            if v.verdict == replay::Verdict::Valid {
                ""
            } else {
                ": "
            },
            v.evidence()
        ),
    )?;
    Ok(())
}

fn bench<P: Provider>(
    trace: &str,
    dir: &str,
    provider: &Arc<P>,
    opts: &RunOptions,
) -> Result<RunOutcome, replay::Error> {
    replay::run(
        trace.as_ref(),
        dir.as_ref(),
        provider,
        opts,
        &RunControl::new(),
    )
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
