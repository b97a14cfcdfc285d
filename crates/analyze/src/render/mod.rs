//! Numbers into pages for people: the HTML report (`analyze report`), its SVG figures (and their
//! PNG), its tables. Everything here reads [`crate::stats`]'s results; nothing there reads
//! this.
//!
//! ## Layers
//!
//! Lowest first; a module imports only from its own layer or below (checked by
//! `scripts/check-layers.py`).
//!
//! 1. `svg`, `num` (apart) — the SVG plot and its PNG; numbers as the report prints them
//! 2. `figures`, `tables`, `headline`, `replayed`, `cut`, `cbt`, `gate` (apart) — the report's
//!    parts: its own figures (and [`figures::Figure`]), its tables, the I/O headline, recorded
//!    vs replayed streams, the cut checks' and the changed-block listings' figures; and the
//!    verdicts as a release gate reads them (JUnit XML, Markdown)
//! 3. `report`, `history_page` (apart) — the pages: the report loads each run
//!    ([`crate::stats::report_data`]) and puts the parts together; the history's page draws
//!    each series with its change points

mod cbt;
mod cut;
mod figures;
pub mod gate;
mod headline;
pub mod history_page;
mod num;
mod replayed;
pub mod report;
pub(crate) mod svg;
mod tables;
