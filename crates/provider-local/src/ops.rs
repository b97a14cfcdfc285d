//! The local provider's operations. Blocking work (commands, copies) runs on tokio's
//! blocking pool; the state lock is never held across it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

use replay::{OpCtx, ProviderError};
use serde_json::json;
use trace_format::{Event, Name, Op, VolumeMode, VolumeSource};

use local_storage::{self as storage, throttle};

use crate::context::{LocalProvider, Snap, Taken, Volume, Workload, blocking, lock, missing};
use crate::sys::{self, io_err, path_str, storage_err};
use crate::target::DATA_FILE;
use crate::{cbt, io};

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

impl LocalProvider {
    fn unique(&self, prefix: &str, name: &str) -> String {
        format!(
            "{prefix}-{}-{}",
            sanitize(name),
            self.seq.fetch_add(1, Relaxed)
        )
    }

    fn capped(&self, size: u64) -> u64 {
        match self.config.max_volume_bytes {
            0 => size,
            cap => size.min(cap),
        }
    }
}

pub(crate) async fn execute(
    p: &LocalProvider,
    ev: Arc<Event>,
    ctx: Arc<OpCtx>,
) -> Result<(), ProviderError> {
    match &ev.op {
        Op::CreateVolume(c) => {
            let header = &p.run()?.header;
            let block = c.volume_mode.or(header.defaults.volume_mode) == Some(VolumeMode::Block);
            let mut from_snap = None;
            let source = match &c.source {
                None => None,
                Some(VolumeSource::Snapshot(s)) => {
                    let snap = p
                        .state()
                        .snapshots
                        .get(s)
                        .cloned()
                        .ok_or_else(|| missing("snapshot", s))?;
                    from_snap = Some(snap.clone());
                    Some((snap.image.clone(), snap.size, snap.block))
                }
                Some(VolumeSource::Volume(v)) => {
                    let vol = p.volume(v)?;
                    let g = lock(&vol);
                    Some((g.image.clone(), g.size, g.block))
                }
                Some(VolumeSource::GroupMember(m)) => {
                    let snap = p
                        .state()
                        .groups
                        .get(&m.group)
                        .ok_or_else(|| missing("group snapshot", &m.group))?
                        .get(&m.volume)
                        .cloned()
                        .ok_or_else(|| missing("member of the group snapshot", &m.volume))?;
                    from_snap = Some(snap.clone());
                    Some((snap.image.clone(), snap.size, snap.block))
                }
            };
            let size = p.capped(match (c.size, &source) {
                (None, Some((_, s, _))) => *s,
                (s, _) => header.defaults.volume_size(s),
            });
            let block = source.as_ref().map_or(block, |s| s.2);
            let loop_mode = p.loop_mode();
            let image = p
                .objects()?
                .join(p.unique("vol", &c.volume))
                .with_extension(if loop_mode { "img" } else { "d" });
            let cgroup = p.volume_cgroup(&ctx)?;
            let vol = Volume {
                image: image.clone(),
                size,
                block,
                loop_dev: None,
                mount: None,
                users: 0,
                // The size asked for, before --local-max-volume caps the image.
                requested: match (c.size, &source) {
                    (None, Some((_, s, _))) => *s,
                    (s, _) => header.defaults.volume_size(s),
                },
                limits: throttle::Limits::default(),
                cgroup,
                source: from_snap,
            };
            let ctx2 = ctx.clone();
            blocking(move || create_image(&ctx2, &image, size, block, loop_mode, source)).await?;
            p.state()
                .volumes
                .insert(c.volume.clone(), Arc::new(Mutex::new(vol)));
            Ok(())
        }
        Op::DeleteVolume(v) => {
            let vol = p.volume(&v.volume)?;
            let loop_mode = p.loop_mode();
            let ctx2 = ctx.clone();
            let vol2 = vol.clone();
            blocking(move || {
                let mut g = lock(&vol2);
                if g.users > 0 {
                    return Err(ProviderError::new(
                        "still_attached",
                        "volume is mounted by a workload",
                    ));
                }
                detach_volume(&ctx2, &mut g)?;
                remove_image(&ctx2, &g.image, loop_mode)?;
                if let Some(cg) = g.cgroup.take()
                    && let Some(root) = throttle::blkio_root()
                {
                    // Its I/O threads have ended with the workloads that held it.
                    throttle::remove(&cg, &root).map_err(io_err)?;
                    ctx2.ledger()
                        .release("cgroup", path_str(&cg)?)
                        .map_err(io_err)?;
                }
                Ok(())
            })
            .await?;
            p.state().volumes.remove(&v.volume);
            Ok(())
        }
        Op::Attach(a) => {
            attach_all(p, &ctx, &a.volumes).await?;
            p.state().workloads.insert(
                a.workload.clone(),
                Workload {
                    volumes: a.volumes.clone(),
                    node: a.node.clone(),
                    io: Vec::new(),
                },
            );
            ctx.phase("running");
            Ok(())
        }
        Op::Detach(w) | Op::AbortWorkload(w) => {
            let _turn = p.workload_turns.take(&w.workload).await;
            let wl = p
                .state()
                .workloads
                .remove(&w.workload)
                .ok_or_else(|| missing("workload", &w.workload))?;
            for s in &wl.io {
                s.request();
            }
            ctx.phase("io-stopped");
            release_volumes(p, &ctx, &wl.volumes).await
        }
        Op::Reschedule(r) => {
            let _turn = p.workload_turns.take(&r.workload).await;
            reschedule(p, &ctx, &r.workload, r.node.clone()).await
        }
        Op::CordonNode(n) => {
            p.state().cordoned.push(n.node.clone());
            Ok(())
        }
        // Nodes are labels here: an out-of-service node's workloads move like a drain's (their
        // I/O stopped, their volumes detached and attached again).
        Op::DrainNode(n) | Op::ForceDetach(n) => {
            let on_node: Vec<Name> = {
                let mut st = p.state();
                st.cordoned.push(n.node.clone());
                st.workloads
                    .iter()
                    .filter(|(_, w)| w.node.as_ref() == Some(&n.node))
                    .map(|(k, _)| k.clone())
                    .collect()
            };
            for w in on_node {
                let _turn = p.workload_turns.take(&w).await;
                // A detach or a move that held the turn first may have taken it elsewhere.
                let still_here = p
                    .state()
                    .workloads
                    .get(&w)
                    .is_some_and(|wl| wl.node.as_ref() == Some(&n.node));
                if still_here {
                    reschedule(p, &ctx, &w, None).await?;
                }
            }
            Ok(())
        }
        Op::Snapshot(s) => {
            let vol = p.volume(&s.volume)?;
            let of = lock(&vol).image.clone();
            let image = p
                .objects()?
                .join(p.unique("snap", &s.snapshot))
                .with_extension(if p.loop_mode() { "img" } else { "d" });
            let (image2, ctx2, loop_mode) = (image.clone(), ctx.clone(), p.loop_mode());
            let requested_ns = ctx.now_ns();
            let (size, block, created_ns, ready_ns) = blocking(move || {
                let g = lock(&vol);
                ctx2.ledger()
                    .intend(
                        if loop_mode { "image" } else { "dir" },
                        path_str(&image2)?,
                        json!({"snapshot_of": path_str(&g.image)?}),
                    )
                    .map_err(io_err)?;
                // Freeze a mounted file system so the copy is consistent.
                let frozen = g.mount.as_deref().is_some_and(storage::freeze);
                let created = ctx2.now_ns();
                if frozen {
                    ctx2.phase("freeze");
                }
                let copied = copy_volume(&g.image, &image2, loop_mode);
                if frozen && let Some(m) = &g.mount {
                    let _ = storage::thaw(m);
                    ctx2.phase("thaw");
                }
                ctx2.phase(if copied? { "copy-reflink" } else { "copy-full" });
                Ok((g.size, g.block, created, ctx2.now_ns()))
            })
            .await?;
            let taken = Taken {
                by: format!("snapshot {}", s.snapshot),
                requested_ns,
                created_ns,
                cut_ns: created_ns,
                ready_ns,
            };
            p.state().snapshots.insert(
                s.snapshot.clone(),
                Arc::new(Snap {
                    image,
                    size,
                    block,
                    taken,
                    volume: s.volume.clone(),
                    of,
                }),
            );
            Ok(())
        }
        Op::GroupSnapshot(g) => group_snapshot(p, g, &ctx).await,
        Op::SnapshotAllocated(s) => cbt::allocated(p, &ev, s, ctx).await,
        Op::SnapshotDelta(d) => cbt::delta(p, &ev, d, ctx).await,
        Op::DeleteGroupSnapshot(g) => {
            let members = p
                .state()
                .groups
                .remove(&g.group)
                .ok_or_else(|| missing("group snapshot", &g.group))?;
            let loop_mode = p.loop_mode();
            blocking(move || {
                for snap in members.values() {
                    remove_image(&ctx, &snap.image, loop_mode)?;
                }
                Ok(())
            })
            .await
        }
        Op::DeleteSnapshot(s) => {
            let snap = p
                .state()
                .snapshots
                .remove(&s.snapshot)
                .ok_or_else(|| missing("snapshot", &s.snapshot))?;
            let loop_mode = p.loop_mode();
            blocking(move || remove_image(&ctx, &snap.image, loop_mode)).await
        }
        Op::Resize(r) => {
            let vol = p.volume(&r.volume)?;
            let name = r.volume.clone();
            let want = r.size;
            let size = p.capped(want);
            let loop_mode = p.loop_mode();
            blocking(move || {
                let mut g = lock(&vol);
                if want <= g.requested {
                    // Kubernetes' rule: a claim's request may go down again only after a
                    // failed resize, and only to more than the capacity it has.
                    return Err(ProviderError::new(
                        "invalid",
                        format!(
                            "volume {:?} already has {} bytes: a resize to {want} bytes does \
                             not grow it (a request is lowered only after a failed resize, and \
                             only to more than the size the volume has)",
                            name, g.requested
                        ),
                    ));
                }
                if size <= g.size {
                    // Above --local-max-volume-bytes: the image stays at the cap.
                    g.requested = want;
                    ctx.phase("no-op");
                    return Ok(());
                }
                if loop_mode {
                    storage::grow_file(&g.image, size).map_err(storage_err)?;
                    ctx.phase("grow-file");
                    match (&g.loop_dev, g.block) {
                        (Some(dev), block) => {
                            storage::refresh_loop(dev).map_err(storage_err)?;
                            ctx.phase("losetup-c");
                            if !block {
                                grow_attached(&ctx, dev, g.mount.as_deref())?;
                            }
                        }
                        (None, false) => {
                            sys::grow_offline(&g.image)?;
                            ctx.phase("resize2fs");
                        }
                        (None, true) => {}
                    }
                }
                g.size = size;
                g.requested = want;
                Ok(())
            })
            .await
        }
        Op::ModifyVolume(m) => modify_volume(p, m, &ctx).await,
        Op::IoPhase(ph) => io::io_phase(p, &ev, ph, ctx).await,
        Op::Io(io) => io::single_io(p, io, ctx).await,
        Op::Marker(_) => Ok(()),
    }
}

