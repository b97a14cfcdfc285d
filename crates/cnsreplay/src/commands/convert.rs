//! `cnsreplay convert`: between trace encodings, from foreign formats, and to fio.
//!
//! Streaming and lossless between trace encodings; the first bad event stops it, and so does
//! the first problem `validate`'s checker finds, in the same pass: a trace read, exported to
//! fio, or made by an import (`--no-check` skips the checker). An export to fio of a trace
//! without `io` events is refused. Imports stop
//! at the first bad line unless `--skip-bad`, which counts and reports what it skipped. The
//! output is written through [`crate::output::Output`] (a temporary file beside the target,
//! renamed into place when complete; an output that is one of the inputs is refused), so an
//! interrupted or failed conversion never leaves a half-written file under the requested name.
//!
//! `--from auto` sniffs each input from its name and first bytes (see [`sniff`]) and logs
//! which format it chose; inputs that look like nothing known, or like different formats,
//! are refused. A blktrace per-CPU set (named as `--from blktrace` takes it) is recognised
//! before sniffing and read as `--from blktrace` reads it ([`auto_blktrace_set`]).
//!
//! Imports and `--from auto` take any input a user can name: a file, a pipe, stdin (`-`), a
//! gzip or zstd file ([`import::input`] spools what cannot be read twice as it is). An import
//! that finds no event in an input that had bytes is an error, never "imported 0 events".

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use import::input::Inputs;
use import::{ImportError, ImportReport, Policy, Source};
use trace_format::{Encoding, Header, TraceReader, TraceWriter};

use super::{checked, label, spinner};
use crate::commands::args::parse_duration;
use crate::output::Output;

/// `convert`.
#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// The inputs (`-` for stdin, trace encodings only). Several inputs are merged by time
    /// where the format allows it (msr, alibaba, tencent, k8s-audit, blktrace per-CPU files).
    #[arg(required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Input format; by default a trace encoding from the name (.yaml, .jsonl, .cnsbin) or
    /// content. `auto` sniffs every input and says what it chose.
    #[arg(long, value_enum)]
    pub from: Option<Format>,
    /// Output file (`-` for stdout). Written to a temporary name and renamed when complete.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Output format; by default the trace encoding implied by the output file name.
    #[arg(long, value_enum)]
    pub to: Option<OutFormat>,
    /// Importing: skip malformed lines (counted and the first few reported) instead of
    /// stopping at the first.
    #[arg(long)]
    pub skip_bad: bool,
    /// Importing alibaba: the `device_size.csv` file giving each device's capacity.
    #[arg(long, value_name = "FILE")]
    pub device_sizes: Option<PathBuf>,
    /// Importing k8s-audit: keep failed requests (code >= 400) instead of dropping them.
    #[arg(long)]
    pub keep_failed: bool,
    /// Importing k8s-audit: how far a request may be out of order in its file (an API server
    /// logs requests as they complete, stamped when received); one further back is bad input.
    #[arg(long, value_name = "DUR", default_value = "120s", value_parser = parse_duration)]
    pub reorder_window: u64,
    /// Importing k8s-audit: how long an attach waits for its pod's binding and its volumes'
    /// VolumeAttachments to report attached (its observed time) before it is written without.
    #[arg(long, value_name = "DUR", default_value = "10m", value_parser = parse_duration)]
    pub attach_horizon: u64,
    /// Skip the check of what is converted (`validate`'s checker, in the same pass: a trace
    /// read, or the trace an import makes) for an input checked already.
    #[arg(long)]
    pub no_check: bool,
}

/// Formats `convert` writes: the trace encodings and fio's iolog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutFormat {
    /// A YAML trace.
    Yaml,
    /// A JSON Lines trace.
    Jsonl,
    /// A binary trace (`.cnsbin`).
    Binary,
    /// A fio version 3 iolog of the trace's `io` events, for `fio --read_iolog`.
    FioIolog,
}

impl From<OutFormat> for Format {
    fn from(f: OutFormat) -> Self {
        match f {
            OutFormat::Yaml => Format::Yaml,
            OutFormat::Jsonl => Format::Jsonl,
            OutFormat::Binary => Format::Binary,
            OutFormat::FioIolog => Format::FioIolog,
        }
    }
}

