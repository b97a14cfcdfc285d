//! The commands on traces: validate, stats, convert, the trace tools (slice, rewrite, merge,
//! split), the committed JSON schemas, completions and the man page.

use std::path::Path;
use std::process::{Command, Stdio};

use trace_format::{Encoding, Trace};

use crate::{BAD, QUICK, cnsreplay, ok, s, stdout, workspace};

#[test]
fn validate_reports_three_located_errors_and_exits_1() {
    let o = cnsreplay(&["validate", BAD]);
    assert_eq!(o.status.code(), Some(1));
    insta::assert_snapshot!(stdout(&o));
}

#[test]
fn validate_json() {
    let o = cnsreplay(&["validate", "--json", BAD]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    insta::assert_json_snapshot!(v);
}

#[test]
fn validate_valid_trace_exits_0() {
    let o = cnsreplay(&["validate", QUICK]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert_eq!(stdout(&o), "traces/quickstart.yaml: valid, 21 events\n");
}

#[test]
fn every_committed_trace_is_valid() {
    for entry in fs_err::read_dir(workspace().join("traces")).expect("traces/") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            continue; // traces/synth/ holds workload models, checked by the synth tests
        }
        let rel = path.strip_prefix(workspace()).expect("under workspace");
        let o = cnsreplay(&["validate", rel.to_str().expect("utf-8 path")]);
        assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    }
}

#[test]
fn stats_table_and_json() {
    let o = cnsreplay(&["stats", QUICK]);
    assert_eq!(o.status.code(), Some(0));
    insta::assert_snapshot!("stats_table", stdout(&o));
    let o = cnsreplay(&["stats", "--json", QUICK]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    insta::assert_json_snapshot!("stats_json", v);
}

#[test]
fn convert_chain_is_lossless() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = |n: &str| dir.path().join(n).to_str().expect("utf-8").to_owned();
    for (from, to) in [
        (QUICK.to_owned(), d("a.cnsbin")),
        (d("a.cnsbin"), d("b.jsonl")),
        (d("b.jsonl"), d("c.yaml")),
    ] {
        let o = cnsreplay(&["-q", "convert", &from, "-o", &to]);
        ok(&o);
    }
    let mut original = Trace::read(workspace().join(QUICK)).expect("read");
    // Writers write the current version: a version-1 trace comes back as the same trace in
    // the current version.
    original.header.version = trace_format::FORMAT_VERSION;
    assert_eq!(Trace::read(d("c.yaml")).expect("read back"), original);
    // And through stdin/stdout with explicit encodings.
    let o = Command::new(env!("CARGO_BIN_EXE_cnsreplay"))
        .args([
            "convert", "-", "--from", "binary", "-o", "-", "--to", "jsonl",
        ])
        .stdin(
            fs_err::File::open(d("a.cnsbin"))
                .expect("open")
                .into_parts()
                .0,
        )
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        Trace::from_bytes(&o.stdout, Some(Encoding::Jsonl)).expect("decode"),
        original
    );
}