async fn release_volumes(
    p: &LocalProvider,
    ctx: &Arc<OpCtx>,
    names: &[Name],
) -> Result<(), ProviderError> {
    let vols: Vec<_> = names.iter().filter_map(|n| p.volume(n).ok()).collect();
    let ctx2 = ctx.clone();
    blocking(move || {
        for v in vols {
            let mut g = lock(&v);
            g.users = g.users.saturating_sub(1);
            if g.users == 0 {
                detach_volume(&ctx2, &mut g)?;
            }
        }
        Ok(())
    })
    .await
}

async fn reschedule(
    p: &LocalProvider,
    ctx: &Arc<OpCtx>,
    workload: &Name,
    node: Option<Name>,
) -> Result<(), ProviderError> {
    let (volumes, stops) = {
        let mut st = p.state();
        let wl = st
            .workloads
            .get_mut(workload)
            .ok_or_else(|| missing("workload", workload))?;
        wl.node = node;
        (wl.volumes.clone(), std::mem::take(&mut wl.io))
    };
    for s in &stops {
        s.request();
    }
    release_volumes(p, ctx, &volumes).await?;
    ctx.phase("detached");
    attach_all(p, ctx, &volumes).await?;
    ctx.phase("running");
    Ok(())
}

/// Grows the file system of an attached volume: online resize2fs, or — where the kernel
/// refuses online resizing (some VMs) — unmount, offline resize2fs, mount again.
fn grow_attached(ctx: &OpCtx, dev: &str, mount: Option<&Path>) -> Result<(), ProviderError> {
    match storage::run("resize2fs", &[dev]) {
        Ok(_) => {
            ctx.phase("resize2fs-online");
            Ok(())
        }
        Err(online) => {
            let Some(m) = mount else {
                return Err(storage_err(online));
            };
            let ms = path_str(m)?;
            storage::run("umount", &[ms]).map_err(storage_err)?;
            ctx.phase("umount");
            let grown = storage::grow_offline(Path::new(dev));
            storage::run("mount", &[dev, ms]).map_err(storage_err)?;
            grown.map_err(storage_err)?;
            ctx.phase("resize2fs-offline");
            Ok(())
        }
    }
}

