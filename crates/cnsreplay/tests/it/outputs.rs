//! Outputs that never lose data (`cnsreplay::output`): an output that is an input is refused
//! with the input intact, a bad input leaves no output (and an older output untouched), and a
//! command killed mid-write (SIGINT, SIGKILL) leaves nothing under the output's name. Also the
//! exit codes, the same for every command: 1 for an input with problems, 2 for a command that
//! could not run.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::{BAD, QUICK, cnsreplay, s, workspace};

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs_err::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// `trace rewrite|slice|merge` and `convert` writing over their input — by the same path, a
/// symbolic link or a hard link — are refused before anything is written, naming both; the
/// input keeps every byte and no temporary file is left.
#[test]
fn an_output_that_is_an_input_is_refused_and_the_input_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let original = fs_err::read(workspace().join(QUICK)).expect("read quickstart");
    let a = d.join("a.yaml");
    fs_err::write(&a, &original).expect("write");
    std::os::unix::fs::symlink(&a, d.join("sym.yaml")).expect("symlink");
    fs_err::hard_link(&a, d.join("hard.yaml")).expect("hard link");
    let other = d.join("other.yaml");
    fs_err::write(&other, &original).expect("write");
    for out in ["a.yaml", "sym.yaml", "hard.yaml"] {
        let out = d.join(out);
        let cases: [Vec<&str>; 5] = [
            vec!["trace", "rewrite", s(&a), "-o", s(&out), "--speed", "2"],
            vec!["trace", "slice", s(&a), "--start", "1s", "-o", s(&out)],
            vec!["trace", "merge", s(&other), s(&a), "-o", s(&out)],
            vec!["convert", s(&a), "-o", s(&out)],
            vec!["synth", "fit", s(&a), "-o", s(&out)],
        ];
        for args in cases {
            let o = cnsreplay(&args);
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
            assert!(
                err.contains(&format!("refusing to write {}", out.display()))
                    && err.contains(&format!("it is the input {}", a.display())),
                "{args:?}: {err}"
            );
            assert_eq!(
                fs_err::read(&a).expect("read"),
                original,
                "{args:?}: the input changed"
            );
            assert_eq!(
                names(d),
                ["a.yaml", "hard.yaml", "other.yaml", "sym.yaml"],
                "{args:?}"
            );
        }
    }
    // Another name is written as before.
    let o = cnsreplay(&[
        "trace",
        "rewrite",
        s(&a),
        "-o",
        s(&d.join("b.yaml")),
        "--speed",
        "2",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// A trace whose eighth line does not decode, after six good events: each tool has written
/// some of its output when it meets it. The tools exit 1 (the input has problems), leave no
/// output and no temporary file, and an output from before keeps its content.
#[test]
fn a_bad_input_leaves_no_output_and_an_older_one_untouched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let bad = workspace().join(BAD);
    let quick = workspace().join(QUICK);
    let old = d.join("old.jsonl");
    fs_err::write(&old, "finished earlier\n").expect("write");
    let new = d.join("new.jsonl");
    let cases: [Vec<&str>; 4] = [
        vec!["trace", "rewrite", s(&bad), "--speed", "2"],
        vec!["trace", "slice", s(&bad), "--start", "0s"],
        vec!["trace", "merge", s(&quick), s(&bad)],
        vec!["convert", s(&bad)],
    ];
    for args in cases {
        for out in [&new, &old] {
            let mut a = args.clone();
            a.extend(["-o", s(out)]);
            let o = cnsreplay(&a);
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(1), "{a:?}: {err}");
            // Every tool checks what it reads: it stops at the input's first semantic
            // problem (event 5 uses a deleted volume), before the parse error of line 8.
            let located = if args[1] == "merge" {
                "three-problems.jsonl, prefix \"t2-\"): events[13].attach"
            } else {
                "three-problems.jsonl:6: events[4].attach.volumes[0]: volume \"pvc-7\" was deleted"
            };
            assert!(err.contains(located), "{a:?}: {err}");
            assert_eq!(names(d), ["old.jsonl"], "{a:?}");
            assert_eq!(
                fs_err::read_to_string(&old).expect("read"),
                "finished earlier\n",
                "{a:?}"
            );
        }
    }
    // `trace split` writes a directory of parts: none is left, nor the directory it made.
    let parts = d.join("parts");
    let o = cnsreplay(&["trace", "split", s(&bad), "-o", s(&parts)]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(!parts.exists(), "{:?}", names(d));
}

/// Starts `cnsreplay ARGS` in `dir` reading `fifo`, sends a trace's header and first events
/// into it and waits until the command has its temporary output open: it is mid-way.
fn start_mid_way(
    dir: &Path,
    fifo: &Path,
    args: &[&str],
    out: &str,
) -> (std::process::Child, PathBuf, fs_err::File) {
    let _ = fs_err::remove_file(fifo);
    assert!(
        Command::new("mkfifo")
            .arg(fifo)
            .status()
            .expect("mkfifo")
            .success()
    );
    let child = Command::new(env!("CARGO_BIN_EXE_cnsreplay"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run cnsreplay");
    let mut w = fs_err::OpenOptions::new()
        .write(true)
        .open(fifo)
        .expect("open FIFO");
    writeln!(w, r#"{{"format":"cnsreplay-trace","version":1}}"#).expect("header");
    for i in 0..1000 {
        writeln!(w, r#"{{"at":{i},"id":{i},"marker":{{"name":"m"}}}}"#).expect("event");
    }
    w.flush().expect("flush");
    let partial = dir.join(format!("{out}.partial-{}", child.id()));
    let t0 = Instant::now();
    while !partial.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no {}",
            partial.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    (child, partial, w)
}

/// `trace rewrite|slice|merge` interrupted mid-way: SIGINT removes the temporary file and
/// exits 130; after SIGKILL only `OUT.partial-PID` is left, never a file under the output's
/// name, and the next command writing that output removes it.
#[test]
fn a_killed_trace_tool_leaves_no_output() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    fs_err::copy(workspace().join(QUICK), d.join("q.yaml")).expect("copy");
    let fifo = d.join("in.jsonl");
    let tools: [&[&str]; 3] = [
        &[
            "trace",
            "rewrite",
            "in.jsonl",
            "--speed",
            "2",
            "-o",
            "out.jsonl",
        ],
        &[
            "trace",
            "slice",
            "in.jsonl",
            "--start",
            "0s",
            "-o",
            "out.jsonl",
        ],
        &["trace", "merge", "q.yaml", "in.jsonl", "-o", "out.jsonl"],
    ];
    for args in tools {
        // SIGINT: nothing is left.
        let (mut child, partial, w) = start_mid_way(d, &fifo, args, "out.jsonl");
        let killed = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .expect("kill -INT");
        assert!(killed.success());
        let status = child.wait().expect("wait");
        drop(w);
        assert_eq!(status.code(), Some(130), "{args:?}: 128 + SIGINT");
        assert!(!partial.exists(), "{args:?}: the temporary file is removed");
        assert_eq!(names(d), ["in.jsonl", "q.yaml"], "{args:?}");

        // SIGKILL: the output's name is free; the temporary file says what it is.
        let (mut child, partial, w) = start_mid_way(d, &fifo, args, "out.jsonl");
        child.kill().expect("SIGKILL");
        child.wait().expect("wait");
        drop(w);
        assert!(!d.join("out.jsonl").exists(), "{args:?}");
        assert!(partial.exists(), "{args:?}");
        // The next writer of out.jsonl removes the dead process's temporary file.
        let o = Command::new(env!("CARGO_BIN_EXE_cnsreplay"))
            .args(["trace", "rewrite", "q.yaml", "-o", "out.jsonl"])
            .current_dir(d)
            .output()
            .expect("run cnsreplay");
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert_eq!(names(d), ["in.jsonl", "out.jsonl", "q.yaml"], "{args:?}");
        fs_err::remove_file(d.join("out.jsonl")).expect("remove");
    }
}

/// "The input has problems" exits 1 from every command that reads a trace, also when the
/// problem is one the command meets while reading (it used to be 2 for the trace tools); a
/// command that cannot run (a missing file) exits 2.
#[test]
fn exit_codes_are_the_same_for_every_command() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let out = d.join("out.jsonl");
    let (bad, missing) = (workspace().join(BAD), d.join("missing.jsonl"));
    let run_dir = d.join("run");
    let commands = |t: &Path| -> Vec<Vec<String>> {
        let (t, o, r) = (s(t), s(&out), s(&run_dir));
        [
            vec!["validate", t],
            vec!["stats", t],
            vec!["convert", t, "-o", o],
            vec!["trace", "rewrite", t, "-o", o],
            vec!["trace", "slice", t, "--start", "0s", "-o", o],
            vec!["trace", "merge", QUICK, t, "-o", o],
            vec!["trace", "split", t, "-o", r],
            vec!["run", t, "--provider", "sim", "-o", r],
            vec!["sweep", t, "--provider", "sim", "--speeds", "1", "-o", r],
        ]
        .into_iter()
        .map(|v| v.into_iter().map(str::to_owned).collect())
        .collect()
    };
    for (input, code) in [(&bad, 1), (&missing, 2)] {
        for args in commands(input) {
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            let o = cnsreplay(&a);
            assert_eq!(o.status.code(), Some(code), "{a:?}: {}", stderr(&o));
            assert!(
                stderr(&o).contains(s(input)) || !o.stdout.is_empty(),
                "{a:?}"
            );
            assert!(!out.exists() && !run_dir.exists(), "{a:?}");
        }
    }
}
