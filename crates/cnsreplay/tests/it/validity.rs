//! Sensitivity and specificity of the run verdict, in the short form CI can afford (the full
//! 20 + 20 runs: `scripts/calibrate-validity.sh`, figures in docs/PERFORMANCE.md).
//!
//! Five runs with an engine delay injected through the engine's test hook
//! (`CNSREPLAY_TEST_ENGINE_DELAY`: every dispatched batch held up 200 ms) and five clean
//! runs, on the sim (300 attaches 5 ms apart, each taking 1 s). The limits are widened for a
//! busy 2-core CI machine — 10 % of the reference, at most 100 ms (`start.fraction=10%,
//! start.max=100ms`): 20 clean runs of a debug build on this project's machine beside other
//! engineers' builds (load 17–23) showed start lateness p99 of 5.7–52 ms
//! (`scripts/calibrate-validity.sh`, docs/PERFORMANCE.md) — and the injected delay is twice
//! the p99 limit, so every injected event is at least 200 ms late: an injected run that is
//! not flagged is a miss whatever the load (all 5 required). A clean run is flagged only
//! when the machine itself delays the engine past 100 ms at p99 (or the completion probe
//! past it); ≥ 4 of 5 clean runs must be `valid`. If a clean run is falsely flagged with
//! probability p, the test fails with probability 1 − (1 − p)^5 − 5p(1 − p)^4: 2.3 % at
//! p = 5 %, 0.4 % at p = 2 % (none of those 20 runs came within a factor 1.9 of 100 ms).

use std::path::{Path, PathBuf};

use super::{cnsreplay_env, s};

fn trace(dir: &Path) -> PathBuf {
    let mut text = String::from(
        r#"{"format":"cnsreplay-trace","version":1,"provenance":{"generator":"test"}}"#,
    );
    text.push('\n');
    for i in 0..300u64 {
        text.push_str(&format!(
            "{{\"at\":{},\"id\":{},\"attach\":{{\"workload\":\"w{i}\",\"volumes\":[]}}}}\n",
            i * 5_000_000,
            i + 1
        ));
    }
    let path = dir.join("attach.jsonl");
    fs_err::write(&path, text).expect("write trace");
    path
}

/// The verdict of one run, and its evidence.
fn verdict(dir: &Path, t: &Path, name: &str, delay: Option<&str>) -> (String, String) {
    let out = dir.join(name);
    let env: Vec<(&str, &str)> = delay
        .map(|d| vec![("CNSREPLAY_TEST_ENGINE_DELAY", d)])
        .unwrap_or_default();
    let o = cnsreplay_env(
        &[
            "-q",
            "run",
            s(t),
            "--provider",
            "sim",
            "--sim-latency",
            "attach=constant:1s",
            "-o",
            s(&out),
            "--validity=start.fraction=10%,start.max=100ms",
            "--json",
        ],
        &env,
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{name}: no summary ({e}): {}",
            String::from_utf8_lossy(&o.stderr)
        )
    });
    let validity = &v["validity"];
    let failed: Vec<String> = validity["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["passed"] == false)
        .map(|c| c["message"].as_str().unwrap_or_default().to_owned())
        .collect();
    (
        validity["verdict"].as_str().unwrap_or_default().to_owned(),
        failed.join("; "),
    )
}

#[test]
fn an_injected_engine_delay_is_flagged_and_clean_runs_are_valid() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = trace(dir.path());
    let mut missed = Vec::new();
    let mut clean = Vec::new();
    for i in 0..5 {
        let (v, why) = verdict(dir.path(), &t, &format!("injected-{i}"), Some("200ms"));
        if v != "engine-bound" {
            missed.push(format!("run {i}: {v}"));
        } else {
            assert!(why.contains("start lateness p99"), "{why}");
        }
        clean.push(verdict(dir.path(), &t, &format!("clean-{i}"), None));
    }
    assert!(
        missed.is_empty(),
        "injected 200 ms engine delays not flagged: {missed:?}"
    );
    let valid = clean.iter().filter(|(v, _)| v == "valid").count();
    assert!(
        valid >= 4,
        "only {valid} of 5 clean runs valid (the machine delayed the engine past the widened \
         limits?): {clean:?}"
    );
}
