//! Validation and compilation of a [`Model`] into what the generator needs: the lifetime
//! distribution, drawn counts, weighted choices, the solved target and the provenance.

use std::collections::BTreeMap;

use trace_format::{AccessMode, Name, STEADY_PARAMETER};

use crate::dist::{Dist, Distribution};
use crate::error::Error;
use crate::model::{
    Arrivals, Choice, Count, IncrementalBackup, Model, Phase, Profile, SnapshotPolicy, Start,
    Target,
};
use crate::rng::SynthRng;
use crate::target::{Derivation, count_mean, solve};

/// Overrides from the command line.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Seed (default: the model's, else 0).
    pub seed: Option<u64>,
    /// Duration in ns (default: the model's).
    pub duration: Option<u64>,
    /// Solve for this rate (default: the model's `target`).
    pub target: Option<Target>,
    /// Replace the model's lifetime with this preset.
    pub preset: Option<String>,
}

/// A weighted choice, compiled.
#[derive(Debug, Clone)]
pub(crate) struct Pick<T> {
    items: Vec<T>,
    cum: Vec<f64>,
}

impl<T: Clone> Pick<T> {
    pub(crate) fn one(v: T) -> Self {
        Self {
            items: vec![v],
            cum: vec![1.0],
        }
    }

    fn new(pairs: Vec<(T, f64)>, path: &str, file: &str) -> Result<Self, Error> {
        let mut acc = 0.0;
        let mut items = Vec::new();
        let mut cum = Vec::new();
        for (i, (v, w)) in pairs.into_iter().enumerate() {
            if !(w.is_finite() && w >= 0.0) {
                return Err(invalid(file, &format!("{path}[{i}].weight"), "must be ≥ 0"));
            }
            acc += w;
            items.push(v);
            cum.push(acc);
        }
        if acc.is_nan() || acc <= 0.0 {
            return Err(invalid(file, path, "needs a weight above 0"));
        }
        Ok(Self { items, cum })
    }

    fn from_choice<U: Clone>(
        c: &Choice<U>,
        f: impl Fn(&U) -> T,
        path: &str,
        file: &str,
    ) -> Result<Self, Error> {
        match c {
            Choice::One(v) => Ok(Self::one(f(v))),
            Choice::Weighted(ws) => Self::new(
                ws.iter().map(|w| (f(&w.value), w.weight)).collect(),
                path,
                file,
            ),
        }
    }

    pub(crate) fn draw(&self, rng: &mut SynthRng) -> T {
        if self.items.len() == 1 {
            return self.items[0].clone();
        }
        let target = rng.uniform() * self.cum.last().copied().unwrap_or(0.0);
        let i = self
            .cum
            .partition_point(|&c| c < target)
            .min(self.items.len() - 1);
        self.items[i].clone()
    }
}

/// A compiled count.
#[derive(Debug, Clone)]
pub(crate) enum CountDraw {
    Pick(Pick<u32>),
    Poisson(f64),
}

impl CountDraw {
    fn new(c: &Count, path: &str, file: &str) -> Result<Self, Error> {
        Ok(match c {
            Count::Fixed(n) => CountDraw::Pick(Pick::one(*n)),
            Count::Weighted(ws) => CountDraw::Pick(Pick::new(
                ws.iter().map(|w| (w.value, w.weight)).collect(),
                path,
                file,
            )?),
            Count::Poisson { poisson } => {
                if !(poisson.is_finite() && *poisson >= 0.0) {
                    return Err(invalid(file, path, "a Poisson mean must be ≥ 0"));
                }
                CountDraw::Poisson(*poisson)
            }
            Count::Preset { preset } => {
                if !crate::presets::HOST_PRESETS.contains(&preset.as_str()) {
                    return Err(invalid(
                        file,
                        path,
                        &format!(
                            "unknown preset {preset:?}; known: {}",
                            crate::presets::HOST_PRESETS.join(", ")
                        ),
                    ));
                }
                CountDraw::Pick(Pick::one(crate::presets::CONTAINERS_PER_HOST_2019))
            }
        })
    }

