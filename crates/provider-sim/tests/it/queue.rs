//! The queueing model against queueing theory. With N servers and mean service E[S] a pool
//! serves at most N / E[S] operations per second, and a FIFO queue in front of it holds the
//! rest: below that rate achieved = offered and response ≈ service; above it achieved =
//! N / E[S] and the wait grows linearly, by (λ − μ) / μ seconds per second of arrivals.
//! Draws are a hash of the seed and event id, so every run of these tests is the same.

use crate::{MS, even_trace, phase, rates, run, service, wait};

/// The pool is an exact FIFO multi-server queue: replaying the arrivals the sim saw through
/// the textbook recursion (each arrival takes the server that frees first) gives every
/// service start it recorded. Constant 5 ms service on 2 servers: 400/s; offered 300/s.
///
/// The sim admits an operation to its pool when the engine calls it, with the arrival at
/// its due instant: the queue serves in the order of the calls. Those follow the schedule
/// unless the engine ran late and two calls crossed (a cold CI run with the test build's
/// background work beside it: event 3 called after later ones, so served after them, 35 ms
/// and not 10 ms from the origin), so the recursion replays them in the order of the calls
/// (`started`), which is the schedule's on a machine that kept it.
#[test]
fn the_pool_is_a_fifo_multi_server_queue() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = even_trace(dir.path(), 900, 10 * MS / 3);
    let yaml = "default: {dist: constant, value: 5ms}\nservers: {cordon_node: 2}\n";
    let (out, recs) = run(dir.path(), &t, yaml);
    assert_eq!(recs.len(), 900);
    let mut by_arrival = recs.clone();
    by_arrival.sort_by_key(|r| (r.started, phase(r, "arrived"), phase(r, "queue")));
    let mut free = [0u64; 2];
    for r in &by_arrival {
        let k = if free[0] <= free[1] { 0 } else { 1 };
        let start = phase(r, "arrived").max(free[k]);
        assert_eq!(phase(r, "queue"), start, "event {}", r.id);
        assert_eq!(service(r), 5 * MS, "event {}", r.id);
        free[k] = start + 5 * MS;
    }
    // Below saturation throughput keeps up and the median response is the service time
    // plus the engine's own delay (dispatch and call: well under a millisecond).
    let (offered, achieved) = rates(&recs);
    assert!(
        (achieved / offered - 1.0).abs() < 0.02,
        "{achieved} of {offered}"
    );
    let mut resp: Vec<u64> = recs.iter().map(|r| r.response).collect();
    resp.sort_unstable();
    assert!(
        resp[resp.len() / 2] < 6 * MS,
        "median response {}",
        resp[resp.len() / 2]
    );
    // The manifest records the model and its saturation rate.
    let m: serde_json::Value = serde_json::from_slice(
        &fs_err::read(dir.path().join("run/manifest.json")).expect("manifest"),
    )
    .expect("json");
    let q = &m["provider"]["environment"]["queueing"]["dedicated"]["cordon_node"];
    assert_eq!(q["servers"], 2);
    assert_eq!(q["saturation_per_s"], 400.0);
    assert_eq!(m["provider"]["config"]["servers"]["cordon_node"], 2);
    assert!(
        out.summary
            .notices
            .iter()
            .any(|n| n.contains("sim queue cordon_node")),
        "{:?}",
        out.summary.notices
    );
}

/// Exponential service at half the saturation rate: throughput keeps up and the response
/// stays near the service time.
#[test]
fn below_saturation_achieved_is_offered() {
    // 2 servers × exp(2 ms): μ = 1000/s. Offered 500/s (ρ = 0.5), 2000 events over 4 s.
    let dir = tempfile::tempdir().expect("tempdir");
    let t = even_trace(dir.path(), 2000, 2 * MS);
    let yaml = "seed: 7\ndefault: {dist: exponential, mean: 2ms}\nservers: {cordon_node: 2}\n";
    let (_, recs) = run(dir.path(), &t, yaml);
    let (offered, achieved) = rates(&recs);
    // The middle 1600 completions trail the arrivals by a response time of a few ms: the
    // spans differ by ≪ 1 % of 3.2 s.
    assert!(
        (achieved / offered - 1.0).abs() < 0.02,
        "{achieved} of {offered}"
    );
    let n = recs.len() as f64;
    let svc: f64 = recs.iter().map(|r| service(r) as f64).sum::<f64>() / n;
    let sojourn: f64 = recs
        .iter()
        .map(|r| (phase(r, "served") - phase(r, "arrived")) as f64)
        .sum::<f64>()
        / n;
    // Mean of 2000 exponential draws: relative standard error 1/√2000 = 2.2 %; 8 % is 3.6 σ.
    assert!(
        (svc / (2.0 * MS as f64) - 1.0).abs() < 0.08,
        "mean service {svc}"
    );
    // Evenly spaced arrivals at ρ = 0.5 on 2 servers wait rarely and briefly (M/M/2, which
    // waits more, has E[W] = E[S]/3): time in the sim stays within 40 % of the service.
    assert!(
        sojourn < 1.4 * svc,
        "time in the sim {sojourn} vs service {svc}"
    );
}

