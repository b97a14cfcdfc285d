//! The cluster's own timing plane over a run: what the CSI sidecars
//! (`csi_sidecar_operations_seconds`) and the API server (`apiserver_request_duration_seconds`)
//! measured while the run's operations went through them, beside what the run measured.
//!
//! Why: a slow `create_volume` is either the storage system (the CSI `CreateVolume` call) or
//! the control plane around it (API server, provisioner queues). A provider scrapes the
//! Prometheus endpoints before the run's first event and after its last (kube-burner's metric
//! profiles do the same with a Prometheus server; here no server is needed) and reports the
//! difference of the cumulative histograms: the calls made during the run and their latency
//! percentiles, interpolated within buckets as PromQL's `histogram_quantile` does. Anything
//! else on the cluster during the run counts too; the counts say how much that was.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Calls of one kind during the run and their latency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CallLatency {
    /// Calls completed during the run.
    pub count: u64,
    /// Their total duration, seconds.
    pub sum_seconds: f64,
    /// Median, seconds (interpolated within its bucket).
    pub p50: f64,
    /// 90th percentile, seconds.
    pub p90: f64,
    /// 99th percentile, seconds.
    pub p99: f64,
    /// Upper bounds (seconds) of the buckets holding the median, the 90th and the 99th
    /// percentile (`None`: above the highest bound). With coarse buckets (the sidecars' first
    /// is 0–100 ms) these say more than the interpolated values: "≤ 100 ms".
    pub p50_le: Option<f64>,
    /// See `p50_le`.
    pub p90_le: Option<f64>,
    /// See `p50_le`.
    pub p99_le: Option<f64>,
}

/// The cluster's timing plane over a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ClusterTiming {
    /// CSI calls by method (`CreateVolume`, `ControllerPublishVolume`, …), summed over the
    /// sidecars, drivers and gRPC codes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub csi: BTreeMap<String, CallLatency>,
    /// API server requests on storage objects and pods by `VERB resource[/subresource]`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub apiserver: BTreeMap<String, CallLatency>,
    /// API priority and fairness: how long the API server's requests that executed waited
    /// in their priority level's queues first, by priority level
    /// (`apiserver_flowcontrol_request_wait_duration_seconds{execute="true"}`): the server's
    /// own queue in front of every request, the run's and everyone else's in that level.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub apf_wait: BTreeMap<String, CallLatency>,
    /// Requests API priority and fairness rejected (HTTP 429), by priority level
    /// (`apiserver_flowcontrol_rejected_requests_total`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub apf_rejected: BTreeMap<String, u64>,
    /// How long work waited in the sidecars' (controllers') work queues before a worker took
    /// it, by queue (`workqueue_queue_duration_seconds`: `claims` and `volumes` of the
    /// provisioner, `csi-attacher-va`, …): a sidecar short of workers or of client QPS shows
    /// here before its CSI calls do.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub queue_wait: BTreeMap<String, CallLatency>,
    /// Waits in the sidecars' own client-side rate limiters (client-go's
    /// `rest_client_rate_limiter_duration_seconds`, all verbs), by metrics endpoint; only the
    /// sidecars that export it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub client_limiter: BTreeMap<String, CallLatency>,
    /// The endpoints scraped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<String>,
    /// Endpoints that could not be read, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// The CSI method whose latency is the storage part of an op type (by its name).
pub fn csi_method_of(op: &str) -> Option<&'static str> {
    Some(match op {
        "create_volume" => "CreateVolume",
        "delete_volume" => "DeleteVolume",
        "attach" => "ControllerPublishVolume",
        "detach" => "ControllerUnpublishVolume",
        "snapshot" => "CreateSnapshot",
        "delete_snapshot" => "DeleteSnapshot",
        "resize" => "ControllerExpandVolume",
        _ => return None,
    })
}

