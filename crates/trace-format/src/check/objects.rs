//! Checks of the object life-cycle ops: volumes (create, restore, clone, from a group
//! snapshot), group snapshots, and workloads (attach, end).

use super::{Checker, Gone, Volume, Workload, dangling, since_problem, since3_problem};
use crate::error::Problem;
use crate::model::{AccessMode, Attach, CreateVolume, GroupMember, GroupSnapshot, VolumeSource};
use crate::units::Name;

impl Checker {
    pub(super) fn group_snapshot(
        &mut self,
        g: &GroupSnapshot,
        p: &dyn Fn(&str) -> String,
        push: &mut dyn FnMut(String, Problem),
    ) {
        if g.volumes.is_empty() {
            push(
                p("group_snapshot.volumes"),
                Problem::InvalidValue("a group snapshot needs at least one volume".into()),
            );
        }
        let mut members: Vec<(Name, u64)> = Vec::with_capacity(g.volumes.len());
        for (k, v) in g.volumes.iter().enumerate() {
            if members.iter().any(|(m, _)| m == v) {
                push(
                    p(&format!("group_snapshot.volumes[{k}]")),
                    Problem::InvalidValue(format!("volume {:?} is listed twice", v.as_str())),
                );
                continue;
            }
            match self.volumes.get(v) {
                None => push(
                    p(&format!("group_snapshot.volumes[{k}]")),
                    dangling("volume", v, &self.gone_volumes),
                ),
                Some(vol) => members.push((v.clone(), vol.size)),
            }
        }
        if self.groups.contains_key(&g.group) {
            push(
                p("group_snapshot.group"),
                Problem::Duplicate {
                    kind: "group snapshot",
                    name: g.group.clone(),
                },
            );
        } else {
            self.groups.insert(g.group.clone(), members);
            self.gone_groups.at.remove(&g.group);
        }
    }

    /// The size of member `m` when its group was taken; a problem when there is no such group
    /// or member.
    pub(super) fn member_size(&self, m: &GroupMember) -> Result<u64, (&'static str, Problem)> {
        let Some(members) = self.groups.get(&m.group) else {
            return Err((
                "create_volume.source.group_member.group",
                dangling("group snapshot", &m.group, &self.gone_groups),
            ));
        };
        members
            .iter()
            .find(|(v, _)| *v == m.volume)
            .map(|(_, size)| *size)
            .ok_or_else(|| {
                (
                    "create_volume.source.group_member.volume",
                    Problem::InvalidValue(format!(
                        "volume {:?} is not a member of group snapshot {:?}",
                        m.volume.as_str(),
                        m.group.as_str()
                    )),
                )
            })
    }

    pub(super) fn create_volume(
        &mut self,
        c: &CreateVolume,
        p: &dyn Fn(&str) -> String,
        push: &mut dyn FnMut(String, Problem),
    ) {
        let source_size = match &c.source {
            Some(VolumeSource::Snapshot(s)) => self.snapshots.get(s).map(|s| s.size),
            Some(VolumeSource::Volume(v)) => self.volumes.get(v).map(|v| v.size),
            Some(VolumeSource::GroupMember(m)) => self.member_size(m).ok(),
            None => None,
        };
        let size = c
            .size
            .or(source_size)
            .unwrap_or_else(|| self.defaults.volume_size(None));
        if size == 0 {
            push(
                p("create_volume.size"),
                Problem::InvalidValue("a volume size must not be 0".into()),
            );
        }
        match &c.source {
            Some(VolumeSource::Snapshot(s)) => {
                let src = self.snapshots.get(s).map(|src| src.size);
                source_fits(push, p, "snapshot", s, src, size, &self.gone_snapshots);
            }
            Some(VolumeSource::Volume(v)) => {
                let src = self.volumes.get(v).map(|src| src.size);
                source_fits(push, p, "volume", v, src, size, &self.gone_volumes);
            }
            Some(VolumeSource::GroupMember(m)) => {
                if self.version < 2 {
                    push(
                        p("create_volume.source.group_member"),
                        since_problem("group_member", self.version),
                    );
                }
                match self.member_size(m) {
                    Err((path, problem)) => push(p(path), problem),
                    Ok(src) if size < src => push(
                        p("create_volume.size"),
                        Problem::SmallerThanSource {
                            size,
                            source_size: src,
                        },
                    ),
                    Ok(_) => {}
                }
            }
            None => {}
        }
        if self.volumes.contains_key(&c.volume) {
            push(
                p("create_volume.volume"),
                Problem::Duplicate {
                    kind: "volume",
                    name: c.volume.clone(),
                },
            );
            return;
        }
        self.gone_volumes.at.remove(&c.volume);
        self.serials += 1;
        self.volumes.insert(
            c.volume.clone(),
            Volume {
                size,
                before_grow: None,
                access: self.defaults.access_mode(c.access_mode),
                attached_by: Vec::new(),
                serial: self.serials,
            },
        );
    }

