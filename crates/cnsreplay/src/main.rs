//! The `cnsreplay` binary: parse arguments, set up logging, hand over to [`cnsreplay::run`].

use std::process::ExitCode;

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
