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

# A stage's header, with the seconds since this command started (where a run's minutes go).
T0=$(date +%s)
say() {
  echo "== [$(($(date +%s) - T0)) s] $*"
}

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
    say "creating $VENV"
    "$(python_bin)" -m venv "$VENV"
  fi
  local stamp="$VENV/.installed"
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    say "installing the package and its dev dependencies"
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
    say "installing Debian's chromium and chromium-driver (the workbench's browser test)"
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

# The answer tests need a real chat server: llama.cpp's, compiled once into .cache/llm
# (~3 min on 2 cores alone, ~12 niced beside the tests: done long before the tests are).
# Build it in the background at the lowest priority while the other tests run; the chat server's test
# fixture (tests run last) waits for the build through a file lock. Its own process group, stopped on exit.
CHAT_BUILD_PID=""
start_chat_server_build() {
  local cache="$REPO/.cache/llm"
  mkdir -p "$cache"
  # (quick when it is built already with today's flags: embeddings.local_llm checks its stamp)
  say "building the local chat server in the background if needed (nice 19; log: .cache/llm/install.log)"
  # setsid gives the build a session, and Linux's scheduler autogroup a group, of its own: a group shares the
  # cores equally with the tests' groups whatever its processes' nice, so the group itself is niced to 19
  # (without it the build took a whole core from the tests for its ~8 minutes).
  setsid sh -c 'echo 19 >/proc/self/autogroup 2>/dev/null; exec nice -n 19 "$@"' build \
    "$VENV/bin/python" -m embeddings.local_llm install --cache-dir "$cache" >"$cache/install.log" 2>&1 &
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
  # The passes after the main one (quiet; no cache: two may end at once)
  local pytest=("$py" -m pytest -q -p no:cacheprovider)
  # run_tests is called as `run_tests || status=$?`, where bash ignores errexit: every failure below is
  # caught explicitly. Lint failures fail the run at the end (the tests still run, for the whole picture).
  local status=0
  say "ruff"
  "$VENV/bin/ruff" check --output-format concise . || status=1
  "$VENV/bin/ruff" format --check . || status=1
  say "lint-imports (floors only point down; embeddings never imports storage)"
  "$VENV/bin/lint-imports" || status=1
  say "mypy --strict"
  "$VENV/bin/mypy" || status=1
  say "the docs site (mkdocs build --strict)"
  build_docs || status=1
  # Two workers, each with its own Elasticsearch (TEST_WORKERS=0: one process). A file is one worker's unit (its
  # module-scoped cluster, secured node or installed wheel is made once), sent in collection order. The test
  # that needs the chat server runs after this pass, beside the others, when the build is done.
  say "pytest against Elasticsearch $ES_VERSION_MAIN (${TEST_WORKERS:-2} workers; all but -m chat_server)"
  ES_VERSION="$ES_VERSION_MAIN" "$py" -m pytest -n "${TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder \
    -m "not chat_server" --durations=15 "$@" || status=$?
  check_no_jvm_left || status=1
  [ "$status" -eq 0 ] || return "$status"
  if [ -n "${ES_URL:-}" ]; then
    say "pytest -m chat_server against ES_URL (waits for the chat server's build)"
    "${pytest[@]}" -m chat_server "$@" || status=$?
    chat_build_done
    echo "== ES_URL is set: the passes against the other servers are skipped"
    return "$status"
  fi
  if ! "$py" -c "from storage.local_es import find_java_home; find_java_home('$ES_VERSION_NEXT')" 2>/dev/null; then
    echo "error: no JDK >= 21 for Elasticsearch $ES_VERSION_NEXT (set ES_JAVA_HOME)" >&2
    return 1
  fi
  # The 9.x Python client, from an overlay on the same venv (only the two packages differ).
  local overlay="$REPO/.cache/python-elasticsearch-9"
  if [ ! -f "$overlay/.installed" ] || [ pyproject.toml -nt "$overlay/.installed" ]; then
    rm -rf "$overlay"
    "$py" -m pip install --disable-pip-version-check -q --no-deps --target "$overlay" \
      "elasticsearch>=9,<10" "elastic-transport>=9.4.1,<10" || return 1
    touch "$overlay/.installed"
  fi
  local client9 with9="PYTHONPATH=$overlay${PYTHONPATH:+:$PYTHONPATH}"
  client9="elasticsearch-py $(PYTHONPATH="$overlay" "$py" -c 'import elasticsearch; print(elasticsearch.__versionstr__)')"
  # The other servers and clients: each pass is one pytest process with a node of its own; two at a time, the
  # longest first, each one's output printed whole when it ends. Beside them, the chat server's test waits
  # for the build (it used to wait at the end of the main pass, the cores idle but for the build's last steps).
  POOL_LOGS="$(mktemp -d)"
  ES_VERSION="$ES_VERSION_MAIN" "${pytest[@]}" -m chat_server "$@" >"$POOL_LOGS/chat.log" 2>&1 &
  local chat_pid=$! chat_rc=0
  pool "$ES_VERSION_NEXT, elasticsearch-py 8.x: smoke and matrix" \
    env ES_VERSION="$ES_VERSION_NEXT" "${pytest[@]}" -m "smoke or matrix" "$@"
  pool "$ES_VERSION_NEXT, $client9: smoke, client9 and matrix" \
    env "$with9" ES_VERSION="$ES_VERSION_NEXT" "${pytest[@]}" -m "smoke or client9 or matrix" "$@"
  pool "$ES_VERSION_MAIN, $client9 (a 9.x client, an 8.x server): smoke and matrix" \
    env "$with9" ES_VERSION="$ES_VERSION_MAIN" "${pytest[@]}" -m "smoke or matrix" "$@"
  pool "the floor, $ES_FLOOR, elasticsearch-py 8.x: matrix" \
    env ES_VERSION="$ES_FLOOR" "${pytest[@]}" -m matrix "$@"
  local version
  for version in $ES_MATRIX; do
    pool "$version, $client9: matrix" env "$with9" ES_VERSION="$version" "${pytest[@]}" -m matrix "$@"
  done
  pool_drain
  wait "$chat_pid" || chat_rc=$?
  chat_build_done
  say "pytest -m chat_server against Elasticsearch $ES_VERSION_MAIN (the real chat server): exit $chat_rc"
  cat "$POOL_LOGS/chat.log"
  rm -rf "$POOL_LOGS"
  [ "$POOL_STATUS" -eq 0 ] && [ "$chat_rc" -eq 0 ] || status=1
  check_no_jvm_left || status=1
  return "$status"
}

chat_build_done() {
  if [ -n "$CHAT_BUILD_PID" ]; then
    wait "$CHAT_BUILD_PID" 2>/dev/null || true
    say "local chat server build: $(tail -n 1 "$REPO/.cache/llm/install.log")"
  fi
}

# A pool of two background jobs: `pool LABEL COMMAND...` starts one once fewer than two run (waiting for the
# oldest), `pool_drain` waits for the rest; each job's output is printed when it has ended, in start order.
POOL_LOGS="" POOL_STATUS=0 POOL_PIDS=() POOL_LABELS=()
pool() {
  local label="$1"
  shift
  [ "${#POOL_PIDS[@]}" -lt 2 ] || pool_wait_oldest
  "$@" >"$POOL_LOGS/${#POOL_LABELS[@]}.log" 2>&1 &
  POOL_PIDS+=("$!")
  POOL_LABELS+=("$label")
}
pool_wait_oldest() {
  local n=$((${#POOL_LABELS[@]} - ${#POOL_PIDS[@]})) rc=0
  wait "${POOL_PIDS[0]}" || rc=$?
  say "pytest against Elasticsearch ${POOL_LABELS[$n]}: exit $rc"
  cat "$POOL_LOGS/$n.log"
  [ "$rc" -eq 0 ] || POOL_STATUS=1
  POOL_PIDS=("${POOL_PIDS[@]:1}")
}
pool_drain() {
  while [ "${#POOL_PIDS[@]}" -gt 0 ]; do
    pool_wait_oldest
  done
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
    # The tests' nodes run with the JIT's first tier only: their runs are short and small, where the optimising
    # compiler is most of the work (a node's start 21 -> 13 CPU-seconds, a small workload 9.7 -> 5.6; the tests
    # are CPU-bound on two cores). ES_LOCAL_JAVA_OPTS= (empty) runs them as shipped.
    export ES_LOCAL_JAVA_OPTS="${ES_LOCAL_JAVA_OPTS--XX:TieredStopAtLevel=1}"
    setup
    start_chat_server_build # (first: the browser's install and the lint leave it cores to use)
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
