//! `iogen`: the standalone I/O generator (also a pod entrypoint). Thin: parses arguments,
//! calls the library, prints a table to stdout and JSON with `--json`.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};
use iogen::{
    Arrival, BlockSize, BlockSizeShare, EngineChoice, EngineOptions, Load, Pattern, PhaseSpec,
    Rate, ReplayOptions, Stop, SuiteOptions, parse_phase_snippet, parse_size,
};
use trace_format::{Op, TraceReader};

#[path = "iogen/exit.rs"]
mod exit;
#[path = "iogen/fs.rs"]
mod fs;

use fs::{FsArgs, fs};

#[derive(Parser)]
#[command(
    name = "iogen",
    version,
    about = "io_uring I/O generator with coordinated-omission-safe latency"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run one fio-style job.
    Run(RunArgs),
    /// Run io_phase profiles: a trace file's `io_phase` events, or one YAML/JSON snippet.
    Phase(PhaseArgs),
    /// Replay a trace's `io` events at their original timing.
    Replay(ReplayArgs),
    /// The storage summary suite (random/sequential IOPS, bandwidth, latency, mixed).
    Suite(SuiteArgs),
    /// Ordered writes over several targets: each write stamped with a global sequence number
    /// and logged in ack order (the load of a group-snapshot consistency check).
    Ordered(OrderedArgs),
    /// Whether restored copies of an ordered run's targets are one consistent cut of it.
    Verify(VerifyArgs),
    /// What restored copies of an ordered run's targets hold, block by block, as text on
    /// stdout: `verify` for a checker that has the log's header but not the log (a pod).
    Scan(ScanArgs),
    /// The file system holding a path, as the process sees it: size and free bytes as JSON
    /// lines, polled until it reaches a size (e.g. to see an online resize inside a pod).
    Fs(FsArgs),
}

#[derive(Args)]
struct OrderedArgs {
    /// A target (file or block device); repeat it, in volume order.
    #[arg(long, required = true)]
    target: Vec<PathBuf>,
    /// The ordered-write log to write; `-`: stdout as text lines, one per acknowledged write
    /// (for a pod, whose log is its only way back; the summary then goes to stderr).
    #[arg(long)]
    log: PathBuf,
    /// Block size (every write is one block).
    #[arg(long, default_value = "4k", value_parser = parse_size_arg)]
    bs: u64,
    /// Bytes of each target used (a shorter file is extended, sparse); each target's size
    /// when absent.
    #[arg(long, value_parser = parse_size_arg)]
    size: Option<u64>,
    /// Writers, one write in flight each; 1 chains every write after the previous one.
    #[arg(long, default_value_t = 1)]
    writers: u32,
    /// Sequential blocks (default random).
    #[arg(long)]
    sequential: bool,
    /// Run time.
    #[arg(long, value_parser = parse_dur)]
    runtime: Option<Duration>,
    /// Stop after this many writes.
    #[arg(long)]
    writes: Option<u64>,
    /// O_DIRECT (each write is still followed by fdatasync).
    #[arg(long)]
    direct: bool,
    /// Random seed.
    #[arg(long, default_value_t = 0x0de4ed)]
    seed: u64,
    /// Write the result as JSON here (`-` = stdout).
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Args)]
struct VerifyArgs {
    /// The ordered-write log of the run.
    #[arg(long)]
    log: PathBuf,
    /// The restored copy of each target, in the log's volume order (repeat it).
    #[arg(long, required = true)]
    target: Vec<PathBuf>,
    /// Write the report as JSON here (`-` = stdout).
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Args)]
struct ScanArgs {
    /// The ordered-write log's header as JSON (its first text line's JSON, or the header of
    /// a binary log): nonce, block size and each volume's region.
    #[arg(long)]
    header: String,
    /// The restored copy of each target, in the log's volume order (repeat it).
    #[arg(long, required = true)]
    target: Vec<PathBuf>,
}

fn scan(a: &ScanArgs) -> Result<()> {
    let header: iogen::ordered::LogHeader =
        serde_json::from_str(&a.header).context("--header: not an ordered-write log header")?;
    let members: Vec<&Path> = a.target.iter().map(PathBuf::as_path).collect();
    let seen = iogen::cut::scan_members(&header, &members)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    iogen::cut_wire::write_scan(&mut out, &seen)?;
    out.flush()?;
    Ok(())
}

