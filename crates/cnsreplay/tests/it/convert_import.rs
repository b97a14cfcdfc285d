//! `convert --from FORMAT` for every importer: small generated inputs → JSON Lines output
//! snapshots, `--from auto` sniffing, several inputs merged by time, and the `--skip-bad`
//! report.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use import::blk::{Endian, Phase, RawRecord, write_blktrace_fixture};
use trace_format::IoKind;

fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cnsreplay"))
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .output()
        .expect("run cnsreplay")
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    fs_err::write(&p, text).expect("write input");
    p
}

/// Converts `inputs` (names relative to `dir`) and returns the JSON Lines output and stderr.
fn convert(dir: &Path, from: &str, inputs: &[&str], extra: &[&str]) -> (String, String) {
    let mut args = vec!["convert", "--from", from];
    args.extend_from_slice(inputs);
    args.extend_from_slice(&["-o", "out.jsonl"]);
    args.extend_from_slice(extra);
    let o = run(dir, &args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "{err}");
    let out = fs_err::read_to_string(dir.join("out.jsonl")).expect("output");
    let v = run(dir, &["validate", "out.jsonl"]);
    assert_eq!(
        v.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&v.stdout)
    );
    (out, err)
}

const MSR_A: &str =
    "128166372003061629,usr,0,Read,4096,4096,300\n128166372013061629,usr,0,Write,0,8192,250\n";
const MSR_B: &str = "128166372008061629,web,1,Read,1048576,512,120\n";
const ALIBABA: &str =
    "0,R,4096,4096,1577808000000000\n1,W,0,8192,1577808000000010\n0,W,8192,4096,1577808000000020\n";
const TENCENT: &str = "1538323200,8,8,0,1000\n1538323200,16,8,1,1000\n1538323200,0,16,1,1001\n1538323201,8,8,0,1000\n";
const PODS: &str = "name,creation_time,deletion_time,namespace\nweb-1,0,30,shop\nweb-2,10,,shop\nbatch-1,5,6,jobs\n";

#[test]
fn block_csv_imports() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    write(d, "a.csv", MSR_A);
    write(d, "b.csv", MSR_B);
    write(d, "ali.csv", ALIBABA);
    write(
        d,
        "sizes.csv",
        "device_id,capacity\n0,1073741824\n1,2147483648\n",
    );
    write(d, "tencent.csv", TENCENT);
    insta::assert_snapshot!(
        "msr_two_files",
        convert(d, "msr", &["a.csv", "b.csv"], &[]).0
    );
    insta::assert_snapshot!(
        "alibaba_device_sizes",
        convert(d, "alibaba", &["ali.csv"], &["--device-sizes", "sizes.csv"]).0
    );
    insta::assert_snapshot!("tencent", convert(d, "tencent", &["tencent.csv"], &[]).0);
}