/// Formats `convert` reads and writes: the trace encodings, and foreign formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A YAML trace.
    Yaml,
    /// A JSON Lines trace.
    Jsonl,
    /// A binary trace (`.cnsbin`).
    Binary,
    /// fio iolog, version 2 or 3 (`--write_iolog`); written as version 3 for `--read_iolog`.
    FioIolog,
    /// blktrace binary per-CPU files: give the NAME prefix or any `NAME.blktrace.N` file.
    Blktrace,
    /// blkparse text output in its default format.
    Blkparse,
    /// MSR Cambridge block CSV.
    Msr,
    /// Alibaba block-trace CSV (see --device-sizes).
    Alibaba,
    /// Tencent CBS block CSV.
    Tencent,
    /// Kubernetes audit log (audit.k8s.io/v1 JSON lines; GKE and AKS wrappers).
    #[value(name = "k8s-audit")]
    K8sAudit,
    /// Pod lifecycle CSV (Alibaba GPU 2023 pod list, or name,creation_time,deletion_time).
    PodCsv,
    /// Sniff each input's format (import formats and trace encodings).
    Auto,
}

impl Format {
    /// The trace encoding, if this is one.
    pub fn encoding(self) -> Option<Encoding> {
        match self {
            Format::Yaml => Some(Encoding::Yaml),
            Format::Jsonl => Some(Encoding::Jsonl),
            Format::Binary => Some(Encoding::Binary),
            _ => None,
        }
    }
}

/// Where the output goes: an [`Output`] (a temporary file renamed on success), or stdout.
enum Sink {
    File(Output),
    Stdout,
}

impl Sink {
    fn writer(&self) -> anyhow::Result<Box<dyn Write + Send>> {
        Ok(match self {
            Sink::File(o) => Box::new(o.file()?),
            Sink::Stdout => Box::new(std::io::stdout()),
        })
    }
}

