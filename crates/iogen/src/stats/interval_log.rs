//! The HdrHistogram V2 interval log (the format Java's `HistogramLogProcessor` reads): the
//! interval histograms a phase writes as its workers send them, and whole [`Histograms`]
//! carried between processes with one tag per kind and metric (`read.response`, …).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, SystemTime};

use super::{Histograms, IntervalMsg, KINDS, METRICS, kind_name};
use crate::Error;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::interval_log::{
    IntervalLogIterator, IntervalLogWriterBuilder, LogEntry, Tag,
};
use hdrhistogram::serialization::{Deserializer, V2DeflateSerializer};

/// Writes interval histograms as they arrive from `jobs` workers, one line per kind and
/// metric and interval, merging the workers' histograms of the same interval.
pub(crate) struct IntervalLog {
    out: Vec<u8>,
    file: fs_err::File,
    jobs: usize,
    period: Duration,
    /// Interval index → merged histograms, workers heard from, latest partial end (ns).
    pending: BTreeMap<u64, (Histograms, usize, Option<u64>)>,
    serializer: V2DeflateSerializer,
    header_done: bool,
    start: SystemTime,
}

impl IntervalLog {
    pub(crate) fn create(path: &Path, jobs: usize, period: Duration) -> Result<Self, Error> {
        Ok(IntervalLog {
            out: Vec::new(),
            file: fs_err::File::create(path)?,
            jobs,
            period,
            pending: BTreeMap::new(),
            serializer: V2DeflateSerializer::new(),
            header_done: false,
            start: SystemTime::now(),
        })
    }

    pub(crate) fn add(&mut self, msg: &IntervalMsg) -> Result<(), Error> {
        // The StartTime is the jobs' base on the wall clock (they share one base), not the
        // instant this file was created: interval starts are offsets from that base.
        if !self.header_done
            && let Some(w) = msg.base_wall
        {
            self.start = w;
        }
        let e = self.pending.entry(msg.index).or_default();
        e.0.merge(&msg.hists)?;
        e.1 += 1;
        e.2 = e.2.max(msg.end);
        while let Some(entry) = self.pending.first_entry() {
            if entry.get().1 < self.jobs {
                break;
            }
            let (index, (h, _, end)) = entry.remove_entry();
            self.write_interval(index, &h, end)?;
        }
        Ok(())
    }

    /// Writes interval `index`: a whole period, or up to `end` (ns from the base) for a
    /// last, partial one.
    fn write_interval(
        &mut self,
        index: u64,
        h: &Histograms,
        end: Option<u64>,
    ) -> Result<(), Error> {
        let start = self.period * u32::try_from(index).unwrap_or(u32::MAX);
        let len = end.map_or(self.period, |e| {
            Duration::from_nanos(e)
                .saturating_sub(start)
                .clamp(Duration::from_micros(1), self.period)
        });
        write_log_entries(
            &mut self.out,
            &mut self.serializer,
            !self.header_done,
            self.start,
            h,
            start,
            len,
        )?;
        self.header_done = true;
        self.file.write_all(&self.out)?;
        self.out.clear();
        Ok(())
    }

    pub(crate) fn finish(mut self) -> Result<(), Error> {
        for (index, (h, _, end)) in std::mem::take(&mut self.pending) {
            self.write_interval(index, &h, end)?;
        }
        if !self.header_done {
            write_log_entries(
                &mut self.out,
                &mut self.serializer,
                true,
                self.start,
                &Histograms::new(),
                Duration::ZERO,
                self.period,
            )?;
            self.file.write_all(&self.out)?;
        }
        self.file.flush()?;
        Ok(())
    }
}

