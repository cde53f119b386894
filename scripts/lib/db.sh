# shellcheck shell=bash disable=SC2034  # DB_PG_PORT, DB_MY_PORT are for the caller
# Throwaway PostgreSQL and MariaDB servers for tests and benchmarks. Source this file; it defines
# functions and sets no options of its own.
#
#   db_install_missing        apt-get install PostgreSQL / MariaDB / python3 when their binaries are absent
#   db_free_ports N           print N distinct free TCP ports on 127.0.0.1, one per line
#   db_start_postgres DIR     initdb + pg_ctl start in DIR/pg on a free port; sets DB_PG_PORT
#   db_start_mariadb DIR      mariadb-install-db + mariadbd in DIR/my on a free port; sets DB_MY_PORT
#   db_stop_all               stop whatever db_start_* started (safe to call twice, or if nothing ran)
#   db_poll SECONDS STEP ALIVE CMD...
#                             run CMD every STEP seconds until it succeeds; fail after SECONDS, or
#                             as soon as the command string ALIVE fails (the server died)
#
# Both servers listen on 127.0.0.1 only, use trust / passwordless root over TCP (only the
# PostgreSQL role apijet_password_required, which a test creates, must give a password), run in
# UTC and trade durability for speed (fsync off). Each start waits a bounded time and fails with
# the server's log when it never accepts connections.

DB_WAIT_SECONDS=${DB_WAIT_SECONDS:-60}
# Set by db_start_postgres / db_start_mariadb for the caller.
DB_PG_PORT="" DB_MY_PORT=""
DB_PG_BIN=""
DB_PG_DATA=""
DB_MY_PID=""

db_log() { printf '[db] %s\n' "$*" >&2; }

# ALIVE is evaluated each round, so it may read $db_polled (seconds waited so far), e.g. to give a
# server a moment to write its pid file before asking whether it is still running.
db_poll() {
  local seconds=$1 step=$2 alive=$3 db_polled=0
  shift 3
  until "$@" >/dev/null 2>&1; do
    if awk "BEGIN { exit !($db_polled >= $seconds) }" || ! eval "$alive"; then
      return 1
    fi
    sleep "$step"
    db_polled=$(awk "BEGIN { print $db_polled + $step }")
  done
}

# The newest /usr/lib/postgresql/<version>/bin holding initdb, else the directory of initdb in PATH.
db_find_pg_bin() {
  local dir="" d
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && dir=$(printf '%s\n%s\n' "$dir" "$d" | sort -V | tail -n 1)
  done
  if [ -z "$dir" ] && command -v initdb >/dev/null 2>&1; then
    dir=$(dirname "$(readlink -f "$(command -v initdb)")")
  fi
  printf '%s' "$dir"
}

db_have_mariadb() {
  command -v mariadb >/dev/null 2>&1 &&
    command -v mariadb-install-db >/dev/null 2>&1 &&
    { command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ]; }
}

