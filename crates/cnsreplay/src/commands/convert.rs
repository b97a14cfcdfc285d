//! `cnsreplay convert`: streaming and lossless; the first bad event stops it.
//!
//! The output goes to a temporary file beside the target and is renamed into place only when
//! complete, so an interrupted or failed conversion never leaves a half-written trace under
//! the requested name.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use trace_format::{Encoding, TraceWriter};

use super::{label, open_or_fail, spinner};
use crate::cli::ConvertArgs;

pub(crate) fn run(a: &ConvertArgs, _out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let to_stdout = a.output == Path::new("-");
    let encoding = match a.to.map(Encoding::from) {
        Some(e) => e,
        None if to_stdout => bail!("writing to stdout: say the encoding with --to"),
        None => Encoding::from_path(&a.output).with_context(|| {
            format!(
                "cannot tell the output encoding from {}; use a .yaml, .jsonl or .cnsbin name or --to",
                a.output.display()
            )
        })?,
    };
    let reader = open_or_fail(&a.input)?;
    let header = reader.header().clone();
    let tmp = (!to_stdout).then(|| temp_name(&a.output));
    let mut writer = match &tmp {
        Some(t) => TraceWriter::create(t, Some(encoding), &header)?,
        None => TraceWriter::new(std::io::stdout(), encoding, &header)?,
    };
    let pb = spinner("converting");
    let result = (|| -> anyhow::Result<u64> {
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
        Ok(n)
    })();
    pb.finish_and_clear();
    match (result, &tmp) {
        (Ok(n), Some(t)) => {
            fs_err::rename(t, &a.output)?;
            tracing::info!(
                "{} → {} ({encoding}): {n} events",
                label(&a.input.file),
                a.output.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        (Ok(_), None) => Ok(ExitCode::SUCCESS),
        (Err(e), tmp) => {
            if let Some(t) = tmp {
                let _ = fs_err::remove_file(t);
            }
            match e.downcast::<trace_format::Error>() {
                Ok(trace_format::Error::Invalid(d)) => {
                    tracing::error!("{d}");
                    tracing::error!("nothing written: conversion stops at the first problem");
                    Ok(ExitCode::from(1))
                }
                Ok(other) => Err(other.into()),
                Err(e) => Err(e),
            }
        }
    }
}

fn temp_name(out: &Path) -> PathBuf {
    let mut name = out.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".partial-{}", std::process::id()));
    out.with_file_name(name)
}
