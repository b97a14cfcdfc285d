//! `cnsreplay capacity TRACE|MODEL --provider … --slo 'attach p99<=2s' -o DIR`: the maximum
//! sustainable rate, found by a search ([`crate::search`]) over the intensity: the replay
//! speed of a trace, or the target rate of a synth model (`--target attach=10/s` is the
//! start; each point generates the model at its rate and replays it at speed 1).
//!
//! Every point is a real `run` (`DIR/NNN-x<intensity>-r<repeat>/`, the same entry point as
//! `cnsreplay run`) judged by [`analyze::point::evaluate`]: SLOs met, achieved throughput
//! within `--tolerance` of offered for every op type, first and second half alike
//! (stationary), failures within `--max-error-rate`, and the run valid (its lateness judged
//! against the smallest SLO: `--validity reference=`, unless given). `DIR/capacity.json`
//! is rewritten after every point, so Ctrl-C (which stops the current run; the engine cleans
//! it up) leaves the partial curve. `cnsreplay analyze capacity DIR` re-reads the points.
//!
//! The answer is not the search's bracket: after it, `--refine` more runs are placed around
//! the pass/fail boundary (cycling through the current estimates of the rate passing with
//! `--pass-probability` and of the rate passing half the time, and 1.5 % beyond each), and a
//! logistic curve of pass probability over `ln(rate)` is fitted to every run
//! ([`analyze::passprob`]). The sustained rate is the rate passing with `--pass-probability`
//! (0.9); its 95 % profile-likelihood interval is reported, and the capacity interval runs from
//! that interval's lower end to the upper end of the half-pass rate's interval (a run of finite
//! length at exactly the limit passes about half the time, see [`analyze::point`]).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};

use analyze::point::{PointEval, PointOptions, evaluate};
use analyze::{Slo, capacity::SloTarget};
use anyhow::{Context, bail};
use clap::Args;
use schemars::JsonSchema;
use serde::Serialize;
use trace_format::{Encoding, TraceReader, TraceWriter};

use crate::commands::run::{ProviderArgs, ProviderKind, RunArgs};
use crate::output::Output;
use crate::search::{Next, Search, SearchOptions};

mod answer;
mod report;
use report::report;

/// `capacity`.
#[derive(Debug, Args)]
pub struct CapacityArgs {
    /// A trace (intensity: replay speed) or a synth model (intensity: its target rate).
    pub input: PathBuf,
    /// The provider.
    #[arg(long, value_enum)]
    pub provider: ProviderKind,
    /// Directory to create for the points (`DIR/NNN-x<intensity>-r<repeat>/`) and
    /// `DIR/capacity.json`.
    #[arg(short, long = "output", value_name = "DIR")]
    pub output: PathBuf,
    /// An SLO, `OP[.METRIC] PCT<=LIMIT`, e.g. `'attach p99<=2s'`, `'io p99.9<=10ms'` (I/O
    /// response time from iogen's histograms); repeatable. None: throughput only.
    #[arg(long, value_name = "SLO")]
    pub slo: Vec<String>,
    /// Model input: the targeted operation and the starting rate, e.g. `attach=10/s`.
    #[arg(long, value_name = "OP=RATE/s")]
    pub target: Option<synth::Target>,
    /// Model input: trace duration per point after the warm-up (default: the model's).
    #[arg(long, value_name = "DUR", value_parser = crate::commands::args::parse_duration)]
    pub duration: Option<u64>,
    /// Trace input: the starting speed.
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    pub start: f64,
    /// Step factor while looking for the first failing point.
    #[arg(long, value_name = "X", default_value_t = 2.0)]
    pub factor: f64,
    /// Bisect until the failing intensity is within this fraction above the passing one.
    #[arg(long, value_name = "FRACTION", default_value_t = 0.02)]
    pub resolution: f64,
    /// Runs at each of the two final bracketing points (each with its own seed).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub repeats: u32,
    /// Runs added around the pass/fail boundary after the bracket, for the fit.
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub refine: usize,
    /// The sustained rate is the rate that passes with this probability.
    #[arg(long, value_name = "P", default_value_t = 0.9)]
    pub pass_probability: f64,
    /// Judge runs that are not `valid` (e.g. engine-bound on a loaded machine) like any other
    /// instead of failing them.
    #[arg(long)]
    pub allow_invalid: bool,
    /// Most runs in all.
    #[arg(long, value_name = "N", default_value_t = 60)]
    pub max_runs: usize,
    /// Most steps up (or down) before the first bracket.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub max_steps: u32,
    /// Achieved throughput may fall short of offered by this fraction.
    #[arg(long, value_name = "FRACTION", default_value_t = 0.02)]
    pub tolerance: f64,
    /// Largest fraction of failed operations at a sustained point.
    #[arg(long, value_name = "FRACTION", default_value_t = 0.01)]
    pub max_error_rate: f64,
    /// Print the result as JSON (schema: docs/schemas/capacity.schema.json).
    #[arg(long)]
    pub json: bool,
    /// JUnit and Markdown outputs (one testcase per SLO and one for the sustained rate).
    #[command(flatten)]
    pub gate: crate::commands::analyze::GateArgs,
    /// Engine and provider settings, as for `run` (`--seed` is the first run's seed; each
    /// later run adds one).
    #[command(flatten)]
    pub settings: ProviderArgs,
}

