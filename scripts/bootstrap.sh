#!/usr/bin/env bash
# Create .venv (once) and install the project with everything it needs.
# Needs only Python 3.11 and Java 17 on the machine. Idempotent: a second run
# only checks that the install is current.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
command -v java >/dev/null 2>&1 || { echo "bootstrap: Java 17+ is required for Spark (apt-get install openjdk-17-jre-headless)" >&2; exit 1; }

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
fi

stamp=.venv/.installed-$(cat pyproject.toml requirements/constraints.txt | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  echo "bootstrap: installing connect-core and its dependencies into .venv (first run takes a few minutes)"
  .venv/bin/python -m pip install --quiet -c requirements/constraints.txt -e ".[airflow,dev]"
  rm -f .venv/.installed-*
  touch "$stamp"
fi
