//! Integration tests of the importers and exporters.

mod audit;
mod blk;
mod blockcsv;
mod fio;
mod pods;
mod regressions;
