//! Replaying a trace's single-request `io` events against local targets at their original
//! timing (scaled by a speed factor), one stream per volume, or as fast as possible
//! (`no_stall`). Also the small parsers the command line shares with the library's users.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use trace_format::{Encoding, IoPhase, Op, Trace, TraceReader};

use crate::{
    EngineOptions, Error, IoRequest, IoSubmitter, Stop, StreamHandle, StreamResult, start_stream,
};

/// How far ahead of its intended time a request is handed to its stream.
const LOOKAHEAD: Duration = Duration::from_millis(5);

/// Replay parameters.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    /// Volume name → local file or device.
    pub targets: BTreeMap<String, PathBuf>,
    /// Time scale: 2.0 replays twice as fast.
    pub speed: f64,
    /// Ignore intended times: issue every request as soon as possible.
    pub no_stall: bool,
    /// O_DIRECT.
    pub direct: bool,
}

/// Results of a replay, per volume.
#[derive(Debug, Clone)]
pub struct ReplayResult {
    /// Stream results per volume.
    pub volumes: BTreeMap<String, StreamResult>,
    /// `io` events on volumes without a target.
    pub unmapped: u64,
    /// Events that are not `io` (control operations, phases, markers), not replayed here.
    pub skipped: u64,
}

/// Replays `trace`'s `io` events. Blocks until done or stopped.
pub fn replay_trace(
    trace: &Path,
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
    let reader = TraceReader::open(trace)?;
    let mut streams: BTreeMap<String, (IoSubmitter, StreamHandle)> = BTreeMap::new();
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
        streams.insert(v.clone(), start_stream(p, ro.direct, &opts)?);
    }
    let (mut unmapped, mut skipped) = (0u64, 0u64);
    let t0 = Instant::now() + LOOKAHEAD;
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
        let Some((tx, _)) = streams.get(io.volume.as_str()) else {
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
            if let Some(wait) = at.checked_duration_since(Instant::now() + LOOKAHEAD) {
                std::thread::sleep(wait);
            }
            at
        };
        let req = IoRequest {
            kind: io.kind,
            offset: io.offset,
            len: io.len,
            intended,
        };
        loop {
            match tx.submit(req) {
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
    for (v, (tx, h)) in streams {
        drop(tx);
        if stop.is_requested() {
            h.stop();
        }
        volumes.insert(v, h.finish()?);
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
