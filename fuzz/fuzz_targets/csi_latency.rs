//! Fuzzes the CSI driver's injected-latency settings: a distribution string, the JSON config
//! file (`--latency-config`) and StorageClass-style `key=value` parameters. Errors are fine;
//! panics are not, and whatever validates must also plan and sample.
#![no_main]

use std::collections::BTreeMap;

use csi_driver::latency::{Dist, LatencyConfig, Rng, parse_duration, validate_params};

const OPS: [&str; 3] = ["CreateVolume", "NodePublishVolume", "DeleteSnapshot"];

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = parse_duration(&text);
    if let Ok(d) = Dist::parse("fuzz", &text) {
        let mut rng = Rng::new(1);
        for _ in 0..8 {
            let _ = d.sample(&mut rng);
        }
    }
    if let Ok(cfg) = serde_json::from_slice::<LatencyConfig>(data)
        && cfg.validate().is_ok()
    {
        let mut rng = Rng::new(2);
        for op in OPS {
            let _ = cfg.plan(op, &BTreeMap::new(), &mut rng).total();
        }
    }
    let params: BTreeMap<String, String> = text
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    if validate_params(&params).is_ok() {
        let mut rng = Rng::new(3);
        for op in OPS {
            let _ = LatencyConfig::default().plan(op, &params, &mut rng).total();
        }
    }
});
