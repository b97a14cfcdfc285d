//! The `local` provider's own tests: its operations on real image files, loop devices and
//! mounts (as root; the machine the suite runs on is), driven event by event through the
//! `Provider` trait as the replay engine drives them, with the run directory, ledger and
//! cleanup a run has. What the CLI suite (`crates/cnsreplay/tests/it`) shows end to end —
//! timing, records, summaries — is not repeated here; this is the storage behaviour under
//! it: what each operation makes, changes and removes.
//!
//! Tests that need root or the cgroup v1 blkio hierarchy print a `skipped:` line and pass
//! without them.

mod cbt;
mod cleanup;
mod throttle;
mod volumes;
mod workloads;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use provider_local::{LocalConfig, LocalProvider, Mode};
use replay::provider::CleanupReport;
use replay::{Ledger, LedgerEntry, OpCtx, Provider, ProviderError, RunInfo, SnapshotTimeline};
use trace_format::{Event, Trace};

/// A run of the local provider over a trace, executed one event at a time (by id).
pub struct Run {
    /// Holds the run directory (`run/` inside it) and the trace.
    pub dir: tempfile::TempDir,
    /// What `prepare` was given.
    pub info: RunInfo,
    /// The provider under test.
    pub provider: LocalProvider,
    events: Vec<Event>,
    ledger: Arc<Ledger>,
    snapshots: Arc<SnapshotTimeline>,
    origin: Instant,
    rt: tokio::runtime::Runtime,
}

impl Run {
    /// Prepares a provider in `mode` for `trace` (a YAML trace: header and events).
    pub fn start(mode: Mode, trace: &str) -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("trace.yaml");
        fs_err::write(&path, trace).expect("writing the trace");
        let t = Trace::read(&path).unwrap_or_else(|e| panic!("the test's trace: {e}\n{trace}"));
        let run_dir = dir.path().join("run");
        fs_err::create_dir_all(&run_dir).expect("run directory");
        let info = RunInfo {
            run_id: format!(
                "pl-test-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ),
            run_dir: run_dir.clone(),
            header: t.header,
            stop: None,
        };
        let provider = LocalProvider::new(LocalConfig {
            mode,
            ..LocalConfig::default()
        });
        let notices = provider
            .prepare(&info)
            .unwrap_or_else(|e| panic!("prepare in mode {mode:?}: {e:?}"));
        assert!(
            mode != Mode::Loop || notices.is_empty(),
            "loop mode as root has nothing to say: {notices:?}"
        );
        Self {
            dir,
            info,
            provider,
            events: t.events,
            ledger: Arc::new(Ledger::open(&run_dir).expect("ledger")),
            snapshots: Arc::new(SnapshotTimeline::default()),
            origin: Instant::now(),
            rt: tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime"),
        }
    }

    /// Executes event `id`: the phases it recorded, or the provider's error.
    pub fn exec(&self, id: u64) -> Result<Vec<String>, ProviderError> {
        self.rt.block_on(self.execute(id))
    }

    /// Executes `first` and `second` at once, as the engine runs two events due together:
    /// `first` runs until it first waits, then `second` begins, and both go on side by side.
    pub fn exec_together(
        &self,
        first: u64,
        second: u64,
    ) -> (
        Result<Vec<String>, ProviderError>,
        Result<Vec<String>, ProviderError>,
    ) {
        self.rt
            .block_on(async { tokio::join!(self.execute(first), self.execute(second)) })
    }

    async fn execute(&self, id: u64) -> Result<Vec<String>, ProviderError> {
        let ev = self
            .events
            .iter()
            .find(|e| e.id == id)
            .unwrap_or_else(|| panic!("the trace has no event {id}"))
            .clone();
        let ctx = Arc::new(OpCtx::new(
            self.origin,
            id,
            self.ledger.clone(),
            self.snapshots.clone(),
        ));
        self.provider.execute(Arc::new(ev), ctx.clone()).await?;
        Ok(ctx.phases_so_far().into_iter().map(|p| p.name).collect())
    }

    /// Executes event `id`, which must succeed: its phases.
    pub fn ok(&self, id: u64) -> Vec<String> {
        self.exec(id)
            .unwrap_or_else(|e| panic!("event {id} failed: {}: {}", e.class, e.message))
    }

