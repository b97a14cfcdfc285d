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

pub(crate) fn free_port() -> u16 {
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
        testkit::skip::missing(
            "PROMETHEUS",
            "prometheus is not installed (apt-get install prometheus)",
        );
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let n = 600u64;
    let mut t = testkit::trace::yaml_header("");
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
            // No failures and no io_phase I/O in this run (the I/O panels' metrics:
            // `io_metrics_per_tenant_arrive_while_the_io_runs`).
            if !title.starts_with("Failures") && !title.starts_with("I/O") {
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

/// Our endpoint's text, fetched directly (no Prometheus).
pub(crate) fn scrape(port: u16) -> Option<String> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(c, "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut resp = String::new();
    c.read_to_string(&mut resp).ok()?;
    Some(resp.split("\r\n\r\n").nth(1)?.to_owned())
}

/// The value of the sample `series` (name and labels exactly as exposed), 0 when absent.
pub(crate) fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map_or(0.0, |v| v.parse().expect("a number"))
}

/// `io_phase` I/O per tenant on the live endpoint: two tenants' iogen units on the local
/// provider show up by tenant and kind while they run (before any `io_phase` is done), and
/// at the end the counts equal iogen's own (each unit's `io/<id>.json`); every Grafana I/O
/// panel's metric is exposed.
#[test]
fn io_metrics_per_tenant_arrive_while_the_io_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let trace = d.join("t.yaml");
    let phase = |tenant: &str, w: &str, v: &str, id: u32, read: u32, iops: u32| {
        format!(
            "- {{at: 1s, id: {id}, tenant: {tenant}, io_phase: {{workload: {w}, volume: {v}, \
             pattern: random, read_pct: {read}, block_size: 4Ki, load: {{rate: {{iops: {iops}}}}}, \
             duration: 4s, region: 16Mi}}}}\n"
        )
    };
    let t = format!(
        "format: cnsreplay-trace\nversion: 1\ndefaults: {{volume_size: 32Mi}}\nevents:\n\
         - {{at: 0s, id: 1, create_volume: {{volume: a}}}}\n\
         - {{at: 0s, id: 2, create_volume: {{volume: b}}}}\n\
         - {{at: 0s, id: 3, tenant: alpha, attach: {{workload: wa, volumes: [a]}}}}\n\
         - {{at: 0s, id: 4, tenant: beta, attach: {{workload: wb, volumes: [b]}}}}\n\
         {}{}\
         - {{at: 6s, id: 7, detach: {{workload: wa}}}}\n\
         - {{at: 6s, id: 8, detach: {{workload: wb}}}}\n\
         - {{at: 7s, id: 9, delete_volume: {{volume: a}}}}\n\
         - {{at: 7s, id: 10, delete_volume: {{volume: b}}}}\n",
        phase("alpha", "wa", "a", 5, 50, 500),
        phase("beta", "wb", "b", 6, 0, 200)
    );
    std::fs::write(&trace, t).expect("trace");
    let port = free_port();
    let run = d.join("run");
    let child = Command::new(env!("CARGO_BIN_EXE_cnsreplay"))
        .args(["run", s(&trace), "--provider", "local", "--metrics-addr"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["--metrics-linger", "10s", "-o", s(&run)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Mid-run: I/O of both tenants, and no io_phase finished yet.
    let t0 = Instant::now();
    let mut child = child;
    let mut last = String::new();
    let mid = loop {
        if t0.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let o = child.wait_with_output().expect("wait");
            panic!(
                "no live I/O of both tenants seen; last scrape:\n{last}\nstderr: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
        let Some(text) = scrape(port) else { continue };
        let a = sample(
            &text,
            "cnsreplay_io_requests_total{tenant=\"alpha\",kind=\"write\"}",
        );
        let b = sample(
            &text,
            "cnsreplay_io_requests_total{tenant=\"beta\",kind=\"write\"}",
        );
        if a > 0.0 && b > 0.0 {
            break text;
        }
        last = text;
    };
    assert_eq!(
        sample(&mid, "cnsreplay_op_done_total{op=\"io_phase\"}"),
        0.0,
        "the I/O was seen only when a phase ended:\n{mid}"
    );
    // The final values, during the linger.
    let fin = loop {
        std::thread::sleep(Duration::from_millis(300));
        let text = scrape(port).expect("scrape during the linger");
        if sample(&text, "cnsreplay_op_done_total{op=\"io_phase\"}") == 2.0
            && sample(&text, "cnsreplay_op_done_total{op=\"delete_volume\"}") == 2.0
        {
            break text;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(40),
            "the run did not end"
        );
    };
    let o = child.wait_with_output().expect("wait");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for (tenant, id, kinds) in [
        ("alpha", 5, &["read", "write"][..]),
        ("beta", 6, &["write"]),
    ] {
        let unit: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(run.join(format!("io/{id}.json"))).expect("unit summary"),
        )
        .expect("json");
        for kind in kinds {
            let theirs = unit["kinds"][kind]["ios"]
                .as_f64()
                .unwrap_or_else(|| panic!("{kind} ios in {unit}"));
            let labels = format!("tenant=\"{tenant}\",kind=\"{kind}\"");
            let ours = sample(&fin, &format!("cnsreplay_io_requests_total{{{labels}}}"));
            assert_eq!(ours, theirs, "{tenant} {kind}:\n{fin}");
            let hist = sample(
                &fin,
                &format!("cnsreplay_io_response_seconds_count{{{labels}}}"),
            );
            assert_eq!(hist, theirs, "{tenant} {kind} histogram count");
            let inf = sample(
                &fin,
                &format!("cnsreplay_io_response_seconds_bucket{{{labels},le=\"+Inf\"}}"),
            );
            assert_eq!(inf, theirs, "{tenant} {kind} +Inf bucket");
        }
    }
    assert_eq!(
        sample(
            &fin,
            "cnsreplay_io_requests_total{tenant=\"beta\",kind=\"read\"}"
        ),
        0.0
    );
    let dash =
        std::fs::read_to_string(crate::workspace().join("deploy/grafana/cnsreplay-dashboard.json"))
            .expect("dashboard");
    for metric in [
        "cnsreplay_io_requests_total",
        "cnsreplay_io_response_seconds_bucket",
    ] {
        assert!(dash.contains(metric), "no panel uses {metric}");
        assert!(fin.contains(&format!("{metric}{{")), "{metric} not exposed");
    }
}
