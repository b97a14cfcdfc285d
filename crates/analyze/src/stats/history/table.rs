//! Per-run values as a table (CSV or Parquet): what `analyze summary --csv|--parquet` writes and
//! `analyze history` reads, so that results kept outside run directories (object storage, a
//! results repository, a spreadsheet) still make a history.
//!
//! Long format, one row per run × op type × metric: `run` (the directory), `run_id`,
//! `started` (RFC 3339), `trace_sha256`, `op`, `metric` (`p50`, `p99`, `p99.9`, `mean`,
//! `error_rate`), `value` (ns, or the failed fraction), `events`, `tool` (the tool's error bound
//! of the value in ns, docs/replay.md; empty where the run measured none), `imprecise` (true
//! where the run's verdict calls the row's op type imprecise: a history leaves it out), then
//! `label.KEY` per label (empty where a run lacks it). `tool` and `imprecise` are optional
//! when read (tables exported before them). Tables of several exports are read together; the
//! rows of one `run_id` must agree on its start, trace and labels. A bad cell is an error naming the
//! file, the row (1-based, the header not counted) and the column.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use polars::prelude::*;

use super::RunPoint;
use crate::stats::compare::{Metric, RunValue};
use crate::{Error, Result};

const FIXED: [&str; 8] = [
    "run",
    "run_id",
    "started",
    "trace_sha256",
    "op",
    "metric",
    "value",
    "events",
];

/// The rows of `points` as one frame.
pub fn frame(points: &[RunPoint]) -> Result<DataFrame> {
    let keys: std::collections::BTreeSet<&String> =
        points.iter().flat_map(|p| p.labels.keys()).collect();
    let mut text: [Vec<&str>; 6] = Default::default();
    let (mut value, mut events) = (Vec::new(), Vec::new());
    let (mut tool, mut imprecise): (Vec<Option<u64>>, Vec<bool>) = (Vec::new(), Vec::new());
    let mut labels: Vec<Vec<Option<&str>>> = vec![Vec::new(); keys.len()];
    for p in points {
        for ((op, metric), v) in &p.values {
            for (col, s) in text.iter_mut().zip([
                p.source.as_str(),
                &p.run_id,
                &p.started,
                &p.trace_sha256,
                op,
                metric.name(),
            ]) {
                col.push(s);
            }
            value.push(v.value);
            events.push(v.events);
            tool.push(p.tool.get(&(op.clone(), *metric)).copied());
            imprecise.push(p.imprecise.contains(op));
            for (col, k) in labels.iter_mut().zip(&keys) {
                col.push(p.labels.get(*k).map(String::as_str));
            }
        }
    }
    let n = value.len();
    let mut cols: Vec<Column> = FIXED[..6]
        .iter()
        .zip(text)
        .map(|(name, v)| Column::new((*name).into(), v))
        .collect();
    cols.push(Column::new("value".into(), value));
    cols.push(Column::new("events".into(), events));
    cols.push(Column::new("tool".into(), tool));
    cols.push(Column::new("imprecise".into(), imprecise));
    for (k, v) in keys.iter().zip(labels) {
        cols.push(Column::new(format!("label.{k}").into(), v));
    }
    Ok(DataFrame::new(n, cols)?)
}

/// Writes `points` as CSV with a header; returns the rows written.
pub fn write_csv(points: &[RunPoint], out: &mut dyn Write) -> Result<u64> {
    let mut df = frame(points)?;
    CsvWriter::new(out).include_header(true).finish(&mut df)?;
    Ok(df.height() as u64)
}

/// Writes `points` as Parquet (zstd); returns the rows written.
pub fn write_parquet<W: Write>(points: &[RunPoint], out: W) -> Result<u64> {
    let mut df = frame(points)?;
    ParquetWriter::new(out)
        .with_compression(ParquetCompression::Zstd(None))
        .finish(&mut df)?;
    Ok(df.height() as u64)
}

/// A whole number ≥ 0, also as a float without a fraction (a spreadsheet's `12.0`).
fn count(t: &str) -> Option<u64> {
    t.parse::<u64>().ok().or_else(|| {
        t.parse::<f64>()
            .ok()
            .filter(|f| f.is_finite() && *f >= 0.0 && f.fract() == 0.0)
            .map(|f| f as u64)
    })
}

