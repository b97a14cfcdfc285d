//! `cnsreplay capacity` end to end on the sim's queueing model, where the truth is known:
//! 4 attach servers with exponential service of mean 10 ms saturate at 4 / 0.01 s = 400
//! attaches/s.

use std::path::{Path, PathBuf};

use super::{LENIENT, attach_trace, cnsreplay, ok, s, stdout};

const SIM: [&str; 6] = [
    "--provider",
    "sim",
    "--sim-servers",
    "attach=4",
    "--sim-latency",
    "attach=exponential:10ms",
];

/// `capacity TRACE -o OUT` on [`SIM`] against `attach p99<=2s` at seed `seed`: bracket to 4 %
/// with up to two runs a point, then `refine` runs around the boundary; its JSON report.
fn search_sim(trace: &Path, out: &Path, refine: u32, seed: u64) -> serde_json::Value {
    let (refine, seed) = (refine.to_string(), seed.to_string());
    let mut args = vec!["-q", "capacity", s(trace), "-o", s(out)];
    args.extend(SIM);
    args.extend([
        "--slo",
        "attach p99<=2s",
        "--json",
        LENIENT,
        "--allow-invalid",
    ]);
    args.extend(["--start", "1.8", "--factor", "1.25", "--resolution", "0.04"]);
    args.extend(["--repeats", "2", "--refine", &refine, "--seed", &seed]);
    let o = cnsreplay(&args);
    ok(&o);
    serde_json::from_slice(&o.stdout).expect("json")
}

/// One search of [`SIM`] at seed `seed` (short: a 2000-attach trace, bracket to 4 % with up to
/// two runs a point — a run failed by a hiccup of a loaded machine is run again — then 12 runs
/// around the boundary): its JSON report.
fn search(dir: &Path, seed: u64) -> serde_json::Value {
    let t = attach_trace(dir, 2000, 5_000_000);
    let out = dir.join("cap");
    let v = search_sim(&t, &out, 12, seed);
    let file: serde_json::Value =
        serde_json::from_slice(&fs_err::read(out.join("capacity.json")).expect("capacity.json"))
            .expect("json");
    assert_eq!(file, v);
    v
}

