# shellcheck shell=bash disable=SC2034  # CL_* variables are for the caller
# Local multi-server topologies for scripts/cluster/*.sh. Source it after scripts/lib/db.sh (it
# sources scripts/lib/cargo.sh itself); it sets no shell options of its own. Everything listens
# on loopback on ports from db_free_ports, lives under one directory, waits a bounded time, and
# is stopped by cl_down (call it from a trap).
#
#   cl_require TOPOLOGY         the tools TOPOLOGY needs (galera, postgres, patroni, spider,
#                               rolling, haproxy) are there, installed with apt-get when missing
#                               and we are root; else fails naming the packages
#   cl_galera_up DIR N          N-node MariaDB Galera cluster (rsync SST); CL_MY_PORTS[i], CL_MY_PIDS[i]
#   cl_galera_kill I            kill -9 node I
#   cl_pg_up DIR                PostgreSQL primary + hot standby (pg_basebackup, synchronous);
#                               CL_PG_PORTS=(primary standby), CL_PG_DATA=(dir dir)
#   cl_pg_fail_over             stop the primary (immediate, like a crash) and promote the standby
#                               (cl_pg_crash_primary, then cl_pg_promote_standby)
#   cl_apijet_up DIR I DB [REPLICAS [PORT]]   apijet instance I (instance_id I, shared
#                               token_secret, haproxy's X-Forwarded-For trusted; CL_API_ENV: more
#                               VAR=VALUE words for it); CL_API_PORTS[I], CL_API_PIDS[I]
#   cl_haproxy_up DIR           haproxy round-robin over every started instance, by their
#                               /health; CL_PROXY_PORT
#   lib-patroni.sh, lib-spider.sh: the Patroni and Spider topologies (sourced at the end)
#   cl_down                     stop all of the above (safe to call twice)
#   cl_watchdog PID SECONDS     TERM the calling script after SECONDS (a background job)
#   cl_stop_jobs                stop every background job the calling script still has (a
#                               watchdog, a load generator): call it from the EXIT trap, so that
#                               nothing outlives the script or holds its standard output
#
# Every server leaves a pid file in its directory (mysqld.pid, postmaster.pid, apijetN.pid,
# haproxy.pid, patroni.pid, etcd.pid), so scripts/cluster/down.sh can stop what a killed script
# left behind.

CL_GALERA_LIB=${CL_GALERA_LIB:-/usr/lib/galera/libgalera_smm.so}
CL_WAIT=${CL_WAIT:-90}
CL_TOKEN_SECRET=${CL_TOKEN_SECRET:-cluster-test-secret-shared-by-all-instances}
CL_MY_PORTS=() CL_MY_PIDS=() CL_MY_DIRS=()
CL_PG_PORTS=() CL_PG_DATA=() CL_PG_DIR=""
CL_API_PORTS=() CL_API_PIDS=() CL_API_ENV=()
CL_PROXY_PORT="" CL_PROXY_PID=""

cl_log() { printf '[cluster] %s\n' "$*" >&2; }

# The apijet binary: $APIJET_BIN, else the debug build in cargo's own target directory, built
# on demand (scripts/lib/cargo.sh asks cargo where that is: CARGO_TARGET_DIR, build.target-dir,
# never an assumed ./target).
cl_apijet_bin() {
  if [ -n "${APIJET_BIN:-}" ]; then
    printf '%s' "$APIJET_BIN"
    return
  fi
  cargo build --quiet --bin apijet >&2 || return 1
  cargo_bin debug | tr -d '\n'
}

