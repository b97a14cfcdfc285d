#!/usr/bin/env bash
# Installs what testenv's real kubelet node needs from Debian's packages: runc (containerd's
# OCI runtime), docker-registry (the image registry on 127.0.0.1 the node pulls from),
# musl-tools (musl-gcc: the C parts of the static cnsreplay in its image, ring and zstd) and
# busybox-static (the static busybox of local-path-provisioner's helper image, testenv/images.sh).
# Idempotent: does nothing when all four are on PATH. Needs root (apt-get).
set -euo pipefail
need=()
command -v runc >/dev/null 2>&1 || need+=(runc)
command -v docker-registry >/dev/null 2>&1 || need+=(docker-registry)
command -v musl-gcc >/dev/null 2>&1 || need+=(musl-tools)
command -v busybox >/dev/null 2>&1 || need+=(busybox-static)
[ ${#need[@]} -gt 0 ] || exit 0
export DEBIAN_FRONTEND=noninteractive
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
# The package starts its own registry service (port 5000, htpasswd auth) where an init system
# runs; testenv starts a registry of its own, so stop that one when it is running.
if command -v service >/dev/null 2>&1 && [ -x /etc/init.d/docker-registry ]; then
    $SUDO service docker-registry stop >/dev/null 2>&1 || true
fi
command -v runc >/dev/null && command -v docker-registry >/dev/null && command -v musl-gcc >/dev/null &&
    command -v busybox >/dev/null
