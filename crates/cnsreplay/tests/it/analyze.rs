//! `cnsreplay analyze` and `sweep` end to end on real `sim` runs: compare's verdicts and exit
//! codes, capacity on a sweep that saturates at a known rate, the report rendered by headless
//! Chromium, QoS, CSV export, and the committed `analyze … --json` schemas; a short `local`
//! run with `io_phase` units for the I/O timeline, QoS from interval histograms and the PNG
//! export.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{LENIENT, cnsreplay, ok, s, stdout, workspace};

/// Writes a JSON Lines trace: header, then `(at_ns, body)` events with ids 1…
pub(super) fn trace(dir: &Path, name: &str, events: &[(u64, String)]) -> PathBuf {
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

pub(super) fn sim_run(trace: &Path, out: &Path, args: &[&str]) {
    let mut all = vec![
        "-q",
        "run",
        s(trace),
        "--provider",
        "sim",
        "-o",
        s(out),
        LENIENT,
    ];
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
fn compare_flags_a_20_percent_attach_regression_and_not_reseeded_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = attach_trace(dir.path());
    let sims = |name: &str, seeds: std::ops::Range<u32>, latency: &str| -> Vec<PathBuf> {
        seeds
            .map(|seed| {
                let out = dir.path().join(format!("{name}{seed}"));
                let seed = seed.to_string();
                sim_run(
                    &t,
                    &out,
                    &[
                        "--seed",
                        &seed,
                        "--sim-latency",
                        &format!("attach={latency}"),
                    ],
                );
                out
            })
            .collect()
    };
    let base = sims("base", 1..4, "lognormal:200ms:0.2");
    let slow = sims("slow", 11..14, "lognormal:240ms:0.2");
    let reseeded = sims("reseeded", 21..24, "lognormal:200ms:0.2");
    let args = |json: bool, a: &[PathBuf], b: &[PathBuf]| {
        let mut v: Vec<&str> = vec!["analyze", "compare"];
        if json {
            v.push("--json");
        }
        v.extend(a.iter().map(|p| s(p)));
        v.push("--");
        v.extend(b.iter().map(|p| s(p)));
        cnsreplay(&v)
    };

    let o = args(false, &base, &slow);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let text = stdout(&o);
    assert!(
        text.contains("REGRESSION") && text.contains("Holm") && text.contains("insufficient data"),
        "{text}"
    );

    let o = args(true, &base, &slow);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    for row in v["rows"].as_array().expect("rows") {
        let want = match row["metric"].as_str() {
            Some("p50" | "mean") => "regression",
            Some("error_rate") => "no_change",
            // 600 events per run: too few for p99 (500 needed … just enough) or p99.9.
            Some("p99.9") => "insufficient_data",
            _ => continue,
        };
        assert_eq!(row["verdict"], want, "{row}");
        if want == "regression" {
            let c = row["change"].as_f64().expect("change");
            assert!((0.15..0.25).contains(&c), "{row}");
        }
    }
    // Swapped: the mirror image (improvements, no regression).
    let o = args(true, &slow, &base);
    assert_ne!(o.status.code(), Some(1), "{}", stdout(&o));
    let w: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    for (x, y) in v["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .zip(w["rows"].as_array().expect("rows"))
    {
        let mirrored = match x["verdict"].as_str() {
            Some("regression") => "improvement",
            Some("improvement") => "regression",
            other => other.expect("verdict"),
        };
        assert_eq!(y["verdict"], mirrored, "{x} {y}");
        assert_eq!(x["p_holm"], y["p_holm"]);
    }

    let o = args(true, &base, &reseeded);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["regressions"], 0, "{v:#}");
    assert_ne!(o.status.code(), Some(1), "{v:#}");

    // One run per side: no between-run variance, inconclusive (exit 3).
    let o = cnsreplay(&["analyze", "compare", s(&base[0]), s(&slow[0])]);
    assert_eq!(o.status.code(), Some(3), "{}", stdout(&o));
    assert!(stdout(&o).contains("one run per side"), "{}", stdout(&o));
    let base = &base[0];

    // Another trace: refused unless --by-op-type.
    let other = trace(
        dir.path(),
        "other.jsonl",
        &[(0, r#""attach":{"workload":"x","volumes":[]}"#.into())],
    );
    let lone = dir.path().join("lone");
    sim_run(&other, &lone, &["--sim-latency", "attach=constant:1ms"]);
    let o = cnsreplay(&["analyze", "compare", s(base), s(&lone)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--by-op-type"));
    let o = cnsreplay(&[
        "analyze",
        "compare",
        "--by-op-type",
        "--threshold",
        "all=1000%",
        s(base),
        s(&lone),
    ]);
    // It ran (not exit 2); one run per side and one event: nothing could be judged.
    assert_eq!(o.status.code(), Some(3), "{}", stdout(&o));
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
            LENIENT,
        ]);
        ok(&o);
        stdout(&o)
    };
    let out = run_sweep("--speeds", "1,1.8,2.2,2.6");
    assert_eq!(out.lines().count(), 4, "{out}");
    assert!(sweep.join("2.2/manifest.json").is_file());
    // --rates: 17/s is speed 1.7 of this 10/s trace. (Not closer to the saturation rate: at
    // 19/s, 5 % below it, a loaded machine's late timers already build a queue in 60 events.)
    let out = run_sweep("--rates", "17");
    assert!(sweep.join("1.7/manifest.json").is_file(), "{out}");

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
    // 18/s passed, 22/s fell behind (at most 20/s served): the answer gives that bracket and
    // its width rather than a false precision.
    let text = stdout(&o);
    assert!(text.contains("This system sustains 18.00 ops/s"), "{text}");
    assert!(
        text.contains("[18.00, 22.00) ops/s: resolution 22.2 %"),
        "{text}"
    );
    assert!(text.contains("create_volume fell behind"), "{text}");
    // As a gate: one testcase per SLO and one for the sustained rate, all passed here; an
    // SLO no point meets fails both. The exit code stays the command's (0).
    let gate = |slo: &str| {
        let junit = dir.path().join("capacity.xml");
        let o = cnsreplay(&[
            "analyze",
            "capacity",
            s(&sweep),
            "--slo",
            slo,
            "--junit",
            s(&junit),
            "--markdown",
            "-",
        ]);
        ok(&o);
        (fs_err::read_to_string(&junit).expect("junit"), stdout(&o))
    };
    let (xml, md) = gate("create_volume.p99=200ms");
    assert!(xml.contains("tests=\"2\" failures=\"0\""), "{xml}");
    assert!(
        md.contains("This system sustains 18.00 ops/s") && md.contains("| ✅ met |"),
        "{md}"
    );
    let (xml, md) = gate("create_volume.p99=1ms");
    assert!(xml.contains("tests=\"2\" failures=\"2\""), "{xml}");
    assert!(md.contains("**NOT SUSTAINED"), "{md}");
}

/// A run with db I/O at 200/s for 4 s, three snapshots of 300 ms each under a sim stall, and
/// a few create/attach operations.
pub(super) fn mixed_run(dir: &Path) -> PathBuf {
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
            // Each snapshot's two QoS windows (250 ms) stalled: reads there take 30–100 ms,
            // so the snapshots' share of violated windows stands above the quiet windows'
            // even when the host holds a few of those up past 20 ms (4 of 10 once in a cold
            // CI, beside the parallel fast tests, when only two of six snapshot windows were
            // stalled).
            "--sim-stall",
            "550ms+100ms",
            "--sim-stall",
            "760ms+30ms",
            "--sim-stall",
            "1550ms+100ms",
            "--sim-stall",
            "1760ms+30ms",
            "--sim-stall",
            "2550ms+100ms",
            "--sim-stall",
            "2760ms+30ms",
        ],
    );
    run
}

