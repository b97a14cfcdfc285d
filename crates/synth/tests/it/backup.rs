//! Incremental-backup chains: per volume a snapshot every interval, the first listed in full,
//! each later one as the delta from the previous one of its volume, retention that never takes
//! a snapshot a listing still reads.

use std::collections::{BTreeMap, HashMap};

use proptest::prelude::*;
use synth::{Model, Options, Plan};
use trace_format::{Event, Op};

use crate::{generate_checked, plan, workspace};

const SECOND: u64 = 1_000_000_000;

/// What a trace did with each volume's snapshots, in trace order.
#[derive(Debug, Default)]
struct Chains {
    /// Snapshots per volume, oldest first, with their event index and time.
    taken: BTreeMap<String, Vec<(String, usize, u64)>>,
    /// Volume of each snapshot.
    of: HashMap<String, String>,
    /// The listings.
    listings: Vec<Listing>,
    /// Event index of each snapshot's deletion.
    deleted: HashMap<String, usize>,
    /// Event index of each volume's deletion.
    volume_deleted: HashMap<String, usize>,
}

/// A `snapshot_allocated` (no `base`) or `snapshot_delta`.
#[derive(Debug)]
struct Listing {
    /// Event index.
    index: usize,
    at: u64,
    base: Option<String>,
    snap: String,
    block_size: Option<u64>,
}

fn chains(events: &[Event]) -> Chains {
    let mut c = Chains::default();
    for (i, e) in events.iter().enumerate() {
        match &e.op {
            Op::Snapshot(s) => {
                c.taken.entry(s.volume.to_string()).or_default().push((
                    s.snapshot.to_string(),
                    i,
                    e.at,
                ));
                c.of.insert(s.snapshot.to_string(), s.volume.to_string());
            }
            Op::SnapshotAllocated(a) => c.listings.push(Listing {
                index: i,
                at: e.at,
                base: None,
                snap: a.snapshot.to_string(),
                block_size: a.block_size,
            }),
            Op::SnapshotDelta(d) => c.listings.push(Listing {
                index: i,
                at: e.at,
                base: Some(d.base.to_string()),
                snap: d.snapshot.to_string(),
                block_size: d.block_size,
            }),
            Op::DeleteSnapshot(s) => {
                assert!(
                    c.deleted.insert(s.snapshot.to_string(), i).is_none(),
                    "{} deleted twice",
                    s.snapshot
                );
            }
            Op::DeleteVolume(v) => {
                c.volume_deleted.insert(v.volume.to_string(), i);
            }
            _ => {}
        }
    }
    c
}

impl Chains {
    /// The snapshot taken before `snap` on its volume.
    fn previous(&self, snap: &str) -> Option<&str> {
        let chain = &self.taken[&self.of[snap]];
        let k = chain.iter().position(|(s, _, _)| s == snap)?;
        k.checked_sub(1).map(|p| chain[p].0.as_str())
    }

    /// Every rule a backup chain keeps, whatever the model: each listing comes after its
    /// snapshots and before their deletion; a delta's base is the previous snapshot of the
    /// same volume; a full listing names a volume's first snapshot; a snapshot deleted while
    /// its volume lives (retention) is never listed afterwards.
    fn assert_rules(&self) {
        for Listing {
            index: i,
            base,
            snap,
            ..
        } in &self.listings
        {
            for s in base.iter().chain([snap]) {
                let (_, taken_at, _) = self.taken[&self.of[s]]
                    .iter()
                    .find(|(x, _, _)| x == s)
                    .expect("listed snapshot was taken");
                assert!(taken_at < i, "{s} listed (event {i}) before it was taken");
                if let Some(d) = self.deleted.get(s) {
                    assert!(d > i, "{s} deleted (event {d}) before listing event {i}");
                }
            }
            match base {
                Some(b) => assert_eq!(
                    self.previous(snap),
                    Some(b.as_str()),
                    "delta → {snap}: base is not the previous snapshot of its volume"
                ),
                None => assert_eq!(self.previous(snap), None, "{snap} listed in full"),
            }
        }
    }
}

