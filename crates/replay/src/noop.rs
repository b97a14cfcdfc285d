//! The `noop` provider: every operation succeeds at once, touching nothing. It measures the
//! engine alone — how fast it can dispatch, and its own delay — with no provider work in the
//! way (`cnsreplay run TRACE --provider noop --speed 1000`, docs/PERFORMANCE.md).

use std::sync::Arc;

use trace_format::Event;

use crate::ledger::LedgerEntry;
use crate::provider::{CleanupReport, OpCtx, Provider, ProviderError, RunInfo};

/// A provider whose every operation completes immediately and creates nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopProvider;

impl Provider for NoopProvider {
    fn name(&self) -> &'static str {
        "noop"
    }

    fn config(&self) -> serde_json::Value {
        serde_json::json!({})
    }

    fn prepare(&self, _run: &RunInfo) -> Result<Vec<String>, ProviderError> {
        Ok(Vec::new())
    }

    fn starts_inline(&self) -> bool {
        true
    }

    async fn execute(&self, _ev: Arc<Event>, _ctx: Arc<OpCtx>) -> Result<(), ProviderError> {
        Ok(())
    }

    fn cleanup(&self, _run: &RunInfo, _leftovers: &[LedgerEntry]) -> CleanupReport {
        CleanupReport::default()
    }
}
