//! The trace tools read a trace as `validate` does: a trace with a problem is refused with the
//! located problem (exit 1) and nothing is written, unless `--no-check`. `trace split` by
//! lineage, with `--parts N`. `convert --to`: only writable formats, and no empty fio iolog.

use std::path::Path;
use std::process::Output;

use trace_format::{Op, Trace};

use super::{cnsreplay, s, workspace};

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

const HEAD: &str = "format: cnsreplay-trace\nversion: 1\nevents:\n  - {at: 0s, create_volume: {volume: a}}\n  - {at: 1s, create_volume: {volume: b}}\n";

/// Three traces with one problem each, on the fourth event (line 7), and what `validate`
/// says of it.
fn bad_traces(d: &Path) -> Vec<(std::path::PathBuf, &'static str)> {
    [
        (
            "deleted.yaml",
            "  - {at: 2s, delete_volume: {volume: a}}\n  - {at: 3s, io: {volume: a, kind: read, offset: 0, len: 4096}}\n",
            "deleted.yaml:7: events[3].io.volume: volume \"a\" was deleted at t=2s",
        ),
        (
            "unknown.yaml",
            "  - {at: 2s, io: {volume: b, kind: read, offset: 0, len: 4096}}\n  - {at: 3s, snapshot: {volume: nope, snapshot: s}}\n",
            "unknown.yaml:7: events[3].snapshot.volume: volume \"nope\" does not exist",
        ),
        (
            "order.yaml",
            "  - {at: 5s, marker: {name: m1}}\n  - {at: 4s, io: {volume: b, kind: read, offset: 0, len: 4096}}\n",
            "order.yaml:7: events[3].at: events out of time order: at=4s is before the previous event's at=5s",
        ),
    ]
    .into_iter()
    .map(|(name, tail, msg)| {
        let p = d.join(name);
        fs_err::write(&p, format!("{HEAD}{tail}  - {{at: 9s, marker: {{name: end}}}}\n"))
            .expect("write");
        (p, msg)
    })
    .collect()
}

/// `trace rewrite`, `slice` (a window, `--busiest`, and a window that ends before the
/// problem: the rest is still checked), `split` and `convert` (to a trace, to fio) refuse a
/// trace with an operation on a deleted volume, on an unknown volume, or an event out of time
/// order, as `validate` does: exit 1, the located problem, nothing written. `--no-check`
/// writes what it reads, except an event out of time order in a slice, which it cannot shift:
/// an error, never dropped.
#[test]
fn trace_tools_refuse_what_validate_refuses_and_write_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let out = d.join("out");
    fs_err::create_dir(&out).expect("mkdir");
    for (bad, msg) in bad_traces(d) {
        let o = cnsreplay(&["validate", s(&bad)]);
        assert_eq!(o.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&o.stdout).contains(msg), "{o:?}");
        let (t, o_yaml, o_parts) = (s(&bad), out.join("o.yaml"), out.join("parts"));
        let (oy, op, oi) = (s(&o_yaml), s(&o_parts), out.join("o.iolog"));
        let cases: Vec<Vec<&str>> = vec![
            vec!["trace", "rewrite", t, "-o", oy, "--speed", "2"],
            vec!["trace", "slice", t, "--start", "1s", "-o", oy],
            vec!["trace", "slice", t, "--end", "1500ms", "-o", oy],
            vec!["trace", "slice", t, "--busiest", "1s", "-o", oy],
            vec!["trace", "split", t, "-o", op, "--parts", "2"],
            vec!["convert", t, "-o", s(&o_yaml)],
            vec!["convert", t, "-o", s(&oi), "--to", "fio-iolog"],
        ];
        for args in &cases {
            let o = cnsreplay(args);
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
            assert!(err.contains(msg), "{args:?}: {err}");
            assert_eq!(names(&out), Vec::<String>::new(), "{args:?}");
        }
        // Checked already, says the user: written as read.
        for args in [&cases[0], &cases[5]] {
            let mut a = args.clone();
            a.push("--no-check");
            let o = cnsreplay(&a);
            assert_eq!(o.status.code(), Some(0), "{a:?}: {}", stderr(&o));
            fs_err::remove_file(&o_yaml).expect("written");
        }
    }
    // An event out of time order in the window: even unchecked, an error naming it.
    let order = d.join("order.yaml");
    let o = cnsreplay(&[
        "trace",
        "slice",
        s(&order),
        "--start",
        "4500ms",
        "-o",
        s(&out.join("o.yaml")),
        "--no-check",
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(
            "events[3].at: events out of time order: at=4s is before the previous event's at=5s"
        ),
        "{err}"
    );
    assert_eq!(names(&out), Vec::<String>::new());
}

/// The events (ids) of a trace but its markers, and its markers.
fn ids(t: &Trace) -> (Vec<u64>, Vec<u64>) {
    let (m, e): (Vec<_>, Vec<_>) = t.events.iter().partition(|e| matches!(e.op, Op::Marker(_)));
    (
        e.iter().map(|e| e.id).collect(),
        m.iter().map(|e| e.id).collect(),
    )
}

