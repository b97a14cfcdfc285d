//! Runs that are not valid are refused by the analyses that draw conclusions, with the run,
//! the verdict and the evidence, unless `allow_invalid`. The runs are real engine runs on the
//! `noop` provider; their verdicts are set by the thresholds they ran with.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use analyze::{CompareOptions, Error, Run, compare};
use replay::noop::NoopProvider;
use replay::{RunControl, RunOptions, ValidityOptions};

use crate::write_trace;

/// `n` events 2 ms apart (a p99 is judged from 100).
fn trace_of(dir: &Path, n: u64) -> PathBuf {
    let events: Vec<(u64, String)> = (0..n)
        .map(|i| (i * 2_000_000, r#""cordon_node":{"node":"n"}"#.to_owned()))
        .collect();
    write_trace(dir, &format!("t{n}.jsonl"), None, &events)
}

fn trace(dir: &Path) -> PathBuf {
    trace_of(dir, 150)
}

/// A noop run of `trace` into `dir/name`, judged with start lateness limit `start_p99_ns`
/// (0: nothing is on time; 10 s: every lateness passes), stopped at once when `stop`.
fn noop_run(dir: &Path, name: &str, trace: &Path, start_p99_ns: u64, stop: bool) -> PathBuf {
    noop_run_with(dir, name, trace, start_p99_ns, 1.0, stop)
}

/// An engine-bound noop run: nothing on time, and its workers held to 0 % busy (a limit no
/// run meets: the engine's own check, whatever the bounds say of the figures).
fn engine_bound_run(dir: &Path, name: &str, trace: &Path) -> PathBuf {
    noop_run_with(dir, name, trace, 0, 0.0, false)
}

fn noop_run_with(
    dir: &Path,
    name: &str,
    trace: &Path,
    start_p99_ns: u64,
    workers_busy: f64,
    stop: bool,
) -> PathBuf {
    let out = dir.join(name);
    let opts = RunOptions {
        validity: ValidityOptions {
            start_p99_ns: Some(start_p99_ns),
            start_p999_ns: Some(10_000_000_000),
            rate_tolerance: 1.0,
            workers_busy,
            ..ValidityOptions::default()
        },
        ..RunOptions::default()
    };
    let control = RunControl::new();
    if stop {
        control.request_stop("test stop");
    }
    replay::run(trace, &out, &Arc::new(NoopProvider), &opts, &control).expect("run");
    out
}

#[test]
fn engine_bound_and_incomplete_runs_are_refused_unless_allowed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = trace(dir.path());
    let valid = noop_run(dir.path(), "valid", &t, 10_000_000_000, false);
    let bound = engine_bound_run(dir.path(), "bound", &t);
    let stopped = noop_run(dir.path(), "stopped", &t, 10_000_000_000, true);

    let err = compare(
        std::slice::from_ref(&valid),
        std::slice::from_ref(&bound),
        &CompareOptions::default(),
    )
    .expect_err("refused");
    let Error::InvalidRun {
        path,
        verdict,
        evidence,
    } = &err
    else {
        panic!("{err}");
    };
    assert_eq!((path, verdict.as_str()), (&bound, "engine-bound"));
    assert!(
        evidence.starts_with("start lateness p99 ") && evidence.contains("(limit 0.000 ms)"),
        "{evidence}"
    );
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("{}: refused", bound.display()))
            && text.contains("--allow-invalid"),
        "{text}"
    );

    let err = compare(
        std::slice::from_ref(&stopped),
        std::slice::from_ref(&valid),
        &CompareOptions::default(),
    )
    .expect_err("refused");
    assert!(
        matches!(&err, Error::InvalidRun { verdict, evidence, .. }
            if verdict == "incomplete" && evidence == "the run is interrupted (test stop)"),
        "{err}"
    );
    let err = analyze::report::report(&[bound.as_path()], false).expect_err("refused");
    assert!(matches!(err, Error::InvalidRun { .. }), "{err}");

    let allow = CompareOptions {
        allow_invalid: true,
        ..CompareOptions::default()
    };
    compare(
        std::slice::from_ref(&valid),
        std::slice::from_ref(&bound),
        &allow,
    )
    .expect("admitted");
    let rep = analyze::report::report(&[bound.as_path()], true).expect("admitted");
    assert!(rep.html.contains("not valid"), "the report marks it");
    // It was analysed anyway: the report says so, not the refusal's advice to pass the flag
    // that was passed.
    assert!(
        rep.html.contains("analysed anyway (--allow-invalid)"),
        "the report says the run was analysed anyway"
    );
    assert!(
        !rep.html.contains("analyze it anyway with"),
        "the report repeats the refusal's advice after --allow-invalid was given"
    );

    // A valid run passes; summary describes any run and carries its verdict.
    Run::open_for_analysis(&valid, false).expect("valid");
    let s = analyze::summary::summary(&bound).expect("summary");
    assert_eq!(
        s.validity.expect("validity").verdict,
        replay::Verdict::EngineBound
    );
}