/// Three seeds (the full calibration, 20 seeds of 10 000 events, is
/// `scripts/calibrate-capacity.sh`): the rate passing 90 % of runs is reported below the
/// saturation rate (at most one seed of three at or above it), within 10 % of it (short runs:
/// the pass curve is wider than with 10 000 events), and the 95 % capacity interval covers 400/s
/// in at least two of three.
#[test]
fn the_search_reports_a_rate_below_saturation_with_an_interval_covering_it() {
    let reports: Vec<serde_json::Value> = std::thread::scope(|sc| {
        let handles: Vec<_> = (1..=3_u64)
            .map(|seed| {
                sc.spawn(move || {
                    let dir = tempfile::tempdir().expect("tempdir");
                    search(dir.path(), seed * 1000)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("search thread"))
            .collect()
    });
    let (mut above, mut covers) = (0, 0);
    for v in &reports {
        assert_eq!(v["complete"], true, "{v:#}");
        let attach = v["rates"]
            .as_array()
            .expect("rates")
            .iter()
            .find(|r| r["op"] == "attach")
            .expect("attach rate");
        let x = attach["at_probability"]
            .as_f64()
            .unwrap_or_else(|| panic!("no fitted rate: {}", v["answer"]));
        assert!(
            (x / 400.0 - 1.0).abs() <= 0.10,
            "sustained {x}/s is not within 10 % of the analytic 400/s: {}",
            v["answer"]
        );
        above += usize::from(x >= 400.0);
        let (lo, hi) = (
            attach["interval"][0].as_f64(),
            attach["interval"][1].as_f64(),
        );
        covers += usize::from(lo.is_some_and(|l| l <= 400.0) && hi.is_some_and(|h| h >= 400.0));
        // The fit used every run, and what failed above the limit is named.
        assert_eq!(
            v["fit_runs"].as_u64(),
            Some(v["points"].as_array().expect("points").len() as u64)
        );
        assert!(
            !v["limited_by"].as_array().expect("limited_by").is_empty(),
            "{v:#}"
        );
    }
    let answers: Vec<&serde_json::Value> = reports.iter().map(|v| &v["answer"]).collect();
    assert!(
        above <= 1,
        "{above} of 3 seeds at or above saturation: {answers:#?}"
    );
    assert!(
        covers >= 2,
        "the interval covered 400/s in {covers} of 3: {answers:#?}"
    );
}

#[test]
fn analyze_capacity_rereads_a_search() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = attach_trace(dir.path(), 600, 5_000_000);
    let out = dir.path().join("cap");
    let mut args = vec!["-q", "capacity", s(&t), "-o", s(&out)];
    args.extend(SIM);
    args.extend(["--slo", "attach p99<=2s", LENIENT, "--allow-invalid"]);
    args.extend(["--start", "2", "--factor", "2", "--resolution", "0.2"]);
    args.extend(["--repeats", "1", "--refine", "2"]);
    ok(&cnsreplay(&args));
    let o = cnsreplay(&[
        "analyze",
        "capacity",
        s(&out),
        "--slo",
        "attach p99<=2s",
        "--allow-invalid",
    ]);
    ok(&o);
    let text = stdout(&o);
    assert!(text.contains("resolution"), "{text}");
}

#[test]
fn ctrl_c_stops_the_search_and_leaves_the_partial_curve() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 4000 attaches at 200/s: 20 s at speed 1.
    let t = attach_trace(dir.path(), 4000, 5_000_000);
    let out = dir.path().join("cap");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_cnsreplay"));
    cmd.args(["-q", "capacity", s(&t), "-o", s(&out)]).args(SIM);
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    std::thread::sleep(std::time::Duration::from_secs(3));
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&child),
        rustix::process::Signal::INT,
    )
    .expect("SIGINT");
    let o = child.wait_with_output().expect("wait");
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let v: serde_json::Value =
        serde_json::from_slice(&fs_err::read(out.join("capacity.json")).expect("capacity.json"))
            .expect("json");
    assert_eq!(v["stopped"], "interrupted", "{v:#}");
    assert_eq!(v["complete"], false);
    // The run that was going on stopped as interrupted, with its results on disk.
    let run = out.join("001-x1.000000-r0");
    let m: serde_json::Value =
        serde_json::from_slice(&fs_err::read(run.join("manifest.json")).expect("manifest"))
            .expect("json");
    assert_eq!(m["state"], "interrupted", "{m:#}");
    // No second point was started.
    assert!(!out.join("002-x2.000000-r0").exists());
}

/// A point's validity is the verdict the engine wrote (`summary.json`, `validity.verdict`),
/// and a run the engine judged engine-bound names the engine as what limited it. The limits
/// are set below anything a run can show (`start.p99=0ns`, and the workers at most 0 %
/// busy), so every run the engine makes is engine-bound by its own check, whatever the
/// machine's load.
#[test]
fn an_engine_bound_run_is_a_failed_point_limited_by_the_engine() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = attach_trace(dir.path(), 200, 5_000_000);
    let out = dir.path().join("cap");
    let mut args = vec!["-q", "capacity", s(&t), "-o", s(&out)];
    args.extend(SIM);
    args.extend([
        "--slo",
        "attach p99<=2s",
        "--json",
        "--max-runs",
        "2",
        "--validity=start.p99=0ns,start.p99.9=10s,rate=100%,workers=0%",
    ]);
    let o = cnsreplay(&args);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let points = v["points"].as_array().expect("points");
    assert_eq!(points.len(), 2, "{v:#}");
    for p in points {
        let e = &p["eval"];
        assert_eq!(e["validity"], "engine-bound", "{e:#}");
        assert_eq!(e["validity_source"], "summary.validity", "{e:#}");
        assert_eq!(e["pass"], false, "{e:#}");
        // The run written by the engine says the same.
        let run = PathBuf::from(e["run"].as_str().expect("run"));
        let summary: serde_json::Value =
            serde_json::from_slice(&fs_err::read(run.join("summary.json")).expect("summary"))
                .expect("json");
        assert_eq!(summary["validity"]["verdict"], "engine-bound");
    }
    let limited: Vec<&str> = v["limited_by"]
        .as_array()
        .expect("limited_by")
        .iter()
        .filter_map(|x| x.as_str())
        .collect();
    assert!(
        limited
            .iter()
            .any(|l| l.starts_with("the engine, not the system") && l.contains("start lateness")),
        "limited_by does not name the engine: {limited:?}"
    );
    // The SLO held: the engine, not the system, failed the points.
    assert!(
        !limited.iter().any(|l| l.contains("attach p99")),
        "{limited:?}"
    );
}

