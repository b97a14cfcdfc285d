//! The input trace as every command opens it (a label for messages, the reader, the checked
//! reader) and the spinner of long work.

use std::path::Path;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use trace_format::{Encoding, TraceReader};

use crate::commands::args::InputArgs;

/// The name of an input in messages: the path, or `<stdin>`.
pub(crate) fn label(path: &Path) -> String {
    if path == Path::new("-") {
        "<stdin>".to_owned()
    } else {
        path.display().to_string()
    }
}

/// Opens the input trace. Trace problems in the header come back as
/// `trace_format::Error::Invalid`, everything else as an I/O error.
pub(crate) fn open(input: &InputArgs) -> Result<TraceReader, trace_format::Error> {
    let enc = input.from.map(Encoding::from);
    if input.file == Path::new("-") {
        TraceReader::from_reader(std::io::stdin(), enc, "<stdin>")
    } else {
        TraceReader::open_as(&input.file, enc)
    }
}

/// Like [`open`], for commands where any failure is an error with context.
pub(crate) fn open_or_fail(input: &InputArgs) -> anyhow::Result<TraceReader> {
    open(input).with_context(|| format!("cannot read {}", label(&input.file)))
}

/// The events of `reader` through `validate`'s checker, in the caller's own pass: the first
/// problem ends them with its located diagnostic (exit 1), before the caller's output is
/// committed. `no_check` passes them on as they are (a trace checked already).
pub(crate) fn checked(
    reader: TraceReader,
    file: &str,
    no_check: bool,
) -> anyhow::Result<trace_format::check::Checked<TraceReader>> {
    use trace_format::check::Checked;
    if no_check {
        return Ok(Checked::unchecked(reader));
    }
    let header = reader.header().clone();
    Checked::new(&header, reader, file).with_context(|| format!("cannot read {file}"))
}

/// An event counter on stderr, hidden when stderr is not a terminal and with `-q`.
pub(crate) fn spinner(what: &str) -> ProgressBar {
    let pb = if crate::logging::progress_allowed() {
        ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr())
    } else {
        ProgressBar::hidden()
    };
    pb.set_style(
        ProgressStyle::with_template("{spinner} {msg} {human_pos} events ({per_sec}) {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    pb.set_message(what.to_owned());
    pb
}
