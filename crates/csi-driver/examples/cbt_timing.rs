//! Times cnsreplay-csi's SnapshotMetadata service as a client over its Unix socket sees it, on
//! a 1 GiB raw block volume: for `full` (filled with 1 MiB writes) and `sparse` (128 MiB of
//! random 4 KiB writes), snapshot s1, 64 MiB of random 4 KiB writes, snapshot s2, then
//! GetMetadataAllocated(s1) and GetMetadataDelta(s1, s2): time to the first response, total,
//! ranges and responses. The writes are iogen's, O_DIRECT on the volume's image (what a pod on
//! the published loop device would write). `scripts/bench-cbt.sh` runs it.
//!
//!   cargo run --release -p csi-driver --example cbt_timing -- ROUNDS DIR

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use csi_driver::pb::snapshot_metadata_client::SnapshotMetadataClient;
use csi_driver::pb::{self, controller_client::ControllerClient, volume_capability as vc};
use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint};

/// One timed listing: first response, total (ms), ranges, responses, bytes covered.
#[derive(Debug, Clone, Copy)]
struct Timed {
    first_ms: f64,
    total_ms: f64,
    ranges: u64,
    responses: u64,
    bytes: u64,
}

async fn timed<R>(
    start: Instant,
    mut s: tonic::Streaming<R>,
    ranges: impl Fn(&R) -> &[pb::BlockMetadata],
) -> Result<Timed> {
    let mut t = Timed {
        first_ms: 0.0,
        total_ms: 0.0,
        ranges: 0,
        responses: 0,
        bytes: 0,
    };
    while let Some(m) = s.message().await? {
        if t.responses == 0 {
            t.first_ms = start.elapsed().as_secs_f64() * 1e3;
        }
        t.responses += 1;
        for r in ranges(&m) {
            t.ranges += 1;
            t.bytes += u64::try_from(r.size_bytes)?;
        }
    }
    t.total_ms = start.elapsed().as_secs_f64() * 1e3;
    Ok(t)
}

fn write(image: &Path, spec: &iogen::PhaseSpec) -> Result<()> {
    iogen::run_phase(
        spec,
        image,
        &iogen::EngineOptions::default(),
        &iogen::Stop::new(),
    )
    .with_context(|| format!("iogen on {}", image.display()))?;
    Ok(())
}

fn random(bytes: u64, verify: bool) -> iogen::PhaseSpec {
    iogen::PhaseSpec {
        pattern: iogen::Pattern::Random,
        read_pct: 0,
        block_size: iogen::BlockSize::Fixed(4096),
        load: iogen::Load::Depth(16),
        bytes: Some(bytes),
        direct: true,
        verify,
        ..iogen::PhaseSpec::default()
    }
}

async fn connect(socket: &Path) -> Result<Channel> {
    let path = socket.to_owned();
    Ok(Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
            let p = path.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(p).await?)) }
        }))
        .await?)
}

async fn snapshot(ctl: &mut ControllerClient<Channel>, vol: &str, name: &str) -> Result<String> {
    let s = ctl
        .create_snapshot(pb::CreateSnapshotRequest {
            source_volume_id: vol.to_owned(),
            name: name.to_owned(),
            ..Default::default()
        })
        .await?
        .into_inner()
        .snapshot
        .context("no snapshot in the response")?;
    Ok(s.snapshot_id)
}

