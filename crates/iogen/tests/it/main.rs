//! Integration tests of iogen: engines, modes, results, verify and streams.

mod closed;
mod exit_codes;
mod hist;
mod layout;
mod open;
mod ordered;
mod outputs;
mod replay;
mod stop;
mod stream;
mod verify;
mod written;

use std::path::PathBuf;

use iogen::{EngineChoice, EngineOptions, PhaseSpec};

/// A temp dir with a target path inside (the file is created by the engine).
pub fn target() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::Builder::new()
        .prefix("iogen-it")
        .tempdir_in("/var/tmp")
        .expect("tempdir");
    let p = d.path().join("target.dat");
    (d, p)
}

/// Engine options with a fixed seed.
pub fn opts(engine: EngineChoice) -> EngineOptions {
    EngineOptions {
        engine,
        seed: 42,
        ..EngineOptions::default()
    }
}

/// A small phase on a 4 MiB region.
pub fn spec() -> PhaseSpec {
    PhaseSpec {
        region: Some(4 << 20),
        ..PhaseSpec::default()
    }
}
