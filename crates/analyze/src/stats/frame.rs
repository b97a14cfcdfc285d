//! Event records as polars DataFrames, and CSV and Parquet export.
//!
//! [`events_frame`] loads a whole run (memory grows with the run: ~100 bytes per event);
//! [`export_csv`] and [`export_parquet`] stream: they fill one frame of [`BATCH`] records at a
//! time and append it to the file (a Parquet row group per batch), so memory stays constant.
//! Columns, in order: `id`, `op`, `intended`, `dispatched`, `started`, `completed` (ns since
//! the run origin), `outcome`, `error_class` (empty/null when none), `dep_wait`, `queue`,
//! `response`, `service`, `lateness` (ns), `during_snapshot`, then one `label.KEY` column per
//! label of the run (`run --label`, the same value on every row: a file of many runs' records
//! stays attributable). Parquet is zstd-compressed;
//! `docs/analyze.md` has the build cost measured before adding it.

use std::io::Write;
use std::path::Path;

use polars::prelude::*;
use replay::Outcome;

use crate::Result;
use crate::stats::load::{Rec, Run};

/// Records per frame when streaming.
pub const BATCH: usize = 1 << 20;

/// Column buffers of one batch.
#[derive(Default)]
struct Cols {
    id: Vec<u64>,
    op: Vec<&'static str>,
    intended: Vec<u64>,
    dispatched: Vec<u64>,
    started: Vec<u64>,
    completed: Vec<u64>,
    outcome: Vec<&'static str>,
    error_class: Vec<Option<String>>,
    dep_wait: Vec<u64>,
    queue: Vec<u64>,
    response: Vec<u64>,
    service: Vec<u64>,
    lateness: Vec<u64>,
    during_snapshot: Vec<bool>,
}

impl Cols {
    fn push(&mut self, r: &Rec<'_>) {
        self.id.push(r.id);
        self.op.push(r.op.name());
        self.intended.push(r.intended);
        self.dispatched.push(r.dispatched);
        self.started.push(r.started);
        self.completed.push(r.completed);
        self.outcome.push(match r.outcome {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
        });
        self.error_class
            .push(r.error_class.as_deref().map(str::to_owned));
        self.dep_wait.push(r.dep_wait);
        self.queue.push(r.queue);
        self.response.push(r.response);
        self.service.push(r.service);
        self.lateness.push(r.lateness);
        self.during_snapshot.push(r.during_snapshot);
    }

    fn len(&self) -> usize {
        self.id.len()
    }

    fn take(&mut self, labels: &replay::Labels) -> Result<DataFrame> {
        let c = std::mem::take(self);
        let n = c.len();
        let mut cols = vec![
            Column::new("id".into(), c.id),
            Column::new("op".into(), c.op),
            Column::new("intended".into(), c.intended),
            Column::new("dispatched".into(), c.dispatched),
            Column::new("started".into(), c.started),
            Column::new("completed".into(), c.completed),
            Column::new("outcome".into(), c.outcome),
            Column::new("error_class".into(), c.error_class),
            Column::new("dep_wait".into(), c.dep_wait),
            Column::new("queue".into(), c.queue),
            Column::new("response".into(), c.response),
            Column::new("service".into(), c.service),
            Column::new("lateness".into(), c.lateness),
            Column::new("during_snapshot".into(), c.during_snapshot),
        ];
        for (k, v) in labels {
            cols.push(Column::new(
                format!("label.{k}").into(),
                vec![v.as_str(); n],
            ));
        }
        Ok(DataFrame::new(n, cols)?)
    }
}

/// All records of a run as one DataFrame, in file (completion) order.
pub fn events_frame(run: &Run) -> Result<DataFrame> {
    let mut cols = Cols::default();
    run.for_each(|r| {
        cols.push(r);
        Ok(())
    })?;
    cols.take(&run.manifest.labels)
}

/// Feeds every record of a run to `sink` as frames of at most [`BATCH`] records (at least
/// one frame, empty for an empty run). Returns the number of records.
fn batches(run: &Run, mut sink: impl FnMut(DataFrame) -> Result<()>) -> Result<u64> {
    let mut cols = Cols::default();
    let (mut n, mut frames) = (0u64, 0u64);
    run.for_each(|r| {
        cols.push(r);
        n += 1;
        if cols.len() >= BATCH {
            frames += 1;
            sink(cols.take(&run.manifest.labels)?)?;
        }
        Ok(())
    })?;
    if cols.len() > 0 || frames == 0 {
        sink(cols.take(&run.manifest.labels)?)?;
    }
    Ok(n)
}

/// Writes every record of a run to `out` as CSV with a header, one frame of [`BATCH`] records
/// at a time. Returns the number of records written.
pub fn export_csv(run: &Run, out: &mut dyn Write) -> Result<u64> {
    let mut header = true;
    batches(run, |mut df| {
        CsvWriter::new(&mut *out)
            .include_header(header)
            .finish(&mut df)?;
        header = false;
        Ok(())
    })
}

/// Writes every record of a run to `out` as Parquet (zstd), one row group per frame of
/// [`BATCH`] records. Returns the number of records written.
pub fn export_parquet<W: Write>(run: &Run, out: W) -> Result<u64> {
    let schema = Cols::default()
        .take(&run.manifest.labels)?
        .schema()
        .as_ref()
        .clone();
    let mut writer = ParquetWriter::new(out)
        .with_compression(ParquetCompression::Zstd(None))
        .batched(&schema)?;
    let n = batches(run, |df| Ok(writer.write_batch(&df)?))?;
    writer.finish()?;
    Ok(n)
}

/// Writes `path` through a temporary name, renamed when `write` succeeded.
fn atomically(path: &Path, write: impl FnOnce(&mut dyn Write) -> Result<u64>) -> Result<u64> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    let mut w = std::io::BufWriter::new(fs_err::File::create(&tmp)?);
    let n = write(&mut w)?;
    w.flush()?;
    drop(w);
    fs_err::rename(&tmp, path)?;
    Ok(n)
}

/// Exports a run directory's records to a CSV file (written to a temporary name, renamed
/// when complete).
pub fn export_csv_file(run_dir: &Path, path: &Path) -> Result<u64> {
    let run = Run::open(run_dir)?;
    run.check_records("export")?;
    atomically(path, |w| export_csv(&run, w))
}

/// Exports a run directory's records to a Parquet file (written to a temporary name, renamed
/// when complete).
pub fn export_parquet_file(run_dir: &Path, path: &Path) -> Result<u64> {
    let run = Run::open(run_dir)?;
    run.check_records("export")?;
    atomically(path, |w| export_parquet(&run, w))
}
