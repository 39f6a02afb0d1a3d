#!/usr/bin/env bash
# Install everything (into .venv) and run lint, type checks and the whole test suite
# against the machine's Postgres (CONNECT_TEST_PG_URL, default
# postgresql://postgres@127.0.0.1:5432/postgres) and real spark-submit.
#
# Every test's time goes to test-artifacts/junit.xml (pytest's JUnit XML report), and the slowest
# 30 tests and test files to test-artifacts/durations.txt (python -m connect_core.testing.durations),
# also when tests fail. The folder is gitignored; CI keeps it as the run's artifact.
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
artifacts="$root/test-artifacts"
mkdir -p "$artifacts"
status=0
# CONNECT_TEST_WORKERS=2: two pytest-xdist workers, each test sent to whichever is free, each with
# the session's servers (Spark, Postgres, MariaDB) of its own (28 min against 44 on 2 cores). Not the
# default yet: the Airflow UI test's waits time out when both workers run spark-submits at once.
.venv/bin/pytest -n "${CONNECT_TEST_WORKERS:-0}" --dist load --junitxml="$artifacts/junit.xml" "$@" || status=$?
if .venv/bin/python -m connect_core.testing.durations "$artifacts/junit.xml" --top 30 >"$artifacts/durations.txt"; then
  echo "test.sh: the slowest tests are in test-artifacts/durations.txt" >&2
fi
exit "$status"
