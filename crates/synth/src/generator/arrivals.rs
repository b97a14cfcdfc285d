//! The initial population and the arrival processes: steady-state residual lives, Poisson,
//! renewal and time-varying (thinned) arrivals, batches, and the schedules of the
//! cluster-wide rate processes.

use std::collections::VecDeque;

use trace_format::Header;

use super::{Generator, Pend, ns};
use crate::model::{Arrivals, Profile, SnapshotPolicy, Start};
use crate::rng::{Stream, SynthRng};

impl Generator {
    pub(super) fn initial_population(&mut self, header: &mut Header) {
        let m = &self.plan.model;
        let mut r_init = SynthRng::new(self.plan.seed, Stream::Initial);
        let steady = m.start == Start::SteadyState;
        let warm = m.warmup;
        // Without a warm-up the initial population runs before the trace starts: declared in
        // the header after every draw of the allocation (so the draws keep their order).
        let mut running = Vec::new();
        match m.arrivals.clone() {
            Arrivals::Replacement => {
                for h in 0..self.nodes.len() as u32 {
                    let n = self.plan.cph.draw(&mut self.r_place);
                    for _ in 0..n {
                        let slot = self.slots.len() as u32;
                        self.slots.push(h);
                        if !steady {
                            let at = if warm > 0 {
                                (warm as f64 * r_init.uniform()) as u64
                            } else {
                                self.t0
                            };
                            self.push(at, Pend::SlotStart(slot));
                            continue;
                        }
                        let at = (warm as f64 * r_init.uniform()) as u64;
                        let res = self.plan.lifetime.sample_residual(&mut r_init);
                        let id = self.allocate(at, h, Some(slot), Some(&mut *header));
                        self.counts.initial_containers += 1;
                        if let Some(c) = self.containers.get_mut(&id) {
                            c.end = self.t0.saturating_add(ns(res));
                        }
                        if warm == 0 {
                            running.push(id);
                        } else {
                            self.push(at, Pend::InitialAttach(id));
                        }
                    }
                }
            }
            Arrivals::Poisson { .. } | Arrivals::Renewal { .. } | Arrivals::Varying(_)
                if steady =>
            {
                let rate0 = self.rate_at(self.t0);
                let n = r_init.poisson(rate0 * self.plan.lifetime.mean());
                for _ in 0..n {
                    let at = (warm as f64 * r_init.uniform()) as u64;
                    let res = self.plan.lifetime.sample_residual(&mut r_init);
                    let host = self.pick_host();
                    let id = self.allocate(at, host, None, Some(&mut *header));
                    self.counts.initial_containers += 1;
                    let end = self.t0.saturating_add(ns(res));
                    if let Some(c) = self.containers.get_mut(&id) {
                        c.end = end;
                    }
                    if warm == 0 {
                        running.push(id);
                    } else {
                        self.push(at, Pend::InitialAttach(id));
                    }
                }
            }
            _ => {}
        }
        for id in running {
            let end = self.containers.get(&id).map_or(0, |c| c.end);
            self.attach(id, 0, end, true, Some(&mut *header));
        }
        if steady {
            self.push(self.t0, Pend::SteadyMarker);
        }
    }

    pub(super) fn rate_at(&self, t: u64) -> f64 {
        let rel = t.saturating_sub(self.t0) as f64 / 1e9;
        match &self.plan.model.arrivals {
            Arrivals::Poisson { rate } | Arrivals::Renewal { rate, .. } => rate.0,
            Arrivals::Varying(p) => match p {
                Profile::Steps(steps) => {
                    let i = steps.partition_point(|s| s.at as f64 / 1e9 <= rel);
                    if i == 0 { 0.0 } else { steps[i - 1].rate.0 }
                }
                Profile::Ramp { from, to, over } => {
                    let f = (rel / (*over as f64 / 1e9)).clamp(0.0, 1.0);
                    if *over == 0 {
                        to.0
                    } else {
                        from.0 + f * (to.0 - from.0)
                    }
                }
                Profile::Diurnal {
                    mean,
                    amplitude,
                    period,
                    peak,
                } => {
                    let ph = (rel - *peak as f64 / 1e9) / (*period as f64 / 1e9);
                    mean.0 * (1.0 + amplitude * (2.0 * std::f64::consts::PI * ph).cos())
                }
            },
            _ => 0.0,
        }
    }

