//! `cnsreplay run` and `cleanup` end to end: the summary and its schema, and the leak tests —
//! a `local` run killed mid-flight (SIGINT; SIGKILL + `cleanup`) leaves no mount, loop device
//! or file behind, its results stay readable, and cleanup touches nothing outside the ledger.
//! As root the volumes are loop devices + mounts; otherwise the directory fallback is tested.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use replay::{CompletionState, EventRecord, RunDir};

use super::{LENIENT, cnsreplay, ok, stdout, workspace};

const QUICK: &str = "traces/quickstart.yaml";

fn spawn_local(run_dir: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_cnsreplay"))
        .args(["-q", "run", QUICK, "--provider", "local", "--grace", "3s"])
        .args(["--local-max-volume", "64Mi", "-o"])
        .arg(run_dir)
        .current_dir(workspace())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn cnsreplay run")
}

/// Mount points and loop devices that mention `dir`.
fn leftovers(dir: &Path) -> Vec<String> {
    let d = dir.to_string_lossy().into_owned();
    let mut out: Vec<String> = fs_err::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(&d))
        .map(|l| format!("mount: {l}"))
        .collect();
    if let Ok(o) = Command::new("losetup").arg("-a").output() {
        out.extend(
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| l.contains(&d))
                .map(|l| format!("loop: {l}")),
        );
    }
    out
}

fn readable_results(run: &Path) -> Vec<EventRecord> {
    let text = fs_err::read_to_string(run.join("events.jsonl")).expect("events.jsonl");
    let lines: Vec<&str> = text.lines().collect();
    // A crash may tear the last line; everything before it parses.
    let n = if text.ends_with('\n') {
        lines.len()
    } else {
        lines.len().saturating_sub(1)
    };
    lines[..n]
        .iter()
        .map(|l| serde_json::from_str(l).expect("record"))
        .collect()
}

fn wait_for_attach(run: &Path) {
    // Wait until the volumes are attached (the attach records are written).
    for _ in 0..300 {
        if fs_err::read_to_string(run.join("events.jsonl"))
            .is_ok_and(|t| t.matches("\"attach\"").count() >= 2)
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the run never attached its volumes");
}

/// `run` of the quickstart trace on the sim (1 ms per op, 20× speed) with a JSON summary,
/// into `run`.
fn quick_sim_json(run: &Path) -> [&str; 12] {
    [
        "-q",
        "run",
        QUICK,
        "--provider",
        "sim",
        "--speed",
        "20",
        "--json",
        "--sim-latency",
        "default=constant:1ms",
        "-o",
        run.to_str().expect("utf-8"),
    ]
}

#[test]
fn sim_run_prints_the_summary_and_its_schema_is_committed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join("run");
    let o = cnsreplay(&quick_sim_json(&run));
    ok(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["state"], "complete");
    assert_eq!(v["dispatched"], 21);
    assert_eq!(v["ops"]["snapshot"]["count"], 3);
    // Every latency block of an op type carries the tool's error bound of each percentile;
    // at the max it is at least the delay the engine measured for that event.
    for op in ["create_volume", "attach", "snapshot"] {
        for block in ["response", "service"] {
            let b = &v["ops"][op][block]["tool_ns"];
            for p in ["p50", "p90", "p99", "p999", "max"] {
                assert!(b[p].is_u64(), "{op}.{block}.tool_ns.{p}: {b}");
            }
        }
    }
    // The values table carries each value's bound: create_volume's p99 row has the summary's.
    let values = dir.path().join("values.csv");
    ok(&cnsreplay(&[
        "-q",
        "analyze",
        "summary",
        run.to_str().expect("utf-8"),
        "--allow-invalid",
        "--csv",
        values.to_str().expect("utf-8"),
    ]));
    let table = fs_err::read_to_string(&values).expect("values");
    let row: Vec<&str> = table
        .lines()
        .map(|l| l.split(',').collect::<Vec<_>>())
        .find(|f| f[4] == "create_volume" && f[5] == "p99")
        .unwrap_or_else(|| panic!("no create_volume p99 row: {table}"));
    assert_eq!(
        row[8].parse::<u64>().ok(),
        v["ops"]["create_volume"]["response"]["tool_ns"]["p99"].as_u64(),
        "{table}"
    );
    let manifest = RunDir::open(&run).manifest().expect("manifest");
    assert_eq!(manifest.state, CompletionState::Complete);
    // The CLI's default timing options are the engine's, and the lane count is resolved.
    let timing: replay::TimingOptions =
        serde_json::from_value(manifest.options["timing"].clone()).expect("timing options");
    assert_eq!(
        timing.min_wake_ns,
        replay::TimingOptions::default().min_wake_ns
    );
    assert!(timing.pin && timing.realtime);
    assert!((1..=2).contains(&timing.lanes), "{timing:?}");

    // The table names every op type and the I/O split line is absent on sim (no I/O).
    let run2 = dir.path().join("run2");
    let o = cnsreplay(&[
        "-q",
        "run",
        QUICK,
        "--provider",
        "sim",
        "--speed",
        "50",
        "-o",
        run2.to_str().expect("utf-8"),
    ]);
    let text = stdout(&o);
    assert!(text.starts_with("complete: 21 events on sim"), "{text}");
    assert!(
        text.contains("create_volume") && text.contains("resp p50"),
        "{text}"
    );
    // Under each operation, the tool's bound of each figure.
    let rows: Vec<&str> = text.lines().collect();
    let at = rows
        .iter()
        .position(|l| l.starts_with("create_volume "))
        .expect("create_volume row");
    assert!(
        rows[at + 1].starts_with("  tool") && rows[at + 1].matches('≤').count() == 8,
        "{text}"
    );
}