/// A cumulative histogram summed over series: `le` → count, with sum and count.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Hist {
    /// Cumulative counts by upper bound (`f64::INFINITY` for `+Inf`), ascending.
    pub buckets: Vec<(f64, f64)>,
    /// Sum of observations.
    pub sum: f64,
    /// Number of observations.
    pub count: f64,
}

impl Hist {
    /// Adds `other`'s observations (the same calls seen by another sidecar).
    pub fn add(&mut self, other: &Hist) {
        for (le, c) in &other.buckets {
            self.add_bucket(*le, *c);
        }
        self.sum += other.sum;
        self.count += other.count;
    }

    fn add_bucket(&mut self, le: f64, v: f64) {
        match self.buckets.iter_mut().find(|(b, _)| *b == le) {
            Some((_, c)) => *c += v,
            None => {
                self.buckets.push((le, v));
                self.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
            }
        }
    }

    /// `self − before` (the observations between the two scrapes); series missing before
    /// count from zero, and a counter reset (a sidecar restarted) leaves what is after it.
    pub fn since(&self, before: &Hist) -> Hist {
        let reset = self.count < before.count;
        let prior = |le: f64| {
            if reset {
                0.0
            } else {
                before
                    .buckets
                    .iter()
                    .find(|(b, _)| *b == le)
                    .map_or(0.0, |(_, c)| *c)
            }
        };
        Hist {
            buckets: self
                .buckets
                .iter()
                .map(|(le, c)| (*le, (c - prior(*le)).max(0.0)))
                .collect(),
            sum: if reset {
                self.sum
            } else {
                (self.sum - before.sum).max(0.0)
            },
            count: if reset {
                self.count
            } else {
                (self.count - before.count).max(0.0)
            },
        }
    }

    /// The `q` quantile as PromQL's `histogram_quantile` computes it: linear within the
    /// bucket holding the rank (from 0 for the first bucket); in the `+Inf` bucket, the
    /// highest finite bound.
    pub fn quantile(&self, q: f64) -> f64 {
        let Some(&(_, total)) = self.buckets.last() else {
            return f64::NAN;
        };
        if total <= 0.0 {
            return f64::NAN;
        }
        let rank = q * total;
        let mut lo_le = 0.0;
        let mut lo_c = 0.0;
        for &(le, c) in &self.buckets {
            if c >= rank {
                if le.is_infinite() {
                    return lo_le;
                }
                if c == lo_c {
                    return le;
                }
                return lo_le + (le - lo_le) * (rank - lo_c) / (c - lo_c);
            }
            lo_le = le;
            lo_c = c;
        }
        lo_le
    }

    /// The upper bound of the bucket holding the `q` quantile (`None`: the `+Inf` bucket, or
    /// no observation).
    pub fn bound(&self, q: f64) -> Option<f64> {
        let &(_, total) = self.buckets.last()?;
        let rank = q * total;
        self.buckets
            .iter()
            .find(|(_, c)| *c >= rank && total > 0.0)
            .map(|(le, _)| *le)
            .filter(|le| le.is_finite())
    }

    /// The run's calls of this kind.
    pub fn latency(&self) -> CallLatency {
        CallLatency {
            count: self.count.round() as u64,
            sum_seconds: self.sum,
            p50: self.quantile(0.5),
            p90: self.quantile(0.9),
            p99: self.quantile(0.99),
            p50_le: self.bound(0.5),
            p90_le: self.bound(0.9),
            p99_le: self.bound(0.99),
        }
    }
}

/// A series' labels: name, unescaped value.
pub type Labels<'a> = Vec<(&'a str, String)>;

/// How [`histograms`] groups series: the group of a series' labels, `None` to leave it out.
pub type GroupBy<'a> = &'a dyn Fn(&[(&str, String)]) -> Option<String>;

