//! `analyze qos RUN --slo-file qos.yaml`: per-tenant I/O latency targets checked window by
//! window, and each violation attributed to the control operations in flight.
//!
//! The run is cut into equal windows (`window`, default 1 s) by I/O completion instant. For a
//! target (tenant, I/O kind, percentile, limit) a window *has data* when it holds at least one
//! successful `io` event of that tenant and kind, and *violates* when the percentile of those
//! I/Os exceeds the limit. A window is an *OP window* when an operation of control op type OP
//! was in flight (started before the window ended, completed after it began) and *quiet* when
//! no control operation was. Tenants and I/O kinds come from the trace (joined by event id),
//! so the trace must still be where the manifest says, with the same SHA-256.
//!
//! `io_phase` units count too, through their interval histograms ([`crate::phase_io`]): an
//! interval (200 ms) goes whole to the window holding its midpoint, so each I/O is counted
//! once; when it straddles a window boundary, up to half an interval of I/Os are judged in the
//! neighbouring window. Use windows of several intervals (the default 1 s is five).
//!
//! ```yaml
//! window: 1s
//! tenants:
//!   db:
//!     read.p99.9: 5ms     # KIND.PCT: read, write, trim or flush
//!     p99: 20ms           # PCT alone: every kind
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use hdrhistogram::Histogram;
use replay::Outcome;
use serde::{Deserialize, Serialize};
use trace_format::units::{Dur, fmt_ns};
use trace_format::{IoKind, Op, OpType, TraceReader};

use crate::stats::hist::{at, coarse};
use crate::stats::load::{Accumulator, Rec, Run};
use crate::stats::phase_io::{self, Spans};
use crate::stats::slo::parse_percentile;
use crate::{Error, Result};

/// The QoS file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QosSpec {
    /// Window length (default 1 s).
    #[serde(default)]
    pub window: Option<Dur>,
    /// Per tenant: `KIND.PCT` or `PCT` → limit.
    pub tenants: BTreeMap<String, BTreeMap<String, Dur>>,
}

impl QosSpec {
    /// Reads a QoS YAML file.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = fs_err::read_to_string(path)?;
        let spec: QosSpec = serde_saphyr::from_str(&text).map_err(|e| Error::Config {
            file: path.to_owned(),
            message: e.to_string(),
        })?;
        spec.targets().map_err(|message| Error::Config {
            file: path.to_owned(),
            message,
        })?;
        Ok(spec)
    }

    /// The targets, or what is wrong (naming the field).
    pub fn targets(&self) -> std::result::Result<Vec<Target>, String> {
        if let Some(w) = self.window
            && w.0 == 0
        {
            return Err("window: 0s: a window must be longer than 0 (e.g. 1s)".into());
        }
        let mut out = Vec::new();
        for (tenant, m) in &self.tenants {
            for (key, limit) in m {
                let field = format!("tenants.{tenant}.{key}");
                let (kind, pct) = match key.split_once('.') {
                    Some((k, p)) if !k.starts_with('p') => (Some(k), p),
                    _ => (None, key.as_str()),
                };
                let kind = match kind {
                    None => None,
                    Some(k) => Some(
                        serde_json::from_value::<IoKind>(serde_json::Value::String(k.to_owned()))
                            .map_err(|_| {
                            format!("{field}: unknown I/O kind {k:?} (read, write, trim, flush)")
                        })?,
                    ),
                };
                let percentile = parse_percentile(pct)
                    .ok_or_else(|| format!("{field}: bad percentile {pct:?} (p50, p99.9, max)"))?;
                out.push(Target {
                    tenant: tenant.clone(),
                    kind,
                    percentile,
                    limit_ns: limit.0,
                    spec: format!("{tenant} {key} ≤ {}", fmt_ns(limit.0 as f64)),
                });
            }
        }
        if out.is_empty() {
            return Err("tenants: no targets".into());
        }
        Ok(out)
    }
}

/// One per-tenant target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Target {
    /// Tenant.
    pub tenant: String,
    /// I/O kind, or every kind.
    #[cfg_attr(feature = "schema", schemars(with = "Option<String>"))]
    pub kind: Option<IoKind>,
    /// Percentile 0–100.
    pub percentile: f64,
    /// Limit, ns.
    pub limit_ns: u64,
    /// As text.
    pub spec: String,
}

/// A window in which a target was violated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ViolationWindow {
    /// Start, ns since the run origin.
    pub start_ns: u64,
    /// End.
    pub end_ns: u64,
    /// The percentile in this window, ns.
    pub value_ns: u64,
    /// I/Os of the target in the window.
    pub ios: u64,
    /// Control op types in flight.
    pub in_flight: Vec<String>,
}

/// Violations among windows of one kind (`quiet` or a control op type).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Attribution {
    /// `quiet`, or the control op type in flight.
    pub during: String,
    /// Windows violating the target.
    pub violated: u64,
    /// Windows with data.
    pub windows: u64,
}