/// An ordered writer's counts in one line (without where its log went).
fn ordered_line(r: &iogen::OrderedResult) -> String {
    format!(
        "ordered writes: {} acknowledged ({}) in {:.3} s, {} failed{}",
        r.writes,
        r.per_volume
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(" + "),
        r.elapsed_s,
        r.failed,
        if r.partial { ", stopped" } else { "" },
    )
}

fn write_json(path: Option<&Path>, v: &serde_json::Value) -> Result<bool> {
    match path {
        Some(p) if p == Path::new("-") => {
            println!("{}", serde_json::to_string_pretty(v)?);
            Ok(true)
        }
        Some(p) => {
            fs_err::write(p, serde_json::to_string_pretty(v)? + "\n")?;
            Ok(false)
        }
        None => Ok(false),
    }
}

fn ordered(a: &OrderedArgs, stop: &Stop) -> Result<()> {
    let spec = iogen::OrderedSpec {
        targets: a.target.clone(),
        block: a.bs,
        region: a.size,
        writers: a.writers,
        pattern: if a.sequential {
            Pattern::Sequential
        } else {
            Pattern::Random
        },
        duration: a.runtime,
        writes: a.writes,
        direct: a.direct,
        log: a.log.clone(),
        seed: a.seed,
    };
    let text_log = a.log == Path::new("-");
    if text_log && a.json.as_deref() == Some(Path::new("-")) {
        bail!("--log - and --json - both want stdout: give --json a file");
    }
    let r = iogen::run_ordered(&spec, stop)?;
    if text_log && a.json.is_none() {
        eprintln!("{}; log on stdout", ordered_line(&r));
    } else if !write_json(a.json.as_deref(), &serde_json::to_value(&r)?)? {
        println!("{}; log {}", ordered_line(&r), r.log.display());
    }
    if let Some(e) = &r.error {
        bail!("{e}");
    }
    Ok(())
}

fn verify(a: &VerifyArgs) -> Result<()> {
    let members: Vec<&Path> = a.target.iter().map(PathBuf::as_path).collect();
    let r = iogen::verify_cut(&a.log, &members)?;
    if !write_json(a.json.as_deref(), &serde_json::to_value(&r)?)? {
        println!("{}", r.verdict.describe());
    }
    if !r.verdict.is_consistent() {
        return Err(exit::CheckSaidNo(r.verdict.describe()).into());
    }
    Ok(())
}

#[derive(Args)]
struct EngineArgs {
    /// I/O engine.
    #[arg(long, value_enum, default_value = "auto")]
    engine: EngineArg,
    /// Kernel submission polling thread (SQPOLL).
    #[arg(long)]
    sqpoll: bool,
    /// Completion polling (IOPOLL; needs --direct and a polled device).
    #[arg(long)]
    iopoll: bool,
    /// Write an HdrHistogram interval log here.
    #[arg(long)]
    interval_log: Option<PathBuf>,
    /// Interval length of the interval log.
    #[arg(long, default_value = "1s", value_parser = parse_dur)]
    interval: Duration,
    /// Random seed.
    #[arg(long, default_value_t = 0x106e_2e9e)]
    seed: u64,
    /// Open loops: jobs that may spin before their deadlines at once (`all`: no limit;
    /// default one fewer than the CPUs this process may use, at least one); the others sleep
    /// to their deadlines.
    #[arg(long, value_name = "N|all", value_parser = iogen::parse_spinners)]
    spinners: Option<usize>,
    /// Write the JSON summary to this file (`-` = stdout, replacing the table).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also write the merged histograms (HdrHistogram log) to this file.
    #[arg(long)]
    histograms: Option<PathBuf>,
    /// Record every acknowledged write (offset, length, submitted and acknowledged times):
    /// the record file (iogen's written set) here, or with `-` text lines on stdout after the
    /// phase, for a pod whose only way back is its log.
    #[arg(long)]
    written_log: Option<PathBuf>,
}

#[derive(Clone, Copy, ValueEnum)]
enum EngineArg {
    Auto,
    #[value(name = "io_uring")]
    IoUring,
    Sync,
}

#[derive(Clone, Copy, ValueEnum)]
#[allow(clippy::enum_variant_names)] // fio's names
enum Rw {
    Randread,
    Randwrite,
    Read,
    Write,
    Randrw,
    Rw,
}