/// Above saturation the pool serves N / E[S] and the queue grows without bound.
#[test]
fn above_saturation_achieved_is_the_analytic_rate_and_the_queue_grows() {
    // 2 servers × exp(2 ms): μ = 1000/s. Offered 2000/s for 1.5 s (3000 events).
    let dir = tempfile::tempdir().expect("tempdir");
    let t = even_trace(dir.path(), 3000, MS / 2);
    let yaml = "seed: 3\ndefault: {dist: exponential, mean: 2ms}\nservers: {cordon_node: 2}\n";
    let (_, recs) = run(dir.path(), &t, yaml);
    let (offered, achieved) = rates(&recs);
    assert!((offered / 2000.0 - 1.0).abs() < 0.01, "offered {offered}");
    // 2400 completions paced by the sum of their services: relative standard error
    // 1/√2400 = 2 %; 6 % is 3 σ.
    assert!(
        (achieved / 1000.0 - 1.0).abs() < 0.06,
        "achieved {achieved}/s, analytic saturation 1000/s"
    );
    // The wait grows by (λ − μ)/μ = 1 s per second of arrivals: the last arrival (1.5 s)
    // waits about 1.5 s, the first decile about 0.075 s.
    let mut by_id = recs;
    by_id.sort_by_key(|r| r.id);
    let mean_wait = |rs: &[replay::EventRecord]| {
        rs.iter().map(|r| wait(r) as f64).sum::<f64>() / rs.len() as f64 / 1e9
    };
    let (first, last) = (mean_wait(&by_id[..300]), mean_wait(&by_id[2700..]));
    assert!(first < 0.15, "first decile waited {first} s");
    assert!(
        (last - 1.425).abs() < 0.2,
        "last decile waited {last} s, analytic 1.425 s"
    );
}

/// A shared pool serves every op type without a pool of its own, FIFO across types.
#[test]
fn a_shared_pool_serves_the_other_op_types() {
    // One shared server × constant 10 ms: 100/s for everything; offered 200/s for 1 s.
    let dir = tempfile::tempdir().expect("tempdir");
    let t = even_trace(dir.path(), 200, 5 * MS);
    let yaml = "default: {dist: constant, value: 10ms}\nshared_servers: 1\n";
    let (_, recs) = run(dir.path(), &t, yaml);
    let (_, achieved) = rates(&recs);
    // Constant service on one server: exactly 100/s.
    assert!((achieved - 100.0).abs() < 0.5, "achieved {achieved}");
    // One FIFO server: each starts when it arrived or when the one before it ended.
    let mut by_arrival = recs;
    by_arrival.sort_by_key(|r| (phase(r, "arrived"), phase(r, "queue")));
    let mut free = 0;
    for r in &by_arrival {
        assert_eq!(
            phase(r, "queue"),
            phase(r, "arrived").max(free),
            "event {}",
            r.id
        );
        free = phase(r, "served");
    }
    // Offered twice the capacity: the last arrival (at about 1 s) waited about 1 s.
    let last = by_arrival.last().expect("records");
    assert!(wait(last) > 800 * MS, "last waited {} ns", wait(last));
}

/// A run-wide slowdown multiplies every drawn service time: constant 4 ms × 1.5 = 6 ms.
#[test]
fn a_slowdown_multiplies_every_service_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = even_trace(dir.path(), 50, 10 * MS);
    let yaml = "default: {dist: constant, value: 4ms}\nservers: {cordon_node: 1}\nslowdown: 1.5\n";
    let (_, recs) = run(dir.path(), &t, yaml);
    assert_eq!(recs.len(), 50);
    for r in &recs {
        assert_eq!(service(r), 6 * MS, "event {}", r.id);
    }
}
