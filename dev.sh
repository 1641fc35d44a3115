#!/usr/bin/env bash
# The two commands of this project, on a fresh machine:
#   ./dev.sh demo   start a local Elasticsearch if ES_URL is unset, index a small corpus, search, stop
#   ./dev.sh test   lint, type-check, build the docs and run the whole test suite against a real Elasticsearch
# and, while developing:
#   ./dev.sh test-fast   lint, type-check and the unit tests (no Elasticsearch, no server: under a minute)
#   ./dev.sh docs        build the docs site strictly into site/ (mkdocs serve shows it as you edit)
# Both create .venv and install what is needed first (Python >= 3.11, Maven and a JDK for the local server).
set -euo pipefail
cd "$(dirname "$0")"
REPO="$(pwd)"
VENV="$REPO/.venv"
ES_VERSION_MAIN="${ES_VERSION:-8.19.21}"
# Downloads and instances of Elasticsearch, and the fetched embedding models, stay in this checkout.
export ES_LOCAL_CACHE="${ES_LOCAL_CACHE:-$REPO/.cache/elasticsearch}"
export EMBEDDINGS_CACHE_DIR="${EMBEDDINGS_CACHE_DIR:-$REPO/.cache/models}"
# Newest 9.x found on Maven Central (9.4.0 and later were not published as integ-test-zip at the time of writing).
ES_VERSION_NEXT="${ES_VERSION_NEXT:-9.3.8}"
# The server matrix (tests/integration/test_versions.py, marker `matrix`): the floor (8.12,
# storage._transport.compat.MINIMUM_SERVER), 8.14, 8.17 and every 9.x minor Maven Central serves as integ-test-zip,
# besides the two above. The 9.x client runs on each (and the whole smoke suite on 8.19); the 8.x client on
# the floor (and on the two above, in their passes).
ES_MATRIX="${ES_MATRIX:-8.12.2 8.14.3 8.17.4 9.0.8 9.1.10 9.2.4}"
ES_FLOOR="${ES_MATRIX%% *}"

python_bin() {
  for candidate in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
    [ -n "$candidate" ] || continue
    if command -v "$candidate" >/dev/null 2>&1 &&
      "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
      echo "$candidate"
      return 0
    fi
  done
  echo "error: Python >= 3.11 is needed (set PYTHON=/path/to/python3.11)" >&2
  return 1
}

setup() {
  if [ ! -x "$VENV/bin/python" ]; then
    echo "== creating $VENV"
    "$(python_bin)" -m venv "$VENV"
  fi
  local stamp="$VENV/.installed"
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    echo "== installing the package and its dev dependencies"
    "$VENV/bin/python" -m pip install --disable-pip-version-check -q --upgrade pip
    # The 8.x Python client here: it talks to 8.x and 9.x servers (the 9.x client only to 9.x ones; the
    # third test pass below runs it from an overlay).
    "$VENV/bin/python" -m pip install --disable-pip-version-check -q -e ".[dev]" "elasticsearch[async]>=8.14,<9"
    touch "$stamp"
  fi
}

# The workbench's browser test drives Debian's headless Chromium (packages chromium and chromium-driver): installed
# here when missing, as root (a CI machine starts without them).
ensure_browser() {
  command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing Debian's chromium and chromium-driver (the workbench's browser test)"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
  else
    echo "error: the workbench's browser test needs chromium and chromium-driver: sudo apt-get install chromium chromium-driver" >&2
    return 1
  fi
}

# Any JVM still running from this checkout's Elasticsearch cache (or the launcher's default one, which the
# installed-wheel test uses) is a leak.
check_no_jvm_left() {
  "$VENV/bin/python" - "$ES_LOCAL_CACHE" "$("$VENV/bin/python" -c 'import os; os.environ.pop("ES_LOCAL_CACHE", None); from storage.local_es import default_cache_dir; print(default_cache_dir())')" <<'PY'
import pathlib, sys
markers = [m.encode() for m in sys.argv[1:] if m]
leaked = []
for proc in pathlib.Path("/proc").iterdir():
    try:
        cmd = (proc / "cmdline").read_bytes()
    except OSError:
        continue
    if proc.name.isdigit() and any(m in cmd for m in markers) and b"org.elasticsearch" in cmd:
        leaked.append(proc.name)
if leaked:
    sys.exit(f"error: Elasticsearch JVM(s) left running: pids {' '.join(leaked)}")
print("== no Elasticsearch JVM left running")
PY
}

