//! Target-rate mode: solve the cluster size for an operation rate with Little's law.
//!
//! In steady state the number of containers alive is N = λ · E[L] (λ the container arrival
//! rate, E[L] the mean lifetime) whatever the lifetime distribution. Each container produces a
//! known expected number of each operation (one attach and one detach; `share · E[volumes] ·
//! (1 − reuse share)` creates and deletes; per-volume snapshots `(E[L] + delete_after) /
//! every` per volume), so a target rate fixes λ, and λ fixes N and the host count
//! `⌈N / E[containers per host]⌉`. The derivation is returned as data.

use serde::Serialize;

use crate::dist::Distribution;
use crate::error::Error;
use crate::model::{Arrivals, Count, Model, Rate, SnapshotPolicy, Target, TargetOp};

/// How the cluster size was solved.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Derivation {
    /// The targeted operation (`attach`, `detach`, `create`, `delete`, `snapshot`).
    pub op: String,
    /// Target rate, operations per second.
    pub target_rate: f64,
    /// Part of the rate that does not scale with the cluster (round-robin snapshots).
    pub fixed_rate: f64,
    /// Expected targeted operations per container life.
    pub ops_per_container: f64,
    /// Mean container lifetime E[L], seconds.
    pub mean_lifetime_s: f64,
    /// Container arrival rate λ = (target − fixed) / ops per container, per second.
    pub container_rate: f64,
    /// Containers alive in steady state, N = λ · E[L].
    pub containers: f64,
    /// Mean containers per host.
    pub containers_per_host: f64,
    /// Hosts = ⌈N / containers per host⌉.
    pub hosts: u32,
    /// The rate the generated cluster realises in expectation (hosts are whole).
    pub realised_rate: f64,
    /// The steps, as text.
    pub steps: Vec<String>,
}

/// The mean of a count spec.
pub fn count_mean(c: &Count) -> f64 {
    match c {
        Count::Fixed(n) => f64::from(*n),
        Count::Weighted(ws) => {
            let total: f64 = ws.iter().map(|w| w.weight).sum();
            if total > 0.0 {
                ws.iter()
                    .map(|w| f64::from(w.value) * w.weight)
                    .sum::<f64>()
                    / total
            } else {
                0.0
            }
        }
        Count::Poisson { poisson } => *poisson,
        Count::Preset { .. } => f64::from(crate::presets::CONTAINERS_PER_HOST_2019),
    }
}

fn volumes_per_container(m: &Model) -> f64 {
    m.volumes
        .as_ref()
        .map_or(0.0, |v| v.share * count_mean(&v.per_container))
}

/// Solves the model for `target`, changing the host count (replacement arrivals) or the
/// arrival rate (Poisson and renewal arrivals, hosts then sized to hold N), and returns the
/// derivation.
pub fn solve(m: &mut Model, lifetime: &Distribution, target: Target) -> Result<Derivation, Error> {
    let el = lifetime.mean();
    if !el.is_finite() {
        return Err(Error::Target(
            "the lifetime distribution has an infinite mean; Little's law needs a finite one"
                .into(),
        ));
    }
    let vpc = volumes_per_container(m);
    let new_share = 1.0
        - m.volumes
            .as_ref()
            .and_then(|v| v.reuse.as_ref())
            .map_or(0.0, |r| r.share);
    let delete_after = m.volumes.as_ref().map_or(0, |v| v.delete_after) as f64 / 1e9;
    let mut fixed = 0.0;
    let mut steps = Vec::new();
    let ops = match target.op {
        TargetOp::Attach | TargetOp::Detach => {
            steps.push(format!("each container does one {}", target.op.name()));
            1.0
        }
        TargetOp::Create | TargetOp::Delete => {
            let o = vpc * new_share;
            steps.push(format!(
                "each container {}s share × E[volumes] × new share = {vpc:.4} × {new_share:.4} = {o:.4} volumes",
                target.op.name()
            ));
            o
        }
        TargetOp::Snapshot => {
            let mut per = 0.0;
            for p in &m.snapshots {
                match p {
                    SnapshotPolicy::RoundRobin(r) => fixed += 1e9 / r.every as f64,
                    SnapshotPolicy::PerVolume(p) => {
                        per += vpc * (el + delete_after) / (p.every as f64 / 1e9);
                    }
                    SnapshotPolicy::IncrementalBackup(b) => {
                        let n = (el + delete_after) / (b.every as f64 / 1e9);
                        per += vpc * b.count.map_or(n, |c| n.min(f64::from(c)));
                    }
                }
            }
            steps.push(format!(
                "round-robin policies give a fixed {fixed:.4}/s; per-volume and incremental-backup policies {per:.4} snapshots per container"
            ));
            per
        }
    };
    if ops.is_nan() || ops <= 0.0 {
        return Err(Error::Target(format!(
            "a container does no {} in this model, so no cluster size reaches the target",
            target.op.name()
        )));
    }
    if target.rate <= fixed {
        return Err(Error::Target(format!(
            "the target {}/s is not above the fixed rate {fixed}/s",
            target.rate
        )));
    }
    let lambda = (target.rate - fixed) / ops;
    steps.push(format!(
        "λ = ({} − {fixed}) / {ops:.4} = {lambda:.4} containers/s",
        target.rate
    ));
    let n = lambda * el;
    steps.push(format!(
        "Little's law: N = λ · E[L] = {lambda:.4} × {el:.2} s = {n:.1} containers"
    ));
    let cph = count_mean(&m.cluster.containers_per_host);
    if cph.is_nan() || cph <= 0.0 {
        return Err(Error::Target("containers per host has mean 0".into()));
    }
    let hosts_f = (n / cph).ceil().max(1.0);
    if hosts_f > f64::from(u32::MAX) {
        return Err(Error::Target(format!("{hosts_f} hosts is too many")));
    }
    let hosts = hosts_f as u32;
    steps.push(format!(
        "hosts = ⌈N / E[containers per host]⌉ = ⌈{n:.1} / {cph}⌉ = {hosts}"
    ));
    m.cluster.hosts = hosts;
    let realised = match &mut m.arrivals {
        Arrivals::Replacement => {
            let r = f64::from(hosts) * cph / el * ops + fixed;
            steps.push(format!(
                "replacement keeps {hosts} × {cph} slots busy: realised rate {r:.4}/s"
            ));
            r
        }
        Arrivals::Poisson { rate } | Arrivals::Renewal { rate, .. } => {
            *rate = Rate(lambda);
            steps.push(format!(
                "arrival rate set to λ = {lambda:.4}/s: realised rate {}/s",
                target.rate
            ));
            target.rate
        }
        Arrivals::Varying(_) | Arrivals::Batches(_) => {
            return Err(Error::Target(
                "target mode needs replacement, poisson or renewal arrivals".into(),
            ));
        }
    };
    Ok(Derivation {
        op: target.op.name().to_owned(),
        target_rate: target.rate,
        fixed_rate: fixed,
        ops_per_container: ops,
        mean_lifetime_s: el,
        container_rate: lambda,
        containers: n,
        containers_per_host: cph,
        hosts,
        realised_rate: realised,
        steps,
    })
}
