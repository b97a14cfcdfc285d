//! Running the `cnsreplay` binary as the tests do: from the workspace, without the caller's
//! log filter or colour, within a deadline; reading its output; paths as arguments.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub(crate) fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub(crate) fn workspace() -> PathBuf {
    crate_dir().join("../..")
}

pub(crate) fn cnsreplay(args: &[&str]) -> Output {
    cnsreplay_env(args, &[])
}

/// `cnsreplay ARGS` as the tests run it: from the workspace, no colour, no log filter or
/// engine delay of the caller's environment, and a 100 ms timing-floor probe before each
/// run's clock instead of 1 s (hundreds of runs; the probe's own test asks for more).
pub(crate) fn command<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cnsreplay"));
    c.args(args)
        .current_dir(workspace())
        .env_remove("RUST_LOG")
        .env_remove("CNSREPLAY_TEST_ENGINE_DELAY")
        .env("CNSREPLAY_FLOOR_PROBE", "100ms")
        .env("NO_COLOR", "1");
    c
}

/// `cnsreplay` with extra environment variables.
pub(crate) fn cnsreplay_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    command(args)
        .envs(env.iter().copied())
        .output()
        .expect("run cnsreplay")
}

/// How long one cluster command of a test may take: `CNSREPLAY_TEST_DEADLINE` seconds,
/// default `secs` (each test names what its run needs).
pub(crate) fn deadline(secs: u64) -> Duration {
    Duration::from_secs(
        std::env::var("CNSREPLAY_TEST_DEADLINE")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(secs),
    )
}

/// `cnsreplay ARGS` to its end within [`deadline`]`(secs)`; past it the run is stopped
/// (SIGINT, so it removes what it made), killed 60 s later if still there, and the test
/// fails with its stderr (a cluster test must never hang CI).
pub(crate) fn cnsreplay_within<S: AsRef<std::ffi::OsStr>>(args: &[S], secs: u64) -> Output {
    let child = command(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn cnsreplay");
    let what = format!(
        "cnsreplay {:?}",
        args.iter()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
    );
    wait_within(child, &what, deadline(secs))
}

/// Waits for `child` (stdout and stderr piped) at most `limit`, draining its pipes meanwhile
/// (a chatty run cannot block on a full pipe). Past `limit`: SIGINT, 60 s to end, SIGKILL,
/// and the test fails naming `what` with its stderr.
pub(crate) fn wait_within(mut child: Child, what: &str, limit: Duration) -> Output {
    let drain = |r: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut v);
            }
            v
        })
    };
    let o = drain(child.stdout.take().map(|r| Box::new(r) as _));
    let e = drain(child.stderr.take().map(|r| Box::new(r) as _));
    let t0 = Instant::now();
    let mut interrupted = None;
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        match interrupted {
            None if t0.elapsed() > limit => {
                let _ = rustix::process::kill_process(
                    rustix::process::Pid::from_child(&child),
                    rustix::process::Signal::INT,
                );
                interrupted = Some(Instant::now());
            }
            Some(t) if t.elapsed() > Duration::from_secs(60) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "{what} did not end within {limit:?}, nor 60 s after SIGINT (killed); \
                     stderr:\n{}",
                    String::from_utf8_lossy(&e.join().unwrap_or_default())
                );
            }
            _ => {}
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let (stdout, stderr) = (o.join().unwrap_or_default(), e.join().unwrap_or_default());
    assert!(
        interrupted.is_none(),
        "{what} did not end within {limit:?} and was stopped (SIGINT); stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&stdout),
        String::from_utf8_lossy(&stderr)
    );
    Output {
        status,
        stdout,
        stderr,
    }
}

pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("utf-8 stdout")
}

/// A test path as the `&str` argument the CLI takes.
pub(crate) fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Asserts a zero exit, showing stdout and stderr otherwise.
pub(crate) fn ok(o: &Output) {
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        stdout(o),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// True (after the skip line) when the local provider's block volumes cannot run: not root.
pub(crate) fn skip_unless_root() -> bool {
    !testkit::skip::root("the local provider's block volumes")
}
