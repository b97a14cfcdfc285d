//! Reading observations for [`crate::fit`]: a CSV of lifetimes, or a trace.
//!
//! **CSV**: a header line `lifetime_s` or `lifetime_s,censored`, then one lifetime per line in
//! seconds (a number, or a duration such as `5m`), optionally followed by `true`/`false`
//! (also `1`/`0`, `yes`/`no`). Blank lines and lines starting with `#` are skipped; any other
//! bad line is an error naming the file and line.
//!
//! **Trace**: lifetimes of workloads (`attach` → `detach`/`abort_workload`) or volumes
//! (`create_volume` → `delete_volume`). Objects still alive at the last event are censored at
//! that time. Objects whose start is not in the trace are left out: volumes and workloads
//! declared in the header (a synthesized trace's initial population runs before the trace
//! starts; its lifetimes are residual, not whole), and workloads attached before a
//! `steady-state` marker (the initial population of a synthesized trace with a warm-up, or of
//! one written before workloads could be declared).

use std::collections::{HashMap, HashSet};
use std::io::BufRead;
use std::path::Path;

use trace_format::{Name, Op, TraceReader};

use crate::error::Error;
use crate::fit::Observation;

/// Reads a lifetime CSV.
pub fn read_csv(path: &Path) -> Result<Vec<Observation>, Error> {
    let file = path.display().to_string();
    let r = std::io::BufReader::new(fs_err::File::open(path)?);
    parse_csv(r, &file)
}

/// Parses lifetime CSV text from any reader; `file` names it in errors.
pub fn parse_csv(r: impl BufRead, file: &str) -> Result<Vec<Observation>, Error> {
    let bad = |line: u64, message: String| Error::Data {
        file: file.to_owned(),
        line,
        message,
    };
    let mut out = Vec::new();
    let mut columns = None;
    for (i, line) in r.lines().enumerate() {
        let n = i as u64 + 1;
        let line = line?;
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = t.split(',').map(str::trim).collect();
        let Some(cols) = columns else {
            match fields.as_slice() {
                ["lifetime_s"] => columns = Some(1),
                ["lifetime_s", "censored"] => columns = Some(2),
                _ => {
                    return Err(bad(
                        n,
                        format!(
                            "expected the header `lifetime_s` or `lifetime_s,censored`, found {t:?}"
                        ),
                    ));
                }
            }
            continue;
        };
        if fields.len() != cols {
            return Err(bad(
                n,
                format!("expected {cols} field(s), found {}", fields.len()),
            ));
        }
        let value_s = match fields[0].parse::<f64>() {
            Ok(v) => v,
            Err(_) => trace_format::units::parse_duration(fields[0])
                .map(|ns| ns as f64 / 1e9)
                .map_err(|_| {
                    bad(
                        n,
                        format!(
                            "lifetime_s: {:?} is not a number of seconds or a duration",
                            fields[0]
                        ),
                    )
                })?,
        };
        if !(value_s.is_finite() && value_s >= 0.0) {
            return Err(bad(
                n,
                format!("lifetime_s: {value_s} must be finite and ≥ 0"),
            ));
        }
        let censored = match fields.get(1).copied() {
            None | Some("false" | "0" | "no" | "") => false,
            Some("true" | "1" | "yes") => true,
            Some(other) => {
                return Err(bad(
                    n,
                    format!("censored: {other:?} is not true/false, 1/0 or yes/no"),
                ));
            }
        };
        out.push(Observation { value_s, censored });
    }
    if columns.is_none() {
        return Err(bad(
            1,
            "empty file: expected the header `lifetime_s[,censored]`".into(),
        ));
    }
    Ok(out)
}

/// Which lifetimes to take from a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Objects {
    /// `attach` → `detach` / `abort_workload`.
    #[default]
    Workloads,
    /// `create_volume` → `delete_volume`.
    Volumes,
}

/// Reads lifetimes from a trace, streaming.
pub fn read_trace(path: &Path, objects: Objects) -> Result<Vec<Observation>, Error> {
    lifetimes(TraceReader::open(path)?, objects)
}

/// Lifetimes from an open trace reader.
pub fn lifetimes(reader: TraceReader, objects: Objects) -> Result<Vec<Observation>, Error> {
    let mut alive: HashMap<Name, u64> = HashMap::new();
    let mut excluded: HashSet<Name> = HashSet::new();
    let mut out = Vec::new();
    let mut last = 0u64;
    let obs = |start: u64, end: u64, censored: bool| Observation {
        value_s: end.saturating_sub(start) as f64 / 1e9,
        censored,
    };
    for e in reader.events() {
        let e = e?;
        last = last.max(e.at);
        let (start, end): (Option<&Name>, Option<&Name>) = match (&e.op, objects) {
            (Op::Attach(a), Objects::Workloads) => (Some(&a.workload), None),
            (Op::Detach(w) | Op::AbortWorkload(w), Objects::Workloads) => (None, Some(&w.workload)),
            (Op::CreateVolume(c), Objects::Volumes) => (Some(&c.volume), None),
            (Op::DeleteVolume(v), Objects::Volumes) => (None, Some(&v.volume)),
            (Op::Marker(m), Objects::Workloads) if m.name == "steady-state" => {
                // Everything attached so far is the initial population: residual lives.
                excluded.extend(alive.drain().map(|(n, _)| n));
                (None, None)
            }
            _ => (None, None),
        };
        if let Some(n) = start {
            excluded.remove(n);
            alive.insert(n.clone(), e.at);
        }
        if let Some(n) = end {
            if let Some(t) = alive.remove(n) {
                out.push(obs(t, e.at, false));
            } else {
                excluded.remove(n);
            }
        }
    }
    let mut rest: Vec<(Name, u64)> = alive.into_iter().collect();
    rest.sort();
    out.extend(rest.into_iter().map(|(_, t)| obs(t, last, true)));
    Ok(out)
}
