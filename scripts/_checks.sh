# The machine checks of scripts/bootstrap.sh (sourced from the checkout's root). Each says what is
# wrong and what to do in one line on stderr, and returns non-zero; none installs anything.

# pyproject.toml's `requires-python = ">=3.X,<3.Y"`: the one place that says which Pythons fit.
_py_range=$(sed -n 's/^requires-python *= *">=3\.\([0-9]*\), *<3\.\([0-9]*\)".*/\1 \2/p' pyproject.toml)
PY_MIN_MINOR=${_py_range% *}
PY_END_MINOR=${_py_range#* }
JAVA_MIN=17  # Spark 4's minimum
JAVA_INSTALL="apt-get install openjdk-17-jre-headless"

door() { echo "bootstrap: $*" >&2; }

# Runs a version probe (`"$@"`) bounded by PROBE_SECONDS (coreutils `timeout`): a command that hangs
# ends the check with one line instead of hanging bootstrap. Exit 124 when it timed out.
PROBE_SECONDS=${PROBE_SECONDS:-30}
probe() { timeout "$PROBE_SECONDS" "$@"; }

# The Pythons that fit, in words: "3.11 or 3.12".
python_versions_wanted() {
  local minor words=""
  for ((minor = PY_MIN_MINOR; minor < PY_END_MINOR; minor++)); do
    words="${words:+$words or }3.$minor"
  done
  echo "$words"
}

# `3.11` for a working Python (a command or a path), nothing for anything else (only the first
# line counts: a wrapper may print more). Exit 124 when it did not answer within PROBE_SECONDS.
python_version() {
  local said code=0
  said=$(probe "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || code=$?
  printf '%s\n' "$said" | head -n 1 | tr -cd '0-9.'
  return "$code"
}

python_fits() {
  local major=${1%%.*} minor=${1#*.}
  [ "$major" = 3 ] && [ "$minor" -ge "$PY_MIN_MINOR" ] 2>/dev/null && [ "$minor" -lt "$PY_END_MINOR" ]
}

# Sets PYTHON to a Python that fits: $PYTHON when given (and it must fit), else the first of
# python3.11, python3.12 … and python3 on PATH that does.
choose_python() {
  local wanted version candidate seen=""
  wanted=$(python_versions_wanted)
  if [ -n "${PYTHON:-}" ]; then
    if [[ "$PYTHON" == */* ]] && [ -e "$PYTHON" ] && { [ -d "$PYTHON" ] || [ ! -x "$PYTHON" ]; }; then
      door "PYTHON=$PYTHON is not executable: point PYTHON at a Python $wanted (e.g. PYTHON=python3.$PY_MIN_MINOR)"
      return 1
    fi
    if ! command -v "$PYTHON" >/dev/null 2>&1; then
      door "PYTHON=$PYTHON is not found: point PYTHON at a Python $wanted (e.g. PYTHON=python3.$PY_MIN_MINOR)"
      return 1
    fi
    local code=0
    version=$(python_version "$PYTHON") || code=$?
    if [ "$code" = 124 ]; then
      door "PYTHON=$PYTHON did not answer within $PROBE_SECONDS s: point PYTHON at a Python $wanted that runs (e.g. PYTHON=python3.$PY_MIN_MINOR)"
      return 1
    fi
    if [ -z "$version" ]; then
      local why
      why=$(probe "$PYTHON" -c 'import sys' 2>&1 | head -n 1 | cut -c1-200 | tr -d '\000-\037\177') || true
      door "PYTHON=$PYTHON does not run${why:+ ($why)}: point PYTHON at a Python $wanted (e.g. PYTHON=python3.$PY_MIN_MINOR)"
      return 1
    fi
    if ! python_fits "$version"; then
      door "this project needs Python $wanted, but PYTHON=$PYTHON is Python $version: point PYTHON at a Python $wanted (e.g. PYTHON=python3.$PY_MIN_MINOR)"
      return 1
    fi
    return 0
  fi
  for ((minor = PY_MIN_MINOR; minor < PY_END_MINOR; minor++)); do
    candidate=python3.$minor
    version=$(python_version "$candidate") && python_fits "$version" && { PYTHON=$candidate; return 0; }
  done
  version=$(python_version python3)
  if [ -n "$version" ] && python_fits "$version"; then
    PYTHON=python3
    return 0
  fi
  [ -n "$version" ] && seen=" (python3 is $version)"
  door "this project needs Python $wanted and none is on PATH$seen: install one (apt-get install python3.$PY_MIN_MINOR python3.$PY_MIN_MINOR-venv) or set PYTHON=/path/to/python3.$PY_MIN_MINOR"
  return 1
}

# An existing .venv must have been made by a Python that fits; a new one needs the venv module.
check_venv() {
  local version
  if [ -x .venv/bin/python ]; then
    version=$(python_version .venv/bin/python)
    if [ -z "$version" ] || ! python_fits "$version"; then
      door ".venv was made by Python ${version:-that no longer runs}, and this project needs $(python_versions_wanted): remove it (rm -rf .venv) and run again"
      return 1
    fi
  elif ! probe "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    door "$PYTHON cannot make a virtualenv (no ensurepip): apt-get install python3.$(python_version "$PYTHON" | cut -d. -f2)-venv, then run again"
    return 1
  fi
}

# The Java spark-submit starts ($JAVA_HOME/bin/java, else the one on PATH) must be 17 or newer.
check_java() {
  local java version major
  if [ -n "${JAVA_HOME:-}" ]; then java=$JAVA_HOME/bin/java; else java=$(command -v java || true); fi
  if [ -z "$java" ] || [ ! -x "$java" ]; then
    local where="on PATH"
    [ -n "${JAVA_HOME:-}" ] && where="in JAVA_HOME ($JAVA_HOME)"
    door "Spark needs Java $JAVA_MIN+ and there is no \`java\` $where: $JAVA_INSTALL, or set JAVA_HOME to a JDK"
    return 1
  fi
  local said code=0
  said=$(probe "$java" -version 2>&1) || code=$?
  if [ "$code" = 124 ]; then
    door "\`$java -version\` did not answer within $PROBE_SECONDS s: $JAVA_INSTALL, or set JAVA_HOME to a working JDK"
    return 1
  fi
  # The major version as `connect run` reads it (connect_core/cli/_app.py `java_major`): the digits
  # after the first `version "` ("17.0.2", "25-ea", "17-internal"), after `1.` for Java 8 and older.
  version=$(printf '%s\n' "$said" | sed -n 's/^[^"]*version "\([0-9]\{1,9\}\(\.[0-9]\{1,9\}\)\{0,1\}\).*/\1/p' | head -n 1)
  major=${version%%.*}
  [ "$major" = 1 ] && [ "$version" != 1 ] && major=${version#*.}  # Java 8 and older say "1.8.0"
  if ! [ "${major:-0}" -ge "$JAVA_MIN" ] 2>/dev/null; then
    door "Spark needs Java $JAVA_MIN+ but \`$java\` is Java ${major:-of an unknown version}: $JAVA_INSTALL and put it first on PATH, or set JAVA_HOME to it"
    return 1
  fi
}

# The Postgres the test suite uses (CONNECT_TEST_PG_URL, as tests/conftest.py reads it: empty is
# unset) must answer, before a 20-minute run finds out test by test. Needs the installed .venv.
check_test_pg() {
  .venv/bin/python - "${CONNECT_TEST_PG_URL:-postgresql://postgres@127.0.0.1:5432/postgres}" <<'PY'
import sys

import psycopg2
from sqlalchemy.engine import make_url

from connect_core.runtime.security.limits import one_line
from connect_core.runtime.security.urls import URL_MASK
from connect_core.runtime.store.db import connect_failure, masked_url, url_secrets

url = sys.argv[1]
try:
    parsed = make_url(url)
    libpq_url = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
except Exception:  # not echoed, nor is the error's text: a string that is no URL may be all secret
    sys.exit(
        "test.sh: CONNECT_TEST_PG_URL is not a postgresql:// URL; set it to one, "
        "e.g. postgresql://postgres@127.0.0.1:5432/postgres (a key=value DSN is not read)"
    )
try:
    psycopg2.connect(libpq_url, connect_timeout=3).close()
except Exception as exc:  # whatever it is, it becomes the one line
    reason = connect_failure(exc, url)
    if reason is None:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        for secret in url_secrets(url):
            reason = reason.replace(secret, URL_MASK)
        reason = one_line(reason)
    fix = (
        "set CONNECT_TEST_PG_URL to a superuser's URL"
        if reason.startswith("FATAL")
        else "start Postgres there (e.g. docker run -d -p 5432:5432 -e POSTGRES_HOST_AUTH_METHOD=trust postgres:16) "
        "or set CONNECT_TEST_PG_URL to one that answers"
    )
    sys.exit(f"test.sh: no Postgres for the tests at {masked_url(url)}: {reason}; {fix}")
PY
}
