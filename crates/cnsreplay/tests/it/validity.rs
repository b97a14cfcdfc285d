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
//! not flagged is a miss whatever the load (all 5 required). The verdict is the bounds': an
//! injected run's figures may be ≥ 20 % the tool's (200 ms of 1 s) and it is `imprecise`
//! against a tolerance widened to 15 % (`tool=15%`), or `engine-bound` when the held lanes
//! also fell behind the schedule (a loaded machine: the dispatch rate under its floor); a clean run is flagged only when the
//! machine itself delays some event (its max) by 150 ms; ≥ 4 of 5 clean runs must be `valid`. If a clean run is falsely flagged with
//! probability p, the test fails with probability 1 − (1 − p)^5 − 5p(1 − p)^4: 2.3 % at
//! p = 5 %, 0.4 % at p = 2 % (none of those 20 runs came within a factor 1.9 of 100 ms).

use std::path::{Path, PathBuf};

use super::{attach_trace, cnsreplay_env, s};

fn trace(dir: &Path) -> PathBuf {
    attach_trace(dir, 300, 5_000_000)
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
            "--validity=start.fraction=10%,start.max=100ms,tool=15%",
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
        match v.as_str() {
            // The figures are imprecise by 200 ms of 1 s.
            "imprecise" => assert!(why.contains("start lateness p99"), "{why}"),
            // Both lanes held 200 ms at a time run late by 200–400 ms, so the dispatch rate
            // is 98.8–99.3 % of the intended one on an idle machine or beside two busy
            // loops (floor 98 %); on a loaded CI machine one more delay can push it under
            // the floor. The schedule not kept is the engine's: flagged too.
            "engine-bound" if why.contains("dispatch rate") => {}
            _ => missed.push(format!("run {i}: {v} ({why})")),
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

/// An engine delay that sinks only the fast op type's numbers: 20 ms injected against
/// `cordon_node`s of 10 ms and attaches of 5 s. The bounds size it: the attaches' figures
/// may be 0.4 % the tool's (`valid`), the cordons' two thirds (`imprecise`, the size
/// named). The run is `partly-valid`; `analyze compare` judges the attach rows, and the
/// cordon rows inconclusive by the tool's bounds (`tool_undecided`), and exits 3.
#[test]
fn a_delay_that_sinks_only_the_fast_op_type_is_partly_valid_and_compare_weighs_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut text = String::from(
        r#"{"format":"cnsreplay-trace","version":1,"provenance":{"generator":"test"}}"#,
    );
    text.push('\n');
    for i in 0..300u64 {
        let op = if i % 2 == 0 {
            format!(r#""attach":{{"workload":"w{i}","volumes":[]}}"#)
        } else {
            r#""cordon_node":{"node":"n"}"#.to_owned()
        };
        text.push_str(&format!(
            "{{\"at\":{},\"id\":{},{op}}}\n",
            i * 5_000_000,
            i + 1
        ));
    }
    let t = dir.path().join("mixed.jsonl");
    fs_err::write(&t, text).expect("write trace");
    let run = |name: &str| {
        let out = dir.path().join(name);
        let o = cnsreplay_env(
            &[
                "-q",
                "run",
                s(&t),
                "--provider",
                "sim",
                "--sim-latency",
                "attach=constant:5s",
                "--sim-latency",
                "cordon_node=constant:10ms",
                "-o",
                s(&out),
                "--validity=start.fraction=10%,start.max=100ms",
                "--json",
            ],
            &[("CNSREPLAY_TEST_ENGINE_DELAY", "20ms")],
        );
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
            panic!(
                "{name}: no summary ({e}): {}",
                String::from_utf8_lossy(&o.stderr)
            )
        });
        (out, v["validity"].clone())
    };
    let (a, va) = run("a");
    let (a2, _) = run("a2");
    let (b, _) = run("b");
    let (b2, _) = run("b2");
    assert_eq!(va["verdict"], "partly-valid", "{va:#}");
    let op = |name: &str| {
        va["ops"]
            .as_array()
            .and_then(|o| o.iter().find(|x| x["op"] == name))
            .unwrap_or_else(|| panic!("no {name} in {va:#}"))
            .clone()
    };
    assert_eq!(op("attach")["verdict"], "valid", "{va:#}");
    assert!(
        op("attach")["tool_ratio"]
            .as_f64()
            .is_some_and(|r| r < 0.05),
        "{va:#}"
    );
    let cordon = op("cordon_node");
    assert_eq!(cordon["verdict"], "imprecise", "{va:#}");
    assert!(
        // 20 ms of a 30 ms figure (10 ms of service and the delay) is the tool's.
        cordon["tool_ratio"].as_f64().is_some_and(|r| r > 0.5),
        "{cordon:#}"
    );
    assert!(
        cordon["evidence"]
            .as_str()
            .is_some_and(|e| e.contains("response p") && e.contains("tool ≤")),
        "{cordon:#}"
    );

    // Two runs a side, so that a row can be decided at all: the attach rows are, the
    // cordon rows' change could be the tool's.
    let o = super::cnsreplay(&[
        "analyze",
        "compare",
        s(&a),
        s(&a2),
        "--",
        s(&b),
        s(&b2),
        "--json",
    ]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).expect("compare json");
    let rows = r["rows"].as_array().expect("rows");
    let latency = |op: &str| {
        rows.iter()
            .filter(|row| {
                row["op"] == op && row["metric"] != "error_rate" && row["metric"] != "mean"
            })
            .collect::<Vec<_>>()
    };
    assert!(!latency("attach").is_empty(), "{r:#}");
    let cordon = latency("cordon_node");
    assert!(!cordon.is_empty(), "{r:#}");
    // Judged, never decided: a change of these figures could be the tool's two thirds of
    // them (`tool_undecided` when the runs alone would decide it: `compare::tool`'s tests).
    for row in cordon {
        assert!(
            row["verdict"] == "inconclusive" || row["verdict"] == "insufficient_data",
            "{row:#}"
        );
        assert!(
            row["tool_base"].as_f64().is_some_and(|t| t > 0.5),
            "{row:#}"
        );
        assert!(row["tool_new"].as_f64().is_some_and(|t| t > 0.5), "{row:#}");
    }
    assert!(
        r["engine_bound"].as_array().is_none_or(|b| b.is_empty()),
        "every imprecise op type had a bound: none left out: {r:#}"
    );
}

