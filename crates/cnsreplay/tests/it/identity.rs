//! Where one command's output becomes another's input: outputs never land inside a run
//! directory the command reads, and runs are combined only when they belong together
//! (`replay::identity`): `merge-runs` takes the runs of every part of one split at one speed
//! and carries the worst part's verdict; `sweep` and `analyze capacity` keep to one trace and
//! one setup. Every refusal exits 2 and names both paths (or both runs) and what differs.

use std::path::{Path, PathBuf};
use std::process::Output;

use super::{LENIENT, cnsreplay, cnsreplay_env, ok, s, stdout};

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts exit 2 with every one of `needles` in stderr; the stderr.
fn refused(o: &Output, needles: &[&str]) -> String {
    let err = stderr(o);
    assert_eq!(
        o.status.code(),
        Some(2),
        "stdout: {}\nstderr: {err}",
        stdout(o)
    );
    for n in needles {
        assert!(err.contains(n), "{n:?} not in: {err}");
    }
    err
}

/// A trace of `n` attaches 5 ms apart, round-robin over `tenants` (none: no tenant), the
/// workload names prefixed with `tag` (so two traces with different tags differ).
fn attach_trace(dir: &Path, name: &str, tag: &str, n: u64, tenants: &[&str]) -> PathBuf {
    let mut text = String::from(
        r#"{"format":"cnsreplay-trace","version":1,"provenance":{"generator":"test"}}"#,
    );
    text.push('\n');
    for i in 0..n {
        let tenant = if tenants.is_empty() {
            String::new()
        } else {
            format!(r#""tenant":"{}","#, tenants[i as usize % tenants.len()])
        };
        text.push_str(&format!(
            "{{\"at\":{},\"id\":{},{tenant}\"attach\":{{\"workload\":\"{tag}{i}\",\"volumes\":[]}}}}\n",
            i * 5_000_000,
            i + 1
        ));
    }
    let path = dir.join(name);
    fs_err::write(&path, text).expect("write trace");
    path
}

/// `run TRACE --provider sim` (attaches of 20 ms, lenient verdict limits unless `extra` sets
/// its own) into `out`, with `extra` arguments and environment.
fn sim_run(trace: &Path, out: &Path, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let mut args = vec![
        "-q",
        "run",
        s(trace),
        "--provider",
        "sim",
        "--sim-latency",
        "attach=constant:20ms",
        "-o",
        s(out),
    ];
    if !extra.iter().any(|a| a.starts_with("--validity")) {
        args.push(LENIENT);
    }
    args.extend(extra);
    cnsreplay_env(&args, env)
}

fn sha256(p: &Path) -> String {
    replay::rundir::sha256_file(p).expect("sha256")
}

fn manifest(run: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs_err::read(run.join("manifest.json")).expect("manifest"))
        .expect("manifest json")
}

