//! The client-side rate limiter on our own API requests (a token bucket, reservation style so
//! waiting requests go in arrival order) and the counters that expose throttling.
//!
//! Throttling silently corrupts control-plane benchmarks: a request that waited 400 ms in a
//! client limiter shows up as 400 ms of "storage latency". So every wait is counted and summed,
//! and API-server 429s are counted too; the run reports both (see [`ClientStats::notices`]).

use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Throttling counters of one provider instance.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientStats {
    /// Requests that went through the limiter.
    pub requests: u64,
    /// Requests that had to wait for a token.
    pub throttled_requests: u64,
    /// Total time requests waited in the limiter, seconds.
    pub throttled_seconds: f64,
    /// Longest single wait, seconds.
    pub max_wait_seconds: f64,
    /// Responses with HTTP 429 (server-side throttling, API priority and fairness).
    pub api_429: u64,
    /// Errors of the shared watches (each is retried with backoff).
    pub watch_errors: u64,
}

impl ClientStats {
    /// Human-readable notices for the run summary; empty when nothing was throttled.
    pub fn notices(&self, qps: f64, burst: u32) -> Vec<String> {
        let mut v = Vec::new();
        if self.throttled_requests > 0 {
            v.push(format!(
                "kube: client-side throttling: {} of {} requests waited in the client rate \
                 limiter (--kube-qps {qps}, --kube-burst {burst}), {:.3}s in total, longest \
                 {:.3}s; those waits are inside the measured latencies",
                self.throttled_requests,
                self.requests,
                self.throttled_seconds,
                self.max_wait_seconds
            ));
        }
        if self.api_429 > 0 {
            v.push(format!(
                "kube: the API server throttled {} request(s) with HTTP 429 (priority and \
                 fairness); those operations failed with class `throttled`",
                self.api_429
            ));
        }
        if self.watch_errors > 0 {
            v.push(format!(
                "kube: the shared watches saw {} error(s) and were restarted; completions may \
                 have been observed late",
                self.watch_errors
            ));
        }
        v
    }
}

/// A token bucket: `qps` tokens per second, at most `burst` saved. `qps <= 0` disables it.
#[derive(Debug)]
pub struct Limiter {
    qps: f64,
    burst: f64,
    bucket: Mutex<(f64, Instant)>,
    requests: AtomicU64,
    throttled: AtomicU64,
    waited_ns: AtomicU64,
    max_wait_ns: AtomicU64,
    pub(crate) api_429: AtomicU64,
    pub(crate) watch_errors: AtomicU64,
}

impl Limiter {
    /// A full bucket.
    pub fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            qps,
            burst,
            bucket: Mutex::new((burst, Instant::now())),
            requests: AtomicU64::new(0),
            throttled: AtomicU64::new(0),
            waited_ns: AtomicU64::new(0),
            max_wait_ns: AtomicU64::new(0),
            api_429: AtomicU64::new(0),
            watch_errors: AtomicU64::new(0),
        }
    }

    /// Takes one token now and returns how long the caller must wait for it (zero when a
    /// token was free). The wait is already counted.
    pub fn reserve(&self) -> Duration {
        self.requests.fetch_add(1, Relaxed);
        if !(self.qps > 0.0 && self.qps.is_finite()) {
            return Duration::ZERO;
        }
        let wait = {
            let mut b = self
                .bucket
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let now = Instant::now();
            let refill = now.saturating_duration_since(b.1).as_secs_f64() * self.qps;
            b.0 = (b.0 + refill).min(self.burst) - 1.0;
            b.1 = now;
            if b.0 >= 0.0 {
                Duration::ZERO
            } else {
                Duration::from_secs_f64(-b.0 / self.qps)
            }
        };
        if !wait.is_zero() {
            let ns = u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX);
            self.throttled.fetch_add(1, Relaxed);
            self.waited_ns.fetch_add(ns, Relaxed);
            self.max_wait_ns.fetch_max(ns, Relaxed);
        }
        wait
    }

    /// Waits for a token.
    pub async fn acquire(&self) {
        let wait = self.reserve();
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }

    /// The counters so far.
    pub fn stats(&self) -> ClientStats {
        ClientStats {
            requests: self.requests.load(Relaxed),
            throttled_requests: self.throttled.load(Relaxed),
            throttled_seconds: self.waited_ns.load(Relaxed) as f64 / 1e9,
            max_wait_seconds: self.max_wait_ns.load(Relaxed) as f64 / 1e9,
            api_429: self.api_429.load(Relaxed),
            watch_errors: self.watch_errors.load(Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_is_free_then_requests_wait_in_order() {
        let l = Limiter::new(10.0, 3);
        for _ in 0..3 {
            assert_eq!(l.reserve(), Duration::ZERO);
        }
        let w1 = l.reserve();
        let w2 = l.reserve();
        assert!(w1 > Duration::from_millis(50) && w1 <= Duration::from_millis(100));
        assert!(w2 > w1, "later reservations wait longer: {w1:?} {w2:?}");
        let s = l.stats();
        assert_eq!((s.requests, s.throttled_requests), (5, 2));
        assert!(s.throttled_seconds > 0.1);
        assert_eq!(s.notices(10.0, 3).len(), 1);
    }

    #[test]
    fn zero_qps_never_waits() {
        let l = Limiter::new(0.0, 1);
        for _ in 0..100 {
            assert_eq!(l.reserve(), Duration::ZERO);
        }
        assert!(l.stats().notices(0.0, 1).is_empty());
    }
}
