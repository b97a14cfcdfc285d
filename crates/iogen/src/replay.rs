//! Replaying a trace's single-request `io` events against local targets at their original
//! timing (scaled by a speed factor), one stream per volume, or as fast as possible
//! (`no_stall`). Also the small parsers the command line shares with the library's users.
//!
//! The trace may come from any byte stream (`iogen replay -` reads stdin) and may be written
//! while it is replayed: a pod's stream receives its volume's slice of a run this way. With
//! `at_origin`, time 0 is the header's `origin` on this machine's wall clock rather than the
//! moment the replay starts, so a sender that fixed the origin decides when each request is
//! due. Offsets are placed on each target by [`Placement`] (recorded, counted).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use trace_format::{Encoding, IoPhase, Op, Trace, TraceReader};

use crate::placement::{Placement, target_len};
use crate::wire::{StreamLine, WallAnchor};
use crate::{
    EngineOptions, Error, IoRequest, IoSubmitter, Stop, StreamHandle, StreamResult,
    direct_alignment, start_stream,
};

/// How far ahead of its intended time a request is handed to its stream: as the replay
/// engine's local streams (50 ms), so that a reading thread delayed by a busy node (the
/// stream's worker spins on one CPU at high rates) does not make requests late; the stream's
/// queue (16 Ki) holds 50 ms at 300 000 requests/s.
const LOOKAHEAD: Duration = Duration::from_millis(50);

/// Replay parameters.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    /// Volume name → local file or device.
    pub targets: BTreeMap<String, PathBuf>,
    /// Time scale: 2.0 replays twice as fast.
    pub speed: f64,
    /// Ignore intended times: issue every request as soon as possible.
    pub no_stall: bool,
    /// O_DIRECT (buffered, and flagged, where the file system refuses it).
    pub direct: bool,
    /// Time 0 is the trace header's `origin` on this machine's wall clock (an error when the
    /// header has none), not the start of the replay.
    pub at_origin: bool,
}

/// One volume's replay.
#[derive(Debug, Clone)]
pub struct VolumeReplay {
    /// The stream's result.
    pub result: StreamResult,
    /// The target.
    pub target: PathBuf,
    /// O_DIRECT and the placement policy, as flags.
    pub flags: Vec<String>,
    /// Requests whose offset or length the placement changed.
    pub adjusted: u64,
    /// Requests read from the trace only after their intended instant (a trace written while
    /// it is replayed: the sender's or the transport's lateness, not the stream's).
    pub arrived_late: u64,
}

impl VolumeReplay {
    /// The result line of this volume (see [`StreamLine`]); `anchor` converts the stream's
    /// base to Unix ns.
    pub fn line(&self, volume: &str, anchor: &WallAnchor) -> Result<StreamLine, Error> {
        let r = &self.result;
        let mut flags = vec![r.summary.engine.engine.clone()];
        flags.extend(r.summary.engine.flags.iter().cloned());
        flags.extend(self.flags.iter().cloned());
        Ok(StreamLine {
            volume: volume.to_owned(),
            target: self.target.display().to_string(),
            flags,
            accepted: r.accepted,
            completed: r.summary.ios,
            errors: r.errors - r.rejected.min(r.errors),
            rejected: r.rejected,
            reordered: r.reordered,
            unissued: r.unissued,
            adjusted: self.adjusted,
            arrived_late: self.arrived_late,
            base_unix_ns: anchor.unix_ns(r.base),
            bucket_ns: crate::BUCKET_NS,
            buckets: r.buckets.clone(),
            cpu_per_request_us: r.summary.cpu.per_io_us,
            partial: r.summary.partial,
            histograms: crate::stats::histograms_to_log(&r.histograms)?,
        })
    }
}

/// Results of a replay, per volume.
#[derive(Debug, Clone)]
pub struct ReplayResult {
    /// Per volume.
    pub volumes: BTreeMap<String, VolumeReplay>,
    /// `io` events on volumes without a target.
    pub unmapped: u64,
    /// Events that are not `io` (control operations, phases, markers), not replayed here.
    pub skipped: u64,
}

