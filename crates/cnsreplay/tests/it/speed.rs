//! `--speed` compresses the whole trace: an `io_phase`'s duration with its instants, so what
//! the trace placed after the phase (a detach) is not charged a wait the trace did not have.

use std::path::Path;

use super::*;

/// One 10 s `io_phase`, then the detach the trace puts 0.5 s after it ends.
const PHASE_THEN_DETACH: &str = "format: cnsreplay-trace
version: 1
defaults: {volume_size: 64Mi}
events:
  - {at: 0, id: 1, create_volume: {volume: v}}
  - {at: 500ms, id: 2, attach: {workload: w, volumes: [v]}}
  - at: 1s
    id: 3
    io_phase: {workload: w, volume: v, pattern: random, read_pct: 50, block_size: 4Ki,
               load: {rate: {iops: 200}}, duration: 10s, region: 16Mi}
  - {at: 11500ms, id: 4, detach: {workload: w}}
  - {at: 12s, id: 5, delete_volume: {volume: v}}
";

/// A record's field, ns.
fn field(r: &serde_json::Value, k: &str) -> u64 {
    r[k].as_u64()
        .unwrap_or_else(|| panic!("record without {k}: {r}"))
}

/// Runs the trace at `speed` on `provider` (extra arguments `more`); the detach's record, the
/// `io_phase`'s record and the run's wall time in seconds.
fn run_at(
    dir: &Path,
    provider: &str,
    more: &[&str],
    speed: &str,
) -> (serde_json::Value, serde_json::Value, f64) {
    let trace = dir.join("phase.yaml");
    fs_err::write(&trace, PHASE_THEN_DETACH).expect("write trace");
    let run = dir.join(format!("{provider}-{speed}"));
    let mut args = vec![
        "run",
        s(&trace),
        "--provider",
        provider,
        "--speed",
        speed,
        LENIENT,
        "--json",
        "-o",
        s(&run),
    ];
    args.extend_from_slice(more);
    let o = cnsreplay_within(&args, 120);
    ok(&o);
    let summary: serde_json::Value = serde_json::from_slice(&o.stdout).expect("summary json");
    let wall = summary["wall_seconds"].as_f64().expect("wall_seconds");
    let events = run_events(&run);
    let by_op = |op: &str| {
        events
            .iter()
            .find(|r| r["op"] == op)
            .cloned()
            .unwrap_or_else(|| panic!("no {op} record in {events:?}"))
    };
    (by_op("detach"), by_op("io_phase"), wall)
}

/// At speeds 1 and 2 the detach starts within the tool's delay of its intended instant (the
/// phase it follows ended before it, as in the trace), the phase lasts its duration divided by
/// the speed, and the run takes about half as long at 2.
fn phase_is_compressed(provider: &str, more: &[&str]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut walls = Vec::new();
    for (speed, k) in [("1", 1.0), ("2", 2.0)] {
        let (detach, phase, wall) = run_at(dir.path(), provider, more, speed);
        let late = field(&detach, "started").saturating_sub(field(&detach, "intended"));
        let response = field(&detach, "completed") - field(&detach, "intended");
        let service = field(&detach, "completed") - field(&detach, "started");
        // The tool's delay here is its dispatch lateness: far under the 0.5 s the trace
        // leaves between the phase's end and the detach (without compression it was ~5 s).
        assert!(
            late < 400_000_000,
            "speed {speed}: the detach started {late} ns after its intended instant \
             (response {response} ns, service {service} ns): it waited for the phase\n\
             detach {detach}\nphase {phase}"
        );
        let phase_ns = field(&phase, "completed") - field(&phase, "intended");
        let want = 10e9 / k;
        assert!(
            (phase_ns as f64) >= want * 0.99 && (phase_ns as f64) < want + 1.5e9,
            "speed {speed}: the 10 s phase lasted {phase_ns} ns, want {want} ns\n{phase}"
        );
        if provider == "local" {
            // The phase ran to its (compressed) end; a detach that came while it still ran
            // would have stopped it early (`partial`).
            let run = dir.path().join(format!("{provider}-{speed}"));
            let io: serde_json::Value =
                serde_json::from_slice(&fs_err::read(run.join("io/3.json")).expect("io/3.json"))
                    .expect("json");
            assert_eq!(
                io["partial"], false,
                "speed {speed}: the phase was cut: {io}"
            );
            let elapsed = io["elapsed_s"].as_f64().expect("elapsed_s");
            assert!(
                (elapsed - 10.0 / k).abs() < 0.5,
                "speed {speed}: iogen ran {elapsed} s, want {} s",
                10.0 / k
            );
        }
        walls.push(wall);
    }
    let ratio = walls[1] / walls[0];
    assert!(
        (0.4..0.7).contains(&ratio),
        "the run at speed 2 took {:.2} s, at 1 {:.2} s: ratio {ratio:.2}, want about 0.5",
        walls[1],
        walls[0]
    );
}

#[test]
fn speed_compresses_io_phase_durations_on_the_sim() {
    phase_is_compressed("sim", &[]);
}

#[test]
fn speed_compresses_io_phase_durations_on_the_local_provider() {
    phase_is_compressed("local", &["--local-mode", "dir"]);
}

/// `--io-rate scale` multiplies an `io_phase`'s rate by the speed; `keep` (the default) keeps
/// it: the same trace at speed 2 issues about half the requests with `keep`, the same number
/// with `scale`.
#[test]
fn io_rate_keep_and_scale_on_the_local_provider() {
    let dir = tempfile::tempdir().expect("tempdir");
    // iogen's summary of the phase (event 3): its completed I/Os.
    let requests = |run: &Path| -> u64 {
        let p = run.join("io/3.json");
        let v: serde_json::Value =
            serde_json::from_slice(&fs_err::read(&p).expect("io/3.json")).expect("json");
        v["ios"]
            .as_u64()
            .unwrap_or_else(|| panic!("no ios in {}: {v}", p.display()))
    };
    let mut counts = Vec::new();
    for rate in ["keep", "scale"] {
        let (_, _, _) = run_at(
            dir.path(),
            "local",
            &["--local-mode", "dir", "--io-rate", rate],
            "2",
        );
        let run = dir.path().join("local-2");
        counts.push(requests(&run));
        fs_err::remove_dir_all(&run).expect("remove run");
    }
    // 200/s for 5 s kept, 400/s for 5 s scaled.
    assert!(
        (800..=1_100).contains(&counts[0]),
        "--io-rate keep at speed 2 issued {} requests, want ~1000",
        counts[0]
    );
    assert!(
        (1_700..=2_100).contains(&counts[1]),
        "--io-rate scale at speed 2 issued {} requests, want ~2000",
        counts[1]
    );
}

/// A speed so small that an event's time overflows is refused before anything is created.
#[test]
fn a_speed_that_overflows_is_refused_before_the_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = dir.path().join("phase.yaml");
    fs_err::write(&trace, PHASE_THEN_DETACH).expect("write trace");
    let run = dir.path().join("run");
    let o = cnsreplay(&[
        "run",
        s(&trace),
        "--provider",
        "sim",
        "--speed",
        "1e-12",
        "-o",
        s(&run),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("events[1].at"),
        "names the event's field: {err}"
    );
    assert!(!run.exists(), "no run directory for a refused speed");
}
