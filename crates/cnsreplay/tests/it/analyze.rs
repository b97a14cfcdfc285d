//! `cnsreplay analyze` and `sweep` end to end on real `sim` runs: compare's verdicts and exit
//! codes, capacity on a sweep that saturates at a known rate, the report rendered by headless
//! Chromium, QoS, CSV export, and the committed `analyze … --json` schemas.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{cnsreplay, ok, s, stdout, workspace};

/// Writes a JSON Lines trace: header, then `(at_ns, body)` events with ids 1…
fn trace(dir: &Path, name: &str, events: &[(u64, String)]) -> PathBuf {
    let mut text = String::from(
        r#"{"format":"cnsreplay-trace","version":1,"provenance":{"generator":"test"},"volumes":[{"name":"v"}]}"#,
    );
    text.push('\n');
    for (i, (at, body)) in events.iter().enumerate() {
        text.push_str(&format!("{{\"at\":{at},\"id\":{},{body}}}\n", i + 1));
    }
    let path = dir.join(name);
    fs_err::write(&path, text).expect("write trace");
    path
}

fn sim_run(trace: &Path, out: &Path, args: &[&str]) {
    let mut all = vec!["-q", "run", s(trace), "--provider", "sim", "-o", s(out)];
    all.extend_from_slice(args);
    ok(&cnsreplay(&all));
}