#[test]
fn a_complete_run_without_a_verdict_is_admitted_and_a_crashed_one_is_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = trace(dir.path());
    let run = noop_run(dir.path(), "old", &t, 10_000_000_000, false);
    // As written before verdicts existed: no `validity` in the summary.
    let mut s: serde_json::Value =
        serde_json::from_slice(&fs_err::read(run.join("summary.json")).expect("read"))
            .expect("json");
    s.as_object_mut().expect("object").remove("validity");
    fs_err::write(run.join("summary.json"), s.to_string()).expect("write");
    let r = Run::open_for_analysis(&run, false).expect("admitted");
    assert!(r.validity.is_none());
    // A crash leaves no summary and `running`, which a later command marks.
    fs_err::remove_file(run.join("summary.json")).expect("rm");
    let rd = replay::RunDir::open(&run);
    let mut m = rd.manifest().expect("manifest");
    m.state = replay::CompletionState::CrashedDetected;
    rd.write_manifest(&m).expect("write");
    let err = Run::open_for_analysis(&run, false).expect_err("refused");
    assert!(
        err.to_string().contains("the run is crashed-detected"),
        "{err}"
    );
}

#[test]
fn a_run_too_short_to_judge_is_admitted_and_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 20 events in 40 ms: too few for any lateness p99 (and for the completion probe, every
    // 2 ms), even with a limit nothing meets.
    let t = trace_of(dir.path(), 20);
    let run = noop_run(dir.path(), "short", &t, 0, false);
    let r = Run::open_for_analysis(&run, false).expect("admitted");
    let v = r.validity.expect("validity");
    assert_eq!(v.verdict, replay::Verdict::NotJudged, "{v:#?}");
    assert!(
        v.evidence()
            .contains("start lateness p99 not judged: 20 events"),
        "{}",
        v.evidence()
    );
}

/// The cluster's queues in a run's summary (as `--apiserver-metrics`/`--csi-metrics` record
/// them) are named as the control plane's limits: rejections always, a queue whose p99 wait
/// reaches 1 % of the smallest SLO, and not one below it.
#[test]
fn the_cluster_queues_that_held_a_run_up_are_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = trace(dir.path());
    let run = noop_run(dir.path(), "run", &t, 10_000_000_000, false);
    assert!(analyze::point::control_plane(&run, Some(1_000_000_000)).is_empty());
    let path = run.join("summary.json");
    let mut s: serde_json::Value =
        serde_json::from_str(&fs_err::read_to_string(&path).expect("summary")).expect("json");
    let wait = |p50: f64, p99: f64, count: u64| {
        serde_json::json!({"count": count, "sum_seconds": p50 * count as f64, "p50": p50,
            "p90": p99, "p99": p99, "p50_le": null, "p90_le": null, "p99_le": null})
    };
    s["cluster"] = serde_json::json!({
        "apf_rejected": {"workload-low": 7},
        "apf_wait": {"workload-low": wait(0.002, 0.015, 900), "global-default": wait(0.0, 0.0001, 50)},
        "queue_wait": {"claims": wait(0.5, 2.5, 300), "volumes": wait(0.0001, 0.002, 300)},
    });
    fs_err::write(&path, s.to_string()).expect("write summary");
    // The smallest SLO 1 s: a queue counts from a 10 ms p99.
    let named = analyze::point::control_plane(&run, Some(1_000_000_000));
    assert_eq!(named.len(), 3, "{named:#?}");
    assert!(
        named[0].contains("priority level workload-low rejected 7 requests"),
        "{named:#?}"
    );
    assert!(
        named[1].contains("priority level workload-low: wait p99 15"),
        "{named:#?}"
    );
    assert!(
        named[2].contains("work queue claims: wait p99 2.5"),
        "{named:#?}"
    );
    // A 100 ms SLO: the 2 ms `volumes` queue counts too, the 0.1 ms priority level not.
    let named = analyze::point::control_plane(&run, Some(100_000_000));
    assert_eq!(named.len(), 4, "{named:#?}");
}