pub(super) fn chromium() -> String {
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
pub(super) fn screenshot(page: &Path, png: &Path, size: &str) -> (u32, u32, Vec<[u8; 3]>) {
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
    decode_png(png)
}

/// Decodes an 8-bit PNG into RGB pixels (grey and alpha dropped).
pub(super) fn decode_png(png: &Path) -> (u32, u32, Vec<[u8; 3]>) {
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
pub(super) fn coloured(px: &[[u8; 3]]) -> usize {
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
    // A violated target exits 1 (docs/analyze.md), with the report.
    assert_eq!(o.status.code(), Some(1), "{o:?}");
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
    // The stalls make the snapshot windows' reads slow; a quiet window's p99.9 (of about 50
    // reads) is the sim's 0.5 ms unless the host held the tool up for 20 ms there, which a
    // CI machine under the other tests' load does now and then: what must hold is that the
    // attribution singles out the snapshots, a larger share of their windows violated.
    let share = |d: &str| {
        let a = during(d);
        let (violated, windows) = (a["violated"].as_u64(), a["windows"].as_u64());
        (violated.unwrap_or(0), windows.unwrap_or(0).max(1))
    };
    let ((snap, snap_w), (quiet, quiet_w)) = (share("snapshot"), share("quiet"));
    assert!(snap >= 4 && snap * quiet_w > quiet * snap_w, "{v:#}");
    let o = cnsreplay(&["analyze", "qos", s(&run), "--slo-file", s(&qos)]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(
        stdout(&o).contains("tenant db read p99.9 > 20.0 ms in"),
        "{}",
        stdout(&o)
    );
    // The same verdict as JUnit (a failure for the violated target, its sentence the
    // message) and as Markdown on stdout instead of the table; the exit code unchanged.
    let junit = dir.path().join("qos.xml");
    let o = cnsreplay(&[
        "analyze",
        "qos",
        s(&run),
        "--slo-file",
        s(&qos),
        "--junit",
        s(&junit),
        "--markdown",
        "-",
    ]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let md = stdout(&o);
    assert!(
        md.starts_with("### cnsreplay analyze qos") && md.contains("| ❌ violated | db |"),
        "{md}"
    );
    let xml = fs_err::read_to_string(&junit).expect("junit");
    assert!(
        xml.contains("tests=\"1\" failures=\"1\"") && xml.contains("classname=\"qos.db\""),
        "{xml}"
    );
    assert!(
        xml.contains("<failure message=\"tenant db read p99.9 &gt; 20.0 ms in"),
        "{xml}"
    );
    // Targets every window meets: exit 0.
    fs_err::write(&qos, "window: 250ms\ntenants:\n  db:\n    read.p99.9: 1h\n").expect("qos");
    ok(&cnsreplay(&[
        "analyze",
        "qos",
        s(&run),
        "--slo-file",
        s(&qos),
    ]));
    // A tenant the run has no I/O of (a typo): an input problem, exit 1, naming it and the
    // tenants there are, and no report.
    fs_err::write(&qos, "tenants:\n  dbb:\n    p99: 20ms\n").expect("qos");
    let o = cnsreplay(&["analyze", "qos", s(&run), "--slo-file", s(&qos)]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("tenants.dbb: the run's trace ")
            && err.contains("has no io or io_phase events of tenant \"dbb\"")
            && err.contains("(tenants with I/O: db)"),
        "{err}"
    );
    assert_eq!(stdout(&o), "", "no report for a target that judges nothing");

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

/// A short `local` run: tenants db and web each run a 3 s `io_phase` unit (ids 5 and 6) on
/// their own volume from 1.5 s, with a snapshot of db's volume at 2.5 s.
pub(super) fn local_phase_run(dir: &Path) -> PathBuf {
    let t = dir.join("phase.yaml");
    fs_err::write(
        &t,
        r#"format: cnsreplay-trace
version: 1
provenance: {generator: test}
defaults: {storage_class: standard, snapshot_class: standard-snap, volume_size: 64Mi, access_mode: ReadWriteOnce, volume_mode: filesystem}
events:
  - {at: 0s, id: 1, create_volume: {volume: a}}
  - {at: 0s, id: 2, create_volume: {volume: b}}
  - {at: 1s, id: 3, tenant: db, attach: {workload: pa, volumes: [a]}}
  - {at: 1s, id: 4, tenant: web, attach: {workload: pb, volumes: [b]}}
  - {at: 1500ms, id: 5, tenant: db, io_phase: {workload: pa, volume: a, pattern: random, read_pct: 70, block_size: 4Ki, load: {rate: {iops: 300, arrival: poisson}}, duration: 3s, region: 16Mi}}
  - {at: 1500ms, id: 6, tenant: web, io_phase: {workload: pb, volume: b, pattern: random, read_pct: 100, block_size: 4Ki, load: {rate: {iops: 200, arrival: poisson}}, duration: 3s, region: 16Mi}}
  - {at: 2500ms, id: 7, snapshot: {volume: a, snapshot: s0}}
  - {at: 5s, id: 8, detach: {workload: pa}}
  - {at: 5s, id: 9, detach: {workload: pb}}
  - {at: 5500ms, id: 10, delete_snapshot: {snapshot: s0}}
  - {at: 6s, id: 11, delete_volume: {volume: a}}
  - {at: 6s, id: 12, delete_volume: {volume: b}}
"#,
    )
    .expect("trace");
    let run = dir.join("phase-run");
    ok(&cnsreplay(&[
        "-q",
        "run",
        s(&t),
        "--provider",
        "local",
        "-o",
        s(&run),
        LENIENT,
    ]));
    run
}

/// `(started, completed)` of the run's record of event `id`.
fn span(run: &Path, id: u64) -> (u64, u64) {
    let text = fs_err::read_to_string(run.join("events.jsonl")).expect("events");
    let r: serde_json::Value = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("record"))
        .find(|r| r["id"] == id)
        .expect("record of the io_phase unit");
    (
        r["started"].as_u64().expect("started"),
        r["completed"].as_u64().expect("completed"),
    )
}

/// Non-white pixels in the rectangle `[x0, x1) × [y0, y1)` of a `w`-wide image.
pub(super) fn inked(px: &[[u8; 3]], w: u32, (x0, x1): (u32, u32), (y0, y1): (u32, u32)) -> usize {
    (y0..y1)
        .flat_map(|y| (x0..x1).map(move |x| (y * w + x) as usize))
        .filter(|&i| px[i].iter().any(|&c| c < 200))
        .count()
}

#[test]
fn io_phase_units_show_in_the_report_timeline_and_qos_and_figures_export_as_png() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = local_phase_run(dir.path());
    for id in [5, 6] {
        assert!(
            run.join(format!("io/{id}.hlog")).is_file(),
            "no interval log"
        );
    }

    // QoS from the interval histograms: a limit every window violates lists every window with
    // data; each I/O is counted in exactly one window, and the windows lie within the unit.
    // An `io` SLO judges iogen's I/O response times (every I/O of both units, from the
    // interval histograms), not the units' durations, which `io_phase` names.
    let o = cnsreplay(&[
        "analyze",
        "capacity",
        s(dir.path()),
        "--slo",
        "io p99.9<=10s",
        "--slo",
        "io_phase p50<=1ms",
        "--json",
    ]);
    ok(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let slos = &v["points"][0]["slos"];
    let ios: u64 = [5, 6]
        .iter()
        .map(|id| {
            let unit: serde_json::Value = serde_json::from_slice(
                &fs_err::read(run.join(format!("io/{id}.json"))).expect("unit json"),
            )
            .expect("unit");
            unit["ios"].as_u64().expect("ios")
        })
        .sum();
    assert!(ios > 1000, "{ios}");
    assert_eq!(slos[0]["samples"].as_u64(), Some(ios), "{v:#}");
    assert!(
        slos[0]["value_ns"].as_u64().expect("io p99.9") < 1_000_000_000,
        "{v:#}"
    );
    assert_eq!(slos[1]["samples"], 2, "{v:#}");
    assert!(
        slos[1]["value_ns"].as_u64().expect("unit p50") >= 2_900_000_000,
        "{v:#}"
    );

    let qos = dir.path().join("qos.yaml");
    fs_err::write(
        &qos,
        "window: 500ms\ntenants:\n  db:\n    p50: 1ns\n  web:\n    read.p99.9: 1ns\n",
    )
    .expect("qos");
    let o = cnsreplay(&["analyze", "qos", s(&run), "--slo-file", s(&qos), "--json"]);
    assert_eq!(o.status.code(), Some(1), "every window violates 1ns: {o:?}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["io_phase_units"], 2, "{v:#}");
    for (t, id) in v["targets"].as_array().expect("targets").iter().zip([5, 6]) {
        let unit: serde_json::Value = serde_json::from_slice(
            &fs_err::read(run.join(format!("io/{id}.json"))).expect("unit json"),
        )
        .expect("unit");
        let violations = t["violations"].as_array().expect("violations");
        // 3 s of I/O in 500 ms windows: 6 or 7 windows (the unit is not window-aligned).
        assert!((6..=8).contains(&violations.len()), "{t:#}");
        assert_eq!(t["violated"], t["windows"], "{t:#}");
        let ios: u64 = violations
            .iter()
            .map(|w| w["ios"].as_u64().expect("ios"))
            .sum();
        assert_eq!(Some(ios), unit["ios"].as_u64(), "{t:#}");
        let (started, completed) = span(&run, id);
        for w in violations {
            let (a, b) = (
                w["start_ns"].as_u64().expect("start"),
                w["end_ns"].as_u64().expect("end"),
            );
            assert!(
                b > started && a < completed,
                "window {a}…{b} outside the unit {started}…{completed}"
            );
        }
    }
    // The snapshot ran while db's unit did: some db window has it in flight.
    assert!(
        v["targets"][0]["attribution"]
            .as_array()
            .expect("attribution")
            .iter()
            .any(|a| a["during"] == "snapshot" && a["windows"].as_u64() >= Some(1)),
        "{v:#}"
    );

    // The report: Figure 2 from the io_phase units, per tenant; every figure as PNG.
    let (html, svgs, pngs) = (
        dir.path().join("report.html"),
        dir.path().join("svg"),
        dir.path().join("png"),
    );
    let o = cnsreplay(&[
        "analyze",
        "report",
        s(&run),
        "-o",
        s(&html),
        "--svg",
        s(&svgs),
        "--png",
        s(&pngs),
    ]);
    ok(&o);
    let timeline = fs_err::read_to_string(svgs.join("io-timeline-1.svg")).expect("svg");
    for legend in [
        "db p50",
        "db p99",
        "db p99.9",
        "web p50",
        "web p99.9",
        "snapshot",
    ] {
        assert!(
            timeline.contains(&format!(">{legend}<")),
            "no {legend:?} in the timeline"
        );
    }
    let page = fs_err::read_to_string(&html).expect("html");
    assert!(
        page.contains(r#"data-figure="io-timeline-1""#),
        "no I/O timeline"
    );
    for f in ["cdf", "io-timeline-1", "rate-1"] {
        let (w, h, px) = decode_png(&pngs.join(format!("{f}.png")));
        // Default scale 2 of the 760×360 figures.
        assert_eq!((w, h), (1520, 720), "{f}");
        assert!(
            coloured(&px) > 1000,
            "figure {f} rasterized without data: {} coloured pixels",
            coloured(&px)
        );
        // Text: the x-axis label under the plot, the title above it, the y tick labels.
        let x_label = inked(&px, w, (144 + 300, 1140 - 300), (680, 720));
        let title = inked(&px, w, (144, 1000), (0, 50));
        let y_ticks = inked(&px, w, (20, 134), (60, 640));
        assert!(
            x_label > 100 && title > 300 && y_ticks > 200,
            "figure {f}: text not rendered (ink: x label {x_label}, title {title}, y ticks {y_ticks})"
        );
    }
}

/// The Python of the readers' venv (`scripts/install-py-readers.sh`), if installed.
fn py_readers() -> Option<PathBuf> {
    let py = super::readers_python();
    if py.is_file() {
        return Some(py);
    }
    assert!(
        std::env::var_os("CNSREPLAY_REQUIRE_PY").is_none_or(|v| v != "1"),
        "CNSREPLAY_REQUIRE_PY=1 but {} is missing: run scripts/install-py-readers.sh",
        py.display()
    );
    None
}

/// Says that a test skipped its real check, and why (shown with `--nocapture`).
#[allow(clippy::print_stdout)]
pub(super) fn skipped(why: &str) {
    println!("skipped: {why}");
}

/// pandas (pyarrow) and DuckDB read the CSV and the Parquet export: row counts, column names
/// and types, and a few values against `events.jsonl`.
const READ_EXPORTS: &str = r#"
import json, sys
import duckdb, pandas as pd
csv, pq = sys.argv[1], sys.argv[2]
out = {}
for name, df in [("pandas_csv", pd.read_csv(csv)), ("pandas_parquet", pd.read_parquet(pq))]:
    out[name] = {
        "rows": len(df),
        "columns": list(df.columns),
        "ops": {k: int(v) for k, v in df["op"].value_counts().items()},
        "response_sum": int(df["response"].sum()),
        "id_sum": int(df["id"].sum()),
        "snapshot_ios": int(df["during_snapshot"].astype(bool).sum()),
        "errors": int(df["error_class"].notna().sum()),
    }
con = duckdb.connect()
for name, src in [("duckdb_csv", f"read_csv_auto('{csv}')"), ("duckdb_parquet", f"read_parquet('{pq}')")]:
    rows, resp, io = con.execute(
        f"select count(*), sum(response), count(*) filter (where op = 'io') from {src}"
    ).fetchone()
    out[name] = {"rows": rows, "response_sum": int(resp), "io": io}
print(json.dumps(out))
"#;

#[test]
fn export_csv_and_parquet_are_read_by_pandas_and_duckdb() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = mixed_run(dir.path());
    let (csv, pq) = (dir.path().join("ev.csv"), dir.path().join("ev.parquet"));
    let o = cnsreplay(&[
        "analyze",
        "export",
        s(&run),
        "--csv",
        s(&csv),
        "--parquet",
        s(&pq),
    ]);
    ok(&o);
    assert_eq!(
        stdout(&o).matches("809 records").count(),
        2,
        "{}",
        stdout(&o)
    );
    let Some(py) = py_readers() else {
        skipped(
            "no pandas/pyarrow/duckdb venv (scripts/install-py-readers.sh); \
             set CNSREPLAY_REQUIRE_PY=1 to make this a failure",
        );
        return;
    };
    // What the readers must find: from events.jsonl itself.
    let recs: Vec<serde_json::Value> = fs_err::read_to_string(run.join("events.jsonl"))
        .expect("events")
        .lines()
        .map(|l| serde_json::from_str(l).expect("record"))
        .collect();
    let sum = |f: &str| -> u64 { recs.iter().map(|r| r[f].as_u64().expect(f)).sum() };
    let snapshot_ios = recs.iter().filter(|r| r["during_snapshot"] == true).count();
    let errors = recs.iter().filter(|r| r["error_class"].is_string()).count();
    let o = Command::new(&py)
        .args(["-c", READ_EXPORTS])
        .args([&csv, &pq])
        .output()
        .expect("python");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let columns = [
        "id",
        "op",
        "intended",
        "dispatched",
        "started",
        "completed",
        "outcome",
        "error_class",
        "dep_wait",
        "queue",
        "response",
        "service",
        "lateness",
        "during_snapshot",
    ];
    for reader in ["pandas_csv", "pandas_parquet"] {
        let r = &v[reader];
        assert_eq!(r["rows"], 809, "{reader}: {r}");
        assert_eq!(r["columns"], serde_json::json!(columns), "{reader}");
        assert_eq!(
            (r["ops"]["io"].as_u64(), r["ops"]["snapshot"].as_u64()),
            (Some(800), Some(3)),
            "{reader}: {r}"
        );
        assert_eq!(r["response_sum"], sum("response"), "{reader}");
        assert_eq!(r["id_sum"], sum("id"), "{reader}");
        assert_eq!(r["snapshot_ios"], snapshot_ios, "{reader}");
        assert_eq!(r["errors"], errors, "{reader}");
    }
    for reader in ["duckdb_csv", "duckdb_parquet"] {
        let r = &v[reader];
        assert_eq!(
            (
                r["rows"].as_u64(),
                r["io"].as_u64(),
                r["response_sum"].as_u64()
            ),
            (Some(809), Some(800), Some(sum("response"))),
            "{reader}: {r}"
        );
    }
}

/// `--png-scale` must draw something and fit in memory: 0, negative, NaN and huge factors are
/// usage errors before any run is read.
#[test]
fn png_scale_outside_its_range_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let html = dir.path().join("r.html");
    for bad in ["0", "-1", "NaN", "inf", "17", "x"] {
        let flag = format!("--png-scale={bad}");
        let o = cnsreplay(&[
            "analyze",
            "report",
            "no-such-run",
            "-o",
            s(&html),
            "--png",
            s(dir.path()),
            &flag,
        ]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("invalid value '{bad}' for '--png-scale <X>'")),
            "{bad}: {err}"
        );
        assert!(!html.exists());
    }
}

/// The repo's A/A batches example (`analyze::compare::example`): the text names the design,
/// shows each row's interval and, when inconclusive, the runs that would decide it.
#[test]
fn compare_on_the_aa_batches_example_names_the_design() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (base, new) =
        analyze::compare::example::write_aa_batches(dir.path()).expect("example runs");
    let root = format!("{}/", dir.path().display());
    let run = |extra: &[&str], base: &[PathBuf]| {
        let mut v: Vec<&str> = vec!["analyze", "compare"];
        v.extend(extra);
        v.extend(base.iter().map(|p| s(p)));
        v.push("--");
        v.extend(new.iter().map(|p| s(p)));
        let o = cnsreplay(&v);
        (o.status.code(), stdout(&o).replace(&root, ""))
    };
    // Three base batches: the batch baseline design; p99.9 left out (600 events a run).
    let (code, text) = run(&["--skip", "p99.9"], &base);
    assert!(text.contains("design: batch baseline"), "{text}");
    assert_ne!(code, Some(1), "identical builds: {text}");
    // Every judged row shows its interval; every inconclusive one what would decide it.
    for line in text.lines().filter(|l| l.starts_with("attach ")) {
        assert!(line.contains('['), "no interval: {line}");
        if line.contains("inconclusive") {
            assert!(
                line.contains("would decide it") || line.contains("cannot decide"),
                "{line}"
            );
        }
    }
    // Only the last base batch: separate batches, the batch-shift allowance applies.
    let (code, text) = run(&["--skip", "p99.9"], &base[base.len() - 4..]);
    assert!(text.contains("design: separate batches"), "{text}");
    assert_ne!(code, Some(1), "identical builds: {text}");
    assert!(text.contains("allowance ±5.0%"), "{text}");
    // p99.9 not left out: insufficient data keeps the exit code at 3.
    let (code, text) = run(&[], &base);
    assert_eq!(code, Some(3), "{text}");
    assert!(text.contains("insufficient data"), "{text}");
    // JSON names the design too.
    let (_, json) = run(&["--json", "--skip", "p99.9"], &base);
    let v: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(v["design"]["kind"], "batch_baseline");
    assert_eq!(v["design"]["base_batches"], 3);
}

/// The local provider says per `io_phase` which engine iogen ran, as iogen's own summary
/// (`io/<id>.json`) has it: `io_uring`, or `threads` with the reason and a notice.
#[test]
fn local_io_phases_name_the_engine_iogen_ran() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = local_phase_run(dir.path());
    let summary: serde_json::Value =
        serde_json::from_slice(&fs_err::read(run.join("summary.json")).expect("summary"))
            .expect("summary json");
    let backends = summary["io"]["backends"].as_array().expect("io.backends");
    let events: Vec<u64> = backends
        .iter()
        .filter_map(|b| b["event"].as_u64())
        .collect();
    assert_eq!(events, vec![5, 6], "{:#}", summary["io"]);
    let mut threads = 0;
    for b in backends {
        let id = b["event"].as_u64().expect("event");
        let own: serde_json::Value = serde_json::from_slice(
            &fs_err::read(run.join(format!("io/{id}.json"))).expect("iogen's summary"),
        )
        .expect("json");
        let engine = own["engine"]["engine"].as_str().expect("engine");
        let want = if engine == "io_uring" {
            "io_uring"
        } else {
            "threads"
        };
        assert_eq!(b["backend"], want, "event {id}: {b} vs iogen's {engine}");
        if want == "threads" {
            threads += 1;
            assert!(b["reason"].as_str().is_some_and(|r| !r.is_empty()), "{b}");
        } else {
            assert!(b["reason"].is_null(), "{b}");
        }
    }
    let noticed = summary["notices"]
        .to_string()
        .contains("iogen used threads");
    assert_eq!(noticed, threads > 0, "{:#}", summary["notices"]);
}