    pub(crate) fn draw(&self, rng: &mut SynthRng) -> u32 {
        match self {
            CountDraw::Pick(p) => p.draw(rng),
            CountDraw::Poisson(m) => rng.poisson(*m).min(u64::from(u32::MAX)) as u32,
        }
    }
}

/// Volume attributes, compiled.
#[derive(Debug, Clone)]
pub(crate) struct VolPlan {
    pub share: f64,
    pub per_container: CountDraw,
    pub size: Pick<u64>,
    pub class: Option<Pick<Name>>,
    pub access: Option<Pick<AccessMode>>,
    pub reuse_share: f64,
}

/// A model, validated and compiled.
#[derive(Debug, Clone)]
pub struct Plan {
    pub(crate) model: Model,
    pub(crate) file: String,
    pub(crate) seed: u64,
    pub(crate) lifetime: Distribution,
    pub(crate) cph: CountDraw,
    pub(crate) tenants: Option<Pick<Name>>,
    pub(crate) vols: Option<VolPlan>,
    derivation: Option<Derivation>,
}

pub(crate) fn invalid(file: &str, path: &str, message: &str) -> Error {
    Error::Invalid {
        file: file.to_owned(),
        path: path.to_owned(),
        message: message.to_owned(),
    }
}

fn check_rate(file: &str, path: &str, r: f64) -> Result<(), Error> {
    if r.is_finite() && r > 0.0 {
        Ok(())
    } else {
        Err(invalid(file, path, "must be a rate above 0"))
    }
}

fn check_phases(phases: &[Phase], file: &str) -> Result<(), Error> {
    for (i, p) in phases.iter().enumerate() {
        let path = format!("io.phases[{i}]");
        if p.read_pct > 100 {
            return Err(invalid(file, &format!("{path}.read_pct"), "must be ≤ 100"));
        }
        if p.jobs == 0 {
            return Err(invalid(file, &format!("{path}.jobs"), "must be ≥ 1"));
        }
        if p.duration.is_none() && p.bytes.is_none() && i + 1 != phases.len() {
            return Err(invalid(
                file,
                &format!("{path}.duration"),
                "only the last phase may run until the container ends; give a duration or bytes",
            ));
        }
        if p.duration == Some(0) {
            return Err(invalid(file, &format!("{path}.duration"), "must not be 0"));
        }
    }
    Ok(())
}

/// The values of an incremental-backup policy at `path` that parse but make no backup chain.
fn check_backup(b: &IncrementalBackup, path: &str, file: &str) -> Result<(), Error> {
    if b.every == 0 {
        return Err(invalid(file, &format!("{path}.every"), "must be above 0"));
    }
    if b.count == Some(0) {
        return Err(invalid(
            file,
            &format!("{path}.count"),
            "must be at least 1",
        ));
    }
    if b.retain == Some(0) {
        return Err(invalid(
            file,
            &format!("{path}.retain"),
            "must be at least 1: the newest snapshot is the base of the next delta",
        ));
    }
    if let Some(bs) = b.block_size
        && (bs.0 < 512 || !bs.0.is_power_of_two())
    {
        return Err(invalid(
            file,
            &format!("{path}.block_size"),
            &format!("{} is not a power of two of at least 512 bytes", bs.0),
        ));
    }
    if !b.full_first && !b.deltas {
        return Err(invalid(
            file,
            &format!("{path}.deltas"),
            "with `full_first: false` and `deltas: false` nothing is listed; use `per_volume` \
             for snapshots alone",
        ));
    }
    Ok(())
}

/// Most hosts a model may have: the generator keeps a name and state per host.
pub const MAX_HOSTS: u32 = 1_000_000;
/// Most containers the arrival processes may start over a trace (before any event is written,
/// so a model that cannot finish is refused instead of running out of time or memory).
pub const MAX_ARRIVALS: f64 = 1e9;