/// The committed model (3 volumes, a snapshot every 4 s from 3.25 s, 4 per volume, retain 2):
/// per volume 4 snapshots, the first listed in full at once, 3 deltas of consecutive pairs,
/// each at its snapshot's instant right after it; retention deletes each volume's oldest two
/// as the third and fourth are taken, after the listings that read them; the rest go with the
/// volume.
#[test]
fn the_committed_model_lists_the_first_in_full_then_each_delta_from_the_previous() {
    let path = workspace().join("traces/synth/incremental-backup.yaml");
    let m = Model::load(&path).expect("model");
    let p = Plan::new(
        m,
        &path.display().to_string(),
        &Options {
            seed: Some(7),
            ..Options::default()
        },
    )
    .expect("plan");
    let (header, events, _) = generate_checked(p);
    assert_eq!(header.version, 3);
    let c = chains(&events);
    c.assert_rules();
    assert_eq!(c.taken.len(), 3, "{:?}", c.taken.keys());
    let attach = events
        .iter()
        .find(|e| matches!(e.op, Op::Attach(_)))
        .map(|e| e.at)
        .expect("attach");
    for (vol, snaps) in &c.taken {
        let times: Vec<u64> = snaps.iter().map(|s| s.2 - attach).collect();
        assert_eq!(
            times,
            [3_250_000_000, 7_250_000_000, 11_250_000_000, 15_250_000_000],
            "{vol}"
        );
        let names: Vec<&str> = snaps.iter().map(|s| s.0.as_str()).collect();
        let mine: Vec<_> = c
            .listings
            .iter()
            .filter(|l| c.of[&l.snap] == *vol)
            .map(|l| (l.base.as_deref(), l.snap.as_str(), l.block_size))
            .collect();
        assert_eq!(
            mine,
            [
                (None, names[0], Some(4096)),
                (Some(names[0]), names[1], Some(4096)),
                (Some(names[1]), names[2], Some(4096)),
                (Some(names[2]), names[3], Some(4096)),
            ],
            "{vol}"
        );
        // Each listing at its snapshot's instant (delay 0: the replayer starts it when the
        // snapshot is ready).
        for (s, _, at) in snaps {
            let l = c.listings.iter().find(|l| l.snap == *s).expect("listed");
            assert_eq!(l.at, *at, "{s}");
        }
        // Retention 2: the first two deleted as the third and fourth are taken; the last two
        // with the volume.
        let vol_del = c.volume_deleted[vol];
        for (k, (s, _, at)) in snaps.iter().enumerate() {
            let d = c.deleted[s];
            if k < 2 {
                let taken_next_next = snaps[k + 2].1;
                assert!(
                    d > taken_next_next && d < vol_del,
                    "{s}: deleted at event {d}"
                );
                assert_eq!(events[d].at, snaps[k + 2].2, "{s} (taken at {at})");
            } else {
                assert!(
                    d < vol_del && vol_del - d <= 2,
                    "{s}: deleted with its volume"
                );
            }
        }
    }
}

/// `full_first: false` lists no full backup; `deltas: false` only full ones; the listing
/// comes `delay` after its snapshot; no `count` keeps snapshotting while the volume lives.
#[test]
fn the_choices_change_what_is_listed_and_when() {
    let base = "start: empty\nduration: 30s\nlifetime: {constant: {value: 20s}}\n\
                arrivals: {batches: [{at: 0s, count: 2}]}\nvolumes: {size: 64Mi}\n";
    let run = |policy: &str| {
        let (_, events, _) = generate_checked(plan(
            &format!("{base}snapshots:\n  - incremental_backup: {policy}\n"),
            &Options::default(),
        ));
        let c = chains(&events);
        c.assert_rules();
        c
    };
    // Every 5 s while the volumes live (20 s): at 5, 10, 15 and 20 s — the last at the
    // container's end, after its volume was deleted, so not taken.
    let c = run("{every: 5s, full_first: false}");
    assert!(c.taken.values().all(|s| s.len() == 3), "{:?}", c.taken);
    assert_eq!(c.listings.len(), 4);
    assert!(
        c.listings
            .iter()
            .all(|l| l.base.is_some() && l.block_size.is_none())
    );
    let c = run("{every: 5s, deltas: false}");
    assert_eq!(c.listings.len(), 2);
    assert!(c.listings.iter().all(|l| l.base.is_none()));
    let c = run("{every: 5s, count: 2, delay: 2s}");
    assert!(c.taken.values().all(|s| s.len() == 2));
    assert_eq!(c.listings.len(), 4);
    for l in &c.listings {
        let (_, _, at) = c.taken[&c.of[&l.snap]]
            .iter()
            .find(|s| s.0 == l.snap)
            .expect("taken");
        assert_eq!(l.at, at + 2 * SECOND, "{l:?}");
    }
}

