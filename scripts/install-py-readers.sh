#!/usr/bin/env bash
# Installs real third-party readers of `analyze export` files for the export test: pandas with
# pyarrow (CSV and Parquet) and the duckdb package, jsonschema (validates --json outputs
# against docs/schemas in the CLI tests), junitparser (reads the --junit outputs as a CI's
# JUnit reporter would) and markdown-it-py (renders the --markdown outputs as CommonMark with
# GFM tables), into a venv under
# $HOME/.cache/cnsreplay/venv (the test looks there; override with CNSREPLAY_PY_VENV).
# Idempotent: does nothing when the venv already imports all six. Needs python3 with venv
# (Debian: python3-venv, installed here with apt-get when missing) and access to PyPI.
set -euo pipefail
VENV="${CNSREPLAY_PY_VENV:-$HOME/.cache/cnsreplay/venv}"
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import pandas, pyarrow, duckdb, jsonschema, junitparser, markdown_it' 2>/dev/null; then
    exit 0
fi
if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then
        SUDO="sudo"
    fi
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
fi
mkdir -p "$(dirname "$VENV")"
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
"$VENV/bin/python" -m pip install -q --disable-pip-version-check pandas pyarrow duckdb jsonschema junitparser markdown-it-py
"$VENV/bin/python" -c 'import pandas, pyarrow, duckdb, jsonschema, junitparser, markdown_it'
