//! The `iogen` binary's result files when one command runs several parts (phases of a trace,
//! volumes of a replay, suite tests): every part keeps its own `--histograms` and
//! `--interval-log` file and the `--json` holds them all — nothing overwritten.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::target;

fn iogen(args: &[&str]) {
    let o = Command::new(env!("CARGO_BIN_EXE_iogen"))
        .args(args)
        .output()
        .expect("run iogen");
    assert!(
        o.status.success(),
        "iogen {args:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn count(p: &Path) -> u64 {
    iogen::read_histograms(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .total_count()
}

fn trace(dir: &Path, bodies: &[String]) -> PathBuf {
    let mut text = String::from(r#"{"format":"cnsreplay-trace","version":1,"provenance":{}}"#);
    text.push('\n');
    for (i, b) in bodies.iter().enumerate() {
        text.push_str(&format!(
            "{{\"at\":{},\"id\":{},{b}}}\n",
            i as u64 * 1_000_000,
            i + 1
        ));
    }
    let p = dir.join("t.jsonl");
    fs_err::write(&p, text).expect("trace");
    p
}

#[test]
fn phases_of_a_trace_keep_their_own_results() {
    let (dir, data) = target();
    let phase = |ios: u32| {
        format!(
            r#""io_phase":{{"workload":"w","volume":"v","pattern":"random","read_pct":100,"block_size":"4Ki","load":{{"rate":{{"iops":{ios}}}}},"duration":"300ms","region":"1Mi"}}"#
        )
    };
    let t = trace(dir.path(), &[phase(100), phase(300)]);
    let (json, hist, ivlog) = (
        dir.path().join("out.json"),
        dir.path().join("h.hlog"),
        dir.path().join("iv.hlog"),
    );
    iogen(&[
        "phase",
        s(&t),
        "--target",
        s(&data),
        "--engine",
        "sync",
        "--interval",
        "100ms",
        "--json",
        s(&json),
        "--histograms",
        s(&hist),
        "--interval-log",
        s(&ivlog),
    ]);
    let v: serde_json::Value =
        serde_json::from_slice(&fs_err::read(&json).expect("json")).expect("json");
    let phases = v.as_array().expect("an array of phases");
    assert_eq!(phases.len(), 2, "{v:#}");
    for (i, want) in [(1, 30), (2, 90)] {
        let sm = &phases[i - 1]["summary"];
        let n = sm["ios"].as_u64().expect("ios") + sm["errors"].as_u64().expect("errors");
        assert_eq!(n, want, "phase {i}: {sm:#}");
        assert_eq!(count(&dir.path().join(format!("h.{i}.hlog"))), want);
        assert_eq!(count(&dir.path().join(format!("iv.{i}.hlog"))), want);
    }
    assert!(!hist.exists() && !ivlog.exists());
}

#[test]
fn replay_writes_histograms_and_interval_logs_per_volume() {
    let (dir, data) = target();
    let other = dir.path().join("other.dat");
    for p in [&data, &other] {
        fs_err::write(p, vec![0u8; 1 << 20]).expect("target file");
    }
    let io = |v: &str, off: u64| {
        format!(r#""io":{{"volume":"{v}","kind":"read","offset":{off},"len":4096}}"#)
    };
    let bodies: Vec<String> = (0..30u64)
        .map(|i| io(if i % 3 == 0 { "a" } else { "b" }, i * 4096))
        .collect();
    let t = trace(dir.path(), &bodies);
    let (json, hist, ivlog) = (
        dir.path().join("out.json"),
        dir.path().join("h.hlog"),
        dir.path().join("iv.hlog"),
    );
    let (ta, tb) = (format!("a={}", s(&data)), format!("b={}", s(&other)));
    iogen(&[
        "replay",
        s(&t),
        "--target",
        &ta,
        "--target",
        &tb,
        "--engine",
        "sync",
        "--json",
        s(&json),
        "--histograms",
        s(&hist),
        "--interval-log",
        s(&ivlog),
    ]);
    let v: serde_json::Value =
        serde_json::from_slice(&fs_err::read(&json).expect("json")).expect("json");
    for (vol, want) in [("a", 10), ("b", 20)] {
        assert_eq!(v["volumes"][vol]["ios"], want, "{v:#}");
        assert_eq!(count(&dir.path().join(format!("h.{vol}.hlog"))), want);
        assert_eq!(count(&dir.path().join(format!("iv.{vol}.hlog"))), want);
    }
}

#[test]
fn suite_tests_keep_their_own_histograms_and_interval_logs() {
    let (dir, data) = target();
    let (json, hist, ivlog) = (
        dir.path().join("out.json"),
        dir.path().join("h.hlog"),
        dir.path().join("iv.hlog"),
    );
    iogen(&[
        "suite",
        "--target",
        s(&data),
        "--size",
        "4m",
        "--runtime",
        "50ms",
        "--buffered",
        "--engine",
        "sync",
        "--json",
        s(&json),
        "--histograms",
        s(&hist),
        "--interval-log",
        s(&ivlog),
    ]);
    let v: serde_json::Value =
        serde_json::from_slice(&fs_err::read(&json).expect("json")).expect("json");
    let tests = v.as_array().expect("tests");
    assert!(tests.len() > 3, "{v:#}");
    for t in tests {
        let name = t["test"].as_str().expect("name");
        let sm = &t["summary"];
        let n = sm["ios"].as_u64().expect("ios") + sm["errors"].as_u64().expect("errors");
        assert!(n > 0, "{t:#}");
        assert_eq!(
            count(&dir.path().join(format!("h.{name}.hlog"))),
            n,
            "{name}"
        );
        assert_eq!(
            count(&dir.path().join(format!("iv.{name}.hlog"))),
            n,
            "{name}"
        );
    }
}
