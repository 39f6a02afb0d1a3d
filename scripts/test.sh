#!/usr/bin/env bash
# Install everything (into .venv) and run lint, type checks and the whole test suite
# against the machine's Postgres (CONNECT_TEST_PG_URL, default
# postgresql://postgres@127.0.0.1:5432/postgres) and real spark-submit.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash scripts/bootstrap.sh
# shellcheck source=scripts/_checks.sh
. scripts/_checks.sh
check_test_pg || exit 1
export SPARK_LOCAL_IP=127.0.0.1
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/lint-imports
.venv/bin/pytest "$@"
