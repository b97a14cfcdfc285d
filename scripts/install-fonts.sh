#!/usr/bin/env bash
# Installs a sans-serif font (Debian package `fonts-dejavu-core`) for `analyze report --png`,
# whose pure-Rust rasterizer (resvg) draws the figures' text with the system's fonts.
# Idempotent: does nothing when a TrueType/OpenType font is already installed. Needs root (apt-get).
set -euo pipefail
for dir in /usr/share/fonts /usr/local/share/fonts "$HOME/.local/share/fonts" "$HOME/.fonts"; do
    if [ -d "$dir" ] && find "$dir" -type f \( -name '*.ttf' -o -name '*.otf' -o -name '*.ttc' \) -print -quit | grep -q .; then
        exit 0
    fi
done
export DEBIAN_FRONTEND=noninteractive
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends fonts-dejavu-core >/dev/null
test -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf
