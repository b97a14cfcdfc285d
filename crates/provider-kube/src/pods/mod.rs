//! One pod's life, for every pod the run makes (workload, `io_phase`, I/O stream, pull check,
//! fetch): why it will not start ([`verdict`], pure), waiting on it ([`wait`]), starting,
//! stopping and guarding a workload pod ([`lifecycle`]), room on a node ([`room`]), the
//! WaitForFirstConsumer node pick ([`wffc`]), following its log ([`logs`]), and one iogen
//! pod run to its end ([`iogen`]).
//!
//! ## Layers
//!
//! Lowest first; a module imports only from its own layer or below (checked by
//! `scripts/check-layers.py`).
//!
//! 1. `logs`, `room`, `verdict`, `wffc` — log following, room on a node, pure verdicts, the
//!    WaitForFirstConsumer node pick
//! 2. `wait` — waits judged by the verdicts
//! 3. `lifecycle` — a workload pod's start, stop and guard
//! 4. `iogen` — one iogen pod run to its end

pub(crate) mod iogen;
pub(crate) mod lifecycle;
pub(crate) mod logs;
pub(crate) mod room;
pub(crate) mod verdict;
pub(crate) mod wait;
pub(crate) mod wffc;