/// Refuses models whose generation could not finish or fit in memory: more than
/// [`MAX_HOSTS`] hosts, a mean lifetime under 1 µs (containers would end as they start, at
/// the trace's nanosecond resolution), or arrivals past [`MAX_ARRIVALS`].
fn check_bounds(model: &Model, lifetime: &Distribution, file: &str) -> Result<(), Error> {
    let hosts = model.cluster.hosts;
    if hosts > MAX_HOSTS {
        return Err(invalid(
            file,
            "cluster.hosts",
            &format!("{hosts} hosts: at most {MAX_HOSTS} (the generator keeps each one)"),
        ));
    }
    let mean = lifetime.mean();
    if mean < 1e-6 {
        return Err(invalid(
            file,
            "lifetime",
            &format!(
                "mean lifetime {mean:e} s is under 1 µs: containers would end as they start \
                 (times are whole nanoseconds) and replacing them would never finish"
            ),
        ));
    }
    let secs = model.duration as f64 / 1e9;
    let rate = match &model.arrivals {
        Arrivals::Poisson { rate } | Arrivals::Renewal { rate, .. } => Some((
            rate.0,
            if matches!(model.arrivals, Arrivals::Poisson { .. }) {
                "arrivals.poisson.rate"
            } else {
                "arrivals.renewal.rate"
            },
        )),
        _ => None,
    };
    if let Some((r, path)) = rate
        && r * secs > MAX_ARRIVALS
    {
        return Err(invalid(
            file,
            path,
            &format!(
                "{r:e}/s for {secs} s is {:e} containers, more than {MAX_ARRIVALS:e}; \
                 lower the rate or the duration",
                r * secs
            ),
        ));
    }
    Ok(())
}

