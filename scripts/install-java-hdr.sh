#!/usr/bin/env bash
# Java and HdrHistogram's own HistogramLogProcessor, for the test that checks iogen's interval
# logs with the reader that defines the format (crates/iogen/tests/it/hist.rs). Installs a
# headless JRE from Debian when `java` is missing and downloads the jar from Maven Central
# into $HOME/.cache/cnsreplay/java, checked against its published SHA-1.
set -euo pipefail
need=()
java -version >/dev/null 2>&1 || need+=(default-jre-headless)
command -v curl >/dev/null 2>&1 || need+=(curl ca-certificates)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
dir=$HOME/.cache/cnsreplay/java
jar=$dir/HdrHistogram-2.2.2.jar
sha1=7959933ebcc0f05b2eaa5af0a0c8689fa257b15c
mkdir -p "$dir"
if ! echo "$sha1  $jar" | sha1sum -c --status 2>/dev/null; then
  curl -sSfL -o "$jar.part" \
    https://repo1.maven.org/maven2/org/hdrhistogram/HdrHistogram/2.2.2/HdrHistogram-2.2.2.jar
  echo "$sha1  $jar.part" | sha1sum -c --status || { echo "HdrHistogram jar: SHA-1 mismatch" >&2; exit 1; }
  mv "$jar.part" "$jar"
fi
echo "$jar"