/// The result of one target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TargetResult {
    /// The target.
    pub target: Target,
    /// Windows with data.
    pub windows: u64,
    /// Windows violating it.
    pub violated: u64,
    /// Per control op type, then `quiet`.
    pub attribution: Vec<Attribution>,
    /// The violating windows.
    pub violations: Vec<ViolationWindow>,
    /// The finding in one sentence.
    pub sentence: String,
}

/// `analyze qos --json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct QosReport {
    /// Run directory.
    pub run: String,
    /// Window length, ns.
    pub window_ns: u64,
    /// Windows in the run.
    pub windows: u64,
    /// `io_phase` units of the targets' tenants judged by their interval histograms.
    pub io_phase_units: u64,
    /// Per target.
    pub targets: Vec<TargetResult>,
}

type IoInfo = HashMap<u64, (u32, IoKind)>;

struct QosAcc<'a> {
    info: &'a IoInfo,
    tenants: &'a [String],
    targets: &'a [Target],
    window: u64,
    cells: HashMap<(usize, u64), Histogram<u64>>,
    control: Vec<(OpType, u64, u64)>,
    last: u64,
    spans: Spans,
}

impl Accumulator for QosAcc<'_> {
    fn add(&mut self, r: &Rec<'_>) {
        self.last = self.last.max(r.completed);
        self.spans.add(r);
        if r.op.is_control() {
            self.control.push((r.op, r.started, r.completed));
            return;
        }
        if r.op != OpType::Io || r.outcome != Outcome::Ok {
            return;
        }
        let Some(&(tenant, kind)) = self.info.get(&r.id) else {
            return;
        };
        let w = r.completed / self.window;
        for (i, t) in self.targets.iter().enumerate() {
            if self.tenants[tenant as usize] == t.tenant && t.kind.is_none_or(|k| k == kind) {
                self.cells
                    .entry((i, w))
                    .or_insert_with(coarse)
                    .saturating_record(r.response.max(1));
            }
        }
    }

    fn merge(&mut self, o: Self) {
        self.last = self.last.max(o.last);
        self.control.extend(o.control);
        self.spans.merge(o.spans);
        for (k, h) in o.cells {
            match self.cells.get_mut(&k) {
                Some(x) => {
                    let _ = x.add(&h);
                }
                None => {
                    self.cells.insert(k, h);
                }
            }
        }
    }
}

/// Most windows one judgement cuts a run into (a bitmask of 4 bytes each, and per target the
/// windows with data): 10 M windows of 1 ms are 2.8 hours.
const MAX_WINDOWS: u64 = 10_000_000;

/// Checks a run against a QoS file (refusing a run that is not valid unless
/// `allow_invalid`, see [`Run::check_valid`]).
pub fn qos(run_dir: &Path, spec: &QosSpec, allow_invalid: bool) -> Result<QosReport> {
    let targets = spec.targets().map_err(Error::Invalid)?;
    let window = spec.window.map_or(1_000_000_000, |d| d.0).max(1);
    let run = Run::open_for_analysis(run_dir, allow_invalid)?;
    run.check_records("judge QoS windows")?;
    let trace = run.trace_path().ok_or_else(|| {
        Error::Invalid(format!(
            "qos needs the run's trace for tenants and I/O kinds: {} not found with sha256 {}",
            run.manifest.trace.path, run.manifest.trace.sha256
        ))
    })?;
    let mut tenants: Vec<String> = Vec::new();
    let mut info = IoInfo::new();
    // io_phase event id → tenant index.
    let mut phase_tenant: HashMap<u64, u32> = HashMap::new();
    // Every tenant with I/O in the trace, to tell a misspelt one from a quiet one.
    let mut with_io: BTreeSet<String> = BTreeSet::new();
    for ev in TraceReader::open(&trace)?.events() {
        let ev = ev?;
        let Some(t) = &ev.tenant else { continue };
        if !matches!(ev.op, Op::Io(_) | Op::IoPhase(_)) {
            continue;
        }
        if !with_io.contains(t.as_str()) {
            with_io.insert(t.as_str().to_owned());
        }
        if !targets.iter().any(|x| x.tenant == t.as_str()) {
            continue;
        }
        let idx = match tenants.iter().position(|x| x == t.as_str()) {
            Some(i) => i,
            None => {
                tenants.push(t.as_str().to_owned());
                tenants.len() - 1
            }
        } as u32;
        match &ev.op {
            Op::Io(io) => {
                info.insert(ev.id, (idx, io.kind));
            }
            _ => {
                phase_tenant.insert(ev.id, idx);
            }
        }
    }
    if let Some(t) = targets.iter().find(|t| !with_io.contains(&t.tenant)) {
        let known: Vec<&str> = with_io.iter().map(String::as_str).collect();
        return Err(Error::Invalid(format!(
            "tenants.{}: the run's trace {} has no io or io_phase events of tenant {:?}, so \
             nothing could be judged (tenants with I/O: {})",
            t.tenant,
            trace.display(),
            t.tenant,
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        )));
    }
    let mut acc = run.scan(|| QosAcc {
        info: &info,
        tenants: &tenants,
        targets: &targets,
        window,
        cells: HashMap::new(),
        control: Vec::new(),
        last: 0,
        spans: Spans::default(),
    })?;
    let mut io_phase_units = 0;
    if !phase_tenant.is_empty() {
        for u in phase_io::units(&run, &acc.spans)? {
            let Some(&tenant) = phase_tenant.get(&u.id) else {
                continue;
            };
            io_phase_units += 1;
            for iv in &u.intervals {
                let w = iv.mid_ns() / window;
                for (i, t) in targets.iter().enumerate() {
                    if tenants[tenant as usize] == t.tenant && t.kind.is_none_or(|k| k == iv.kind) {
                        let h = acc.cells.entry((i, w)).or_insert_with(coarse);
                        crate::stats::hist::add_saturating(h, &iv.response);
                    }
                }
            }
        }
    }
    let n = acc.last / window + 1;
    if n > MAX_WINDOWS {
        return Err(Error::Invalid(format!(
            "window: {} cuts the run ({}) into {n} windows, more than the {MAX_WINDOWS} one \
             judgement holds: choose a longer window",
            fmt_ns(window as f64),
            fmt_ns(acc.last as f64)
        )));
    }
    // Bit i of mask[w]: control op type with tag i in flight during window w (the binary
    // format's tags fit in 5 bits, so in a u32).
    const _: () = assert!(OpType::ALL.len() <= 32);
    let mut mask = vec![0u32; n as usize];
    for &(op, s, e) in &acc.control {
        let (a, b) = (s / window, e.saturating_sub(1).max(s) / window);
        for m in &mut mask[a.min(n - 1) as usize..=b.min(n - 1) as usize] {
            *m |= 1 << (op as u8);
        }
    }
    let present: Vec<OpType> = OpType::ALL
        .into_iter()
        .filter(|op| mask.iter().any(|m| m & (1 << (*op as u8)) != 0))
        .collect();
    let results = targets
        .iter()
        .enumerate()
        .map(|(i, t)| target_result(i, t, &acc.cells, &mask, &present, window))
        .collect();
    Ok(QosReport {
        run: run_dir.display().to_string(),
        window_ns: window,
        windows: n,
        io_phase_units,
        targets: results,
    })
}