#[test]
fn missing_file_is_exit_2_with_the_path() {
    let o = cnsreplay(&["stats", "no/such/trace.jsonl"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no/such/trace.jsonl"), "{err}");
}

#[test]
fn committed_json_schemas_match_the_reports() {
    use clap::ValueEnum;
    use cnsreplay::cli::SchemaFor;
    for &which in SchemaFor::value_variants() {
        let file = which
            .to_possible_value()
            .expect("visible")
            .get_name()
            .to_owned();
        let path = workspace().join(format!("docs/schemas/{file}.schema.json"));
        let want = cnsreplay::commands::meta::schema_text(which);
        if std::env::var_os("UPDATE_SCHEMAS").is_some() {
            fs_err::write(&path, &want).expect("write schema");
        }
        let have = fs_err::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "{} is stale: run `UPDATE_SCHEMAS=1 cargo test -p cnsreplay` and commit it",
            path.display()
        );
    }
}

/// The run-directory files' schemas (`replay::files`: `io/ID.cut.json`, `cbt/ID.json`) are
/// committed as `docs/schemas/run-dir-*.schema.json`, like the commands' (`UPDATE_SCHEMAS=1`
/// rewrites them).
#[test]
fn committed_json_schemas_match_the_run_dir_files() {
    for (name, schema) in replay::files::schemas() {
        let path = workspace().join(format!("docs/schemas/{name}.schema.json"));
        let mut want = serde_json::to_string_pretty(&schema).expect("schema");
        want.push('\n');
        if std::env::var_os("UPDATE_SCHEMAS").is_some() {
            fs_err::write(&path, &want).expect("write schema");
        }
        let have = fs_err::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "{} is stale: run `UPDATE_SCHEMAS=1 cargo test -p cnsreplay` and commit it",
            path.display()
        );
    }
}

