//! `cnsreplay trace`: tools that make a trace from traces (`slice`, `rewrite`, `merge`).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use trace_format::TraceWriter;
use trace_format::slice::{Filter, Window, busiest, slice};
use trace_format::units::{fmt_secs, parse_duration};

use super::{checked, label, open_or_fail};
use crate::commands::args::{EncodingArg, InputArgs, IoRateArg};
use crate::output::Output;

/// `trace`.
#[derive(Debug, Args)]
pub struct TraceArgs {
    /// The tool.
    #[command(subcommand)]
    pub tool: TraceTool,
}

/// The trace tools.
#[derive(Debug, Subcommand)]
pub enum TraceTool {
    /// Cut a time window out of a trace: events in [START, END) shifted to start at 0, volumes
    /// alive and workloads running at the cut declared in the header, events needing a
    /// snapshot taken before the window dropped and counted; optionally only some tenants or op types
    /// (docs/trace-format.md, Trace tools).
    Slice(SliceArgs),
    /// Rewrite a trace for the cluster it will meet: times divided by `--speed K`, names
    /// replaced by `--map KIND:FROM=TO` (storage-class, snapshot-class, node, tenant);
    /// streaming, lossless where nothing was asked to change.
    #[command(visible_aliases = ["scale", "map"])]
    Rewrite(RewriteArgs),
    /// Merge traces onto one clock: each input's volumes, workloads and snapshots prefixed
    /// (`t1-`, `t2-`, … or `--prefix`), cluster names shared, header defaults the inputs
    /// disagree on written into their events, ids renumbered in merged order; streaming.
    Merge(MergeArgs),
    /// Split a trace into parts for several drivers started on one instant (`run
    /// --start-at`): by tenant (DIR/TENANT.EXT, or DIR/part-K.EXT with --parts) or by lineage
    /// (a volume with its snapshots, restores, clones and the workloads mounting it in one
    /// part; DIR/part-K.EXT); each part with its events, the declared objects they use and
    /// every marker; ids and times kept. The trace is checked in the first pass.
    Split(SplitArgs),
}

/// `trace split`.
#[derive(Debug, Args)]
pub struct SplitArgs {
    /// The trace (read twice: a file, not a pipe).
    pub input: PathBuf,
    /// Output directory (created); one trace per part in it.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Encoding of the parts.
    #[arg(long, value_enum, default_value = "binary")]
    pub to: EncodingArg,
    /// What a part keeps together: each tenant's events, or each lineage's (objects joined
    /// by the events naming them together). Default: tenant when the trace has two or more
    /// tenants that share no object (and at least --parts of them), else lineage.
    #[arg(long, value_enum)]
    pub by: Option<SplitBy>,
    /// Number of parts, the tenants or lineages balanced over them by their events; refused
    /// when the trace has fewer. Default: one part per tenant; a split by lineage needs it.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub parts: Option<u32>,
    /// Skip the check of the trace in the first pass (`validate`'s checker) for a trace
    /// checked already.
    #[arg(long)]
    pub no_check: bool,
    /// Print the report as JSON (schema: docs/schemas/trace-split.schema.json).
    #[arg(long)]
    pub json: bool,
}

/// `trace split --by`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SplitBy {
    /// Each tenant's events in one part (refused when two tenants use one object).
    Tenant,
    /// Each lineage's events in one part.
    Lineage,
}

/// `trace merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The traces (two or more; `-` for at most one of them).
    #[arg(required = true, num_args = 2..)]
    pub inputs: Vec<PathBuf>,
    /// Output trace (encoding from its name: .yaml, .jsonl, .cnsbin).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Prefix of each input's objects, in input order (repeatable; default `t1-`, `t2-`, …).
    #[arg(long, value_name = "PREFIX")]
    pub prefix: Vec<String>,
    /// Put the inputs on one clock by their start (all at 0) or by their header origins.
    #[arg(long, value_enum, default_value = "start")]
    pub align: AlignArg,
    /// Print the report as JSON (schema: docs/schemas/trace-merge.schema.json).
    #[arg(long)]
    pub json: bool,
}

/// `trace merge --align`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AlignArg {
    /// Every input starts at 0.
    Start,
    /// By the header origins: the earliest starts at 0 (each input needs one).
    Origin,
}