/// The short Experiment 2 trace (its tenant-less volumes are the default namespace's, its
/// attaches tenant `db`'s, so a split by tenant would be refused) splits by lineage into two
/// parts that each validate and together hold every event but the markers exactly once, the
/// markers in both; the report says how and why.
#[test]
fn experiment2_splits_by_lineage_into_two_valid_parts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let parts = dir.path().join("parts");
    // Relative: the commands run in the workspace, and the report names the input as given.
    let rel = "traces/experiment2-short.yaml";
    let trace = workspace().join(rel);
    let o = cnsreplay(&[
        "trace",
        "split",
        rel,
        "--parts",
        "2",
        "-o",
        s(&parts),
        "--to",
        "jsonl",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout).replace(s(&parts), "PARTS");
    insta::assert_snapshot!("split_experiment2_by_lineage", text);
    assert_eq!(names(&parts), ["part-1.jsonl", "part-2.jsonl"]);
    let whole = Trace::read(&trace).expect("read");
    let (want, markers) = ids(&whole);
    let mut got = Vec::new();
    for p in ["part-1.jsonl", "part-2.jsonl"] {
        let path = parts.join(p);
        let v = cnsreplay(&["validate", s(&path)]);
        assert_eq!(v.status.code(), Some(0), "{p}: {v:?}");
        let (e, m) = ids(&Trace::read(&path).expect("read part"));
        assert!(!e.is_empty(), "{p} is empty");
        assert_eq!(m, markers, "{p}: markers");
        got.extend(e);
    }
    got.sort_unstable();
    assert_eq!(got, want, "every event but the markers exactly once");
    // The same as JSON, with the reason.
    let parts2 = dir.path().join("parts2");
    let o = cnsreplay(&[
        "trace",
        "split",
        s(&trace),
        "--parts",
        "2",
        "-o",
        s(&parts2),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(r["by"], "lineage", "{r}");
    assert_eq!(r["units"], 5, "{r}");
    assert!(
        r["reason"]
            .as_str()
            .is_some_and(|x| x.starts_with("the tenants share objects: volume \"db-0\"")),
        "{r}"
    );
    super::assert_matches_schema(&o.stdout, "trace-split");
}

/// Splits that cannot do what was asked say so: by lineage without `--parts` (exit 2, with
/// how many lineages there are), more parts than lineages (exit 1, why), and one part (exit
/// 0, a warning on stderr and in the JSON report).
#[test]
fn a_split_that_cannot_split_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let exp2 = workspace().join("traces/experiment2-short.yaml");
    let o = cnsreplay(&["trace", "split", s(&exp2), "-o", s(&d.join("a"))]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("a split by lineage needs the number of parts (--parts N): the trace has 5 lineages with events"),
        "{}",
        stderr(&o)
    );
    let group = workspace().join("traces/group-snapshot.yaml");
    let o = cnsreplay(&[
        "trace",
        "split",
        s(&group),
        "--parts",
        "2",
        "-o",
        s(&d.join("b")),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o)
            .contains("cannot make 2 parts: all 36 events that name an object are one lineage"),
        "{}",
        stderr(&o)
    );
    let o = cnsreplay(&[
        "trace",
        "split",
        s(&group),
        "--parts",
        "1",
        "-o",
        s(&d.join("c")),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let want = "one part: nothing was split (by lineage: one part was asked for)";
    assert!(stderr(&o).contains(want), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(r["warnings"][0], want, "{r}");
    assert!(!d.join("a").exists() && !d.join("b").exists());
}

/// `convert --to fio-iolog` of a trace without `io` events is refused (exit 2: the trace is
/// valid, there is just nothing to export; nothing written), and `--to` offers only what
/// convert can write.
#[test]
fn convert_refuses_an_empty_fio_export_and_offers_only_writable_formats() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("q.iolog");
    let quick = workspace().join(super::QUICK);
    let o = cnsreplay(&["convert", s(&quick), "-o", s(&out), "--to", "fio-iolog"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(
            "no `io` event to export as a fio iolog (21 events, none a single I/O request"
        ),
        "{}",
        stderr(&o)
    );
    assert!(!out.exists());
    let o = cnsreplay(&["convert", s(&quick), "-o", s(&out), "--to", "msr"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("[possible values: yaml, jsonl, binary, fio-iolog]"),
        "{}",
        stderr(&o)
    );
}

/// A convert that fails writes nothing, and says where the input has its problem.
#[test]
fn failed_convert_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.cnsbin");
    // The checker stops it at the first semantic problem; unchecked, the decoder at the
    // first undecodable event.
    for (check, located) in [
        (None, "three-problems.jsonl:6: events[4].attach.volumes[0]"),
        (
            Some("--no-check"),
            "three-problems.jsonl:8: events[6].snapshot.colour",
        ),
    ] {
        let mut args = vec!["convert", super::BAD, "-o", out.to_str().expect("utf-8")];
        args.extend(check);
        let o = cnsreplay(&args);
        assert_eq!(o.status.code(), Some(1));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(located), "{err}");
        assert_eq!(
            fs_err::read_dir(dir.path()).expect("dir").count(),
            0,
            "no output, no temp file"
        );
    }
}
