//! Checks of the data-path ops: `io` within its volume, `io_phase` profiles, ordered writes.

use super::{Checker, dangling, since3_problem};
use crate::error::Problem;
use crate::model::{BlockSize, Io, IoKind, IoPhase, Load, Ordered};

impl Checker {
    pub(super) fn io(
        &mut self,
        io: &Io,
        p: &dyn Fn(&str) -> String,
        push: &mut dyn FnMut(String, Problem),
    ) {
        match io.kind {
            IoKind::Read => {
                self.stats.io_read_bytes =
                    self.stats.io_read_bytes.saturating_add(u128::from(io.len));
            }
            IoKind::Write => {
                self.stats.io_write_bytes =
                    self.stats.io_write_bytes.saturating_add(u128::from(io.len));
            }
            IoKind::Trim | IoKind::Flush => {}
        }
        let Some(v) = self.volumes.get(&io.volume) else {
            push(
                p("io.volume"),
                dangling("volume", &io.volume, &self.gone_volumes),
            );
            return;
        };
        if io.kind == IoKind::Flush {
            return;
        }
        if io.len == 0 {
            push(
                p("io.len"),
                Problem::InvalidValue(format!("a {:?} of 0 bytes", io.kind).to_lowercase()),
            );
            return;
        }
        match io.offset.checked_add(io.len) {
            None => push(
                p("io.len"),
                Problem::OutOfRange(format!(
                    "offset {} + length {} overflows 64 bits",
                    io.offset, io.len
                )),
            ),
            Some(end) if end > v.size => push(
                p("io.offset"),
                Problem::OutOfRange(format!(
                    "bytes [{}, {end}) end past volume {:?} of {} bytes",
                    io.offset, io.volume, v.size
                )),
            ),
            Some(_) => {}
        }
    }

    pub(super) fn io_phase(
        &mut self,
        ph: &IoPhase,
        p: &dyn Fn(&str) -> String,
        push: &mut dyn FnMut(String, Problem),
    ) {
        match self.workloads.get(&ph.workload) {
            None => push(
                p("io_phase.workload"),
                dangling("workload", &ph.workload, &self.gone_workloads),
            ),
            Some(w) if !w.volumes.contains(&ph.volume) => push(
                p("io_phase.volume"),
                Problem::InvalidValue(format!(
                    "workload {:?} does not have volume {:?} attached",
                    ph.workload, ph.volume
                )),
            ),
            Some(_) => {}
        }
        let size = self.volumes.get(&ph.volume).map(|v| v.size);
        if size.is_none() && self.workloads.contains_key(&ph.workload) {
            push(
                p("io_phase.volume"),
                dangling("volume", &ph.volume, &self.gone_volumes),
            );
        }
        let mut invalid = |field: &str, msg: String| push(p(field), Problem::InvalidValue(msg));
        if ph.read_pct > 100 {
            invalid(
                "io_phase.read_pct",
                format!("{} is more than 100", ph.read_pct),
            );
        }
        let max_bs = match &ph.block_size {
            BlockSize::Fixed(0) => {
                invalid("io_phase.block_size", "block size must not be 0".into());
                0
            }
            BlockSize::Fixed(n) => *n,
            BlockSize::Mix(m) => {
                if m.iter().all(|s| s.weight == 0) {
                    invalid(
                        "io_phase.block_size",
                        "a block-size mix needs at least one entry with a weight above 0".into(),
                    );
                }
                for (i, s) in m.iter().enumerate() {
                    if s.size == 0 {
                        invalid(
                            &format!("io_phase.block_size[{i}].size"),
                            "block size must not be 0".into(),
                        );
                    }
                }
                m.iter().map(|s| s.size).max().unwrap_or(0)
            }
        };
        match &ph.load {
            Load::Depth(0) => invalid(
                "io_phase.load.depth",
                "queue depth must be at least 1".into(),
            ),
            Load::Rate(r) if !(r.iops.is_finite() && r.iops > 0.0) => invalid(
                "io_phase.load.rate.iops",
                format!("rate must be a positive number, not {}", r.iops),
            ),
            _ => {}
        }
        // A checking ordered phase reads its members once: it needs no bound.
        let checks = ph.ordered.is_some() && ph.read_pct == 100;
        if ph.duration.is_none() && ph.bytes.is_none() && !checks {
            invalid(
                "io_phase",
                "give `duration` or `bytes` (or both: it stops at whichever comes first)".into(),
            );
        }
        if ph.jobs == 0 {
            invalid("io_phase.jobs", "jobs must be at least 1".into());
        }
        if let Some(o) = &ph.ordered {
            self.ordered(ph, o, p, push);
        }
        let region = ph.region.or(size);
        if let (Some(region), Some(size)) = (ph.region, size)
            && region > size
        {
            push(
                p("io_phase.region"),
                Problem::OutOfRange(format!(
                    "region of {region} bytes is larger than volume {:?} of {size} bytes",
                    ph.volume
                )),
            );
        }
        if let Some(region) = region
            && max_bs > region
        {
            push(
                p("io_phase.block_size"),
                Problem::OutOfRange(format!(
                    "block size {max_bs} is larger than the {region}-byte region"
                )),
            );
        }
    }

