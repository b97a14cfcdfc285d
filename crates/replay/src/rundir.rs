//! The run directory: everything a run leaves behind, and all that analysis reads.
//!
//! `manifest.json` is rewritten atomically (temporary file + rename) at start and at the end,
//! so it is always valid JSON; its `state` goes `running` → `complete` | `interrupted`, and a
//! later command that finds `running` with the recorded process gone marks it
//! `crashed-detected`. The layout is documented in `docs/run-dir.md`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use trace_format::Header;

use crate::Error;
use crate::record::{CompletionState, Summary};
use crate::record::{Validity, Verdict};

/// The trace a run replayed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceInfo {
    /// Path as given.
    pub path: String,
    /// SHA-256 of the file, hex.
    pub sha256: String,
    /// Its header.
    pub header: Header,
}

/// The machine the run ran on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostInfo {
    /// Host name.
    pub hostname: String,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// CPUs available to the process.
    pub cpus: usize,
    /// The host's timing floor, measured before the clock started: how late the run's
    /// runtime ran a task woken from outside it, idle (the completion probe, every 2 ms for
    /// `--floor-probe`, default 1 s). Absent when not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing_floor: Option<crate::record::Percentiles>,
    /// What looking at the clock costs here, measured after the timing floor: a thread
    /// sleeping on the timing lanes' grid, its CPU and wall time per wake-up. Absent when the
    /// floor was not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake_cost: Option<crate::precise::WakeCost>,
}

impl HostInfo {
    /// This machine.
    pub fn current() -> Self {
        let read = |p: &str| {
            fs_err::read_to_string(p)
                .map(|s| s.trim().to_owned())
                .unwrap_or_default()
        };
        Self {
            hostname: read("/proc/sys/kernel/hostname"),
            kernel: read("/proc/sys/kernel/osrelease"),
            cpus: std::thread::available_parallelism().map_or(1, usize::from),
            timing_floor: None,
            wake_cost: None,
        }
    }
}

/// The provider and its configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderInfo {
    /// Provider name.
    pub name: String,
    /// Its configuration (rebuilds it for `cleanup`).
    pub config: serde_json::Value,
    /// What it found about its environment while preparing (for a cluster: server version,
    /// nodes, storage and snapshot classes, CSI drivers); absent when it had nothing to say.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub environment: serde_json::Value,
}

/// `manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Program and version, e.g. `cnsreplay 0.1.0`.
    pub tool: String,
    /// Unique id of this run.
    pub run_id: String,
    /// The trace.
    pub trace: TraceInfo,
    /// Engine options as given, with `timing.lanes` resolved to the count used.
    pub options: serde_json::Value,
    /// Seed of every random choice (sim latencies).
    pub seed: u64,
    /// The machine.
    pub host: HostInfo,
    /// The provider.
    pub provider: ProviderInfo,
    /// Wall-clock start (the run directory's creation, before the provider is prepared).
    pub started: jiff::Timestamp,
    /// The run origin on the wall clock: time 0 of every `intended`, `started` and
    /// `completed` in `records`, later than `started` by the preparation. Absent until the
    /// clock starts (and in runs from before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<jiff::Timestamp>,
    /// Wall-clock end, once finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<jiff::Timestamp>,
    /// Completion state.
    pub state: CompletionState,
    /// Why it stopped early.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Process id of the run (for crash detection).
    pub pid: u32,
    /// A run made by `merge-runs`: its parts and the verdict it is held to (absent in a run
    /// of its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<Merged>,
    /// The user's labels (`run --label KEY=VALUE`: the build, commit or driver version the run
    /// measured), which `analyze history` orders runs by. Not part of a run's identity: runs
    /// of two builds are compared exactly because their labels differ.
    #[serde(default, skip_serializing_if = "Labels::is_empty")]
    pub labels: Labels,
}

/// A run's labels, `KEY` → `VALUE`, in key order.
pub type Labels = std::collections::BTreeMap<String, String>;

/// Parses labels given as `KEY=VALUE` (`build=1042`, `driver-version=v1.2.0`): a key is ASCII
/// letters, digits and `_ . - /`, starting with a letter or digit, at most 63 characters; a
/// value is at most 255 characters without control characters (it lands in CSV, JUnit and
/// Markdown). A key given twice is an error, even with the same value.
pub fn parse_labels<S: AsRef<str>>(specs: &[S]) -> Result<Labels, Error> {
    let mut out = Labels::new();
    for spec in specs {
        let spec = spec.as_ref();
        let bad = |m: &str| Error::Options(format!("--label {spec:?}: {m}"));
        let (k, v) = spec
            .split_once('=')
            .ok_or_else(|| bad("expected KEY=VALUE, e.g. build=1042"))?;
        check_label(k, v).map_err(|m| bad(&m))?;
        if out.insert(k.to_owned(), v.to_owned()).is_some() {
            return Err(bad(&format!("the key {k:?} is given twice")));
        }
    }
    Ok(out)
}

