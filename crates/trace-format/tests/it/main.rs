//! Integration tests of the trace-format crate (one test binary, one module per topic).

mod checker;
mod corrupt;
mod roundtrip;
mod split;
mod strategies;
mod text_errors;
