//! Writing an output file so that no command loses data: the one way every command writes one.
//!
//! An [`Output`] is a temporary file beside the target, `OUT.partial-PID`, renamed over the
//! target only by [`Output::commit`] after an fsync; until then the target is untouched (an
//! existing file keeps its old content). Dropped without a commit (an error, a bad input), the
//! temporary file is removed. While an output is open, SIGINT and SIGTERM remove every open
//! temporary file and end the process with 128 + the signal, as the shell reports a signal;
//! commands that stop gracefully on a signal themselves (`capacity`) open theirs with
//! [`Output::create_quiet`] and rely on the drop. A temporary file left by a process that no
//! longer exists (SIGKILL, a crash) never carries the target's name, and the next output to
//! the same target removes it.
//!
//! An output that is one of the command's inputs (the same device and inode: the same path, a
//! symbolic or hard link) is refused before anything is written, naming both: `rewrite a.jsonl
//! -o a.jsonl` would otherwise read what it is overwriting. So is an output inside an input
//! that is a directory — a run directory `analyze report` or `merge-runs` reads — with both
//! paths resolved through symbolic links and `..` (the output's also where it does not exist
//! yet): `analyze report RUN -o RUN/events.jsonl` would replace the run's records.
//! [`refuse_inputs`] is that check alone, for commands whose output is a directory.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once, PoisonError};

use anyhow::{Context, bail};

/// Temporary files of the open outputs, removed on SIGINT/SIGTERM.
static OPEN: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static HANDLER: Once = Once::new();

/// An output file being written; see the module docs.
#[derive(Debug)]
pub struct Output {
    dest: PathBuf,
    tmp: PathBuf,
    committed: bool,
}

impl Output {
    /// Opens `dest` for writing: refuses it when it is one of `inputs`, removes temporary
    /// files of gone processes, creates `dest.partial-PID`, and removes it (and exits) on
    /// SIGINT or SIGTERM.
    pub fn create(dest: &Path, inputs: &[&Path]) -> anyhow::Result<Self> {
        // Before the file exists: a signal once it does removes it.
        HANDLER.call_once(install_handler);
        Self::create_quiet(dest, inputs)
    }

    /// Like [`Output::create`], for a command that handles SIGINT and SIGTERM itself (it
    /// stops and returns, dropping the output).
    pub fn create_quiet(dest: &Path, inputs: &[&Path]) -> anyhow::Result<Self> {
        refuse_inputs(dest, inputs)?;
        remove_stale_partials(dest);
        let mut name = dest.file_name().unwrap_or_default().to_os_string();
        name.push(format!(".partial-{}", std::process::id()));
        let tmp = dest.with_file_name(name);
        // Registered before it exists: a signal between the two still removes it.
        lock().push(tmp.clone());
        let out = Self {
            dest: dest.to_owned(),
            tmp,
            committed: false,
        };
        fs_err::File::create(&out.tmp)
            .with_context(|| format!("cannot write {}", dest.display()))?;
        Ok(out)
    }

    /// A handle to write the temporary file through (each call opens it anew, positioned at
    /// its start: use one at a time).
    pub fn file(&self) -> anyhow::Result<fs_err::File> {
        Ok(fs_err::OpenOptions::new().write(true).open(&self.tmp)?)
    }

    /// The temporary file's path, for code that writes to a path itself.
    pub fn tmp_path(&self) -> &Path {
        &self.tmp
    }

    /// The target's path.
    pub fn path(&self) -> &Path {
        &self.dest
    }

    /// Syncs the temporary file to disk and renames it over the target.
    pub fn commit(mut self) -> anyhow::Result<()> {
        fs_err::File::open(&self.tmp)?
            .sync_all()
            .with_context(|| format!("syncing {}", self.tmp.display()))?;
        {
            // Under the lock: a signal handled now sees the file either still open (and
            // removes it before the rename, which then fails) or committed.
            let mut open = lock();
            fs_err::rename(&self.tmp, &self.dest)?;
            open.retain(|p| *p != self.tmp);
            self.committed = true;
        }
        // The rename itself survives a crash once the directory is synced (best effort).
        if let Ok(d) = fs_err::File::open(parent(&self.dest)) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if !self.committed {
            let mut open = lock();
            let _ = std::fs::remove_file(&self.tmp);
            open.retain(|p| *p != self.tmp);
        }
    }
}