/// One sample line: name, labels, value.
fn sample(line: &str) -> Option<(&str, Labels<'_>, f64)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line.find(['{', ' '])?;
    let name = &line[..name_end];
    let mut labels = Vec::new();
    let mut rest = &line[name_end..];
    if let Some(r) = rest.strip_prefix('{') {
        let mut r = r;
        loop {
            r = r.trim_start_matches([',', ' ']);
            if let Some(after) = r.strip_prefix('}') {
                rest = after;
                break;
            }
            let eq = r.find('=')?;
            let key = r[..eq].trim();
            let mut chars = r[eq + 1..].char_indices();
            if chars.next()?.1 != '"' {
                return None;
            }
            let mut val = String::new();
            let mut end = None;
            let mut escaped = false;
            for (i, c) in chars {
                match (escaped, c) {
                    (true, 'n') => {
                        val.push('\n');
                        escaped = false;
                    }
                    (true, c) => {
                        val.push(c);
                        escaped = false;
                    }
                    (false, '\\') => escaped = true,
                    (false, '"') => {
                        end = Some(eq + 1 + i + 1);
                        break;
                    }
                    (false, c) => val.push(c),
                }
            }
            labels.push((key, val));
            r = &r[end?..];
        }
    }
    let value = rest.split_whitespace().next()?;
    let v = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some((name, labels, v))
}

/// The histograms of metric `base` in a Prometheus text exposition, summed per the group
/// `key` gives each series' labels (`None`: the series is left out).
pub fn histograms(text: &str, base: &str, key: GroupBy<'_>) -> BTreeMap<String, Hist> {
    let mut out: BTreeMap<String, Hist> = BTreeMap::new();
    let (bucket, sum, count) = (
        format!("{base}_bucket"),
        format!("{base}_sum"),
        format!("{base}_count"),
    );
    for line in text.lines() {
        let Some((name, labels, v)) = sample(line) else {
            continue;
        };
        if name != bucket && name != sum && name != count {
            continue;
        }
        let Some(k) = key(&labels) else { continue };
        let h = out.entry(k).or_default();
        if name == bucket {
            let le = labels
                .iter()
                .find(|(k, _)| *k == "le")
                .and_then(|(_, v)| match v.as_str() {
                    "+Inf" => Some(f64::INFINITY),
                    v => v.parse().ok(),
                });
            if let Some(le) = le {
                h.add_bucket(le, v);
            }
        } else if name == sum {
            h.sum += v;
        } else {
            h.count += v;
        }
    }
    out
}

fn label<'a>(labels: &'a [(&str, String)], k: &str) -> Option<&'a str> {
    labels
        .iter()
        .find(|(n, _)| *n == k)
        .map(|(_, v)| v.as_str())
}

/// CSI sidecars' `csi_sidecar_operations_seconds` by method (`/csi.v1.Controller/CreateVolume`
/// → `CreateVolume`).
pub fn csi_histograms(text: &str) -> BTreeMap<String, Hist> {
    histograms(text, "csi_sidecar_operations_seconds", &|l| {
        label(l, "method_name").map(|m| m.rsplit('/').next().unwrap_or(m).to_owned())
    })
}

/// The API server's `apiserver_request_duration_seconds` on storage objects and pods, by
/// `VERB resource[/subresource]`.
pub fn apiserver_histograms(text: &str) -> BTreeMap<String, Hist> {
    histograms(text, "apiserver_request_duration_seconds", &|l| {
        let resource = label(l, "resource")?;
        if !matches!(
            resource,
            "persistentvolumeclaims"
                | "persistentvolumes"
                | "pods"
                | "volumeattachments"
                | "volumesnapshots"
                | "volumesnapshotcontents"
        ) {
            return None;
        }
        let verb = label(l, "verb")?;
        Some(match label(l, "subresource").filter(|s| !s.is_empty()) {
            Some(sub) => format!("{verb} {resource}/{sub}"),
            None => format!("{verb} {resource}"),
        })
    })
}

