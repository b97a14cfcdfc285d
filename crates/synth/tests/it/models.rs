//! Model files: errors name the file, line and field; target-rate derivation.

use synth::{Error, Model, Options, Plan};

fn parse_err(text: &str) -> String {
    Model::parse(text, "m.yaml")
        .expect_err("invalid")
        .to_string()
}

#[test]
fn unknown_field_names_file_line_and_path() {
    let e = parse_err("lifetime: {exponential: {mean: 5m}}\nvolumes:\n  size: 1Gi\n  sise: 2Gi\n");
    assert!(e.starts_with("m.yaml:4: volumes"), "{e}");
    assert!(e.contains("sise"), "{e}");
}

#[test]
fn bad_values_name_their_field() {
    let e = parse_err("lifetime: {exponential: {mean: 5 minutes}}\n");
    assert!(e.starts_with("m.yaml:1: lifetime"), "{e}");
    let e =
        parse_err("lifetime: {exponential: {mean: 5m}}\narrivals: {poisson: {rate: 10/week}}\n");
    assert!(e.starts_with("m.yaml:2: arrivals.poisson.rate"), "{e}");
    let m = Model::parse("lifetime: {weibull: {shape: 0, scale: 1m}}\n", "m.yaml").expect("parses");
    let e = Plan::new(m, "m.yaml", &Options::default()).expect_err("shape 0");
    assert!(
        matches!(&e, Error::Invalid { path, .. } if path == "lifetime.weibull.shape"),
        "{e}"
    );
    let m = Model::parse(
        "lifetime: {constant: {value: 1m}}\ndrains: [{at: 1m, node: node-9}]\n",
        "m.yaml",
    )
    .expect("parses");
    let e = Plan::new(m, "m.yaml", &Options::default()).expect_err("no such node");
    assert!(e.to_string().contains("drains[0].node"), "{e}");
}

#[test]
fn durations_sizes_and_rates_in_every_spelling() {
    let m = Model::parse(
        "duration: 90\nlifetime: {exponential: {mean: 1.5h}}\nvolumes: {size: 1073741824}\n\
         arrivals: {poisson: {rate: 6/m}}\n",
        "m.yaml",
    )
    .expect("parses");
    assert_eq!(m.duration, 90_000_000_000);
    assert_eq!(m.lifetime, synth::Dist::Exponential { mean: 5400.0 });
}

#[test]
fn target_mode_solves_hosts_with_littles_law() {
    let m = Model::parse(
        "cluster: {containers_per_host: 30}\nlifetime: {exponential: {mean: 5m}}\n",
        "m.yaml",
    )
    .expect("parses");
    let opts = Options {
        target: Some("attach=100/s".parse().expect("target")),
        ..Options::default()
    };
    let p = Plan::new(m, "m.yaml", &opts).expect("plan");
    let d = p.derivation().expect("derivation");
    assert_eq!(d.hosts, 1000);
    assert!((d.containers - 30_000.0).abs() < 1e-6);
    assert!((d.realised_rate - 100.0).abs() < 1e-9);
    assert_eq!(p.model().cluster.hosts, 1000);
    // Creates: half the containers have a volume, a quarter of those reuse the pool.
    let m = Model::parse(
        "cluster: {containers_per_host: 10}\nlifetime: {exponential: {mean: 100s}}\n\
         volumes: {share: 0.5, reuse: {share: 0.25, pool: 10}}\n",
        "m.yaml",
    )
    .expect("parses");
    let opts = Options {
        target: Some("create=3/s".parse().expect("target")),
        ..Options::default()
    };
    let p = Plan::new(m, "m.yaml", &opts).expect("plan");
    let d = p.derivation().expect("derivation");
    assert!((d.ops_per_container - 0.375).abs() < 1e-12);
    assert!((d.container_rate - 8.0).abs() < 1e-9);
    assert_eq!(d.hosts, 80);
}

#[test]
fn target_parse_errors() {
    assert!("attach".parse::<synth::Target>().is_err());
    assert!("frobnicate=1/s".parse::<synth::Target>().is_err());
    assert!("attach=1/fortnight".parse::<synth::Target>().is_err());
}

/// Models whose generation could not finish or fit in memory are refused before any event,
/// naming the field: a lifetime that rounds to nothing (it used to loop forever), a Poisson
/// rate of 1e12/s (forever), 4 294 967 295 hosts (out of memory).
#[test]
fn models_that_cannot_finish_or_fit_are_refused() {
    let refused = |text: &str| -> Error {
        let m = Model::parse(text, "m.yaml").expect("parses");
        Plan::new(m, "m.yaml", &Options::default()).expect_err("refused")
    };
    let e = refused("lifetime: {constant: {value: 0.0000000001}}\n");
    assert!(
        matches!(&e, Error::Invalid { path, .. } if path == "lifetime"),
        "{e}"
    );
    assert!(e.to_string().contains("under 1 µs"), "{e}");
    let e = refused(
        "lifetime: {exponential: {mean: 5m}}\nstart: empty\narrivals: {poisson: {rate: 1000000000000}}\n",
    );
    assert!(
        matches!(&e, Error::Invalid { path, .. } if path == "arrivals.poisson.rate"),
        "{e}"
    );
    let e = refused("lifetime: {exponential: {mean: 5m}}\ncluster: {hosts: 4294967295}\n");
    assert!(
        matches!(&e, Error::Invalid { path, .. } if path == "cluster.hosts"),
        "{e}"
    );
    // Large but finite models still pass.
    let m = Model::parse(
        "lifetime: {exponential: {mean: 5m}}\ncluster: {hosts: 1000}\n",
        "m.yaml",
    )
    .expect("parses");
    Plan::new(m, "m.yaml", &Options::default()).expect("1000 hosts are fine");
}
