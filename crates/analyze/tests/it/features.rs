//! Summary (with observed latencies), capacity, QoS, the report and CSV export.

use analyze::capacity::{Slo, capacity};
use analyze::qos::{QosSpec, qos};
use analyze::summary::summary;
use trace_format::OpType;

use crate::{rec, write_run, write_trace};

#[test]
fn summary_counts_rates_errors_and_observed() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 100 create_volume events at 10/s, observed 30 ms each in the source recording.
    let events: Vec<(u64, String)> = (0..100u64)
        .map(|i| {
            (
                i * 100_000_000,
                format!(r#""observed":30000000,"create_volume":{{"volume":"v{i}"}}"#),
            )
        })
        .collect();
    let trace = write_trace(dir.path(), "t.jsonl", Some("k8s-audit"), &events);
    let recs: Vec<_> = (0..100u64)
        .map(|i| {
            let mut r = rec(i + 1, OpType::CreateVolume, i * 100_000_000, 10_000_000);
            if i % 10 == 0 {
                r.outcome = replay::Outcome::Error;
                r.error_class = Some("timeout".into());
            }
            r
        })
        .collect();
    let run = write_run(&dir.path().join("run"), &trace, 1.0, &recs);
    let s = summary(&run).expect("summary");
    let o = &s.ops["create_volume"];
    assert_eq!((o.count, o.ok, o.failed), (100, 90, 10));
    assert_eq!(o.errors["timeout"], 10);
    assert!((o.intended_rate - 10.0).abs() < 1e-9, "{}", o.intended_rate);
    assert!((o.achieved_rate - 10.0).abs() < 1e-9, "{}", o.achieved_rate);
    assert_eq!(o.response.p50 / 10_000, 1000);
    assert!(s.observed);
    let ob = o.observed.as_ref().expect("observed");
    assert_eq!((ob.count, ob.p99 / 100_000), (100, 300));
}

/// A sweep whose system serves at most 20 ops/s: queueing past that rate.
fn fake_sweep(dir: &std::path::Path) -> std::path::PathBuf {
    let events: Vec<(u64, String)> = (0..200u64)
        .map(|i| {
            (
                i * 100_000_000,
                format!(r#""create_volume":{{"volume":"v{i}"}}"#),
            )
        })
        .collect();
    let trace = write_trace(dir, "t.jsonl", None, &events);
    let sweep = dir.join("sweep");
    for speed in [1.0f64, 1.5, 1.9, 2.2, 3.0] {
        // A single server taking 50 ms: completion = max(arrival, previous completion) + 50 ms.
        let gap = (100_000_000.0 / speed) as u64;
        let mut free = 0u64;
        let recs: Vec<_> = (0..200u64)
            .map(|i| {
                let at = i * gap;
                let start = free.max(at);
                free = start + 50_000_000;
                let mut r = rec(i + 1, OpType::CreateVolume, at, 50_000_000);
                r.started = start;
                r.queue = start - at;
                r.completed = free;
                r.derive();
                r
            })
            .collect();
        write_run(&sweep.join(format!("{speed}")), &trace, speed, &recs);
    }
    sweep
}

#[test]
fn capacity_finds_the_rate_within_the_slo_and_the_knee() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sweep = fake_sweep(dir.path());
    let slo = Slo::parse("create_volume.p99=200ms").expect("slo");
    let r = capacity(&sweep, &[slo], &analyze::PointOptions::default()).expect("capacity");
    let max = r.max_rate.expect("a rate meets the SLO");
    assert!((max - 19.0).abs() < 0.5, "{max}");
    assert_eq!(r.max_speed, Some(1.9));
    // 22/s is the first failing point: it fell behind (20/s served), so the answer is the
    // bracket [19, 22) and its width, not a false "sustains 22".
    let limit = r.limit_rate.expect("limit");
    assert!((limit - 22.0).abs() < 0.5, "{limit}");
    assert!((r.resolution.expect("resolution") - 3.0 / 19.0).abs() < 0.01);
    assert!(
        r.limited_by.iter().any(|w| w.contains("fell behind")),
        "{:?}",
        r.limited_by
    );
    assert!(
        r.answer.contains("19.00 ops/s")
            && r.answer.contains("create_volume.p99=200ms")
            && r.answer.contains("resolution 15.8 %"),
        "{}",
        r.answer
    );
    assert!(Slo::parse("attach.p42x=1s").is_err());
    assert!(Slo::parse("nope.p99=1s").is_err());
    // I/O SLOs are on response time, by kind or all; both syntaxes parse.
    assert!(Slo::parse("io.service.p99.9=10ms").is_err());
    let io = Slo::parse("io.read p99.9<=10ms").expect("slo");
    assert_eq!((io.percentile, io.limit_ns), (99.9, 10_000_000));
    assert_eq!(
        io.target(),
        analyze::capacity::SloTarget::Io(Some(trace_format::IoKind::Read))
    );
    let a = Slo::parse("attach p99<=2s").expect("slo");
    assert_eq!((a.op.as_str(), a.metric.as_str()), ("attach", "response"));
    let a = Slo::parse("create_volume.service p50<=1s").expect("slo");
    assert_eq!(a.metric, "service");
}

