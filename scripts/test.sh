#!/usr/bin/env bash
# The one test command: `bash scripts/test.sh` (CI runs it through .ci/run).
#
# 1. Installs PostgreSQL, MariaDB and python3 with apt-get when their binaries are missing (needs
#    root; on a developer machine install them yourself).
# 2. Starts a throwaway PostgreSQL (initdb + pg_ctl, run as the `postgres` user when we are root)
#    and a throwaway MariaDB (mariadb-install-db + mariadbd, passwordless root over TCP) in a
#    `mktemp -d` directory, each on a free port of 127.0.0.1, in UTC, and waits until both accept
#    connections.
# 3. Exports for the tests:
#      APIJET_TEST_POSTGRES_URL  postgres://postgres@127.0.0.1:PORT/postgres
#      APIJET_TEST_MYSQL_URL     mysql://root@127.0.0.1:PORT/mysql
#      APIJET_TEST_PSQL_ARGS     "-h 127.0.0.1 -p PORT -U postgres"   (psql client arguments)
#      APIJET_TEST_MYSQL_ARGS    "-h 127.0.0.1 -P PORT -u root"       (mariadb client arguments)
#    An engine whose URL is already set in the environment is not provisioned: the tests use the
#    given server (set the matching *_ARGS too, or the tests derive them from the URL).
# 4. Makes sure the browser test, the README's examples and the OpenAPI validation can run:
#    chromium and chromium-driver, curl and jq from Debian (apt-get, when missing and root), and
#    Python's openapi-spec-validator (pip, into py-venv in cargo's build folder, `target/` or
#    wherever CARGO_TARGET_DIR puts it, when `python3` lacks it; exported as
#    APIJET_TEST_PYTHON), and the MCP Python SDK (pip, `mcp`, into mcp-venv there too; exported
#    as APIJET_TEST_MCP_PYTHON). Under CI=true, ../shared must exist and nothing may be missing: any
#    stage that cannot run fails the run with a clear message (tests call support::skip).
# 5. Habits stage (only when no extra arguments were given, or APIJET_LINT=1): `cargo fmt --all
#    --check` and `cargo clippy --workspace --all-targets -- -D warnings`, each a stage of its own
#    in the summary; either failing fails the run.
# 6. Runs `cargo test --workspace --no-fail-fast -- --nocapture --test-threads=2` (without
#    --workspace when the arguments pick packages with -p): the unit tests
#    of each crate and the one integration test binary `it` (tests/it/main.rs, a module per
#    behaviour: tests/it/accounts.rs is `accounts::`), also after a failure; the conformance
#    report of tests/it/conformance/mod.rs is printed: documented deviations as `known`,
#    anything else as `FAIL`. Extra arguments are passed to cargo test; those after a `--` to the
#    test binary:
#      bash scripts/test.sh --test it                      every integration test
#      bash scripts/test.sh --test it -- accounts::        one topic (module)
#      bash scripts/test.sh --test it -- conformance::     the conformance suite
#      bash scripts/test.sh -p apijet-plan                 one crate's unit tests
#    PostgreSQL notices (`… does not exist, skipping`) are kept out of the output (PGOPTIONS).
# 7. Cluster stage (only when no extra arguments were given, or APIJET_CLUSTER_TEST=1), each
#    script a stage of its own: the short fault tests `scripts/cluster/fault-test.sh galera`,
#    `… postgres`, `… patroni` and `… spider` (3-node Galera, PostgreSQL primary + standby,
#    Patroni over etcd, Spider with three shards; two apijet instances behind haproxy; about a
#    minute each), `scripts/cluster/spider-check.sh` (the conformance cases, ids, cross-shard
#    atomicity and a 1,000,000-row list on Spider; its `conformance [spider]` lines count as the
#    other engines' do) and `scripts/cluster/rolling-restart.sh` (three instances restarted in
#    turn under load). The tools each needs (galera-4, rsync, patroni, etcd-server,
#    mariadb-plugin-spider, haproxy, curl) are installed with apt-get as root when missing.
#    Under CI=true a missing tool or a failed run fails the suite; elsewhere a missing tool
#    skips the stage with a message. A script whose output stays open after it ended (a
#    background process that outlived it) fails.
#    A passing run must print no panic (a test that expects one prints "panicked at" all the
#    same): such text fails the run.
# 8. Ends with a summary: one line per stage (format and lint; unit and integration tests;
#    conformance per engine and stage; each cluster script), then `N passed, M failed` (N =
#    tests, conformance cases, cluster scripts and the format and lint stages), and exits 0 only
#    when nothing failed.
# 9. Always stops both servers and removes the temporary directories, on success, failure or
#    Ctrl-C. The tests remove what they create themselves (tests/it/support/mod.rs: their files
#    live in a folder of the test process, removed when it ends, however it ends).
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib/db.sh
source scripts/lib/db.sh
# shellcheck source=scripts/lib/cargo.sh
source scripts/lib/cargo.sh

