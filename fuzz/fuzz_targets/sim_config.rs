//! Fuzzes the sim provider's settings: the YAML config file and the `--sim-latency` /
//! `--sim-stall` flag forms. Errors are fine (they name the file and field); panics are not,
//! and a config that parses must draw latencies and place completions around its stalls.
#![no_main]

use provider_sim::{Latency, SimConfig, Stall};

const DRAWS: [(f64, f64); 3] = [(1e-12, 0.5), (0.5, 0.5), (1.0 - 1e-12, 0.25)];

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(l) = Latency::parse(&text) {
        for (a, b) in DRAWS {
            let _ = l.sample(a, b);
        }
    }
    let _ = Stall::parse(&text);
    if let Ok(cfg) = SimConfig::from_yaml(&text, "fuzz.yaml") {
        for l in std::iter::once(&cfg.default).chain(cfg.ops.values()) {
            for (a, b) in DRAWS {
                let service = l.sample(a, b);
                for start in [0, 5_000_000_000, u64::MAX - 1] {
                    assert!(cfg.completion(start, service) >= start.saturating_add(service));
                }
            }
        }
    }
});
