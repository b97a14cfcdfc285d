//! Errors of the synth crate, as matchable data.

/// Everything that can go wrong loading a model, generating a trace or fitting data.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// File I/O; with `fs-err` the message names the path.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The model file does not parse: YAML syntax, an unknown field, a wrong type.
    #[error("{file}{}: {}{message}", line.map(|l| format!(":{l}")).unwrap_or_default(), if path.is_empty() || path == "." { String::new() } else { format!("{path}: ") })]
    Model {
        /// The file.
        file: String,
        /// 1-based line, when known.
        line: Option<u64>,
        /// Field path, e.g. `volumes.reuse.pool`.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The model parses but a value is out of range or inconsistent.
    #[error("{file}: {path}: {message}")]
    Invalid {
        /// The file (or `<model>`).
        file: String,
        /// Field path.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// Writing or reading a trace.
    #[error(transparent)]
    Trace(#[from] trace_format::Error),
    /// A bad line in a data file given to `fit`.
    #[error("{file}:{line}: {message}")]
    Data {
        /// The file.
        file: String,
        /// 1-based line.
        line: u64,
        /// What is wrong.
        message: String,
    },
    /// Fitting is impossible (too few observations, all censored, …).
    #[error("cannot fit: {0}")]
    Fit(String),
    /// The target rate cannot be reached with this model.
    #[error("target: {0}")]
    Target(String),
    /// Generation stopped at the events limit (`--max-events`).
    #[error(
        "the model generates more than {limit} events (stopped there; raise --max-events, or \
         shorten the duration or the rates)"
    )]
    TooManyEvents {
        /// The limit.
        limit: u64,
    },
}