/// Why a label is not one [`parse_labels`] accepts (also checked when reading exported values).
pub fn check_label(key: &str, value: &str) -> Result<(), String> {
    let key_ok = key.len() <= 63
        && key
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/'));
    if !key_ok {
        return Err(format!(
            "the key {key:?} is not 1-63 ASCII letters, digits, `_ . - /` starting with a \
             letter or digit"
        ));
    }
    if value.chars().count() > 255 || value.chars().any(char::is_control) {
        return Err(format!(
            "the value of {key:?} is longer than 255 characters or has control characters"
        ));
    }
    Ok(())
}

/// What a merged run was made of (`merge-runs`, module `merge_runs`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Merged {
    /// The parts, in the order given.
    pub parts: Vec<MergedPart>,
    /// The worst part's verdict, each check's message naming that part: what `analyze`
    /// holds the merged run to. Absent when no part had one (runs older than verdicts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validity: Option<Validity>,
}

/// One run a merged run was made of.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergedPart {
    /// Its directory, as given.
    pub path: String,
    /// Its run id.
    pub run_id: String,
    /// SHA-256 of the part's trace.
    pub trace_sha256: String,
    /// Its replay speed.
    pub speed: f64,
    /// Its completion state.
    pub state: CompletionState,
    /// Its verdict (absent: none recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// Its engine options.
    pub options: serde_json::Value,
}

/// A run directory.
#[derive(Debug, Clone)]
pub struct RunDir {
    path: PathBuf,
}

impl RunDir {
    /// Creates a new run directory; it must not exist or be empty.
    pub fn create(path: &Path) -> Result<Self, Error> {
        if path.exists() && fs_err::read_dir(path)?.next().is_some() {
            return Err(Error::RunDirNotEmpty(path.to_owned()));
        }
        fs_err::create_dir_all(path.join("io"))?;
        fs_err::create_dir_all(path.join("histograms"))?;
        Ok(Self {
            path: path.to_owned(),
        })
    }

    /// An existing run directory.
    pub fn open(path: &Path) -> Self {
        Self {
            path: path.to_owned(),
        }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `manifest.json` atomically.
    pub fn write_manifest(&self, m: &Manifest) -> Result<(), Error> {
        write_json_atomic(&self.path.join("manifest.json"), m)
    }

    /// Writes `summary.json` atomically.
    pub fn write_summary(&self, s: &Summary) -> Result<(), Error> {
        write_json_atomic(&self.path.join("summary.json"), s)
    }

    /// Reads `manifest.json`.
    pub fn manifest(&self) -> Result<Manifest, Error> {
        read_json(&self.path.join("manifest.json"))
    }

    /// Reads `summary.json`.
    pub fn summary(&self) -> Result<Summary, Error> {
        read_json(&self.path.join("summary.json"))
    }

    /// Reads the manifest and, if it says `running` but its process is gone, marks it
    /// `crashed-detected` (rewriting the file). Returns the manifest as it now stands.
    pub fn detect_crash(&self) -> Result<Manifest, Error> {
        let mut m = self.manifest()?;
        if m.state == CompletionState::Running && !process_alive(m.pid) {
            m.state = CompletionState::CrashedDetected;
            m.reason = Some(format!("process {} ended without finishing the run", m.pid));
            self.write_manifest(&m)?;
        }
        Ok(m)
    }
}

/// The run directories directly inside `dir` (subdirectories with a `manifest.json`), sorted:
/// the points of a sweep or a capacity search.
pub fn run_dirs_in(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let mut runs = Vec::new();
    for e in fs_err::read_dir(dir)? {
        let p = e?.path();
        if p.join("manifest.json").is_file() {
            runs.push(p);
        }
    }
    runs.sort();
    Ok(runs)
}

/// Whether a process with this pid exists (Linux: `/proc/PID`).
pub fn process_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

fn write_json_atomic<T: Serialize>(path: &Path, v: &T) -> Result<(), Error> {
    let tmp = path.with_extension("json.tmp");
    let mut text = serde_json::to_vec_pretty(v).map_err(|source| Error::Json {
        file: path.to_owned(),
        source,
    })?;
    text.push(b'\n');
    fs_err::write(&tmp, &text)?;
    fs_err::rename(&tmp, path)?;
    Ok(())
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, Error> {
    let text = fs_err::read(path)?;
    serde_json::from_slice(&text).map_err(|source| Error::Json {
        file: path.to_owned(),
        source,
    })
}

/// SHA-256 of a file, hex.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut f = fs_err::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}