# The Debian packages topology $1 needs that are missing here, one per line.
cl_missing_packages() {
  local t=$1
  command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || echo haproxy
  command -v python3 >/dev/null 2>&1 || echo python3
  command -v curl >/dev/null 2>&1 || echo curl
  case "$t" in
  galera | spider)
    db_have_mariadb || printf '%s\n' mariadb-server mariadb-client
    ;;
  postgres | patroni | rolling)
    [ -n "$(db_find_pg_bin)" ] && command -v psql >/dev/null 2>&1 || echo postgresql
    ;;
  esac
  case "$t" in
  galera)
    [ -f "$CL_GALERA_LIB" ] || echo galera-4
    command -v rsync >/dev/null 2>&1 || echo rsync
    ;;
  patroni)
    command -v patroni >/dev/null 2>&1 || echo patroni
    command -v etcd >/dev/null 2>&1 || echo etcd-server
    ;;
  spider)
    [ -f "$CL_SPIDER_PLUGIN" ] || echo mariadb-plugin-spider
    ;;
  esac
}

# Fails (with why) when a tool topology $1 needs is missing and cannot be installed (we are not
# root, or apt-get failed); under CI this is an error, never a skip.
cl_require() {
  local missing
  mapfile -t missing < <(cl_missing_packages "${1:-}")
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -eq 0 ]; then
    cl_log "installing ${missing[*]} with apt-get"
    DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}" >/dev/null 2>&1 ||
      { apt-get update >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}" >/dev/null; } ||
      true
    mapfile -t missing < <(cl_missing_packages "${1:-}")
    [ ${#missing[@]} -eq 0 ] && return 0
  fi
  cl_log "missing: ${missing[*]} (as root: apt-get install ${missing[*]})"
  return 1
}

cl_my() { mariadb --no-defaults -h 127.0.0.1 -P "$1" -u root -N -B -e "$2"; }

# Prints node $1's (index) wsrep state and cluster size, tab-separated.
cl_galera_state() {
  cl_my "${CL_MY_PORTS[$1]}" "SHOW STATUS WHERE Variable_name IN ('wsrep_local_state_comment', 'wsrep_cluster_size')" \
    2>/dev/null | sort | cut -f2 | paste -s -
}

cl_galera_synced() { [ "$(cl_galera_state "$1")" = "$2"$'\t'Synced ]; }

# Waits until node $1 (index) is synced in a primary component of $2 nodes.
cl_galera_wait() {
  local i=$1 want=$2
  if ! db_poll "$CL_WAIT" 1 "kill -0 ${CL_MY_PIDS[$i]} 2>/dev/null" cl_galera_synced "$i" "$want"; then
    tail -n 40 "${CL_MY_DIRS[$i]}/server.log" >&2 || true
    cl_log "Galera node $i not synced in a cluster of $want within ${CL_WAIT}s (size, state: $(cl_galera_state "$i"))"
    return 1
  fi
}

# The user the Galera nodes run as: as root, `mysql`, since the rsync daemon that receives a state
# transfer drops root privileges to `nobody` and could not write a root-owned data directory.
cl_galera_user() {
  if [ "$(id -u)" -eq 0 ] && id mysql >/dev/null 2>&1; then echo mysql; else id -un; fi
}

cl_galera_up() {
  local dir=$1 n=${2:-3} ports i gcomm="" mariadbd user
  mariadbd=$(command -v mariadbd || echo /usr/sbin/mariadbd)
  user=$(cl_galera_user)
  chmod 755 "$dir"
  # Per node: SQL, group communication, incremental state transfer, snapshot state transfer.
  mapfile -t ports < <(db_free_ports $((4 * n)))
  for ((i = 0; i < n; i++)); do
    gcomm+="${gcomm:+,}127.0.0.1:${ports[$((4 * i + 1))]}"
  done
  for ((i = 0; i < n; i++)); do
    local d=$dir/galera$i sql=${ports[$((4 * i))]} gm=${ports[$((4 * i + 1))]}
    local ist=${ports[$((4 * i + 2))]} sst=${ports[$((4 * i + 3))]} address=gcomm://$gcomm
    mkdir -p "$d/data" "$d/tmp"
    chown -R "$user" "$d"
    CL_MY_DIRS[i]=$d
    CL_MY_PORTS[i]=$sql
    if [ "$i" -eq 0 ]; then
      if ! mariadb-install-db --no-defaults --datadir="$d/data" --user="$user" \
        --auth-root-authentication-method=normal --skip-test-db >"$d/install.log" 2>&1; then
        cat "$d/install.log" >&2
        return 1
      fi
      address=gcomm://
    fi
    # Short failure-detection timeouts: a killed node leaves the cluster in seconds, not the
    # default ~15 s during which the survivors hold every commit.
    "$mariadbd" --no-defaults --datadir="$d/data" --port="$sql" --bind-address=127.0.0.1 \
      --socket="$d/mysqld.sock" --pid-file="$d/mysqld.pid" --tmpdir="$d/tmp" --user="$user" \
      --log-error="$d/server.log" --default-time-zone=+00:00 --skip-name-resolve \
      --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
      --innodb-buffer-pool-size=64M --innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 \
      --binlog-format=ROW --default-storage-engine=InnoDB --innodb-autoinc-lock-mode=2 \
      --wsrep-on=ON --wsrep-provider="$CL_GALERA_LIB" --wsrep-cluster-name=apijet \
      --wsrep-cluster-address="$address" --wsrep-node-name="node$i" \
      --wsrep-node-address="127.0.0.1:$gm" --wsrep-node-incoming-address="127.0.0.1:$sql" \
      --wsrep-sst-method=rsync --wsrep-sst-receive-address="127.0.0.1:$sst" \
      --wsrep-provider-options="gmcast.listen_addr=tcp://127.0.0.1:$gm;ist.recv_addr=127.0.0.1:$ist;gcache.size=64M;evs.keepalive_period=PT0.5S;evs.inactive_check_period=PT0.5S;evs.suspect_timeout=PT3S;evs.inactive_timeout=PT5S;evs.install_timeout=PT5S" \
      </dev/null >/dev/null 2>&1 &
    CL_MY_PIDS[i]=$!
    cl_galera_wait "$i" $((i + 1)) || return 1
    cl_log "Galera node $i synced on 127.0.0.1:$sql"
  done
}

cl_galera_kill() {
  kill -KILL "${CL_MY_PIDS[$1]}" 2>/dev/null || true
  wait "${CL_MY_PIDS[$1]}" 2>/dev/null || true
}

cl_pg() { "$DB_PG_BIN/psql" -X -q -At -h 127.0.0.1 -p "$1" -U postgres -d postgres -c "$2"; }
cl_pg_is() { [ "$(cl_pg "$1" "$2" 2>/dev/null)" = "$3" ]; } # PORT QUERY EXPECTED

# Waits until the server on port $1 answers; $2 = the data directory (for its log).
cl_pg_wait() {
  if ! db_poll "$CL_WAIT" 1 true "$DB_PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$1" -U postgres; then
    tail -n 30 "$2/../server.log" >&2 || true
    cl_log "PostgreSQL on 127.0.0.1:$1 not ready within ${CL_WAIT}s"
    return 1
  fi
}

cl_pg_start() { # DATA PORT EXTRA-OPTIONS
  db_as_pg "$DB_PG_BIN/pg_ctl" -D "$1" -l "$1/../server.log" -W \
    -o "-p $2 -c listen_addresses=127.0.0.1 -c unix_socket_directories=$1/.. -c fsync=off -c full_page_writes=off -c TimeZone=UTC -c wal_level=replica -c max_wal_senders=4 -c hot_standby=on $3" \
    start >/dev/null
}

cl_pg_up() {
  local dir=$1 ports
  DB_PG_BIN=$(db_find_pg_bin)
  [ -n "$DB_PG_BIN" ] || { cl_log "PostgreSQL binaries not found"; return 1; }
  mapfile -t ports < <(db_free_ports 2)
  CL_PG_DIR=$dir
  mkdir -p "$dir/primary" "$dir/standby"
  if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin postgres
    chmod 755 "$dir"
    chown postgres: "$dir/primary" "$dir/standby"
  fi
  if ! db_as_pg "$DB_PG_BIN/initdb" -D "$dir/primary/data" -U postgres -A trust -E UTF8 --locale=C \
    --no-sync >"$dir/primary/initdb.log" 2>&1; then
    cat "$dir/primary/initdb.log" >&2
    return 1
  fi
  CL_PG_PORTS=("${ports[0]}" "${ports[1]}")
  CL_PG_DATA=("$dir/primary/data" "$dir/standby/data")
  # Synchronous replication to the standby: a commit is acknowledged once the standby has it
  # (and, for apijet sessions with read replicas, has applied it). Given on the command line of
  # the primary only, so the promoted standby does not wait for a standby of its own.
  cl_pg_start "${CL_PG_DATA[0]}" "${ports[0]}" "-c synchronous_standby_names=* -c synchronous_commit=on" ||
    return 1
  cl_pg_wait "${ports[0]}" "${CL_PG_DATA[0]}" || return 1
  if ! db_as_pg "$DB_PG_BIN/pg_basebackup" -h 127.0.0.1 -p "${ports[0]}" -U postgres \
    -D "${CL_PG_DATA[1]}" -R -X stream -c fast >"$dir/standby/basebackup.log" 2>&1; then
    cat "$dir/standby/basebackup.log" >&2
    return 1
  fi
  cl_pg_start "${CL_PG_DATA[1]}" "${ports[1]}" "" || return 1
  cl_pg_wait "${ports[1]}" "${CL_PG_DATA[1]}" || return 1
  if ! db_poll "$CL_WAIT" 1 true cl_pg_is "${ports[0]}" "SELECT sync_state FROM pg_stat_replication" sync; then
    cl_log "the standby did not become a synchronous standby within ${CL_WAIT}s"
    return 1
  fi
  cl_log "PostgreSQL primary on 127.0.0.1:${ports[0]}, synchronous hot standby on 127.0.0.1:${ports[1]}"
}

cl_pg_fail_over() { cl_pg_crash_primary && cl_pg_promote_standby; }
cl_pg_crash_primary() {
  db_as_pg "$DB_PG_BIN/pg_ctl" -D "${CL_PG_DATA[0]}" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
}
cl_pg_promote_standby() {
  db_as_pg "$DB_PG_BIN/pg_ctl" -D "${CL_PG_DATA[1]}" -w -t 30 promote >/dev/null
}

cl_apijet_up() {
  local dir=$1 i=$2 db=$3 replicas=${4:-} port=${5:-} bin
  bin=$(cl_apijet_bin) || return 1
  [ -n "$port" ] || port=$(db_free_ports 1)
  mkdir -p "$dir"
  # CL_DIR marks the process as this topology's for scripts/cluster/down.sh. haproxy, on this
  # address, adds X-Forwarded-For: the instances believe it (setting trusted_proxies).
  env CL_DIR="$dir" APIJET_DB="$db" APIJET_LISTEN="127.0.0.1:$port" APIJET_TOKEN_SECRET="$CL_TOKEN_SECRET" \
    APIJET_INSTANCE_ID="$i" APIJET_READ_REPLICAS="$replicas" APIJET_POOL_SIZE=4 \
    APIJET_STATEMENT_TIMEOUT_MS=10000 APIJET_TRUSTED_PROXIES=127.0.0.1 "${CL_API_ENV[@]}" \
    "$bin" serve </dev/null >>"$dir/apijet$i.log" 2>&1 &
  CL_API_PIDS[i]=$!
  CL_API_PORTS[i]=$port
  echo "${CL_API_PIDS[$i]}" >"$dir/apijet$i.pid"
  if ! db_poll "$CL_WAIT" 0.2 "kill -0 ${CL_API_PIDS[$i]} 2>/dev/null" curl -s -o /dev/null "http://127.0.0.1:$port/"; then
    tail -n 20 "$dir/apijet$i.log" >&2
    cl_log "apijet instance $i did not start"
    return 1
  fi
  cl_log "apijet instance $i on 127.0.0.1:$port (db $db${replicas:+, replicas $replicas})"
}

cl_haproxy_up() {
  local dir=$1 i
  CL_PROXY_PORT=$(db_free_ports 1)
  mkdir -p "$dir"
  {
    printf 'global\n  maxconn 512\n'
    printf 'defaults\n  mode http\n  timeout connect 2s\n  timeout client 30s\n  timeout server 30s\n'
    printf '  option http-server-close\n  option forwardfor\n  retries 2\n  option redispatch\n'
    printf 'frontend apijet\n  bind 127.0.0.1:%s\n  default_backend instances\n' "$CL_PROXY_PORT"
    printf 'backend instances\n  balance roundrobin\n  http-response set-header X-Apijet-Server %%[srv_name]\n'
    # An instance that drains before it stops answers /health with 503: out of rotation.
    printf '  option httpchk GET /health\n  http-check expect status 200\n'
    for i in "${!CL_API_PORTS[@]}"; do
      printf '  server apijet%s 127.0.0.1:%s check inter %s fall 2 rise 2\n' "$i" "${CL_API_PORTS[$i]}" "${CL_CHECK_INTER:-1s}"
    done
  } >"$dir/haproxy.cfg"
  haproxy -f "$dir/haproxy.cfg" -db </dev/null >"$dir/haproxy.log" 2>&1 &
  CL_PROXY_PID=$!
  echo "$CL_PROXY_PID" >"$dir/haproxy.pid"
  if ! db_poll 10 0.2 "kill -0 $CL_PROXY_PID 2>/dev/null" curl -s -o /dev/null "http://127.0.0.1:$CL_PROXY_PORT/"; then
    cat "$dir/haproxy.log" >&2
    cl_log "haproxy did not start"
    return 1
  fi
  cl_log "haproxy on 127.0.0.1:$CL_PROXY_PORT over ${#CL_API_PORTS[@]} instances"
}

cl_stop_pid() {
  local pid=$1 waited=0
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt 100 ]; do
    sleep 0.1
    waited=$((waited + 1))
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# TERMs the calling script (pid $1) after $2 seconds: run it as a background job
# (`cl_watchdog $$ SECONDS </dev/null >/dev/null 2>&1 &`). It takes its own sleep down when it
# is stopped (cl_stop_jobs), so that no sleep outlives the script, holds its standard output,
# or later signals a process that took over its pid.
# shellcheck disable=SC2317  # the trap's command
cl_watchdog() {
  local nap
  trap 'kill "$nap" 2>/dev/null; exit 0' TERM
  sleep "$2" &
  nap=$!
  wait "$nap" && kill -TERM "$1"
}

cl_stop_jobs() {
  local p
  for p in $(jobs -p); do cl_stop_pid "$p"; done
}

cl_down() {
  local p d
  cl_stop_pid "$CL_PROXY_PID"
  CL_PROXY_PID=""
  # SIGINT: an instance stops without draining (nothing is left to send it requests), all of
  # them at once.
  for p in "${CL_API_PIDS[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  for p in "${CL_API_PIDS[@]}"; do cl_stop_pid "$p"; done
  CL_API_PIDS=()
  for p in "${CL_MY_PIDS[@]}"; do cl_stop_pid "$p"; done
  CL_MY_PIDS=()
  for d in "${CL_PG_DATA[@]}"; do
    if [ -f "$d/postmaster.pid" ]; then
      db_as_pg "$DB_PG_BIN/pg_ctl" -D "$d" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
    fi
  done
  CL_PG_DATA=()
  cl_patroni_down
  cl_spider_down
}

# shellcheck source=scripts/lib/cargo.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/cargo.sh"
# shellcheck source=scripts/cluster/lib-patroni.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib-patroni.sh"
# shellcheck source=scripts/cluster/lib-spider.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib-spider.sh"
