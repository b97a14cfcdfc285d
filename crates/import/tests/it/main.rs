//! Integration tests of the importers and exporters.

mod fio;
