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
# 4. Makes sure the browser test and the OpenAPI validation can run: chromium and
#    chromium-driver from Debian (apt-get, when missing and root), and Python's
#    openapi-spec-validator (pip, into target/py-venv, when `python3` lacks it; exported as
#    APIJET_TEST_PYTHON). Under CI=true, ../shared must exist and nothing may be missing: any
#    stage that cannot run fails the run with a clear message (tests call support::skip).
# 5. Runs `cargo test --workspace -- --nocapture --test-threads=2` (the conformance report of
#    tests/conformance.rs is printed) and exits with its status. Extra arguments are passed to
#    cargo test before the `--`, e.g. `bash scripts/test.sh --test conformance`.
# 6. Cluster stage (only when no extra arguments were given, or APIJET_CLUSTER_TEST=1): the short
#    fault tests `scripts/cluster/fault-test.sh galera` and `… postgres` (3-node Galera, PostgreSQL
#    primary + standby, two apijet instances behind haproxy; about a minute each). Needs galera-4,
#    rsync, haproxy and curl (installed with apt-get as root when missing). Under CI=true a
#    missing tool or a failed run fails the suite; elsewhere a missing tool skips the stage with
#    a message.
# 7. Always stops both servers and removes the temporary directory, on success, failure or Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib/db.sh
source scripts/lib/db.sh

want_pg=1
want_my=1
[ -n "${APIJET_TEST_POSTGRES_URL:-}" ] && want_pg=0
[ -n "${APIJET_TEST_MYSQL_URL:-}" ] && want_my=0

TMP_DIR=""
# shellcheck disable=SC2317  # invoked by the trap
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  db_stop_all
  [ -n "$TMP_DIR" ] && rm -rf "$TMP_DIR"
  # The tests' SQLite demo files (tests/support/mod.rs keeps them under target/tmp).
  rm -rf target/tmp/apijet-demo-it-*
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

db_install_missing "$want_pg" "$want_my"

# The browser for tests/console.rs.
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ]; then
    db_log "installing chromium chromium-driver with apt-get"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y chromium chromium-driver
  else
    db_log "chromium / chromedriver missing; install them (as root: apt-get install chromium chromium-driver)"
  fi
fi

# The OpenAPI validator for tests/openapi.rs.
if ! python3 -c 'import openapi_spec_validator' >/dev/null 2>&1; then
  venv=target/py-venv
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import openapi_spec_validator' >/dev/null 2>&1; then
    db_log "installing openapi-spec-validator into $venv"
    python3 -m venv "$venv" && "$venv/bin/pip" install --quiet 'openapi-spec-validator==0.9.0' ||
      db_log "cannot install openapi-spec-validator (python3-venv missing?)"
  fi
  [ -x "$venv/bin/python" ] && export APIJET_TEST_PYTHON="$PWD/$venv/bin/python"
fi

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

set +e
cargo test --workspace "$@" -- --nocapture --test-threads=2
status=$?
set -e

if [ $# -eq 0 ] || [ "${APIJET_CLUSTER_TEST:-}" = 1 ]; then
  # shellcheck source=scripts/cluster/lib.sh
  source scripts/cluster/lib.sh
  if ! cl_require galera 2>/dev/null && [ "$(id -u)" -eq 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y galera-4 rsync haproxy curl >/dev/null || true
  fi
  if cl_require galera; then
    for topology in galera postgres; do
      db_log "cluster stage: fault test on $topology"
      FT_SECONDS=16 FT_KILL_AFTER=6 bash scripts/cluster/fault-test.sh "$topology" || status=1
    done
  elif [ "${CI:-}" = true ]; then
    db_log "cluster stage cannot run under CI: tools missing"
    status=1
  else
    db_log "cluster stage SKIPPED: tools missing (see above)"
  fi
fi
exit "$status"