#[test]
fn qos_attributes_violations_to_snapshots() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 20 s of db reads at 100/s; snapshots at 2, 7, 12, 17 s, each running 1 s.
    let mut events = Vec::new();
    for i in 0..2000u64 {
        events.push((
            i * 10_000_000,
            r#""tenant":"db","io":{"volume":"v","kind":"read","offset":0,"len":4096}"#.to_owned(),
        ));
    }
    for s in [2u64, 7, 12, 17] {
        events.push((
            s * 1_000_000_000,
            r#""snapshot":{"volume":"v","snapshot":"s"}"#.to_owned(),
        ));
    }
    events.sort_by_key(|e| e.0);
    let trace = write_trace(dir.path(), "t.jsonl", None, &events);
    let t = trace_format::Trace::read(&trace).expect("trace");
    let recs: Vec<_> = t
        .events
        .iter()
        .map(|e| {
            let op = e.op.op_type();
            if op == OpType::Snapshot {
                return rec(e.id, op, e.at, 1_000_000_000 - 1);
            }
            // Reads are slow (8 ms) while a snapshot runs, fast (1 ms) otherwise.
            let sec = e.at / 1_000_000_000;
            let slow = [2, 7, 12, 17].contains(&sec);
            let mut r = rec(e.id, op, e.at, if slow { 8_000_000 } else { 1_000_000 });
            r.during_snapshot = slow;
            r
        })
        .collect();
    let run = write_run(&dir.path().join("run"), &trace, 1.0, &recs);
    let spec_path = dir.path().join("qos.yaml");
    fs_err::write(
        &spec_path,
        "window: 1s\ntenants:\n  db:\n    read.p99.9: 5ms\n",
    )
    .expect("yaml");
    let spec = QosSpec::from_file(&spec_path).expect("spec");
    let r = qos(&run, &spec, false).expect("qos");
    let t = &r.targets[0];
    let snap = t
        .attribution
        .iter()
        .find(|a| a.during == "snapshot")
        .expect("snapshot");
    let quiet = t
        .attribution
        .iter()
        .find(|a| a.during == "quiet")
        .expect("quiet");
    assert_eq!(snap.violated, 4, "{t:#?}");
    assert!(snap.windows >= 4 && snap.windows <= 8, "{t:#?}");
    assert_eq!(quiet.violated, 0);
    assert!(quiet.windows >= 12, "{t:#?}");
    assert!(
        t.sentence
            .starts_with("tenant db read p99.9 > 5.00 ms in 4 of"),
        "{}",
        t.sentence
    );

    fs_err::write(&spec_path, "tenants:\n  db:\n    reed.p99: 5ms\n").expect("yaml");
    let err = QosSpec::from_file(&spec_path)
        .expect_err("bad kind")
        .to_string();
    assert!(err.contains("tenants.db.reed.p99"), "{err}");
}

