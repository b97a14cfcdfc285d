//! Scrapes the cluster's own timing plane for [`replay::cluster`]: the CSI sidecars'
//! Prometheus endpoints (`--csi-metrics URL`, plain `http://`, read with a bare HTTP/1.0 GET)
//! and, when asked (`--apiserver-metrics`), the API server's `/metrics` through the client
//! (it needs `get` on the non-resource URL `/metrics`). Scraped once when the clock starts
//! and once after the last operation; the difference is the run's. Besides the calls'
//! latencies, the queues in front of them: API priority and fairness per priority level, the
//! sidecars' work queues and client-side rate limiters (what `capacity` names as a limit).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use replay::cluster::{self, ClusterTiming, Hist};

use crate::Kube;

/// One scrape of every endpoint.
#[derive(Debug, Default, Clone)]
pub(crate) struct Scrape {
    csi: BTreeMap<String, Hist>,
    api: BTreeMap<String, Hist>,
    apf_wait: BTreeMap<String, Hist>,
    apf_rejected: BTreeMap<String, f64>,
    queues: BTreeMap<String, Hist>,
    limiters: BTreeMap<String, Hist>,
    sources: Vec<String>,
    errors: Vec<String>,
}

/// `GET url` (`http://host:port/path`), the body on a 200.
fn http_get(url: &str) -> Result<String, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| "only http:// URLs are read".to_owned())?;
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/metrics"),
    };
    let addr = std::net::ToSocketAddrs::to_socket_addrs(host)
        .map_err(|e| e.to_string())?
        .next()
        .ok_or_else(|| format!("{host}: no address"))?;
    let mut c =
        TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(|e| e.to_string())?;
    c.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    write!(
        c,
        "GET {path} HTTP/1.0\r\nHost: {host}\r\nAccept: text/plain\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut resp = Vec::new();
    c.read_to_end(&mut resp).map_err(|e| e.to_string())?;
    let resp = String::from_utf8_lossy(&resp);
    let (head, body) = resp
        .split_once("\r\n\r\n")
        .ok_or_else(|| "no HTTP response".to_owned())?;
    let status = head.lines().next().unwrap_or_default();
    if status.split_whitespace().nth(1).is_none_or(|c| c != "200") {
        return Err(format!("HTTP status {status:?}"));
    }
    Ok(body.to_owned())
}

impl Kube {
    /// Scrapes every configured endpoint now (on the provider's runtime for the API server).
    pub(crate) fn scrape(&self, rt: &tokio::runtime::Runtime) -> Scrape {
        let mut s = Scrape::default();
        for url in &self.config.csi_metrics {
            match http_get(url) {
                Ok(text) => {
                    for (k, h) in cluster::csi_histograms(&text) {
                        s.csi.entry(k).or_default().add(&h);
                    }
                    for (k, h) in cluster::queue_histograms(&text) {
                        s.queues.entry(k).or_default().add(&h);
                    }
                    if let Some(h) = cluster::client_limiter_histogram(&text) {
                        s.limiters.insert(url.clone(), h);
                    }
                    s.sources.push(url.clone());
                }
                Err(e) => s.errors.push(format!("{url}: {e}")),
            }
        }
        if self.config.apiserver_metrics {
            let req = http::Request::get("/metrics").body(Vec::new());
            let text = match req {
                Ok(r) => rt
                    .block_on(self.client.request_text(r))
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match text {
                Ok(t) => {
                    s.api = cluster::apiserver_histograms(&t);
                    s.apf_wait = cluster::apf_wait_histograms(&t);
                    s.apf_rejected = cluster::apf_rejected_counts(&t);
                    s.sources.push("apiserver /metrics".into());
                }
                Err(e) => s.errors.push(format!("apiserver /metrics: {e}")),
            }
        }
        s
    }
}

/// The run's calls: `after − before`.
pub(crate) fn timing(before: &Scrape, after: &Scrape) -> ClusterTiming {
    let mut errors = before.errors.clone();
    errors.extend(
        after
            .errors
            .iter()
            .filter(|e| !before.errors.contains(e))
            .cloned(),
    );
    ClusterTiming {
        csi: cluster::between(&before.csi, &after.csi),
        apiserver: cluster::between(&before.api, &after.api),
        apf_wait: cluster::between(&before.apf_wait, &after.apf_wait),
        apf_rejected: cluster::counted_between(&before.apf_rejected, &after.apf_rejected),
        queue_wait: cluster::between(&before.queues, &after.queues),
        client_limiter: cluster::between(&before.limiters, &after.limiters),
        sources: after.sources.clone(),
        errors,
    }
}
