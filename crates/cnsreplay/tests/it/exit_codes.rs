//! The README's exit-code table, enforced: every command on a bad input of each class it
//! reads — a usage error, a missing file, a trace (or model, data file, import input) that
//! does not parse, a run directory with a malformed record — exits with the table's code
//! for that class. A gate scripting cnsreplay acts on these codes (`analyze compare`'s 1 is
//! "regression": a run it cannot read must not look like one), so a command that drifts
//! from the table fails here, naming the command, the class and what it printed.
//!
//! Fast by construction: two sim runs of five 1 ms attaches are the only replays; every
//! other invocation stops at its input. (`iogen`'s own table test is in crates/iogen.)

use std::path::{Path, PathBuf};

use super::{cnsreplay, ok, s};

/// A class of bad input, and the code the README's table gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// An unknown flag, a missing argument: clap's usage error.
    Usage,
    /// An input file or run directory that is not there (or an output directory that
    /// cannot be created).
    Missing,
    /// A trace that does not parse (an unknown field), also as a synth model or fit data.
    BadTrace,
    /// An import input with problems (a line that is not JSON, a compressed stream that
    /// does not decode, an audit log without a storage request to import).
    BadImport,
    /// A run directory with a malformed record (`events.jsonl`, `ledger.jsonl`,
    /// `manifest.json`).
    CorruptRun,
}

impl Class {
    /// The table's code: 2 the command could not run, 1 the input has problems.
    fn code(self) -> i32 {
        match self {
            Class::Usage | Class::Missing => 2,
            Class::BadTrace | Class::BadImport | Class::CorruptRun => 1,
        }
    }
}

/// The inputs every case draws from, in one temporary directory.
struct Fixtures {
    dir: tempfile::TempDir,
    ok: PathBuf,
    bad: PathBuf,
    run: PathBuf,
    /// `run`'s copy with line 2 of 5 of `events.jsonl` cut mid-record (not the last line: a
    /// torn last line is a crash's, and allowed).
    bad_events: PathBuf,
    /// `run`'s copy whose `manifest.json` is not JSON.
    bad_manifest: PathBuf,
    /// `run`'s copy whose ledger has a malformed first line.
    bad_ledger: PathBuf,
    /// A sweep directory whose one point is `bad_events`.
    bad_sweep: PathBuf,
}

