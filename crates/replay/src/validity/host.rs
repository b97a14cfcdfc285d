//! The host's own stalls: CPU time a hypervisor gave to other guests while this machine's
//! CPUs wanted it (`steal` in `/proc/stat`, Linux).
//!
//! A VM stall freezes every thread at once (the engine's timing lane, its workers, the
//! provider, the sim's clock all wait), so it shows as start lateness like an engine that fell
//! behind, and the run is rightly not `valid`: its events did not start when intended. What a
//! user needs next is whether to blame the tool or the host. On this project's 2-core VM the
//! clean runs flagged on an idle machine were such stalls (dispatched on time, picked up
//! 2–19 ms later; `scripts/calibrate-validity.sh` prints steal per run). So the run records the
//! machine's steal over its clock, and an engine-bound verdict names it when it is there.

pub use crate::record::verdict::NAMED_STEAL_NS;

/// `/proc/stat` counts in USER_HZ ticks: 100 a second on x86-64 and arm64 (`getconf
/// CLK_TCK` says 100 on this project's machines).
const NS_PER_TICK: u64 = 10_000_000;

/// The machine's steal so far, ns (all CPUs; None off Linux or when unreadable).
pub fn steal_ns() -> Option<u64> {
    let text = fs_err::read_to_string("/proc/stat").ok()?;
    parse_steal(&text)
}

/// The `steal` field (the 8th value) of the aggregate `cpu` line, ns.
fn parse_steal(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: u64 = line.split_whitespace().nth(8)?.parse().ok()?;
    ticks.checked_mul(NS_PER_TICK)
}

/// The steal between two readings (None when either is missing).
pub fn since(before: Option<u64>) -> Option<u64> {
    Some(steal_ns()?.saturating_sub(before?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_is_the_eighth_value_of_the_cpu_line() {
        let stat = "cpu  2255 34 2290 22625563 6290 127 456 73 0 0\n\
                    cpu0 1132 34 1441 11311718 3675 127 438 40 0 0\n\
                    intr 114930548 113199788 3 0 5 263 0 4 [...]\n";
        assert_eq!(parse_steal(stat), Some(730_000_000));
        // Kernels before 2.6.11 had no steal field: not a zero, an unknown.
        assert_eq!(
            parse_steal("cpu  2255 34 2290 22625563 6290 127 456\n"),
            None
        );
        assert_eq!(parse_steal("intr 1 2 3\n"), None);
    }

    #[test]
    fn this_machine_reports_steal_on_linux() {
        if cfg!(target_os = "linux") {
            let a = steal_ns().expect("/proc/stat has a steal field on Linux");
            assert!(since(Some(a)).is_some());
        }
    }
}