/// A listing delayed past later snapshots keeps the snapshots it reads alive beyond `retain`:
/// with `retain: 1` and listings 7 s after snapshots taken every 2 s, no snapshot is deleted
/// before the delta that reads it, and each is deleted at the first retention after it.
#[test]
fn retention_waits_for_the_listings_that_read_a_snapshot() {
    let text = "start: empty\nduration: 40s\nlifetime: {constant: {value: 30s}}\n\
                arrivals: {batches: [{at: 0s, count: 1}]}\nvolumes: {size: 64Mi}\n\
                snapshots:\n  - incremental_backup: {every: 2s, delay: 7s, retain: 1}\n";
    let (_, events, _) = generate_checked(plan(text, &Options::default()));
    let c = chains(&events);
    c.assert_rules();
    let snaps = c.taken.values().next().expect("a volume");
    assert!(snaps.len() >= 10, "{snaps:?}");
    // Deleted by retention (before the volume): after its last listing.
    let vol_del = *c.volume_deleted.values().next().expect("deleted volume");
    let mut retained = 0;
    for (s, _, _) in snaps {
        let d = c.deleted[s];
        if d < vol_del - snaps.len() {
            retained += 1;
            let last_use = c
                .listings
                .iter()
                .filter(|l| l.snap == *s || l.base.as_deref() == Some(s.as_str()))
                .map(|l| l.index)
                .max()
                .expect("listed");
            assert!(d > last_use, "{s}");
        }
    }
    assert!(retained >= 5, "{retained} deleted by retention");
}

/// The steady-state population's volumes are backed up too, each chain at its own phase.
#[test]
fn a_steady_state_population_is_backed_up_from_random_phases() {
    let text = "cluster: {hosts: 4, containers_per_host: 2}\nlifetime: {constant: {value: 10m}}\n\
                duration: 2m\nvolumes: {size: 1Gi}\n\
                snapshots:\n  - incremental_backup: {every: 1m, retain: 3}\n";
    let (header, events, _) = generate_checked(plan(text, &Options::default()));
    assert_eq!(header.volumes.len(), 8);
    let c = chains(&events);
    c.assert_rules();
    // The declared volumes' chains (replacements start theirs one interval after attach).
    // A volume whose container ends before its chain's phase has none.
    let mut first = Vec::new();
    for v in &header.volumes {
        match c.taken.get(v.name.as_str()) {
            Some(chain) => first.push(chain[0].2),
            None => {
                let d = c.volume_deleted[v.name.as_str()];
                assert!(events[d].at < 60 * SECOND, "{}: no snapshot", v.name);
            }
        }
    }
    assert!(first.len() >= 4, "{first:?}");
    assert!(first.iter().all(|&t| t < 60 * SECOND), "{first:?}");
    let mut distinct = first.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), first.len(), "{first:?}");
}

