//! Generation: scenarios, rates, determinism, invariants.

use synth::{Options, Plan, generate_to_file};
use trace_format::{Encoding, OpType, Trace, TraceReader};

use crate::{generate_checked, plan, workspace};

#[test]
fn every_scenario_generates_a_valid_trace() {
    let dir = workspace().join("traces/synth");
    let mut n = 0;
    for entry in fs_err::read_dir(&dir).expect("traces/synth") {
        let path = entry.expect("entry").path();
        let m = synth::Model::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let opts = Options {
            // Keep the big scenario short in tests; its rate test is below.
            duration: path
                .to_string_lossy()
                .contains("hosts-1000")
                .then_some(60_000_000_000),
            ..Options::default()
        };
        let p = Plan::new(m, &path.display().to_string(), &opts).unwrap_or_else(|e| panic!("{e}"));
        let (_, events, stats) = generate_checked(p);
        assert!(!events.is_empty(), "{}", path.display());
        assert!(
            stats.ops.contains_key(&OpType::Attach),
            "{}",
            path.display()
        );
        n += 1;
    }
    assert!(n >= 7, "only {n} scenarios");
}

const THOUSAND_HOSTS: &str = "traces/synth/hosts-1000-attach-100.yaml";

/// The whole file, not only what follows the `steady-state` marker, holds the target rate,
/// and no second carries a burst: the initial population runs before the trace starts.
#[test]
fn one_hour_at_100_attach_per_second_is_within_2_percent_with_no_burst() {
    let m = synth::Model::load(workspace().join(THOUSAND_HOSTS)).expect("model");
    let p = Plan::new(
        m,
        THOUSAND_HOSTS,
        &Options {
            seed: Some(11),
            ..Options::default()
        },
    )
    .expect("plan");
    assert_eq!(p.model().cluster.hosts, 1000);
    let g = synth::Generator::new(p);
    let running = g.header().workloads.len();
    let mut attaches = 0u64;
    let mut per_second = std::collections::HashMap::<u64, u64>::new();
    let mut last = 0;
    for e in g {
        assert!(e.at >= last, "sorted");
        last = e.at;
        if let trace_format::Op::Attach(_) = &e.op {
            attaches += 1;
            *per_second.entry(e.at / 1_000_000_000).or_default() += 1;
        }
    }
    assert_eq!(last, 3_600_000_000_000);
    let rate = attaches as f64 / 3600.0;
    assert!((rate / 100.0 - 1.0).abs() < 0.02, "whole file: {rate}/s");
    let (second, peak) = per_second
        .into_iter()
        .max_by_key(|&(s, n)| (n, std::cmp::Reverse(s)))
        .expect("attaches");
    assert!(peak <= 200, "{peak} attaches in second {second}");
    assert!(
        (29_000..31_000).contains(&running),
        "{running} workloads declared running"
    );
}

/// Declared-running workloads replace the attach burst only without a warm-up; with one, the
/// initial attaches are spread over it, in the file.
#[test]
fn a_warm_up_keeps_the_initial_attaches_in_the_file() {
    let text = "cluster: {hosts: 10, containers_per_host: 3}\nlifetime: {exponential: {mean: 1m}}\nduration: 2m\n";
    let (h, events, _) = generate_checked(plan(text, &Options::default()));
    assert_eq!(h.workloads.len(), 30);
    assert!(
        events
            .iter()
            .all(|e| !matches!(e.op, trace_format::Op::Attach(_)) || e.at > 0)
    );
    let (h, events, _) =
        generate_checked(plan(&format!("{text}warmup: 30s\n"), &Options::default()));
    assert!(h.workloads.is_empty());
    let early = events
        .iter()
        .filter(|e| e.at < 30_000_000_000 && matches!(e.op, trace_format::Op::Attach(_)))
        .count();
    assert!(early >= 30, "{early}");
}

const SMALL: &str = "\
cluster: {hosts: 5, containers_per_host: [{value: 2, weight: 1}, {value: 4, weight: 1}], tenants: [{name: a, share: 3}, {name: b, share: 1}]}
lifetime: {preset: azure-functions-2019}
duration: 10m
volumes: {share: 0.8, per_container: {poisson: 1.5}, size: [{value: 1Gi, weight: 1}, {value: 5Gi, weight: 1}], reuse: {share: 0.3, pool: 4}}
snapshots:
  - per_volume: {every: 30s, process: poisson, retain: 2}
  - round_robin: {every: 20s, retain: 3}
restores: {rate: 1/m, keep: 1m}
clones: {rate: 1/m}
failures: {resize: {rate: 2/m}, abort: {rate: 1/m}, reschedule: {rate: 1/m}}
drains: [{at: 5m, node: node-2}]
";

fn bytes(encoding: Encoding, seed: u64) -> Vec<u8> {
    let g = synth::Generator::new(plan(
        SMALL,
        &Options {
            seed: Some(seed),
            ..Options::default()
        },
    ));
    let t = Trace {
        header: g.header().clone(),
        events: g.collect(),
    };
    t.to_bytes(encoding).expect("encode")
}

