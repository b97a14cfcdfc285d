#!/usr/bin/env bash
# Installs headless Chromium (Debian package `chromium`) for the `analyze report` rendering test.
# Idempotent: does nothing when `chromium` is already on PATH. Needs root (apt-get).
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
command -v chromium >/dev/null