/// Values that parse but make no chain are refused naming the file and the field.
#[test]
fn bad_backup_policies_name_the_field() {
    let head = "lifetime: {constant: {value: 1m}}\nvolumes: {size: 1Gi}\nsnapshots:\n";
    for (policy, path, words) in [
        ("{every: 1m, retain: 0}", "retain", "must be at least 1"),
        ("{every: 1m, count: 0}", "count", "must be at least 1"),
        ("{every: 0s}", "every", "must be above 0"),
        (
            "{every: 1m, block_size: 1000}",
            "block_size",
            "1000 is not a power of two of at least 512 bytes",
        ),
        (
            "{every: 1m, block_size: 256}",
            "block_size",
            "not a power of two of at least 512",
        ),
        (
            "{every: 1m, full_first: false, deltas: false}",
            "deltas",
            "nothing is listed",
        ),
    ] {
        let text =
            format!("{head}  - per_volume: {{every: 1h}}\n  - incremental_backup: {policy}\n");
        let m = Model::parse(&text, "b.yaml").expect("parses");
        let e = Plan::new(m, "b.yaml", &Options::default())
            .expect_err(policy)
            .to_string();
        assert!(
            e.starts_with(&format!("b.yaml: snapshots[1].incremental_backup.{path}: "))
                && e.contains(words),
            "{policy}: {e}"
        );
    }
    let e = Model::parse(
        &format!("{head}  - incremental_backup: {{every: 1m, full_frist: true}}\n"),
        "b.yaml",
    )
    .expect_err("unknown field")
    .to_string();
    assert!(
        e.starts_with("b.yaml:4: snapshots[0].incremental_backup") && e.contains("full_frist"),
        "{e}"
    );
    let m = Model::parse(
        "lifetime: {constant: {value: 1m}}\nsnapshots:\n  - incremental_backup: {every: 1m}\n",
        "b.yaml",
    )
    .expect("parses");
    let e = Plan::new(m, "b.yaml", &Options::default())
        .expect_err("no volumes")
        .to_string();
    assert!(
        e.contains("snapshots[0]: snapshot policies need `volumes`"),
        "{e}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Whatever the interval, delay, count, retention and churn: the trace passes the checker
    /// (every name live where used), every chain keeps its rules, and with listings at once
    /// no more than `retain` snapshots of a chain outlive their listing.
    #[test]
    fn chains_keep_their_rules(
        every in 1u64..20,
        delay in prop_oneof![Just(0u64), 1u64..40],
        count in prop::option::of(1u32..8),
        retain in prop::option::of(1u32..4),
        full_first in any::<bool>(),
        mean_life in 5u64..60,
        seed in 0u64..1000,
    ) {
        let count = count.map_or_else(String::new, |c| format!(", count: {c}"));
        let retain_s = retain.map_or_else(String::new, |r| format!(", retain: {r}"));
        let text = format!(
            "cluster: {{hosts: 2, containers_per_host: 2}}\n\
             lifetime: {{exponential: {{mean: {mean_life}s}}}}\nduration: 2m\n\
             volumes: {{size: 64Mi, per_container: [{{value: 1, weight: 1}}, {{value: 2, weight: 1}}]}}\n\
             snapshots:\n  - incremental_backup: {{every: {every}s, delay: {delay}s, \
             full_first: {full_first}{count}{retain_s}}}\n"
        );
        let (_, events, _) = generate_checked(plan(&text, &Options { seed: Some(seed), ..Options::default() }));
        let c = chains(&events);
        c.assert_rules();
        // Every snapshot but a volume's first (unless listed in full) has its listing, unless
        // the volume went first.
        for (vol, snaps) in &c.taken {
            for (k, (s, _, at)) in snaps.iter().enumerate() {
                let listed = c.listings.iter().any(|l| l.snap == *s);
                let wanted = k > 0 || full_first;
                let gone = c.deleted.get(s).is_some_and(|d| {
                    c.volume_deleted.get(vol).is_some_and(|v| d < v && v - d <= snaps.len())
                });
                let after_end = at + delay * SECOND > 120 * SECOND;
                prop_assert!(
                    listed == wanted || (wanted && (gone || after_end)),
                    "{vol} {s}: listed {listed}"
                );
            }
        }
        if let (Some(keep), 0) = (retain, delay) {
            // Listings at once: when a volume's next snapshot is taken, the earlier ones'
            // listings are written and at most `retain` of them are left.
            for (vol, snaps) in &c.taken {
                for (_, next, _) in snaps.iter().skip(1) {
                    let live = snaps
                        .iter()
                        .filter(|(s, t, _)| t < next && c.deleted.get(s).is_none_or(|d| d > next))
                        .count();
                    prop_assert!(live <= keep as usize, "{vol}: {live} live before event {next}");
                }
            }
        }
    }
}