/// Attaches `names` (loop device + mount on first use) and counts one more user of each.
async fn attach_all(
    p: &LocalProvider,
    ctx: &Arc<OpCtx>,
    names: &[Name],
) -> Result<(), ProviderError> {
    let vols = names
        .iter()
        .map(|n| p.volume(n))
        .collect::<Result<Vec<_>, _>>()?;
    let loop_mode = p.loop_mode();
    let mnt = p.objects()?.join("mnt");
    let seq = p.seq.fetch_add(1, Relaxed);
    let ctx2 = ctx.clone();
    let dirs: Vec<String> = names.iter().map(|n| sanitize(n)).collect();
    blocking(move || {
        for (vol, name) in vols.iter().zip(dirs) {
            let mut g = lock(vol);
            if loop_mode && g.loop_dev.is_none() {
                attach_volume(&ctx2, &mut g, &mnt.join(format!("{name}-{seq}")))?;
            }
            g.users += 1;
        }
        Ok(())
    })
    .await
}

fn create_image(
    ctx: &OpCtx,
    image: &Path,
    size: u64,
    block: bool,
    loop_mode: bool,
    source: Option<(PathBuf, u64, bool)>,
) -> Result<(), ProviderError> {
    let kind = if loop_mode { "image" } else { "dir" };
    ctx.ledger()
        .intend(kind, path_str(image)?, json!({"size": size}))
        .map_err(io_err)?;
    if let Some((src, src_size, _)) = source {
        let reflink = copy_volume(&src, image, loop_mode)?;
        ctx.phase(if reflink { "copy-reflink" } else { "copy-full" });
        if loop_mode && size > src_size {
            storage::grow_file(image, size).map_err(storage_err)?;
            if !block {
                sys::grow_offline(image)?;
            }
            ctx.phase("resize2fs");
        }
        return Ok(());
    }
    if loop_mode {
        storage::create_image(image, size, None).map_err(storage_err)?;
        ctx.phase("allocate");
        if !block {
            storage::mkfs(image).map_err(storage_err)?;
            ctx.phase("mkfs");
        }
    } else {
        fs_err::create_dir_all(image).map_err(io_err)?;
        let f = fs_err::File::create(image.join(DATA_FILE)).map_err(io_err)?;
        f.set_len(size).map_err(io_err)?;
        ctx.phase("allocate");
    }
    Ok(())
}