    /// Executes event `id`, which must fail: its error.
    pub fn fails(&self, id: u64) -> ProviderError {
        match self.exec(id) {
            Ok(phases) => panic!("event {id} succeeded (phases {phases:?}) but should fail"),
            Err(e) => e,
        }
    }

    /// The run directory.
    pub fn run_dir(&self) -> &Path {
        &self.info.run_dir
    }

    /// The run's objects directory (images, mount points).
    pub fn objects(&self) -> PathBuf {
        self.run_dir().join("objects")
    }

    /// The one object whose name starts with `prefix` (e.g. `vol-data-`, `snap-s1-`).
    pub fn object(&self, prefix: &str) -> PathBuf {
        let found: Vec<PathBuf> = fs_err::read_dir(self.objects())
            .expect("objects directory")
            .map(|e| e.expect("entry").path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
            })
            .collect();
        assert_eq!(
            found.len(),
            1,
            "one object named {prefix}* in {}: {found:?}",
            self.objects().display()
        );
        found.into_iter().next().expect("one")
    }

    /// Whether any object's name starts with `prefix`.
    pub fn has_object(&self, prefix: &str) -> bool {
        fs_err::read_dir(self.objects()).is_ok_and(|d| {
            d.filter_map(Result::ok)
                .any(|e| e.file_name().to_string_lossy().starts_with(prefix))
        })
    }

    /// The ledger's live entries as `kind path` (relative to the run directory where inside).
    pub fn leftovers(&self) -> Vec<String> {
        self.live()
            .iter()
            .map(|e| {
                let p = Path::new(&e.id);
                let rel = p.strip_prefix(self.run_dir()).unwrap_or(p);
                format!("{} {}", e.kind, rel.display())
            })
            .collect()
    }

    /// The ledger's live entries.
    pub fn live(&self) -> Vec<LedgerEntry> {
        replay::ledger::read_live(&Ledger::path_in(self.run_dir())).expect("reading the ledger")
    }

    /// Runs the provider's cleanup over the ledger's live entries.
    pub fn cleanup(&self) -> CleanupReport {
        self.provider.cleanup(&self.info, &self.live())
    }

    /// The finish notices (cut and changed-block lines).
    pub fn notices(&self) -> Vec<String> {
        self.provider.finish_notices()
    }
}

impl Drop for Run {
    /// A failed test leaves no loop device or mount behind.
    fn drop(&mut self) {
        let live = self.live();
        if !live.is_empty() {
            let _ = provider_local::cleanup(&self.info, &live);
        }
    }
}

/// Loop mode when root; `None` after the skip line otherwise.
pub fn loop_or_skip(what: &str) -> Option<Mode> {
    if provider_local::sys::is_root() {
        return Some(Mode::Loop);
    }
    #[allow(clippy::print_stderr)] // the skip line is the contract
    {
        eprintln!("skipped: {what} needs root (loop devices, mounts)");
    }
    None
}

/// The modes a test runs in on this machine: directories always, loop devices as root.
pub fn modes() -> Vec<Mode> {
    let mut m = vec![Mode::Dir];
    if provider_local::sys::is_root() {
        m.push(Mode::Loop);
    }
    m
}

/// Runs a command that must succeed: its trimmed stdout.
pub fn sh(program: &str, args: &[&str]) -> String {
    let o = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(
        o.status.success(),
        "{program} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_owned()
}

/// The loop devices backed by `image`.
pub fn loops_of(image: &Path) -> Vec<String> {
    provider_local::sys::loops_of(image)
}

/// The loop devices backed by `image` once there are `n`: a detached device another process
/// still holds open (for a moment) stays bound to its image until that process closes it.
pub fn loops_settled(image: &Path, n: usize) -> Vec<String> {
    let deadline = Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let devs = loops_of(image);
        if devs.len() == n {
            return devs;
        }
        assert!(
            Instant::now() < deadline,
            "{} is backed by {} loop devices, not {n}, after 10 s: {devs:?}",
            image.display(),
            devs.len()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Whether the phase list has `name`.
pub fn has(phases: &[String], name: &str) -> bool {
    phases.iter().any(|p| p == name)
}

/// The header every test's trace starts with.
pub const HEADER: &str =
    "format: cnsreplay-trace\nversion: 3\nprovenance:\n  generator: hand-written\n";