impl Fixtures {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        let header =
            r#"{"format":"cnsreplay-trace","version":1,"provenance":{"generator":"test"}}"#;
        let mut text = format!("{header}\n");
        for i in 0..5u64 {
            text.push_str(&format!(
                "{{\"at\":{},\"id\":{},\"attach\":{{\"workload\":\"w{i}\",\"volumes\":[]}}}}\n",
                i * 1_000_000,
                i + 1
            ));
        }
        let ok_trace = d.join("ok.jsonl");
        fs_err::write(&ok_trace, text).expect("write trace");
        let bad = d.join("bad.jsonl");
        fs_err::write(
            &bad,
            format!(
                "{header}\n{}\n",
                r#"{"at":0,"id":1,"attach":{"workload":"w","volumes":[]},"colour":1}"#
            ),
        )
        .expect("write trace");
        let run = d.join("run");
        ok(&cnsreplay(&[
            "-q",
            "run",
            s(&ok_trace),
            "--provider",
            "sim",
            "--sim-latency",
            "attach=constant:1ms",
            "-o",
            s(&run),
        ]));
        let copy = |name: &str| {
            let to = d.join(name);
            copy_dir(&run, &to);
            to
        };
        let bad_events = copy("bad-events");
        let events = bad_events.join("events.jsonl");
        let lines: Vec<String> = fs_err::read_to_string(&events)
            .expect("events")
            .lines()
            .enumerate()
            .map(|(i, l)| {
                if i == 1 {
                    l[..l.len() / 2].to_owned()
                } else {
                    l.to_owned()
                }
            })
            .collect();
        assert_eq!(lines.len(), 5, "five records: {lines:?}");
        fs_err::write(&events, lines.join("\n") + "\n").expect("write events");
        let bad_manifest = copy("bad-manifest");
        fs_err::write(bad_manifest.join("manifest.json"), "{\"tool\":").expect("write");
        let bad_ledger = copy("bad-ledger");
        fs_err::write(
            bad_ledger.join("ledger.jsonl"),
            "{\"op\":\n{\"op\":\"create\",\"kind\":\"image\",\"id\":\"a\"}\n",
        )
        .expect("write ledger");
        let bad_sweep = d.join("sweep");
        copy_dir(&bad_events, &bad_sweep.join("1"));
        Self {
            dir,
            ok: ok_trace,
            bad,
            run,
            bad_events,
            bad_manifest,
            bad_ledger,
            bad_sweep,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

fn copy_dir(from: &Path, to: &Path) {
    fs_err::create_dir_all(to).expect("mkdir");
    for e in fs_err::read_dir(from).expect("read_dir") {
        let e = e.expect("entry");
        let dest = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            fs_err::copy(e.path(), &dest).expect("copy");
        }
    }
}

/// A gzip stream cut short, and a zstd one with its body overwritten: import inputs whose
/// compression does not decode.
fn broken_compressed(dir: &Path) -> (PathBuf, PathBuf) {
    let line = br#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","stage":"ResponseComplete","verb":"get"}"#;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, &line.repeat(50)).expect("gzip");
    let gz = gz.finish().expect("gzip");
    let gz_path = dir.join("audit.log.gz");
    fs_err::write(&gz_path, &gz[..gz.len() / 2]).expect("write");
    let mut zst = zstd::encode_all(&line.repeat(50)[..], 3).expect("zstd");
    for b in zst.iter_mut().skip(8) {
        *b = 0xAB;
    }
    let zst_path = dir.join("audit.log.zst");
    fs_err::write(&zst_path, &zst).expect("write");
    (gz_path, zst_path)
}

#[test]
fn every_command_exits_as_the_table_says_for_each_class_of_bad_input() {
    use Class::{BadImport, BadTrace, CorruptRun, Missing, Usage};
    let f = Fixtures::new();
    let out = |name: &str| f.path(name).to_str().expect("utf-8").to_owned();
    let missing = out("no-such-dir/missing.jsonl");
    let missing_run = out("no-such-run");
    let (ok_t, bad) = (s(&f.ok).to_owned(), s(&f.bad).to_owned());
    let run = s(&f.run).to_owned();
    let (ev, mf, lg) = (
        s(&f.bad_events).to_owned(),
        s(&f.bad_manifest).to_owned(),
        s(&f.bad_ledger).to_owned(),
    );
    let slo = f.path("qos.yaml");
    fs_err::write(&slo, "tenants:\n  t:\n    p99: 5ms\n").expect("write");
    let slo = s(&slo).to_owned();
    let not_json = f.path("audit.log");
    fs_err::write(
        &not_json,
        "{\"kind\":\"Event\",\"apiVersion\":\"audit.k8s.io/v1\",\"stage\":\"ResponseComplete\"}\n\
         {\"kind\":\"Event\", broken\n",
    )
    .expect("write");
    let not_json = s(&not_json).to_owned();
    let (gz, zst) = broken_compressed(f.dir.path());
    let (gz, zst) = (s(&gz).to_owned(), s(&zst).to_owned());
    let sim = ["--provider", "sim", "--sim-latency", "attach=constant:1ms"];

    // (class, expected code, command line). The expected code is the class's unless the
    // table says otherwise for the command (compare: 2 for any run it cannot read).
    let mut cases: Vec<(Class, i32, Vec<String>)> = Vec::new();
    let mut add = |class: Class, args: &[&str]| {
        cases.push((
            class,
            class.code(),
            args.iter().map(|a| (*a).to_owned()).collect(),
        ));
    };
    // Trace readers.
    for cmd in [&["validate"][..], &["stats"]] {
        add(Usage, &[cmd, &["--no-such-flag", &ok_t]].concat());
        add(Missing, &[cmd, &[missing.as_str()]].concat());
        add(BadTrace, &[cmd, &[bad.as_str()]].concat());
    }
    let o = out("o.jsonl");
    for cmd in [
        &["convert"][..],
        &["trace", "slice", "--start", "0s", "--end", "1s"],
        &["trace", "rewrite", "--speed", "2"],
    ] {
        add(Usage, &[cmd, &["--no-such-flag", &ok_t, "-o", &o]].concat());
        add(Missing, &[cmd, &[missing.as_str(), "-o", &o]].concat());
        add(BadTrace, &[cmd, &[bad.as_str(), "-o", &o]].concat());
    }
    add(
        BadImport,
        &["convert", "--from", "k8s-audit", &not_json, "-o", &o],
    );
    add(
        BadImport,
        &["convert", "--from", "auto", &not_json, "-o", &o],
    );
    // An audit log with events but no storage request: nothing to import.
    let quiet = f.path("quiet.log");
    fs_err::write(
        &quiet,
        "{\"kind\":\"EventList\",\"items\":[{\"kind\":\"Event\",\"stage\":\"ResponseComplete\",\
         \"verb\":\"get\",\"requestReceivedTimestamp\":\"2024-01-01T00:00:00Z\"}]}\n",
    )
    .expect("write");
    add(
        BadImport,
        &["convert", "--from", "k8s-audit", s(&quiet), "-o", &o],
    );
    add(
        BadImport,
        &["convert", "--from", "k8s-audit", &gz, "-o", &o],
    );
    add(
        BadImport,
        &["convert", "--from", "k8s-audit", &zst, "-o", &o],
    );
    add(Usage, &["trace", "merge", &ok_t, "-o", &o]);
    add(Missing, &["trace", "merge", &missing, &ok_t, "-o", &o]);
    add(BadTrace, &["trace", "merge", &bad, &ok_t, "-o", &o]);
    let parts = out("parts");
    add(Usage, &["trace", "split", &ok_t]);
    add(Missing, &["trace", "split", &missing, "-o", &parts]);
    add(BadTrace, &["trace", "split", &bad, "-o", &parts]);
    // Replays: the trace is checked before anything runs.
    let r = out("r");
    add(
        Usage,
        &[&["run", &ok_t, "--no-such-flag"][..], &sim].concat(),
    );
    add(Missing, &[&["run", &missing, "-o", &r][..], &sim].concat());
    add(BadTrace, &[&["run", &bad, "-o", &r][..], &sim].concat());
    let sw = out("sw");
    add(Usage, &[&["sweep", &ok_t, "-o", &sw][..], &sim].concat());
    add(
        Missing,
        &[&["sweep", &missing, "--speeds", "1", "-o", &sw][..], &sim].concat(),
    );
    add(
        BadTrace,
        &[&["sweep", &bad, "--speeds", "1", "-o", &sw][..], &sim].concat(),
    );
    let cap = out("cap");
    let slo_arg = ["--slo", "attach p99<=1s", "-o", &cap];
    add(
        Usage,
        &[&["capacity", &ok_t, "--slo", "attach"][..], &sim].concat(),
    );
    add(
        Missing,
        &[&["capacity", &missing][..], &slo_arg, &sim].concat(),
    );
    add(
        BadTrace,
        &[&["capacity", &bad][..], &slo_arg, &sim].concat(),
    );
    // Synth: a model and fit data are inputs like a trace.
    let so = out("s.jsonl");
    add(Usage, &["synth", "--no-such-flag"]);
    add(Missing, &["synth", &out("no-such-model.yaml"), "-o", &so]);
    add(BadTrace, &["synth", &bad, "-o", &so]);
    add(Usage, &["synth", "fit"]);
    add(Missing, &["synth", "fit", &out("no-such-data.csv")]);
    add(BadTrace, &["synth", "fit", &bad]);
    // Run directories.
    let mr = out("merged");
    add(Usage, &["merge-runs", &run, "-o", &mr]);
    add(Missing, &["merge-runs", &run, &missing_run, "-o", &mr]);
    // A corrupt part's manifest (a copy with corrupt records is the same run: refused as
    // such, exit 2, before its records are read).
    add(CorruptRun, &["merge-runs", &run, &mf, "-o", &mr]);
    add(Usage, &["cleanup", &run, "--no-such-flag"]);
    add(Missing, &["cleanup", &missing_run]);
    add(CorruptRun, &["cleanup", &lg]);
    add(Usage, &["analyze", "summary"]);
    add(Missing, &["analyze", "summary", &missing_run]);
    add(CorruptRun, &["analyze", "summary", &ev]);
    add(CorruptRun, &["analyze", "summary", &mf]);
    add(Usage, &["analyze", "capacity"]);
    add(Missing, &["analyze", "capacity", &missing_run]);
    add(CorruptRun, &["analyze", "capacity", s(&f.bad_sweep)]);
    add(Usage, &["analyze", "qos", &run]);
    add(
        Missing,
        &["analyze", "qos", &missing_run, "--slo-file", &slo],
    );
    add(Missing, &["analyze", "qos", &run, "--slo-file", &missing]);
    add(CorruptRun, &["analyze", "qos", &mf, "--slo-file", &slo]);
    let html = out("report.html");
    add(Usage, &["analyze", "report", &run]);
    add(Missing, &["analyze", "report", &missing_run, "-o", &html]);
    add(CorruptRun, &["analyze", "report", &ev, "-o", &html]);
    let csv = out("x.csv");
    add(Usage, &["analyze", "export", &run]);
    add(Missing, &["analyze", "export", &missing_run, "--csv", &csv]);
    add(CorruptRun, &["analyze", "export", &ev, "--csv", &csv]);
    // Commands without inputs.
    add(Usage, &["completions", "no-such-shell"]);
    add(Usage, &["man", "--no-such-flag"]);
    // (A --dir that is not there is created; one that cannot be is "could not run".)
    add(Missing, &["man", "--dir", "/proc/no-such-dir"]);
    // compare: 1 is a regression and nothing else; a run it cannot read is "could not run".
    add(Usage, &["analyze", "compare", &run]);
    add(Missing, &["analyze", "compare", &run, "--", &missing_run]);
    for c in [
        vec!["analyze", "compare", &run, "--", &ev],
        vec!["analyze", "compare", &ev, "--", &run],
        vec!["analyze", "compare", &run, "--", &mf],
    ] {
        cases.push((CorruptRun, 2, c.into_iter().map(str::to_owned).collect()));
    }

    let mut wrong = Vec::new();
    for (class, want, args) in &cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = cnsreplay(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        if o.status.code() != Some(*want) {
            wrong.push(format!(
                "cnsreplay {} ({class:?}): exit {:?}, the table says {want}: {}",
                args.join(" "),
                o.status.code(),
                err.lines().take(3).collect::<Vec<_>>().join(" / ")
            ));
        } else if err.trim().is_empty() && o.stdout.is_empty() {
            wrong.push(format!(
                "cnsreplay {} ({class:?}): exit {want} without a word of why",
                args.join(" ")
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} command lines exit off the table:\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    );
}
