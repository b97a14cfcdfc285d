//! `cnsreplay fetch`, `pack` and `idle`: run directories out of the cluster after an
//! in-cluster run (deploy/kustomize), without `kubectl` or a `tar` in the image.
//!
//! `pack DIR` writes DIR as a tar stream to stdout (entries under DIR's last component,
//! files and directories only). `fetch` starts a pod of the cnsreplay image on the runs'
//! claim whose process is `idle`, execs `pack` in it (provider_kube::fetch) and unpacks the
//! stream here into a temporary directory beside the destination, moving each run directory
//! into place only when the whole archive arrived and `pack` exited 0: an interrupted fetch
//! leaves no half-copied run directory. A run directory already at the destination is kept
//! and reported, never overwritten.

use std::io::{IsTerminal, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use provider_kube::KubeConfig;
use provider_kube::fetch::{FetchOptions, fetch};

/// `pack`.
#[derive(Debug, Args)]
pub struct PackArgs {
    /// The directory to archive (a run directory, or a directory of them).
    pub dir: PathBuf,
}

/// `fetch`.
#[derive(Debug, Args)]
pub struct FetchArgs {
    /// Directory on the claim to fetch, relative to its root: `runs` (every run the Job
    /// wrote, the default) or `runs/NAME`.
    #[arg(default_value = "runs")]
    pub path: String,
    /// The PersistentVolumeClaim the in-cluster runs write to.
    #[arg(long, value_name = "NAME", default_value = "cnsreplay-runs")]
    pub pvc: String,
    /// Its namespace.
    #[arg(short, long, value_name = "NS", default_value = "cnsreplay")]
    pub namespace: String,
    /// Where to put it: DEST/<last component of PATH> (run directories already there are
    /// kept and reported, not replaced).
    #[arg(short, long = "output", value_name = "DEST", default_value = ".")]
    pub output: PathBuf,
    /// The cnsreplay image (deploy/cnsreplay.Containerfile) the fetch pod runs.
    #[arg(
        long,
        value_name = "IMAGE",
        env = "CNSREPLAY_IMAGE",
        default_value = "cnsreplay/cnsreplay:latest"
    )]
    pub image: String,
    /// Kubeconfig file (default: `KUBECONFIG`, `~/.kube/config`, in-cluster).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context (default: its current context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// nodeSelector of the fetch pod, `KEY=VALUE` (repeatable).
    #[arg(long, value_name = "KEY=VALUE")]
    pub node_selector: Vec<String>,
    /// Toleration of the fetch pod, `KEY[=VALUE][:EFFECT]` (repeatable).
    #[arg(long, value_name = "TOLERATION")]
    pub toleration: Vec<String>,
    /// imagePullSecret of the fetch pod (repeatable).
    #[arg(long, value_name = "NAME")]
    pub image_pull_secret: Vec<String>,
    /// How long the fetch pod may take to start (pull, attach, mount).
    #[arg(long, value_name = "DUR", default_value = "5m", value_parser = crate::commands::args::parse_duration)]
    pub start_timeout: u64,
    /// The user the fetch pod runs as (must be able to read the run directories; the Job
    /// writes them as 65532).
    #[arg(long, value_name = "UID", default_value_t = 65532)]
    pub run_as_user: i64,
}

/// The name `pack` archives `dir` under: its last normal component.
fn archive_root(dir: &Path) -> anyhow::Result<String> {
    let canon = fs_err::canonicalize(dir)?;
    canon
        .file_name()
        .and_then(|n| n.to_str())
        .map(str::to_owned)
        .with_context(|| format!("{}: cannot archive a root directory", dir.display()))
}

pub(crate) fn pack(a: &PackArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let meta = fs_err::metadata(&a.dir)?;
    if !meta.is_dir() {
        bail!("{}: not a directory", a.dir.display());
    }
    let root = archive_root(&a.dir)?;
    let mut b = tar::Builder::new(out);
    b.follow_symlinks(false);
    append_tree(&mut b, &a.dir, Path::new(&root))?;
    b.finish()
        .with_context(|| format!("writing the archive of {}", a.dir.display()))?;
    Ok(ExitCode::SUCCESS)
}

/// Appends `dir` as `name` and everything below it, sorted by name (so two packs of one tree
/// are the same bytes but for times). Anything but files and directories is refused.
fn append_tree<W: Write>(b: &mut tar::Builder<W>, dir: &Path, name: &Path) -> anyhow::Result<()> {
    b.append_dir(name, dir)
        .with_context(|| format!("archiving {}", dir.display()))?;
    let mut entries = fs_err::read_dir(dir)?.collect::<Result<Vec<_>, _>>()?;
    entries.sort_by_key(fs_err::DirEntry::file_name);
    for e in entries {
        let path = e.path();
        let ty = e
            .file_type()
            .with_context(|| format!("reading {}", path.display()))?;
        let to = name.join(e.file_name());
        if ty.is_dir() {
            append_tree(b, &path, &to)?;
        } else if ty.is_file() {
            b.append_path_with_name(&path, &to)
                .with_context(|| format!("archiving {}", path.display()))?;
        } else {
            bail!(
                "{}: not a regular file or directory (run directories hold none)",
                path.display()
            );
        }
    }
    Ok(())
}