/// `analyze report` and `analyze export` writing into the run they read — over its records,
/// as a new file, through `..` or a link to the run, a figure directory — and `merge-runs`
/// writing into a part: each refused before anything is written (exit 2, naming both
/// paths); the run keeps every byte and gains no file. Elsewhere the same commands write.
#[test]
fn an_output_inside_a_run_it_reads_is_refused_and_the_run_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let t = attach_trace(d, "t.jsonl", "w", 40, &[]);
    let run = d.join("run");
    ok(&sim_run(&t, &run, &[], &[]));
    let link = d.join("link");
    std::os::unix::fs::symlink(&run, &link).expect("symlink");
    let listing = |p: &Path| -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<(String, Vec<u8>)> = walk(p)
            .into_iter()
            .map(|f| {
                let bytes = fs_err::read(&f).expect("read");
                (f.display().to_string(), bytes)
            })
            .collect();
        v.sort();
        v
    };
    let before = listing(&run);
    let events = run.join("events.jsonl");
    let inside = [
        events.clone(),
        run.join("report.html"),
        run.join("io/../report.html"),
        link.join("report.html"),
    ];
    for out in &inside {
        let o = cnsreplay(&[
            "analyze",
            "report",
            s(&run),
            "-o",
            s(out),
            "--allow-invalid",
        ]);
        refused(
            &o,
            &[
                &format!("refusing to write {}", out.display()),
                &format!("it is inside {}", run.display()),
            ],
        );
        assert_eq!(listing(&run), before, "report -o {}", out.display());
    }
    let elsewhere = d.join("report.html");
    for flag in ["--svg", "--png"] {
        let figs = run.join("figures");
        let o = cnsreplay(&[
            "analyze",
            "report",
            s(&run),
            "-o",
            s(&elsewhere),
            flag,
            s(&figs),
            "--allow-invalid",
        ]);
        refused(&o, &[&format!("refusing to write {}", figs.display())]);
        assert!(!elsewhere.exists(), "{flag}: the report was written");
        assert_eq!(listing(&run), before, "{flag}");
    }
    for (flag, out) in [
        ("--csv", &events),
        ("--csv", &run.join("x.csv")),
        ("--parquet", &link.join("x.parquet")),
    ] {
        let o = cnsreplay(&["analyze", "export", s(&run), flag, s(out)]);
        refused(&o, &[&format!("refusing to write {}", out.display())]);
        assert_eq!(listing(&run), before, "export {flag} {}", out.display());
    }
    let o = cnsreplay(&[
        "merge-runs",
        s(&run),
        s(&link),
        "-o",
        s(&run.join("merged")),
    ]);
    refused(&o, &["refusing to write", "it is inside"]);
    assert_eq!(listing(&run), before, "merge-runs");
    // Outside the run, the same commands write.
    ok(&cnsreplay(&[
        "analyze",
        "report",
        s(&run),
        "-o",
        s(&elsewhere),
        "--allow-invalid",
    ]));
    ok(&cnsreplay(&[
        "analyze",
        "export",
        s(&run),
        "--csv",
        s(&d.join("x.csv")),
    ]));
    assert_eq!(listing(&run), before);
}