/// The search settings, as run.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SearchSettings {
    /// Starting intensity.
    pub start: f64,
    /// Step factor.
    pub factor: f64,
    /// Bisection stops at this relative bracket width.
    pub resolution: f64,
    /// Runs at each final bracketing point.
    pub repeats: u32,
    /// Throughput tolerance.
    pub tolerance: f64,
    /// Largest failed fraction.
    pub max_error_rate: f64,
    /// Runs added around the boundary after the bracket.
    pub refine: usize,
    /// The sustained rate passes with this probability.
    pub pass_probability: f64,
}

/// One run of the search.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SearchPoint {
    /// Intensity: the speed (trace) or the target rate (model).
    pub intensity: f64,
    /// 0 for the first run at this intensity, 1, 2, … for repeats.
    pub repeat: u32,
    /// The run judged.
    pub eval: PointEval,
}

/// The sustainable rate of one op type.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct OpRate {
    /// Op type, or `all`.
    pub op: String,
    /// Offered rate (per s) at the highest sustained intensity: the maximum is at least this.
    pub sustained: f64,
    /// Offered rate at the lowest failing intensity: the maximum is below this.
    pub failed: Option<f64>,
    /// Lowest and highest achieved rate over the sustained intensity's runs.
    pub achieved_range: (f64, f64),
    /// The rate passing with the pass probability (the fitted answer).
    pub at_probability: Option<f64>,
    /// The 95 % capacity interval (see [`CapacitySearchReport::capacity_interval`]).
    pub interval: Option<(Option<f64>, Option<f64>)>,
}

/// `capacity --json`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CapacitySearchReport {
    /// The trace or model.
    pub input: String,
    /// `trace` or `model`.
    pub input_kind: String,
    /// What the intensity is: `speed`, or `<op> target rate (/s)`.
    pub intensity: String,
    /// The provider.
    pub provider: String,
    /// SLOs.
    pub slos: Vec<Slo>,
    /// Search settings.
    pub settings: SearchSettings,
    /// Every run, in the order run: the curve.
    pub points: Vec<SearchPoint>,
    /// Highest intensity whose runs all passed, below every failing one.
    pub sustained_intensity: Option<f64>,
    /// Lowest intensity with a failed run.
    pub failed_intensity: Option<f64>,
    /// `failed / sustained − 1`: the width of the bracket holding the maximum.
    pub resolution: Option<f64>,
    /// Per op type (and `all`): the bracket in operations per second, and the fitted answer.
    pub rates: Vec<OpRate>,
    /// The offered rate (all events) passing with the pass probability, with its 95 %
    /// profile-likelihood interval, from a logistic fit over every run.
    pub estimate: Option<analyze::passprob::RateEstimate>,
    /// The same for the rate passing half the time.
    pub half: Option<analyze::passprob::RateEstimate>,
    /// 95 % interval for the sustainable rate (all events): from the lower end of
    /// `estimate`'s interval to the upper end of `half`'s (None where unbounded).
    pub capacity_interval: Option<(Option<f64>, Option<f64>)>,
    /// Runs behind the fit.
    pub fit_runs: usize,
    /// Fewest events of a run within 5 % of the answer (≥ 10 000 decides a few %).
    pub min_events_near: Option<u64>,
    /// What failed at the failing intensity, with in how many of its runs.
    pub limited_by: Vec<String>,
    /// Whether the search bracketed the maximum to the resolution with its repeats.
    pub complete: bool,
    /// Why it stopped early (interrupted, run budget, no limit found).
    pub stopped: Option<String>,
    /// The answer in one sentence.
    pub answer: String,
}

