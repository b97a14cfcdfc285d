//! A replayed stream's result as one line of text, and the wall-clock anchor that moves
//! instants between machines.
//!
//! `iogen replay --result-lines` prints one [`StreamLine`] per volume after the run: how a
//! pod's stream gets its results back to the driver through nothing but its log (the
//! kubelet's log API is what every cluster offers). The line carries everything the driver
//! judges a stream by: counts, the per-bucket intended/issued curve, and the CO-safe
//! histograms as an HdrHistogram log (base64 of V2-deflate), so nothing is summarised away.
//!
//! Instants are process-local; between machines they travel as Unix nanoseconds. A
//! [`WallAnchor`] reads both clocks once and converts every instant with that one pair, so
//! converted instants keep their exact spacing (no per-call jitter); what is left is the skew
//! between the machines' wall clocks (NTP's, nothing on one host).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::{Error, Histograms};

/// What starts a result line.
pub const RESULT_PREFIX: &str = "iogen-stream-result ";

/// One volume's replayed stream, as printed by `iogen replay --result-lines`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamLine {
    /// The trace's volume.
    pub volume: String,
    /// What the requests went to.
    pub target: String,
    /// Engine, its flags, O_DIRECT and the placement policy.
    pub flags: Vec<String>,
    /// Requests accepted into the stream.
    pub accepted: u64,
    /// Completed without error.
    pub completed: u64,
    /// Issued and failed.
    pub errors: u64,
    /// Refused on arrival (never issued).
    pub rejected: u64,
    /// Issued after a request intended later.
    pub reordered: u64,
    /// Accepted and never issued (a stop).
    pub unissued: u64,
    /// Offset or length changed by the placement.
    pub adjusted: u64,
    /// Read from the trace only after their intended instant (the sender's lateness).
    #[serde(default)]
    pub arrived_late: u64,
    /// The stream's time 0 (bucket 0 starts here), Unix ns on the replaying machine.
    pub base_unix_ns: i64,
    /// Width of a bucket, ns.
    pub bucket_ns: u64,
    /// Per bucket: [requests intended, requests issued].
    pub buckets: Vec<[u32; 2]>,
    /// The stream's CPU time per request, µs.
    pub cpu_per_request_us: f64,
    /// Stopped before its end.
    pub partial: bool,
    /// Response, service and lateness per kind, as an iogen histogram log.
    pub histograms: String,
}

impl StreamLine {
    /// The line (no newline).
    pub fn to_line(&self) -> Result<String, Error> {
        let json = serde_json::to_string(self)
            .map_err(|e| Error::Histogram(format!("stream result: {e}")))?;
        Ok(format!("{RESULT_PREFIX}{json}"))
    }

    /// Parses a result line; `None` when `line` is not one.
    pub fn parse(line: &str) -> Option<Result<Self, Error>> {
        let json = line.trim_end().strip_prefix(RESULT_PREFIX)?;
        Some(
            serde_json::from_str(json)
                .map_err(|e| Error::Histogram(format!("stream result line: {e}"))),
        )
    }

    /// The histograms it carries.
    pub fn histograms(&self) -> Result<Histograms, Error> {
        crate::stats::parse_histograms(self.histograms.as_bytes())
    }
}

/// One reading of the monotonic and the wall clock, to convert instants to Unix ns and back.
#[derive(Debug, Clone, Copy)]
pub struct WallAnchor {
    instant: Instant,
    unix_ns: i64,
}

impl WallAnchor {
    /// Reads both clocks now.
    pub fn now() -> Self {
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        Self {
            instant: Instant::now(),
            unix_ns: i64::try_from(unix.as_nanos()).unwrap_or(i64::MAX),
        }
    }

    /// `at` in Unix ns.
    pub fn unix_ns(&self, at: Instant) -> i64 {
        let signed = match at.checked_duration_since(self.instant) {
            Some(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
            None => -i64::try_from((self.instant - at).as_nanos()).unwrap_or(i64::MAX),
        };
        self.unix_ns.saturating_add(signed)
    }

    /// The instant of `unix_ns`; `None` when this process's clock cannot hold it.
    pub fn instant(&self, unix_ns: i64) -> Option<Instant> {
        let d = unix_ns.checked_sub(self.unix_ns)?;
        let abs = Duration::from_nanos(d.unsigned_abs());
        if d >= 0 {
            self.instant.checked_add(abs)
        } else {
            self.instant.checked_sub(abs)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_convert_both_ways_and_keep_spacing() {
        let a = WallAnchor::now();
        let t = Instant::now() + Duration::from_millis(3);
        let u = a.unix_ns(t);
        assert_eq!(a.instant(u), Some(t));
        let earlier = a.instant(u - 5_000_000).expect("representable");
        assert_eq!(t - earlier, Duration::from_millis(5));
        assert_eq!(a.unix_ns(earlier), u - 5_000_000);
    }

    #[test]
    fn lines_round_trip_and_other_lines_are_not_results() {
        let mut h = Histograms::new();
        h.record(trace_format::IoKind::Read, 1000, 800, 200);
        let l = StreamLine {
            volume: "v".into(),
            target: "/dev/xvda".into(),
            flags: vec!["io_uring".into()],
            accepted: 1,
            completed: 1,
            errors: 0,
            rejected: 0,
            reordered: 0,
            unissued: 0,
            adjusted: 0,
            arrived_late: 0,
            base_unix_ns: 1_700_000_000_000_000_000,
            bucket_ns: 10_000_000,
            buckets: vec![[1, 1]],
            cpu_per_request_us: 3.5,
            partial: false,
            histograms: crate::stats::histograms_to_log(&h).expect("log"),
        };
        let text = l.to_line().expect("line");
        assert!(!text.contains('\n'));
        let back = StreamLine::parse(&text).expect("a result").expect("parses");
        assert_eq!(back, l);
        let hb = back.histograms().expect("histograms");
        assert_eq!(hb.total_count(), 1);
        assert!(StreamLine::parse("Tag=read.response,0.0,1.0").is_none());
        assert!(
            StreamLine::parse(&format!("{RESULT_PREFIX}{{"))
                .expect("a result")
                .is_err()
        );
    }
}