    /// `io_phase.ordered` (version 3): a writer (`read_pct` 0) of one block size in a
    /// closed loop, or a check (`read_pct` 100) of as many volumes as the writer of its log.
    pub(super) fn ordered(
        &mut self,
        ph: &IoPhase,
        o: &Ordered,
        p: &dyn Fn(&str) -> String,
        push: &mut dyn FnMut(String, Problem),
    ) {
        if self.version < 3 {
            push(
                p("io_phase.ordered"),
                since3_problem("ordered", self.version),
            );
        }
        let mut invalid = |field: &str, msg: String| push(p(field), Problem::InvalidValue(msg));
        if ph.read_pct != 0 && ph.read_pct != 100 {
            invalid(
                "io_phase.read_pct",
                format!(
                    "an ordered phase writes (0) or checks (100), not {}",
                    ph.read_pct
                ),
            );
        }
        if matches!(ph.block_size, BlockSize::Mix(_)) {
            invalid(
                "io_phase.block_size",
                "ordered writes use one block size".into(),
            );
        }
        if matches!(ph.load, Load::Rate(_)) {
            invalid(
                "io_phase.load",
                "ordered writes run closed-loop: `depth` is the number of writers".into(),
            );
        }
        if ph.jobs != 1 {
            invalid(
                "io_phase.jobs",
                "an ordered phase has one job (`load.depth` sets its writers)".into(),
            );
        }
        if ph.verify {
            invalid(
                "io_phase.verify",
                "an ordered phase checks its own blocks; `verify` does not apply".into(),
            );
        }
        let mut seen = vec![&ph.volume];
        for (k, v) in o.with.iter().enumerate() {
            let path = format!("io_phase.ordered.with[{k}]");
            if seen.contains(&v) {
                invalid(&path, format!("volume {v:?} is listed twice"));
                continue;
            }
            seen.push(v);
            match self.workloads.get(&ph.workload) {
                Some(w) if !w.volumes.contains(v) => invalid(
                    &path,
                    format!(
                        "workload {:?} does not have volume {v:?} attached",
                        ph.workload
                    ),
                ),
                _ => {}
            }
        }
        let members = o.with.len() + 1;
        if ph.read_pct == 0 {
            self.ordered_logs.insert(o.log.clone(), members);
        } else if ph.read_pct == 100 {
            match self.ordered_logs.get(&o.log) {
                None => push(
                    p("io_phase.ordered.log"),
                    Problem::Dangling {
                        kind: "ordered-write log",
                        name: o.log.clone(),
                        gone_at: None,
                    },
                ),
                Some(&n) if n != members => invalid(
                    "io_phase.ordered.with",
                    format!(
                        "the log {:?} covers {n} volumes; this check names {members}",
                        o.log
                    ),
                ),
                Some(_) => {}
            }
        }
    }
}
