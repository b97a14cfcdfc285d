//! `run` checks the trace before the clock starts (`validate`'s checker, streaming, bounded):
//! a trace with problems is refused with its located problems and exit 1 before a run
//! directory exists; `--no-check` lets it through.

use std::path::Path;
use std::process::Output;

use super::{cnsreplay, s, workspace};

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// An event out of time order is a located input problem (exit 1, no run directory), not an
/// engine-bound verdict; `--no-check` replays it as before.
#[test]
fn an_out_of_order_event_is_refused_before_the_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = dir.path().join("late.jsonl");
    fs_err::write(
        &trace,
        "{\"format\":\"cnsreplay-trace\",\"version\":1}\n\
         {\"at\":5000000,\"id\":0,\"marker\":{\"name\":\"a\"}}\n\
         {\"at\":1000000,\"id\":1,\"marker\":{\"name\":\"b\"}}\n",
    )
    .expect("write");
    let run = dir.path().join("run");
    let o = cnsreplay(&["run", s(&trace), "--provider", "sim", "-o", s(&run)]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "{}:3: events[1].at: events out of time order: at=0.001s is before the previous \
             event's at=0.005s",
            trace.display()
        )),
        "{err}"
    );
    assert!(
        err.contains("refusing to run: 1 problem in 2 events"),
        "{err}"
    );
    assert!(err.contains("--no-check"), "{err}");
    assert!(!run.exists(), "no run directory");
    assert!(
        o.stdout.is_empty(),
        "no summary: {}",
        String::from_utf8_lossy(&o.stdout)
    );

    let o = cnsreplay(&[
        "run",
        s(&trace),
        "--provider",
        "sim",
        "-o",
        s(&run),
        "--no-check",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).expect("summary json");
    assert_eq!(summary["dispatched"], 2, "{summary:#}");
    assert!(run.join("summary.json").is_file());
}

/// A truncated binary trace of 300 s is refused at once (before, it replayed up to its cut);
/// the refusal names the byte where the file ends. `sweep` checks it once the same way.
#[test]
fn a_truncated_binary_trace_is_refused_before_the_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let full = d.join("full.cnsbin");
    let model = workspace().join("traces/synth/exp1-new-volumes.yaml");
    let o = cnsreplay(&["synth", s(&model), "--duration", "300s", "-o", s(&full)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let bytes = fs_err::read(&full).expect("read");
    let cut = d.join("cut.cnsbin");
    fs_err::write(&cut, &bytes[..bytes.len() * 2 / 3]).expect("write");
    for (args, out) in [
        (vec!["run", "--provider", "sim"], d.join("run")),
        (
            vec!["sweep", "--provider", "sim", "--speeds", "1,2"],
            d.join("sweep"),
        ),
    ] {
        let mut a = args.clone();
        a.extend([s(&cut), "-o", s(&out)]);
        let o = cnsreplay(&a);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{a:?}: {err}");
        assert!(
            err.contains(&format!("{}: byte ", cut.display()))
                && err.contains("truncated: the file ends inside a")
                && err.contains("reading stopped: the rest cannot be decoded"),
            "{a:?}: {err}"
        );
        assert!(!out.exists(), "{a:?}: nothing was run");
    }
}

/// The check reads no further than 20 located problems: a trace with a problem in each of
/// 10 000 events reports the first 20 and stops.
#[test]
fn the_check_stops_after_twenty_problems() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = dir.path().join("dangling.jsonl");
    let mut text = String::from("{\"format\":\"cnsreplay-trace\",\"version\":1}\n");
    for i in 0..10_000u64 {
        text.push_str(&format!(
            "{{\"at\":{i},\"id\":{i},\"delete_volume\":{{\"volume\":\"v{i}\"}}}}\n"
        ));
    }
    fs_err::write(&trace, text).expect("write");
    let run = dir.path().join("run");
    let o = cnsreplay(&["run", s(&trace), "--provider", "noop", "-o", s(&run)]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let located = err
        .lines()
        .filter(|l| l.contains(&format!("{}:", trace.display())) && l.contains("v"))
        .filter(|l| !l.contains("refusing"))
        .count();
    assert_eq!(located, 20, "{err}");
    assert!(
        err.contains("refusing to run: 20 problems in 20 events (reading stopped at 20 problems)"),
        "{err}"
    );
    assert!(!Path::new(&run).exists());
}

/// `--preflight-only` checks and exits: 0 with nothing run for a good trace (no run
/// directory), 1 with the located problems for a bad one, like a run.
#[test]
fn preflight_only_checks_and_runs_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join("run");
    let o = cnsreplay(&[
        "run",
        "traces/quickstart.yaml",
        "--provider",
        "local",
        "--preflight-only",
        "-o",
        s(&run),
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}\n{}", stderr(&o));
    assert!(
        out.contains("pre-flight passed: traces/quickstart.yaml is a valid trace"),
        "{out}"
    );
    assert!(!run.exists(), "--preflight-only wrote a run directory");
    let bad = dir.path().join("late.jsonl");
    fs_err::write(
        &bad,
        "{\"format\":\"cnsreplay-trace\",\"version\":1}\n\
         {\"at\":5000000,\"id\":0,\"marker\":{\"name\":\"a\"}}\n\
         {\"at\":1000000,\"id\":1,\"marker\":{\"name\":\"b\"}}\n",
    )
    .expect("write");
    let o = cnsreplay(&["run", s(&bad), "--preflight-only", "-o", s(&run)]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("events out of time order"),
        "{}",
        stderr(&o)
    );
    assert!(!run.exists());
}