/// `idle`: the fetch pod's process; waits for SIGTERM or SIGINT and exits 0.
pub(crate) fn idle() -> anyhow::Result<ExitCode> {
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
    ])
    .context("installing signal handlers")?;
    let _ = signals.forever().next();
    Ok(ExitCode::SUCCESS)
}

/// Unpacks a `pack` stream into `into` (an empty directory): files and directories only, every
/// path relative and without `..`. Returns the top-level names it holds.
pub(crate) fn unpack(r: &mut dyn Read, into: &Path) -> std::io::Result<Vec<String>> {
    let mut ar = tar::Archive::new(r);
    ar.set_preserve_permissions(false);
    ar.set_preserve_mtime(true);
    let mut tops = Vec::new();
    for e in ar.entries()? {
        let mut e = e?;
        let path = e.path()?.into_owned();
        let bad = |why: &str| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("archive entry {}: {why}", path.display()),
            )
        };
        if !path.components().all(|c| matches!(c, Component::Normal(_))) {
            return Err(bad("not a plain relative path"));
        }
        match e.header().entry_type() {
            tar::EntryType::Regular | tar::EntryType::Directory => {}
            other => return Err(bad(&format!("type {other:?} (only files and directories)"))),
        }
        if let Some(Component::Normal(top)) = path.components().next() {
            let top = top.to_string_lossy().into_owned();
            if !tops.contains(&top) {
                tops.push(top);
            }
        }
        if !e.unpack_in(into)? {
            return Err(bad("outside the destination"));
        }
    }
    Ok(tops)
}

/// Moves the unpacked tree `from` (a directory) to `to`: the whole of it when `to` does not
/// exist, else each child not yet at `to` (children already there are returned as kept).
pub(crate) fn move_into(from: &Path, to: &Path) -> anyhow::Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    if !to.exists() {
        fs_err::rename(from, to)?;
        return Ok((vec![to.to_owned()], Vec::new()));
    }
    if !to.is_dir() || !from.is_dir() {
        bail!(
            "{} exists and is not a directory to merge into",
            to.display()
        );
    }
    let (mut moved, mut kept) = (Vec::new(), Vec::new());
    let mut children = fs_err::read_dir(from)?.collect::<Result<Vec<_>, _>>()?;
    children.sort_by_key(fs_err::DirEntry::file_name);
    for c in children {
        let dst = to.join(c.file_name());
        if dst.exists() {
            kept.push(dst);
        } else {
            fs_err::rename(c.path(), &dst)?;
            moved.push(dst);
        }
    }
    Ok((moved, kept))
}