async fn round(dir: &Path, full: bool) -> Result<(Timed, Timed)> {
    let root = dir.join("root");
    let socket = dir.join("csi.sock");
    let driver = csi_driver::Driver::open(csi_driver::DriverConfig::new(&root))?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let sock = socket.clone();
    let server = tokio::spawn(async move {
        csi_driver::serve(driver, &sock, async {
            let _ = stopped.await;
        })
        .await
    });
    while !socket.exists() {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let ch = connect(&socket).await?;
    let mut ctl = ControllerClient::new(ch.clone());
    let mut md = SnapshotMetadataClient::new(ch);
    let vol = ctl
        .create_volume(pb::CreateVolumeRequest {
            name: "pvc-cbt".into(),
            capacity_range: Some(pb::CapacityRange {
                required_bytes: 1 << 30,
                limit_bytes: 0,
            }),
            volume_capabilities: vec![pb::VolumeCapability {
                access_type: Some(vc::AccessType::Block(vc::BlockVolume {})),
                access_mode: Some(vc::AccessMode {
                    mode: vc::access_mode::Mode::SingleNodeWriter.into(),
                }),
            }],
            ..Default::default()
        })
        .await?
        .into_inner()
        .volume
        .context("no volume in the response")?;
    let image = std::path::PathBuf::from(
        vol.volume_context
            .get("image")
            .context("no image in the volume context")?,
    );
    let first = if full {
        iogen::PhaseSpec {
            pattern: iogen::Pattern::Sequential,
            read_pct: 0,
            block_size: iogen::BlockSize::Fixed(1 << 20),
            load: iogen::Load::Depth(8),
            bytes: Some(1 << 30),
            direct: true,
            ..iogen::PhaseSpec::default()
        }
    } else {
        random(128 << 20, false)
    };
    let img = image.clone();
    tokio::task::spawn_blocking(move || write(&img, &first)).await??;
    let s1 = snapshot(&mut ctl, &vol.volume_id, "s1").await?;
    let img = image.clone();
    tokio::task::spawn_blocking(move || write(&img, &random(64 << 20, true))).await??;
    let s2 = snapshot(&mut ctl, &vol.volume_id, "s2").await?;

    let start = Instant::now();
    let s = md
        .get_metadata_allocated(pb::GetMetadataAllocatedRequest {
            snapshot_id: s1.clone(),
            ..Default::default()
        })
        .await?
        .into_inner();
    let alloc = timed(start, s, |m: &pb::GetMetadataAllocatedResponse| {
        &m.block_metadata
    })
    .await?;
    let start = Instant::now();
    let s = md
        .get_metadata_delta(pb::GetMetadataDeltaRequest {
            base_snapshot_id: s1.clone(),
            target_snapshot_id: s2.clone(),
            ..Default::default()
        })
        .await?
        .into_inner();
    let delta = timed(start, s, |m: &pb::GetMetadataDeltaResponse| {
        &m.block_metadata
    })
    .await?;

    for id in [s1, s2] {
        ctl.delete_snapshot(pb::DeleteSnapshotRequest {
            snapshot_id: id,
            ..Default::default()
        })
        .await?;
    }
    ctl.delete_volume(pb::DeleteVolumeRequest {
        volume_id: vol.volume_id,
        ..Default::default()
    })
    .await?;
    let _ = stop.send(());
    server.await??;
    Ok((alloc, delta))
}

fn range(v: &[f64], digits: usize) -> String {
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{min:.digits$}–{max:.digits$}")
}

#[tokio::main]
#[allow(clippy::print_stdout)] // the table is the output
async fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(Ok(5), |a| a.parse())?;
    let dir = args
        .next()
        .map_or_else(std::env::temp_dir, std::path::PathBuf::from);
    for full in [true, false] {
        let kind = if full { "full" } else { "sparse" };
        let mut rows = Vec::new();
        for i in 1..=rounds {
            let d = tempfile::Builder::new()
                .prefix("cbt-timing")
                .tempdir_in(&dir)?;
            let (a, dl) = round(d.path(), full).await?;
            for (what, t) in [("allocated s1", a), ("delta s1 → s2", dl)] {
                println!(
                    "{kind} round {i}: {what}: first response {:.2} ms, total {:.1} ms, {} ranges \
                     in {} responses, {:.1} MiB",
                    t.first_ms,
                    t.total_ms,
                    t.ranges,
                    t.responses,
                    t.bytes as f64 / 1048576.0
                );
            }
            rows.push((a, dl));
        }
        for (what, pick) in [
            (
                "allocated s1",
                (|r: &(Timed, Timed)| r.0) as fn(&(Timed, Timed)) -> Timed,
            ),
            ("delta s1 → s2", |r: &(Timed, Timed)| r.1),
        ] {
            let ts: Vec<Timed> = rows.iter().map(pick).collect();
            let f = |g: fn(&Timed) -> f64| ts.iter().map(g).collect::<Vec<_>>();
            println!(
                "{kind}: {what}: {rounds} rounds; first response {} ms, total {} ms, ranges {}, \
                 {} ranges/s",
                range(&f(|t| t.first_ms), 2),
                range(&f(|t| t.total_ms), 1),
                range(&f(|t| t.ranges as f64), 0),
                range(&f(|t| t.ranges as f64 / (t.total_ms / 1e3).max(1e-9)), 0),
            );
        }
    }
    Ok(())
}