/// 600 attaches at 400/s (1.5 s).
fn attach_trace(dir: &Path) -> PathBuf {
    let events: Vec<(u64, String)> = (0..600u64)
        .map(|i| {
            (
                i * 2_500_000,
                format!(r#""attach":{{"workload":"w{i}","volumes":[]}}"#),
            )
        })
        .collect();
    trace(dir, "attach.jsonl", &events)
}

#[test]
fn compare_flags_a_20_percent_attach_regression_and_not_a_reseeded_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = attach_trace(dir.path());
    let (base, slow, reseeded) = (
        dir.path().join("base"),
        dir.path().join("slow"),
        dir.path().join("reseeded"),
    );
    sim_run(
        &t,
        &base,
        &["--seed", "1", "--sim-latency", "attach=lognormal:200ms:0.2"],
    );
    sim_run(
        &t,
        &slow,
        &["--seed", "1", "--sim-latency", "attach=lognormal:240ms:0.2"],
    );
    sim_run(
        &t,
        &reseeded,
        &["--seed", "2", "--sim-latency", "attach=lognormal:200ms:0.2"],
    );

    let o = cnsreplay(&["analyze", "compare", s(&base), s(&slow)]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let text = stdout(&o);
    assert!(
        text.contains("REGRESSION") && text.contains("regression(s)"),
        "{text}"
    );

    let o = cnsreplay(&["analyze", "compare", "--json", s(&base), s(&slow)]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    for row in v["rows"].as_array().expect("rows") {
        let want = match row["metric"].as_str() {
            Some("p50" | "mean") => "regression",
            Some("error_rate") => "no_change",
            // A tail percentile of 600 values: its CI may or may not exclude zero.
            _ => continue,
        };
        assert_eq!(row["verdict"], want, "{row}");
        if want == "regression" {
            let c = row["change"].as_f64().expect("change");
            assert!((0.15..0.25).contains(&c), "{row}");
        }
    }

    let o = cnsreplay(&["analyze", "compare", "--json", s(&base), s(&reseeded)]);
    ok(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["regressions"], 0, "{v:#}");
    assert!(
        v["rows"]
            .as_array()
            .expect("rows")
            .iter()
            .all(|r| r["verdict"] == "no_change"),
        "{v:#}"
    );

    // Another trace: refused unless --by-op-type.
    let other = trace(
        dir.path(),
        "other.jsonl",
        &[(0, r#""attach":{"workload":"x","volumes":[]}"#.into())],
    );
    let lone = dir.path().join("lone");
    sim_run(&other, &lone, &["--sim-latency", "attach=constant:1ms"]);
    let o = cnsreplay(&["analyze", "compare", s(&base), s(&lone)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--by-op-type"));
    let o = cnsreplay(&[
        "analyze",
        "compare",
        "--by-op-type",
        "--threshold",
        "all=1000%",
        s(&base),
        s(&lone),
    ]);
    ok(&o);
}

#[test]
fn capacity_of_a_sim_sweep_finds_the_saturation_rate() {
    // 60 create_volume at 10/s; the sim serves one at a time for 50 ms: saturation at 20/s.
    let dir = tempfile::tempdir().expect("tempdir");
    let events: Vec<(u64, String)> = (0..60u64)
        .map(|i| {
            (
                i * 100_000_000,
                format!(r#""create_volume":{{"volume":"n{i}"}}"#),
            )
        })
        .collect();
    let t = trace(dir.path(), "cv.jsonl", &events);
    let sweep = dir.path().join("sweep");
    let run_sweep = |how: &str, values: &str| {
        let o = cnsreplay(&[
            "-q",
            "sweep",
            s(&t),
            "--provider",
            "sim",
            "-o",
            s(&sweep),
            how,
            values,
            "--concurrency",
            "create_volume=1",
            "--sim-latency",
            "create_volume=constant:50ms",
        ]);
        ok(&o);
        stdout(&o)
    };
    let out = run_sweep("--speeds", "1,1.8,2.2,2.6");
    assert_eq!(out.lines().count(), 4, "{out}");
    assert!(sweep.join("2.2/manifest.json").is_file());
    // --rates: 19/s is speed 1.9 of this 10/s trace.
    let out = run_sweep("--rates", "19");
    assert!(sweep.join("1.9/manifest.json").is_file(), "{out}");

    let o = cnsreplay(&[
        "analyze",
        "capacity",
        s(&sweep),
        "--slo",
        "create_volume.p99=200ms",
        "--json",
    ]);
    ok(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let max = v["max_rate"].as_f64().expect("max_rate");
    assert!(
        (max - 20.0).abs() <= 2.0,
        "max {max} not within 10% of 20/s: {v:#}"
    );
    let o = cnsreplay(&[
        "analyze",
        "capacity",
        s(&sweep),
        "--slo",
        "create_volume.p99=200ms",
    ]);
    ok(&o);
    assert!(
        stdout(&o).contains("This system sustains 19.0 ops/s"),
        "{}",
        stdout(&o)
    );
}

/// A run with db I/O at 200/s for 4 s, three snapshots of 300 ms each under a sim stall, and
/// a few create/attach operations.
fn mixed_run(dir: &Path) -> PathBuf {
    let mut events: Vec<(u64, String)> = (0..800u64)
        .map(|i| {
            let kind = if i % 4 == 0 { "write" } else { "read" };
            (
                i * 5_000_000,
                format!(
                    r#""tenant":"db","io":{{"volume":"v","kind":"{kind}","offset":0,"len":4096}}"#
                ),
            )
        })
        .collect();
    for (k, at) in [500u64, 1500, 2500].into_iter().enumerate() {
        events.push((
            at * 1_000_000,
            format!(r#""snapshot":{{"volume":"v","snapshot":"s{k}"}}"#),
        ));
        events.push((
            at * 1_000_000 + 200_000_000,
            format!(r#""create_volume":{{"volume":"c{k}"}}"#),
        ));
        events.push((
            at * 1_000_000 + 400_000_000,
            format!(r#""attach":{{"workload":"p{k}","volumes":["c{k}"]}}"#),
        ));
    }
    events.sort_by_key(|e| e.0);
    let t = trace(dir, "mixed.jsonl", &events);
    let run = dir.join("mixed");
    sim_run(
        &t,
        &run,
        &[
            "--sim-latency",
            "io=lognormal:500us:0.3",
            "--sim-latency",
            "snapshot=constant:300ms",
            "--sim-latency",
            "default=lognormal:40ms:0.3",
            "--sim-stall",
            "1550ms+100ms",
            "--sim-stall",
            "2550ms+100ms",
        ],
    );
    run
}

fn chromium() -> String {
    let found = || {
        Command::new("sh")
            .args(["-c", "command -v chromium"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !found() {
        let o = Command::new("bash")
            .arg(workspace().join("scripts/install-chromium.sh"))
            .output()
            .expect("install script");
        assert!(
            o.status.success(),
            "scripts/install-chromium.sh failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    "chromium".to_owned()
}

/// Screenshots `page` (HTML or SVG file) in headless Chromium and decodes the PNG.
fn screenshot(page: &Path, png: &Path, size: &str) -> (u32, u32, Vec<[u8; 3]>) {
    let profile = tempfile::tempdir().expect("profile");
    let o = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("--window-size={size}"))
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("run chromium");
    assert!(
        png.is_file(),
        "no screenshot: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let decoder = png::Decoder::new(std::io::BufReader::new(
        fs_err::File::open(png).expect("png"),
    ));
    let mut reader = decoder.read_info().expect("png header");
    let mut buf = vec![0; reader.output_buffer_size().expect("size")];
    let info = reader.next_frame(&mut buf).expect("png frame");
    let channels = info.color_type.samples();
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    let pixels = buf[..info.buffer_size()]
        .chunks(channels)
        .map(|p| {
            if channels >= 3 {
                [p[0], p[1], p[2]]
            } else {
                [p[0]; 3]
            }
        })
        .collect();
    (info.width, info.height, pixels)
}

/// Pixels that are clearly coloured (a plotted series or band, not grey text or grid).
fn coloured(px: &[[u8; 3]]) -> usize {
    px.iter()
        .filter(|p| {
            let (mx, mn) = (*p.iter().max().expect("rgb"), *p.iter().min().expect("rgb"));
            mx - mn > 60
        })
        .count()
}

#[test]
fn report_renders_every_figure_with_data_in_headless_chromium_and_qos_and_export_work() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = mixed_run(dir.path());
    let html = dir.path().join("report.html");
    let svgs = dir.path().join("svg");
    let o = cnsreplay(&[
        "analyze",
        "report",
        s(&run),
        s(&run),
        "-o",
        s(&html),
        "--svg",
        s(&svgs),
    ]);
    ok(&o);
    let page = fs_err::read_to_string(&html).expect("html");
    // Self-contained: no scripts, no external resources (the SVG namespace URI is only a name).
    for bad in ["<script", "<link", "src=", "href=", "url("] {
        assert!(!page.contains(bad), "the report contains {bad:?}");
    }
    let mut figures = Vec::new();
    for part in page.split("data-figure=\"").skip(1) {
        let name = part.split('"').next().expect("name").to_owned();
        let points: usize = part
            .split("data-points=\"")
            .nth(1)
            .and_then(|p| p.split('"').next())
            .and_then(|p| p.parse().ok())
            .expect("data-points");
        assert!(points > 0, "figure {name} has no data");
        figures.push(name);
    }
    assert_eq!(
        figures,
        ["cdf", "io-timeline-1", "rate-1", "io-timeline-2", "rate-2"]
    );

    let (w, h, px) = screenshot(&html, &dir.path().join("report.png"), "1000,2600");
    assert_eq!((w, h), (1000, 2600));
    let white = px.iter().filter(|p| p.iter().all(|&c| c > 245)).count();
    assert!(white < px.len() * 97 / 100, "the page screenshot is blank");
    assert!(
        coloured(&px) > 5000,
        "no plotted data visible: {} coloured pixels",
        coloured(&px)
    );
    for f in &figures {
        let svg = svgs.join(format!("{f}.svg"));
        let (_, _, px) = screenshot(&svg, &dir.path().join(format!("{f}.png")), "800,400");
        assert!(
            coloured(&px) > 300,
            "figure {f} rendered without data: {} coloured pixels",
            coloured(&px)
        );
    }

    // QoS: db reads exceed 20 ms only while the stalled snapshots run.
    let qos = dir.path().join("qos.yaml");
    fs_err::write(
        &qos,
        "window: 250ms\ntenants:\n  db:\n    read.p99.9: 20ms\n",
    )
    .expect("qos");
    let o = cnsreplay(&["analyze", "qos", s(&run), "--slo-file", s(&qos), "--json"]);
    ok(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let att = v["targets"][0]["attribution"]
        .as_array()
        .expect("attribution");
    let during = |d: &str| {
        att.iter()
            .find(|a| a["during"] == d)
            .cloned()
            .unwrap_or_default()
    };
    assert!(during("snapshot")["violated"].as_u64() >= Some(2), "{v:#}");
    assert_eq!(during("quiet")["violated"], 0, "{v:#}");
    let o = cnsreplay(&["analyze", "qos", s(&run), "--slo-file", s(&qos)]);
    ok(&o);
    assert!(
        stdout(&o).contains("tenant db read p99.9 > 20.0 ms in"),
        "{}",
        stdout(&o)
    );

    // Export: every record, readable by Python's csv module.
    let csv = dir.path().join("events.csv");
    ok(&cnsreplay(&[
        "analyze",
        "export",
        s(&run),
        "--csv",
        s(&csv),
    ]));
    let o = Command::new("python3")
        .args(["-c", "import csv,sys; rows=list(csv.DictReader(open(sys.argv[1]))); print(len(rows), rows[0]['op'], sum(int(r['response'])>0 for r in rows))"])
        .arg(&csv)
        .output()
        .expect("python3");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).split_whitespace().next(),
        Some("809"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // Summary: JSON by op type.
    let o = cnsreplay(&["analyze", "summary", "--json", s(&run)]);
    ok(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let ops = &v["runs"][0]["ops"];
    assert_eq!(
        (
            ops["io"]["count"].as_u64(),
            ops["snapshot"]["count"].as_u64()
        ),
        (Some(800), Some(3))
    );
    assert!(
        ops["attach"]["response"]["p50"].as_u64() > Some(30_000_000),
        "{ops:#}"
    );
    let o = cnsreplay(&["analyze", "summary", s(&run)]);
    ok(&o);
    assert!(stdout(&o).contains("snapshot"), "{}", stdout(&o));
}

#[test]
fn analyze_errors_name_the_path() {
    let o = cnsreplay(&["analyze", "summary", "no/such/run"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no/such/run"));
    let o = cnsreplay(&[
        "analyze",
        "capacity",
        "no/such/sweep",
        "--slo",
        "attach.p99=1s",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let o = cnsreplay(&["analyze", "capacity", ".", "--slo", "attach.p99"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("attach.p99"));
}