/// `run` of the quickstart trace on the sim at 50× speed into `run`, logs on stderr (no
/// `-q`), with `extra` (latencies, probes) appended.
fn quick_sim_logged(run: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "run",
        QUICK,
        "--provider",
        "sim",
        "--speed",
        "50",
        "-o",
        run.to_str().expect("utf-8"),
    ];
    args.extend_from_slice(extra);
    cnsreplay(&args)
}

/// A sim run whose trace uses op types the sim gives no latency says so before its clock
/// starts (the run then times the tool); with latencies configured it says nothing.
#[test]
fn a_sim_without_latencies_says_so_before_the_clock_starts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join("bare");
    let o = quick_sim_logged(&run, &["--sim-latency", "attach=constant:2ms"]);
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    let notice = err
        .find("sim: no latency configured for ")
        .unwrap_or_else(|| panic!("no notice: {err}"));
    let line = err[notice..].lines().next().unwrap_or_default();
    let named: Vec<&str> = line["sim: no latency configured for ".len()..]
        .split(" (the sim's default")
        .next()
        .unwrap_or_default()
        .split(", ")
        .collect();
    assert!(
        named.contains(&"create_volume")
            && named.contains(&"snapshot")
            && !named.contains(&"attach")
            && !named.contains(&"marker"),
        "{line}"
    );
    // Before the clock: ahead of everything the run says when it has ended.
    let ended = err.find("verdict").unwrap_or(err.len());
    assert!(notice < ended, "{err}");
    let run = dir.path().join("timed");
    let o = quick_sim_logged(&run, &["--sim-latency", "default=constant:1ms"]);
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("no latency configured"), "{err}");
}

#[test]
fn sigint_mid_flight_cleans_up_everything_and_marks_the_run_interrupted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join("run");
    let mut child = spawn_local(&run);
    wait_for_attach(&run);
    std::thread::sleep(Duration::from_millis(1500)); // I/O is running now
    let pid = child.id().to_string();
    Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .expect("kill -INT");
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(1), "interrupted runs exit 1");
    assert_eq!(leftovers(dir.path()), Vec::<String>::new());
    assert!(!run.join("objects").exists(), "objects directory removed");
    let rd = RunDir::open(&run);
    assert_eq!(
        rd.manifest().expect("manifest").state,
        CompletionState::Interrupted
    );
    let s = rd.summary().expect("summary");
    assert_eq!(s.state, CompletionState::Interrupted);
    let recs = readable_results(&run);
    assert_eq!(recs.len() as u64, s.dispatched);
    assert!(
        replay::ledger::read_live(&run.join("ledger.jsonl"))
            .expect("ledger")
            .is_empty()
    );
}