# The answer tests need a real chat server: llama.cpp's, compiled once into .cache/llm (6-11 min on 2 cores).
# Build it in the background at the lowest priority while the other tests run; the chat server's test
# fixture (tests run last) waits for the build through a file lock. Its own process group, stopped on exit.
CHAT_BUILD_PID=""
start_chat_server_build() {
  local cache="$REPO/.cache/llm"
  mkdir -p "$cache"
  # (quick when it is built already with today's flags: embeddings.local_llm checks its stamp)
  echo "== building the local chat server in the background if needed (nice 19; log: .cache/llm/install.log)"
  setsid nice -n 19 "$VENV/bin/python" -m embeddings.local_llm install --cache-dir "$cache" >"$cache/install.log" 2>&1 &
  CHAT_BUILD_PID=$!
  trap stop_chat_server_build EXIT
}
stop_chat_server_build() {
  if [ -n "$CHAT_BUILD_PID" ] && kill -0 "$CHAT_BUILD_PID" 2>/dev/null; then
    kill -- "-$CHAT_BUILD_PID" 2>/dev/null || true
  fi
}

run_tests() {
  local py="$VENV/bin/python"
  start_chat_server_build
  # run_tests is called as `run_tests || status=$?`, where bash ignores errexit: every failure below is
  # caught explicitly. Lint failures fail the run at the end (the tests still run, for the whole picture).
  local status=0
  echo "== ruff"
  "$VENV/bin/ruff" check --output-format concise . || status=1
  "$VENV/bin/ruff" format --check . || status=1
  echo "== lint-imports (floors only point down; embeddings never imports storage)"
  "$VENV/bin/lint-imports" || status=1
  echo "== mypy --strict"
  "$VENV/bin/mypy" || status=1
  echo "== the docs site (mkdocs build --strict)"
  build_docs || status=1
  echo "== pytest against Elasticsearch $ES_VERSION_MAIN"
  ES_VERSION="$ES_VERSION_MAIN" "$py" -m pytest --durations=15 "$@" || status=$?
  if [ -n "$CHAT_BUILD_PID" ]; then
    wait "$CHAT_BUILD_PID" 2>/dev/null || true
    echo "== local chat server build: $(tail -n 1 "$REPO/.cache/llm/install.log")"
  fi
  check_no_jvm_left || status=1
  [ "$status" -eq 0 ] || return "$status"
  if [ -n "${ES_URL:-}" ]; then
    echo "== ES_URL is set: the second pass against Elasticsearch $ES_VERSION_NEXT is skipped"
    return 0
  fi
  if ! "$py" -c "from storage.local_es import find_java_home; find_java_home('$ES_VERSION_NEXT')" 2>/dev/null; then
    echo "error: no JDK >= 21 for Elasticsearch $ES_VERSION_NEXT (set ES_JAVA_HOME)" >&2
    return 1
  fi
  echo "== pytest -m 'smoke or matrix' against Elasticsearch $ES_VERSION_NEXT (elasticsearch-py 8.x)"
  ES_VERSION="$ES_VERSION_NEXT" "$py" -m pytest -m "smoke or matrix" "$@" || status=$?
  check_no_jvm_left || status=1
  [ "$status" -eq 0 ] || return "$status"
  echo "== pytest -m matrix against the floor, Elasticsearch $ES_FLOOR (elasticsearch-py 8.x)"
  ES_VERSION="$ES_FLOOR" "$py" -m pytest -q -m matrix "$@" || status=$?
  check_no_jvm_left || status=1
  [ "$status" -eq 0 ] || return "$status"
  # The 9.x Python client, from an overlay on the same venv (only the two packages differ).
  local overlay="$REPO/.cache/python-elasticsearch-9"
  if [ ! -f "$overlay/.installed" ] || [ pyproject.toml -nt "$overlay/.installed" ]; then
    rm -rf "$overlay"
    "$py" -m pip install --disable-pip-version-check -q --no-deps --target "$overlay" \
      "elasticsearch>=9,<10" "elastic-transport>=9.4.1,<10" || return 1
    touch "$overlay/.installed"
  fi
  local client9
  client9="elasticsearch-py $(PYTHONPATH="$overlay" "$py" -c 'import elasticsearch; print(elasticsearch.__versionstr__)')"
  echo "== pytest -m 'smoke or client9 or matrix' against Elasticsearch $ES_VERSION_NEXT ($client9)"
  PYTHONPATH="$overlay${PYTHONPATH:+:$PYTHONPATH}" ES_VERSION="$ES_VERSION_NEXT" "$py" -m pytest \
    -m "smoke or client9 or matrix" "$@" || status=$?
  check_no_jvm_left || status=1
  [ "$status" -eq 0 ] || return "$status"
  echo "== pytest -m 'smoke or matrix' against Elasticsearch $ES_VERSION_MAIN ($client9: a 9.x client, an 8.x server)"
  PYTHONPATH="$overlay${PYTHONPATH:+:$PYTHONPATH}" ES_VERSION="$ES_VERSION_MAIN" "$py" -m pytest -q \
    -m "smoke or matrix" "$@" || status=$?
  check_no_jvm_left || status=1
  # Two servers at a time: each run is one test on a node of its own, mostly waiting on that node.
  local version logs pids=() names=()
  logs="$(mktemp -d)"
  for version in $ES_MATRIX; do
    PYTHONPATH="$overlay${PYTHONPATH:+:$PYTHONPATH}" ES_VERSION="$version" "$py" -m pytest -q -p no:cacheprovider \
      -m matrix "$@" >"$logs/$version.log" 2>&1 &
    pids+=("$!")
    names+=("$version")
    if [ "${#pids[@]}" -eq 2 ]; then
      matrix_wait "$client9" "$logs" pids names || status=1
    fi
  done
  matrix_wait "$client9" "$logs" pids names || status=1
  rm -rf "$logs"
  check_no_jvm_left || status=1
  return "$status"
}

