//! Snapshot policies, restores and clones, and I/O phases: everything that acts on the
//! volumes of running containers.
//!
//! An incremental-backup chain is per (policy, volume): each snapshot schedules its listing
//! (`snapshot_allocated` for a full backup, `snapshot_delta` from the chain's previous
//! snapshot) `delay` later as a pending item, and counts as read by it until the listing is
//! written (`listing_uses`). Retention skips counted snapshots, so a `delete_snapshot` always
//! follows every listing of its snapshot in the trace; replay orders the rest (a listing waits
//! for its snapshots' creation, a delete for their earlier users).

use std::collections::VecDeque;

use trace_format::{
    CreateVolume, IoPhase, Name, Op, Snapshot, SnapshotAllocated, SnapshotDelta, SnapshotRef,
    VolumeSource,
};

use super::{Chain, Generator, NO_BASE, Pend, Snap, Vol};
use crate::model::{Over, SnapshotPolicy};

impl Generator {
    pub(super) fn take_snapshot(
        &mut self,
        at: u64,
        vid: u64,
        policy: u32,
        class: Option<Name>,
    ) -> Option<u64> {
        let v = self.vols.get_mut(&vid)?;
        let sid = self.next_snap;
        self.next_snap += 1;
        let name = Name::from(format!("snap-{sid}"));
        v.snaps.push_back((policy, sid));
        let (vname, tenant) = (v.name.clone(), v.tenant.clone());
        self.snaps.insert(
            sid,
            Snap {
                name: name.clone(),
                vol: vid,
            },
        );
        self.snap_pick.insert(sid);
        self.emit(
            at,
            tenant,
            Op::Snapshot(Snapshot {
                volume: vname,
                snapshot: name,
                class,
            }),
        );
        Some(sid)
    }

    pub(super) fn delete_snapshot(&mut self, at: u64, sid: u64) {
        let Some(s) = self.snaps.remove(&sid) else {
            return;
        };
        self.snap_pick.remove(sid);
        let tenant = self.vols.get_mut(&s.vol).and_then(|v| {
            v.snaps.retain(|(_, x)| *x != sid);
            v.tenant.clone()
        });
        self.emit(
            at,
            tenant,
            Op::DeleteSnapshot(SnapshotRef { snapshot: s.name }),
        );
    }

    pub(super) fn round_robin(&mut self, at: u64, p: u32) {
        let SnapshotPolicy::RoundRobin(r) = self.plan.model.snapshots[p as usize].clone() else {
            return;
        };
        let (last, taken, _) = &self.rr_state[p as usize];
        let (last, taken) = (*last, *taken);
        if r.count.is_some_and(|c| taken >= c) {
            return;
        }
        let limit = r.volumes.map_or(usize::MAX, |n| n as usize);
        let target = match r.over {
            Over::Live => {
                let first = self.live_vols.iter().next().copied();
                let next = self
                    .live_vols
                    .iter()
                    .take(limit)
                    .find(|&&v| last != u64::MAX && v > last)
                    .copied();
                next.or(first)
            }
            Over::Pool => {
                let n = self.pool.len().min(limit);
                (n > 0).then(|| self.pool[taken as usize % n])
            }
        };
        if let Some(v) = target {
            let class = r.class.as_deref().map(Name::from);
            if let Some(sid) = self.take_snapshot(at, v, p, class) {
                let st = &mut self.rr_state[p as usize];
                st.0 = v;
                st.1 += 1;
                st.2.push_back(sid);
                if let Some(keep) = r.retain {
                    while self.rr_state[p as usize].2.len() > keep as usize {
                        if let Some(old) = self.rr_state[p as usize].2.pop_front() {
                            self.delete_snapshot(at, old);
                        }
                    }
                }
            }
        }
        self.push(at.saturating_add(r.every), Pend::RoundRobin(p));
    }

    pub(super) fn per_volume(&mut self, at: u64, p: u32, vid: u64) {
        let SnapshotPolicy::PerVolume(pv) = self.plan.model.snapshots[p as usize].clone() else {
            return;
        };
        // Only while the volume belongs to a running container (or awaits deletion).
        if !self.vols.contains_key(&vid) {
            return;
        }
        let class = pv.class.as_deref().map(Name::from);
        self.take_snapshot(at, vid, p, class);
        if let Some(keep) = pv.retain {
            let mine: Vec<u64> = self.vols.get(&vid).map_or_else(Vec::new, |v| {
                v.snaps
                    .iter()
                    .filter(|(q, _)| *q == p)
                    .map(|(_, s)| *s)
                    .collect()
            });
            let excess = mine.len().saturating_sub(keep as usize);
            for s in &mine[..excess] {
                self.delete_snapshot(at, *s);
            }
        }
        let dt = self.per_volume_gap(pv.every, pv.process, false);
        self.push(
            at.saturating_add(dt.max(1)),
            Pend::PerVolume {
                policy: p,
                vol: vid,
            },
        );
    }