enum Input {
    Trace,
    Model(Box<synth::Model>, synth::Target),
}

fn input_kind(a: &CapacityArgs) -> anyhow::Result<Input> {
    let trace_err = match TraceReader::open(&a.input) {
        Ok(_) => {
            if a.target.is_some() {
                bail!(
                    "--target is for a synth model; {} is a trace",
                    a.input.display()
                );
            }
            return Ok(Input::Trace);
        }
        Err(e) => e,
    };
    match synth::Model::load(&a.input) {
        Ok(m) => {
            let Some(t) = a.target else {
                bail!(
                    "{}: a model's intensity is its target rate; give the op and starting rate \
                     with --target, e.g. --target attach=10/s",
                    a.input.display()
                );
            };
            Ok(Input::Model(Box::new(m), t))
        }
        Err(model_err) => bail!(
            "{} is neither a trace ({trace_err}) nor a synth model ({model_err})",
            a.input.display()
        ),
    }
}

/// Generates the model at `rate` into `DIR/traces/` (once per rate).
fn model_trace(
    a: &CapacityArgs,
    model: &synth::Model,
    target: synth::Target,
    rate: f64,
) -> anyhow::Result<PathBuf> {
    let dir = a.output.join("traces");
    fs_err::create_dir_all(&dir)?;
    let path = dir.join(format!("rate-{rate:.6}.cnsbin"));
    if path.is_file() {
        return Ok(path);
    }
    let opts = synth::Options {
        seed: None,
        duration: a.duration,
        target: Some(synth::Target { rate, ..target }),
        preset: None,
    };
    let plan = synth::Plan::new(model.clone(), &a.input.display().to_string(), &opts)
        .with_context(|| format!("{} at {rate}/s", a.input.display()))?;
    let g = synth::Generator::new(plan);
    // The search stops on SIGINT itself: the output is removed when dropped.
    let out = Output::create_quiet(&path, &[&a.input])?;
    let w = TraceWriter::new(out.file()?, Encoding::Binary, g.header())?;
    synth::write_all(g, w).with_context(|| format!("cannot write {}", path.display()))?;
    out.commit()?;
    Ok(path)
}

/// The next refinement intensity (module docs): cycling through the current estimates of the
/// rate passing with `q`, 1.5 % below it, the half-pass rate and 1.5 % above it, converted
/// from offered rate to intensity by the runs' rate per unit of intensity.
fn refine_next(points: &[SearchPoint], q: f64, k: usize) -> Option<f64> {
    let fit: Vec<(f64, bool)> = points
        .iter()
        .filter_map(|p| p.eval.total().map(|t| (t.offered_rate, p.eval.pass)))
        .filter(|r| r.0 > 0.0)
        .collect();
    let per_unit = points
        .iter()
        .filter_map(|p| p.eval.total().map(|t| t.offered_rate / p.intensity))
        .filter(|r| r.is_finite() && *r > 0.0)
        .sum::<f64>()
        / points.len().max(1) as f64;
    let slope = analyze::capacity::fit_slope(points.iter().map(|p| &p.eval));
    let rate = match k % 4 {
        0 => analyze::passprob::estimate(&fit, q, slope)?.rate,
        1 => analyze::passprob::estimate(&fit, q, slope)?.rate / 1.015,
        2 => analyze::passprob::estimate(&fit, 0.5, slope)?.rate,
        _ => analyze::passprob::estimate(&fit, 0.5, slope)?.rate * 1.015,
    };
    // Rounded to 6 digits: the run directory's name holds the intensity.
    let x = rate / per_unit;
    (x > 0.0 && x.is_finite()).then(|| (x * 1e6).round() / 1e6)
}

