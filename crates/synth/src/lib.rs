//! Trace synthesis: generates churn traces from container-lifetime distributions, arrival
//! processes and target operation rates, and fits lifetime distributions to observed data.
//!
//! A user describes a cluster in a YAML [`Model`] (hosts, containers per host, lifetimes,
//! arrivals, volumes, snapshot policies, failures, drains, I/O); [`Plan`] validates it and
//! solves a target rate with Little's law ([`target`]); [`Generator`] is a discrete-event
//! simulation that yields trace events in time order, streaming, with a seeded random stream
//! ([`rng`]) so the same model and seed give a byte-identical trace. [`fit`] goes the other
//! way: maximum-likelihood fits with right censoring, AIC selection and KS distances, ending in
//! a lifetime snippet ready to paste into a model. The model reference is `docs/synth.md`.
//!
//! This is a library: it returns data and never prints.

pub mod data;
pub mod dist;
pub mod error;
pub mod fit;
mod generator;
pub mod model;
mod plan;
pub mod presets;
pub mod rng;

pub mod target;

use std::path::Path;

use trace_format::{Encoding, TraceWriter};

pub use dist::{Dist, Distribution};
pub use error::Error;
pub use fit::{FitReport, Observation, fit};

pub use generator::{Counts, GENERATOR, Generator};
pub use model::{Model, Target, TargetOp};
pub use plan::{Options, Plan};
pub use target::Derivation;

/// What [`generate_to_file`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Events written.
    pub events: u64,
    /// Time of the last event, ns.
    pub duration_ns: u64,
    /// The seed used.
    pub seed: u64,
    /// Counters from the generator.
    pub counts: Counts,
}

/// Streams every event of `generator` into `writer` and finishes it.
pub fn write_all(generator: Generator, writer: TraceWriter) -> Result<Summary, Error> {
    write_limited(generator, writer, None)
}

/// Like [`write_all`], but stops with [`Error::TooManyEvents`] (the writer unfinished) once
/// more than `max_events` events would be written.
pub fn write_limited(
    mut generator: Generator,
    mut writer: TraceWriter,
    max_events: Option<u64>,
) -> Result<Summary, Error> {
    let mut events = 0u64;
    let mut last = 0u64;
    for e in generator.by_ref() {
        if max_events.is_some_and(|m| events >= m) {
            return Err(Error::TooManyEvents {
                limit: max_events.unwrap_or(events),
            });
        }
        writer.write(&e)?;
        events += 1;
        last = e.at;
    }
    writer.finish()?;
    Ok(Summary {
        events,
        duration_ns: last,
        seed: generator.header().provenance.seed.unwrap_or(0),
        counts: generator.counts(),
    })
}

/// Generates a plan into a file, its encoding taken from the name unless given.
pub fn generate_to_file(
    plan: Plan,
    path: &Path,
    encoding: Option<Encoding>,
) -> Result<Summary, Error> {
    let g = Generator::new(plan);
    let w = TraceWriter::create(path, encoding, g.header())?;
    write_all(g, w)
}