    /// The next snapshot of a volume's incremental-backup chain, its listing (the allocated
    /// blocks of the first, the delta from the previous one for the others) `delay` later,
    /// and the chain's retention.
    pub(super) fn backup_snapshot(&mut self, at: u64, p: u32, vid: u64) {
        let SnapshotPolicy::IncrementalBackup(b) = self.plan.model.snapshots[p as usize].clone()
        else {
            return;
        };
        // Only while the volume lives (its container runs, or it awaits deletion).
        if !self.vols.contains_key(&vid) {
            return;
        }
        let chain = self.chains.get(&(p, vid)).copied().unwrap_or_default();
        if b.count.is_some_and(|c| chain.taken >= c) {
            return;
        }
        let class = b.class.as_deref().map(Name::from);
        let Some(sid) = self.take_snapshot(at, vid, p, class) else {
            return;
        };
        self.chains.insert(
            (p, vid),
            Chain {
                taken: chain.taken + 1,
                newest: Some(sid),
            },
        );
        let base = match chain.newest {
            None if b.full_first => Some(NO_BASE),
            Some(prev) if b.deltas && self.snaps.contains_key(&prev) => Some(prev),
            _ => None,
        };
        if let Some(base) = base {
            for s in [base, sid] {
                if s != NO_BASE {
                    *self.listing_uses.entry(s).or_default() += 1;
                }
            }
            self.push(
                at.saturating_add(b.delay),
                Pend::BackupList {
                    policy: p,
                    vol: vid,
                    base,
                    snap: sid,
                },
            );
        }
        self.backup_retention(at, p, vid);
        if b.count.is_none_or(|c| chain.taken + 1 < c) {
            self.push(
                at.saturating_add(b.every),
                Pend::Backup {
                    policy: p,
                    vol: vid,
                },
            );
        }
    }

    /// A chain's listing: `snapshot_delta base → snap`, or `snapshot_allocated snap` for
    /// [`NO_BASE`]. Dropped when the volume (and so its snapshots) was deleted meanwhile.
    pub(super) fn backup_listing(&mut self, at: u64, p: u32, vid: u64, base: u64, snap: u64) {
        for s in [base, snap] {
            if let Some(n) = self.listing_uses.get_mut(&s) {
                *n -= 1;
                if *n == 0 {
                    self.listing_uses.remove(&s);
                }
            }
        }
        let SnapshotPolicy::IncrementalBackup(b) = &self.plan.model.snapshots[p as usize] else {
            return;
        };
        let block_size = b.block_size.map(|x| x.0);
        let name = |g: &Self, s: u64| g.snaps.get(&s).map(|x| x.name.clone());
        let Some(snapshot) = name(self, snap) else {
            return;
        };
        let op = if base == NO_BASE {
            Op::SnapshotAllocated(SnapshotAllocated {
                snapshot,
                block_size,
            })
        } else {
            let Some(base) = name(self, base) else {
                return;
            };
            Op::SnapshotDelta(SnapshotDelta {
                base,
                snapshot,
                block_size,
            })
        };
        let tenant = self.vols.get(&vid).and_then(|v| v.tenant.clone());
        self.emit(at, tenant, op);
        self.backup_retention(at, p, vid);
    }

    /// Deletes the snapshots of a chain older than its newest `retain`, except those a
    /// scheduled listing still reads (they go at a later retention, after that listing, which
    /// the replayer's delete waits for).
    fn backup_retention(&mut self, at: u64, p: u32, vid: u64) {
        let SnapshotPolicy::IncrementalBackup(b) = &self.plan.model.snapshots[p as usize] else {
            return;
        };
        let Some(keep) = b.retain else {
            return;
        };
        let mine: Vec<u64> = self.vols.get(&vid).map_or_else(Vec::new, |v| {
            v.snaps
                .iter()
                .filter(|(q, _)| *q == p)
                .map(|(_, s)| *s)
                .collect()
        });
        let excess = mine.len().saturating_sub(keep as usize);
        for &s in &mine[..excess] {
            if !self.listing_uses.contains_key(&s) {
                self.delete_snapshot(at, s);
            }
        }
    }

    pub(super) fn io_phase(&mut self, at: u64, id: u64, phase: u32) {
        let Some(io) = &self.plan.model.io else {
            return;
        };
        let Some(ph) = io.phases.get(phase as usize).cloned() else {
            return;
        };
        let Some(c) = self.containers.get(&id) else {
            return;
        };
        if at >= c.end {
            return;
        }
        let duration = ph.duration.unwrap_or(c.end - at).min(c.end - at);
        if duration == 0 {
            return;
        }
        let (wname, tenant, vols) = (c.name.clone(), c.tenant.clone(), c.vols.clone());
        for v in vols {
            let Some(vol) = self.vols.get(&v) else {
                continue;
            };
            let region = ph.region.map(|r| r.0.min(vol.size));
            let op = Op::IoPhase(IoPhase {
                workload: wname.clone(),
                volume: vol.name.clone(),
                pattern: ph.pattern,
                read_pct: ph.read_pct,
                block_size: ph.block_size.clone(),
                load: ph.load.clone(),
                duration: Some(duration),
                bytes: ph.bytes.map(|b| b.0),
                region,
                jobs: ph.jobs,
                direct: ph.direct,
                verify: ph.verify,
                ordered: None,
            });
            self.emit(at, tenant.clone(), op);
        }
        self.push(
            at.saturating_add(duration),
            Pend::Io {
                container: id,
                phase: phase + 1,
            },
        );
    }

    pub(super) fn derived(
        &mut self,
        at: u64,
        keep: u64,
        tenant: Option<Name>,
        kind: &str,
        source: VolumeSource,
    ) {
        let n = self.next_derived;
        self.next_derived += 1;
        let vid = self.next_vol;
        self.next_vol += 1;
        let name = Name::from(format!("{kind}-{n}"));
        self.counts.volumes_created += 1;
        self.emit(
            at,
            tenant.clone(),
            Op::CreateVolume(CreateVolume {
                volume: name.clone(),
                size: None,
                storage_class: None,
                access_mode: None,
                volume_mode: None,
                source: Some(source),
            }),
        );
        self.vols.insert(
            vid,
            Vol {
                name,
                class: None,
                size: 0,
                pool: false,
                tenant,
                snaps: VecDeque::new(),
            },
        );
        self.push(at.saturating_add(keep), Pend::DropDerived(vid));
    }
}
