//! Small traps of the command line, each once a wrong answer a user could act on: a QoS
//! window that aborted the process, a comparison warning about values no user set, help that
//! left verdicts out, states printed as Rust spells them, and a pre-flight that passed an
//! output directory the run could never create.

use std::path::{Path, PathBuf};

use super::{attach_trace, cnsreplay, ok, s, stdout};

/// Five 1 ms attaches on the sim, into `dir/name`.
fn tiny_run(dir: &Path, name: &str) -> PathBuf {
    let t = dir.join("attach.jsonl");
    if !t.exists() {
        attach_trace(dir, 5, 1_000_000);
    }
    let out = dir.join(name);
    ok(&cnsreplay(&[
        "-q",
        "run",
        s(&t),
        "--provider",
        "sim",
        "--sim-latency",
        "attach=constant:1ms",
        "-o",
        s(&out),
    ]));
    out
}

/// `window: 0s` made every I/O its own window of 1 ns: a 45 GB allocation and an abort (exit
/// 134). It is a problem of the SLO file, named with its field (exit 1); so is a window so
/// short that the run would need more than 10 M of them.
#[test]
fn a_qos_window_of_zero_or_next_to_nothing_is_an_error_naming_the_file_and_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = super::analyze::mixed_run(dir.path());
    let qos = dir.path().join("qos.yaml");
    for window in ["0s", "1ns"] {
        fs_err::write(
            &qos,
            format!("window: {window}\ntenants:\n  db:\n    read.p99.9: 20ms\n"),
        )
        .expect("qos");
        let o = cnsreplay(&["analyze", "qos", s(&run), "--slo-file", s(&qos)]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "window {window}: {err}");
        assert!(err.contains("window: "), "window {window}: {err}");
        if window == "0s" {
            assert!(err.contains(s(&qos)), "the file is named: {err}");
        } else {
            assert!(err.contains("choose a longer window"), "{err}");
        }
    }
}

/// Each run computes its own lateness limits (`options.validity.limits`, from its own
/// medians): two runs of the same command line differ there, and that is no reason to say
/// their manifests differ.
#[test]
fn compare_does_not_warn_about_limits_each_run_computed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b) = (tiny_run(dir.path(), "a"), tiny_run(dir.path(), "b"));
    let limits = |r: &Path| -> serde_json::Value {
        let m: serde_json::Value =
            serde_json::from_slice(&fs_err::read(r.join("manifest.json")).expect("manifest"))
                .expect("json");
        m["options"]["validity"]["limits"].clone()
    };
    assert!(
        limits(&a)["basis"].is_string(),
        "the run records its limits: {}",
        limits(&a)
    );
    let o = cnsreplay(&["analyze", "compare", s(&a), "--", s(&b)]);
    let text = stdout(&o);
    assert!(
        !text.contains("manifests differ") && !text.contains("options.validity.limits"),
        "limits the runs computed (a: {}, b: {}) reported as a difference:\n{text}",
        limits(&a),
        limits(&b)
    );
}

/// `run --help` names every verdict a run can end with.
#[test]
fn run_help_lists_every_verdict() {
    let o = cnsreplay(&["run", "--help"]);
    ok(&o);
    let text = stdout(&o);
    for v in [
        "valid",
        "partly-valid",
        "imprecise",
        "not-judged",
        "engine-bound",
        "incomplete",
        "failed",
    ] {
        assert!(text.contains(&format!("`{v}`")), "{v} missing:\n{text}");
    }
}

/// A run's state reads as the manifest writes it (`complete`), not as the Rust variant
/// (`Complete`), in `analyze summary` and `sweep`.
#[test]
fn states_print_as_words() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = tiny_run(dir.path(), "a");
    let o = cnsreplay(&["analyze", "summary", s(&run)]);
    ok(&o);
    let text = stdout(&o);
    assert!(text.contains("(complete)"), "{text}");
    assert!(!text.contains("Complete"), "{text}");
    let sweep = dir.path().join("sweep");
    let o = cnsreplay(&[
        "-q",
        "sweep",
        s(&dir.path().join("attach.jsonl")),
        "--provider",
        "sim",
        "--sim-latency",
        "attach=constant:1ms",
        "--speeds",
        "1",
        "-o",
        s(&sweep),
    ]);
    ok(&o);
    let text = stdout(&o);
    assert!(text.contains("state complete"), "{text}");
}

/// `--preflight-only` said "passed" for `-o /proc/nope`, where the run could never create its
/// directory: it checks the directory can be created (exit 2 when not), creating nothing.
#[test]
fn preflight_checks_the_run_directory_can_be_created() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = dir.path().join("t.yaml");
    fs_err::copy(super::workspace().join("traces/quickstart.yaml"), &t).expect("copy");
    for provider in ["sim", "local"] {
        let o = cnsreplay(&[
            "run",
            s(&t),
            "--provider",
            provider,
            "--preflight-only",
            "-o",
            "/proc/nope",
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{provider}: {err}");
        assert!(err.contains("-o /proc/nope"), "{provider}: {err}");
        // A file where the directory would go is refused too.
        let file = dir.path().join("a-file");
        fs_err::write(&file, "x").expect("write");
        let o = cnsreplay(&[
            "run",
            s(&t),
            "--provider",
            provider,
            "--preflight-only",
            "-o",
            s(&file.join("run")),
        ]);
        assert_eq!(o.status.code(), Some(2), "{provider}: {o:?}");
        // A directory that can be created passes, and is not created.
        let fresh = dir.path().join("new/run");
        let o = cnsreplay(&[
            "run",
            s(&t),
            "--provider",
            provider,
            "--preflight-only",
            "-o",
            s(&fresh),
        ]);
        ok(&o);
        assert!(stdout(&o).contains("pre-flight passed"), "{}", stdout(&o));
        assert!(!dir.path().join("new").exists(), "pre-flight created it");
        let left: Vec<_> = fs_err::read_dir(dir.path())
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(left.len(), 2, "nothing left beside the inputs: {left:?}");
    }
}
