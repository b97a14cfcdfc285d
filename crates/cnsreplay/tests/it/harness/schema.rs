//! JSON outputs checked against the committed `docs/schemas/` with a validator that is not
//! ours (Python's `jsonschema`).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::cli::workspace;

/// The Python of the readers' venv (`scripts/install-py-readers.sh`:
/// `$HOME/.cache/cnsreplay/venv`, or `CNSREPLAY_PY_VENV`), whether or not it exists.
pub(crate) fn readers_python() -> PathBuf {
    std::env::var_os("CNSREPLAY_PY_VENV")
        .map_or_else(
            || {
                PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                    .join(".cache/cnsreplay/venv")
            },
            PathBuf::from,
        )
        .join("bin/python")
}

/// A Python with the `jsonschema` package: the readers' venv (scripts/install-py-readers.sh)
/// or the system's `python3`; `None` (and a note) when neither has it, a failure with
/// `CNSREPLAY_REQUIRE_PY=1`.
pub(crate) fn python_with_jsonschema() -> Option<PathBuf> {
    let found = [readers_python(), PathBuf::from("python3")]
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

/// Validates every file of run directory `run` that has a committed schema
/// (`replay::files`: `events.jsonl` and `ledger.jsonl` line by line, `io/ID.ordered.json`,
/// `io/ID.cut.json`, `cbt/ID.json`) with Python's `jsonschema`, as [`assert_matches_schema`]
/// does a command's output; the failure names each file, line and violation. Returns how many
/// documents it checked (0 when skipped: no Python with jsonschema).
#[allow(clippy::print_stdout)]
pub(crate) fn assert_run_dir_matches_schemas(run: &Path) -> usize {
    let Some(py) = python_with_jsonschema() else {
        println!(
            "skipped: no Python with jsonschema to validate {}",
            run.display()
        );
        return 0;
    };
    let o = Command::new(py)
        .args([
            "-c",
            "import glob, json, os, sys, jsonschema\n\
             schemas, run = sys.argv[1], sys.argv[2]\n\
             kinds = [('events.jsonl', 'run-dir-events', True),\n\
                      ('ledger.jsonl', 'run-dir-ledger', True),\n\
                      ('io/*.ordered.json', 'run-dir-ordered', False),\n\
                      ('io/*.cut.json', 'run-dir-cut', False),\n\
                      ('cbt/*.json', 'run-dir-cbt', False)]\n\
             errs, n = [], 0\n\
             for pattern, name, lines in kinds:\n\
             \x20   v = jsonschema.Draft202012Validator(\n\
             \x20       json.load(open(os.path.join(schemas, name + '.schema.json'))))\n\
             \x20   for path in sorted(glob.glob(os.path.join(run, pattern))):\n\
             \x20       text = open(path).read()\n\
             \x20       docs = [l for l in text.splitlines() if l] if lines else [text]\n\
             \x20       for i, doc in enumerate(docs):\n\
             \x20           n += 1\n\
             \x20           where = f'{path}:{i + 1}' if lines else path\n\
             \x20           errs += [f'{where} ({name}): {list(e.absolute_path)}: {e.message}'\n\
             \x20                    for e in v.iter_errors(json.loads(doc))]\n\
             print(n)\n\
             print('\\n'.join(errs))\n\
             sys.exit(1 if errs else 0)",
        ])
        .arg(workspace().join("docs/schemas"))
        .arg(run)
        .output()
        .expect("python");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "files of {} do not match their schemas:\n{out}{}",
        run.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    let checked = out.lines().next().and_then(|l| l.parse().ok()).unwrap_or(0);
    assert!(checked > 0, "no file of {} to check", run.display());
    checked
}
