//! [`RunControl`]: how a run is stopped from outside (signal handlers, tests, `--fail-fast`)
//! and where its live counters are reached; the engine, the timing lanes and every event
//! task hold one.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex, PoisonError};

use crate::live::Live;

/// Stops a run from outside (signal handlers, tests) and exposes its live counters.
#[derive(Debug, Clone, Default)]
pub struct RunControl {
    stop: Arc<AtomicBool>,
    reason: Arc<Mutex<Option<String>>>,
    live: Arc<Live>,
}

impl RunControl {
    /// A fresh control.
    pub fn new() -> Self {
        Self::default()
    }

    /// The stop flag, for `signal_hook::flag::register` (a set flag without a reason reads
    /// as "interrupted by a signal").
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Requests a stop; the first reason given wins.
    pub fn request_stop(&self, reason: impl Into<String>) {
        let mut r = self.reason.lock().unwrap_or_else(PoisonError::into_inner);
        if r.is_none() {
            *r = Some(reason.into());
        }
        self.stop.store(true, SeqCst);
    }

    /// Whether a stop was requested.
    pub fn is_stopped(&self) -> bool {
        self.stop.load(SeqCst)
    }

    /// Live counters.
    pub fn live(&self) -> Arc<Live> {
        self.live.clone()
    }

    pub(crate) fn reason(&self) -> String {
        self.reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .unwrap_or_else(|| "interrupted by a signal".to_owned())
    }
}