/// `trace rewrite`.
#[derive(Debug, Args)]
pub struct RewriteArgs {
    /// The trace.
    #[command(flatten)]
    pub input: InputArgs,
    /// Output trace (encoding from its name: .yaml, .jsonl, .cnsbin).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Compress the trace by this factor (2 = twice as fast): every event time and every
    /// `io_phase` duration is divided by it, as `run --speed` does.
    #[arg(long, value_name = "K")]
    pub speed: Option<f64>,
    /// What `--speed` does to `io_phase` open-loop rates: `keep` them or `scale` them by K.
    #[arg(long, value_enum, default_value_t = IoRateArg::Keep, requires = "speed")]
    pub io_rate: IoRateArg,
    /// Replace a name: `storage-class:gold=fast`, `snapshot-class:a=b`, `node:n1=worker-7`,
    /// `tenant:prod=bench` (or `namespace:`); repeatable.
    #[arg(long = "map", value_name = "KIND:FROM=TO")]
    pub maps: Vec<String>,
    /// Skip the check of the trace as it is read (`validate`'s checker, same pass) for a
    /// trace checked already.
    #[arg(long)]
    pub no_check: bool,
    /// Print the report as JSON (schema: docs/schemas/trace-rewrite.schema.json).
    #[arg(long)]
    pub json: bool,
}

