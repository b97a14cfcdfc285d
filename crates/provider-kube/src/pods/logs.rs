//! Follows an iogen pod's log while it runs, so its results reach the run directory as they
//! are written and survive what would lose a log read once at the end: the kubelet rotating
//! the container log (`containerLogMaxSize`), the pod being deleted by a detach, the client's
//! connection dropping.
//!
//! Design: one `follow=true&timestamps=true` stream from the moment the pod runs. The kubelet
//! keeps a followed stream across its own rotations, so while the stream is open nothing is
//! lost. When the stream ends while the pod still runs (a dropped connection, an apiserver
//! restart), the follower reconnects with `sinceTime` = the last line's time, floored to the
//! second (the API's resolution), and drops what it has already seen: lines older than the
//! last one, and at the last line's exact timestamp as many as were already kept. Lines
//! written while disconnected are lost only if the kubelet rotated them away meanwhile; each
//! reconnect is counted and the count is returned, so a run can say so. The stream ends for
//! good when the pod is gone or finished (the kubelet sends everything the container wrote
//! before closing a followed stream of a terminated container).

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::time::Duration;

use futures::{AsyncBufReadExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams};
use replay::provider::IoReport;
use replay::{OpCtx, ProviderError};

use crate::context::io_err;

/// What a follow produced.
#[derive(Debug, Default)]
pub(crate) struct Followed {
    /// The log's lines, timestamps removed, each ending in `\n`.
    pub text: String,
    /// How many times the stream had to be reopened while the pod ran.
    pub reconnects: u32,
}

/// Consecutive failed (re)connects after which the log is given up as lost.
const MAX_FAILED_CONNECTS: u32 = 50;
const RETRY: Duration = Duration::from_millis(200);

/// Lines already kept, for deduplication after a reconnect.
#[derive(Debug, Default)]
struct Seen {
    last: Option<jiff::Timestamp>,
    at_last: usize,
}

impl Seen {
    /// Whether a line stamped `ts` is new; `replayed` counts the lines at `last` seen so far
    /// on this connection.
    fn admit(&mut self, ts: jiff::Timestamp, replayed: &mut usize) -> bool {
        match self.last {
            Some(last) if ts < last => false,
            Some(last) if ts == last => {
                *replayed += 1;
                if *replayed <= self.at_last {
                    return false;
                }
                self.at_last += 1;
                true
            }
            _ => {
                self.last = Some(ts);
                self.at_last = 1;
                *replayed = 1;
                true
            }
        }
    }
}

/// Splits `2026-11-24T01:08:15.541411898Z text` into its timestamp and text.
pub(crate) fn split_stamp(line: &str) -> Option<(jiff::Timestamp, &str)> {
    let (ts, rest) = line.split_once(' ')?;
    Some((ts.parse().ok()?, rest))
}

