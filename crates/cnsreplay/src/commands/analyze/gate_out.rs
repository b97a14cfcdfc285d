//! `--junit FILE` and `--markdown FILE` of the verdict commands (`analyze compare|qos|capacity|
//! history`, `capacity`): the verdict as a release gate reads it ([`analyze::gate`]). `-`
//! writes to stdout instead of the command's table (not beside `--json`, and not both to
//! stdout). Files go through [`crate::output::Output`] and never onto an input; the exit code
//! stays the command's.

use std::io::Write;
use std::path::{Path, PathBuf};

use analyze::gate::Gate;
use clap::Args;

/// The gate's outputs.
#[derive(Debug, Clone, Default, Args)]
pub struct GateArgs {
    /// Also write the verdict as JUnit XML, one testcase per judged row (`failure`: a
    /// regression or a violated target; `skipped`: undecided, with why); `-` for stdout.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Also write the verdict as a Markdown table for a pull request (`$GITHUB_STEP_SUMMARY`),
    /// failures first under a one-line verdict; `-` for stdout.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
}

fn is_stdout(p: &Option<PathBuf>) -> bool {
    p.as_deref() == Some(Path::new("-"))
}

impl GateArgs {
    /// Whether one of them goes to stdout (the command then prints no table of its own).
    pub fn takes_stdout(&self) -> bool {
        is_stdout(&self.junit) || is_stdout(&self.markdown)
    }

    /// Refuses what cannot work before anything is computed: both to stdout, stdout beside
    /// `--json`, a file onto one of the inputs.
    pub fn check(&self, json: bool, inputs: &[&Path]) -> anyhow::Result<()> {
        if is_stdout(&self.junit) && is_stdout(&self.markdown) {
            anyhow::bail!("--junit - and --markdown - both write to stdout: give one a file");
        }
        if json && self.takes_stdout() {
            anyhow::bail!("--json prints to stdout: give --junit/--markdown a file, not `-`");
        }
        for p in [&self.junit, &self.markdown].into_iter().flatten() {
            if p != Path::new("-") {
                crate::output::refuse_inputs(p, inputs)?;
            }
        }
        Ok(())
    }

    /// Writes the gate's formats where asked (`gate` is built only when one is).
    pub fn write(
        &self,
        gate: impl FnOnce() -> Gate,
        inputs: &[&Path],
        out: &mut dyn Write,
    ) -> anyhow::Result<()> {
        if self.junit.is_none() && self.markdown.is_none() {
            return Ok(());
        }
        let g = gate();
        for (dest, text) in [(&self.junit, g.junit()), (&self.markdown, g.markdown())] {
            match dest {
                None => {}
                Some(p) if p == Path::new("-") => out.write_all(text.as_bytes())?,
                Some(p) => crate::output::write(p, inputs, text.as_bytes())?,
            }
        }
        Ok(())
    }
}