want_pg=1
want_my=1
[ -n "${APIJET_TEST_POSTGRES_URL:-}" ] && want_pg=0
[ -n "${APIJET_TEST_MYSQL_URL:-}" ] && want_my=0

TMP_DIR=""
LOG_DIR=$(mktemp -d /tmp/apijet-test-log.XXXXXX)
# shellcheck disable=SC2317  # invoked by the trap
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  db_stop_all
  [ -n "$TMP_DIR" ] && rm -rf "$TMP_DIR"
  rm -rf "$LOG_DIR"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

db_install_missing "$want_pg" "$want_my"

# The browser for tests/it/console.rs.
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ]; then
    db_log "installing chromium chromium-driver with apt-get"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y chromium chromium-driver
  else
    db_log "chromium / chromedriver missing; install them (as root: apt-get install chromium chromium-driver)"
  fi
fi

# curl and jq for the README's examples (tests/it/readme.rs runs every one).
if ! command -v curl >/dev/null 2>&1 || ! command -v jq >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ]; then
    db_log "installing curl jq with apt-get"
    apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y curl jq >/dev/null
  else
    db_log "curl / jq missing; install them (as root: apt-get install curl jq)"
  fi
fi

# The OpenAPI validator for tests/it/openapi.rs.
if ! python3 -c 'import openapi_spec_validator' >/dev/null 2>&1; then
  venv=$(cargo_target_dir)/py-venv
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import openapi_spec_validator' >/dev/null 2>&1; then
    db_log "installing openapi-spec-validator into $venv"
    if ! { python3 -m venv "$venv" && "$venv/bin/pip" install --quiet 'openapi-spec-validator==0.9.0'; }; then
      db_log "cannot install openapi-spec-validator (python3-venv missing?)"
    fi
  fi
  [ -x "$venv/bin/python" ] && export APIJET_TEST_PYTHON="$venv/bin/python"
fi

# The official MCP Python SDK, the client of tests/it/mcp.rs: pinned, in a venv of its own.
mcp_venv=$(cargo_target_dir)/mcp-venv
if [ ! -x "$mcp_venv/bin/python" ] || ! "$mcp_venv/bin/python" -c 'import mcp' >/dev/null 2>&1; then
  db_log "installing the MCP Python SDK into $mcp_venv"
  if ! { python3 -m venv "$mcp_venv" && "$mcp_venv/bin/pip" install --quiet 'mcp==2.3.0'; }; then
    db_log "cannot install the MCP Python SDK (python3-venv missing?)"
  fi
fi
if [ -x "$mcp_venv/bin/python" ]; then export APIJET_TEST_MCP_PYTHON="$mcp_venv/bin/python"; fi

if [ "${CI:-}" = true ] && [ ! -d ../shared/apijson ]; then
  echo "scripts/test.sh: CI=true but ../shared/apijson is missing: the conformance stage cannot run." >&2
  echo "Check out the shared reference material beside the repository (../shared)." >&2
  exit 1
fi

if [ "$want_pg" = 1 ] || [ "$want_my" = 1 ]; then
  # Under /tmp, not $TMPDIR: the `postgres` user must be able to reach the directory.
  TMP_DIR=$(mktemp -d /tmp/apijet-test.XXXXXX)
fi
if [ "$want_pg" = 1 ]; then
  db_start_postgres "$TMP_DIR"
  export APIJET_TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$DB_PG_PORT/postgres"
  export APIJET_TEST_PSQL_ARGS="-h 127.0.0.1 -p $DB_PG_PORT -U postgres"
else
  db_log "using APIJET_TEST_POSTGRES_URL from the environment"
fi
if [ "$want_my" = 1 ]; then
  db_start_mariadb "$TMP_DIR"
  export APIJET_TEST_MYSQL_URL="mysql://root@127.0.0.1:$DB_MY_PORT/mysql"
  export APIJET_TEST_MYSQL_ARGS="-h 127.0.0.1 -P $DB_MY_PORT -u root"
else
  db_log "using APIJET_TEST_MYSQL_URL from the environment"
fi

# psql and the demo loader print a NOTICE for every `DROP … IF EXISTS` of something absent.
export PGOPTIONS="${PGOPTIONS:+$PGOPTIONS }-c client_min_messages=warning"

