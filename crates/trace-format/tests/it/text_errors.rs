//! Text decoding errors: YAML and JSON Lines name the line and the field.

use trace_format::check::check_trace;
use trace_format::*;

fn yaml_problems(y: &str) -> Vec<String> {
    let r = TraceReader::from_reader(
        std::io::Cursor::new(y.as_bytes().to_vec()),
        Some(Encoding::Yaml),
        "t.yaml",
    );
    match r {
        Err(e) => vec![e.to_string()],
        Ok(r) => check_trace(r, "t.yaml", 100, |_| {})
            .unwrap()
            .diagnostics
            .iter()
            .map(ToString::to_string)
            .collect(),
    }
}

#[test]
fn yaml_reports_lines_and_goes_on_after_a_bad_event() {
    let y = "format: cnsreplay-trace\nversion: 1\nevents:\n  - {at: 0, create_volume: {volume: a}}\n  - {at: 1s, attach: {workload: w, volumes: [b]}}\n  - at: 2s\n    detach: {workload: w, extra: 1}\n  - {at: 3s, delete_volume: {volume: a}}\n";
    assert_eq!(
        yaml_problems(y),
        [
            r#"t.yaml:5: events[1].attach.volumes[0]: volume "b" does not exist"#,
            "t.yaml:6: events[2].detach.extra: unknown field `extra`, expected `workload`",
        ]
    );
}

#[test]
fn yaml_ids_are_numbered_when_left_out() {
    let y = "format: cnsreplay-trace\nversion: 1\nevents:\n  - {at: 0, marker: {name: a}}\n  - {at: 0, id: 7, marker: {name: b}}\n  - {at: 0, marker: {name: c}}\n";
    let t = Trace::from_bytes(y.as_bytes(), None).unwrap();
    let ids: Vec<u64> = t.events.iter().map(|e| e.id).collect();
    assert_eq!(ids, [0, 7, 8]);
}

#[test]
fn yaml_header_after_events_and_syntax_errors() {
    let y = "format: cnsreplay-trace\nversion: 1\nevents: []\ndefaults: {}\n";
    let p = yaml_problems(y);
    assert_eq!(p.len(), 1);
    assert!(p[0].contains("`defaults` comes after `events`"), "{p:?}");
    let p = yaml_problems("format: cnsreplay-trace\nversion: 1\nevents:\n  - {at: [\n");
    assert_eq!(p.len(), 1);
    assert!(p[0].starts_with("t.yaml:"), "{p:?}");
}

#[test]
fn header_problems() {
    let p = yaml_problems("format: something-else\nversion: 1\n");
    assert_eq!(
        p,
        [
            r#"t.yaml: header.format: not a cnsreplay trace: format is "something-else", expected "cnsreplay-trace""#
        ]
    );
    let j = r#"{"format":"cnsreplay-trace","version":4}"#;
    let e = Trace::from_bytes(j.as_bytes(), None)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "<memory>:1: header.version: format version 4 is newer than this reader supports (3); upgrade cnsreplay"
    );
    let j = r#"{"format":"cnsreplay-trace","version":1,"defaults":{"volume_size":"1GB"}}"#;
    let e = Trace::from_bytes(j.as_bytes(), None)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("<memory>:1: header.defaults.volume_size"),
        "{e}"
    );
    assert!(e.contains(r#""1GB" is not a byte quantity"#), "{e}");
}

#[test]
fn jsonl_event_errors() {
    let j = concat!(
        r#"{"format":"cnsreplay-trace","version":1}"#,
        "\n",
        "\n",
        r#"{"at":0,"id":1}"#,
        "\n",
        r#"{"at":0,"id":2,"marker":{"name":"a"},"detach":{"workload":"w"}}"#,
        "\n",
        r#"{"at":-1,"id":3,"marker":{"name":"a"}}"#,
        "\n",
        r#"{"at":0,"id":4,"marker":{"name":"a"}"#,
        "\n",
    );
    let r = TraceReader::from_reader(std::io::Cursor::new(j.as_bytes().to_vec()), None, "t.jsonl")
        .unwrap();
    let got: Vec<String> = r.filter_map(Result::err).map(|e| e.to_string()).collect();
    assert_eq!(got.len(), 4, "{got:#?}");
    assert!(
        got[0].starts_with("t.jsonl:3: events[0]") && got[0].contains("event has no operation"),
        "{}",
        got[0]
    );
    assert!(
        got[1].starts_with("t.jsonl:4: events[1]")
            && got[1].contains("two operations, `marker` and `detach`"),
        "{}",
        got[1]
    );
    assert!(
        got[2].starts_with("t.jsonl:5: events[2].at")
            && got[2].contains("invalid value: integer `-1`"),
        "{}",
        got[2]
    );
    assert!(
        got[3].starts_with("t.jsonl:6: events[3]") && got[3].contains("EOF while parsing"),
        "{}",
        got[3]
    );
}