fn copy_volume(src: &Path, dst: &Path, loop_mode: bool) -> Result<bool, ProviderError> {
    if loop_mode {
        sys::copy_image(src, dst)
    } else {
        fs_err::create_dir_all(dst).map_err(io_err)?;
        sys::copy_image(&src.join(DATA_FILE), &dst.join(DATA_FILE))
    }
}

fn remove_image(ctx: &OpCtx, image: &Path, loop_mode: bool) -> Result<(), ProviderError> {
    if loop_mode {
        fs_err::remove_file(image).map_err(io_err)?;
        ctx.ledger()
            .release("image", path_str(image)?)
            .map_err(io_err)
    } else {
        fs_err::remove_dir_all(image).map_err(io_err)?;
        ctx.ledger()
            .release("dir", path_str(image)?)
            .map_err(io_err)
    }
}

fn attach_volume(ctx: &OpCtx, g: &mut Volume, mount: &Path) -> Result<(), ProviderError> {
    let img = path_str(&g.image)?.to_owned();
    // The ledger names the loop device by its backing file: the device number is only known
    // once it exists, and `losetup -j` finds it again after a crash.
    ctx.ledger()
        .intend("loop", &img, serde_json::Value::Null)
        .map_err(io_err)?;
    let dev = storage::attach_loop(&g.image).map_err(storage_err)?;
    g.loop_dev = Some(dev.clone());
    ctx.phase("losetup");
    if let Some(cg) = &g.cgroup
        && g.limits.any()
    {
        throttle_dev(cg, &dev, &g.limits)?;
        ctx.phase("throttle");
    }
    if !g.block {
        let m = path_str(mount)?;
        ctx.ledger()
            .intend("mount", m, json!({"device": dev}))
            .map_err(io_err)?;
        storage::mount(&dev, mount, &[]).map_err(storage_err)?;
        g.mount = Some(mount.to_owned());
        ctx.phase("mount");
    }
    Ok(())
}

