//! Opening a run directory and scanning `events.jsonl`.
//!
//! The scan reads the file in 16 MiB blocks, cuts each block at line ends into one part per
//! thread, and parses the parts in parallel into per-thread accumulators that are merged at
//! the end; accumulators must therefore not depend on record order (histograms, counters,
//! time buckets). Records are parsed borrowed ([`Rec`]), skipping phases and error messages.
//! A torn last line (a crash mid-write; no final newline) is ignored, as `docs/run-dir.md`
//! allows; any other malformed line is an error naming file, line and field.

use std::borrow::Cow;
use std::io::Read;
use std::path::{Path, PathBuf};

use replay::{CompletionState, Manifest, Outcome, RunDir, Validity, Verdict};
use serde::Deserialize;
use trace_format::OpType;

use crate::{Error, Result};

/// One event record as analysis reads it (`events.jsonl`; phases and messages skipped).
#[derive(Debug, Clone, Deserialize)]
pub struct Rec<'a> {
    /// Trace event id.
    pub id: u64,
    /// Operation type.
    pub op: OpType,
    /// Intended instant, ns since the run origin.
    pub intended: u64,
    /// Dispatch instant.
    pub dispatched: u64,
    /// Provider call start.
    pub started: u64,
    /// Completion.
    pub completed: u64,
    /// Outcome.
    pub outcome: Outcome,
    /// Error class of a failure.
    #[serde(default, borrow)]
    pub error_class: Option<Cow<'a, str>>,
    /// Dependency wait, ns.
    #[serde(default)]
    pub dep_wait: u64,
    /// Queue time, ns.
    #[serde(default)]
    pub queue: u64,
    /// completed − intended.
    pub response: u64,
    /// completed − started.
    pub service: u64,
    /// dispatched − intended.
    pub lateness: u64,
    /// A snapshot was in flight while this I/O ran.
    #[serde(default)]
    pub during_snapshot: bool,
}

/// Something a scan feeds records into; must not depend on record order.
pub trait Accumulator: Send {
    /// Adds one record.
    fn add(&mut self, r: &Rec<'_>);
    /// Merges another accumulator of the same scan.
    fn merge(&mut self, other: Self);
}

/// An opened run directory.
#[derive(Debug, Clone)]
pub struct Run {
    /// The directory.
    pub path: PathBuf,
    /// Its manifest.
    pub manifest: Manifest,
    /// The run's verdict from `summary.json` (a merged run's: its worst part's, from the
    /// manifest); `None` when there is no readable summary (a crashed run) or it predates
    /// verdicts.
    pub validity: Option<Validity>,
}

const BLOCK: usize = 16 << 20;

impl Run {
    /// Opens a run directory (reads `manifest.json`).
    pub fn open(path: &Path) -> Result<Self> {
        let manifest = RunDir::open(path)
            .manifest()
            .map_err(|source| Error::NotARun {
                path: path.to_owned(),
                source,
            })?;
        // A merged run has no summary: it is held to its worst part's verdict.
        let validity = RunDir::open(path)
            .summary()
            .ok()
            .and_then(|s| s.validity)
            .or_else(|| manifest.merged.as_ref().and_then(|m| m.validity.clone()));
        Ok(Self {
            path: path.to_owned(),
            manifest,
            validity,
        })
    }

    /// Opens a run directory for an analysis that draws conclusions from it (compare,
    /// capacity, QoS, the report): unless `allow_invalid`, a run that did not finish
    /// (manifest not `complete`) or whose verdict is not `valid` is refused with the
    /// verdict and its evidence. A complete run without a verdict (written before verdicts
    /// existed) is admitted.
    pub fn open_for_analysis(path: &Path, allow_invalid: bool) -> Result<Self> {
        let run = Self::open(path)?;
        if !allow_invalid {
            run.check_valid()?;
        }
        Ok(run)
    }

    /// The run's clock origin, ns since the epoch: what every offset in the run counts from.
    /// Runs from before the manifest recorded it have only `started` (earlier by the run's
    /// preparation).
    pub fn origin_ns(&self) -> i128 {
        self.manifest
            .origin
            .unwrap_or(self.manifest.started)
            .as_nanosecond()
    }