/// Reads a table written by [`write_csv`] or [`write_parquet`] (by its extension), or several
/// concatenated with the same columns.
pub fn read(path: &Path) -> Result<Vec<RunPoint>> {
    let bad = |message: String| Error::Config {
        file: path.to_owned(),
        message,
    };
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let df = match ext.as_deref() {
        Some("csv") => CsvReadOptions::default()
            .with_has_header(true)
            .with_infer_schema_length(Some(0))
            .try_into_reader_with_file_path(Some(path.to_owned()))
            .and_then(|r| r.finish()),
        Some("parquet") => {
            let f = fs_err::File::open(path)?;
            ParquetReader::new(f.into_parts().0).finish()
        }
        _ => {
            return Err(bad(
                "not a run directory, nor a .csv or .parquet table of exported values \
                 (`analyze summary --csv|--parquet`)"
                    .into(),
            ));
        }
    }
    .map_err(|e| bad(format!("not a readable table: {e}")))?;
    let names: Vec<String> = df
        .get_column_names()
        .iter()
        .map(|s| s.to_string())
        .collect();
    for c in FIXED {
        if !names.iter().any(|n| n == c) {
            return Err(bad(format!(
                "no column {c:?} (columns: {}): not a table of exported values",
                names.join(", ")
            )));
        }
    }
    let strings = |name: &str| -> Result<Vec<Option<String>>> {
        let s = df
            .column(name)?
            .as_materialized_series()
            .cast(&DataType::String)?;
        Ok(s.str()?.iter().map(|v| v.map(str::to_owned)).collect())
    };
    let fixed: Vec<Vec<Option<String>>> =
        FIXED.iter().map(|c| strings(c)).collect::<Result<_>>()?;
    let optional = |name: &str| -> Result<Option<Vec<Option<String>>>> {
        names
            .iter()
            .any(|n| n == name)
            .then(|| strings(name))
            .transpose()
    };
    let (tool_col, imprecise_col) = (optional("tool")?, optional("imprecise")?);
    let label_cols: Vec<(String, Vec<Option<String>>)> = names
        .iter()
        .filter_map(|n| n.strip_prefix("label.").map(|k| (k.to_owned(), n)))
        .map(|(k, n)| Ok((k, strings(n)?)))
        .collect::<Result<_>>()?;
    let mut runs: BTreeMap<String, RunPoint> = BTreeMap::new();
    for row in 0..df.height() {
        let cell = |c: usize| -> Result<&str> {
            fixed[c][row]
                .as_deref()
                .filter(|s| !s.is_empty())
                .ok_or_else(|| bad(format!("row {}, column {}: empty", row + 1, FIXED[c])))
        };
        let metric = Metric::ALL
            .into_iter()
            .find(|m| m.name() == cell(5).unwrap_or_default())
            .ok_or_else(|| {
                bad(format!(
                    "row {}, column metric: {:?} is not p50, p99, p99.9, mean or error_rate",
                    row + 1,
                    fixed[5][row].as_deref().unwrap_or("")
                ))
            })?;
        let value: f64 = cell(6)?
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| {
                bad(format!(
                    "row {}, column value: {:?} is not a number ≥ 0",
                    row + 1,
                    fixed[6][row]
                ))
            })?;
        let events: u64 = {
            let t = cell(7)?;
            count(t).ok_or_else(|| {
                bad(format!(
                    "row {}, column events: {t:?} is not a count",
                    row + 1
                ))
            })?
        };
        let mut labels = BTreeMap::new();
        for (k, col) in &label_cols {
            if let Some(v) = col[row].as_deref().filter(|v| !v.is_empty()) {
                replay::rundir::check_label(k, v)
                    .map_err(|m| bad(format!("row {}, column label.{k}: {m}", row + 1)))?;
                labels.insert(k.clone(), v.to_owned());
            }
        }
        let (run, run_id, started, sha, op) = (cell(0)?, cell(1)?, cell(2)?, cell(3)?, cell(4)?);
        let p = runs.entry(run_id.to_owned()).or_insert_with(|| RunPoint {
            source: format!("{}: {run}", path.display()),
            run_id: run_id.to_owned(),
            started: started.to_owned(),
            trace_sha256: sha.to_owned(),
            labels: labels.clone(),
            values: BTreeMap::new(),
            tool: BTreeMap::new(),
            imprecise: std::collections::BTreeSet::new(),
        });
        if p.started != started || p.trace_sha256 != sha || p.labels != labels {
            return Err(bad(format!(
                "row {}: run {run_id} has another start, trace or labels than its earlier \
                 rows: the table mixes two runs under one id",
                row + 1
            )));
        }
        if p.values
            .insert((op.to_owned(), metric), RunValue { value, events })
            .is_some()
        {
            return Err(bad(format!(
                "row {}: run {run_id} has {op} {} twice",
                row + 1,
                metric.name()
            )));
        }
        if let Some(t) = tool_col
            .as_ref()
            .and_then(|c| c[row].as_deref())
            .filter(|t| !t.is_empty())
        {
            let ns = count(t).ok_or_else(|| {
                bad(format!(
                    "row {}, column tool: {t:?} is not a bound in ns (a whole number ≥ 0, or \
                     empty)",
                    row + 1
                ))
            })?;
            p.tool.insert((op.to_owned(), metric), ns);
        }
        match imprecise_col
            .as_ref()
            .and_then(|c| c[row].as_deref())
            .unwrap_or("")
        {
            "true" => {
                p.imprecise.insert(op.to_owned());
            }
            "false" | "" => {}
            other => {
                return Err(bad(format!(
                    "row {}, column imprecise: {other:?} is not true or false",
                    row + 1
                )));
            }
        }
    }
    if runs.is_empty() {
        return Err(bad("no rows".into()));
    }
    Ok(runs.into_values().collect())
}