pub(crate) fn run(a: &FetchArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    if !Path::new(&a.path)
        .components()
        .all(|c| matches!(c, Component::Normal(_)))
    {
        bail!(
            "{:?}: PATH must be relative to the claim's root, without `..`",
            a.path
        );
    }
    fs_err::create_dir_all(&a.output)?;
    let tmp = tempfile::Builder::new()
        .prefix(".cnsreplay-fetch-")
        .tempdir_in(&a.output)
        .with_context(|| format!("creating a temporary directory in {}", a.output.display()))?;
    let config = KubeConfig {
        kubeconfig: a.kubeconfig.clone(),
        context: a.context.clone(),
        ..KubeConfig::default()
    };
    let pod =
        crate::commands::run::pod_options(&a.node_selector, &a.toleration, &a.image_pull_secret)?;
    let opts = FetchOptions {
        namespace: a.namespace.clone(),
        pvc: a.pvc.clone(),
        image: a.image.clone(),
        path: a.path.clone(),
        pod: provider_kube::PodOptions {
            run_as_user: a.run_as_user,
            ..pod
        },
        start_timeout: Duration::from_nanos(a.start_timeout),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let ids = [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM]
        .map(|sig| signal_hook::flag::register(sig, stop.clone()));
    let into = tmp.path().to_owned();
    let result = fetch(&config, &opts, &stop, move |r| unpack(r, &into));
    for id in ids.into_iter().flatten() {
        signal_hook::low_level::unregister(id);
    }
    let (report, tops) = result
        .with_context(|| format!("fetching {} from claim {}/{}", a.path, a.namespace, a.pvc))?;
    let (mut moved, mut kept) = (Vec::new(), Vec::new());
    for t in &tops {
        let (m, k) = move_into(&tmp.path().join(t), &a.output.join(t))?;
        moved.extend(m);
        kept.extend(k);
    }
    writeln!(
        out,
        "fetched {} from {}/{} ({} bytes through {} on {})",
        a.path, a.namespace, a.pvc, report.bytes, report.pod, report.node
    )?;
    for m in &moved {
        writeln!(out, "  new:  {}", m.display())?;
    }
    for k in &kept {
        writeln!(out, "  kept: {} (already here, not replaced)", k.display())?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether `pack` may write to this stdout (not a terminal).
pub(crate) fn stdout_ok() -> anyhow::Result<()> {
    if std::io::stdout().is_terminal() {
        bail!("pack writes a tar archive to stdout; redirect it (e.g. `| tar -x`)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(root: &Path) {
        fs_err::create_dir_all(root.join("run-a/histograms")).unwrap();
        fs_err::write(root.join("run-a/summary.json"), b"{\"state\":\"complete\"}").unwrap();
        fs_err::write(
            root.join("run-a/histograms/attach.hlog"),
            vec![7u8; 100_000],
        )
        .unwrap();
        fs_err::create_dir_all(root.join("run-b")).unwrap();
        fs_err::write(root.join("run-b/events.jsonl"), b"{}\n").unwrap();
    }

    fn packed(dir: &Path) -> Vec<u8> {
        let mut buf = Vec::new();
        pack(
            &PackArgs {
                dir: dir.to_owned(),
            },
            &mut buf,
        )
        .unwrap();
        buf
    }

    /// One raw 512-byte header naming `path` (bypassing the tar crate's own path checks, as
    /// a hostile or broken archive would), of type `ty`, with `len` bytes of data after it.
    fn raw_entry(path: &[u8], ty: u8, len: usize) -> Vec<u8> {
        let mut h = tar::Header::new_old();
        h.as_old_mut().name[..path.len()].copy_from_slice(path);
        h.set_entry_type(tar::EntryType::new(ty));
        h.set_size(len as u64);
        h.set_mode(0o644);
        h.set_cksum();
        let mut v = h.as_bytes().to_vec();
        v.extend(std::iter::repeat_n(b'x', len));
        v.resize(v.len().div_ceil(512) * 512, 0);
        v.extend([0u8; 1024]);
        v
    }

    #[test]
    fn a_packed_tree_unpacks_to_the_same_files() {
        let src = tempfile::tempdir().unwrap();
        let runs = src.path().join("runs");
        tree(&runs);
        let bytes = packed(&runs);
        let dst = tempfile::tempdir().unwrap();
        let tops = unpack(&mut bytes.as_slice(), dst.path()).unwrap();
        assert_eq!(tops, ["runs"]);
        for f in [
            "run-a/summary.json",
            "run-a/histograms/attach.hlog",
            "run-b/events.jsonl",
        ] {
            assert_eq!(
                fs_err::read(runs.join(f)).unwrap(),
                fs_err::read(dst.path().join("runs").join(f)).unwrap(),
                "{f}"
            );
        }
        // The same tree packs to the same entries in the same order.
        assert_eq!(bytes.len(), packed(&runs).len());
    }

    #[test]
    fn a_cut_archive_is_an_error() {
        let src = tempfile::tempdir().unwrap();
        tree(src.path());
        let bytes = packed(src.path());
        // Cut inside the 100 kB file's data.
        let cut = &bytes[..60_000];
        let dst = tempfile::tempdir().unwrap();
        assert!(unpack(&mut &cut[..], dst.path()).is_err());
    }

    #[test]
    fn paths_out_of_the_destination_and_links_are_refused() {
        let dst = tempfile::tempdir().unwrap();
        for (path, ty, why) in [
            (&b"../escape"[..], b'0', "not a plain relative path"),
            (&b"/etc/passwd"[..], b'0', "not a plain relative path"),
            (&b"runs/a/../../x"[..], b'0', "not a plain relative path"),
            (&b"runs/link"[..], b'2', "only files and directories"),
            (&b"runs/dev"[..], b'3', "only files and directories"),
        ] {
            let bytes = raw_entry(path, ty, 3);
            let err = unpack(&mut bytes.as_slice(), dst.path()).unwrap_err();
            assert!(err.to_string().contains(why), "{path:?}: {err}");
        }
        assert_eq!(fs_err::read_dir(dst.path()).unwrap().count(), 0);
    }

    #[test]
    fn moving_into_an_existing_directory_keeps_what_is_there() {
        let d = tempfile::tempdir().unwrap();
        let from = d.path().join("from");
        tree(&from);
        let to = d.path().join("to");
        fs_err::create_dir_all(to.join("run-a")).unwrap();
        fs_err::write(to.join("run-a/mine"), b"local").unwrap();
        let (moved, kept) = move_into(&from, &to).unwrap();
        assert_eq!(moved, [to.join("run-b")]);
        assert_eq!(kept, [to.join("run-a")]);
        assert_eq!(fs_err::read(to.join("run-a/mine")).unwrap(), b"local");
        assert!(!to.join("run-a/summary.json").exists());
        assert!(to.join("run-b/events.jsonl").exists());
        // A destination that does not exist gets the whole tree.
        let fresh = d.path().join("fresh");
        let (moved, kept) = move_into(&to, &fresh).unwrap();
        assert_eq!((moved, kept.len()), (vec![fresh], 0));
    }
}