/// The API server's API priority and fairness queue waits of requests that executed, by
/// priority level.
pub fn apf_wait_histograms(text: &str) -> BTreeMap<String, Hist> {
    histograms(
        text,
        "apiserver_flowcontrol_request_wait_duration_seconds",
        &|l| {
            (label(l, "execute") == Some("true"))
                .then(|| label(l, "priority_level").map(str::to_owned))
                .flatten()
        },
    )
}

/// The sum of counter `name`'s series per the group `key` gives each series' labels.
fn counters(text: &str, name: &str, key: GroupBy<'_>) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for (n, labels, v) in text.lines().filter_map(sample) {
        if n == name
            && let Some(k) = key(&labels)
        {
            *out.entry(k).or_insert(0.0) += v;
        }
    }
    out
}

/// Requests API priority and fairness rejected, by priority level (all reasons).
pub fn apf_rejected_counts(text: &str) -> BTreeMap<String, f64> {
    counters(
        text,
        "apiserver_flowcontrol_rejected_requests_total",
        &|l| label(l, "priority_level").map(str::to_owned),
    )
}

/// Counter increases between two scrapes per group, leaving out groups with none (a reset
/// leaves what is after it).
pub fn counted_between(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(k, &v)| {
            let b = before.get(k).copied().unwrap_or(0.0);
            (k.clone(), if v < b { v } else { v - b })
        })
        .filter(|(_, d)| *d >= 0.5)
        .map(|(k, d)| (k, d.round() as u64))
        .collect()
}

/// Work-queue waits by queue name (client-go's own certificate-reload queue left out).
pub fn queue_histograms(text: &str) -> BTreeMap<String, Hist> {
    histograms(text, "workqueue_queue_duration_seconds", &|l| {
        label(l, "name")
            .filter(|n| *n != "DynamicClientCertificate")
            .map(str::to_owned)
    })
}

/// client-go's rate-limiter waits, all verbs and hosts summed (`None` when not exported).
pub fn client_limiter_histogram(text: &str) -> Option<Hist> {
    histograms(text, "rest_client_rate_limiter_duration_seconds", &|_| {
        Some(String::new())
    })
    .remove("")
}

