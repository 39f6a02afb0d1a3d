#!/usr/bin/env bash
# The main job: the seed's file quickstart (file -> topic -> file) on the embedded
# Postgres and local Spark. Installs everything on first use. Run it again: it
# appends new lines to the source file and copies only those.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
CONNECT_SKIP_CHROMIUM=1 bash "$root/scripts/bootstrap.sh"  # the main job needs no browser
export PATH="$root/.venv/bin:$PATH"
export CONNECT_HOME="${CONNECT_HOME:-$root/.connect}"
export SPARK_LOCAL_IP=127.0.0.1

work="$CONNECT_HOME/quickstart"
mkdir -p "$work"
cd "$work"
cp "$root"/examples/quickstart/file-*.json .
printf 'Hello \r\nRocketMQ\r\n Connect\nsynced at %s\n' "$(date -u +%FT%TZ)" >> test-source-file.txt

connect put fileSourceConnector --config file-source.json
connect put fileSinkConnector --config file-sink.json
connect run fileSourceConnector
connect run fileSinkConnector

echo
echo "=== $work/test-sink-file.txt"
cat test-sink-file.txt
echo
connect status fileSourceConnector
connect status fileSinkConnector
