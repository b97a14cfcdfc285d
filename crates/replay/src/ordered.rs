//! What every provider's ordered-writes check does before it reads a byte and after it has
//! decided: find the log the trace names among the writing phases this run ran, and hold the
//! check's restored volumes against the volumes the log covers; then write the decision to
//! `io/ID.cut.json` and fail the event when the cut is torn (docs/replay.md, *Group
//! snapshots: the cut*). Here once so that both providers refuse the same traces with the
//! same words and judge the same file the same way.

use std::collections::HashMap;
use std::path::Path;

use trace_format::{IoPhase, Name, Ordered};

use crate::files::CutFile;
use crate::provider::ProviderError;

/// Writes the check of event `id` to `RUN_DIR/io/ID.cut.json` and judges it: `inconsistent`
/// (the verdict and the file) when the restored volumes do not hold one cut. The file is
/// written either way, so that a failed check leaves its evidence.
pub fn write_cut(run_dir: &Path, id: u64, file: &CutFile) -> Result<(), ProviderError> {
    let path = run_dir.join("io").join(format!("{id}.cut.json"));
    let io = |e: std::io::Error| ProviderError::new("io", e.to_string());
    let json = serde_json::to_vec_pretty(file).map_err(|e| io(e.into()))?;
    fs_err::write(&path, json).map_err(io)?;
    if !file.report.verdict.is_consistent() {
        return Err(ProviderError::new(
            "inconsistent",
            format!("{} ({})", file.verdict, path.display()),
        ));
    }
    Ok(())
}

/// The writing phase `o.log` names (a clone of what the provider stored for it) and the
/// check's restored volumes, in the phase's order — or the error a check is refused with: no
/// writer logged under that name in this run (`not_found`), or a different number of
/// volumes than it wrote (`invalid`). `written` is how many volumes a stored run wrote.
pub fn check_opening<T: Clone>(
    runs: &HashMap<Name, T>,
    o: &Ordered,
    ph: &IoPhase,
    written: impl Fn(&T) -> usize,
) -> Result<(T, Vec<Name>), ProviderError> {
    let run = runs.get(&o.log).cloned().ok_or_else(|| {
        ProviderError::new(
            "not_found",
            format!("no ordered writes were logged as {:?}", o.log),
        )
    })?;
    let restored: Vec<Name> = ph.volumes().cloned().collect();
    if restored.len() != written(&run) {
        return Err(ProviderError::new(
            "invalid",
            format!(
                "log {:?} covers {} volumes, the check names {}",
                o.log,
                written(&run),
                restored.len()
            ),
        ));
    }
    Ok((run, restored))
}