#[derive(Args)]
struct RunArgs {
    /// File or block device.
    #[arg(long)]
    target: PathBuf,
    #[arg(long, value_enum, default_value = "randread")]
    rw: Rw,
    /// Read share for randrw/rw, percent.
    #[arg(long, default_value_t = 50)]
    rwmixread: u8,
    /// Block size (`4k`), or a mix `4k:8,64k:2` (size:weight).
    #[arg(long, default_value = "4k")]
    bs: String,
    /// Region (file size) to use; the whole target when absent, 1 GiB for a new file. A file
    /// shorter than this is laid out to it first, if its file system has the room.
    #[arg(long, value_parser = parse_size_arg)]
    size: Option<u64>,
    /// Closed loop: requests in flight per job.
    #[arg(long, conflicts_with = "rate")]
    iodepth: Option<u32>,
    /// Open loop: total I/Os per second.
    #[arg(long)]
    rate: Option<f64>,
    /// Poisson arrivals (default: evenly spaced).
    #[arg(long, requires = "rate")]
    poisson: bool,
    /// Open loop: most I/Os in flight per job.
    #[arg(long, default_value_t = 256)]
    max_inflight: u32,
    /// Run time (`30s`).
    #[arg(long, value_parser = parse_dur)]
    runtime: Option<Duration>,
    /// Stop after this many bytes.
    #[arg(long, value_parser = parse_size_arg)]
    bytes: Option<u64>,
    /// Stop after this many I/Os.
    #[arg(long)]
    ios: Option<u64>,
    #[arg(long)]
    direct: bool,
    /// Write verifiable blocks and check them on read.
    #[arg(long)]
    verify: bool,
    /// Verify generation map: loaded if present, saved at the end.
    #[arg(long)]
    verify_state: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    jobs: u32,
    #[command(flatten)]
    engine: EngineArgs,
}

#[derive(Args)]
struct PhaseArgs {
    /// A trace file, or an io_phase snippet such as
    /// `{pattern: random, read_pct: 100, block_size: 4Ki, load: {depth: 8}, duration: 5s}`.
    phase: String,
    /// `PATH` for every volume, or `volume=PATH` (repeatable).
    #[arg(long, required = true)]
    target: Vec<String>,
    #[command(flatten)]
    engine: EngineArgs,
}

#[derive(Args)]
struct ReplayArgs {
    /// Trace file; `-` reads it from stdin (it may still be being written).
    trace: PathBuf,
    /// `volume=PATH` (repeatable).
    #[arg(long, required = true)]
    target: Vec<String>,
    /// Time scale: 2 replays twice as fast.
    #[arg(long, default_value_t = 1.0)]
    speed: f64,
    /// Ignore timing: issue as fast as possible.
    #[arg(long)]
    no_stall: bool,
    #[arg(long)]
    direct: bool,
    /// Time 0 is the trace header's `origin` on this machine's wall clock, not the start.
    #[arg(long)]
    at_origin: bool,
    /// After the run, print one `iogen-stream-result {json}` line per volume (for a driver
    /// that reads the results from a log).
    #[arg(long)]
    result_lines: bool,
    /// Requests in flight per volume at most.
    #[arg(long, default_value_t = 32)]
    depth: u32,
    /// Largest read or write, bytes (longer ones are refused and counted).
    #[arg(long, default_value = "1m", value_parser = parse_size_arg)]
    max_len: u64,
    /// Spin this long before each deadline (default 50µs; 0 sleeps to each).
    #[arg(long, value_parser = parse_dur)]
    spin: Option<Duration>,
    #[command(flatten)]
    engine: EngineArgs,
}

#[derive(Args)]
struct SuiteArgs {
    #[arg(long)]
    target: PathBuf,
    #[arg(long, default_value = "1g", value_parser = parse_size_arg)]
    size: u64,
    /// Run time of each test.
    #[arg(long, default_value = "10s", value_parser = parse_dur)]
    runtime: Duration,
    /// Use the page cache (default: O_DIRECT).
    #[arg(long)]
    buffered: bool,
    #[command(flatten)]
    engine: EngineArgs,
}

fn parse_dur(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let t2 = if t.chars().all(|c| c.is_ascii_digit()) {
        format!("{t}s")
    } else {
        t.to_owned()
    };
    trace_format::units::parse_duration(&t2)
        .map(Duration::from_nanos)
        .map_err(|e| e.to_string())
}

