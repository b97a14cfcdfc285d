//! JSON outputs checked against the committed `docs/schemas/` with a validator that is not
//! ours (Python's `jsonschema`).

use std::path::PathBuf;
use std::process::Command;

use super::cli::workspace;

/// A Python with the `jsonschema` package: the readers' venv (scripts/install-py-readers.sh)
/// or the system's `python3`; `None` (and a note) when neither has it, a failure with
/// `CNSREPLAY_REQUIRE_PY=1`.
pub(crate) fn python_with_jsonschema() -> Option<PathBuf> {
    let venv = std::env::var_os("CNSREPLAY_PY_VENV").map_or_else(
        || {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/cnsreplay/venv")
        },
        PathBuf::from,
    );
    let found = [venv.join("bin/python"), PathBuf::from("python3")]
        .into_iter()
        .find(|py| {
            Command::new(py)
                .args(["-c", "import jsonschema"])
                .output()
                .is_ok_and(|o| o.status.success())
        });
    assert!(
        found.is_some() || std::env::var_os("CNSREPLAY_REQUIRE_PY").is_none_or(|v| v != "1"),
        "CNSREPLAY_REQUIRE_PY=1 but no Python with jsonschema: run scripts/install-py-readers.sh"
    );
    found
}

/// Validates a command's JSON output against the committed `docs/schemas/NAME.schema.json`
/// with Python's `jsonschema` (a validator that is not ours: draft 2020-12, formats off as
/// the specification has them by default); the failure names each violation and its path.
#[allow(clippy::print_stdout)]
pub(crate) fn assert_matches_schema(json: &[u8], name: &str) {
    let Some(py) = python_with_jsonschema() else {
        println!("skipped: no Python with jsonschema to validate {name}");
        return;
    };
    let schema = workspace().join(format!("docs/schemas/{name}.schema.json"));
    let dir = tempfile::tempdir().expect("tempdir");
    let doc = dir.path().join("out.json");
    fs_err::write(&doc, json).expect("write json");
    let o = Command::new(py)
        .args([
            "-c",
            "import json, sys, jsonschema\n\
             schema = json.load(open(sys.argv[1]))\n\
             doc = json.load(open(sys.argv[2]))\n\
             v = jsonschema.Draft202012Validator(schema)\n\
             errs = [f'{list(e.absolute_path)}: {e.message}' for e in v.iter_errors(doc)]\n\
             print('\\n'.join(errs))\n\
             sys.exit(1 if errs else 0)",
        ])
        .arg(&schema)
        .arg(&doc)
        .output()
        .expect("python");
    assert!(
        o.status.success(),
        "{name} output does not match {}:\n{}{}",
        schema.display(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}