summary=()      # one line per stage
passed=0 failed=0

if [ $# -eq 0 ] || [ "${APIJET_LINT:-}" = 1 ]; then
  db_log "habits stage: cargo fmt --all --check"
  set +e
  cargo fmt --all --check >"$LOG_DIR/fmt.log" 2>&1
  fmt_status=$?
  set -e
  if [ "$fmt_status" -eq 0 ]; then
    passed=$((passed + 1))
    summary+=("format (cargo fmt --all --check): passed")
  else
    cat "$LOG_DIR/fmt.log"
    failed=$((failed + 1))
    differ=$(grep -c '^Diff in ' "$LOG_DIR/fmt.log" || true)
    summary+=("format (cargo fmt --all --check): FAILED, $differ places differ (run cargo fmt --all)")
  fi
  db_log "habits stage: cargo clippy --workspace --all-targets -- -D warnings"
  set +e
  cargo clippy --workspace --all-targets --quiet -- -D warnings 2>&1 | tee "$LOG_DIR/clippy.log"
  clippy_status=${PIPESTATUS[0]}
  set -e
  if [ "$clippy_status" -eq 0 ]; then
    passed=$((passed + 1))
    summary+=("lint (cargo clippy --workspace --all-targets -- -D warnings): passed")
  else
    failed=$((failed + 1))
    findings=$(grep -cE '^(error|warning)(\[|:)' "$LOG_DIR/clippy.log" || true)
    summary+=("lint (cargo clippy --workspace --all-targets -- -D warnings): FAILED, $findings findings (exit $clippy_status)")
  fi
fi

# Arguments before a `--` go to cargo, those after it to the test binaries (a filter such as
# `accounts::`), after the options every run needs.
cargo_args=() test_args=()
seen_dashes=0
for arg in "$@"; do
  if [ "$seen_dashes" = 0 ] && [ "$arg" = -- ]; then
    seen_dashes=1
  elif [ "$seen_dashes" = 0 ]; then
    cargo_args+=("$arg")
  else
    test_args+=("$arg")
  fi
done

# The whole workspace, unless the arguments pick packages (`-p apijet-plan`): cargo takes
# --workspace over -p, so both together would run everything.
scope=(--workspace)
for arg in "${cargo_args[@]}"; do
  case $arg in -p | -p* | --package | --package=*) scope=() ;; esac
done

set +e
# --no-fail-fast: every test binary runs, so the summary counts them all.
cargo test "${scope[@]}" --no-fail-fast "${cargo_args[@]}" -- --nocapture --test-threads=2 "${test_args[@]}" 2>&1 | tee "$LOG_DIR/cargo.log"
cargo_status=${PIPESTATUS[0]}
set -e