fn parse_size_arg(s: &str) -> Result<u64, String> {
    parse_size(s).map_err(|e| e.to_string())
}

fn parse_bs(s: &str) -> Result<BlockSize> {
    if !s.contains(':') && !s.contains(',') {
        return Ok(BlockSize::Fixed(parse_size(s)?));
    }
    let mut mix = Vec::new();
    for part in s.split(',') {
        let (size, weight) = part.split_once(':').unwrap_or((part, "1"));
        mix.push(BlockSizeShare {
            size: parse_size(size)?,
            weight: weight
                .parse()
                .with_context(|| format!("weight {weight:?}"))?,
        });
    }
    Ok(BlockSize::Mix(mix))
}

impl EngineArgs {
    fn options(&self) -> EngineOptions {
        EngineOptions {
            engine: match self.engine {
                EngineArg::Auto => EngineChoice::Auto,
                EngineArg::IoUring => EngineChoice::IoUring,
                EngineArg::Sync => EngineChoice::Sync,
            },
            sqpoll: self.sqpoll,
            iopoll: self.iopoll,
            interval_log: self.interval_log.clone(),
            interval: self.interval,
            seed: self.seed,
            spinners: self.spinners,
            ..EngineOptions::default()
        }
    }

    /// Prints `table` unless JSON goes to stdout; writes JSON where asked.
    fn emit(&self, table: &str, json: &serde_json::Value) -> Result<()> {
        match &self.json {
            Some(p) if p == Path::new("-") => println!("{}", serde_json::to_string_pretty(json)?),
            Some(p) => {
                print!("{table}");
                fs_err::write(p, serde_json::to_string_pretty(json)? + "\n")?;
            }
            None => print!("{table}"),
        }
        Ok(())
    }
}

fn signal_stop() -> Result<Stop> {
    let stop = Stop::new();
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.flag()).context("installing signal handler")?;
    }
    Ok(stop)
}

fn run(a: &RunArgs, stop: &Stop) -> Result<()> {
    let (pattern, read_pct) = match a.rw {
        Rw::Randread => (Pattern::Random, 100),
        Rw::Randwrite => (Pattern::Random, 0),
        Rw::Read => (Pattern::Sequential, 100),
        Rw::Write => (Pattern::Sequential, 0),
        Rw::Randrw => (Pattern::Random, a.rwmixread),
        Rw::Rw => (Pattern::Sequential, a.rwmixread),
    };
    let load = match (a.iodepth, a.rate) {
        (_, Some(iops)) => Load::Rate(Rate {
            iops,
            arrival: if a.poisson {
                Arrival::Poisson
            } else {
                Arrival::Uniform
            },
        }),
        (d, None) => Load::Depth(d.unwrap_or(1)),
    };
    let spec = PhaseSpec {
        pattern,
        read_pct,
        block_size: parse_bs(&a.bs)?,
        load,
        duration: a.runtime,
        bytes: a.bytes,
        region: a.size,
        jobs: a.jobs,
        direct: a.direct,
        verify: a.verify,
        ios: a.ios,
        max_inflight: a.max_inflight,
        verify_state: a.verify_state.clone(),
    };
    run_spec(&spec, &a.target, &a.engine, stop)
}

fn run_spec(spec: &PhaseSpec, target: &Path, e: &EngineArgs, stop: &Stop) -> Result<()> {
    let r = run_one(spec, target, e, None, stop)?;
    e.emit(
        &iogen::render_phase(&r.summary),
        &serde_json::to_value(&r.summary)?,
    )?;
    check_verify(&r.summary)
}

