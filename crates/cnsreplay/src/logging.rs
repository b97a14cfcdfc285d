//! Logs go to stderr through `tracing`; colour only on a terminal and never with `NO_COLOR`.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// Set by `-q`: nothing but errors on stderr, progress included.
static QUIET: AtomicBool = AtomicBool::new(false);

/// Whether stderr may carry colour and progress bars.
pub fn stderr_is_interactive() -> bool {
    std::io::stderr().is_terminal()
}

/// Whether progress lines and spinners may be drawn: stderr is a terminal and `-q` was not
/// given ("only errors on stderr").
pub fn progress_allowed() -> bool {
    stderr_is_interactive() && !QUIET.load(Relaxed)
}

/// Whether colour is allowed (a terminal, and `NO_COLOR` unset or empty).
pub fn color_allowed() -> bool {
    stderr_is_interactive() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Installs the stderr logger. `RUST_LOG` overrides the level chosen by `-v`/`-q`.
pub fn init(verbose: u8, quiet: bool) {
    QUIET.store(quiet, Relaxed);
    let level = match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "info",
        (false, 1) => "debug",
        (false, _) => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(color_allowed())
        .with_target(false)
        .without_time()
        .try_init();
}
