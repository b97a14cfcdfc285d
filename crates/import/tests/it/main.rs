//! Integration tests of the importers and exporters.

mod blk;
mod blockcsv;
mod fio;