fn search_start(a: &CapacityArgs, input: &Input) -> f64 {
    match input {
        Input::Trace => a.start,
        Input::Model(_, t) => t.rate,
    }
}

fn write_json(path: &Path, r: &CapacitySearchReport) -> anyhow::Result<()> {
    let out = Output::create_quiet(path, &[])?;
    out.file()?.write_all(&serde_json::to_vec_pretty(r)?)?;
    out.commit()
}

pub(crate) fn run(a: &CapacityArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let slos = a
        .slo
        .iter()
        .map(|s| Slo::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    if !(a.factor > 1.0 && a.factor.is_finite()) {
        bail!("--factor {}: expected a number above 1", a.factor);
    }
    if !(a.pass_probability > 0.0 && a.pass_probability < 1.0) {
        bail!(
            "--pass-probability {}: expected a probability in (0, 1)",
            a.pass_probability
        );
    }
    if !(a.resolution > 0.0 && a.resolution < 1.0) {
        bail!(
            "--resolution {}: expected a fraction in (0, 1)",
            a.resolution
        );
    }
    let input = input_kind(a)?;
    // A trace is checked once here, not before every point (generated traces are valid).
    if matches!(input, Input::Trace) && crate::commands::precheck::check(&a.input)?.is_none() {
        return Ok(ExitCode::from(crate::EXIT_INPUT));
    }
    let start = search_start(a, &input);
    if !(start > 0.0 && start.is_finite()) {
        bail!("the starting intensity {start} is not positive");
    }
    if slos.iter().any(|s| matches!(s.target(), SloTarget::Io(_)))
        && a.provider == ProviderKind::Sim
    {
        tracing::warn!("the sim provider runs no I/O: an io SLO has no events to judge");
    }
    crate::output::refuse_inputs(&a.output, &[&a.input])?;
    a.gate.check(a.json, &[&a.input, &a.output])?;
    if a.output.exists() && fs_err::read_dir(&a.output)?.next().is_some() {
        bail!(
            "{} exists and is not empty; choose a new directory",
            a.output.display()
        );
    }
    fs_err::create_dir_all(&a.output)?;
    let po = PointOptions {
        tolerance: a.tolerance,
        max_error_rate: a.max_error_rate,
        allow_invalid: a.allow_invalid,
        ..PointOptions::default()
    };
    let mut search = Search::new(SearchOptions {
        start,
        factor: a.factor,
        resolution: a.resolution,
        repeats: a.repeats.max(1),
        max_runs: a.max_runs,
        max_steps: a.max_steps,
    });
    // Ctrl-C/SIGTERM: the current run stops (its own handler) and so does the search.
    let stop = Arc::new(AtomicBool::new(false));
    let ids = [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM]
        .map(|sig| signal_hook::flag::register(sig, stop.clone()));
    // With `--junit -` or `--markdown -` stdout carries that document alone.
    let mut progress_sink = Vec::new();
    let progress: &mut dyn Write = if a.gate.takes_stdout() {
        &mut progress_sink
    } else {
        &mut *out
    };
    let result = search_loop(a, &input, &slos, &po, &mut search, &stop, progress);
    for id in ids.into_iter().flatten() {
        signal_hook::low_level::unregister(id);
    }
    let (points, stopped) = result?;
    let r = report(a, &input, &slos, &po, &search, &points, stopped);
    write_json(&a.output.join("capacity.json"), &r)?;
    if a.json {
        serde_json::to_writer_pretty(&mut *out, &r)?;
        writeln!(out)?;
    } else if !a.gate.takes_stdout() {
        writeln!(out)?;
        let mut sorted: Vec<&SearchPoint> = r.points.iter().collect();
        sorted.sort_by(|x, y| {
            x.intensity
                .total_cmp(&y.intensity)
                .then(x.repeat.cmp(&y.repeat))
        });
        let rows: Vec<_> = sorted
            .iter()
            .map(|p| (Some(p.intensity), &p.eval))
            .collect();
        crate::commands::analyze::write_points(&slos, &rows, out)?;
        writeln!(out)?;
        writeln!(out, "{}", r.answer)?;
        writeln!(
            out,
            "curve and points: {}",
            a.output.join("capacity.json").display()
        )?;
    }
    let sustained = r.sustained_intensity.and_then(|x| {
        r.points
            .iter()
            .find(|p| p.intensity == x && p.eval.pass)
            .map(|p| &p.eval)
    });
    let dir = a.output.display().to_string();
    a.gate.write(
        || {
            analyze::gate::capacity(&analyze::gate::CapacityInput {
                command: "capacity",
                dir: &dir,
                slos: &slos,
                points: r.points.iter().map(|p| &p.eval).collect(),
                sustained,
                answer: &r.answer,
            })
        },
        &[&a.input],
        out,
    )?;
    Ok(if r.complete {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

type Points = (Vec<SearchPoint>, Option<String>);

fn search_loop(
    a: &CapacityArgs,
    input: &Input,
    slos: &[Slo],
    po: &PointOptions,
    search: &mut Search,
    stop: &AtomicBool,
    out: &mut dyn Write,
) -> anyhow::Result<Points> {
    let mut points: Vec<SearchPoint> = Vec::new();
    let mut refined = 0;
    loop {
        if stop.load(SeqCst) {
            return Ok((points, Some("interrupted".into())));
        }
        let (x, repeat) = match search.next() {
            Next::Run { intensity, repeat } => (intensity, repeat),
            Next::Done if refined < a.refine && points.len() < a.max_runs => {
                let Some(x) = refine_next(&points, a.pass_probability, refined) else {
                    return Ok((points, None));
                };
                refined += 1;
                let repeat = points.iter().filter(|p| p.intensity == x).count() as u32;
                (x, repeat)
            }
            Next::Done => return Ok((points, None)),
            Next::Stopped(why) => return Ok((points, Some(why.into()))),
        };
        let (trace, speed) = match input {
            Input::Trace => (a.input.clone(), x),
            Input::Model(m, t) => (model_trace(a, m, *t, x)?, 1.0),
        };
        let dir = a
            .output
            .join(format!("{:03}-x{:.6}-r{repeat}", points.len() + 1, x));
        let mut settings = a.settings.clone();
        // Every run its own seed: the runs behind the fit are independent.
        settings.seed = a.settings.seed.wrapping_add(points.len() as u64);
        // The engine's lateness is judged against the smallest SLO (docs/replay.md, Run
        // validity), unless the user gave a reference or fixed limits.
        if let Some(r) = slos.iter().map(|s| s.limit_ns).min()
            && !settings
                .validity
                .iter()
                .any(|v| v.contains("reference=") || v.contains("start.p99="))
        {
            settings.validity.push(format!("reference={r}ns"));
        }
        let args = RunArgs::point(trace, a.provider, dir.clone(), speed, settings);
        let mut sink = Vec::new();
        crate::commands::run::run(&args, &mut sink)
            .with_context(|| format!("capacity point at intensity {x} ({})", dir.display()))?;
        if stop.load(SeqCst) {
            return Ok((points, Some("interrupted".into())));
        }
        let eval =
            evaluate(&dir, slos, po).with_context(|| format!("judging {}", dir.display()))?;
        let t = eval.total().cloned();
        if !a.json {
            writeln!(
                out,
                "intensity {} run {}: offered {:.2}/s achieved {:.2}/s → {}",
                answer::intensity(x),
                repeat + 1,
                t.as_ref().map_or(0.0, |t| t.offered_rate),
                t.as_ref().map_or(0.0, |t| t.achieved_rate),
                if eval.pass {
                    "pass".to_owned()
                } else if !eval.decided {
                    // Searched as a failure (the conservative side), said as what it is.
                    format!("not decided: {}", eval.reasons.join("; "))
                } else {
                    format!("fail: {}", eval.reasons.join("; "))
                }
            )?;
        }
        if refined == 0 {
            search.record(x, eval.pass);
        }
        points.push(SearchPoint {
            intensity: x,
            repeat,
            eval,
        });
        let partial = report(a, input, slos, po, search, &points, Some("running".into()));
        write_json(&a.output.join("capacity.json"), &partial)?;
    }
}