#[test]
fn same_seed_gives_byte_identical_output() {
    for enc in [Encoding::Jsonl, Encoding::Binary] {
        assert_eq!(bytes(enc, 5), bytes(enc, 5), "{enc}");
    }
    assert_ne!(bytes(Encoding::Jsonl, 5), bytes(Encoding::Jsonl, 6));
    let t = Trace::from_bytes(&bytes(Encoding::Jsonl, 5), None).expect("decode");
    assert_eq!(t.header.provenance.seed, Some(5));
    assert_eq!(
        t.header.provenance.generator.as_deref(),
        Some(synth::GENERATOR)
    );
}

#[test]
fn writing_to_a_file_streams_a_checkable_trace() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("t.cnsbin");
    let s = generate_to_file(plan(SMALL, &Options::default()), &path, None).expect("generate");
    let r = trace_format::check_trace(TraceReader::open(&path).expect("open"), "t", 10, |_| {})
        .expect("check");
    assert!(r.is_valid(), "{:?}", r.diagnostics);
    assert_eq!(r.events, s.events);
    for op in [
        OpType::Snapshot,
        OpType::DeleteSnapshot,
        OpType::Resize,
        OpType::AbortWorkload,
        OpType::Reschedule,
        OpType::DrainNode,
        OpType::CreateVolume,
    ] {
        assert!(r.stats.ops.contains_key(&op), "no {op}");
    }
}

#[test]
fn experiment_2_takes_20_and_40_snapshots_round_robin() {
    for (file, n, every) in [("exp2-20-snapshots", 20, 90), ("exp2-40-snapshots", 40, 45)] {
        let path = workspace().join(format!("traces/synth/{file}.yaml"));
        let p = Plan::new(
            synth::Model::load(&path).expect("model"),
            file,
            &Options::default(),
        )
        .expect("plan");
        let (_, events, _) = generate_checked(p);
        let snaps: Vec<_> = events
            .iter()
            .filter_map(|e| match &e.op {
                trace_format::Op::Snapshot(s) => Some((e.at, s.volume.to_string())),
                _ => None,
            })
            .collect();
        assert_eq!(snaps.len(), n, "{file}");
        for (i, (at, vol)) in snaps.iter().enumerate() {
            assert_eq!(*at, (i as u64 + 1) * every * 1_000_000_000, "{file}");
            assert_eq!(*vol, format!("pvc-{}", i % 5), "{file}: round robin");
        }
    }
}

#[test]
fn experiment_1_reuses_the_declared_pool() {
    let path = workspace().join("traces/synth/exp1-preexisting-volumes.yaml");
    let p = Plan::new(
        synth::Model::load(&path).expect("model"),
        "e1",
        &Options::default(),
    )
    .expect("plan");
    let (header, events, stats) = generate_checked(p);
    assert_eq!(header.volumes.len(), 51);
    assert!(!stats.ops.contains_key(&OpType::CreateVolume));
    let burst = events
        .iter()
        .filter(|e| e.at == 300_000_000_000 && matches!(e.op, trace_format::Op::Attach(_)))
        .count();
    assert_eq!(burst, 50);
}

mod invariants {
    use proptest::prelude::*;
    use synth::Options;

    use crate::{generate_checked, plan};

    struct Knobs {
        hosts: u32,
        cph: u32,
        mean: u32,
        arrivals: usize,
        share: f64,
        reuse: bool,
        failures: bool,
        start_empty: bool,
        warm: bool,
    }