#[test]
fn sigkill_then_cleanup_removes_leftovers_and_nothing_else() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join("run");
    let root = provider_local::sys::is_root();
    // Decoys the run does not own: a file in its objects directory and (as root) a loop
    // device on a file next to the run directory.
    let decoy_img = dir.path().join("decoy.img");
    fs_err::write(&decoy_img, vec![0u8; 1 << 20]).expect("decoy image");
    let decoy_loop = root.then(|| {
        let o = Command::new("losetup")
            .args(["--find", "--show"])
            .arg(&decoy_img)
            .output()
            .expect("losetup");
        LoopGuard(String::from_utf8_lossy(&o.stdout).trim().to_owned())
    });

    let mut child = spawn_local(&run);
    wait_for_attach(&run);
    std::thread::sleep(Duration::from_millis(1000));
    child.kill().expect("SIGKILL");
    child.wait().expect("wait");
    let decoy_file = run.join("objects/decoy.txt");
    fs_err::write(&decoy_file, "not the run's").expect("decoy file");
    if root {
        assert!(
            leftovers(&run).iter().any(|l| l.starts_with("mount")),
            "a killed run leaves its mounts: {:?}",
            leftovers(&run)
        );
    }
    assert_eq!(
        RunDir::open(&run).manifest().expect("manifest").state,
        CompletionState::Running
    );
    readable_results(&run);

    let o = cnsreplay(&["cleanup", run.to_str().expect("utf-8")]);
    let text = stdout(&o);
    assert!(text.contains("crashed-detected"), "{text}");
    assert_eq!(leftovers(&run), Vec::<String>::new(), "{text}");
    assert!(
        decoy_file.exists(),
        "cleanup removed a file not in the ledger"
    );
    assert!(decoy_img.exists());
    let left: Vec<_> = fs_err::read_dir(run.join("objects"))
        .expect("objects")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(
        left,
        vec![std::ffi::OsString::from("decoy.txt")],
        "only the decoy is left"
    );
    assert_eq!(
        RunDir::open(&run).manifest().expect("manifest").state,
        CompletionState::CrashedDetected
    );
    if let Some(dev) = &decoy_loop {
        let o = Command::new("losetup")
            .arg(&dev.0)
            .output()
            .expect("losetup");
        assert!(
            o.status.success(),
            "the decoy loop device {} survived",
            dev.0
        );
    }
    // A second cleanup finds nothing more to do.
    let o = cnsreplay(&["cleanup", run.to_str().expect("utf-8")]);
    assert!(stdout(&o).contains("removed 0"), "{}", stdout(&o));
}

/// Detaches the test's own decoy loop device however the test ends, so a failing assertion
/// does not leak it.
struct LoopGuard(String);

impl Drop for LoopGuard {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.0]).status();
    }
}