    pub(super) fn attach(
        &mut self,
        a: &Attach,
        p: &dyn Fn(&str) -> String,
        push: &mut dyn FnMut(String, Problem),
    ) {
        if a.wait_for_room && self.version < 3 {
            push(
                p("attach.wait_for_room"),
                since3_problem("wait_for_room", self.version),
            );
        }
        if self.workloads.contains_key(&a.workload) {
            push(
                p("attach.workload"),
                Problem::Duplicate {
                    kind: "workload",
                    name: a.workload.clone(),
                },
            );
            return;
        }
        let mut mounted = Vec::with_capacity(a.volumes.len());
        for (i, name) in a.volumes.iter().enumerate() {
            let path = || p(&format!("attach.volumes[{i}]"));
            if a.volumes[..i].contains(name) {
                push(
                    path(),
                    Problem::InvalidValue(format!("volume {name:?} is listed twice")),
                );
                continue;
            }
            let Some(v) = self.volumes.get_mut(name) else {
                push(path(), dangling("volume", name, &self.gone_volumes));
                continue;
            };
            let conflict = v.attached_by.iter().find(|(_, node)| match v.access {
                AccessMode::ReadWriteOncePod => true,
                // Single-node: another pod on the same (pinned) node may share it.
                AccessMode::ReadWriteOnce => node.is_none() || *node != a.node,
                AccessMode::ReadOnlyMany | AccessMode::ReadWriteMany => false,
            });
            if let Some((by, _)) = conflict {
                push(
                    path(),
                    Problem::AlreadyAttached {
                        volume: name.clone(),
                        mode: v.access,
                        by: by.clone(),
                    },
                );
                continue;
            }
            if v.attached_by.is_empty() {
                self.attached_volumes += 1;
            }
            v.attached_by.push((a.workload.clone(), a.node.clone()));
            mounted.push(name.clone());
        }
        self.gone_workloads.at.remove(&a.workload);
        self.workloads
            .insert(a.workload.clone(), Workload { volumes: mounted });
    }

    pub(super) fn end_workload(
        &mut self,
        name: &Name,
        at: u64,
        path: &str,
        push: &mut dyn FnMut(String, Problem),
    ) {
        let Some(w) = self.workloads.remove(name) else {
            push(
                path.to_owned(),
                dangling("workload", name, &self.gone_workloads),
            );
            return;
        };
        for v in &w.volumes {
            if let Some(vol) = self.volumes.get_mut(v) {
                vol.attached_by.retain(|(wl, _)| wl != name);
                if vol.attached_by.is_empty() {
                    self.attached_volumes -= 1;
                }
            }
        }
        self.gone_workloads.insert(name.clone(), at);
    }
}

/// A restore's or a clone's source (`kind` `snapshot` or `volume`, of size `source_size` when
/// it exists): it must exist, and the new volume (`size`) must be at least as large.
fn source_fits(
    push: &mut dyn FnMut(String, Problem),
    p: &dyn Fn(&str) -> String,
    kind: &'static str,
    name: &Name,
    source_size: Option<u64>,
    size: u64,
    gone: &Gone,
) {
    match source_size {
        None => push(
            p(&format!("create_volume.source.{kind}")),
            dangling(kind, name, gone),
        ),
        Some(source_size) if size < source_size => push(
            p("create_volume.size"),
            Problem::SmallerThanSource { size, source_size },
        ),
        Some(_) => {}
    }
}
