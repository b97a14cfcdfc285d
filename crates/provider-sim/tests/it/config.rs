//! The queueing model's configuration: file and flag forms, errors naming the field, and the
//! analytic saturation rate.

use provider_sim::{Latency, SimConfig};
use trace_format::OpType;

#[test]
fn servers_parse_from_yaml_and_flags_and_give_the_saturation_rate() {
    let c = SimConfig::from_yaml(
        "ops: {attach: {dist: exponential, mean: 250ms}}\nservers: {attach: 4}\nshared_servers: 2\n",
        "sim.yaml",
    )
    .expect("valid");
    assert_eq!(c.servers[&OpType::Attach], 4);
    assert_eq!(c.shared_servers, Some(2));
    // 4 servers / 0.25 s = 16 attaches per second.
    assert_eq!(c.saturation_rate(OpType::Attach), Some(16.0));
    assert_eq!(c.saturation_rate(OpType::Detach), None);

    let mut f = SimConfig::default();
    f.set_servers("create_volume=3").expect("flag");
    f.set_servers("shared=8").expect("flag");
    f.ops.insert(
        OpType::CreateVolume,
        Latency::parse("uniform:10ms:30ms").expect("latency"),
    );
    assert_eq!(f.servers[&OpType::CreateVolume], 3);
    assert_eq!(f.shared_servers, Some(8));
    // Mean 20 ms: 3 / 0.02 = 150/s.
    let r = f.saturation_rate(OpType::CreateVolume).expect("rate");
    assert!((r - 150.0).abs() < 1e-9, "{r}");
    // Lognormal mean = median · e^(σ²/2).
    let l = Latency::parse("lognormal:100ms:0.5").expect("latency");
    assert!((l.mean() - 1e8 * (0.125f64).exp()).abs() < 1.0);
}

#[test]
fn bad_server_counts_are_errors_naming_the_field() {
    let e = SimConfig::from_yaml("servers: {attach: 0}\n", "sim.yaml").expect_err("zero");
    assert!(
        e.to_string().contains("sim.yaml") && e.to_string().contains("servers.attach"),
        "{e}"
    );
    let e = SimConfig::from_yaml("shared_servers: 0\n", "sim.yaml").expect_err("zero");
    assert!(e.to_string().contains("shared_servers"), "{e}");
    let e = SimConfig::from_yaml("servers: {atach: 2}\n", "sim.yaml").expect_err("unknown op");
    assert!(e.to_string().contains("sim.yaml"), "{e}");
    let mut c = SimConfig::default();
    for bad in ["attach", "attach=0", "attach=x", "nope=2"] {
        assert!(c.set_servers(bad).is_err(), "{bad} accepted");
    }
}

#[test]
fn a_run_wide_slowdown_scales_service_and_must_be_positive() {
    let c = SimConfig::from_yaml(
        "ops: {attach: {dist: constant, value: 250ms}}\nservers: {attach: 4}\nslowdown: 2\n",
        "sim.yaml",
    )
    .expect("valid");
    // Every service time doubled: 4 servers / 0.5 s.
    assert_eq!(c.saturation_rate(OpType::Attach), Some(8.0));
    assert_eq!(SimConfig::default().slowdown, 1.0);
    for bad in ["slowdown: 0\n", "slowdown: -1\n", "slowdown: .nan\n"] {
        let e = SimConfig::from_yaml(bad, "sim.yaml").expect_err(bad);
        assert!(e.to_string().contains("sim.yaml: slowdown"), "{e}");
    }
}