db_install_missing() {
  local want_pg=${1:-1} want_my=${2:-1} pkgs=()
  if [ "$want_pg" = 1 ] && { [ -z "$(db_find_pg_bin)" ] || ! command -v psql >/dev/null 2>&1; }; then
    pkgs+=(postgresql)
  fi
  if [ "$want_my" = 1 ] && ! db_have_mariadb; then
    pkgs+=(mariadb-server mariadb-client)
  fi
  command -v python3 >/dev/null 2>&1 || pkgs+=(python3)
  [ ${#pkgs[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    db_log "missing packages: ${pkgs[*]}; install them (as root: apt-get install ${pkgs[*]})"
    return 1
  fi
  db_log "installing ${pkgs[*]} with apt-get"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y "${pkgs[@]}"
}

db_free_ports() {
  python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
for s in socks:
    print(s.getsockname()[1])
PY
}

# Runs a command as the `postgres` system user when we are root (initdb and postgres refuse root).
db_as_pg() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

db_start_postgres() {
  local dir=$1/pg port
  DB_PG_BIN=$(db_find_pg_bin)
  [ -n "$DB_PG_BIN" ] || { db_log "PostgreSQL binaries (initdb) not found"; return 1; }
  port=$(db_free_ports 1)
  mkdir -p "$dir"
  if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin postgres
    chmod 755 "$1"
    chown postgres: "$dir"
  fi
  db_log "initdb in $dir/data"
  if ! db_as_pg "$DB_PG_BIN/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C --no-sync \
    >"$dir/initdb.log" 2>&1; then
    cat "$dir/initdb.log" >&2
    db_log "initdb failed"
    return 1
  fi
  DB_PG_DATA=$dir/data
  # One role must give a password (scram-sha-256), so that tests/it/ops.rs sees the errors of a
  # missing and of a wrong password; every other connection is trusted.
  sed -i '1i host all apijet_password_required 127.0.0.1/32 scram-sha-256' "$dir/data/pg_hba.conf"
  db_as_pg "$DB_PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -W \
    -o "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories=$dir -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c TimeZone=UTC" \
    start >/dev/null
  if ! db_poll "$DB_WAIT_SECONDS" 1 \
    "[ \$db_polled -lt 3 ] || db_as_pg '$DB_PG_BIN/pg_ctl' -D '$dir/data' status >/dev/null 2>&1" \
    "$DB_PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres; then
    tail -n 30 "$dir/server.log" >&2 || true
    db_log "PostgreSQL did not accept connections on 127.0.0.1:$port within ${DB_WAIT_SECONDS}s"
    return 1
  fi
  DB_PG_PORT=$port
  db_log "PostgreSQL ready on 127.0.0.1:$port"
}

db_start_mariadb() {
  local dir=$1/my port mariadbd
  mariadbd=$(command -v mariadbd || echo /usr/sbin/mariadbd)
  port=$(db_free_ports 1)
  mkdir -p "$dir/data" "$dir/tmp"
  db_log "mariadb-install-db in $dir/data"
  if ! mariadb-install-db --no-defaults --datadir="$dir/data" --user="$(id -un)" \
    --auth-root-authentication-method=normal --skip-test-db >"$dir/install.log" 2>&1; then
    cat "$dir/install.log" >&2
    db_log "mariadb-install-db failed"
    return 1
  fi
  "$mariadbd" --no-defaults --datadir="$dir/data" --port="$port" --bind-address=127.0.0.1 \
    --socket="$dir/mysqld.sock" --pid-file="$dir/mysqld.pid" --tmpdir="$dir/tmp" --user="$(id -un)" \
    --log-error="$dir/server.log" --default-time-zone=+00:00 --skip-name-resolve --skip-log-bin \
    --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
    --innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 --sync-binlog=0 \
    </dev/null >/dev/null 2>&1 &
  DB_MY_PID=$!
  if ! db_poll "$DB_WAIT_SECONDS" 1 "kill -0 $DB_MY_PID 2>/dev/null" \
    mariadb --no-defaults -h 127.0.0.1 -P "$port" -u root -e 'SELECT 1'; then
    tail -n 30 "$dir/server.log" >&2 || true
    db_log "MariaDB did not accept connections on 127.0.0.1:$port within ${DB_WAIT_SECONDS}s"
    return 1
  fi
  DB_MY_PORT=$port
  db_log "MariaDB ready on 127.0.0.1:$port"
}

db_stop_all() {
  if [ -n "$DB_PG_DATA" ] && [ -f "$DB_PG_DATA/postmaster.pid" ]; then
    db_as_pg "$DB_PG_BIN/pg_ctl" -D "$DB_PG_DATA" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
  fi
  DB_PG_DATA=""
  if [ -n "$DB_MY_PID" ] && kill -0 "$DB_MY_PID" 2>/dev/null; then
    kill -TERM "$DB_MY_PID" 2>/dev/null || true
    local waited=0
    while kill -0 "$DB_MY_PID" 2>/dev/null && [ "$waited" -lt 60 ]; do
      sleep 0.5
      waited=$((waited + 1))
    done
    kill -KILL "$DB_MY_PID" 2>/dev/null || true
    wait "$DB_MY_PID" 2>/dev/null || true
  fi
  DB_MY_PID=""
}
