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

/// One scrape of every endpoint.
#[derive(Debug, Default, Clone)]
pub(crate) struct Scrape {
    pub(crate) csi: BTreeMap<String, Hist>,
    pub(crate) api: BTreeMap<String, Hist>,
    pub(crate) apf_wait: BTreeMap<String, Hist>,
    pub(crate) apf_rejected: BTreeMap<String, f64>,
    pub(crate) queues: BTreeMap<String, Hist>,
    pub(crate) limiters: BTreeMap<String, Hist>,
    pub(crate) sources: Vec<String>,
    pub(crate) errors: Vec<String>,
}

/// `GET url` (`http://host:port/path`), the body on a 200.
pub(crate) fn http_get(url: &str) -> Result<String, String> {
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
