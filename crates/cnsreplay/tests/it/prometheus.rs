//! The live metrics endpoint scraped by a real Prometheus server (Debian's `prometheus`
//! package): a 15 s run of 40 `create_volume`/s on the sim provider, scraped every second,
//! then PromQL over what Prometheus stored must give the run's own numbers — the op's count,
//! its rate while it ran, and its response p99 within the bucket `histogram_quantile`
//! interpolated in. Skipped (one line) without `prometheus` unless
//! `CNSREPLAY_REQUIRE_PROMETHEUS=1`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{cnsreplay, s};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// One PromQL instant query through the HTTP API; the result vector's values.
fn query(port: u16, q: &str) -> Vec<f64> {
    query_at(port, q, None)
}

/// [`query`] evaluated at `time` (Unix seconds) when given.
fn query_at(port: u16, q: &str, time: Option<f64>) -> Vec<f64> {
    let enc: String = q
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connect to prometheus");
    write!(
        c,
        "GET /api/v1/query?query={enc}{} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n",
        time.map(|t| format!("&time={t}")).unwrap_or_default()
    )
    .expect("request");
    let mut resp = String::new();
    c.read_to_string(&mut resp).expect("response");
    let body = resp.split("\r\n\r\n").nth(1).unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {resp}"));
    assert_eq!(v["status"], "success", "{q}: {body}");
    v["data"]["result"]
        .as_array()
        .expect("a vector")
        .iter()
        .map(|r| r["value"][1].as_str().unwrap().parse().unwrap())
        .collect()
}

#[test]
fn prometheus_scrapes_the_runs_own_numbers() {
    if Command::new("prometheus")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(
            std::env::var("CNSREPLAY_REQUIRE_PROMETHEUS").as_deref() != Ok("1"),
            "CNSREPLAY_REQUIRE_PROMETHEUS=1 but `prometheus` is not installed (apt-get install prometheus)"
        );
        #[allow(clippy::print_stderr)] // the skip line is the contract
        {
            eprintln!("skipped: prometheus is not installed");
        }
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let n = 600u64;
    let mut t = String::from("format: cnsreplay-trace\nversion: 1\nevents:\n");
    for i in 0..n {
        t.push_str(&format!(
            "  - {{at: {}ms, create_volume: {{volume: v{i}}}}}\n",
            1000 + i * 25
        ));
    }
    let trace = d.join("t.yaml");
    std::fs::write(&trace, t).expect("trace");
    let (ours, theirs) = (free_port(), free_port());
    let cfg = d.join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
             scrape_configs:\n  - job_name: cnsreplay\n    static_configs:\n      \
             - targets: ['127.0.0.1:{ours}']\n"
        ),
    )
    .expect("config");
    let mut prom = Command::new("prometheus")
        .arg(format!("--config.file={}", s(&cfg)))
        .arg(format!("--storage.tsdb.path={}", s(&d.join("tsdb"))))
        .arg(format!("--web.listen-address=127.0.0.1:{theirs}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start prometheus");
    let up = Instant::now();
    while TcpStream::connect(("127.0.0.1", theirs)).is_err() {
        assert!(
            up.elapsed() < Duration::from_secs(30),
            "prometheus did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let run = d.join("run");
    let o = cnsreplay(&[
        "run",
        s(&trace),
        "--provider",
        "sim",
        "--sim-latency",
        "create_volume=lognormal:20ms:0.6",
        "--seed",
        "7",
        "--metrics-addr",
        &format!("127.0.0.1:{ours}"),
        "--metrics-linger",
        "3s",
        "--json",
        "-o",
        s(&run),
    ]);
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    let op = &summary["ops"]["create_volume"];
    let count = op["count"].as_u64().expect("count");
    assert_eq!(count, n);
    let p99_ns = op["response"]["p99"].as_u64().expect("p99") as f64;

    let done = query(
        theirs,
        "max_over_time(cnsreplay_op_done_total{op=\"create_volume\"}[1m])",
    );
    assert_eq!(done, [n as f64], "the last scrape saw every event done");
    // The rate while it ran: the busiest 5 s, against 40/s.
    let rate = query(
        theirs,
        "max_over_time(rate(cnsreplay_op_dispatched_total{op=\"create_volume\"}[5s])[1m:1s])",
    );
    assert!(
        rate.len() == 1 && (36.0..=44.0).contains(&rate[0]),
        "rate {rate:?}, intended 40/s"
    );
    // The p99 over the whole run, from the final cumulative histogram.
    let q = query(
        theirs,
        "histogram_quantile(0.99, max_over_time(cnsreplay_op_response_seconds_bucket{op=\"create_volume\"}[1m]))",
    );
    assert_eq!(q.len(), 1, "{q:?}");
    let est = q[0];
    let buckets = replay::live::BUCKETS;
    let hi = buckets
        .iter()
        .copied()
        .find(|b| *b >= est)
        .expect("a finite bucket");
    let lo = buckets
        .iter()
        .copied()
        .rev()
        .find(|b| *b < hi)
        .unwrap_or(0.0);
    let ours_s = p99_ns / 1e9;
    assert!(
        (lo * 0.999..=hi * 1.001).contains(&ours_s),
        "PromQL p99 {est} s (bucket ({lo}, {hi}]) vs the summary's {ours_s} s"
    );
    // The Grafana dashboard (deploy/grafana): every panel's query evaluates on the real
    // server, in the middle of the run, and the ones about this run's op have data.
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(run.join("manifest.json")).expect("manifest"),
    )
    .expect("manifest json");
    let origin: jiff::Timestamp = manifest["origin"]
        .as_str()
        .expect("origin")
        .parse()
        .expect("time");
    let mid = origin.as_millisecond() as f64 / 1e3 + 9.0;
    let dash: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            crate::workspace().join("deploy/grafana/cnsreplay-dashboard.json"),
        )
        .expect("dashboard"),
    )
    .expect("dashboard json");
    let mut queried = 0;
    for p in dash["panels"].as_array().expect("panels") {
        for t in p["targets"].as_array().expect("targets") {
            let expr = t["expr"]
                .as_str()
                .expect("expr")
                .replace("$job", ".*")
                .replace("$__rate_interval", "5s");
            let got = query_at(theirs, &expr, Some(mid));
            let title = p["title"].as_str().unwrap_or_default();
            if !title.starts_with("Failures") {
                assert!(!got.is_empty(), "{title}: {expr} has no data mid-run");
            }
            queried += 1;
        }
    }
    assert!(queried >= 8, "{queried} queries");
    let _ = prom.kill();
    let _ = prom.wait();
    assert!(Path::new(&run).join("summary.json").is_file());
}