#[test]
fn fio_blkparse_blktrace_imports() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    write(d, "job.iolog", &import::testgen::fio_v3(3));
    write(d, "trace.blkparse", &import::testgen::blkparse(3));
    let recs = [
        RawRecord::request(Phase::Issue, 0, 1_000, (8, 16), IoKind::Write, 2048, 4096),
        RawRecord::request(Phase::Issue, 1, 2_000, (8, 16), IoKind::Read, 64, 8192),
        RawRecord::request(
            Phase::Complete,
            0,
            51_000,
            (8, 16),
            IoKind::Write,
            2048,
            4096,
        ),
        RawRecord::request(Phase::Complete, 1, 90_000, (8, 16), IoKind::Read, 64, 8192),
    ];
    write_blktrace_fixture(d, "sda", &recs, Endian::Little).expect("blktrace files");
    insta::assert_snapshot!("fio", convert(d, "fio-iolog", &["job.iolog"], &[]).0);
    insta::assert_snapshot!(
        "blkparse",
        convert(d, "blkparse", &["trace.blkparse"], &[]).0
    );
    // The NAME prefix and any one per-CPU file find the same files.
    let by_prefix = convert(d, "blktrace", &["sda"], &[]).0;
    let by_file = convert(d, "blktrace", &["sda.blktrace.1"], &[]).0;
    assert_eq!(
        by_prefix.lines().skip(1).collect::<Vec<_>>(),
        by_file.lines().skip(1).collect::<Vec<_>>()
    );
    insta::assert_snapshot!("blktrace", by_prefix);
    // One stream of every CPU's records (`blktrace -o -`), on stdin, in a file of another
    // name, or gzipped through a pipe, imports the same events, its CPUs named.
    let mut stream = Vec::new();
    for r in &recs {
        stream.extend(r.encode(Endian::Little));
    }
    let o = run_with_stdin(
        d,
        &["convert", "--from", "blktrace", "-", "-o", "stdin.jsonl"],
        &stream,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let from_stdin = fs_err::read_to_string(d.join("stdin.jsonl")).expect("output");
    assert_eq!(events_of(&from_stdin), events_of(&by_prefix));
    assert!(
        from_stdin.contains(r#""source_files":["<stdin> (CPU 0)","<stdin> (CPU 1)"]"#),
        "{from_stdin}"
    );
    fs_err::write(d.join("trace.bin"), &stream).expect("write");
    let (from_file, err) = convert(d, "blktrace", &["trace.bin"], &[]);
    assert_eq!(events_of(&from_file), events_of(&by_prefix), "{err}");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, &stream).expect("gzip");
    fs_err::write(d.join("trace.bin.gz"), gz.finish().expect("gzip")).expect("write");
    let (from_gz, err) = convert(d, "blktrace", &["trace.bin.gz"], &[]);
    assert_eq!(events_of(&from_gz), events_of(&by_prefix), "{err}");
}

#[test]
fn audit_and_pod_imports() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    // Two halves of one log, merged by time.
    let log = import::testgen::audit_log(2);
    let lines: Vec<&str> = log.lines().collect();
    let (a, b) = lines.split_at(lines.len() / 2);
    write(d, "audit-1.log", &(b.join("\n") + "\n"));
    write(d, "audit-2.log", &(a.join("\n") + "\n"));
    let (out, err) = convert(d, "k8s-audit", &["audit-1.log", "audit-2.log"], &[]);
    insta::assert_snapshot!("k8s_audit", out);
    insta::assert_snapshot!("k8s_audit_report", err);
    write(d, "pods.csv", PODS);
    insta::assert_snapshot!("pod_csv", convert(d, "pod-csv", &["pods.csv"], &[]).0);
}

/// A real API server's log can hold no storage request at all (reads, status patches, config
/// maps): the importer says so with the count it read, instead of blaming the format.
#[test]
fn an_audit_log_without_storage_requests_is_named_as_such() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    // Only the noise of the generated log: the node's own requests.
    let noise: Vec<String> = import::testgen::audit_log_with_noise(2, 30)
        .lines()
        .filter(|l| l.contains("system:node:node-0"))
        .map(str::to_owned)
        .collect();
    assert_eq!(noise.len(), 60);
    write(d, "quiet.log", &(noise.join("\n") + "\n"));
    for from in ["k8s-audit", "auto"] {
        let o = run(
            d,
            &["convert", "--from", from, "quiet.log", "-o", "o.jsonl"],
        );
        let err = String::from_utf8_lossy(&o.stderr);
        // A problem of the import input (exit 1), not a command that could not run.
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(
            err.contains(
                "quiet.log: no storage requests (PVC/pod/snapshot) found in 60 audit events: \
                 nothing to import"
            ),
            "{err}"
        );
        assert!(!err.contains("no k8s-audit event was found"), "{err}");
        assert!(!d.join("o.jsonl").exists());
    }
}