# `test result: ok. 11 passed; 0 failed; 2 ignored; …`, one per test binary.
read -r t_passed t_failed t_ignored t_binaries < <(awk '
  /^test result: / {
    n++
    for (i = 2; i <= NF; i++) {
      if ($i ~ /^passed;?$/) p += $(i - 1)
      if ($i ~ /^failed;?$/) f += $(i - 1)
      if ($i ~ /^ignored;?$/) g += $(i - 1)
    }
  }
  END { printf "%d %d %d %d\n", p, f, g, n }' "$LOG_DIR/cargo.log")
if [ "$cargo_status" -ne 0 ] && [ "$t_failed" -eq 0 ]; then
  # It stopped before or between test binaries (a build error, a crash).
  t_failed=1
  summary+=("unit + integration tests: cargo test exited with status $cargo_status after $t_binaries test binaries ($t_passed passed)")
else
  ignored=""
  [ "$t_ignored" -gt 0 ] && ignored=", $t_ignored ignored"
  summary+=("unit + integration tests: $t_passed passed, $t_failed failed$ignored ($t_binaries test binaries)")
fi
passed=$((passed + t_passed))
failed=$((failed + t_failed))
# A passing run prints no panic: one that a test expects (#[should_panic]) still reads as a
# failure in the log. Check the error such a panic would carry instead.
panics=$(grep -c 'panicked at' "$LOG_DIR/cargo.log" || true)
if [ "$t_failed" -eq 0 ] && [ "$panics" -gt 0 ]; then
  failed=$((failed + 1))
  summary+=("panic text in a passing run: FAILED, $panics \"panicked at\" lines (see above)")
fi

# `conformance [postgres]: 97 passed, 4 known deviations, 0 failed[, 2 order-dependent]`: every
# case replayed counts, a known deviation and an order-dependent answer as passed.
while IFS= read -r line; do
  summary+=("$line")
  read -r c_passed c_failed < <(awk -F'[:,]' '{
    for (i = 2; i <= NF; i++) {
      split($i, w, " ")
      if (w[2] == "failed") f += w[1]; else p += w[1]
    }
  } END { printf "%d %d\n", p, f }' <<<"$line")
  passed=$((passed + c_passed))
  failed=$((failed + c_failed))
done < <(grep -E '^conformance( writes)? \[[a-z]+\]: [0-9]+ passed' "$LOG_DIR/cargo.log" || true)

if [ $# -eq 0 ] || [ "${APIJET_CLUSTER_TEST:-}" = 1 ]; then
  # shellcheck source=scripts/cluster/lib.sh
  source scripts/cluster/lib.sh
  # NAME TOPOLOGY PATTERN COMMAND…: one cluster script as a stage; its result is its last line
  # matching PATTERN. A script whose output stays open after it ended (a background process
  # outlived it) fails. Under CI a tool the topology needs that is missing (cl_require installs
  # it as root) fails the stage; elsewhere it is skipped.
  cluster_stage() {
    local name=$1 topology=$2 pattern=$3 log started took rc result ran
    shift 3
    if ! cl_require "$topology"; then
      if [ "${CI:-}" = true ]; then
        failed=$((failed + 1))
        summary+=("$name: FAILED, tools missing (see above)")
      else
        summary+=("$name: SKIPPED, tools missing (see above)")
      fi
      return
    fi
    db_log "cluster stage: $name"
    log=$LOG_DIR/cluster-${name// /-}.log
    started=$SECONDS
    set +e
    "$@" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    set -e
    took=$((SECONDS - started))
    result=$(grep -E "$pattern" "$log" | tail -n 1 || true)
    ran=$(sed -nE 's/^\[cluster\] .* done in ([0-9]+) s \(exit .*/\1/p' "$log" | tail -n 1)
    if [ "$rc" -eq 0 ] && [ -n "$ran" ] && [ $((took - ran)) -gt 15 ]; then
      rc=1
      result="its output stayed open $((took - ran)) s after it ended (a background process outlived it)"
    fi
    if [ "$rc" -eq 0 ]; then
      passed=$((passed + 1))
      summary+=("$name: passed in $took s, ${result:-no result line}")
    else
      failed=$((failed + 1))
      summary+=("$name: FAILED (exit $rc) in $took s, ${result:-no result line}")
    fi
  }
  # Short forms: a fault a few seconds into the load, enough load after it for the slowest
  # failover (Patroni's, ttl 10 s, writes back after about 15 s).
  cluster_stage "cluster fault test galera" galera '^cluster: ' \
    env FT_SECONDS=16 FT_KILL_AFTER=6 bash scripts/cluster/fault-test.sh galera
  cluster_stage "cluster fault test postgres" postgres '^cluster: ' \
    env FT_SECONDS=16 FT_KILL_AFTER=6 bash scripts/cluster/fault-test.sh postgres
  cluster_stage "cluster fault test patroni" patroni '^cluster: ' \
    env FT_SECONDS=26 FT_KILL_AFTER=6 bash scripts/cluster/fault-test.sh patroni
  cluster_stage "cluster fault test spider" spider '^cluster: ' \
    env FT_SECONDS=18 FT_KILL_AFTER=5 FT_DOWN_FOR=4 bash scripts/cluster/fault-test.sh spider
  cluster_stage "cluster spider check" spider '^spider: ' bash scripts/cluster/spider-check.sh
  # The conformance lines of the Spider replay count as those of the other engines do.
  spider_log=$LOG_DIR/cluster-cluster-spider-check.log
  while IFS= read -r line; do
    summary+=("$line")
    read -r c_passed c_failed < <(awk -F'[:,]' '{
      for (i = 2; i <= NF; i++) {
        split($i, w, " ")
        if (w[2] == "failed") f += w[1]; else p += w[1]
      }
    } END { printf "%d %d\n", p, f }' <<<"$line")
    passed=$((passed + c_passed))
    failed=$((failed + c_failed))
  done < <(grep -E '^conformance( writes)? \[spider\]: [0-9]+ passed' "$spider_log" 2>/dev/null || true)
  cluster_stage "cluster rolling restart" rolling '^rolling: ' bash scripts/cluster/rolling-restart.sh
fi

skipped=$(grep -c '^\*\*\* SKIPPED' "$LOG_DIR/cargo.log" || true)
[ "$skipped" -gt 0 ] && summary+=("skipped: $skipped test stages (see the *** SKIPPED lines above)")

echo
echo "== summary =="
printf '%s\n' "${summary[@]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