/// Follows container `container` of pod `name` until the pod is no longer running
/// (`running()` false after a stream ended), appending each line to `out` as it arrives and
/// handing it to `on_line` (once, also across reconnects).
pub(crate) async fn follow(
    api: &Api<Pod>,
    name: &str,
    container: &str,
    out: &Path,
    running: impl Fn() -> bool,
    mut on_line: impl FnMut(&str),
) -> Result<Followed, ProviderError> {
    let mut file = fs_err::OpenOptions::new()
        .create(true)
        .append(true)
        .open(out)
        .map_err(io_err)?;
    let mut got = Followed::default();
    let mut seen = Seen::default();
    let mut failed = 0u32;
    let mut first = true;
    loop {
        let params = LogParams {
            container: Some(container.to_owned()),
            follow: true,
            timestamps: true,
            since_time: seen
                .last
                .and_then(|t| jiff::Timestamp::from_second(t.as_second()).ok()),
            ..LogParams::default()
        };
        match api.log_stream(name, &params).await {
            Ok(stream) => {
                failed = 0;
                if !first {
                    got.reconnects += 1;
                }
                first = false;
                let mut replayed = 0usize;
                let mut lines = stream.lines();
                // A read error ends this connection like the end of the stream does.
                while let Ok(Some(line)) = lines.try_next().await {
                    let Some((ts, text)) = split_stamp(&line) else {
                        continue;
                    };
                    if !seen.admit(ts, &mut replayed) {
                        continue;
                    }
                    on_line(text);
                    got.text.push_str(text);
                    got.text.push('\n');
                    writeln!(file, "{text}").map_err(io_err)?;
                }
                file.flush().map_err(io_err)?;
            }
            Err(e) => {
                failed += 1;
                if failed >= MAX_FAILED_CONNECTS && running() {
                    return Err(ProviderError::new(
                        "io_failed",
                        format!(
                            "log of pod {name}: {failed} reconnects failed while it runs, last: {e}"
                        ),
                    ));
                }
            }
        }
        if !running() {
            return Ok(got);
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// The I/O engine an iogen pod's log says it ran on (its table's `engine` line; `None`
/// before iogen printed it), with the reason of a fallback to the thread pool and the seccomp
/// profile the pod ran under (`seccomp`: the `Localhost` profile, None: `RuntimeDefault`,
/// whose containerd and CRI-O profiles refuse io_uring).
pub fn pod_backend(log: &str, seccomp: Option<&str>) -> Option<replay::IoBackend> {
    let engine = iogen::engine_in_table(log)?;
    let backend = engine.backend_name();
    let reason = (backend != "io_uring").then(|| {
        let why = engine
            .fallback_reason()
            .unwrap_or("iogen ran its thread-pool engine");
        match seccomp {
            None => format!(
                "{why}; the pod ran under the RuntimeDefault seccomp profile, which refuses \
                 io_uring: install iogen's profile on the nodes (kubectl apply -k \
                 deploy/seccomp) and pass --iogen-seccomp-profile cnsreplay/iogen.json"
            ),
            Some(p) => format!("{why}; the pod ran under the Localhost seccomp profile {p}"),
        }
    });
    Some(replay::IoBackend {
        backend: backend.to_owned(),
        reason,
    })
}

/// Keeps the HdrHistogram log lines of a pod log (iogen also prints its table there), writes
/// them to `hlog`, and sums the response histograms of every kind into the with/without
/// snapshot halves by interval. The intervals are placed on the run's time axis by the log's
/// `#[StartTime]` (the node's clock) as `analyze` places them
/// ([`replay::provider::interval_base_ns`]), not before `span.0` (the `io_phase` call's
/// start, ns since the origin); `span.1` is when the log was complete.
pub fn split_log(
    log: &str,
    span: (u64, u64),
    ctx: &OpCtx,
    hlog: &Path,
) -> Result<IoReport, ProviderError> {
    let mut all = String::new();
    for line in log.lines() {
        if line.starts_with("#[")
            || line.starts_with("\"StartTimestamp\"")
            || line.starts_with("Tag=")
        {
            let _ = writeln!(all, "{line}");
        }
    }
    std::fs::write(hlog, &all).map_err(io_err)?;
    // The pod's interval log carries response times only.
    replay::provider::io_report_from_interval_log(all.as_bytes(), ctx, span, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> jiff::Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn a_reconnect_drops_exactly_the_lines_already_kept() {
        let mut seen = Seen::default();
        let mut r = 0;
        let a = ts("2026-11-24T01:00:00.1Z");
        let b = ts("2026-11-24T01:00:00.2Z");
        assert!(seen.admit(a, &mut r));
        assert!(seen.admit(b, &mut r));
        assert!(seen.admit(b, &mut r), "two lines with one timestamp");
        // Reconnected from 01:00:00: a, b, b are replayed, then a new b and c.
        let mut r = 0;
        assert!(!seen.admit(a, &mut r));
        assert!(!seen.admit(b, &mut r));
        assert!(!seen.admit(b, &mut r));
        assert!(seen.admit(b, &mut r), "the third line at b is new");
        assert!(seen.admit(ts("2026-11-24T01:00:01Z"), &mut r));
    }

    #[test]
    fn stamps_split_off_and_lines_without_one_are_skipped() {
        let (t, text) = split_stamp("2026-11-24T01:08:15.541411898Z Tag=read.response,1").unwrap();
        assert_eq!(t, ts("2026-11-24T01:08:15.541411898Z"));
        assert_eq!(text, "Tag=read.response,1");
        assert!(split_stamp("no stamp here").is_none());
    }
}