/// Runs one phase; `part` names it among several (its histogram and interval-log files get
/// `.PART` before the extension, see `iogen::part_path`).
fn run_one(
    spec: &PhaseSpec,
    target: &Path,
    e: &EngineArgs,
    part: Option<&str>,
    stop: &Stop,
) -> Result<iogen::PhaseResult> {
    let at = |p: &Path| part.map_or_else(|| p.to_owned(), |n| iogen::part_path(p, n));
    let mut opts = e.options();
    opts.interval_log = e.interval_log.as_deref().map(at);
    if spec.region.is_none()
        && std::fs::metadata(target).map_or(true, |m| m.is_file() && m.len() == 0)
    {
        eprintln!(
            "iogen: {} is new or empty and no --size was given: laying out {} (the default; \
             --size, or an io_phase's region, to choose)",
            target.display(),
            human(iogen::DEFAULT_NEW_FILE_SIZE)
        );
    }
    let stdout = Path::new("-");
    let written = e
        .written_log
        .as_deref()
        .map(|p| iogen::written::WrittenSpec {
            path: if p == stdout { PathBuf::new() } else { at(p) },
            origin: Instant::now(),
        });
    // The Unix time of the records' origin, for a reader on another clock.
    let anchor = iogen::WallAnchor::now();
    let r = iogen::run_phase_recording(spec, target, &opts, stop, written.as_ref())?;
    if let Some(h) = &e.histograms {
        iogen::write_histograms(&at(h), &r.histograms)?;
    }
    if let (Some(w), Some(recs)) = (&written, &r.written)
        && e.written_log.as_deref() == Some(stdout)
    {
        let origin = i128::from(anchor.unix_ns(w.origin));
        print!("{}", iogen::written_wire::to_text(recs, origin));
    }
    Ok(r)
}

/// `n` bytes in the largest binary unit that fits (`1 GiB`).
fn human(n: u64) -> String {
    match n.trailing_zeros() {
        40.. => format!("{} TiB", n >> 40),
        30.. => format!("{} GiB", n >> 30),
        20.. => format!("{} MiB", n >> 20),
        _ => format!("{n} B"),
    }
}

fn check_verify(s: &iogen::Summary) -> Result<()> {
    if let Some(v) = s.verify.as_ref().filter(|v| v.mismatches > 0) {
        let bad = format!("verify found {} bad blocks", v.mismatches);
        return Err(exit::CheckSaidNo(bad).into());
    }
    Ok(())
}

fn targets(list: &[String]) -> (Option<PathBuf>, BTreeMap<String, PathBuf>) {
    let mut all = None;
    let mut map = BTreeMap::new();
    for t in list {
        match t.split_once('=') {
            Some((v, p)) => {
                map.insert(v.to_owned(), PathBuf::from(p));
            }
            None => all = Some(PathBuf::from(t)),
        }
    }
    (all, map)
}

fn phase(a: &PhaseArgs, stop: &Stop) -> Result<()> {
    let (all, map) = targets(&a.target);
    let phases = if Path::new(&a.phase).is_file() {
        let mut v = Vec::new();
        for ev in TraceReader::open(&a.phase)?.events() {
            if let Op::IoPhase(p) = ev?.op {
                v.push(p);
            }
        }
        v
    } else {
        vec![parse_phase_snippet(&a.phase)?]
    };
    if phases.is_empty() {
        bail!("{} has no io_phase events", a.phase);
    }
    if let Some(p) = phases.iter().find(|p| p.ordered.is_some()) {
        bail!(
            "the io_phase of {} on {} is ordered: run it with `iogen ordered` (writes) or \
             `iogen verify` (the check)",
            p.workload,
            p.volume
        );
    }
    if let [p] = phases.as_slice() {
        let Some(target) = map.get(p.volume.as_str()).or(all.as_ref()) else {
            bail!("no --target for volume {}", p.volume);
        };
        return run_spec(&PhaseSpec::from_trace(p), target, &a.engine, stop);
    }
    // Several phases: phase N's histograms and interval log go to `FILE.N.ext`, and the JSON
    // is one array of the phases' summaries, so no phase overwrites another's results.
    let mut table = String::new();
    let mut json = Vec::new();
    let mut verify = Ok(());
    for (i, p) in phases.iter().enumerate() {
        let Some(target) = map.get(p.volume.as_str()).or(all.as_ref()) else {
            bail!("no --target for volume {}", p.volume);
        };
        if stop.is_requested() {
            break;
        }
        let head = format!(
            "== io_phase {} ({}) {} on {} ({})\n",
            i + 1,
            phases.len(),
            p.workload,
            p.volume,
            target.display()
        );
        let r = run_one(
            &PhaseSpec::from_trace(p),
            target,
            &a.engine,
            Some(&(i + 1).to_string()),
            stop,
        )?;
        let part = format!("{head}{}", iogen::render_phase(&r.summary));
        if a.engine.json.as_deref() != Some(Path::new("-")) {
            print!("{part}");
        }
        table.push_str(&part);
        json.push(serde_json::json!({
            "phase": i + 1,
            "workload": p.workload.as_str(),
            "volume": p.volume.as_str(),
            "summary": r.summary,
        }));
        if verify.is_ok() {
            verify = check_verify(&r.summary);
        }
    }
    if let Some(path) = a.engine.json.as_deref() {
        let text = serde_json::to_string_pretty(&json)?;
        if path == Path::new("-") {
            println!("{text}");
        } else {
            fs_err::write(path, text + "\n")?;
        }
    }
    verify
}

