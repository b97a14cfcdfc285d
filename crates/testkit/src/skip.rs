//! A test whose prerequisite is missing (a tool, the cluster, a real node): it fails when the
//! caller said the prerequisite must be there (`CNSREPLAY_REQUIRE_<WHAT>=1`, as `.ci/run`
//! sets for what CI installs), and otherwise skips with one `skipped: …` line on stderr, so
//! a green run shows what it did not check.

/// Whether `CNSREPLAY_REQUIRE_<what>` is `1` (`what`: `TESTENV`, `REAL_NODE`, `CSI`, `PY`,
/// `JAVA`, `PROMETHEUS`, `SAMPLES`).
pub fn required(what: &str) -> bool {
    std::env::var(format!("CNSREPLAY_REQUIRE_{what}")).as_deref() == Ok("1")
}

/// A missing prerequisite `what` (see [`required`]): panics saying `why` when it is required,
/// else prints `skipped: <why>` to stderr. The caller then returns (the test passes).
pub fn missing(what: &str, why: &str) {
    assert!(!required(what), "CNSREPLAY_REQUIRE_{what}=1 but {why}");
    #[allow(clippy::print_stderr)] // the skip line is the contract
    {
        eprintln!("skipped: {why}");
    }
}

/// `Some(value)` when `value` is there; else [`missing`]`(what, why)` and `None`.
pub fn unless_missing<T>(value: Option<T>, what: &str, why: &str) -> Option<T> {
    if value.is_none() {
        missing(what, why);
    }
    value
}

/// Whether this process runs as root (the local provider's and the CSI driver's block
/// volumes need it): when not, the skip line `skipped: <why> need root` and false.
pub fn root(why: &str) -> bool {
    // The effective uid from /proc (no libc call): `Uid:` lists real, effective, saved, fs.
    let euid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_owned))
        });
    if euid.as_deref() == Some("0") {
        return true;
    }
    #[allow(clippy::print_stderr)] // the skip line is the contract
    {
        eprintln!("skipped: {why} need root");
    }
    false
}
