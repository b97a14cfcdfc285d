"""Reads `cargo test --no-run --message-format=json` on stdin; prints one line per test
executable: the package folder, package name, target name and executable path, tab-separated,
in cargo's order. scripts/test.sh runs the cluster tests' binaries from it in two lanes."""
import json
import os
import sys

for line in sys.stdin:
    try:
        msg = json.loads(line)
    except json.JSONDecodeError:
        continue
    if msg.get("reason") != "compiler-artifact" or not msg.get("profile", {}).get("test"):
        continue
    exe = msg.get("executable")
    if not exe:
        continue
    pkg_dir = os.path.dirname(msg["manifest_path"])
    name = msg["target"]["name"]
    pkg = os.path.basename(pkg_dir)
    print(f"{pkg_dir}\t{pkg}\t{name}\t{exe}")