#[test]
fn completions_and_man_page() {
    let o = cnsreplay(&["completions", "bash"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).contains("validate"));
    let o = cnsreplay(&["man"]);
    assert!(stdout(&o).starts_with(".ie") && stdout(&o).contains("convert"));
    let dir = tempfile::tempdir().expect("tempdir");
    let o = cnsreplay(&["man", "--dir", dir.path().to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(0));
    assert!(Path::new(&dir.path().join("cnsreplay-validate.1")).exists());
}

#[test]
fn convert_imports_and_exports_fio_iologs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let jsonl = dir.path().join("fio.jsonl");
    let back = dir.path().join("back.iolog");
    let src = "crates/import/tests/fixtures/fio-randrw.iolog";
    let o = cnsreplay(&[
        "-q",
        "convert",
        "--from",
        "fio-iolog",
        src,
        "-o",
        jsonl.to_str().expect("utf-8"),
    ]);
    ok(&o);
    let t = Trace::read(&jsonl).expect("imported trace");
    assert_eq!(
        t.header.provenance.source_format.as_deref(),
        Some("fio-iolog-v3")
    );
    let o = cnsreplay(&[
        "-q",
        "convert",
        jsonl.to_str().expect("utf-8"),
        "-o",
        back.to_str().expect("utf-8"),
        "--to",
        "fio-iolog",
    ]);
    ok(&o);
    let count = |p: &Path, what: &str| {
        fs_err::read_to_string(p)
            .expect("read")
            .lines()
            .filter(|l| l.split_whitespace().nth(2) == Some(what))
            .count()
    };
    let orig = workspace().join(src);
    for what in ["read", "write", "sync"] {
        assert_eq!(count(&back, what), count(&orig, what), "{what} lines");
    }
    // A bad line stops the import with its location unless --skip-bad.
    let bad = dir.path().join("bad.iolog");
    fs_err::write(
        &bad,
        "fio version 3 iolog\n0 f add\n5 f read 0 4096\n6 f frobnicate 0 1\n",
    )
    .expect("write");
    let out = dir.path().join("bad.jsonl");
    let o = cnsreplay(&[
        "convert",
        "--from",
        "fio-iolog",
        bad.to_str().expect("utf-8"),
        "-o",
        out.to_str().expect("utf-8"),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("bad.iolog:4"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!out.exists());
    let o = cnsreplay(&[
        "convert",
        "--skip-bad",
        "--from",
        "fio-iolog",
        bad.to_str().expect("utf-8"),
        "-o",
        out.to_str().expect("utf-8"),
    ]);
    assert_eq!(o.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("skipped 1 bad line"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(Trace::read(&out).expect("read").events.len(), 1);
}

/// Byte totals past 2^64 (two reads of 2^63 bytes and a write) are printed exactly, in the
/// table and in JSON; they used to overflow (a panic in a debug build, a wrap in release).
#[test]
fn stats_byte_totals_do_not_overflow() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = dir.path().join("big.jsonl");
    fs_err::write(
        &t,
        concat!(
            r#"{"format":"cnsreplay-trace","version":1,"volumes":[{"name":"v","size":18446744073709551615}]}"#,
            "\n",
            r#"{"at":0,"id":0,"io":{"volume":"v","kind":"read","offset":0,"len":9223372036854775808}}"#,
            "\n",
            r#"{"at":1,"id":1,"io":{"volume":"v","kind":"read","offset":0,"len":9223372036854775808}}"#,
            "\n",
            r#"{"at":2,"id":2,"io":{"volume":"v","kind":"write","offset":0,"len":4096}}"#,
            "\n",
        ),
    )
    .expect("write");
    let o = cnsreplay(&["stats", t.to_str().expect("utf-8")]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        stdout(&o).contains("io bytes read           18446744073709551616"),
        "{}",
        stdout(&o)
    );
    let o = cnsreplay(&["stats", t.to_str().expect("utf-8"), "--json"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(
        stdout(&o).contains("\"io_read_bytes\": 18446744073709551616"),
        "{}",
        stdout(&o)
    );
}

/// `trace slice` cuts a window that still validates: the quickstart's busiest 2 s, a window
/// starting after its volumes were made (they are declared in the header), and the whole
/// trace filtered to its volume and snapshot ops (attaches, and what needs them, dropped).
#[test]
fn trace_slice_keeps_a_window_that_validates() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("cut.jsonl");
    for args in [
        &["--busiest", "2s"][..],
        &["--start", "1s", "--end", "6s"][..],
        &[
            "--op",
            "create_volume",
            "--op",
            "delete_volume",
            "--op",
            "snapshot",
            "--op",
            "delete_snapshot",
        ][..],
    ] {
        let mut a = vec![
            "trace",
            "slice",
            "traces/quickstart.yaml",
            "-o",
            s(&out),
            "--json",
        ];
        a.extend_from_slice(args);
        let o = cnsreplay(&a);
        assert_eq!(o.status.code(), Some(0), "{o:?}");
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).expect("report json");
        assert!(r["kept"].as_u64().unwrap() > 0, "{r}");
        let v = cnsreplay(&["validate", s(&out)]);
        assert_eq!(v.status.code(), Some(0), "{args:?}: {v:?} {r}");
    }
    let bad = cnsreplay(&["trace", "slice", "traces/quickstart.yaml", "-o", s(&out)]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--busiest"));
}

/// `trace rewrite --speed` with a factor so small that a time overflows: refused (exit 1),
/// naming the event, its line and the smallest speed it allows; no saturated times.
#[test]
fn trace_rewrite_refuses_a_speed_that_overflows_a_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("src.jsonl");
    let o = cnsreplay(&["convert", "traces/quickstart.yaml", "-o", s(&src)]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let out = dir.path().join("slow.jsonl");
    let o = cnsreplay(&[
        "trace",
        "rewrite",
        s(&src),
        "-o",
        s(&out),
        "--speed",
        "1e-12",
    ]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            "--speed: {}:4: events[2].at: at=2s divided by speed 0.000000000001 is 2.000e12 s, \
             beyond the largest time offset (2^64 ns, about 584 years); this event needs a \
             speed of at least 1.084e-10",
            s(&src)
        )),
        "{err}"
    );
    // A slow-down that fits is fine.
    let o = cnsreplay(&[
        "trace",
        "rewrite",
        s(&src),
        "-o",
        s(&out),
        "--speed",
        "1e-6",
    ]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
}

/// `trace rewrite` (alias `scale`): times divided, names mapped, and a rewrite that changes
/// nothing is a lossless copy.
#[test]
fn trace_rewrite_scales_and_maps_and_copies_losslessly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (same, fast) = (dir.path().join("same.jsonl"), dir.path().join("fast.jsonl"));
    let src = dir.path().join("src.jsonl");
    let o = cnsreplay(&["convert", "traces/quickstart.yaml", "-o", s(&src)]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let o = cnsreplay(&["trace", "rewrite", s(&src), "-o", s(&same)]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_eq!(
        fs_err::read(&src).expect("src"),
        fs_err::read(&same).expect("copy")
    );
    let o = cnsreplay(&[
        "trace",
        "scale",
        s(&src),
        "-o",
        s(&fast),
        "--speed",
        "4",
        "--map",
        "tenant:nosuch=x",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let a = Trace::read(&src).expect("src trace");
    let b = Trace::read(&fast).expect("fast trace");
    assert_eq!(a.events.len(), b.events.len());
    let quarter = |t: u64| (t as f64 / 4.0).round() as u64;
    for (x, y) in a.events.iter().zip(&b.events) {
        assert_eq!(y.at, quarter(x.at));
        match (&x.op, &y.op) {
            // An io_phase's duration is compressed with its instants (`run --speed` alike).
            (trace_format::Op::IoPhase(p), trace_format::Op::IoPhase(q)) => {
                let d = p.duration.expect("a timed phase");
                assert_eq!(q.duration, Some(quarter(x.at + d) - quarter(x.at)), "{x:?}");
                let mut q = q.clone();
                q.duration = p.duration;
                assert_eq!(*p, q);
            }
            _ => assert_eq!(x.op, y.op),
        }
    }
    let bad = cnsreplay(&[
        "trace",
        "map",
        s(&src),
        "-o",
        s(&fast),
        "--map",
        "color:a=b",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown kind"));
}

/// `trace merge`: a trace merged with itself is twice its events with the names kept apart
/// (ids renumbered), and it validates and replays on the local provider with every operation
/// succeeding: the two copies' volumes, workloads and snapshots are distinct objects (without
/// the prefixes the second copy's creates would clash with the first's).
#[test]
fn trace_merge_keeps_two_copies_apart_and_the_result_replays() {
    let dir = tempfile::tempdir().expect("tempdir");
    let one = dir.path().join("one.yaml");
    fs_err::write(
        &one,
        "format: cnsreplay-trace
version: 1
defaults: {volume_size: 64Mi}
volumes: [{name: pre}]
events:
  - {at: 0s, id: 1, create_volume: {volume: v}}
  - {at: 200ms, id: 2, attach: {workload: w, volumes: [v, pre]}}
  - {at: 600ms, id: 3, snapshot: {volume: v, snapshot: s}}
  - {at: 1s, id: 4, create_volume: {volume: r, source: {snapshot: s}}}
  - {at: 1200ms, id: 5, detach: {workload: w}}
  - {at: 1400ms, id: 6, delete_snapshot: {snapshot: s}}
  - {at: 1600ms, id: 7, delete_volume: {volume: r}}
  - {at: 1600ms, id: 8, delete_volume: {volume: v}}
",
    )
    .expect("trace");
    let out = dir.path().join("both.cnsbin");
    let o = cnsreplay(&[
        "trace",
        "merge",
        s(&one),
        s(&one),
        "-o",
        s(&out),
        "--prefix",
        "a-",
        "--prefix",
        "b-",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).expect("report json");
    assert_eq!(r["events"], 16, "{r}");
    let both = Trace::read(&out).expect("merged");
    let ids: Vec<u64> = both.events.iter().map(|e| e.id).collect();
    assert_eq!(ids, (1..=16).collect::<Vec<_>>());
    let names: Vec<&str> = both
        .header
        .volumes
        .iter()
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(names, ["a-pre", "b-pre"]);
    let v = cnsreplay(&["validate", s(&out)]);
    assert_eq!(v.status.code(), Some(0), "{v:?}");
    let run = dir.path().join("run");
    let o = cnsreplay(&["-q", "run", s(&out), "--provider", "local", "-o", s(&run)]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let summary: serde_json::Value =
        serde_json::from_slice(&fs_err::read(run.join("summary.json")).expect("summary"))
            .expect("json");
    let ops = summary["ops"].as_object().expect("ops");
    assert_eq!(
        ops.values()
            .map(|st| st["count"].as_u64().unwrap_or(0))
            .sum::<u64>(),
        16
    );
    for (op, st) in ops {
        assert_eq!(st["failed"], 0, "{op}: {st}");
    }
    let bad = cnsreplay(&[
        "trace",
        "merge",
        s(&one),
        s(&one),
        "-o",
        s(&out),
        "--prefix",
        "x-",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--prefix given 1 times"));
    // A repeated prefix: refused before anything is written (the two copies' objects would be
    // one), also for traces that declare nothing.
    let bare = dir.path().join("bare.yaml");
    fs_err::write(
        &bare,
        "format: cnsreplay-trace\nversion: 1\nevents:\n  - {at: 0s, create_volume: {volume: v, size: 1Gi}}\n",
    )
    .expect("trace");
    let fresh = dir.path().join("fresh.cnsbin");
    for input in [&one, &bare] {
        let bad = cnsreplay(&[
            "trace",
            "merge",
            s(input),
            s(input),
            "-o",
            s(&fresh),
            "--prefix",
            "x-",
            "--prefix",
            "x-",
        ]);
        assert_eq!(bad.status.code(), Some(1), "{bad:?}");
        assert!(
            String::from_utf8_lossy(&bad.stderr).contains("have the same prefix \"x-\""),
            "{bad:?}"
        );
        assert!(!fresh.exists(), "a refused merge must write nothing");
    }
    // Prefixes that differ but still make one name (`x` + `y-v`, `xy-` + `v`): the checker
    // stops the merge at the event, naming it.
    let other = dir.path().join("other.yaml");
    fs_err::write(
        &other,
        "format: cnsreplay-trace\nversion: 1\nevents:\n  - {at: 1s, id: 7, create_volume: {volume: y-v, size: 1Gi}}\n",
    )
    .expect("trace");
    let bad = cnsreplay(&[
        "trace",
        "merge",
        s(&bare),
        s(&other),
        "-o",
        s(&fresh),
        "--prefix",
        "xy-",
        "--prefix",
        "x",
    ]);
    assert_eq!(bad.status.code(), Some(1), "{bad:?}");
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("would be invalid at event id 2 (event id 7 of") && err.contains("\"xy-v\""),
        "{err}"
    );
}

/// `trace slice` keeps an `io_phase` running across the window's start clipped (from the
/// cut, for the rest of its duration) and counts one bounded by bytes that it drops; the text
/// and the JSON report say so, and the slice validates.
#[test]
fn trace_slice_clips_or_counts_io_phases_running_at_the_cut() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = dir.path().join("phases.yaml");
    fs_err::write(
        &t,
        "format: cnsreplay-trace
version: 1
volumes: [{name: v1, size: 1Gi}]
workloads: [{name: w1, volumes: [v1]}]
events:
  - {at: 1s, id: 1, io_phase: {workload: w1, volume: v1, pattern: random, read_pct: 70, block_size: 4Ki, load: {rate: {iops: 100}}, duration: 10s}}
  - {at: 2s, id: 2, io_phase: {workload: w1, volume: v1, pattern: sequential, read_pct: 0, block_size: 64Ki, load: {depth: 4}, bytes: 1Gi}}
  - {at: 8s, id: 3, detach: {workload: w1}}
",
    )
    .expect("trace");
    let out = dir.path().join("cut.yaml");
    let args = ["trace", "slice", s(&t), "-o", s(&out), "--start", "5s"];
    let o = cnsreplay(&args);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let text = stdout(&o);
    assert!(
        text.contains("clipped 1: io_phase running at the window's start")
            && text.contains("dropped 1: io_phase bounded by bytes running at the window's start"),
        "{text}"
    );
    let cut = Trace::read(&out).expect("slice");
    let kept: Vec<(u64, u64, Option<u64>)> = cut
        .events
        .iter()
        .map(|e| match &e.op {
            trace_format::Op::IoPhase(p) => (e.id, e.at, p.duration),
            _ => (e.id, e.at, None),
        })
        .collect();
    assert_eq!(
        kept,
        [(1, 0, Some(6_000_000_000)), (3, 3_000_000_000, None)]
    );
    let v = cnsreplay(&["validate", s(&out)]);
    assert_eq!(v.status.code(), Some(0), "{v:?}");
    let mut json = args.to_vec();
    json.push("--json");
    let o = cnsreplay(&json);
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).expect("report json");
    assert_eq!(r["clipped"], 1, "{r}");
    assert_eq!(
        r["dropped"]["io_phase bounded by bytes running at the window's start (what is left of it is unknown)"],
        1,
        "{r}"
    );
}

/// `trace split` then `run --start-at`: a synthesized steady-state trace of three tenants
/// split into three parts that each validate, replayed by three drivers at once on the sim
/// provider from one wall-clock instant. Between them the drivers replay every event of the
/// trace exactly once (the markers once per part), and each run's clock starts at that instant.
#[test]
fn a_split_trace_replays_on_parallel_drivers_from_one_instant() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let model = d.join("m.yaml");
    fs_err::write(
        &model,
        "duration: 20s\ncluster: {hosts: 3, containers_per_host: 4, tenants: [{name: red, share: 1}, {name: green, share: 1}, {name: blue, share: 1}]}\n\
         lifetime: {exponential: {mean: 5s}}\nvolumes: {size: 64Mi}\n",
    )
    .expect("model");
    let trace = d.join("t.cnsbin");
    let o = cnsreplay(&["-q", "synth", s(&model), "--seed", "3", "-o", s(&trace)]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let parts = d.join("parts");
    let o = cnsreplay(&["trace", "split", s(&trace), "-o", s(&parts), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let names: Vec<&str> = report["parts"]
        .as_object()
        .expect("parts")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(names, ["blue", "green", "red"], "{report}");
    let start = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(4);
    let children: Vec<_> = names
        .iter()
        .map(|n| {
            let part = parts.join(format!("{n}.cnsbin"));
            let o = cnsreplay(&["validate", s(&part)]);
            assert_eq!(o.status.code(), Some(0), "{n}: {o:?}");
            Command::new(env!("CARGO_BIN_EXE_cnsreplay"))
                .args(["-q", "run", s(&part), "--provider", "sim", "--start-at"])
                .arg(start.to_string())
                .args(["-o", s(&d.join(format!("run-{n}")))])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start a driver")
        })
        .collect();
    for c in children {
        let o = c.wait_with_output().expect("driver");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let mut ids: Vec<u64> = Vec::new();
    let mut markers = 0;
    for n in &names {
        let run = d.join(format!("run-{n}"));
        let m: serde_json::Value = serde_json::from_str(
            &fs_err::read_to_string(run.join("manifest.json")).expect("manifest"),
        )
        .expect("manifest json");
        let origin: jiff::Timestamp = m["origin"].as_str().expect("origin").parse().expect("time");
        // Never before the instant (a driver that did not wait would start about 3 s early);
        // how soon after it is the host's wake-up latency, which a loaded test machine
        // stretches (60 ms seen in CI): not what this test measures.
        let off = origin.duration_since(start).as_secs_f64();
        assert!(
            (0.0..1.0).contains(&off),
            "{n}: clock started {off} s after --start-at"
        );
        for line in fs_err::read_to_string(run.join("events.jsonl"))
            .expect("events")
            .lines()
        {
            let r: serde_json::Value = serde_json::from_str(line).expect("record");
            if r["op"] == "marker" {
                markers += 1;
            } else {
                ids.push(r["id"].as_u64().expect("id"));
            }
        }
    }
    ids.sort_unstable();
    let all = cnsreplay(&["stats", "--json", s(&trace)]);
    let stats: serde_json::Value = serde_json::from_slice(&all.stdout).expect("stats json");
    let total = stats["stats"]["events"].as_u64().expect("events");
    let trace_markers = report["markers"].as_u64().expect("markers");
    assert_eq!(ids.len() as u64, total - trace_markers);
    ids.dedup();
    assert_eq!(
        ids.len() as u64,
        total - trace_markers,
        "an event replayed twice"
    );
    assert_eq!(markers, trace_markers * 3);

    // Merged into one run directory: every record once, and what `analyze` computes from it
    // is computed from all the records (the p99 of the union, not a mix of the parts' p99s).
    let merged = d.join("merged");
    let mut args = vec![
        "merge-runs".to_owned(),
        "-o".to_owned(),
        s(&merged).to_owned(),
    ];
    args.extend(
        names
            .iter()
            .map(|n| s(&d.join(format!("run-{n}"))).to_owned()),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = cnsreplay(&args);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let o = cnsreplay(&["analyze", "summary", "--json", s(&merged)]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let sum: serde_json::Value = serde_json::from_slice(&o.stdout).expect("summary json");
    let run = &sum["runs"][0];
    assert_eq!(run["events"].as_u64(), Some(total), "{run}");
    let mut responses: std::collections::BTreeMap<String, Vec<u64>> = Default::default();
    for n in &names {
        let text = fs_err::read_to_string(d.join(format!("run-{n}/events.jsonl"))).expect("events");
        for line in text.lines() {
            let r: serde_json::Value = serde_json::from_str(line).expect("record");
            let op = r["op"].as_str().expect("op").to_owned();
            if op != "marker" {
                responses
                    .entry(op)
                    .or_default()
                    .push(r["response"].as_u64().expect("response"));
            }
        }
    }
    for (op, v) in responses {
        // The engine's and analyze's histogram: 3 significant digits.
        let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 1 << 42, 3).expect("bounds");
        for x in &v {
            h.saturating_record((*x).max(1));
        }
        let want = h.value_at_quantile(0.99);
        let got = run["ops"][&op]["response"]["p99"].as_u64().expect("p99");
        assert_eq!(
            got,
            want,
            "{op}: merged p99 vs the p99 of all {} records",
            v.len()
        );
    }
}

/// What `fetch` execs in its pod, by hand: `cnsreplay pack DIR | tar -x` gives DIR back.
#[test]
fn pack_writes_an_archive_that_tar_reads() {
    let d = tempfile::tempdir().expect("tempdir");
    let run = d.path().join("exp2-20261126T000000Z");
    std::fs::create_dir_all(run.join("histograms")).expect("mkdir");
    std::fs::write(run.join("summary.json"), "{}\n").expect("write");
    std::fs::write(run.join("histograms/attach.hlog"), vec![1u8; 70_000]).expect("write");
    let archive = d.path().join("run.tar");
    let status = Command::new(env!("CARGO_BIN_EXE_cnsreplay"))
        .args(["pack", s(&run)])
        .stdout(std::fs::File::create(&archive).expect("create"))
        .status()
        .expect("pack");
    assert!(status.success());
    let out = d.path().join("out");
    std::fs::create_dir(&out).expect("mkdir");
    let tar = Command::new("tar")
        .args(["-xf", s(&archive), "-C", s(&out)])
        .output()
        .expect("tar");
    assert!(tar.status.success(), "{tar:?}");
    let back = out.join("exp2-20261126T000000Z");
    assert_eq!(
        std::fs::read(back.join("histograms/attach.hlog")).expect("read"),
        vec![1u8; 70_000]
    );
    assert_eq!(
        std::fs::read_to_string(back.join("summary.json")).expect("read"),
        "{}\n"
    );
}