    pub(super) fn max_rate(&self) -> f64 {
        match &self.plan.model.arrivals {
            Arrivals::Varying(Profile::Steps(s)) => s.iter().map(|s| s.rate.0).fold(0.0, f64::max),
            Arrivals::Varying(Profile::Ramp { from, to, .. }) => from.0.max(to.0),
            Arrivals::Varying(Profile::Diurnal {
                mean, amplitude, ..
            }) => mean.0 * (1.0 + amplitude),
            _ => self.rate_at(self.t0),
        }
    }

    /// The next arrival after `t`, or `None` past the end.
    pub(super) fn next_arrival(&mut self, t: u64, first: bool) -> Option<u64> {
        if let Some(ia) = &self.interarrival {
            let steady = self.plan.model.start == Start::SteadyState;
            let dt = if first && steady {
                ia.sample_residual(&mut self.r_arr)
            } else {
                ia.sample(&mut self.r_arr)
            };
            return Some(t.saturating_add(ns(dt)));
        }
        // Thinning.
        let lmax = self.max_rate();
        if lmax.is_nan() || lmax <= 0.0 {
            return None;
        }
        let mut t = t;
        loop {
            t = t.saturating_add(ns(self.r_arr.exp1() / lmax));
            if t > self.end {
                return None;
            }
            if self.r_arr.uniform() * lmax <= self.rate_at(t) {
                return Some(t);
            }
        }
    }

    pub(super) fn schedule_processes(&mut self) {
        let m = self.plan.model.clone();
        match &m.arrivals {
            Arrivals::Poisson { .. } | Arrivals::Renewal { .. } | Arrivals::Varying(_) => {
                if let Some(t) = self.next_arrival(self.t0, true) {
                    self.push(t, Pend::Arrival);
                }
            }
            Arrivals::Batches(b) => {
                for b in b {
                    self.push(self.t0.saturating_add(b.at), Pend::Batch(b.count));
                }
            }
            Arrivals::Replacement => {}
        }
        for (i, p) in m.snapshots.iter().enumerate() {
            if let SnapshotPolicy::RoundRobin(r) = p {
                self.rr_state.push((u64::MAX, 0, VecDeque::new()));
                let first = r.from.unwrap_or(r.every);
                self.push(self.t0.saturating_add(first), Pend::RoundRobin(i as u32));
            } else {
                self.rr_state.push((u64::MAX, 0, VecDeque::new()));
            }
        }
        let f = &m.failures;
        let rates = [
            (f.resize.as_ref().map(|r| r.rate.0), Pend::Resize),
            (f.abort.as_ref().map(|r| r.rate.0), Pend::Abort),
            (f.reschedule.as_ref().map(|r| r.rate.0), Pend::Reschedule),
            (m.restores.as_ref().map(|r| r.rate.0), Pend::Restore),
            (m.clones.as_ref().map(|r| r.rate.0), Pend::Clone),
            (m.modifies.as_ref().map(|r| r.rate.0), Pend::Modify),
            (
                m.group_snapshots.as_ref().map(|r| r.rate.0),
                Pend::GroupSnapshot,
            ),
        ];
        for (rate, what) in rates {
            if let Some(r) = rate {
                let t = self.t0.saturating_add(ns(self.r_fail.exp1() / r));
                self.push(t, what);
            }
        }
        for (i, d) in m.drains.iter().enumerate() {
            self.push(self.t0.saturating_add(d.at), Pend::Drain(i as u32));
        }
    }
}
