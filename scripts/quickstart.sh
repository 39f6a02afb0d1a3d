#!/usr/bin/env bash
# The main job: the seed's file quickstart (file -> topic -> file) on the embedded
# Postgres and local Spark, in $CONNECT_HOME/quickstart. Installs everything on first use.
# Run it again: it appends a line to the source file and copies only that one.
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
# The seed's three lines once, then one new line per run: each run copies only what is new.
[ -f test-source-file.txt ] || printf 'Hello \r\nRocketMQ\r\n Connect\n' > test-source-file.txt
printf 'synced at %s\n' "$(date -u +%FT%T.%NZ)" >> test-source-file.txt

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