fn write_log_entries(
    out: &mut Vec<u8>,
    ser: &mut V2DeflateSerializer,
    header: bool,
    start_time: SystemTime,
    h: &Histograms,
    start: Duration,
    len: Duration,
) -> Result<(), Error> {
    let mut b = IntervalLogWriterBuilder::new();
    if header {
        b.add_comment("iogen interval log: values in nanoseconds; tags are <kind>.<metric>");
        b.with_start_time(start_time);
    }
    let mut w = b.begin_log_with(out, ser)?;
    if header {
        w.write_comment("\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"")?;
    }
    for (k, kh) in h.iter() {
        for (i, m) in METRICS.iter().enumerate() {
            let tag = format!("{}.{m}", kind_name(k));
            w.write_histogram(kh.metric(i), start, len, Tag::new(&tag))
                .map_err(|e| Error::Histogram(format!("writing interval log: {e}")))?;
        }
    }
    Ok(())
}

/// Writes histograms to a file as a one-interval HdrHistogram log (mergeable across runs
/// and pods with [`read_histograms`] and [`Histograms::merge`]).
pub fn write_histograms(path: &Path, h: &Histograms) -> Result<(), Error> {
    let mut out = Vec::new();
    write_log_entries(
        &mut out,
        &mut V2DeflateSerializer::new(),
        true,
        SystemTime::now(),
        h,
        Duration::ZERO,
        Duration::from_secs(1),
    )?;
    fs_err::write(path, out)?;
    Ok(())
}

/// The histograms as the text of a one-interval HdrHistogram log (what
/// [`write_histograms`] writes), for sending them inside another message.
pub fn histograms_to_log(h: &Histograms) -> Result<String, Error> {
    let mut out = Vec::new();
    write_log_entries(
        &mut out,
        &mut V2DeflateSerializer::new(),
        false,
        SystemTime::now(),
        h,
        Duration::ZERO,
        Duration::from_secs(1),
    )?;
    String::from_utf8(out).map_err(|e| Error::Histogram(format!("histogram log: {e}")))
}

/// Parses an iogen histogram or interval log's text, summing all intervals of each tag.
pub fn parse_histograms(bytes: &[u8]) -> Result<Histograms, Error> {
    parse_log(bytes).map_err(Error::Histogram)
}

/// Reads an iogen histogram or interval log, summing all intervals of each tag.
pub fn read_histograms(path: &Path) -> Result<Histograms, Error> {
    let bytes = fs_err::read(path)?;
    parse_log(&bytes).map_err(|reason| Error::Histogram(format!("{}: {reason}", path.display())))
}

/// The `#[StartTime]` of an iogen interval log (`bytes`): its base (time 0 of the interval
/// timestamps) on the wall clock of the machine that wrote it, ns since the Unix epoch, with
/// the millisecond precision of the format. `None` without one.
pub fn log_start_time(bytes: &[u8]) -> Option<i128> {
    IntervalLogIterator::new(bytes).find_map(|e| match e {
        Ok(LogEntry::StartTime(d)) => Some(d.as_nanos() as i128),
        _ => None,
    })
}

/// The response histograms of the interval lines in `chunk`, a run of complete lines of an
/// iogen interval log read while it is written (header lines are skipped; no header is
/// needed): `(kind, histogram)` per interval line, `kind` from its tag `<kind>.response`.
/// For live metrics of I/O still running; the whole log is read by [`split_responses`].
pub fn interval_responses(chunk: &[u8]) -> Result<Vec<(String, Histogram<u64>)>, Error> {
    Ok(response_intervals(chunk)?
        .into_iter()
        .map(|iv| (iv.kind, iv.hist))
        .collect())
}

/// One response interval of an interval log.
struct ResponseInterval {
    kind: String,
    /// Start, seconds from the log's own start.
    start: f64,
    /// Length, seconds.
    len: f64,
    hist: Histogram<u64>,
}

/// Every response interval of an interval log, in order.
fn response_intervals(bytes: &[u8]) -> Result<Vec<ResponseInterval>, Error> {
    let bad = |reason: String| Error::Histogram(format!("interval log: {reason}"));
    let mut de = Deserializer::new();
    let mut out = Vec::new();
    for (n, entry) in IntervalLogIterator::new(bytes).enumerate() {
        let entry = entry.map_err(|e| bad(format!("log entry {}: {e:?}", n + 1)))?;
        let LogEntry::Interval(iv) = entry else {
            continue;
        };
        let Some(kind) = iv.tag().and_then(|t| t.as_str().strip_suffix(".response")) else {
            continue;
        };
        let raw = base64_decode(iv.encoded_histogram())
            .ok_or_else(|| bad(format!("log entry {}: bad base64", n + 1)))?;
        let h: Histogram<u64> = de
            .deserialize(&mut raw.as_slice())
            .map_err(|e| bad(format!("log entry {}: {e:?}", n + 1)))?;
        out.push(ResponseInterval {
            kind: kind.to_owned(),
            start: iv.start_timestamp().as_secs_f64(),
            len: iv.duration().as_secs_f64(),
            hist: h,
        });
    }
    Ok(out)
}

/// Decodes an interval log as it is written, from chunks of any size (a file's new bytes, a
/// pod log's lines): [`IntervalFeed::push`] returns the response histograms of the lines it
/// completed and keeps a trailing partial line for the next chunk.
#[derive(Debug, Default)]
pub struct IntervalFeed {
    partial: Vec<u8>,
}

impl IntervalFeed {
    /// Adds `chunk`; returns `(kind, histogram)` of each interval line it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<(String, Histogram<u64>)>, Error> {
        self.partial.extend_from_slice(chunk);
        let Some(end) = self.partial.iter().rposition(|b| *b == b'\n') else {
            return Ok(Vec::new());
        };
        let lines: Vec<u8> = self.partial.drain(..=end).collect();
        interval_responses(&lines)
    }
}