fn target_result(
    i: usize,
    t: &Target,
    cells: &HashMap<(usize, u64), Histogram<u64>>,
    mask: &[u32],
    present: &[OpType],
    window: u64,
) -> TargetResult {
    let mut per_op: BTreeMap<OpType, (u64, u64)> = present.iter().map(|&o| (o, (0, 0))).collect();
    let mut quiet = (0u64, 0u64);
    let mut violations = Vec::new();
    let mut windows = 0;
    for (w, &m) in mask.iter().enumerate() {
        let Some(h) = cells.get(&(i, w as u64)) else {
            continue;
        };
        windows += 1;
        let v = at(h, t.percentile);
        let bad = v > t.limit_ns;
        let in_flight: Vec<OpType> = present
            .iter()
            .copied()
            .filter(|op| m & (1 << (*op as u8)) != 0)
            .collect();
        for op in &in_flight {
            let e = per_op.entry(*op).or_default();
            e.1 += 1;
            e.0 += u64::from(bad);
        }
        if m == 0 {
            quiet.1 += 1;
            quiet.0 += u64::from(bad);
        }
        if bad {
            violations.push(ViolationWindow {
                start_ns: w as u64 * window,
                end_ns: (w as u64 + 1) * window,
                value_ns: v,
                ios: h.len(),
                in_flight: in_flight.iter().map(|o| o.name().to_owned()).collect(),
            });
        }
    }
    let mut attribution: Vec<Attribution> = per_op
        .iter()
        .map(|(op, &(violated, windows))| Attribution {
            during: op.name().to_owned(),
            violated,
            windows,
        })
        .collect();
    attribution.push(Attribution {
        during: "quiet".into(),
        violated: quiet.0,
        windows: quiet.1,
    });
    let kind = t.kind.map_or(String::new(), |k| {
        format!(
            "{} ",
            serde_json::to_value(k)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default()
        )
    });
    let pct = if t.percentile >= 100.0 {
        "max".to_owned()
    } else {
        format!("p{}", t.percentile)
    };
    let parts: Vec<String> = attribution
        .iter()
        .map(|a| format!("{} of {} {} windows", a.violated, a.windows, a.during))
        .collect();
    let sentence = format!(
        "tenant {} {kind}{pct} > {} in {}; windows of equal length ({})",
        t.tenant,
        fmt_ns(t.limit_ns as f64),
        parts.join(", "),
        fmt_ns(window as f64)
    );
    TargetResult {
        target: t.clone(),
        windows,
        violated: violations.len() as u64,
        attribution,
        violations,
        sentence,
    }
}
