//! `iogen`'s exit codes: the table `cnsreplay` follows (README, Exit codes). 0 success; 1 the
//! input has problems (a phase, a trace, a verify state file or log that does not hold what
//! it should) or the command's own check said no (`verify`: not one consistent cut; a verify
//! phase found bad blocks); 2 the command could not run (usage, a missing or unreadable
//! file or target, io_uring refused, no room for the target, a stop while laying it out).

use std::fmt;

/// The input has problems, or the command's check said no.
pub const INPUT: u8 = 1;
/// The command could not run.
pub const FAILED: u8 = 2;

/// The command's own check said no (its report says why): exit [`INPUT`].
#[derive(Debug)]
pub struct CheckSaidNo(pub String);

impl fmt::Display for CheckSaidNo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CheckSaidNo {}

/// The exit code of a command that failed with `e`.
pub fn code(e: &anyhow::Error) -> u8 {
    let input = e.chain().any(|c| {
        c.is::<CheckSaidNo>()
            || c.downcast_ref::<iogen::Error>()
                .is_some_and(iogen::Error::is_input_problem)
            || c.downcast_ref::<trace_format::Error>()
                .is_some_and(|t| matches!(t, trace_format::Error::Invalid(_)))
    });
    if input { INPUT } else { FAILED }
}