/// Sums the response histograms of every kind in an iogen interval log (`bytes`) into two
/// halves: intervals for which `first(start_s, length_s)` is true, and the rest. Start times
/// are as written, seconds from the log's own start. For splitting a unit's I/O by whether
/// something (a snapshot) was in flight during each interval.
pub fn split_responses(
    bytes: &[u8],
    mut first: impl FnMut(f64, f64) -> bool,
) -> Result<(Histogram<u64>, Histogram<u64>), Error> {
    let bad = |reason: String| Error::Histogram(format!("interval log: {reason}"));
    let new = || Histogram::<u64>::new(3).map_err(|e| bad(format!("{e:?}")));
    let (mut yes, mut no) = (new()?, new()?);
    for (n, iv) in response_intervals(bytes)?.into_iter().enumerate() {
        let side = if first(iv.start, iv.len) {
            &mut yes
        } else {
            &mut no
        };
        side.add(&iv.hist)
            .map_err(|e| bad(format!("response interval {}: {e:?}", n + 1)))?;
    }
    Ok((yes, no))
}

pub(crate) fn parse_log(bytes: &[u8]) -> Result<Histograms, String> {
    let mut out = Histograms::new();
    let mut de = Deserializer::new();
    for (n, entry) in IntervalLogIterator::new(bytes).enumerate() {
        let entry = entry.map_err(|e| format!("log entry {}: {e:?}", n + 1))?;
        let LogEntry::Interval(iv) = entry else {
            continue;
        };
        let Some(tag) = iv.tag() else { continue };
        let Some((kind, metric)) = tag.as_str().split_once('.') else {
            continue;
        };
        let Some(k) = KINDS.into_iter().find(|k| kind_name(*k) == kind) else {
            continue;
        };
        let Some(m) = METRICS.iter().position(|x| *x == metric) else {
            continue;
        };
        let raw = base64_decode(iv.encoded_histogram())
            .ok_or_else(|| format!("tag {}: bad base64", tag.as_str()))?;
        let h: Histogram<u64> = de
            .deserialize(&mut raw.as_slice())
            .map_err(|e| format!("tag {}: {e:?}", tag.as_str()))?;
        out.entry(k)
            .metric_mut(m)
            .add(&h)
            .map_err(|e| format!("tag {}: {e:?}", tag.as_str()))?;
    }
    Ok(out)
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let s = s.trim().trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    for chunk in s.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= val(c)? << (18 - 6 * i);
        }
        let n = match chunk.len() {
            4 => 3,
            3 => 2,
            2 => 1,
            _ => return None,
        };
        out.extend_from_slice(&acc.to_be_bytes()[1..=n]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use trace_format::IoKind;

    use super::*;

    /// An interval log fed in pieces that cut its lines anywhere gives every interval once,
    /// whole: the same responses as reading the log at once.
    #[test]
    fn an_interval_log_fed_in_pieces_gives_each_interval_once() {
        let mut h = Histograms::new();
        for i in 0..500u64 {
            h.record(IoKind::Read, 1_000 + i * 37, 900, 100);
            h.record(IoKind::Write, 50_000 + i * 91, 40_000, 10_000);
        }
        let log = histograms_to_log(&h).expect("log").into_bytes();
        let mut twice = log.clone();
        twice.extend_from_slice(&log);
        let (all, none) = split_responses(&twice, |_, _| true).expect("split");
        assert_eq!((all.len(), none.len()), (2000, 0));
        for piece in [1, 7, 100, twice.len()] {
            let mut feed = IntervalFeed::default();
            let mut got: Vec<(String, u64)> = Vec::new();
            for chunk in twice.chunks(piece) {
                for (kind, hist) in feed.push(chunk).expect("decode") {
                    got.push((kind, hist.len()));
                }
            }
            let n = |k: &str| {
                got.iter()
                    .filter(|(g, _)| g == k)
                    .map(|(_, c)| c)
                    .sum::<u64>()
            };
            assert_eq!(
                (n("read"), n("write")),
                (1000, 1000),
                "pieces of {piece}: {got:?}"
            );
            assert_eq!(got.len(), 4, "pieces of {piece}: {got:?}");
        }
    }
}
