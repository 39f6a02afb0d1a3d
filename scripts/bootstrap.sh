#!/usr/bin/env bash
# Create .venv (once) and install the project with everything it needs.
# Needs only Python 3.11 (or 3.12) and Java 17 on the machine. Idempotent: a second run
# only checks that the install is current.
set -euo pipefail
cd "$(dirname "$0")/.."

# The machine first, each problem in one line (scripts/_checks.sh): before anything is installed.
# shellcheck source=scripts/_checks.sh
. scripts/_checks.sh
choose_python || exit 1
check_venv || exit 1
check_java || exit 1

# The UI test drives a real browser: Debian's chromium (Playwright's own download is not used).
if [ "${CONNECT_SKIP_CHROMIUM:-0}" != 1 ] && ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "bootstrap: installing chromium (apt) for the UI test"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "bootstrap: chromium is missing; install Debian's chromium package for the UI test" >&2
  fi
fi

# JDBC drivers of the JDBC connectors: Debian's packages put them in /usr/share/java
# (or point a connector's `connection.jar` at your own).
if [ ! -f /usr/share/java/postgresql.jar ] || [ ! -f /usr/share/java/mariadb-java-client.jar ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "bootstrap: installing the PostgreSQL and MariaDB JDBC drivers (apt)"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libpostgresql-jdbc-java libmariadb-java >/dev/null
  else
    echo "bootstrap: JDBC drivers missing: apt-get install libpostgresql-jdbc-java libmariadb-java" >&2
  fi
fi

# pip's output goes to a log: on failure, one line with its last error and where the rest is.
pip_log=.venv/bootstrap-pip.log
pip_quietly() {
  if ! .venv/bin/python -m pip "$@" >"$pip_log" 2>&1; then
    door "pip failed: $(grep -E '^ERROR' "$pip_log" | tail -n 1 | cut -c1-300) (all of it: $pip_log; check the network or proxy, then run again)"
    exit 1
  fi
}

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
  pip_quietly install --quiet --upgrade pip
fi

stamp=.venv/.installed-$(cat pyproject.toml requirements/constraints.txt | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  echo "bootstrap: installing connect-core and its dependencies into .venv (first run takes a few minutes)"
  pip_quietly install --quiet -c requirements/constraints.txt -e ".[airflow,dev]"
  rm -f .venv/.installed-*
  touch "$stamp"
fi

# The Spark driver JVM's class-data archive: every spark-submit starts from it, seconds sooner
# (connect_core/runtime/spark/jvm_archive.py). Built once per JVM and Spark install, in ~/.cache.
SPARK_LOCAL_IP=127.0.0.1 .venv/bin/connect spark-archive