pub(crate) fn run(a: &ConvertArgs, _out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let to = match a.to {
        Some(f) => Format::from(f),
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
    // A blktrace per-CPU set (a `NAME.blktrace.N` file, several, or the NAME prefix) is
    // recognised before sniffing, so `--from auto` reads it exactly as `--from blktrace` does.
    let given = match a.from {
        Some(Format::Auto) if auto_blktrace_set(&a.files).is_some() => Some(Format::Blktrace),
        f => f,
    };
    // Imports read their inputs twice and sniffing reads their first bytes: pipes, stdin and
    // compressed inputs are spooled first (blktrace's per-CPU sets are found as files; one
    // blktrace stream is spooled and split by CPU).
    if let Some(f @ (Format::FioIolog | Format::Blkparse | Format::PodCsv)) = given {
        one(a, &format_name(f))?;
    }
    let spool = matches!(given, Some(f) if f == Format::Auto
        || (f.encoding().is_none() && f != Format::Blktrace)
        || (f == Format::Blktrace && blktrace_stream(&a.files)));
    let mut inputs = Inputs::new();
    let sources = if spool {
        Some(inputs.prepare_all(&a.files)?)
    } else {
        None
    };
    if inputs.spooled > 0 {
        tracing::info!(
            "{} input(s) spooled (pipes, stdin or compressed)",
            inputs.spooled
        );
    }
    let from = match (given, &sources) {
        (Some(Format::Auto), Some(src)) => Some(sniff_all(src)?),
        (other, _) => other,
    };
    let sink = if a.output == Path::new("-") {
        Sink::Stdout
    } else {
        let inputs: Vec<&Path> = a
            .files
            .iter()
            .map(PathBuf::as_path)
            .chain(a.device_sizes.as_deref())
            .collect();
        Sink::File(Output::create(&a.output, &inputs)?)
    };
    match convert(a, sources.as_deref(), from, to, &sink) {
        Ok(()) => {
            if let Sink::File(o) = sink {
                o.commit()?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            drop(sink);
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

/// The single input of a format that reads one file.
fn one(a: &ConvertArgs, what: &str) -> anyhow::Result<PathBuf> {
    match a.files.as_slice() {
        [f] => Ok(f.clone()),
        _ => bail!("{what} reads one input; {} were given", a.files.len()),
    }
}

fn open_trace(
    a: &ConvertArgs,
    sources: Option<&[Source]>,
    from: Option<Format>,
) -> anyhow::Result<TraceReader> {
    let enc = from.and_then(Format::encoding);
    let file = one(a, "converting a trace")?;
    Ok(match sources {
        // Sniffed (and perhaps spooled) already: read what was sniffed.
        Some([src @ Source::Spooled { .. }]) => {
            TraceReader::from_reader(src.open()?, enc, src.name())?
        }
        _ if file == Path::new("-") => TraceReader::from_reader(std::io::stdin(), enc, "<stdin>")?,
        _ => TraceReader::open_as(&file, enc)?,
    })
}

/// The one source of a format that reads one input.
fn one_source<'a>(sources: &'a [Source], what: &str) -> anyhow::Result<&'a Source> {
    match sources {
        [s] => Ok(s),
        _ => bail!("{what} reads one input; {} were given", sources.len()),
    }
}

/// Logs what an import skipped and noted.
fn log_report(inputs: &[PathBuf], r: &ImportReport) {
    for b in &r.first_skipped {
        tracing::warn!("skipped {b}");
    }
    if r.skipped > 0 {
        tracing::warn!("skipped {} bad line(s) in all", r.skipped);
    }
    for w in &r.warnings {
        tracing::info!("{w}");
    }
    let names: Vec<String> = inputs.iter().map(|p| label(p)).collect();
    tracing::info!("{}: imported {} events", names.join(", "), r.events);
}

fn convert(
    a: &ConvertArgs,
    sources: Option<&[Source]>,
    from: Option<Format>,
    to: Format,
    sink: &Sink,
) -> anyhow::Result<()> {
    let pb = spinner("converting");
    let policy = Policy {
        skip_bad: a.skip_bad,
        ..Policy::default()
    };
    match (from, to.encoding()) {
        (Some(f), None) if f.encoding().is_none() => {
            bail!("{f:?} to fio iolog: import into a trace first, then export it")
        }
        (Some(f), Some(enc)) if f.encoding().is_none() => {
            let w = sink.writer()?;
            // What an import makes goes through the checker before it is written (an
            // importer never writes a trace `validate` rejects; this makes sure of it).
            let made = format!("the trace imported into {}", label(&a.output));
            let check = !a.no_check;
            let factory = move |h: Header| {
                let w = TraceWriter::new(w, enc, &h)?;
                if check { w.checking(&h, made) } else { Ok(w) }
            };
            let files = &a.files;
            let given = Source::files(files);
            let src = sources.unwrap_or(&given);
            // Audit events read, for a log that holds no storage request at all.
            let mut audit_events = None;
            let report = match f {
                Format::FioIolog => {
                    import::fio::import_fio_source(one_source(src, "fio-iolog")?, policy, factory)?
                }
                Format::Blktrace if sources.is_some() => {
                    let s = one_source(src, "a blktrace stream")?;
                    tracing::info!("blktrace: one stream, split by CPU");
                    import::blk::import_blktrace_stream(s, policy, factory)?
                }
                Format::Blktrace => {
                    let cpus = blktrace_files(files)?;
                    tracing::info!("blktrace: reading {} per-CPU file(s)", cpus.len());
                    import::blk::import_blktrace(&cpus, policy, factory)?
                }
                Format::Blkparse => import::blk::import_blkparse_source(
                    one_source(src, "blkparse")?,
                    policy,
                    factory,
                )?,
                Format::Msr => import::blockcsv::import_msr_sources(src, policy, factory)?,
                Format::Alibaba => import::blockcsv::import_alibaba_sources(
                    src,
                    a.device_sizes.as_deref(),
                    policy,
                    factory,
                )?,
                Format::Tencent => import::blockcsv::import_tencent_sources(src, policy, factory)?,
                Format::K8sAudit => {
                    let opts = import::audit::AuditOptions {
                        keep_failed: a.keep_failed,
                        reorder_window: a.reorder_window,
                        attach_horizon: a.attach_horizon,
                    };
                    let (report, counts) =
                        import::audit::import_audit_sources(src, opts, policy, factory)?;
                    audit_events = Some(counts.events);
                    report
                }
                Format::PodCsv => {
                    let (trace, report) =
                        import::pods::import_pods_source(one_source(src, "pod-csv")?, &policy)?;
                    let mut w = factory(trace.header)?;
                    for e in &trace.events {
                        w.write(e)?;
                    }
                    w.finish()?;
                    report
                }
                Format::Yaml | Format::Jsonl | Format::Binary | Format::Auto => {
                    bail!("{f:?} is not an import format")
                }
            };
            if a.device_sizes.is_some() && f != Format::Alibaba {
                tracing::warn!("--device-sizes applies to alibaba imports only; ignored");
            }
            log_report(files, &report);
            if let Some(n) = audit_events.filter(|&n| n > 0 && report.events == 0) {
                // The log is well formed but recorded no storage work (warnings say what it
                // had): nothing to import is a problem of this input (exit 1).
                return Err(crate::InputProblem(format!(
                    "{}: no storage requests (PVC/pod/snapshot) found in {n} audit events: \
                     nothing to import",
                    src.iter().map(Source::name).collect::<Vec<_>>().join(", ")
                ))
                .into());
            }
            if report.events == 0 && report.skipped == 0 && any_bytes(src)? {
                return Err(crate::InputProblem(format!(
                    "{}: the input has data but no {} event was found in it",
                    src.iter().map(Source::name).collect::<Vec<_>>().join(", "),
                    format_name(f)
                ))
                .into());
            }
        }
        (_, None) => {
            let reader = open_trace(a, sources, from).context("cannot read the input trace")?;
            let input = label(&one(a, "converting a trace")?);
            let events = checked(reader, &input, a.no_check)?.events();
            let w = sink.writer()?;
            let r = import::fio::export_fio_v3(events, |v| v.to_owned(), w)?;
            if r.ios == 0 {
                // An iolog without I/O would replay nothing: refused, nothing written.
                bail!(
                    "{input}: no `io` event to export as a fio iolog ({} events, none a single \
                     I/O request; `io_phase` units are generated at replay and have no iolog \
                     form): nothing written",
                    r.skipped
                );
            }
            if r.skipped > 0 {
                tracing::info!(
                    "{} non-I/O events have no fio equivalent and were left out",
                    r.skipped
                );
            }
            tracing::info!("exported {} I/Os on {} file(s)", r.ios, r.files.len());
        }
        (_, Some(enc)) => {
            let reader = open_trace(a, sources, from).context("cannot read the input trace")?;
            let input = label(&one(a, "converting a trace")?);
            let mut writer = TraceWriter::new(sink.writer()?, enc, reader.header())?;
            let mut n = 0u64;
            for item in checked(reader, &input, a.no_check)? {
                let (ev, _) = item?;
                writer.write(&ev)?;
                n += 1;
                if n.is_multiple_of(65_536) {
                    pb.set_position(n);
                }
            }
            writer.finish()?;
            let input = a.files.first().map(|p| label(p)).unwrap_or_default();
            tracing::info!("{input} → {} ({enc}): {n} events", a.output.display());
        }
    }
    pb.finish_and_clear();
    Ok(())
}

/// Whether the blktrace input is one stream of every CPU's records (`blktrace -o -`): stdin,
/// a pipe, or a file not named `NAME.blktrace.N` beside which no `NAME.blktrace.N` exists.
fn blktrace_stream(args: &[PathBuf]) -> bool {
    let [arg] = args else { return false };
    if arg == Path::new("-") || !arg.is_file() {
        return arg.exists() || arg == Path::new("-");
    }
    let name = arg.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name
        .rsplit_once(".blktrace.")
        .is_some_and(|(_, cpu)| cpu.parse::<u32>().is_ok())
    {
        return false;
    }
    let dir = arg.parent().filter(|d| !d.as_os_str().is_empty());
    let prefix = format!("{name}.blktrace.");
    let siblings = fs_err::read_dir(dir.unwrap_or(Path::new("."))).map(|rd| {
        rd.flatten().any(|e| {
            e.file_name()
                .to_str()
                .and_then(|f| f.strip_prefix(&prefix))
                .is_some_and(|c| c.parse::<u32>().is_ok())
        })
    });
    !siblings.unwrap_or(false)
}

/// The CPU number of a `NAME.blktrace.N` file name.
fn blktrace_cpu(path: &Path) -> Option<u32> {
    let name = path.file_name()?.to_str()?;
    name.rsplit_once(".blktrace.")?.1.parse().ok()
}

/// For `--from auto`: the per-CPU files `--from blktrace` would read for `args`, when the
/// args name a per-CPU set (one `NAME.blktrace.N` file, several of them as a shell glob gives
/// them, the NAME prefix, or a file beside which `NAME.blktrace.N` files exist) and every
/// non-empty one of those files starts with the blktrace magic. Logs what it decided; `None`
/// leaves the inputs to sniffing (a single blktrace stream is sniffed there).
fn auto_blktrace_set(args: &[PathBuf]) -> Option<Vec<PathBuf>> {
    let named = match args {
        [] => false,
        [one] => one != Path::new("-") && !blktrace_stream(args),
        many => many.iter().all(|p| blktrace_cpu(p).is_some()),
    };
    if !named {
        return None;
    }
    let files = blktrace_files(args).ok()?;
    let mut with_data = 0;
    for f in &files {
        let mut head = Vec::with_capacity(4);
        let file = fs_err::File::open(f).ok()?;
        std::io::Read::read_to_end(&mut std::io::Read::take(file, 4), &mut head).ok()?;
        if head.is_empty() {
            continue;
        }
        if sniff(f, &head) != Some(Format::Blktrace) {
            return None;
        }
        with_data += 1;
    }
    if with_data == 0 {
        return None;
    }
    let given = match args {
        [one] => label(one),
        [first, .., last] => format!("{} … {} ({} inputs)", label(first), label(last), args.len()),
        [] => String::new(),
    };
    let cpus: Vec<u32> = files.iter().filter_map(|f| blktrace_cpu(f)).collect();
    let contiguous = cpus.windows(2).all(|w| w[1] == w[0] + 1);
    let set = match (files.first(), cpus.first(), cpus.last()) {
        (Some(f), Some(lo), Some(hi)) if contiguous && files.len() > 1 => {
            let shown = label(f);
            let base = shown.strip_suffix(&lo.to_string()).unwrap_or(&shown);
            format!("{base}{lo}..{hi}")
        }
        _ => files
            .iter()
            .map(|f| label(f))
            .collect::<Vec<_>>()
            .join(", "),
    };
    let n = files.len();
    tracing::info!(
        "{given}: detected blktrace: the per-CPU files {set} ({n} file{}, {with_data} with \
         records), read as --from blktrace reads them",
        if n == 1 { "" } else { "s" }
    );
    Some(files)
}

/// The per-CPU files of a blktrace recording: each argument is a `NAME.blktrace.N` file
/// (all of them are used when several are given) or, alone, a NAME prefix or one per-CPU
/// file, whose siblings `NAME.blktrace.0`, `.1`, … are found in its directory.
fn blktrace_files(args: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    if args.len() > 1 {
        return Ok(args.to_vec());
    }
    let Some(arg) = args.first() else {
        bail!("blktrace: no input");
    };
    let name = arg.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let base = match name.rsplit_once(".blktrace.") {
        Some((base, cpu)) if cpu.parse::<u32>().is_ok() => base,
        _ => name,
    };
    let dir = arg.parent().unwrap_or(Path::new("")).to_owned();
    let listed = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir.as_path()
    };
    let mut found: Vec<(u32, PathBuf)> = Vec::new();
    for entry in fs_err::read_dir(listed)? {
        let entry = entry?;
        let file = entry.file_name();
        let Some(cpu) = file
            .to_str()
            .and_then(|f| f.strip_prefix(base))
            .and_then(|f| f.strip_prefix(".blktrace."))
            .and_then(|c| c.parse::<u32>().ok())
        else {
            continue;
        };
        found.push((cpu, dir.join(&file)));
    }
    if found.is_empty() {
        bail!(
            "no blktrace files {base}.blktrace.N in {}; give the NAME prefix or one per-CPU file",
            listed.display()
        );
    }
    found.sort();
    Ok(found.into_iter().map(|(_, p)| p).collect())
}

/// Whether any source has at least one byte.
fn any_bytes(sources: &[Source]) -> anyhow::Result<bool> {
    for s in sources {
        if !std::io::BufRead::fill_buf(&mut s.open()?)?.is_empty() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Sniffs every input (spooled and decompressed already); they must agree.
fn sniff_all(sources: &[Source]) -> anyhow::Result<Format> {
    let mut chosen: Option<Format> = None;
    for src in sources {
        let name = src.name();
        let mut head = Vec::with_capacity(4096);
        std::io::Read::read_to_end(&mut std::io::Read::take(src.open()?, 4096), &mut head)?;
        // `x.yaml.gz` was decompressed when spooled: sniff it as `x.yaml`.
        let plain = [".gz", ".zst"]
            .iter()
            .find_map(|x| name.strip_suffix(x))
            .unwrap_or(&name);
        let Some(fmt) = sniff(Path::new(plain), &head) else {
            bail!("--from auto: cannot tell the format of {name}; name it with --from");
        };
        tracing::info!("{name}: format {} (sniffed)", format_name(fmt));
        match chosen {
            Some(c) if c != fmt => bail!(
                "--from auto: inputs look like different formats ({} and {}); convert them \
                 separately",
                format_name(c),
                format_name(fmt)
            ),
            _ => chosen = Some(fmt),
        }
    }
    chosen.context("no input")
}

fn format_name(f: Format) -> String {
    ValueEnum::to_possible_value(&f)
        .map(|v| v.get_name().to_owned())
        .unwrap_or_default()
}

/// Guesses an input's format from its name and first bytes; `None` when unsure.
pub(crate) fn sniff(path: &Path, head: &[u8]) -> Option<Format> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    const BLK_MAGIC: u32 = 0x6561_7400;
    if let Some(m) = head.get(..4).and_then(|b| <[u8; 4]>::try_from(b).ok()) {
        let (le, be) = (u32::from_le_bytes(m), u32::from_be_bytes(m));
        if le & !0xff == BLK_MAGIC || be & !0xff == BLK_MAGIC {
            return Some(Format::Blktrace);
        }
    }
    if head.starts_with(trace_format::MAGIC) {
        return Some(Format::Binary);
    }
    let text = match std::str::from_utf8(head) {
        Ok(t) => t,
        // Cut in the middle of a character: use the valid prefix.
        Err(e) => std::str::from_utf8(head.get(..e.valid_up_to())?).ok()?,
    };
    let first = text.lines().find(|l| !l.trim().is_empty())?.trim();
    if first.starts_with("fio version 2 iolog") || first.starts_with("fio version 3 iolog") {
        return Some(Format::FioIolog);
    }
    if first.starts_with('{') {
        if first.contains("\"cnsreplay-trace\"") {
            return Some(Format::Jsonl);
        }
        let audit = [
            "\"auditID\"",
            "\"stage\"",
            "\"protoPayload\"",
            "\"kube-audit",
            "\"records\"",
        ];
        // A pretty-printed document (`{` alone on its first line, e.g. an AKS
        // `{"records": […]}` export) is judged by the keys in the first 4 KiB.
        let judged = if first == "{" { text } else { first };
        return audit
            .iter()
            .any(|k| judged.contains(k))
            .then_some(Format::K8sAudit);
    }
    if matches!(Encoding::from_path(path), Some(Encoding::Yaml)) || first.starts_with("format:") {
        return Some(Format::Yaml);
    }
    let fields: Vec<&str> = first.split(',').map(str::trim).collect();
    let num = |i: usize| {
        fields
            .get(i)
            .is_some_and(|f| !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()))
    };
    if fields.contains(&"name") && fields.contains(&"creation_time") {
        return Some(Format::PodCsv);
    }
    match fields.len() {
        7 if num(0) && num(2) && num(4) && num(5) && num(6) => {
            let ty = fields.get(3)?.to_ascii_lowercase();
            (ty == "read" || ty == "write").then_some(Format::Msr)
        }
        5 if num(0)
            && num(2)
            && num(3)
            && num(4)
            && matches!(fields.get(1), Some(&("R" | "W"))) =>
        {
            Some(Format::Alibaba)
        }
        5 if (0..5).all(num) && matches!(fields.get(3), Some(&("0" | "1"))) => {
            Some(Format::Tencent)
        }
        _ => {
            // blkparse: `MAJ,MIN CPU SEQ SECS.NANOS PID ACTION …`.
            let mut w = first.split_ascii_whitespace();
            let dev = w.next()?;
            let ok = dev
                .split_once(',')
                .is_some_and(|(a, b)| a.parse::<u32>().is_ok() && b.parse::<u32>().is_ok())
                && w.next()?.parse::<u32>().is_ok()
                && w.next()?.parse::<u64>().is_ok()
                && w.next()?
                    .split_once('.')
                    .is_some_and(|(_, ns)| ns.len() == 9);
            (ok || name.ends_with(".blkparse")).then_some(Format::Blkparse)
        }
    }
}