#[test]
fn auto_sniffs_every_format_and_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let recs = [RawRecord::request(
        Phase::Issue,
        0,
        1_000,
        (8, 0),
        IoKind::Read,
        0,
        4096,
    )];
    write_blktrace_fixture(d, "x", &recs, Endian::Big).expect("blktrace");
    // A pretty-printed AKS export: `{` alone on the first line.
    let events: Vec<String> = import::testgen::audit_log(2)
        .lines()
        .map(str::to_owned)
        .collect();
    let aks = format!(
        "{{\n  \"records\": [\n    {}\n  ]\n}}\n",
        events.join(",\n    ")
    );
    for (name, text, want) in [
        ("aks.json", aks, "k8s-audit"),
        ("j.iolog", import::testgen::fio_v3(1), "fio-iolog"),
        ("p.txt", import::testgen::blkparse(1), "blkparse"),
        ("m.csv", MSR_A.to_owned(), "msr"),
        ("a.csv", ALIBABA.to_owned(), "alibaba"),
        ("t.csv", TENCENT.to_owned(), "tencent"),
        ("k.log", import::testgen::audit_log(1), "k8s-audit"),
        ("pods.csv", PODS.to_owned(), "pod-csv"),
    ] {
        write(d, name, &text);
        let (_, err) = convert(d, "auto", &[name], &[]);
        assert!(
            err.contains(&format!("{name}: format {want} (sniffed)")),
            "{err}"
        );
    }
    // A per-CPU file is recognised as its set (see below); one stream is sniffed.
    let (_, err) = convert(d, "auto", &["x.blktrace.0"], &[]);
    assert!(
        err.contains("x.blktrace.0: detected blktrace: the per-CPU files x.blktrace.0 (1 file, 1 with records)"),
        "{err}"
    );
    fs_err::copy(d.join("x.blktrace.0"), d.join("x.stream")).expect("copy");
    let (_, err) = convert(d, "auto", &["x.stream"], &[]);
    assert!(err.contains("x.stream: format blktrace (sniffed)"), "{err}");
    assert!(
        err.contains("every record of x.stream is of CPU 0: if it is one file of a per-CPU set"),
        "{err}"
    );
    // Unsure, or inputs that disagree: refused.
    write(d, "what.txt", "hello world\n");
    let o = run(
        d,
        &["convert", "--from", "auto", "what.txt", "-o", "o.jsonl"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot tell the format of what.txt"));
    let o = run(
        d,
        &[
            "convert", "--from", "auto", "m.csv", "a.csv", "-o", "o.jsonl",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("different formats (msr and alibaba)"));
    assert!(!d.join("o.jsonl").exists());
}

#[test]
fn skip_bad_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    write(
        d,
        "bad.csv",
        "128166372003061629,usr,0,Read,4096,4096,300\nnot,a,line\n128166372013061629,usr,0,Frob,0,8192,250\n\
         128166372023061629,usr,0,Write,0,0,1\n128166372033061629,usr,0,Write,0,512,1\n",
    );
    let o = run(
        d,
        &["convert", "--from", "msr", "bad.csv", "-o", "out.jsonl"],
    );
    assert_eq!(o.status.code(), Some(1));
    insta::assert_snapshot!("msr_bad_stops", String::from_utf8_lossy(&o.stderr));
    assert!(!d.join("out.jsonl").exists());
    let (_, err) = convert(d, "msr", &["bad.csv"], &["--skip-bad"]);
    insta::assert_snapshot!("msr_skip_bad_report", err);
}

#[test]
fn import_formats_need_files_and_trace_outputs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    write(d, "m.csv", MSR_A);
    let o = run(
        d,
        &[
            "convert",
            "--from",
            "msr",
            "m.csv",
            "-o",
            "x.iolog",
            "--to",
            "fio-iolog",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    let o = run(
        d,
        &[
            "convert", "--from", "pod-csv", "a.csv", "b.csv", "-o", "x.jsonl",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("pod-csv reads one input"));
}

/// The events of a JSON Lines trace (its lines after the header).
fn events_of(trace: &str) -> Vec<&str> {
    trace.lines().skip(1).collect()
}

/// Runs cnsreplay in `dir` with `input` on its stdin.
fn run_with_stdin(dir: &Path, args: &[&str], input: &[u8]) -> Output {
    use std::io::Write as _;
    let mut child = Command::new(env!("CARGO_BIN_EXE_cnsreplay"))
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run cnsreplay");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("write stdin");
    child.wait_with_output().expect("wait")
}

/// A block import (two passes over its input) from a FIFO, from stdin, and from gzip and zstd
/// files imports the same events as from the plain file; `--from auto` sniffs a compressed
/// file by its content. (A FIFO once gave "imported 0 events" and exit 0: the second pass
/// found it empty.)
#[test]
fn pipes_stdin_and_compressed_inputs_import_like_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    write(d, "a.csv", MSR_A);
    let (plain, _) = convert(d, "msr", &["a.csv"], &[]);
    let want = events_of(&plain);
    assert_eq!(want.len(), 2, "{plain}");

    let fifo = d.join("pipe.csv");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let writer = std::thread::spawn(move || fs_err::write(&fifo, MSR_A).expect("write the FIFO"));
    let (from_fifo, err) = convert(d, "msr", &["pipe.csv"], &[]);
    writer.join().expect("writer");
    assert_eq!(events_of(&from_fifo), want, "{err}");
    assert!(err.contains("imported 2 events"), "{err}");

    let o = run_with_stdin(
        d,
        &["convert", "--from", "msr", "-", "-o", "stdin.jsonl"],
        MSR_A.as_bytes(),
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let from_stdin = fs_err::read_to_string(d.join("stdin.jsonl")).expect("output");
    assert_eq!(events_of(&from_stdin), want);

    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, MSR_A.as_bytes()).expect("gzip");
    fs_err::write(d.join("a.csv.gz"), gz.finish().expect("gzip")).expect("write");
    fs_err::write(
        d.join("a.csv.zst"),
        zstd::encode_all(MSR_A.as_bytes(), 3).expect("zstd"),
    )
    .expect("write");
    for (input, from) in [
        ("a.csv.gz", "msr"),
        ("a.csv.zst", "msr"),
        ("a.csv.gz", "auto"),
    ] {
        let (out, err) = convert(d, from, &[input], &[]);
        assert_eq!(events_of(&out), want, "{input} --from {from}: {err}");
    }

    // The pod lifecycle CSV (one pass) too: stdin and gzip read like the file.
    let pods = "name,creation_time,deletion_time,namespace\na,0,10,ns\nb,5,,ns\n";
    write(d, "pods.csv", pods);
    let (plain, _) = convert(d, "pod-csv", &["pods.csv"], &[]);
    assert_eq!(events_of(&plain).len(), 3, "{plain}");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, pods.as_bytes()).expect("gzip");
    fs_err::write(d.join("pods.csv.gz"), gz.finish().expect("gzip")).expect("write");
    let (from_gz, err) = convert(d, "pod-csv", &["pods.csv.gz"], &[]);
    assert_eq!(events_of(&from_gz), events_of(&plain), "{err}");
    let o = run_with_stdin(
        d,
        &[
            "convert",
            "--from",
            "pod-csv",
            "-",
            "-o",
            "pods-stdin.jsonl",
        ],
        pods.as_bytes(),
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let from_stdin = fs_err::read_to_string(d.join("pods-stdin.jsonl")).expect("output");
    assert_eq!(events_of(&from_stdin), events_of(&plain));
}

/// An import that finds no event in an input with data is an error naming the input, not an
/// empty trace; a truncated compressed input is an error naming it.
#[test]
fn data_without_events_and_broken_compression_are_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    // blkparse's summary section alone: text, no request lines.
    write(
        d,
        "summary.txt",
        "CPU0 (8,0):\n Reads Queued:           0,        0KiB\n",
    );
    let o = run(
        d,
        &[
            "convert",
            "--from",
            "blkparse",
            "summary.txt",
            "-o",
            "x.jsonl",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    // Problems of the import input: exit 1 (the README's table), not "could not run".
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("summary.txt") && err.contains("no blkparse event"),
        "{err}"
    );
    assert!(!d.join("x.jsonl").exists());

    let gz = {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut e, MSR_A.repeat(100).as_bytes()).expect("gzip");
        e.finish().expect("gzip")
    };
    fs_err::write(d.join("cut.csv.gz"), &gz[..gz.len() / 2]).expect("write");
    let o = run(
        d,
        &["convert", "--from", "msr", "cut.csv.gz", "-o", "y.jsonl"],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("cut.csv.gz") && err.contains("Gzip"), "{err}");
}

/// A conversion interrupted by SIGINT leaves neither the output nor its `OUT.partial-PID`
/// file (it used to leave the partial); one left by a process that is gone (SIGKILL) is
/// removed by the next conversion to the same name, and a live process's is not touched.
#[test]
fn an_interrupted_convert_leaves_no_partial_file() {
    use std::io::Write as _;
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    // A trace arriving through a FIFO whose writer sends the header and one event, then
    // stalls: the conversion has its partial output open and waits for more.
    let fifo = d.join("in.jsonl");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo")
            .success()
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_cnsreplay"))
        .args(["convert", "in.jsonl", "-o", "out.cnsbin"])
        .current_dir(d)
        .env("NO_COLOR", "1")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run cnsreplay");
    let mut w = fs_err::OpenOptions::new()
        .write(true)
        .open(&fifo)
        .expect("open FIFO");
    writeln!(w, r#"{{"format":"cnsreplay-trace","version":1}}"#).expect("header");
    writeln!(w, r#"{{"at":0,"id":0,"marker":{{"name":"m"}}}}"#).expect("event");
    w.flush().expect("flush");
    let partial = d.join(format!("out.cnsbin.partial-{}", child.id()));
    let t0 = std::time::Instant::now();
    while !partial.exists() {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(30),
            "no partial file"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(killed.success());
    let status = child.wait().expect("wait");
    drop(w);
    assert_eq!(status.code(), Some(130), "128 + SIGINT");
    assert!(!partial.exists(), "the partial file is removed");
    assert!(!d.join("out.cnsbin").exists());

    // A partial of a gone process is removed by the next conversion; ours (alive) is not.
    write(
        d,
        "t.jsonl",
        "{\"format\":\"cnsreplay-trace\",\"version\":1}\n",
    );
    let gone = d.join("t.cnsbin.partial-4194304"); // above the kernel's largest pid
    let alive = d.join(format!("t.cnsbin.partial-{}", std::process::id()));
    for f in [&gone, &alive] {
        fs_err::write(f, "half").expect("write");
    }
    let o = run(d, &["convert", "t.jsonl", "-o", "t.cnsbin"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!gone.exists() && alive.exists());
}

/// The records of the committed fixture `tests/fixtures/blktrace/mix.blktrace.{0..3}`: 48
/// requests on device 8,16, issued on CPUs 0, 1 and 3 and most completed on another CPU (so
/// one per-CPU file alone pairs few of them), CPU 2 without records (an empty file, as
/// blktrace leaves one).
fn mix_records() -> Vec<RawRecord> {
    let cpus = [0u32, 1, 3];
    let mut recs = Vec::new();
    for i in 0..48u32 {
        let issue_cpu = cpus[i as usize % 3];
        let done_cpu = cpus[(i as usize + usize::from(i % 4 != 0)) % 3];
        let kind = if i % 3 == 0 {
            IoKind::Write
        } else {
            IoKind::Read
        };
        let at = u64::from(i) * 250_000;
        let sector = u64::from(i) * 64;
        let bytes = 4096 << (i % 3);
        recs.push(RawRecord::request(
            Phase::Issue,
            issue_cpu,
            at,
            (8, 16),
            kind,
            sector,
            bytes,
        ));
        recs.push(RawRecord::request(
            Phase::Complete,
            done_cpu,
            at + 90_000 + u64::from(i % 5) * 10_000,
            (8, 16),
            kind,
            sector,
            bytes,
        ));
    }
    recs.sort_by_key(|r| r.time);
    recs
}

/// `--from auto` on one per-CPU file, on all of them (a shell glob) and on their prefix reads
/// the committed fixture exactly as `--from blktrace` does, and says what it detected. The
/// fixture is what the repo's blktrace writer makes of `mix_records` (checked byte for byte;
/// `CNSREPLAY_WRITE_FIXTURES=1` writes it).
#[test]
fn auto_reads_a_blktrace_per_cpu_set_as_blktrace_does() {
    let fixture = crate::crate_dir().join("tests/fixtures/blktrace");
    let made = if std::env::var("CNSREPLAY_WRITE_FIXTURES").as_deref() == Ok("1") {
        fs_err::create_dir_all(&fixture).expect("mkdir");
        None
    } else {
        Some(tempfile::tempdir().expect("tempdir"))
    };
    let out = made.as_ref().map_or(fixture.as_path(), |m| m.path());
    let files = write_blktrace_fixture(out, "mix", &mix_records(), Endian::Little).expect("write");
    assert_eq!(files.len(), 4);
    for f in &files {
        let name = f.file_name().expect("name");
        assert_eq!(
            fs_err::read(f).expect("made"),
            fs_err::read(fixture.join(name)).expect("committed"),
            "tests/fixtures/blktrace/{} is not what write_blktrace_fixture makes of \
             mix_records(); regenerate it with CNSREPLAY_WRITE_FIXTURES=1",
            name.to_string_lossy()
        );
    }
    let events = auto_reads_per_cpu_set(
        &fixture,
        "mix",
        4,
        "mix.blktrace.0..3 (4 files, 3 with records)",
    );
    assert_eq!(events, 48);
}

/// The same on the real sample `keks.blktrace.0..7` (`../shared`, not in the repo): 1 182
/// events whichever way it is named.
#[test]
#[expect(
    clippy::print_stderr,
    reason = "the skip note when ../shared is absent"
)]
fn auto_reads_the_real_keks_sample_as_blktrace_does() {
    let samples = crate::workspace().join("../shared/trace-samples/blktrace-binary");
    if !samples.exists() {
        crate::require_samples(&samples);
        eprintln!("skipped: {} is absent", samples.display());
        return;
    }
    let events = auto_reads_per_cpu_set(
        &samples,
        "keks",
        8,
        "keks.blktrace.0..7 (8 files, 8 with records)",
    );
    assert_eq!(events, 1182);
}

/// Converts the per-CPU set `dir/BASE.blktrace.{0..n}` with `--from blktrace` (by prefix) and
/// with `--from auto` on its first file, on all files and on the prefix; all must give the
/// same events, and auto must log `detected blktrace … {set}`. Returns the number of events.
fn auto_reads_per_cpu_set(dir: &Path, base: &str, n: u32, set: &str) -> usize {
    let work = tempfile::tempdir().expect("tempdir");
    let d = work.path();
    let s = |p: &Path| p.to_str().expect("utf-8").to_owned();
    let prefix = s(&dir.join(base));
    let all: Vec<String> = (0..n)
        .map(|c| s(&dir.join(format!("{base}.blktrace.{c}"))))
        .collect();
    let (want, _) = convert(d, "blktrace", &[&prefix], &[]);
    let want_events = events_of(&want);
    for (what, inputs) in [
        ("one per-CPU file", vec![all[0].as_str()]),
        ("a glob of them", all.iter().map(String::as_str).collect()),
        ("their prefix", vec![prefix.as_str()]),
    ] {
        let (got, err) = convert(d, "auto", &inputs, &[]);
        assert_eq!(events_of(&got), want_events, "{what}: {err}");
        assert!(
            err.contains("detected blktrace: the per-CPU files") && err.contains(set),
            "{what}: the log must say what was detected ({set}): {err}"
        );
    }
    want_events.len()
}
