//! Built-in lifetime and cluster presets from published measurements. Sources and the
//! choices made where a source stops short are in `docs/synth.md`.

use crate::dist::{CdfPoint, Dist, Empirical, Interpolation};

/// Names accepted by `preset:` (and `--preset`) for lifetimes.
pub const LIFETIME_PRESETS: [&str; 4] = [
    "sysdig-2019",
    "alibaba-k8s-pods",
    "azure-functions-2019",
    "datadog-2018",
];

/// Containers per host reported by Sysdig's 2019 container usage report.
pub const CONTAINERS_PER_HOST_2019: u32 = 30;

/// Names accepted for `containers_per_host: {preset: …}`.
pub const HOST_PRESETS: [&str; 1] = ["containers-per-host-2019"];

const MIN: f64 = 60.0;
const HOUR: f64 = 3600.0;
const DAY: f64 = 86_400.0;
const WEEK: f64 = 7.0 * DAY;

/// Where the Sysdig CDF starts (P = 0): 1 second.
pub const SYSDIG_MIN_S: f64 = 1.0;
/// Where we end the Sysdig CDF's last 2 % (the report stops at 98 % ≤ 2 weeks): 8 weeks.
pub const SYSDIG_TAIL_END_S: f64 = 8.0 * WEEK;

/// The lifetime distribution of a preset, if the name is known.
pub fn lifetime(name: &str) -> Option<Dist> {
    Some(match name {
        // Sysdig 2019 Container Usage Report, container lifespan histogram (cumulative %).
        "sysdig-2019" => {
            let pts = [
                (10.0, 0.22),
                (MIN, 0.39),
                (5.0 * MIN, 0.54),
                (10.0 * MIN, 0.63),
                (30.0 * MIN, 0.73),
                (HOUR, 0.77),
                (6.0 * HOUR, 0.83),
                (DAY, 0.86),
                (WEEK, 0.94),
                (2.0 * WEEK, 0.98),
                (SYSDIG_TAIL_END_S, 1.0),
            ];
            Dist::Empirical(Empirical {
                points: pts.iter().map(|&(le, p)| CdfPoint { le, p }).collect(),
                interpolation: Interpolation::LogLinear,
                min: SYSDIG_MIN_S,
            })
        }
        // Alibaba cluster-trace-gpu-v2023 pod list: ln(lifetime / s) ~ N(6.444, 1.877²).
        "alibaba-k8s-pods" => Dist::Lognormal {
            mu: 6.444,
            sigma: 1.877,
        },
        // Azure Functions 2019 trace, execution times: ln(t / s) ~ N(−0.38, 2.36²).
        "azure-functions-2019" => Dist::Lognormal {
            mu: -0.38,
            sigma: 2.36,
        },
        // Datadog 2018 container report: an average container lifespan of about 2 days.
        "datadog-2018" => Dist::Exponential { mean: 2.0 * DAY },
        _ => return None,
    })
}