/// `trace slice`.
#[derive(Debug, Args)]
pub struct SliceArgs {
    /// The trace.
    #[command(flatten)]
    pub input: InputArgs,
    /// Output trace (encoding from its name: .yaml, .jsonl, .cnsbin).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Window start, trace time (e.g. `90s`, `1h`).
    #[arg(long, value_name = "DURATION", conflicts_with = "busiest")]
    pub start: Option<String>,
    /// Window end (exclusive), trace time; default: the end of the trace.
    #[arg(long, value_name = "DURATION", conflicts_with = "busiest")]
    pub end: Option<String>,
    /// Instead of START/END: the window of this length holding the most events.
    #[arg(long, value_name = "DURATION")]
    pub busiest: Option<String>,
    /// Keep only this tenant's events (the event's tenant, else the header's default
    /// namespace); repeatable. Events needing an object a left-out event made are dropped
    /// and counted too.
    #[arg(long, value_name = "TENANT")]
    pub tenant: Vec<String>,
    /// Keep only events of this op type (`io`, `attach`, …); repeatable, as `--tenant`.
    #[arg(long = "op", value_name = "OP")]
    pub ops: Vec<String>,
    /// Skip the check of the trace (`validate`'s checker, in the same pass, then on to the
    /// trace's end) for a trace checked already.
    #[arg(long)]
    pub no_check: bool,
    /// Print the report as JSON (schema: docs/schemas/trace-slice.schema.json).
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn run(a: &TraceArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    match &a.tool {
        TraceTool::Slice(s) => run_slice(s, out),
        TraceTool::Rewrite(r) => run_rewrite(r, out),
        TraceTool::Merge(m) => run_merge(m, out),
        TraceTool::Split(s) => run_split(s, out),
    }
}

fn run_split(a: &SplitArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    use trace_format::split::{By, SplitOptions};
    let enc = trace_format::Encoding::from(a.to);
    if a.input.as_os_str() == "-" {
        bail!("trace split reads its input twice: give a file, not stdin");
    }
    let file = label(&a.input);
    let open =
        || trace_format::TraceReader::open(&a.input).with_context(|| format!("cannot read {file}"));
    // The first pass decides the parts and goes through the checker; the second writes.
    let first = checked(open()?, &file, a.no_check)?;
    let second = open()?;
    let mut header = second.header().clone();
    // Each part says which trace it is a part of, so that the parts' runs merge back and
    // nothing else does (`merge-runs`).
    let sha =
        replay::rundir::sha256_file(&a.input).with_context(|| format!("cannot read {file}"))?;
    trace_format::split_part::stamp_original(&mut header, &sha);
    let opts = SplitOptions {
        by: a.by.map(|b| match b {
            SplitBy::Tenant => By::Tenant,
            SplitBy::Lineage => By::Lineage,
        }),
        parts: a.parts.map(|n| n as usize),
    };
    let created = !a.output.exists();
    fs_err::create_dir_all(&a.output)?;
    let ext = match enc {
        trace_format::Encoding::Yaml => "yaml",
        trace_format::Encoding::Jsonl => "jsonl",
        trace_format::Encoding::Binary => "cnsbin",
    };
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    let mut outputs: Vec<Output> = Vec::new();
    let (writers, report) = trace_format::split::split(
        &header,
        first.events(),
        second.events(),
        opts,
        |part, h| {
            let path = part_path(&a.output, part, ext, &files);
            files.push((part.to_owned(), path.clone()));
            let out = Output::create(&path, &[&a.input]).map_err(into_trace_error)?;
            let w = TraceWriter::new(out.file().map_err(into_trace_error)?, enc, h);
            outputs.push(out);
            w
        },
        |w, ev| w.write(ev),
    )
    .inspect_err(|_| {
        // Remove the parts' temporary files, and the directory when it was made for them.
        outputs.clear();
        if created {
            let _ = std::fs::remove_dir(&a.output);
        }
    })
    .with_context(|| format!("splitting {file}"))?;
    for (part, w) in writers {
        w.finish()
            .with_context(|| format!("writing the part {part}"))?;
    }
    for o in outputs {
        o.commit()?;
    }
    for w in &report.warnings {
        tracing::warn!("{file}: {w}");
    }
    if a.json {
        serde_json::to_writer_pretty(&mut *out, &report)?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let by = match report.by {
        By::Tenant => "tenant",
        By::Lineage => "lineage",
    };
    writeln!(
        out,
        "{file}: {} events ({} markers, copied into every part) split by {by} into {} part{} \
         ({})",
        report.events,
        report.markers,
        report.parts.len(),
        if report.parts.len() == 1 { "" } else { "s" },
        report.reason
    )?;
    for (part, path) in &files {
        let r = report.parts.get(part).cloned().unwrap_or_default();
        let what = match report.by {
            By::Tenant => format!("tenants {:?}", r.tenants),
            By::Lineage => format!("{} lineages", r.lineages),
        };
        writeln!(
            out,
            "  {}: {what}, {} events, {} declared volumes, {} declared workloads",
            path.display(),
            r.events,
            r.volumes,
            r.workloads
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A part's file: its name with anything but [A-Za-z0-9._-] as `_`, and a number when that
/// collides with a file made already.
fn part_path(dir: &std::path::Path, part: &str, ext: &str, made: &[(String, PathBuf)]) -> PathBuf {
    let mut stem: String = part
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if stem.is_empty() || stem.starts_with('.') {
        stem.insert(0, '_');
    }
    let mut path = dir.join(format!("{stem}.{ext}"));
    let mut n = 2;
    while made.iter().any(|(_, p)| *p == path) {
        path = dir.join(format!("{stem}-{n}.{ext}"));
        n += 1;
    }
    path
}

fn run_merge(a: &MergeArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    use trace_format::merge::{Align, Input, merge};
    if a.inputs.iter().filter(|p| p.as_os_str() == "-").count() > 1 {
        bail!("stdin can be only one of the inputs");
    }
    if !a.prefix.is_empty() && a.prefix.len() != a.inputs.len() {
        bail!(
            "--prefix given {} times for {} inputs: give one per input, or none",
            a.prefix.len(),
            a.inputs.len()
        );
    }
    let mut inputs = Vec::new();
    for (i, path) in a.inputs.iter().enumerate() {
        let input = InputArgs {
            file: path.clone(),
            from: None,
        };
        let reader = open_or_fail(&input)?;
        let source = label(path);
        let header = reader.header().clone();
        let prefix = a
            .prefix
            .get(i)
            .cloned()
            .unwrap_or_else(|| format!("t{}-", i + 1));
        // Read errors name the input already (the reader carries its label).
        let events = reader.events();
        inputs.push(Input {
            source,
            header,
            events,
            prefix,
        });
    }
    let align = match a.align {
        AlignArg::Start => Align::Start,
        AlignArg::Origin => Align::Origin,
    };
    let paths: Vec<&std::path::Path> = a.inputs.iter().map(|p| p.as_path()).collect();
    let enc = encoding_of(&a.output)?;
    let output = Output::create(&a.output, &paths)?;
    let (writer, report) = merge(
        inputs,
        align,
        |h| TraceWriter::new(output.file().map_err(into_trace_error)?, enc, h),
        |w, ev| w.write(ev),
    )
    .with_context(|| format!("merging into {}", a.output.display()))?;
    if !finish_report(writer, output, a.json, &report, out)? {
        writeln!(out, "{}: {} events", a.output.display(), report.events)?;
        for i in &report.inputs {
            writeln!(
                out,
                "  {}: {} events, prefix {:?}, starting at {}",
                i.source,
                i.events,
                i.prefix,
                fmt_secs(i.offset)
            )?;
        }
        for (field, n) in &report.materialized {
            writeln!(
                out,
                "header default {field} differs between inputs: written into {n} events"
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn run_rewrite(a: &RewriteArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    use trace_format::rewrite::{Rewrite, RewriteReport, parse_map};
    let file = label(&a.input.file);
    let mut rw = Rewrite {
        speed: a.speed,
        io_rate: a.io_rate.into(),
        ..Rewrite::default()
    };
    rw.check().map_err(|e| anyhow::anyhow!("--speed: {e}"))?;
    for m in &a.maps {
        let (kind, from, to) = parse_map(m).map_err(|e| anyhow::anyhow!("--map {e}"))?;
        if let Some(old) = rw.maps.entry(kind).or_default().insert(from.clone(), to) {
            bail!("--map {m:?}: {from:?} is already mapped to {old:?}");
        }
    }
    let enc = encoding_of(&a.output)?;
    let output = Output::create(&a.output, &[&a.input.file])?;
    let reader = open_or_fail(&a.input)?;
    let mut report = RewriteReport::default();
    let mut header = reader.header().clone();
    rw.header(&mut header, &mut report);
    let items = checked(reader, &file, a.no_check)?;
    let mut w = TraceWriter::new(output.file()?, enc, &header)
        .with_context(|| format!("cannot write {}", a.output.display()))?;
    for item in items {
        let (mut ev, loc) = item.with_context(|| format!("cannot read {file}"))?;
        if let Err(e) = rw.event(&mut ev, &mut report) {
            // The input is fine; the speed asked for does not fit it: exit 1, located.
            let d = trace_format::Diagnostic {
                file: file.clone(),
                location: loc,
                path: format!(
                    "events[{}].{}",
                    loc.record.unwrap_or(report.events),
                    e.field
                ),
                problem: e.problem,
            };
            tracing::error!("--speed: {d}");
            return Ok(ExitCode::from(1));
        }
        w.write(&ev)
            .with_context(|| format!("writing {}", a.output.display()))?;
    }
    if !finish_report(w, output, a.json, &report, out)? {
        writeln!(
            out,
            "{}: {} events from {file}{}",
            a.output.display(),
            report.events,
            a.speed
                .map(|k| format!(
                    ", times and io_phase durations divided by {k}, io_phase rates {}",
                    match a.io_rate {
                        IoRateArg::Keep => "kept".to_owned(),
                        IoRateArg::Scale => format!("multiplied by {k}"),
                    }
                ))
                .unwrap_or_default()
        )?;
        for (m, n) in &report.replaced {
            writeln!(out, "replaced {n}: {m}")?;
        }
        for (kind, m) in &rw.maps {
            for (from, to) in m {
                let key = format!("{}:{from}={to}", kind.name());
                if !report.replaced.contains_key(&key) {
                    writeln!(out, "never used: {key}")?;
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Ends the written trace and puts it in place, then prints the tool's report as JSON when
/// asked (true) — the caller prints its table otherwise.
fn finish_report(
    w: TraceWriter,
    output: Output,
    json: bool,
    report: &impl serde::Serialize,
    out: &mut dyn Write,
) -> anyhow::Result<bool> {
    w.finish()
        .with_context(|| format!("writing {}", output.path().display()))?;
    output.commit()?;
    if json {
        serde_json::to_writer_pretty(&mut *out, report)?;
        writeln!(out)?;
    }
    Ok(json)
}

/// The encoding an output's name implies (checked before anything is read or written).
fn encoding_of(path: &std::path::Path) -> anyhow::Result<trace_format::Encoding> {
    trace_format::Encoding::from_path(path).with_context(|| {
        format!(
            "{}: cannot tell the encoding; use a .yaml, .jsonl or .cnsbin name",
            path.display()
        )
    })
}

/// An output's error inside a trace tool's writer callback.
fn into_trace_error(e: anyhow::Error) -> trace_format::Error {
    match e.downcast::<std::io::Error>() {
        Ok(io) => trace_format::Error::Io(io),
        Err(e) => trace_format::Error::Io(std::io::Error::other(format!("{e:#}"))),
    }
}

fn dur(flag: &str, v: &str) -> anyhow::Result<u64> {
    parse_duration(v).map_err(|e| anyhow::anyhow!("{flag} {v:?}: {e}"))
}

fn run_slice(a: &SliceArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let file = label(&a.input.file);
    if a.input.file.as_os_str() == "-" && a.busiest.is_some() {
        bail!("--busiest reads the trace twice: give a file, not stdin");
    }
    let mut filter = Filter::default();
    for t in &a.tenant {
        filter.tenants.insert(t.as_str().into());
    }
    for o in &a.ops {
        let op = trace_format::OpType::from_name(o)
            .with_context(|| format!("--op {o:?}: unknown op type"))?;
        filter.ops.insert(op);
    }
    let window = match (&a.busiest, &a.start, &a.end) {
        (Some(len), _, _) => {
            let len = dur("--busiest", len)?;
            if len == 0 {
                bail!("--busiest: the window must be longer than 0");
            }
            // Two passes at once, the second trailing the first by the window: constant
            // memory however dense the trace.
            // The leading pass reads the whole trace: it is the one checked.
            let lead = checked(open_or_fail(&a.input)?, &file, a.no_check)?.events();
            let trail = open_or_fail(&a.input)?;
            match busiest(
                lead.map(|e| e.map(|e| e.at)),
                trail.events().map(|e| e.map(|e| e.at)),
                len,
            )
            .with_context(|| format!("cannot read {file}"))?
            {
                Some((w, _)) => w,
                None => bail!("{file}: the trace has no events"),
            }
        }
        (None, None, None) if filter == Filter::default() => {
            bail!("give --start and/or --end, --busiest, or a filter (--tenant, --op)")
        }
        (None, from, to) => {
            let from = from.as_deref().map_or(Ok(0), |v| dur("--start", v))?;
            let to = to.as_deref().map_or(Ok(u64::MAX), |v| dur("--end", v))?;
            if to <= from {
                bail!("--end must be after --start");
            }
            Window { from, to }
        }
    };
    let enc = encoding_of(&a.output)?;
    let output = Output::create(&a.output, &[&a.input.file])?;
    let reader = open_or_fail(&a.input)?;
    let header = reader.header().clone();
    // Checked as it is read (unless --busiest's first pass did), and on past the window to
    // the trace's end before the output is committed.
    let mut items = checked(reader, &file, a.no_check || a.busiest.is_some())?;
    let (writer, report) = slice(
        &header,
        (&mut items).map(|r| r.map(|(e, _)| e)),
        window,
        &filter,
        &file,
        |h| TraceWriter::new(output.file().map_err(into_trace_error)?, enc, h),
        |w, ev| w.write(ev),
    )
    .with_context(|| format!("slicing {file} into {}", a.output.display()))?;
    if !(a.no_check || a.busiest.is_some()) {
        for item in items {
            item.with_context(|| format!("cannot read {file}"))?;
        }
    }
    if !finish_report(writer, output, a.json, &report, out)? {
        let to = if report.to == u64::MAX {
            "the end".to_owned()
        } else {
            fmt_secs(report.to)
        };
        writeln!(
            out,
            "{}: [{}, {to}) of {file}: {} events kept ({} before the window), {} volumes \
             and {} workloads declared{}",
            a.output.display(),
            fmt_secs(report.from),
            report.kept,
            report.before,
            report.volumes,
            report.workloads,
            if report.truncated {
                ", the trace goes on past it"
            } else {
                ""
            }
        )?;
        if report.clipped > 0 {
            writeln!(
                out,
                "clipped {}: io_phase running at the window's start, kept from it",
                report.clipped
            )?;
        }
        for (why, n) in &report.dropped {
            writeln!(out, "dropped {n}: {why}")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