# Wait for the matrix runs in flight (arrays named by $3 and $4), print each one's log in order.
matrix_wait() {
  local -n _pids="$3" _names="$4"
  local i status=0
  for i in "${!_pids[@]}"; do
    local rc=0
    wait "${_pids[$i]}" || rc=$?
    echo "== pytest -m matrix against Elasticsearch ${_names[$i]} ($1): exit $rc"
    cat "$2/${_names[$i]}.log"
    [ "$rc" -eq 0 ] || status=1
  done
  _pids=()
  _names=()
  return "$status"
}

build_docs() {
  NO_MKDOCS_2_WARNING=1 "$VENV/bin/mkdocs" build --strict --quiet -d "${1:-$REPO/site}"
}

case "${1:-}" in
  test-fast)
    shift
    setup
    status=0
    "$VENV/bin/ruff" check --output-format concise . || status=1
    "$VENV/bin/ruff" format --check . || status=1
    "$VENV/bin/lint-imports" >/dev/null || { "$VENV/bin/lint-imports"; status=1; }
    "$VENV/bin/mypy" || status=1
    "$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/unit "$@" || status=1
    exit "$status"
    ;;
  docs)
    shift
    setup
    build_docs "$@"
    echo "== the docs site is in ${1:-site/}"
    ;;
  demo)
    shift
    setup
    exec "$VENV/bin/hybrid-search" demo "$@"
    ;;
  test)
    shift
    started=$(date +%s)
    setup
    ensure_browser
    status=0
    run_tests "$@" || status=$?
    echo "== ./dev.sh test finished in $(($(date +%s) - started)) s with status $status"
    exit "$status"
    ;;
  *)
    echo "usage: ./dev.sh demo [query] | ./dev.sh test [pytest args] | ./dev.sh test-fast | ./dev.sh docs" >&2
    exit 2
    ;;
esac