impl Plan {
    /// Validates and compiles a model; `file` names it in errors.
    pub fn new(mut model: Model, file: &str, opts: &Options) -> Result<Self, Error> {
        if let Some(p) = &opts.preset {
            model.lifetime = Dist::Preset(p.clone());
        }
        if let Some(d) = opts.duration {
            model.duration = d;
        }
        let lifetime =
            Distribution::new(&model.lifetime, "lifetime").map_err(|e| Error::Invalid {
                file: file.to_owned(),
                path: e.path,
                message: e.message,
            })?;
        if model.duration == 0 {
            return Err(invalid(file, "duration", "must be above 0"));
        }
        let c = &model.cluster;
        if c.hosts == 0 {
            return Err(invalid(file, "cluster.hosts", "must be ≥ 1"));
        }
        let tenants = if c.tenants.is_empty() {
            None
        } else {
            Some(Pick::new(
                c.tenants
                    .iter()
                    .map(|t| (Name::from(t.name.as_str()), t.share))
                    .collect(),
                "cluster.tenants",
                file,
            )?)
        };
        match &model.arrivals {
            Arrivals::Replacement => {}
            Arrivals::Poisson { rate } => check_rate(file, "arrivals.poisson.rate", rate.0)?,
            Arrivals::Renewal { rate, cv } => {
                check_rate(file, "arrivals.renewal.rate", rate.0)?;
                if !(cv.is_finite() && *cv > 0.0) {
                    return Err(invalid(file, "arrivals.renewal.cv", "must be above 0"));
                }
            }
            Arrivals::Varying(p) => {
                if let Profile::Steps(s) = p {
                    if s.is_empty() {
                        return Err(invalid(file, "arrivals.varying.steps", "needs a step"));
                    }
                    if s.windows(2).any(|w| w[1].at < w[0].at) {
                        return Err(invalid(
                            file,
                            "arrivals.varying.steps",
                            "steps must be in time order",
                        ));
                    }
                }
                if let Profile::Diurnal {
                    amplitude, period, ..
                } = p
                    && (!(0.0..=1.0).contains(amplitude) || *period == 0)
                {
                    return Err(invalid(
                        file,
                        "arrivals.varying.diurnal",
                        "amplitude must be in [0, 1] and the period above 0",
                    ));
                }
            }
            Arrivals::Batches(_) => {
                if model.start == Start::SteadyState {
                    return Err(invalid(
                        file,
                        "start",
                        "batch arrivals have no steady state; write `start: empty`",
                    ));
                }
            }
        }
        let vols = match &model.volumes {
            None => None,
            Some(v) => {
                if !(0.0..=1.0).contains(&v.share) {
                    return Err(invalid(file, "volumes.share", "must be in [0, 1]"));
                }
                let reuse_share = match &v.reuse {
                    None => 0.0,
                    Some(r) => {
                        if !(0.0..=1.0).contains(&r.share) {
                            return Err(invalid(file, "volumes.reuse.share", "must be in [0, 1]"));
                        }
                        r.share
                    }
                };
                let size = Pick::from_choice(&v.size, |b| b.0, "volumes.size", file)?;
                if size.items.contains(&0) {
                    return Err(invalid(file, "volumes.size", "must not be 0"));
                }
                Some(VolPlan {
                    share: v.share,
                    per_container: CountDraw::new(&v.per_container, "volumes.per_container", file)?,
                    size,
                    class: v
                        .storage_class
                        .as_ref()
                        .map(|c| {
                            Pick::from_choice(
                                c,
                                |s| Name::from(s.as_str()),
                                "volumes.storage_class",
                                file,
                            )
                        })
                        .transpose()?,
                    access: v
                        .access_mode
                        .as_ref()
                        .map(|c| Pick::from_choice(c, |a| *a, "volumes.access_mode", file))
                        .transpose()?,
                    reuse_share,
                })
            }
        };
        for (i, p) in model.snapshots.iter().enumerate() {
            let every = match p {
                SnapshotPolicy::RoundRobin(r) => r.every,
                SnapshotPolicy::PerVolume(p) => p.every,
                SnapshotPolicy::IncrementalBackup(b) => {
                    check_backup(b, &format!("snapshots[{i}].incremental_backup"), file)?;
                    b.every
                }
            };
            if every == 0 {
                return Err(invalid(
                    file,
                    &format!("snapshots[{i}].every"),
                    "must be above 0",
                ));
            }
            if vols.is_none() {
                return Err(invalid(
                    file,
                    &format!("snapshots[{i}]"),
                    "snapshot policies need `volumes`",
                ));
            }
        }
        for (name, d) in [("restores", &model.restores), ("clones", &model.clones)] {
            if let Some(d) = d {
                check_rate(file, &format!("{name}.rate"), d.rate.0)?;
            }
        }
        if let Some(io) = &model.io {
            check_phases(&io.phases, file)?;
        }
        if let Some(g) = &model.group_snapshots {
            check_rate(file, "group_snapshots.rate", g.rate.0)?;
            if g.volumes == 0 {
                return Err(invalid(
                    file,
                    "group_snapshots.volumes",
                    "must be at least 1",
                ));
            }
        }
        if let Some(m) = &model.modifies {
            check_rate(file, "modifies.rate", m.rate.0)?;
            if m.classes.len() < 2 {
                return Err(invalid(
                    file,
                    "modifies.classes",
                    "needs at least two classes to move volumes between",
                ));
            }
        }
        if let Some(r) = &model.failures.resize {
            check_rate(file, "failures.resize.rate", r.rate.0)?;
            if !(r.factor.is_finite() && r.factor > 1.0) {
                return Err(invalid(file, "failures.resize.factor", "must be above 1"));
            }
        }
        for (name, r) in [
            ("abort", &model.failures.abort),
            ("reschedule", &model.failures.reschedule),
        ] {
            if let Some(r) = r {
                check_rate(file, &format!("failures.{name}.rate"), r.rate.0)?;
            }
        }
        let seed = opts.seed.or(model.seed).unwrap_or(0);
        let needs_mean = model.start == Start::SteadyState;
        if needs_mean && !lifetime.mean().is_finite() {
            return Err(invalid(
                file,
                "start",
                "a steady state needs a finite mean lifetime (Pareto shape > 1); write `start: empty`",
            ));
        }
        let derivation = match opts.target.or(model.target) {
            None => None,
            Some(t) => Some(solve(&mut model, &lifetime, t)?),
        };
        check_bounds(&model, &lifetime, file)?;
        let cph = CountDraw::new(
            &model.cluster.containers_per_host,
            "cluster.containers_per_host",
            file,
        )?;
        let nodes = node_names(&model);
        for (i, d) in model.drains.iter().enumerate() {
            if !nodes.iter().any(|n| **n == *d.node) {
                return Err(invalid(
                    file,
                    &format!("drains[{i}].node"),
                    &format!(
                        "no node {:?} (nodes are {} … {})",
                        d.node,
                        nodes.first().map_or("", |n| n.as_str()),
                        nodes.last().map_or("", |n| n.as_str())
                    ),
                ));
            }
        }
        let mut drained: Vec<&str> = model.drains.iter().map(|d| d.node.as_str()).collect();
        drained.sort_unstable();
        drained.dedup();
        if drained.len() >= nodes.len() {
            return Err(invalid(file, "drains", "cannot drain every node"));
        }
        Ok(Self {
            file: file.to_owned(),
            seed,
            lifetime,
            cph,
            tenants,
            vols,
            derivation,
            model,
        })
    }