/// Every file under `p`.
fn walk(p: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in fs_err::read_dir(p).expect("read dir") {
        let path = e.expect("entry").path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// The runs of a three-tenant trace's parts (`trace split`): merged when they are every part
/// once at one speed — the merged run at their speed —; refused for the same run twice, a
/// run of another trace, two runs of one part, a missing part, parts at different speeds.
/// A merged run whose part was engine-bound is engine-bound itself, and `analyze report`
/// refuses it as it refuses that part, unless `--allow-invalid`.
#[test]
fn merge_runs_takes_every_part_of_one_split_once_and_its_worst_verdict() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    // 450 attaches: 150 a tenant, enough for each part's timing checks to be judged.
    let t = attach_trace(d, "t.jsonl", "w", 450, &["a", "b", "c"]);
    let parts = d.join("parts");
    ok(&cnsreplay(&[
        "trace",
        "split",
        s(&t),
        "-o",
        s(&parts),
        "--to",
        "jsonl",
    ]));
    let part = |n: &str| parts.join(format!("{n}.jsonl"));
    let run = |n: &str, name: &str, extra: &[&str], env: &[(&str, &str)]| {
        let out = d.join(name);
        let o = sim_run(&part(n), &out, extra, env);
        assert!(
            matches!(o.status.code(), Some(0 | 1)),
            "{name}: {}",
            stderr(&o)
        );
        out
    };
    let fast = ["--speed", "2"];
    let (a, b, c) = (
        run("a", "a", &fast, &[]),
        run("b", "b", &fast, &[]),
        run("c", "c", &fast, &[]),
    );

    // Every part once, at one speed: merged, at that speed.
    let merged = d.join("merged");
    ok(&cnsreplay(&[
        "merge-runs",
        s(&a),
        s(&b),
        s(&c),
        "-o",
        s(&merged),
    ]));
    let m = manifest(&merged);
    assert_eq!(m["options"]["speed"], 2.0, "{m:#}");
    let sha = sha256(&t);
    assert_eq!(
        m["trace"]["sha256"], sha,
        "the merged run is the whole trace's"
    );
    assert_eq!(
        m["merged"]["parts"].as_array().map(Vec::len),
        Some(3),
        "{m:#}"
    );
    let o = cnsreplay(&["analyze", "summary", "--json", s(&merged)]);
    ok(&o);
    let sum: serde_json::Value = serde_json::from_slice(&o.stdout).expect("summary json");
    assert_eq!(sum["runs"][0]["speed"], 2.0, "{sum:#}");
    assert_eq!(sum["runs"][0]["events"], 450, "{sum:#}");

    // The same run twice, by one path or through a link.
    let link = d.join("a-link");
    std::os::unix::fs::symlink(&a, &link).expect("symlink");
    for twice in [&a, &link] {
        let out = d.join("twice");
        let o = cnsreplay(&["merge-runs", s(&a), s(twice), s(&b), s(&c), "-o", s(&out)]);
        refused(&o, &[s(&a), s(twice), "are the same run"]);
        assert!(!out.exists(), "a refused merge wrote {}", out.display());
    }
    // Two runs of one part: the same trace, every event twice.
    let a2 = run("a", "a2", &fast, &[]);
    let o = cnsreplay(&[
        "merge-runs",
        s(&a),
        s(&a2),
        s(&b),
        s(&c),
        "-o",
        s(&d.join("m2")),
    ]);
    refused(&o, &[s(&a), s(&a2), "trace.sha256", "count twice"]);
    // A run of another trace.
    let other = attach_trace(d, "other.jsonl", "x", 20, &[]);
    let o_run = d.join("other");
    ok(&sim_run(&other, &o_run, &fast, &[]));
    let o = cnsreplay(&["merge-runs", s(&a), s(&o_run), "-o", s(&d.join("m3"))]);
    refused(
        &o,
        &[
            s(&a),
            s(&o_run),
            "cannot be merged: trace",
            "not runs of unrelated traces",
        ],
    );
    // A part missing.
    let o = cnsreplay(&["merge-runs", s(&a), s(&b), "-o", s(&d.join("m4"))]);
    refused(&o, &["part(s) 3 of the 3 parts", &sha]);
    // Parts at different speeds.
    let c1 = run("c", "c1", &[], &[]);
    let o = cnsreplay(&["merge-runs", s(&a), s(&b), s(&c1), "-o", s(&d.join("m5"))]);
    refused(&o, &[s(&c1), "options.speed 2 vs 1"]);

    // A part the engine limited (every dispatched batch held up 200 ms, past lateness
    // limits of at most 100 ms; its workers held to 0 % busy, a check no run passes, so
    // the verdict is the engine's): the merged run is engine-bound, named by that part, and
    // refused like it.
    let strict = [
        "--speed",
        "2",
        "--validity=start.fraction=10%,start.max=100ms,workers=0%",
    ];
    let slow = run(
        "b",
        "b-slow",
        &strict,
        &[("CNSREPLAY_TEST_ENGINE_DELAY", "200ms")],
    );
    let part_verdict = |r: &Path| -> serde_json::Value {
        let v: serde_json::Value =
            serde_json::from_slice(&fs_err::read(r.join("summary.json")).expect("summary"))
                .expect("json");
        v["validity"]["verdict"].clone()
    };
    assert_eq!(part_verdict(&slow), "engine-bound");
    let bad = d.join("merged-bad");
    ok(&cnsreplay(&[
        "merge-runs",
        s(&a),
        s(&slow),
        s(&c),
        "-o",
        s(&bad),
    ]));
    let m = manifest(&bad);
    assert_eq!(m["merged"]["validity"]["verdict"], "engine-bound", "{m:#}");
    let report = d.join("r.html");
    let o = cnsreplay(&["analyze", "report", s(&slow), "-o", s(&report)]);
    refused(&o, &["refused, the run's verdict is engine-bound"]);
    let o = cnsreplay(&["analyze", "report", s(&bad), "-o", s(&report)]);
    refused(
        &o,
        &[
            &format!(
                "{}: refused, the run's verdict is engine-bound",
                bad.display()
            ),
            &format!("{}: start lateness", slow.display()),
            "--allow-invalid",
        ],
    );
    assert!(!report.exists());
    let o = cnsreplay(&["analyze", "summary", "--json", s(&bad)]);
    ok(&o);
    let sum: serde_json::Value = serde_json::from_slice(&o.stdout).expect("summary json");
    assert_eq!(sum["runs"][0]["validity"]["verdict"], "engine-bound");
    ok(&cnsreplay(&[
        "analyze",
        "report",
        s(&bad),
        "-o",
        s(&report),
        "--allow-invalid",
    ]));
}

/// `sweep` adds points to a sweep directory only of its trace and setup, at new speeds,
/// checked before anything runs; `analyze capacity` refuses a directory whose runs replayed
/// different traces.
#[test]
fn sweep_and_capacity_keep_to_one_trace_and_setup() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let t = attach_trace(d, "t.jsonl", "w", 40, &[]);
    let other = attach_trace(d, "other.jsonl", "x", 40, &[]);
    let sweep_dir = d.join("sweep");
    let sweep = |trace: &Path, speeds: &str, latency: &str| {
        cnsreplay(&[
            "-q",
            "sweep",
            s(trace),
            "--provider",
            "sim",
            "--sim-latency",
            latency,
            LENIENT,
            "--speeds",
            speeds,
            "-o",
            s(&sweep_dir),
        ])
    };
    ok(&sweep(&t, "1", "attach=constant:20ms"));
    let names = || -> Vec<String> {
        let mut v: Vec<String> = fs_err::read_dir(&sweep_dir)
            .expect("read")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(), ["1"]);
    let o = sweep(&other, "2", "attach=constant:20ms");
    refused(&o, &["trace.sha256", &sha256(&other), &sha256(&t)]);
    let o = sweep(&t, "2", "attach=constant:5ms");
    refused(&o, &["provider.config", "ops="]);
    let o = sweep(&t, "1,2", "attach=constant:20ms");
    refused(&o, &["already holds a run at this speed"]);
    let o = sweep(&t, "2,2.0000001", "attach=constant:20ms");
    refused(&o, &["speed 2.0000001 is given twice"]);
    assert_eq!(names(), ["1"], "a refused sweep ran a point");
    // Its own trace and setup, at a new speed: added, and capacity reads both points.
    ok(&sweep(&t, "2", "attach=constant:20ms"));
    assert_eq!(names(), ["1", "2"]);
    ok(&cnsreplay(&[
        "analyze",
        "capacity",
        s(&sweep_dir),
        "--allow-invalid",
    ]));

    // Runs of two traces in one directory.
    let mixed = d.join("mixed");
    ok(&sim_run(&t, &mixed.join("a"), &[], &[]));
    ok(&sim_run(&other, &mixed.join("b"), &[], &[]));
    let o = cnsreplay(&["analyze", "capacity", s(&mixed), "--allow-invalid"]);
    refused(
        &o,
        &[
            s(&mixed.join("a")),
            s(&mixed.join("b")),
            "cannot be points of one capacity curve: trace.sha256",
        ],
    );
}