fn detach_volume(ctx: &OpCtx, g: &mut Volume) -> Result<(), ProviderError> {
    if let Some(m) = g.mount.take() {
        let ms = path_str(&m)?.to_owned();
        // I/O threads of a stopped workload may take a moment to close their files.
        if let Err(e) = storage::unmount(&m, std::time::Duration::from_secs(5)) {
            g.mount = Some(m);
            return Err(storage_err(e));
        }
        let _ = fs_err::remove_dir(&m);
        ctx.ledger().release("mount", &ms).map_err(io_err)?;
        ctx.phase("umount");
    }
    if let Some(dev) = g.loop_dev.take() {
        storage::detach_loop(&dev).map_err(storage_err)?;
        ctx.ledger()
            .release("loop", path_str(&g.image)?)
            .map_err(io_err)?;
        ctx.phase("losetup-d");
    }
    Ok(())
}

/// Writes `limits` for loop device `dev` into the volume's cgroup.
fn throttle_dev(cgroup: &Path, dev: &str, limits: &throttle::Limits) -> Result<(), ProviderError> {
    let num = throttle::dev_number(Path::new(dev)).map_err(io_err)?;
    throttle::apply(cgroup, &num, limits).map_err(io_err)
}

/// `modify_volume`: the class's parameters (from the trace header) become the volume's I/O
/// limits, written to its cgroup's block throttle for its loop device when it is attached (and
/// when it is attached later). A class this storage cannot apply fails with `infeasible` and
/// changes nothing, as ControllerModifyVolume's INVALID_ARGUMENT does.
async fn modify_volume(
    p: &LocalProvider,
    m: &trace_format::ModifyVolume,
    ctx: &Arc<OpCtx>,
) -> Result<(), ProviderError> {
    let vol = p.volume(&m.volume)?;
    let params = p
        .run()?
        .header
        .attributes_classes
        .get(&m.class)
        .cloned()
        .ok_or_else(|| missing("attributes class", &m.class))?;
    let limits = throttle::Limits::parse(&params).map_err(|e| {
        ProviderError::new("infeasible", format!("attributes class {:?}: {e}", m.class))
    })?;
    let ctx = ctx.clone();
    let (name, class) = (m.volume.clone(), m.class.clone());
    blocking(move || {
        let mut g = lock(&vol);
        let Some(cg) = g.cgroup.clone() else {
            return Err(ProviderError::new(
                "unsupported",
                format!(
                    "modify_volume {name:?}: the local provider limits a volume's I/O with the \
                     cgroup v1 block throttle on its loop device, which needs root and a blkio \
                     hierarchy (this host: {})",
                    if !sys::is_root() {
                        "not root"
                    } else if throttle::blkio_root().is_none() {
                        "no cgroup v1 blkio mount"
                    } else {
                        "volumes are directories (--local-mode dir)"
                    }
                ),
            ));
        };
        let next = g.limits.then(limits);
        if let Some(dev) = g.loop_dev.clone() {
            throttle_dev(&cg, &dev, &next)?;
            ctx.phase("throttled");
        } else {
            ctx.phase("recorded");
        }
        tracing::debug!(
            "volume {name:?} now in class {class:?}: {}",
            next.describe()
        );
        g.limits = next;
        Ok(())
    })
    .await
}