/// `--validity reference=1s` on operations of about 1 ms: the reference alone would allow
/// 10 ms of lateness, and an injected engine delay of 0.4 ms — 40 % of what each operation
/// measured — made such runs `valid`. A given reference loosens the limits only up to 10 % of
/// the measured latency (`reference.share`), so the run is not `valid`, and its evidence says
/// the delay as a share of the measured median.
#[test]
fn a_given_reference_cannot_make_a_delay_of_40_percent_of_the_measured_latency_valid() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = attach_trace(dir.path(), 300, 2_000_000);
    let out = dir.path().join("run");
    let o = cnsreplay_env(
        &[
            "-q",
            "run",
            s(&t),
            "--provider",
            "sim",
            "--sim-latency",
            "attach=constant:1ms",
            "-o",
            s(&out),
            "--validity=reference=1s",
            "--json",
        ],
        &[("CNSREPLAY_TEST_ENGINE_DELAY", "400us")],
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("no summary ({e}): {}", String::from_utf8_lossy(&o.stderr)));
    let validity = &v["validity"];
    assert_ne!(validity["verdict"], "valid", "{validity:#}");
    let limits = &validity["limits"];
    assert!(
        limits["p99_ns"].as_u64().is_some_and(|l| l < 400_000),
        "the limit is held below the injected delay: {limits:#}"
    );
    assert!(
        limits["basis"]
            .as_str()
            .is_some_and(|b| b.contains("of attach median service time")),
        "{limits:#}"
    );
    let failed: Vec<&str> = validity["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["passed"] == false)
        .filter_map(|c| c["message"].as_str())
        .collect();
    assert!(
        failed.iter().any(|m| m.contains("start lateness p99")
            && m.contains("% of the measured attach median service time")),
        "the evidence must state the measured delay against the measured latency: {failed:#?}"
    );
}
