//! `cnsreplay convert`: between trace encodings, from foreign formats, and to fio.
//!
//! Streaming and lossless between trace encodings; the first bad event stops it. Imports stop
//! at the first bad line unless `--skip-bad`, which counts and reports what it skipped. The
//! output goes to a temporary file beside the target and is renamed into place only when
//! complete, so an interrupted or failed conversion never leaves a half-written file under the
//! requested name.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use import::{ImportError, Policy};
use trace_format::{Encoding, TraceReader, TraceWriter};

use super::{label, spinner};
use crate::cli::{ConvertArgs, Format};

/// Where the output goes: a temporary file renamed on success, or stdout.
enum Sink {
    File { tmp: PathBuf, dest: PathBuf },
    Stdout,
}

impl Sink {
    fn new(output: &Path) -> Self {
        if output == Path::new("-") {
            Sink::Stdout
        } else {
            let mut name = output.file_name().unwrap_or_default().to_os_string();
            name.push(format!(".partial-{}", std::process::id()));
            Sink::File {
                tmp: output.with_file_name(name),
                dest: output.to_owned(),
            }
        }
    }

    fn writer(&self) -> anyhow::Result<Box<dyn Write + Send>> {
        Ok(match self {
            Sink::File { tmp, .. } => Box::new(fs_err::File::create(tmp)?),
            Sink::Stdout => Box::new(std::io::stdout()),
        })
    }

    fn commit(&self) -> anyhow::Result<()> {
        if let Sink::File { tmp, dest } = self {
            fs_err::rename(tmp, dest)?;
        }
        Ok(())
    }

    fn discard(&self) {
        if let Sink::File { tmp, .. } = self {
            let _ = fs_err::remove_file(tmp);
        }
    }
}

pub(crate) fn run(a: &ConvertArgs, _out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let to = match a.to {
        Some(f) => f,
        None if a.output == Path::new("-") => bail!("writing to stdout: say the format with --to"),
        None => match Encoding::from_path(&a.output) {
            Some(Encoding::Yaml) => Format::Yaml,
            Some(Encoding::Jsonl) => Format::Jsonl,
            Some(Encoding::Binary) => Format::Binary,
            None => bail!(
                "cannot tell the output format from {}; use a .yaml, .jsonl or .cnsbin name or --to",
                a.output.display()
            ),
        },
    };
    if a.from == Some(Format::FioIolog) && a.file == Path::new("-") {
        bail!("importing reads the input twice: give a file, not stdin");
    }
    let sink = Sink::new(&a.output);
    let result = convert(a, to, &sink);
    match result {
        Ok(()) => {
            sink.commit()?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            sink.discard();
            let bad = e
                .downcast_ref::<trace_format::Error>()
                .and_then(|t| match t {
                    trace_format::Error::Invalid(d) => Some(d.to_string()),
                    _ => None,
                })
                .or_else(|| match e.downcast_ref::<ImportError>() {
                    Some(ImportError::Bad(b)) => Some(b.to_string()),
                    Some(ImportError::Trace(trace_format::Error::Invalid(d))) => {
                        Some(d.to_string())
                    }
                    _ => None,
                });
            match bad {
                Some(msg) => {
                    tracing::error!("{msg}");
                    tracing::error!("nothing written: conversion stops at the first problem");
                    Ok(ExitCode::from(1))
                }
                None => Err(e),
            }
        }
    }
}

fn open_trace(a: &ConvertArgs) -> anyhow::Result<TraceReader> {
    let enc = a.from.and_then(Format::encoding);
    Ok(if a.file == Path::new("-") {
        TraceReader::from_reader(std::io::stdin(), enc, "<stdin>")?
    } else {
        TraceReader::open_as(&a.file, enc)?
    })
}

fn convert(a: &ConvertArgs, to: Format, sink: &Sink) -> anyhow::Result<()> {
    let pb = spinner("converting");
    match (a.from, to.encoding()) {
        (Some(Format::FioIolog), None) => bail!("fio iolog to fio iolog: nothing to convert"),
        (Some(Format::FioIolog), Some(enc)) => {
            let policy = Policy {
                skip_bad: a.skip_bad,
                ..Policy::default()
            };
            let w = sink.writer()?;
            let report =
                import::fio::import_fio(&a.file, policy, |h| TraceWriter::new(w, enc, &h))?;
            for b in &report.first_skipped {
                tracing::warn!("skipped {b}");
            }
            if report.skipped > 0 {
                tracing::warn!("skipped {} bad line(s) in all", report.skipped);
            }
            for w in &report.warnings {
                tracing::info!("{w}");
            }
            tracing::info!("{}: imported {} events", label(&a.file), report.events);
        }
        (_, None) => {
            let reader = open_trace(a).context("cannot read the input trace")?;
            let w = sink.writer()?;
            let r = import::fio::export_fio_v3(reader.events(), |v| v.to_owned(), w)?;
            if r.skipped > 0 {
                tracing::info!(
                    "{} non-I/O events have no fio equivalent and were left out",
                    r.skipped
                );
            }
            tracing::info!("exported {} I/Os on {} file(s)", r.ios, r.files.len());
        }
        (_, Some(enc)) => {
            let reader = open_trace(a).context("cannot read the input trace")?;
            let mut writer = TraceWriter::new(sink.writer()?, enc, reader.header())?;
            let mut n = 0u64;
            for item in reader {
                let (ev, _) = item?;
                writer.write(&ev)?;
                n += 1;
                if n.is_multiple_of(65_536) {
                    pb.set_position(n);
                }
            }
            writer.finish()?;
            tracing::info!(
                "{} → {} ({enc}): {n} events",
                label(&a.file),
                a.output.display()
            );
        }
    }
    pb.finish_and_clear();
    Ok(())
}