/// `group_snapshot`: every member's mounted file system frozen first, then each copied (a
/// reflink where the file system has it), then all thawed ([`storage::group_snapshot_copy`]):
/// one instant for all of them, as a crash-consistent group snapshot is (phases `freeze-all`,
/// `thaw-all`, then how the copies were made). Members are locked in name order, so two
/// groups over the same volumes cannot deadlock.
async fn group_snapshot(
    p: &LocalProvider,
    g: &trace_format::GroupSnapshot,
    ctx: &Arc<OpCtx>,
) -> Result<(), ProviderError> {
    let mut names = g.volumes.clone();
    names.sort();
    names.dedup();
    let vols = names
        .iter()
        .map(|n| p.volume(n).map(|v| (n.clone(), v)))
        .collect::<Result<Vec<_>, _>>()?;
    let loop_mode = p.loop_mode();
    let sources: Vec<PathBuf> = vols.iter().map(|(_, v)| lock(v).image.clone()).collect();
    let mut images = Vec::with_capacity(vols.len());
    for (n, _) in &vols {
        let image = p
            .objects()?
            .join(p.unique(&format!("group-{}", g.group), n))
            .with_extension(if loop_mode { "img" } else { "d" });
        images.push(image);
    }
    let ctx = ctx.clone();
    let images2 = images.clone();
    let requested_ns = ctx.now_ns();
    let by = format!("group_snapshot {}", g.group);
    let (members, created, cut_ns, ready_ns) = blocking(move || {
        let guards: Vec<_> = vols.iter().map(|(_, v)| lock(v)).collect();
        for (g, image) in guards.iter().zip(&images2) {
            ctx.ledger()
                .intend(
                    if loop_mode { "image" } else { "dir" },
                    path_str(image)?,
                    json!({"snapshot_of": path_str(&g.image)?}),
                )
                .map_err(io_err)?;
        }
        // All frozen before the first copy: the members' point in time is one instant.
        let start = ctx.now_ns();
        let mut created = vec![start; guards.len()];
        let reflink = if loop_mode {
            let members: Vec<storage::Member<'_>> = guards
                .iter()
                .zip(&images2)
                .map(|(g, image)| (g.image.as_path(), image.as_path(), g.mount.as_deref()))
                .collect();
            let (kinds, at) =
                storage::group_snapshot_copy_timed(&members, &mut |step| ctx.phase(step))
                    .map_err(storage_err)?;
            for (c, t) in created.iter_mut().zip(at) {
                if let Some(t) = t {
                    *c = replay::provider::ns_since(ctx.origin(), t);
                }
            }
            kinds.iter().all(|k| *k == storage::CopyKind::Reflink)
        } else {
            let mut all = true;
            for (g, image) in guards.iter().zip(&images2) {
                all &= copy_volume(&g.image, image, false)?;
            }
            all
        };
        ctx.phase(if reflink { "copy-reflink" } else { "copy-full" });
        let cut = created.iter().copied().max().unwrap_or(start);
        Ok((
            guards.iter().map(|g| (g.size, g.block)).collect::<Vec<_>>(),
            created,
            cut,
            ctx.now_ns(),
        ))
    })
    .await?;
    let group: HashMap<Name, Arc<Snap>> = names
        .into_iter()
        .zip(images)
        .zip(members)
        .zip(created)
        .zip(sources)
        .map(|((((n, image), (size, block)), created_ns), of)| {
            let taken = Taken {
                by: by.clone(),
                requested_ns,
                created_ns,
                cut_ns,
                ready_ns,
            };
            (
                n.clone(),
                Arc::new(Snap {
                    image,
                    size,
                    block,
                    taken,
                    volume: n,
                    of,
                }),
            )
        })
        .collect();
    p.state().groups.insert(g.group.clone(), group);
    Ok(())
}