fn replay(a: &ReplayArgs, stop: &Stop) -> Result<()> {
    let (_, map) = targets(&a.target);
    let ro = ReplayOptions {
        targets: map,
        speed: a.speed,
        no_stall: a.no_stall,
        direct: a.direct,
        at_origin: a.at_origin,
    };
    let opts = EngineOptions {
        stream_depth: a.depth,
        stream_max_len: a.max_len,
        spin: a.spin,
        ..a.engine.options()
    };
    let r = if a.trace == Path::new("-") {
        let open = || Ok(TraceReader::from_reader(std::io::stdin(), None, "stdin")?);
        iogen::replay_from(open, &ro, &opts, stop)?
    } else {
        iogen::replay_trace(&a.trace, &ro, &opts, stop)?
    };
    let anchor = iogen::WallAnchor::now();
    let mut table = String::new();
    let mut json = serde_json::Map::new();
    if let Some(h) = &a.engine.histograms {
        // One file per volume when there are several (`FILE.VOLUME.ext`), like the interval
        // log.
        for (v, s) in &r.volumes {
            let path = if r.volumes.len() > 1 {
                iogen::part_path(h, v)
            } else {
                h.clone()
            };
            iogen::write_histograms(&path, &s.result.histograms)?;
        }
    }
    for (v, s) in &r.volumes {
        table.push_str(&format!(
            "== volume {v}\n{}{} requests adjusted ({}); {} read after their intended instant\n",
            iogen::render_stream(&s.result),
            s.adjusted,
            s.flags.join("; "),
            s.arrived_late
        ));
        json.insert(v.clone(), serde_json::to_value(&s.result.summary)?);
    }
    let mut lines = Vec::new();
    if a.result_lines {
        for (v, s) in &r.volumes {
            lines.push(s.line(v, &anchor)?.to_line()?);
        }
    }
    table.push_str(&format!(
        "{} io events on unmapped volumes, {} other events skipped\n",
        r.unmapped, r.skipped
    ));
    a.engine.emit(
        &table,
        &serde_json::json!({"volumes": json, "unmapped": r.unmapped, "skipped": r.skipped}),
    )?;
    for l in lines {
        println!("{l}");
    }
    Ok(())
}

fn suite(a: &SuiteArgs, stop: &Stop) -> Result<()> {
    let so = SuiteOptions {
        size: a.size,
        runtime: a.runtime,
        direct: !a.buffered,
    };
    let entries = iogen::run_suite(&a.target, &so, &a.engine.options(), stop)?;
    if let Some(h) = &a.engine.histograms {
        // One file per test (`FILE.TEST.ext`), like the interval log.
        for e in &entries {
            iogen::write_histograms(&iogen::part_path(h, &e.name), &e.result.histograms)?;
        }
    }
    let json: Vec<_> = entries
        .iter()
        .map(|e| serde_json::json!({"test": e.name, "metric": e.metric, "summary": e.result.summary}))
        .collect();
    a.engine.emit(
        &iogen::render_suite(&entries),
        &serde_json::Value::Array(json),
    )
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let res = signal_stop().and_then(|stop| match &cli.cmd {
        Cmd::Run(a) => run(a, &stop),
        Cmd::Phase(a) => phase(a, &stop),
        Cmd::Replay(a) => replay(a, &stop),
        Cmd::Suite(a) => suite(a, &stop),
        Cmd::Fs(a) => fs(a, &stop),
        Cmd::Ordered(a) => ordered(a, &stop),
        Cmd::Verify(a) => verify(a),
        Cmd::Scan(a) => scan(a),
    });
    match res {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("iogen: {e:#}");
            std::process::ExitCode::from(exit::code(&e))
        }
    }
}