/// Without root the engine cannot hold the CPU latency request, make its timing lanes
/// real-time or raise their priority: the run still completes, and its summary says what it
/// could not do. Run as `nobody` through `setpriv` when the tests run as root (as in CI).
#[test]
fn without_privileges_the_run_completes_and_says_what_it_could_not_set() {
    let root = rustix::process::geteuid().is_root();
    // Not root: already unprivileged (perhaps with capabilities), so the run goes as this
    // user and only its completion is checked.
    let dir = tempfile::tempdir().expect("tempdir");
    fs_err::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .expect("chmod");
    let run = dir.path().join("run");
    let bin = env!("CARGO_BIN_EXE_cnsreplay");
    let mut cmd = if root {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", bin]);
        c
    } else {
        Command::new(bin)
    };
    let o = cmd
        .args(quick_sim_json(&run))
        .current_dir(workspace())
        .env("NO_COLOR", "1")
        .output()
        .expect("run cnsreplay");
    ok(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(v["state"], "complete");
    assert_eq!(v["dispatched"], 21);
    let notices: Vec<&str> = v["notices"]
        .as_array()
        .expect("notices")
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    if !root {
        return;
    }
    let has = |s: &str| notices.iter().any(|n| n.contains(s));
    assert!(has("/dev/cpu_dma_latency"), "{notices:?}");
    assert!(
        has("could not make the timing lanes real-time") && has("nor raise them to nice -10"),
        "{notices:?}"
    );
    assert!(
        !has("they run at nice -10 instead"),
        "a notice must not claim a priority the lanes did not get: {notices:?}"
    );
}

/// `run` of the quickstart trace on the sim at 20× into `run`, with `extra` flags; returns
/// the exit code and stdout.
fn quick_sim(run: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let mut args = vec![
        "-q",
        "run",
        QUICK,
        "--provider",
        "sim",
        "--speed",
        "20",
        "--sim-latency",
        "default=constant:1ms",
        "-o",
        run.to_str().expect("utf-8"),
    ];
    args.extend_from_slice(extra);
    let o = cnsreplay(&args);
    (o.status.code(), stdout(&o))
}

#[test]
fn the_verdict_is_in_the_table_and_require_valid_exits_4() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Workers busy at most 0 % is a limit no run meets: engine-bound; start lateness 0 ns
    // fails too and is printed with its evidence (21 events: judged only with `min.events`
    // lowered from 100).
    let (code, text) = quick_sim(
        &dir.path().join("bound"),
        &[
            "--validity",
            "start.p99=0ns,min.events=10,workers=0%",
            "--require-valid",
        ],
    );
    assert_eq!(code, Some(4), "{text}");
    assert!(text.contains("\nverdict: ENGINE-BOUND\n"), "{text}");
    assert!(
        text.contains("\n  start_lateness.p99: start lateness p99 ")
            && text.contains("(limit 0.000 ms) over 21 events that did not wait"),
        "{text}"
    );
    assert!(text.contains("engine delay: start lateness p50 "), "{text}");
    // Without --require-valid the same run exits 0: the verdict is information.
    let (code, _) = quick_sim(&dir.path().join("bound2"), &["--validity", "start.p99=0ns"]);
    assert_eq!(code, Some(0));
    let (code, text) = quick_sim(&dir.path().join("valid"), &[LENIENT, "--require-valid"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("\nverdict: valid ("), "{text}");

    // Every operation failing is not a success: verdict `failed`, exit 1.
    let cfg = dir.path().join("fail.yaml");
    fs_err::write(&cfg, "errors: {create_volume: 1.0}\n").expect("write");
    let (code, text) = quick_sim(
        &dir.path().join("failed2"),
        &[LENIENT, "--sim-config", cfg.to_str().expect("utf-8")],
    );
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("\nverdict: FAILED\n  outcomes: every one of the 19 operations failed"),
        "{text}"
    );

    // analyze refuses the engine-bound run (exit 2, saying why) unless --allow-invalid.
    let (valid, bound) = (dir.path().join("valid"), dir.path().join("bound"));
    let args = |extra: &'static str| {
        let mut v = vec![
            "analyze".to_owned(),
            "compare".to_owned(),
            valid.display().to_string(),
            bound.display().to_string(),
        ];
        if !extra.is_empty() {
            v.push(extra.to_owned());
        }
        v
    };
    let run = |a: Vec<String>| {
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        cnsreplay(&a)
    };
    let o = run(args(""));
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            "{}: refused, the run's verdict is engine-bound: start lateness p99",
            bound.display()
        )),
        "{err}"
    );
    let o = run(args("--allow-invalid"));
    assert!(matches!(o.status.code(), Some(0 | 1 | 3)), "{o:?}");

    // The docs write compare's options after `-- NEW...`, and the refusal's advice is
    // appended there: they are options, not run directories.
    let o = cnsreplay(&[
        "analyze",
        "compare",
        valid.to_str().expect("utf-8"),
        "--",
        bound.to_str().expect("utf-8"),
        "--allow-invalid",
        "--threshold",
        "all=10%",
        "--json",
    ]);
    assert!(matches!(o.status.code(), Some(0 | 1 | 3)), "{o:?}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("--json was applied");
    assert!(v["rows"].is_array(), "{v}");
    let o = cnsreplay(&[
        "analyze",
        "compare",
        valid.to_str().expect("utf-8"),
        "--",
        bound.to_str().expect("utf-8"),
    ]);
    assert_eq!(o.status.code(), Some(2), "still refused without it: {o:?}");
    // An unknown option there is clap's usage error, not a missing run directory.
    let o = cnsreplay(&[
        "analyze",
        "compare",
        valid.to_str().expect("utf-8"),
        "--",
        bound.to_str().expect("utf-8"),
        "--allow-invalidd",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("unexpected argument '--allow-invalidd'"),
        "{err}"
    );
}

/// `--speed 1e-12` makes every time after the first overflow a time offset: the run stops at
/// the first such event with a located error instead of replaying saturated times.
#[test]
fn a_speed_that_overflows_the_times_is_refused_naming_the_event() {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = cnsreplay(&[
        "run",
        QUICK,
        "--provider",
        "sim",
        "--speed",
        "1e-12",
        "-o",
        dir.path().join("run").to_str().expect("utf-8"),
    ]);
    let text = String::from_utf8_lossy(&o.stderr).into_owned() + &stdout(&o);
    assert_ne!(o.status.code(), Some(0), "{text}");
    assert!(
        text.contains(&format!(
            "{QUICK}:16: events[2].at: at=2s divided by speed 0.000000000001 is 2.000e12 s, \
             beyond the largest time offset"
        )),
        "{text}"
    );
}

/// `-q` ("only errors on stderr") hides the live progress line too, on a terminal (a pty from
/// util-linux `script`), where it is drawn without `-q`.
#[test]
fn quiet_hides_the_progress_line_on_a_terminal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = env!("CARGO_BIN_EXE_cnsreplay");
    let on_tty = |quiet: bool, run: &str| -> String {
        let cmd = format!(
            "{bin} {} run {QUICK} --provider sim --speed 8 --sim-latency default=constant:1ms \
             -o {} >/dev/null",
            if quiet { "-q" } else { "" },
            dir.path().join(run).display()
        );
        let o = Command::new("script")
            .args(["-qec", &cmd, "/dev/null"])
            .current_dir(workspace())
            .env("TERM", "xterm")
            .output()
            .expect("script (util-linux)");
        assert!(o.status.success(), "{o:?}");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let loud = on_tty(false, "loud");
    assert!(
        loud.contains("| in flight "),
        "no progress line on a tty: {loud:?}"
    );
    let quiet = on_tty(true, "quiet");
    assert!(
        !quiet.contains("in flight") && !quiet.contains("ops/s"),
        "-q drew progress: {quiet:?}"
    );
}

/// Writes `lines` as a JSON Lines trace in `dir`, replays it with `--provider local` into
/// `dir/run`; the run directory, its summary and what the command printed.
fn run_local_lines(
    dir: &Path,
    lines: &[String],
) -> (std::path::PathBuf, serde_json::Value, String) {
    let trace = dir.join("trace.jsonl");
    fs_err::write(&trace, lines.join("\n") + "\n").expect("write trace");
    let run = dir.join("run");
    let o = cnsreplay(&[
        "-q",
        "run",
        super::s(&trace),
        "--provider",
        "local",
        "-o",
        super::s(&run),
    ]);
    let text = String::from_utf8_lossy(&o.stderr).into_owned() + &stdout(&o);
    let summary = serde_json::from_slice(&fs_err::read(run.join("summary.json")).expect("summary"))
        .expect("summary json");
    (run, summary, text)
}

/// A block trace's shape (volumes in the header, then only `io`) replays on the local
/// provider through one I/O stream per volume: every request issued, none dropped or
/// reordered, trims and flushes included, an unaligned request aligned and counted; a
/// `delete_volume` after a volume's I/O waits for its stream; the per-second curve is written.
#[test]
fn a_block_trace_replays_through_per_volume_streams() {
    let dir = tempfile::tempdir().expect("tempdir");
    let n = 3000u64;
    let mut lines = super::block_trace(
        r#"{"name":"d0","size":"64Mi"},{"name":"d1","size":"64Mi"}"#,
        n,
    );
    lines.push(format!(
        r#"{{"at":{},"id":{},"delete_volume":{{"volume":"d1"}}}}"#,
        n * 500_000,
        n + 1
    ));
    let (run, summary, text) = run_local_lines(dir.path(), &lines);
    let streams = summary["io_streams"].as_array().expect("io_streams");
    assert_eq!(streams.len(), 2, "{text}");
    let mut requests = 0;
    for f in streams {
        requests += f["requests"].as_u64().unwrap();
        assert_eq!(f["dropped"], 0, "{f}");
        assert_eq!(f["reordered"], 0, "{f}");
        assert_eq!(f["errors"], 0, "{f}");
        assert_eq!(f["completed"], f["requests"], "{f}");
        assert!(f["windows"].as_u64().unwrap() >= 1, "{f}");
    }
    assert_eq!(requests, n);
    let adjusted: u64 = streams
        .iter()
        .map(|f| f["adjusted"].as_u64().unwrap())
        .sum();
    assert_eq!(adjusted, 1, "only the unaligned request is changed");
    assert_eq!(summary["ops"]["io"]["count"], n);
    assert_eq!(summary["ops"]["io"]["failed"], 0);
    assert_eq!(summary["ops"]["delete_volume"]["failed"], 0, "{text}");
    let checks = summary["validity"]["checks"].as_array().expect("checks");
    assert!(
        checks
            .iter()
            .any(|c| c["check"] == "io_stream.order" && c["passed"] == true),
        "{checks:?}"
    );
    // The delete ran after d1's stream had ended: its record started after d1's last request.
    let recs = readable_results(&run);
    let del = recs
        .iter()
        .find(|r| r.id == n + 1)
        .expect("the delete's record");
    assert_eq!(del.outcome, replay::Outcome::Ok, "{del:?}");
    // Rate curves: intended requests per second sum to the stream's requests.
    let mut curves = 0;
    for e in fs_err::read_dir(run.join("io/streams")).expect("io/streams") {
        let c: serde_json::Value =
            serde_json::from_slice(&fs_err::read(e.expect("entry").path()).expect("curve"))
                .expect("curve json");
        let f = streams
            .iter()
            .find(|f| f["volume"] == c["volume"])
            .expect("its stream");
        let sum: u64 = c["per_second"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p[0].as_u64().unwrap())
            .sum();
        assert_eq!(sum, f["requests"].as_u64().unwrap());
        curves += 1;
    }
    assert_eq!(curves, 2);
    // analyze shows them: the summary's streams and the report's trace-vs-replay figures.
    let o = cnsreplay(&["analyze", "summary", "--json", super::s(&run)]);
    let a: serde_json::Value = serde_json::from_slice(&o.stdout).expect("analyze json");
    assert_eq!(
        a["runs"][0]["io_streams"].as_array().map(Vec::len),
        Some(2),
        "{a}"
    );
    let html = dir.path().join("report.html");
    // Admitted whatever the verdict: under a loaded test run the streams' lateness may make
    // the run engine-bound, and the figures are what is checked here.
    let o = cnsreplay(&[
        "analyze",
        "report",
        "--allow-invalid",
        super::s(&run),
        "-o",
        super::s(&html),
    ]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let page = fs_err::read_to_string(&html).expect("report");
    for fig in ["stream-1-1", "stream-1-2"] {
        assert!(
            page.contains(&format!("data-figure=\"{fig}\"")),
            "{fig} missing"
        );
    }
    assert!(page.contains("<th>I/O stream</th>"));
    assert!(leftovers(dir.path()).is_empty());
}

/// A volume read by bare I/O, then attached by a workload (its stream ends first; the
/// workload's reads go one call at a time), detached, and read bare again (a second stream),
/// then deleted: every operation succeeds and the file system on the volume survives the
/// bare reads (the attach mounts it).
#[test]
fn bare_io_streams_end_for_an_attach_and_start_again_after_the_detach() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut lines = vec![
        r#"{"format":"cnsreplay-trace","version":1,"volumes":[{"name":"v","size":"64Mi"}]}"#
            .to_owned(),
    ];
    let mut id = 0;
    let mut ev = |at: u64, body: String| {
        id += 1;
        lines.push(format!(r#"{{"at":{at},"id":{id},{body}}}"#));
    };
    let read = |k: u64| {
        format!(
            r#""io":{{"volume":"v","kind":"read","offset":{},"len":4096}}"#,
            k * 4096
        )
    };
    for k in 0..200 {
        ev(k * 2_500_000, read(k));
    }
    ev(
        1_000_000_000,
        r#""attach":{"workload":"w","volumes":["v"]}"#.to_owned(),
    );
    for k in 0..10 {
        ev(1_500_000_000 + k * 1_000_000, read(k));
    }
    ev(2_000_000_000, r#""detach":{"workload":"w"}"#.to_owned());
    for k in 0..100 {
        ev(2_500_000_000 + k * 2_500_000, read(k));
    }
    ev(
        3_000_000_000,
        r#""delete_volume":{"volume":"v"}"#.to_owned(),
    );
    let (run, summary, text) = run_local_lines(dir.path(), &lines);
    for op in ["attach", "detach", "delete_volume", "io"] {
        assert_eq!(summary["ops"][op]["failed"], 0, "{op}: {text}");
    }
    assert_eq!(summary["ops"]["io"]["count"], 310);
    let streams: Vec<u64> = summary["io_streams"]
        .as_array()
        .expect("io_streams")
        .iter()
        .map(|f| f["requests"].as_u64().unwrap())
        .collect();
    assert_eq!(streams.len(), 2, "{text}");
    assert_eq!(streams.iter().sum::<u64>(), 300, "{streams:?}");
    // The 10 reads while the workload held the volume went one call at a time.
    let recs = readable_results(&run);
    assert_eq!(
        recs.iter()
            .filter(|r| r.op == trace_format::OpType::Io)
            .count(),
        10
    );
    assert!(leftovers(dir.path()).is_empty());
}

/// Before the clock, the host's timing floor: logged, in the manifest, and when it is
/// already more than 1 % of the fastest latency the sim is configured for, a warning before
/// the clock starts that is also among the run's notices; then what a timer wake-up costs on
/// the timing lanes' grid (logged, in the manifest). `--floor-probe 0s` skips both.
#[test]
fn the_host_timing_floor_is_measured_before_the_clock_and_too_coarse_a_floor_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join("floor");
    let o = quick_sim_logged(
        &run,
        &[
            "--sim-latency",
            "default=constant:20us",
            "--floor-probe",
            "300ms",
        ],
    );
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    let floor = err
        .find("host timing floor: wake-up p50 ")
        .unwrap_or_else(|| panic!("{err}"));
    let coarse = err
        .find("the host's timing floor (wake-up p99 ")
        .unwrap_or_else(|| panic!("a 20 µs sim is below any host's floor: {err}"));
    assert!(
        floor < coarse && err[coarse..].contains("(0.020 ms)"),
        "{err}"
    );
    let m = RunDir::open(&run).manifest().expect("manifest");
    let f = m.host.timing_floor.expect("timing floor in the manifest");
    // 300 ms of a probe every 2 ms.
    assert!((100..=151).contains(&f.count), "{f:?}");
    assert!(f.p50 <= f.p99 && f.p99 <= f.max && f.p50 > 0, "{f:?}");
    // Then a fifth of the probe's 300 ms on the lanes' grid (80 µs / 2 lanes, or / 1 on a
    // single CPU): each wake-up costs some CPU, and no wake-up comes before its grid point.
    assert!(err.contains("a timer wake-up costs "), "{err}");
    let w = m.host.wake_cost.expect("wake cost in the manifest");
    assert!([40_000, 80_000].contains(&w.period_ns), "{w:?}");
    assert!(
        w.wakes > 0 && w.wakes <= 60_000_000 / w.period_ns + 1,
        "{w:?}"
    );
    assert!(
        w.cpu_ns_per_wake > 0 && w.wall_ns_per_wake >= w.period_ns,
        "{w:?}"
    );
    let s = RunDir::open(&run).summary().expect("summary");
    assert!(
        s.notices
            .iter()
            .any(|n| n.starts_with("the host's timing floor")),
        "{:?}",
        s.notices
    );
    let run = dir.path().join("none");
    let o = quick_sim_logged(
        &run,
        &[
            "--sim-latency",
            "default=constant:1ms",
            "--floor-probe",
            "0s",
        ],
    );
    ok(&o);
    let m = RunDir::open(&run).manifest().expect("manifest");
    assert!(
        m.host.timing_floor.is_none() && m.host.wake_cost.is_none(),
        "{:?}",
        m.host
    );
}
