//! `iogen`'s exit codes follow `cnsreplay`'s table (README, Exit codes): 2 the command could
//! not run (usage, a missing file or target directory), 1 the input has problems (a trace or
//! phase that does not parse, a log that is not an ordered-write log) or the check said no.
//! A gate scripting `iogen` tells "fix the input" from "fix the machine" by them.

use std::path::Path;
use std::process::{Command, Output};

fn iogen(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_iogen"))
        .args(args)
        .output()
        .expect("run iogen")
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Asserts `args` exits `code`, saying which class of bad input it stands for.
fn expect(code: i32, class: &str, args: &[&str]) {
    let o = iogen(args);
    assert_eq!(
        o.status.code(),
        Some(code),
        "iogen {} ({class}) must exit {code}: {}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn every_class_of_bad_input_exits_as_the_table_says() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let missing_dir = d.join("no-such-dir");
    let target = missing_dir.join("t.dat");
    let bad_trace = d.join("bad.jsonl");
    fs_err::write(
        &bad_trace,
        "{\"format\":\"cnsreplay-trace\",\"version\":1,\"provenance\":{\"generator\":\"t\"}}\n\
         {\"at\":0,\"id\":1,\"attach\":{\"workload\":\"w\",\"volumes\":[]},\"colour\":1}\n",
    )
    .expect("write");
    let not_a_log = d.join("w.log");
    fs_err::write(&not_a_log, "garbage\n").expect("write");
    let t = d.join("t.dat");
    fs_err::write(&t, vec![0u8; 1 << 20]).expect("write");

    // Usage: clap's own 2.
    expect(2, "usage", &["run", "--no-such-flag"]);
    expect(2, "usage", &["verify", "--target", s(&t)]);
    // A file or target that is not there: the command could not run.
    expect(
        2,
        "missing target directory",
        &["run", "--target", s(&target), "--size", "1m", "--ios", "10"],
    );
    let missing_log = d.join("missing.log");
    expect(
        2,
        "missing log",
        &["verify", "--log", s(&missing_log), "--target", s(&t)],
    );
    // Inputs with problems.
    expect(
        1,
        "a trace that does not parse",
        &["phase", s(&bad_trace), "--target", s(&t)],
    );
    expect(
        1,
        "a phase snippet with an unknown field",
        &[
            "phase",
            "{\"volume\":\"v\",\"rw\":\"nonsense\"}",
            "--target",
            s(&t),
        ],
    );
    expect(
        1,
        "not an ordered-write log",
        &["verify", "--log", s(&not_a_log), "--target", s(&t)],
    );
}
