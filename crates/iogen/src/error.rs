//! The crate's error type: one matchable enum, with paths and fields named.

use std::path::PathBuf;

/// Everything that can go wrong in iogen.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// File I/O on a named path (the message names the path; from `fs-err`).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A phase field is out of range or inconsistent.
    #[error("invalid phase: {field}: {reason}")]
    InvalidSpec {
        /// The offending field.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// io_uring could not be set up (and the engine choice forbids the fallback).
    #[error("io_uring setup failed: {0}")]
    RingSetup(std::io::Error),
    /// The operation is not supported here.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The stream's bounded queue is full; retry later.
    #[error("stream queue is full")]
    QueueFull,
    /// The stream's worker has stopped.
    #[error("stream is closed")]
    StreamClosed,
    /// A request does not fit the stream (e.g. longer than its buffers).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// A trace could not be read.
    #[error(transparent)]
    Trace(#[from] trace_format::Error),
    /// A stream's thread could not be bound to its CPU.
    #[error("binding the stream thread to CPU {0}: {1}")]
    Cpus(usize, std::io::Error),
    /// A ring's kernel I/O workers could not be bound to their CPUs.
    #[error("binding the kernel I/O workers to CPUs {0:?}: {1}")]
    WorkerCpus(Vec<usize>, std::io::Error),
    /// The target's file system has too little free space to lay the file out; nothing
    /// stays written.
    #[error(
        "{}: no room to lay out {want} ({}): {need} more is needed and its file system has {free} free; the target is as it was; choose a smaller --size",
        path.display(),
        if *defaulted { "the default size of a new file, as no --size was given" } else { "--size, or the io_phase's region" }
    )]
    NoSpace {
        /// The target file.
        path: PathBuf,
        /// The size asked for (or defaulted), formatted.
        want: String,
        /// How much the file had to grow, formatted.
        need: String,
        /// The free space measured, formatted.
        free: String,
        /// No size was given: `want` is [`crate::DEFAULT_NEW_FILE_SIZE`].
        defaulted: bool,
    },
    /// A stop request (SIGINT/SIGTERM) came while the target was being laid out; what was
    /// laid out is undone.
    #[error(
        "{}: interrupted while laying out ({done} of {need} written); the file was removed or truncated back to its old length",
        path.display()
    )]
    Interrupted {
        /// The target file.
        path: PathBuf,
        /// How much was written, formatted.
        done: String,
        /// How much was to be written, formatted.
        need: String,
    },
    /// A worker thread panicked.
    #[error("worker thread panicked")]
    WorkerPanicked,
    /// A histogram could not be built, merged, encoded or decoded.
    #[error("histogram: {0}")]
    Histogram(String),
    /// The verify generation map file is unreadable or does not fit the phase.
    #[error("verify state {path}: {reason}")]
    VerifyState {
        /// The state file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A written-set record is unreadable.
    #[error("written-set record {}: {reason}", path.display())]
    WrittenLog {
        /// The record file.
        path: PathBuf,
        /// What is wrong, with the record.
        reason: String,
    },
    /// An ordered-write log is unreadable.
    #[error("ordered-write log {}: {reason}", path.display())]
    OrderedLog {
        /// The log file.
        path: PathBuf,
        /// What is wrong, with the record or field.
        reason: String,
    },
}

impl Error {
    /// Whether the error is a problem of an input the caller gave (a phase, a trace, a verify
    /// state file, an ordered-write log or written-set record) rather than of this machine
    /// (a file that cannot be opened, io_uring refused, no room): the `iogen` binary exits 1
    /// for the first, 2 for the second, as `cnsreplay` does.
    pub fn is_input_problem(&self) -> bool {
        match self {
            Error::InvalidSpec { .. }
            | Error::InvalidRequest(_)
            | Error::VerifyState { .. }
            | Error::WrittenLog { .. }
            | Error::OrderedLog { .. } => true,
            Error::Trace(t) => matches!(t, trace_format::Error::Invalid(_)),
            _ => false,
        }
    }
}
