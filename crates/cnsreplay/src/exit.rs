//! The exit-code table's constants and the two errors that choose a code, below every
//! command (the crate's `exit_code_of` reads them).

/// The context of an error of a command whose exit code 1 is its own check saying no and
/// nothing else (`analyze compare`: a regression, which a gate acts on): whatever stopped it,
/// also a malformed run-directory record, exits [`EXIT_FAILED`].
#[derive(Debug)]
pub struct CouldNotRun(pub &'static str);

impl std::fmt::Display for CouldNotRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// A problem of an input that a command finds itself rather than a library reporting it
/// (an import input with data but no event to import): exits [`EXIT_INPUT`].
#[derive(Debug)]
pub struct InputProblem(pub String);

impl std::fmt::Display for InputProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InputProblem {}

/// The input has problems.
pub const EXIT_INPUT: u8 = 1;
/// The command could not run (usage, I/O, a refused output, a provider that could not start).
pub const EXIT_FAILED: u8 = 2;