    /// The op types a `partly-valid` or `imprecise` run's verdict calls imprecise and gives
    /// no size for (no tool bound measured: judged by the lateness limits alone; or runs from
    /// before the bounds, whose verdict said `engine-bound`), with the evidence: `io_phase
    /// I/O` for the I/O of its `io_phase` units. Their numbers cannot be weighed against the
    /// tool's error, so an analysis leaves them out and says so; an imprecise op type with a
    /// bound is weighed by it instead (`compare`). Empty for any other verdict.
    pub fn unsized_ops(&self) -> Vec<(String, String)> {
        match &self.validity {
            Some(v) if matches!(v.verdict, Verdict::PartlyValid | Verdict::Imprecise) => v
                .imprecise_ops()
                .filter(|o| o.tool_ratio.is_none())
                .map(|o| (o.op.clone(), o.evidence.clone()))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// `Err(Error::InvalidRun)` when the run did not finish, every operation failed, or the
    /// engine did not keep the schedule (`engine-bound`: the load offered was not the
    /// trace's, which no bound on a latency makes up for). `not-judged`, `partly-valid` and
    /// `imprecise` are admitted: their numbers carry their tool bounds ([`Run::unsized_ops`]).
    pub fn check_valid(&self) -> Result<()> {
        let refuse = |verdict: &str, evidence: String| {
            Err(Error::InvalidRun {
                path: self.path.clone(),
                verdict: verdict.to_owned(),
                evidence,
            })
        };
        if self.manifest.state != CompletionState::Complete {
            let state = self.manifest.state;
            return refuse(
                Verdict::Incomplete.name(),
                match &self.manifest.reason {
                    Some(r) => format!("the run is {state} ({r})"),
                    None => format!("the run is {state}"),
                },
            );
        }
        match &self.validity {
            // `not-judged`: too few events to tell; nothing says the engine limited the run.
            Some(v)
                if !matches!(
                    v.verdict,
                    Verdict::Valid | Verdict::NotJudged | Verdict::PartlyValid | Verdict::Imprecise
                ) =>
            {
                refuse(v.verdict.name(), v.evidence())
            }
            _ => Ok(()),
        }
    }

    /// Requests replayed through per-volume I/O streams (`summary.json` `io_streams`): they
    /// have no record in `events.jsonl` (0 without a readable summary).
    pub fn streamed_requests(&self) -> u64 {
        RunDir::open(&self.path)
            .summary()
            .map_or(0, |s| s.io_streams.iter().map(|f| f.requests).sum::<u64>())
    }

    /// Whether `events.jsonl` holds no record (absent, empty or blank).
    pub fn has_no_records(&self) -> Result<bool> {
        use std::io::BufRead;
        let path = self.events_path();
        if !path.exists() {
            return Ok(true);
        }
        for line in std::io::BufReader::new(fs_err::File::open(&path)?).lines() {
            if !line?.trim().is_empty() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// `Err(Error::NoRecords)` when the run's requests went through streams and
    /// `events.jsonl` has no record, so `what` has nothing to work on.
    pub fn check_records(&self, what: &'static str) -> Result<()> {
        let streamed = self.streamed_requests();
        if streamed > 0 && self.has_no_records()? {
            return Err(Error::NoRecords {
                path: self.path.clone(),
                what,
                streamed,
            });
        }
        Ok(())
    }

    /// `events.jsonl`.
    pub fn events_path(&self) -> PathBuf {
        self.path.join("events.jsonl")
    }

    /// The replay speed (manifest `options.speed`, 1 when absent).
    pub fn speed(&self) -> f64 {
        self.manifest.options["speed"].as_f64().unwrap_or(1.0)
    }

    /// The trace this run replayed, if it is still where the manifest says (as given, or
    /// relative to the run directory's parent) with the same SHA-256.
    pub fn trace_path(&self) -> Option<PathBuf> {
        let given = PathBuf::from(&self.manifest.trace.path);
        let mut candidates = vec![given.clone()];
        if given.is_relative()
            && let Some(parent) = self.path.parent()
        {
            candidates.push(parent.join(&given));
        }
        candidates.into_iter().find(|p| {
            p.is_file()
                && replay::rundir::sha256_file(p).is_ok_and(|h| h == self.manifest.trace.sha256)
        })
    }

    /// Scans `events.jsonl` into accumulators made by `make`, one per thread, merged.
    pub fn scan<A: Accumulator>(&self, make: impl Fn() -> A + Sync) -> Result<A> {
        scan_file(&self.events_path(), make)
    }

    /// Calls `f` on every record in file (completion) order, on this thread.
    pub fn for_each(&self, mut f: impl FnMut(&Rec<'_>) -> Result<()>) -> Result<()> {
        let path = self.events_path();
        let mut file = fs_err::File::open(&path)?;
        let mut buf = Vec::with_capacity(BLOCK);
        let mut line_no = 0u64;
        loop {
            let (eof, end) = fill(&mut file, &mut buf)?;
            for line in buf[..end].split_inclusive(|&b| b == b'\n') {
                line_no += 1;
                if let Some(r) = parse_line(line, &path, line_no)? {
                    f(&r)?;
                }
            }
            buf.drain(..end);
            if eof {
                return Ok(());
            }
        }
    }
}

/// Reads until `buf` holds a block or the file ends. Returns whether it ended, and where the
/// complete lines end (all of `buf` at the end of the file: a torn last line is skipped later).
fn fill(file: &mut fs_err::File, buf: &mut Vec<u8>) -> Result<(bool, usize)> {
    let want = BLOCK.max(buf.len() + (1 << 20));
    let mut filled = buf.len();
    buf.resize(want, 0);
    let mut eof = false;
    while filled < want {
        let n = file.read(&mut buf[filled..])?;
        if n == 0 {
            eof = true;
            break;
        }
        filled += n;
    }
    buf.truncate(filled);
    let end = if eof {
        buf.len()
    } else {
        buf.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1)
    };
    Ok((eof, end))
}

/// Parses one line; `None` for a blank line or a torn last line (no `\n`).
fn parse_line<'a>(line: &'a [u8], path: &Path, line_no: u64) -> Result<Option<Rec<'a>>> {
    let Some(body) = line.strip_suffix(b"\n") else {
        return Ok(None);
    };
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    parse_rec(&mut de).map(Some).map_err(|e| Error::Record {
        file: path.to_owned(),
        line: line_no,
        message: e.to_string(),
    })
}

fn parse_rec<'a>(
    de: &mut serde_json::Deserializer<serde_json::de::SliceRead<'a>>,
) -> std::result::Result<Rec<'a>, serde_json::Error> {
    let r = Rec::deserialize(&mut *de)?;
    de.end()?;
    Ok(r)
}

/// Parses a part of a block into `acc`; returns its line count or the first error.
fn parse_part<A: Accumulator>(
    part: &[u8],
    acc: &mut A,
    path: &Path,
    first_line: u64,
) -> Result<u64> {
    let mut n = 0;
    for line in part.split_inclusive(|&b| b == b'\n') {
        n += 1;
        if let Some(r) = parse_line(line, path, first_line + n)? {
            acc.add(&r);
        }
    }
    Ok(n)
}

/// Cuts `block` into `k` parts at line ends.
fn cut(block: &[u8], k: usize) -> Vec<&[u8]> {
    let mut parts = Vec::with_capacity(k);
    let mut rest = block;
    for i in (1..k).rev() {
        let target = rest.len() / (i + 1);
        let at = rest[target..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(rest.len(), |p| target + p + 1);
        let (a, b) = rest.split_at(at);
        parts.push(a);
        rest = b;
    }
    parts.push(rest);
    parts
}

/// A run's per-event files `RUN/DIR/<event id>SUFFIX` (`io/7.cut.json`, `cbt/8.json`), by
/// event id; none when the directory does not exist.
pub(crate) fn event_files(run: &Path, dir: &str, suffix: &str) -> Result<Vec<(u64, PathBuf)>> {
    let dir = run.join(dir);
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for e in fs_err::read_dir(&dir)? {
        let p = e?.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if let Some(id) = name.strip_suffix(suffix).and_then(|s| s.parse().ok()) {
            out.push((id, p));
        }
    }
    out.sort();
    Ok(out)
}

/// Scans a JSON Lines file of records (see [`Run::scan`]).
pub fn scan_file<A: Accumulator>(path: &Path, make: impl Fn() -> A + Sync) -> Result<A> {
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .clamp(1, 4);
    let mut accs: Vec<A> = (0..threads).map(|_| make()).collect();
    let mut file = fs_err::File::open(path)?;
    let mut buf = Vec::with_capacity(BLOCK);
    let mut line_base = 0u64;
    loop {
        let (eof, end) = fill(&mut file, &mut buf)?;
        let parts = cut(&buf[..end], threads);
        let counts: Vec<u64> = parts
            .iter()
            .map(|p| p.iter().filter(|&&b| b == b'\n').count() as u64)
            .collect();
        let results: Vec<Result<u64>> = std::thread::scope(|s| {
            let mut base = line_base;
            let handles: Vec<_> = parts
                .iter()
                .zip(accs.iter_mut())
                .zip(&counts)
                .map(|((part, acc), &c)| {
                    let first = base;
                    base += c;
                    s.spawn(move || parse_part(part, acc, path, first))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(Error::Invalid("scan thread panicked".into())))
                })
                .collect()
        });
        for r in results {
            r?;
        }
        line_base += counts.iter().sum::<u64>();
        buf.drain(..end);
        if eof {
            break;
        }
    }
    let mut it = accs.into_iter();
    let mut first = it.next().unwrap_or_else(&make);
    for a in it {
        first.merge(a);
    }
    Ok(first)
}