#[test]
fn report_has_every_figure_with_data_and_export_writes_csv() {
    let dir = tempfile::tempdir().expect("tempdir");
    let events = vec![(0u64, r#""marker":{"name":"m"}"#.to_owned())];
    let trace = write_trace(dir.path(), "t.jsonl", None, &events);
    let mut recs = Vec::new();
    for i in 0..500u64 {
        recs.push(rec(
            i + 1,
            OpType::Io,
            i * 10_000_000,
            1_000_000 + (i % 7) * 100_000,
        ));
    }
    for (j, op) in [OpType::CreateVolume, OpType::Attach, OpType::Snapshot]
        .into_iter()
        .enumerate()
    {
        for k in 0..5u64 {
            recs.push(rec(
                1000 + j as u64 * 10 + k,
                op,
                k * 1_000_000_000,
                100_000_000 * (j as u64 + 1),
            ));
        }
    }
    let run = write_run(&dir.path().join("run"), &trace, 1.0, &recs);
    let r = analyze::report::report(&[run.as_path()], false).expect("report");
    let ids: Vec<&str> = r.figures.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(ids, ["cdf", "io-timeline-1", "rate-1"]);
    assert!(
        r.figures
            .iter()
            .all(|f| f.points > 0 && f.svg.starts_with("<svg"))
    );
    assert!(r.html.contains(r#"data-figure="cdf""#) && !r.html.contains("<script"));

    let csv = dir.path().join("out.csv");
    assert_eq!(
        analyze::frame::export_csv_file(&run, &csv).expect("export"),
        515
    );
    let text = fs_err::read_to_string(&csv).expect("csv");
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some(
            "id,op,intended,dispatched,started,completed,outcome,error_class,dep_wait,queue,response,service,lateness,during_snapshot"
        )
    );
    assert_eq!(
        lines.next(),
        Some("1,io,0,0,0,1000000,ok,,0,0,1000000,1000000,0,false")
    );
    let df = analyze::frame::events_frame(&analyze::Run::open(&run).expect("run")).expect("frame");
    assert_eq!(df.height(), 515);
}

/// An `io_phase` unit's interval log on the run's time axis: the base comes from the log's
/// StartTime against the manifest's origin; the report plots it per tenant and QoS judges its
/// intervals by window (each in the window of its midpoint).
#[test]
fn io_phase_interval_logs_land_on_the_run_axis_for_report_and_qos() {
    use hdrhistogram::Histogram;
    use hdrhistogram::serialization::V2DeflateSerializer;
    use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
    use std::time::{Duration, SystemTime};

    let dir = tempfile::tempdir().expect("tempdir");
    let trace = write_trace(
        dir.path(),
        "t.jsonl",
        None,
        &[
            (0, r#""snapshot":{"volume":"v","snapshot":"s"}"#.into()),
            (
                2_000_000_000,
                r#""tenant":"db","io_phase":{"workload":"w","volume":"v","pattern":"random","read_pct":100,"block_size":"4Ki","load":{"depth":1},"duration":"1300ms"}"#.into(),
            ),
        ],
    );
    let recs = [
        rec(1, OpType::Snapshot, 0, 3_200_000_000),
        rec(2, OpType::IoPhase, 2_000_000_000, 1_500_000_000),
    ];
    let run = write_run(&dir.path().join("run"), &trace, 1.0, &recs);
    // The manifest's origin is 2026-01-01T00:00:00Z; iogen's log starts 2.010 s later.
    let origin = SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600);
    let mut log = Vec::new();
    let mut ser = V2DeflateSerializer::new();
    {
        let mut w = IntervalLogWriterBuilder::new()
            .with_start_time(origin + Duration::from_millis(2010))
            .begin_log_with(&mut log, &mut ser)
            .expect("log");
        // Interval k (200 ms each) holds 10 reads of (k + 1) ms.
        for k in 0..7u64 {
            let mut h = Histogram::<u64>::new_with_bounds(1, 86_400_000_000_000, 3).expect("h");
            h.record_n((k + 1) * 1_000_000, 10).expect("record");
            w.write_histogram(
                &h,
                Duration::from_millis(200 * k),
                Duration::from_millis(200),
                Tag::new("read.response"),
            )
            .expect("interval");
        }
    }
    fs_err::create_dir_all(run.join("io")).expect("io dir");
    fs_err::write(run.join("io/2.hlog"), log).expect("hlog");
    fs_err::write(run.join("io/2.json"), r#"{"elapsed_s": 1.39, "ios": 70}"#).expect("json");

    let r = analyze::Run::open(&run).expect("run");
    let spans = r.scan(analyze::phase_io::Spans::default).expect("scan");
    let units = analyze::phase_io::units(&r, &spans).expect("units");
    assert_eq!(units.len(), 1);
    assert_eq!(units[0].base_ns, 2_010_000_000);
    let starts: Vec<u64> = units[0].intervals.iter().map(|iv| iv.start_ns).collect();
    assert_eq!(starts[..2], [2_010_000_000, 2_210_000_000]);

    let rep = analyze::report::report(&[run.as_path()], false).expect("report");
    let tl = rep
        .figures
        .iter()
        .find(|f| f.id == "io-timeline-1")
        .expect("an I/O timeline from the io_phase unit");
    assert!(
        tl.svg.contains(">db p99.9<") && tl.points >= 3 * 7,
        "{}",
        tl.points
    );

    // Window [2 s, 3 s) holds intervals 0–4 (1–5 ms, p50 3 ms); [3 s, 4 s) holds 5–6 (6–7 ms).
    let spec: QosSpec =
        serde_saphyr::from_str("window: 1s\ntenants:\n  db:\n    read.p50: 4ms\n").expect("spec");
    let q = qos(&run, &spec, false).expect("qos");
    assert_eq!(q.io_phase_units, 1);
    let t = &q.targets[0];
    assert_eq!((t.windows, t.violated), (2, 1), "{t:#?}");
    let v = &t.violations[0];
    assert_eq!((v.start_ns, v.ios), (3_000_000_000, 20), "{v:#?}");
    assert_eq!(v.value_ns / 100_000, 60, "{v:#?}");
    assert_eq!(v.in_flight, ["snapshot"]);

    // The I/O as a whole, for I/O SLOs: 70 reads of 1–7 ms, not the unit's 1.5 s duration.
    let io = analyze::phase_io::RunIo::read(&run)
        .expect("read")
        .expect("units");
    assert_eq!(io.units, 1);
    let read = io
        .response(Some(trace_format::IoKind::Read))
        .expect("reads");
    assert_eq!(read.len(), 70);
    assert_eq!(io.percentile(None, 50.0).map(|v| v / 100_000), Some(40));
    assert_eq!(io.percentile(None, 100.0).map(|v| v / 100_000), Some(70));
    assert!(io.response(Some(trace_format::IoKind::Write)).is_none());
    // compare's rows of the run include `io read` from the histograms.
    let values = analyze::compare::run_values(&r).expect("values");
    let p50 = values[&("io read".to_owned(), analyze::compare::Metric::P50)];
    assert_eq!((p50.events, p50.value as u64 / 100_000), (70, 40));
    assert!(
        analyze::phase_io::RunIo::read(dir.path())
            .expect("no io dir")
            .is_none()
    );
}

/// A `cbt/ID.json` as the local provider writes it (crates/provider-local/src/cbt.rs).
fn cbt_file(run: &std::path::Path, event: u64, base: Option<&str>, check: serde_json::Value) {
    let dir = run.join("cbt");
    fs_err::create_dir_all(&dir).expect("cbt dir");
    let mut f = serde_json::json!({
        "event": event,
        "op": if base.is_some() { "snapshot_delta" } else { "snapshot_allocated" },
        "volume": "data",
        "snapshot": format!("s{event}"),
        "block_size": 4096,
        "image_size": 67108864,
        "timing": {
            "first_range_ns": 250_000 * event,
            "total_ns": 2_000_000 * event,
            "ranges": 10,
            "bytes": 1_048_576 * event,
            "ranges_per_s": 1000.0,
            "bytes_per_s": 1e8,
            "read_bytes": 4096,
        },
        "ranges": [[0, 4096]],
    });
    if let Some(b) = base {
        f["base"] = b.into();
        f["check"] = check;
    }
    fs_err::write(
        dir.join(format!("{event}.json")),
        serde_json::to_vec_pretty(&f).expect("json"),
    )
    .expect("cbt file");
}

fn cbt_check(phases: &[u64], not_checked: &[&str], missing: u64, extra: u64) -> serde_json::Value {
    serde_json::json!({
        "after_ns": 1, "before_ns": 2, "phases": phases, "not_checked": not_checked,
        "writes_in_window": 10, "blocks_in_window": 10, "missing": missing,
        "missing_listed": [], "extra_blocks": extra, "delta_blocks": 12,
    })
}

/// A run with changed-block listings gets the `cbt-1` figure: each listing a point at its
/// provider-call start (bytes above, first range and total below), the deltas' verdict in the
/// title, a line in both panels at the delta with missing blocks (red) and extra ones
/// (orange), and a listing without a record counted in the caption rather than drawn.
#[test]
fn report_draws_changed_block_listings_with_their_check() {
    let dir = tempfile::tempdir().expect("tempdir");
    let events = vec![(0u64, r#""marker":{"name":"m"}"#.to_owned())];
    let trace = write_trace(dir.path(), "t.jsonl", None, &events);
    let recs: Vec<_> = [
        (10, OpType::SnapshotAllocated, 2),
        (11, OpType::SnapshotDelta, 5),
        (12, OpType::SnapshotDelta, 8),
        (13, OpType::SnapshotDelta, 11),
    ]
    .into_iter()
    .map(|(id, op, s)| rec(id, op, s * 1_000_000_000, 30_000_000))
    .collect();
    let run = write_run(&dir.path().join("run"), &trace, 1.0, &recs);
    cbt_file(&run, 10, None, serde_json::Value::Null);
    cbt_file(&run, 11, Some("s10"), cbt_check(&[1], &[], 0, 0));
    cbt_file(&run, 12, Some("s11"), cbt_check(&[1, 4], &[], 2, 3));
    cbt_file(
        &run,
        13,
        Some("s12"),
        cbt_check(&[1], &["event 9: still running"], 0, 0),
    );
    // Listed but not in events.jsonl (a crashed run's last record).
    cbt_file(&run, 14, Some("s13"), cbt_check(&[1], &[], 0, 0));
    let r = analyze::report::report(&[run.as_path()], false).expect("report");
    let fig = r
        .figures
        .iter()
        .find(|f| f.id == "cbt-1")
        .expect("cbt figure");
    // Above: 1 full + 3 deltas; below: first range and total of each.
    assert_eq!(fig.points, 12);
    assert_eq!(
        fig.svg.matches("<circle").count(),
        12 + 4,
        "points and legend"
    );
    assert!(
        fig.svg.contains(
            "Changed blocks: deltas: 4 checked, 2 missing (1 only partly), 3 extra blocks"
        ),
        "{}",
        fig.svg
    );
    assert!(fig.svg.contains("Listing time") && fig.svg.contains("changed (delta)"));
    for color in ["#D55E00", "#E69F00"] {
        assert_eq!(
            fig.svg
                .matches(&format!(r#"stroke="{color}" stroke-opacity"#))
                .count(),
            2,
            "{color}: one line per panel"
        );
    }
    assert!(
        fig.caption
            .contains("Not drawn, without a record in events.jsonl: 1."),
        "{}",
        fig.caption
    );
    assert!(r.html.contains(r#"data-figure="cbt-1" data-points="12""#));
    // Rasterizes: the panels are nested documents resvg reads.
    if let Ok(png) = fig.png(1.0) {
        assert!(png.starts_with(b"\x89PNG"));
    }
}