/// Replays the `io` events of the trace file `trace`. Blocks until done or stopped.
pub fn replay_trace(
    trace: &std::path::Path,
    ro: &ReplayOptions,
    opts: &EngineOptions,
    stop: &Stop,
) -> Result<ReplayResult, Error> {
    replay_from(|| Ok(TraceReader::open(trace)?), ro, opts, stop)
}

/// Replays the `io` events of the trace `open` returns, called once every target's stream
/// is ready (so a trace that arrives on a pipe finds the streams set up). Blocks until the
/// trace ends or a stop.
pub fn replay_from(
    open: impl FnOnce() -> Result<TraceReader, Error>,
    ro: &ReplayOptions,
    opts: &EngineOptions,
    stop: &Stop,
) -> Result<ReplayResult, Error> {
    if !(ro.speed.is_finite() && ro.speed > 0.0) {
        return Err(Error::InvalidSpec {
            field: "speed",
            reason: format!("{} is not a positive factor", ro.speed),
        });
    }
    struct Open {
        tx: IoSubmitter,
        handle: StreamHandle,
        place: Placement,
        adjusted: u64,
        arrived_late: u64,
        flags: Vec<String>,
    }
    let mut streams: BTreeMap<String, Open> = BTreeMap::new();
    for (v, p) in &ro.targets {
        // With several volumes, one interval log per volume (`LOG.VOLUME.ext`).
        let opts = EngineOptions {
            interval_log: opts.interval_log.as_deref().map(|l| {
                if ro.targets.len() > 1 {
                    crate::part_path(l, v)
                } else {
                    l.to_owned()
                }
            }),
            ..opts.clone()
        };
        let align = if ro.direct {
            direct_alignment(p)?
        } else {
            None
        };
        let mut flags = vec![match (ro.direct, align) {
            (true, Some(a)) => format!("O_DIRECT, {a}-byte aligned"),
            (true, None) => "buffered (the file system refuses O_DIRECT)".to_owned(),
            (false, _) => "buffered".to_owned(),
        }];
        let place = Placement::new(target_len(p)?, align.unwrap_or(1));
        flags.push(place.describe());
        let (tx, handle) = start_stream(p, align.is_some(), &opts)?;
        streams.insert(
            v.clone(),
            Open {
                tx,
                handle,
                place,
                adjusted: 0,
                arrived_late: 0,
                flags,
            },
        );
    }
    let reader = open()?;
    let t0 = if ro.at_origin {
        let origin = reader.header().origin.ok_or(Error::InvalidSpec {
            field: "at_origin",
            reason: "the trace header has no origin".to_owned(),
        })?;
        let unix = i64::try_from(origin.as_nanosecond()).map_err(|_| Error::InvalidSpec {
            field: "at_origin",
            reason: format!("origin {origin} is out of range"),
        })?;
        WallAnchor::now()
            .instant(unix)
            .ok_or_else(|| Error::InvalidSpec {
                field: "at_origin",
                reason: format!("origin {origin} is out of this clock's range"),
            })?
    } else {
        Instant::now() + LOOKAHEAD
    };
    let (mut unmapped, mut skipped) = (0u64, 0u64);
    let mut failure = None;
    for ev in reader.events() {
        if stop.is_requested() {
            break;
        }
        let ev = match ev {
            Ok(ev) => ev,
            Err(e) => {
                failure = Some(Error::from(e));
                break;
            }
        };
        let Op::Io(io) = &ev.op else {
            skipped += 1;
            continue;
        };
        let Some(s) = streams.get_mut(io.volume.as_str()) else {
            unmapped += 1;
            continue;
        };
        let intended = if ro.no_stall {
            Instant::now()
        } else {
            // A tiny speed can scale a late event past what an `Instant` holds: an error, not
            // a panic.
            let Some(at) = Duration::try_from_secs_f64(ev.at as f64 / 1e9 / ro.speed)
                .ok()
                .and_then(|d| t0.checked_add(d))
            else {
                failure = Some(Error::InvalidSpec {
                    field: "speed",
                    reason: format!(
                        "event {} (at {} ns) is out of time range at speed {}",
                        ev.id, ev.at, ro.speed
                    ),
                });
                break;
            };
            let now = Instant::now();
            if at < now {
                s.arrived_late += 1;
            } else if let Some(wait) = at.checked_duration_since(now + LOOKAHEAD) {
                std::thread::sleep(wait);
            }
            at
        };
        let ((offset, len), changed) = s.place.place(io.kind, io.offset, io.len);
        s.adjusted += u64::from(changed);
        let req = IoRequest {
            kind: io.kind,
            offset,
            len,
            intended,
        };
        loop {
            match s.tx.submit(req) {
                Err(Error::QueueFull) if !stop.is_requested() => {
                    std::thread::sleep(Duration::from_micros(100));
                }
                other => {
                    other.ok();
                    break;
                }
            }
        }
    }
    let mut volumes = BTreeMap::new();
    for (v, s) in streams {
        drop(s.tx);
        if stop.is_requested() {
            s.handle.stop();
        }
        let result = s.handle.finish()?;
        volumes.insert(
            v.clone(),
            VolumeReplay {
                result,
                target: ro.targets[&v].clone(),
                flags: s.flags,
                adjusted: s.adjusted,
                arrived_late: s.arrived_late,
            },
        );
    }
    if let Some(e) = failure {
        return Err(e);
    }
    Ok(ReplayResult {
        volumes,
        unmapped,
        skipped,
    })
}