    fn model_text(k: &Knobs) -> String {
        let Knobs {
            hosts,
            cph,
            mean,
            arrivals,
            share,
            reuse,
            failures,
            start_empty,
            warm,
        } = *k;
        let arr = [
            "replacement",
            "{poisson: {rate: 2/s}}",
            "{renewal: {rate: 1/s, cv: 3}}",
            "{varying: {steps: [{at: 0s, rate: 1/s}, {at: 1m, rate: 3/s}]}}",
            "{varying: {diurnal: {mean: 1/s, amplitude: 0.8, period: 2m, peak: 30s}}}",
        ][arrivals];
        let mut s = format!(
            "duration: 3m\nwarmup: {}\nstart: {}\nend: clean_up\ncluster: {{hosts: {hosts}, containers_per_host: {cph}}}\n\
             lifetime: {{exponential: {{mean: {mean}s}}}}\narrivals: {arr}\n\
             volumes: {{share: {share}, per_container: 2{}}}\n\
             snapshots: [{{per_volume: {{every: 20s, retain: 1}}}}, {{round_robin: {{every: 15s, over: {}, retain: 2}}}}]\n\
             io: {{phases: [{{pattern: random, read_pct: 50, block_size: 4Ki, load: {{depth: 1}}, duration: 30s}}, {{pattern: sequential, read_pct: 0, block_size: 1Mi, load: {{depth: 2}}}}]}}\n",
            if warm { "10s" } else { "0s" },
            if start_empty { "empty" } else { "steady_state" },
            if reuse {
                ", reuse: {share: 0.5, pool: 3}"
            } else {
                ""
            },
            if reuse { "pool" } else { "live" },
        );
        if failures {
            s.push_str(
                "failures: {resize: {rate: 3/m}, abort: {rate: 3/m}, reschedule: {rate: 3/m}}\n\
                 restores: {rate: 2/m}\nclones: {rate: 2/m, keep: 10s}\n",
            );
            if hosts > 1 {
                s.push_str("drains: [{at: 1m, node: node-0}]\n");
            }
        }
        s
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(40))]
        #[test]
        fn generated_traces_always_pass_the_checker(
            hosts in 1u32..4,
            cph in 1u32..4,
            mean in 1u32..120,
            arrivals in 0usize..5,
            share in 0.0f64..=1.0,
            reuse: bool,
            failures: bool,
            start_empty: bool,
            warm: bool,
            seed: u64,
        ) {
            let text = model_text(&Knobs { hosts, cph, mean, arrivals, share, reuse, failures, start_empty, warm });
            let p = plan(&text, &Options { seed: Some(seed), ..Options::default() });
            // generate_checked asserts every event against the checker (the header's
            // declared workloads included), which also requires time order and increasing ids.
            let (header, events, _) = generate_checked(p);
            // Only a steady-state start without a warm-up declares running workloads.
            prop_assert!(header.workloads.is_empty() || (!start_empty && !warm));
            prop_assert!(events.windows(2).all(|w| w[0].at <= w[1].at && w[0].id < w[1].id));
            prop_assert!(matches!(&events.last().expect("end marker").op,
                trace_format::Op::Marker(m) if m.name == "end"));
        }
    }
}

/// `modifies`: attributes-class changes at the model's rate, each moving a live volume to a
/// class other than its current one, with the classes declared in the header as given.
#[test]
fn modifies_move_live_volumes_between_the_declared_classes() {
    let model = "duration: 2h\ncluster: {hosts: 20}\nlifetime: {constant: {value: 3h}}\n\
                 volumes: {size: 1Gi}\n\
                 modifies:\n  rate: 600/h\n  classes:\n    \
                 a: {write_iops: 100}\n    b: {write_iops: unlimited}\n    c: {read_bps: 10Mi}\n";
    let (header, events, stats) = generate_checked(plan(
        model,
        &Options {
            seed: Some(3),
            ..Options::default()
        },
    ));
    assert_eq!(
        header
            .attributes_classes
            .keys()
            .map(|k| k.as_str())
            .collect::<Vec<_>>(),
        ["a", "b", "c"]
    );
    assert_eq!(header.attributes_classes["a"]["write_iops"], "100");
    let n = stats.ops[&OpType::ModifyVolume].count;
    // Poisson with mean 1200 over 2 h: within 4 standard deviations (±139).
    assert!((1061..=1339).contains(&n), "{n} changes");
    let mut class = std::collections::HashMap::new();
    for e in &events {
        if let trace_format::Op::ModifyVolume(m) = &e.op {
            let before = class.insert(m.volume.clone(), m.class.clone());
            assert_ne!(
                before.as_ref(),
                Some(&m.class),
                "a change to the same class: {e:?}"
            );
        }
    }
    assert!(
        class.len() > 15,
        "changes spread over {} volumes",
        class.len()
    );
}

/// `group_snapshots`: groups of distinct live volumes at the model's rate, each deleted after
/// `keep`, in a trace the checker accepts.
#[test]
fn group_snapshots_take_distinct_live_volumes_and_go_after_keep() {
    let model = "duration: 1h\ncluster: {hosts: 10}\nlifetime: {constant: {value: 2h}}\n\
                 volumes: {size: 1Gi}\n\
                 group_snapshots: {rate: 120/h, volumes: 3, keep: 2m}\n";
    let (_, events, stats) = generate_checked(plan(
        model,
        &Options {
            seed: Some(5),
            ..Options::default()
        },
    ));
    let n = stats.ops[&OpType::GroupSnapshot].count;
    // Poisson with mean 120 over 1 h: within 4 standard deviations (±44).
    assert!((76..=164).contains(&n), "{n} group snapshots");
    let mut taken = std::collections::HashMap::new();
    for e in &events {
        match &e.op {
            trace_format::Op::GroupSnapshot(g) => {
                assert_eq!(g.volumes.len(), 3, "{e:?}");
                let distinct: std::collections::HashSet<_> = g.volumes.iter().collect();
                assert_eq!(distinct.len(), 3, "distinct: {e:?}");
                taken.insert(g.group.clone(), e.at);
            }
            trace_format::Op::DeleteGroupSnapshot(g) => {
                let at = taken.remove(&g.group).expect("taken before");
                assert_eq!(e.at - at, 120_000_000_000);
            }
            _ => {}
        }
    }
}