/// A capacity search over a synth model generates one trace per rate (`DIR/traces/`): its
/// points are one curve all the same (one model, its seed, the target op; the rate and the
/// hosts solved from it differ), and `analyze capacity` re-reads them.
#[test]
fn a_model_search_is_one_curve_across_its_rates() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let model = d.join("m.yaml");
    fs_err::write(
        &model,
        "duration: 3s\ncluster: {hosts: 2, containers_per_host: 4}\n\
         lifetime: {exponential: {mean: 5s}}\nvolumes: {size: 64Mi}\n",
    )
    .expect("model");
    let out = d.join("cap");
    let o = cnsreplay(&[
        "-q",
        "capacity",
        s(&model),
        "--target",
        "attach=2/s",
        "--provider",
        "sim",
        "--max-runs",
        "2",
        "--refine",
        "0",
        "--allow-invalid",
        "-o",
        s(&out),
    ]);
    // The budget ends the search before a limit: exit 1.
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let traces = fs_err::read_dir(out.join("traces"))
        .expect("traces")
        .count();
    assert_eq!(traces, 2, "one trace per rate");
    let o = cnsreplay(&["analyze", "capacity", s(&out), "--allow-invalid", "--json"]);
    ok(&o);
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(r["points"].as_array().map(Vec::len), Some(2), "{r:#}");
}
