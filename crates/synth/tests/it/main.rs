//! Integration tests of the synth crate: statistical tests at fixed seeds, the scenarios in
//! `traces/synth/`, determinism, fitting and model errors.

mod backup;
mod dists;
mod fitting;
mod generate;
mod models;

use std::path::PathBuf;

use synth::{Generator, Model, Options, Plan};
use trace_format::check::Checker;
use trace_format::{Event, Header, Stats};

/// The workspace root.
pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Parses a model from text.
pub fn model(text: &str) -> Model {
    Model::parse(text, "test.yaml").unwrap_or_else(|e| panic!("{e}"))
}

/// Plans a model with options.
pub fn plan(text: &str, opts: &Options) -> Plan {
    Plan::new(model(text), "test.yaml", opts).unwrap_or_else(|e| panic!("{e}"))
}

/// Generates all events and checks them; panics on the first checker finding.
pub fn generate_checked(plan: Plan) -> (Header, Vec<Event>, Stats) {
    let g = Generator::new(plan);
    let header = g.header().clone();
    let (mut checker, findings) = Checker::new(&header);
    assert!(findings.is_empty(), "header: {findings:?}");
    let mut events = Vec::new();
    let mut out = Vec::new();
    for (i, e) in g.enumerate() {
        checker.check(&e, i as u64, &mut out);
        assert!(out.is_empty(), "event {i} {e:?}: {out:?}");
        events.push(e);
    }
    let stats = checker.stats();
    (header, events, stats)
}
