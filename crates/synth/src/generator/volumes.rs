//! A container's volumes: their attributes drawn, the shared pool declared in the header,
//! a container's volumes allocated (new, from the pool, restored or cloned) and attached.

use std::collections::VecDeque;

use trace_format::{Attach, CreateVolume, Header, Name, Op, VolumeDecl, WorkloadDecl};

use super::{Container, Generator, Pend, Vol};
use crate::model::{Process, SnapshotPolicy};

impl Generator {
    pub(super) fn new_volume_attrs(
        &mut self,
    ) -> (u64, Option<Name>, Option<trace_format::AccessMode>) {
        let Some(v) = &self.plan.vols else {
            return (1 << 30, None, None);
        };
        let size = v.size.draw(&mut self.r_place);
        let class = v.class.as_ref().map(|c| c.draw(&mut self.r_place));
        let access = v.access.as_ref().map(|a| a.draw(&mut self.r_place));
        (size, class, access)
    }

    pub(super) fn declare_pool(&mut self, header: &mut Header) {
        let Some(reuse) = self
            .plan
            .model
            .volumes
            .as_ref()
            .and_then(|v| v.reuse.clone())
        else {
            return;
        };
        let width = reuse.pool.saturating_sub(1).to_string().len();
        let mode = self.plan.model.volumes.as_ref().and_then(|v| v.volume_mode);
        for i in 0..reuse.pool {
            let (size, class, access) = self.new_volume_attrs();
            let name = Name::from(format!("{}{i:0width$}", reuse.prefix));
            header.volumes.push(VolumeDecl {
                name: name.clone(),
                size: Some(size),
                storage_class: class,
                access_mode: access,
                volume_mode: mode,
                attributes_class: None,
            });
            let id = self.next_vol;
            self.next_vol += 1;
            self.vols.insert(
                id,
                Vol {
                    name,
                    size,
                    class: None,
                    pool: true,
                    tenant: None,
                    snaps: VecDeque::new(),
                },
            );
            self.pool.push(id);
            self.pool_free.push_back(id);
            self.counts.volumes_declared += 1;
        }
    }

    pub(super) fn pick_host(&mut self) -> u32 {
        self.available[self.r_place.below(self.available.len())]
    }

    /// Allocates a container and its volumes. New volumes are declared in the header when
    /// `declare` is given (the initial population), else created by events at `at`.
    pub(super) fn allocate(
        &mut self,
        at: u64,
        host: u32,
        slot: Option<u32>,
        mut declare: Option<&mut Header>,
    ) -> u64 {
        let id = self.next_container;
        self.next_container += 1;
        self.counts.containers += 1;
        let name = Name::from(format!("{}{id}", self.plan.model.cluster.workload_prefix));
        let tenant = self
            .plan
            .tenants
            .as_ref()
            .map(|t| t.draw(&mut self.r_place));
        let mut vols = Vec::new();
        if let Some(vp) = &self.plan.vols {
            let (share, reuse) = (vp.share, vp.reuse_share);
            if self.r_place.chance(share) {
                let k = vp.per_container.draw(&mut self.r_place);
                for _ in 0..k {
                    if reuse > 0.0
                        && self.r_place.chance(reuse)
                        && let Some(v) = self.pool_free.pop_front()
                    {
                        {
                            self.counts.pool_reuses += 1;
                            vols.push(v);
                            continue;
                        }
                    }
                    let (size, class, access) = self.new_volume_attrs();
                    let vid = self.next_vol;
                    self.next_vol += 1;
                    let vname = Name::from(format!("pvc-{vid}"));
                    let mode = self.plan.model.volumes.as_ref().and_then(|v| v.volume_mode);
                    match declare.as_deref_mut() {
                        Some(h) => {
                            h.volumes.push(VolumeDecl {
                                name: vname.clone(),
                                size: Some(size),
                                storage_class: class,
                                access_mode: access,
                                volume_mode: mode,
                                attributes_class: None,
                            });
                            self.counts.volumes_declared += 1;
                        }
                        None => {
                            self.counts.volumes_created += 1;
                            self.emit(
                                at,
                                tenant.clone(),
                                Op::CreateVolume(CreateVolume {
                                    volume: vname.clone(),
                                    size: Some(size),
                                    storage_class: class,
                                    access_mode: access,
                                    volume_mode: mode,
                                    source: None,
                                }),
                            );
                        }
                    }
                    self.vols.insert(
                        vid,
                        Vol {
                            name: vname,
                            size,
                            class: None,
                            pool: false,
                            tenant: tenant.clone(),
                            snaps: VecDeque::new(),
                        },
                    );
                    self.live_vols.insert(vid);
                    self.live_pick.insert(vid);
                    vols.push(vid);
                }
            }
        }
        self.containers.insert(
            id,
            Container {
                name,
                host,
                slot,
                tenant,
                vols,
                end: u64::MAX,
            },
        );
        id
    }

    /// Emits the attach of an allocated container at `at` (or, given `declare`, declares it
    /// running before the trace starts) and schedules its life.
    pub(super) fn attach(
        &mut self,
        id: u64,
        at: u64,
        life_end: u64,
        initial: bool,
        declare: Option<&mut Header>,
    ) {
        let Some(c) = self.containers.get_mut(&id) else {
            return;
        };
        c.end = life_end;
        let volumes = c
            .vols
            .iter()
            .filter_map(|v| self.vols.get(v))
            .map(|v| v.name.clone())
            .collect();
        let node = self
            .plan
            .model
            .cluster
            .pin_nodes
            .then(|| self.nodes[c.host as usize].clone());
        let tenant = c.tenant.clone();
        let has_vols = !c.vols.is_empty();
        let vols = c.vols.clone();
        match declare {
            Some(h) => h.workloads.push(WorkloadDecl {
                name: c.name.clone(),
                volumes,
                node,
                tenant,
            }),
            None => {
                let op = Op::Attach(Attach {
                    workload: c.name.clone(),
                    volumes,
                    node,
                    wait_for_room: false,
                });
                self.emit(at, tenant, op);
            }
        }
        self.running.insert(id);
        self.push(life_end, Pend::End(id));
        if has_vols
            && let Some(io) = &self.plan.model.io
            && !io.phases.is_empty()
            && self.r_place.chance(io.share)
        {
            let start = at.saturating_add(io.delay);
            self.push(
                start,
                Pend::Io {
                    container: id,
                    phase: 0,
                },
            );
        }
        let policies: Vec<(usize, u64, Process)> = self
            .plan
            .model
            .snapshots
            .iter()
            .enumerate()
            .filter_map(|(p, pol)| match pol {
                SnapshotPolicy::PerVolume(pv) => Some((p, pv.every, pv.process)),
                SnapshotPolicy::RoundRobin(_) | SnapshotPolicy::IncrementalBackup(_) => None,
            })
            .collect();
        self.start_backups(at, &vols, initial);
        for (p, every, process) in policies {
            {
                for &v in &vols {
                    if self.vols.get(&v).is_some_and(|v| !v.pool) {
                        let dt = self.per_volume_gap(every, process, initial);
                        self.push(
                            at.saturating_add(dt),
                            Pend::PerVolume {
                                policy: p as u32,
                                vol: v,
                            },
                        );
                    }
                }
            }
        }
    }
}
