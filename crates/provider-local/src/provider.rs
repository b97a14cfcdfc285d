//! The [`Provider`] impl: prepare (loop or directory mode, the run's objects directory),
//! execute (the operations, [`crate::ops`]), notices, bare `io` streams and cleanup.

use std::sync::Arc;

use replay::ledger::LedgerEntry;
use replay::provider::CleanupReport;
use replay::{OpCtx, Provider, ProviderError, RunInfo};
use trace_format::{Event, Name};

use crate::cleanup::cleanup;
use crate::config::Mode;
use crate::context::LocalProvider;
use crate::{io, ops, sys};

impl Provider for LocalProvider {
    fn name(&self) -> &'static str {
        "local"
    }

    fn config(&self) -> serde_json::Value {
        serde_json::to_value(&self.config).unwrap_or_default()
    }

    fn prepare(&self, run: &RunInfo) -> Result<Vec<String>, ProviderError> {
        let root = sys::is_root();
        let mut notices = Vec::new();
        let loop_mode = match self.config.mode {
            Mode::Loop if !root => {
                return Err(ProviderError::new(
                    "not_root",
                    "mode loop needs root (loop devices, mount)",
                ));
            }
            Mode::Loop => true,
            Mode::Dir => false,
            Mode::Auto => {
                if !root {
                    notices.push(
                        "local: not running as root, so volumes are plain directories (no \
                         mkfs, loop devices or mounts); control-op latencies are not those of \
                         real block volumes"
                            .to_owned(),
                    );
                }
                root
            }
        };
        let _ = self.loop_mode.set(loop_mode);
        let _ = self.run.set(run.clone());
        let objects = run.run_dir.join("objects");
        run_ledger_dir(run, &objects)?;
        Ok(notices)
    }

    async fn execute(&self, ev: Arc<Event>, ctx: Arc<OpCtx>) -> Result<(), ProviderError> {
        ops::execute(self, ev, ctx).await
    }

    fn finish_notices(&self) -> Vec<String> {
        let st = self.state();
        st.cut_notices
            .iter()
            .chain(&st.cbt_notices)
            .cloned()
            .collect()
    }

    fn open_io_stream(
        &self,
        volume: &Name,
    ) -> Result<Option<Box<dyn replay::IoStream>>, ProviderError> {
        io::open_stream(self, volume).map(Some)
    }

    fn cleanup(&self, run: &RunInfo, leftovers: &[LedgerEntry]) -> CleanupReport {
        // I/O units still running would keep their volumes busy.
        for w in self.state().workloads.values() {
            for stop in &w.io {
                stop.request();
            }
        }
        cleanup(run, leftovers)
    }
}

fn run_ledger_dir(run: &RunInfo, objects: &std::path::Path) -> Result<(), ProviderError> {
    // The objects directory is itself a ledger entry, so cleanup removes it last.
    let ledger = replay::Ledger::open(&run.run_dir).map_err(sys::io_err)?;
    ledger
        .intend("root", sys::path_str(objects)?, serde_json::Value::Null)
        .map_err(sys::io_err)?;
    fs_err::create_dir_all(objects.join("mnt")).map_err(sys::io_err)?;
    Ok(())
}
