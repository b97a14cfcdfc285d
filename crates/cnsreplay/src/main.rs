//! The `cnsreplay` binary: parse arguments, set up logging, hand over to [`cnsreplay::run`].

use std::process::ExitCode;

/// snmalloc instead of glibc's malloc. The replay engine's timing lanes allocate each event's
/// call and its context, and other threads free them; with glibc a free takes the allocating
/// thread's arena lock, and a lane then waited for the thread that held it — 421–714 times a
/// second per lane at 100 k events/s on the sim, far longer when that thread's vCPU was
/// stopped (`scripts/lane-waits.sh`). snmalloc hands such frees back as messages, without a
/// lock. Its backend lock must sleep, not spin, when contended (`usewait-on-address`, the
/// workspace Cargo.toml; docs/replay.md, *A lane never waits for a thread of normal
/// priority*). The static (musl) image keeps Rust's default.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[global_allocator]
static ALLOC: snmalloc_rs::SnMalloc = snmalloc_rs::SnMalloc;

fn main() -> ExitCode {
    let cli = cnsreplay::cli::Cli::parse_args();
    cnsreplay::logging::init(cli.verbose, cli.quiet);
    match cnsreplay::run(cli) {
        Ok(code) => code,
        // A closed pipe (`cnsreplay … | head`) is the reader's choice, not a failure.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            ExitCode::from(cnsreplay::exit_code_of(&e))
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    use std::io::ErrorKind::BrokenPipe;
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == BrokenPipe)
            || c.downcast_ref::<serde_json::Error>()
                .is_some_and(|j| j.io_error_kind() == Some(BrokenPipe))
    })
}