/// Parses a size the way fio does: `4k`, `1m`, `1g` are powers of 1024 (`kb`, `KiB` too);
/// Kubernetes quantities (`4Ki`, `1G`) are accepted as well.
pub fn parse_size(s: &str) -> Result<u64, Error> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let digits = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (num, suffix) = lower.split_at(digits);
    let shift = match suffix {
        "" => Some(0),
        "k" | "kb" | "kib" => Some(10),
        "m" | "mb" | "mib" => Some(20),
        "g" | "gb" | "gib" => Some(30),
        "t" | "tb" | "tib" => Some(40),
        _ => None,
    };
    if let (Some(sh), Ok(n)) = (shift, num.parse::<u64>())
        && let Some(v) = n.checked_mul(1u64 << sh)
    {
        return Ok(v);
    }
    trace_format::units::parse_bytes(t).map_err(|e| Error::InvalidSpec {
        field: "size",
        reason: e.to_string(),
    })
}

/// Parses an `io_phase` body given as a YAML or JSON snippet (`workload` and `volume` may be
/// left out), e.g. `{pattern: random, read_pct: 100, block_size: 4Ki, load: {depth: 8}, duration: 5s}`.
pub fn parse_phase_snippet(snippet: &str) -> Result<IoPhase, Error> {
    let s = snippet.trim();
    let mut body = String::new();
    let flow = s.starts_with('{');
    let pre = [
        ("workload", "workload: iogen"),
        ("volume", "volume: target"),
    ]
    .into_iter()
    .filter(|(k, _)| !s.contains(k))
    .map(|(_, v)| v);
    if flow {
        let extra: Vec<_> = pre.collect();
        body.push_str("    io_phase: {");
        body.push_str(&extra.join(", "));
        if !extra.is_empty() {
            body.push_str(", ");
        }
        body.push_str(&s[1..]);
        body.push('\n');
    } else {
        body.push_str("    io_phase:\n");
        for l in pre.chain(s.lines()) {
            body.push_str("      ");
            body.push_str(l);
            body.push('\n');
        }
    }
    let doc = format!("format: cnsreplay-trace\nversion: 1\nevents:\n  - at: 0\n{body}");
    let trace = Trace::from_bytes(doc.as_bytes(), Some(Encoding::Yaml))?;
    match trace.events.into_iter().next().map(|e| e.op) {
        Some(Op::IoPhase(p)) => Ok(p),
        _ => Err(Error::InvalidSpec {
            field: "io_phase",
            reason: "the snippet is not an io_phase".to_owned(),
        }),
    }
}
