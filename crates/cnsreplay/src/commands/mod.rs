//! One module per command, each with its own arguments; the argument types several commands
//! share are in [`args`].
//!
//! ## Layers
//!
//! Lowest first; a module imports only from its own layer or below (checked by
//! `scripts/check-layers.py`).
//!
//! 1. `args`, `input` — argument types several commands share (input trace, encodings,
//!    durations); opening and checking the input trace, the spinner
//! 2. `precheck` — the trace check and pre-flight a replay runs first
//! 3. `validate`, `stats`, `convert`, `trace`, `synth`, `analyze`, `merge_runs`, `cleanup`, `run` (apart) — commands
//! 4. `sweep`, `capacity`, `fetch` (apart) — commands built on `run` (its points, its pod options)
//! 5. `meta` — completions, man pages and every command's output schema

#[cfg(feature = "analyze")]
pub mod analyze;
pub mod args;
#[cfg(feature = "analyze")]
pub mod capacity;
pub(crate) mod cleanup;
pub(crate) mod convert;
pub mod fetch;
mod input;
pub(crate) mod merge_runs;
pub mod meta;
pub(crate) mod precheck;
pub(crate) mod run;
pub(crate) mod stats;
pub mod sweep;
pub(crate) mod synth;
pub(crate) mod trace;
pub(crate) mod validate;

pub(crate) use input::{checked, label, open, open_or_fail, spinner};
