//! Integration tests of the importers and exporters.

mod audit;
mod audit_order;
mod blk;
mod blockcsv;
mod fio;
mod pods;
mod regressions;

/// Fails when `CNSREPLAY_REQUIRE_SAMPLES=1` (CI: `.ci/run`) and the real trace samples a test
/// reads (`../shared/trace-samples`, beside the checkout) are missing: there a skip would hide
/// that the importers were never checked against real traces.
pub fn require_samples(missing: &std::path::Path) {
    assert!(
        !testkit::skip::required("SAMPLES"),
        "CNSREPLAY_REQUIRE_SAMPLES=1 but {} is missing (the trace samples beside the checkout)",
        missing.display()
    );
}