/// The calls between two scrapes, per group, leaving out groups with none.
pub fn between(
    before: &BTreeMap<String, Hist>,
    after: &BTreeMap<String, Hist>,
) -> BTreeMap<String, CallLatency> {
    after
        .iter()
        .map(|(k, h)| (k, h.since(&before.get(k).cloned().unwrap_or_default())))
        .filter(|(_, h)| h.count >= 0.5)
        .map(|(k, h)| (k.clone(), h.latency()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = r#"# HELP csi_sidecar_operations_seconds [ALPHA] Container Storage Interface operation duration with gRPC error code status total
# TYPE csi_sidecar_operations_seconds histogram
csi_sidecar_operations_seconds_bucket{driver_name="csi.x",grpc_status_code="OK",method_name="/csi.v1.Controller/CreateVolume",le="0.1"} 1
csi_sidecar_operations_seconds_bucket{driver_name="csi.x",grpc_status_code="OK",method_name="/csi.v1.Controller/CreateVolume",le="0.25"} 2
csi_sidecar_operations_seconds_bucket{driver_name="csi.x",grpc_status_code="OK",method_name="/csi.v1.Controller/CreateVolume",le="+Inf"} 2
csi_sidecar_operations_seconds_sum{driver_name="csi.x",grpc_status_code="OK",method_name="/csi.v1.Controller/CreateVolume"} 0.3
csi_sidecar_operations_seconds_count{driver_name="csi.x",grpc_status_code="OK",method_name="/csi.v1.Controller/CreateVolume"} 2
apiserver_request_duration_seconds_bucket{component="apiserver",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1",le="0.05"} 3
apiserver_request_duration_seconds_bucket{component="apiserver",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1",le="+Inf"} 3
apiserver_request_duration_seconds_sum{component="apiserver",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 0.03
apiserver_request_duration_seconds_count{component="apiserver",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 3
apiserver_request_duration_seconds_count{component="apiserver",group="",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 99
"#;

    #[test]
    fn the_calls_between_two_scrapes_and_their_quantiles() {
        // Later: 8 more CreateVolume calls (6 ≤ 0.1 s, 1 ≤ 0.25 s, 1 above), one of them
        // failed with another code (summed in), and 2 more bindings.
        let after = BEFORE
            .replace(r#"le="0.1"} 1"#, r#"le="0.1"} 6"#)
            .replace(r#"le="0.25"} 2"#, r#"le="0.25"} 7"#)
            .replace(r#"le="+Inf"} 2"#, r#"le="+Inf"} 8"#)
            .replace("CreateVolume\"} 0.3", "CreateVolume\"} 1.5")
            .replace("CreateVolume\"} 2", "CreateVolume\"} 8")
            .replace(r#"le="0.05"} 3"#, r#"le="0.05"} 5"#)
            .replace(r#"le="+Inf"} 3"#, r#"le="+Inf"} 5"#)
            .replace("version=\"v1\"} 3", "version=\"v1\"} 5")
            + "csi_sidecar_operations_seconds_bucket{driver_name=\"csi.x\",grpc_status_code=\"Internal\",method_name=\"/csi.v1.Controller/CreateVolume\",le=\"0.1\"} 1\n\
               csi_sidecar_operations_seconds_bucket{driver_name=\"csi.x\",grpc_status_code=\"Internal\",method_name=\"/csi.v1.Controller/CreateVolume\",le=\"0.25\"} 1\n\
               csi_sidecar_operations_seconds_bucket{driver_name=\"csi.x\",grpc_status_code=\"Internal\",method_name=\"/csi.v1.Controller/CreateVolume\",le=\"+Inf\"} 1\n\
               csi_sidecar_operations_seconds_count{driver_name=\"csi.x\",grpc_status_code=\"Internal\",method_name=\"/csi.v1.Controller/CreateVolume\"} 1\n";
        let csi = between(&csi_histograms(BEFORE), &csi_histograms(&after));
        let cv = &csi["CreateVolume"];
        // 6 more OK calls (5 ≤ 0.1 s, 1 above 0.25 s) and the failed one (≤ 0.1 s), summed.
        assert_eq!(cv.count, 7);
        // Ranks: 6 of 7 ≤ 0.1 s; the median (rank 3.5) interpolates in [0, 0.1].
        assert!((cv.p50 - 0.1 * 3.5 / 6.0).abs() < 1e-9, "{cv:?}");
        // p99 (rank 6.93) is in the +Inf bucket: the highest finite bound.
        assert_eq!(cv.p99, 0.25);
        assert_eq!((cv.p50_le, cv.p99_le), (Some(0.1), None));
        let api = between(&apiserver_histograms(BEFORE), &apiserver_histograms(&after));
        assert_eq!(api.keys().collect::<Vec<_>>(), ["POST pods/binding"]);
        assert_eq!(api["POST pods/binding"].count, 2);
    }

    /// The control plane's queues: API priority and fairness per priority level (executed
    /// requests' waits, rejections), the sidecars' work queues and client limiters.
    #[test]
    fn queue_waits_and_rejections_between_two_scrapes() {
        let before = "\
apiserver_flowcontrol_request_wait_duration_seconds_bucket{execute=\"true\",flow_schema=\"service-accounts\",priority_level=\"workload-low\",le=\"0.005\"} 10
apiserver_flowcontrol_request_wait_duration_seconds_bucket{execute=\"true\",flow_schema=\"service-accounts\",priority_level=\"workload-low\",le=\"+Inf\"} 10
apiserver_flowcontrol_request_wait_duration_seconds_sum{execute=\"true\",flow_schema=\"service-accounts\",priority_level=\"workload-low\"} 0.01
apiserver_flowcontrol_request_wait_duration_seconds_count{execute=\"true\",flow_schema=\"service-accounts\",priority_level=\"workload-low\"} 10
apiserver_flowcontrol_request_wait_duration_seconds_count{execute=\"false\",flow_schema=\"service-accounts\",priority_level=\"workload-low\"} 4
apiserver_flowcontrol_rejected_requests_total{flow_schema=\"service-accounts\",priority_level=\"workload-low\",reason=\"queue-full\"} 2
workqueue_queue_duration_seconds_bucket{name=\"claims\",le=\"0.001\"} 5
workqueue_queue_duration_seconds_bucket{name=\"claims\",le=\"+Inf\"} 5
workqueue_queue_duration_seconds_count{name=\"claims\"} 5
workqueue_queue_duration_seconds_count{name=\"DynamicClientCertificate\"} 10
";
        let after = before
            .replace("le=\"+Inf\"} 10", "le=\"+Inf\"} 30")
            .replace("workload-low\"} 10", "workload-low\"} 30")
            .replace("reason=\"queue-full\"} 2", "reason=\"queue-full\"} 5")
            .replace(
                "name=\"claims\",le=\"+Inf\"} 5",
                "name=\"claims\",le=\"+Inf\"} 8",
            )
            .replace("name=\"claims\"} 5", "name=\"claims\"} 8")
            + "rest_client_rate_limiter_duration_seconds_bucket{host=\"h\",verb=\"POST\",le=\"+Inf\"} 3\n\
               rest_client_rate_limiter_duration_seconds_count{host=\"h\",verb=\"POST\"} 3\n";
        let w = between(&apf_wait_histograms(before), &apf_wait_histograms(&after));
        // 20 more executed requests, all of them above 5 ms (the rejected ones not counted).
        assert_eq!(w["workload-low"].count, 20);
        assert_eq!(w["workload-low"].p50_le, None);
        let r = counted_between(&apf_rejected_counts(before), &apf_rejected_counts(&after));
        assert_eq!(r, [("workload-low".to_owned(), 3)].into());
        let q = between(&queue_histograms(before), &queue_histograms(&after));
        assert_eq!(q.keys().collect::<Vec<_>>(), ["claims"]);
        assert_eq!(q["claims"].count, 3);
        assert!(client_limiter_histogram(before).is_none());
        assert_eq!(
            client_limiter_histogram(&after).expect("limiter").count,
            3.0
        );
    }

    #[test]
    fn quantiles_follow_histogram_quantile() {
        let h = Hist {
            buckets: vec![(0.1, 10.0), (0.2, 20.0), (f64::INFINITY, 20.0)],
            sum: 2.0,
            count: 20.0,
        };
        assert!((h.quantile(0.5) - 0.1).abs() < 1e-12);
        assert!((h.quantile(0.75) - 0.15).abs() < 1e-12);
        assert!((h.quantile(0.25) - 0.05).abs() < 1e-12);
        assert!(Hist::default().quantile(0.5).is_nan());
        // A counter reset (the sidecar restarted): what is after it.
        let before = Hist {
            buckets: vec![(0.1, 50.0), (f64::INFINITY, 50.0)],
            sum: 5.0,
            count: 50.0,
        };
        assert_eq!(h.since(&before).count, 20.0);
    }

    #[test]
    fn label_values_with_escapes_parse() {
        let (n, l, v) = sample(r#"x_bucket{a="q\"uo\\te",le="+Inf"} 3 1700000000000"#).unwrap();
        assert_eq!((n, v), ("x_bucket", 3.0));
        assert_eq!(l[0], ("a", "q\"uo\\te".to_owned()));
        assert_eq!(l[1], ("le", "+Inf".to_owned()));
        assert!(sample("# TYPE x histogram").is_none());
        assert!(sample("broken{a=1} 2").is_none());
    }
}
