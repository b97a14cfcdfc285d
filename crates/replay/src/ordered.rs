//! What every provider's ordered-writes check does before it reads a byte: find the log the
//! trace names among the writing phases this run ran, and hold the check's restored volumes
//! against the volumes the log covers (docs/replay.md, *Group snapshots: the cut*). Here once
//! so that both providers refuse the same traces with the same words.

use std::collections::HashMap;

use trace_format::{IoPhase, Name, Ordered};

use crate::provider::ProviderError;

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
