//! Event records as polars DataFrames, and CSV export.
//!
//! [`events_frame`] loads a whole run (memory grows with the run: ~100 bytes per event);
//! [`export_csv`] streams: it fills one frame of [`BATCH`] records at a time and appends it to
//! the CSV, so memory stays constant. Columns, in order: `id`, `op`, `intended`, `dispatched`,
//! `started`, `completed` (ns since the run origin), `outcome`, `error_class` (empty when
//! none), `dep_wait`, `queue`, `response`, `service`, `lateness` (ns), `during_snapshot`.
//! Parquet is not offered: see `docs/analyze.md` for the build-cost measurement behind that.

use std::io::Write;
use std::path::Path;

use polars::prelude::*;
use replay::Outcome;

use crate::Result;
use crate::load::{Rec, Run};

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

    fn take(&mut self) -> Result<DataFrame> {
        let c = std::mem::take(self);
        let n = c.len();
        let cols = vec![
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
    cols.take()
}

/// Writes every record of a run to `out` as CSV with a header, one frame of [`BATCH`] records
/// at a time. Returns the number of records written.
pub fn export_csv(run: &Run, out: &mut dyn Write) -> Result<u64> {
    let mut cols = Cols::default();
    let mut header = true;
    let mut n = 0u64;
    run.for_each(|r| {
        cols.push(r);
        n += 1;
        if cols.len() >= BATCH {
            write_batch(&mut cols, &mut header, &mut *out)?;
        }
        Ok(())
    })?;
    if cols.len() > 0 || header {
        write_batch(&mut cols, &mut header, out)?;
    }
    Ok(n)
}

fn write_batch(cols: &mut Cols, header: &mut bool, out: &mut dyn Write) -> Result<()> {
    let mut df = cols.take()?;
    CsvWriter::new(out)
        .include_header(*header)
        .finish(&mut df)?;
    *header = false;
    Ok(())
}

/// Exports a run directory's records to a CSV file (written to a temporary name, renamed
/// when complete).
pub fn export_csv_file(run_dir: &Path, path: &Path) -> Result<u64> {
    let run = Run::open(run_dir)?;
    let tmp = path.with_extension("csv.tmp");
    let mut w = std::io::BufWriter::new(fs_err::File::create(&tmp)?);
    let n = export_csv(&run, &mut w)?;
    w.flush()?;
    drop(w);
    fs_err::rename(&tmp, path)?;
    Ok(n)
}