    /// The seed in use.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The model after overrides and target solving.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The lifetime distribution.
    pub fn lifetime(&self) -> &Distribution {
        &self.lifetime
    }

    /// The target-rate derivation, when a target was given.
    pub fn derivation(&self) -> Option<&Derivation> {
        self.derivation.as_ref()
    }

    /// Expected containers per host.
    pub fn containers_per_host(&self) -> f64 {
        count_mean(&self.model.cluster.containers_per_host)
    }

    /// Provenance parameters recorded in the trace header (with [`STEADY_PARAMETER`]).
    pub fn parameters(&self) -> BTreeMap<String, String> {
        let m = &self.model;
        let mut p = BTreeMap::new();
        let file = std::path::Path::new(&self.file)
            .file_name()
            .map_or_else(|| self.file.clone(), |f| f.to_string_lossy().into_owned());
        p.insert("model".into(), file);
        if let Some(d) = &m.description {
            p.insert("description".into(), d.clone());
        }
        p.insert("duration_s".into(), fmt_num(m.duration as f64 / 1e9));
        p.insert("warmup_s".into(), fmt_num(m.warmup as f64 / 1e9));
        // The part of the trace in steady state, trace time in ns, end exclusive: after the
        // warm-up, before the end (where `end: clean_up` puts its deletes). Capacity judges
        // stationarity over it (analyze's `steady` window).
        p.insert(
            STEADY_PARAMETER.into(),
            format!("{}..{}", m.warmup, m.warmup.saturating_add(m.duration)),
        );
        p.insert(
            "end".into(),
            match m.end {
                crate::model::End::Leave => "leave",
                crate::model::End::CleanUp => "clean_up",
            }
            .into(),
        );
        p.insert(
            "start".into(),
            match m.start {
                Start::SteadyState => "steady_state",
                Start::Empty => "empty",
            }
            .into(),
        );
        p.insert("hosts".into(), m.cluster.hosts.to_string());
        p.insert(
            "lifetime".into(),
            match &m.lifetime {
                Dist::Preset(n) => format!("preset {n}"),
                Dist::Constant { .. } => "constant".into(),
                Dist::Exponential { .. } => "exponential".into(),
                Dist::Lognormal { .. } => "lognormal".into(),
                Dist::Weibull { .. } => "weibull".into(),
                Dist::Gamma { .. } => "gamma".into(),
                Dist::Pareto { .. } => "pareto".into(),
                Dist::Empirical(_) => "empirical".into(),
                Dist::Mixture(_) => "mixture".into(),
            },
        );
        p.insert("lifetime_mean_s".into(), fmt_num(self.lifetime.mean()));
        p.insert(
            "arrivals".into(),
            match &m.arrivals {
                Arrivals::Replacement => "replacement",
                Arrivals::Poisson { .. } => "poisson",
                Arrivals::Renewal { .. } => "renewal",
                Arrivals::Varying(_) => "varying",
                Arrivals::Batches(_) => "batches",
            }
            .into(),
        );
        if let Some(d) = &self.derivation {
            p.insert(
                "target".into(),
                format!("{}={}/s", d.op, fmt_num(d.target_rate)),
            );
        }
        p
    }
}

/// Formats a number briefly and deterministically.
pub(crate) fn fmt_num(x: f64) -> String {
    if x.is_finite() && x == x.round() && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x:.6}")
    }
}

/// The node names of a model's cluster.
pub(crate) fn node_names(m: &Model) -> Vec<Name> {
    let n = m.cluster.hosts;
    let width = n.saturating_sub(1).to_string().len();
    (0..n)
        .map(|i| Name::from(format!("{}{i:0width$}", m.cluster.node_prefix)))
        .collect()
}
