//! The first lines of the traces tests write by hand (`docs/trace-format.md`).

/// The header line of a JSON Lines trace (version 1) with `members` added: JSON object
/// members, comma separated, e.g. `"volumes":[{"name":"d0"}]`; `""` for none.
pub fn jsonl_header(members: &str) -> String {
    if members.is_empty() {
        r#"{"format":"cnsreplay-trace","version":1}"#.to_owned()
    } else {
        format!(r#"{{"format":"cnsreplay-trace","version":1,{members}}}"#)
    }
}

/// The start of a YAML trace (version 1), up to and with `events:`, its top-level keys
/// `sections` between (each a whole line or lines, e.g. `"volumes: [{name: v1}]\n"`).
pub fn yaml_header(sections: &str) -> String {
    format!("format: cnsreplay-trace\nversion: 1\n{sections}events:\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_what_the_format_reads() {
        assert_eq!(
            jsonl_header(""),
            r#"{"format":"cnsreplay-trace","version":1}"#
        );
        assert_eq!(
            jsonl_header(r#""volumes":[]"#),
            r#"{"format":"cnsreplay-trace","version":1,"volumes":[]}"#
        );
        let v: serde_json::Value = serde_json::from_str(&jsonl_header(r#""a":1"#)).unwrap();
        assert_eq!(v["version"], 1);
        assert_eq!(
            yaml_header("volumes: []\n"),
            "format: cnsreplay-trace\nversion: 1\nvolumes: []\nevents:\n"
        );
    }
}