/// A synthesized churn trace with `end: clean_up`: its burst of deletes at the end is the
/// trace's tear-down, outside the steady part synth names (`steady_ns`), so it does not fail
/// every point as a growing delete backlog; the search finds the attach pool's saturation
/// (4 servers × 10 ms: 400/s) within 5 %.
#[test]
fn a_search_of_a_synthesized_trace_with_a_clean_up_tail_finds_the_saturation() {
    let dir = tempfile::tempdir().expect("tempdir");
    let model = dir.path().join("churn.yaml");
    // 400 containers of exponential 4 s lives: ~100 attach/s for 20 s, then the clean-up
    // detaches and deletes the 400 alive at one instant: 16 % of each, so inside the middle
    // 80 % of their intended instants.
    fs_err::write(
        &model,
        "duration: 20s\ncluster: {hosts: 40, containers_per_host: 10, pin_nodes: false}\n\
         lifetime: {exponential: {mean: 4s}}\nvolumes: {size: 16Mi}\nend: clean_up\n",
    )
    .expect("write model");
    let trace = dir.path().join("churn.jsonl");
    ok(&cnsreplay(&[
        "synth",
        s(&model),
        "-o",
        s(&trace),
        "--seed",
        "3",
    ]));
    let v = search_sim(&trace, &dir.path().join("cap"), 10, 7);
    assert_eq!(v["complete"], true, "{v:#}");
    let points = v["points"].as_array().expect("points");
    for p in points {
        let e = &p["eval"];
        let w = e["steady_window_ns"].as_array().expect("a steady window");
        let speed = e["speed"].as_f64().expect("speed");
        // The steady part ends where the trace's 20 s do, on the run's clock.
        let end = w[1].as_f64().expect("end");
        assert!(
            (end - 20e9 / speed).abs() <= 1.0,
            "window {w:?} at speed {speed}"
        );
        for r in e["reasons"].as_array().expect("reasons") {
            let r = r.as_str().unwrap_or_default();
            assert!(
                !((r.contains("delete_volume") || r.contains("detach")) && speed < 3.0),
                "a point far below saturation failed on the clean-up: {r}"
            );
        }
    }
    let attach = v["rates"]
        .as_array()
        .expect("rates")
        .iter()
        .find(|r| r["op"] == "attach")
        .expect("attach rate");
    // The bracket's passing side: the highest attach rate a point sustained.
    let sustained = attach["sustained"].as_f64().expect("a sustained point");
    assert!(
        (sustained / 400.0 - 1.0).abs() <= 0.05,
        "the highest sustained point, {sustained} attach/s, is not within 5 % of the sim's \
         400/s: {}",
        v["answer"]
    );
    // The rate passing 90 % of runs lies below it, within the short runs' spread.
    let x = attach["at_probability"]
        .as_f64()
        .unwrap_or_else(|| panic!("no fitted rate: {}", v["answer"]));
    assert!(
        x <= sustained * 1.02 && (x / 400.0 - 1.0).abs() <= 0.10,
        "the 90 % rate {x}/s: {}",
        v["answer"]
    );
}