/// Writes `bytes` to `dest` through an [`Output`].
pub fn write(dest: &Path, inputs: &[&Path], bytes: &[u8]) -> anyhow::Result<()> {
    let out = Output::create(dest, inputs)?;
    std::io::Write::write_all(&mut out.file()?, bytes)?;
    out.commit()
}

fn lock() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    OPEN.lock().unwrap_or_else(PoisonError::into_inner)
}

fn parent(p: &Path) -> &Path {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// On SIGINT or SIGTERM: remove every open temporary file and exit 128 + the signal. Once
/// per process; while no output is open it only exits, as the default action would.
fn install_handler() {
    let signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
    ]);
    let mut signals = match signals {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(
                "cannot catch SIGINT/SIGTERM ({e}): an interrupt may leave OUT.partial-PID files"
            );
            return;
        }
    };
    let spawned = std::thread::Builder::new()
        .name("output-signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                for p in lock().iter() {
                    let _ = std::fs::remove_file(p);
                }
                std::process::exit(128 + sig);
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot watch for SIGINT/SIGTERM ({e})");
    }
}

/// Refuses `dest` when it is the same file (device and inode) as an input, or lies inside
/// (or is) an input that is a directory, both resolved through links and `..`.
pub fn refuse_inputs(dest: &Path, inputs: &[&Path]) -> anyhow::Result<()> {
    let out = std::fs::metadata(dest).ok();
    let resolved = resolve(dest);
    for input in inputs {
        if *input == Path::new("-") {
            continue;
        }
        let Ok(i) = std::fs::metadata(input) else {
            continue;
        };
        if let Some(out) = &out
            && (i.dev(), i.ino()) == (out.dev(), out.ino())
        {
            bail!(
                "refusing to write {}: it is the input {} (the same file); write to another \
                 name and rename it afterwards",
                dest.display(),
                input.display()
            );
        }
        if i.is_dir()
            && let Ok(dir) = std::fs::canonicalize(input)
            && resolved.starts_with(&dir)
        {
            bail!(
                "refusing to write {}: it is inside {}, a directory this command reads (a run \
                 directory keeps only what its run wrote); write it outside",
                dest.display(),
                input.display()
            );
        }
    }
    Ok(())
}

/// `p` absolute, with links and `..` resolved as far as it exists and the rest (which cannot
/// hold links) appended, `..` taken lexically.
fn resolve(p: &Path) -> PathBuf {
    use std::path::Component;
    let abs = std::path::absolute(p).unwrap_or_else(|_| p.to_owned());
    let comps: Vec<Component<'_>> = abs.components().collect();
    for k in (0..=comps.len()).rev() {
        let prefix: PathBuf = comps[..k].iter().collect();
        let Ok(mut out) = std::fs::canonicalize(&prefix) else {
            continue;
        };
        for c in &comps[k..] {
            match c {
                Component::ParentDir => {
                    out.pop();
                }
                Component::Normal(n) => out.push(n),
                _ => {}
            }
        }
        return out;
    }
    abs
}

/// Removes `OUT.partial-PID` files beside `output` whose process no longer exists; never
/// one of a live process.
fn remove_stale_partials(output: &Path) {
    let Some(name) = output.file_name().and_then(|n| n.to_str()) else {
        return;
    };
    let prefix = format!("{name}.partial-");
    let Ok(entries) = fs_err::read_dir(parent(output)) else {
        return;
    };
    for e in entries.flatten() {
        let file = e.file_name();
        let Some(pid) = file
            .to_str()
            .and_then(|f| f.strip_prefix(&prefix))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            tracing::info!(
                "removing {} (left by process {pid}, which is gone)",
                e.path().display()
            );
            let _ = fs_err::remove_file(e.path());
        }
    }
}
