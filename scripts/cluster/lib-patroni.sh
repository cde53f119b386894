# shellcheck shell=bash disable=SC2034  # CL_* variables are for the caller
# PostgreSQL under Patroni, for scripts/cluster/*.sh (sourced by lib.sh; see there for the
# conventions: 127.0.0.1, free ports, one directory, bounded waits, pid files, cl_down).
#
#   cl_patroni_up DIR [N]       one etcd member and N (3) PostgreSQL nodes, each run by a Patroni
#                               daemon; Patroni bootstraps one, clones the others from it, and
#                               keeps every replica synchronous (synchronous_mode_strict, as many
#                               synchronous standbys as replicas). Then haproxy in front of them,
#                               routing by Patroni's REST health checks: CL_PAT_PRIMARY_PORT
#                               (GET /primary answers 200) and CL_PAT_REPLICA_PORT (GET /replica).
#                               CL_PG_PORTS[i] (PostgreSQL), CL_PAT_REST_PORTS[i], CL_PAT_PIDS[i]
#   cl_patroni_leader           the index of the node Patroni holds as leader (none: fails)
#   cl_patroni_wait_leader SECONDS [NOT]   waits for a leader (other than node NOT) with its
#                               replicas streaming synchronously; prints its index
#   cl_patroni_crash I          kill -9 node I whole: its Patroni daemon, its postmaster and every
#                               backend (a machine that died), never a clean stop
#   cl_patroni_hosts [ORDER…]   the nodes as a libpq host list, 127.0.0.1:P0,127.0.0.1:P1,…
#
# Leader election: the leader holds a key in etcd with a ttl of CL_PAT_TTL (10) seconds,
# renewed every loop_wait (1 s); when the leader dies, the key expires and a synchronous replica
# takes it and promotes itself. Patroni's default ttl is 30 s; 10 s keeps the fault test short
# and is still 10 missed renewals, which a busy machine does not miss by accident.

CL_PAT_TTL=${CL_PAT_TTL:-10}
CL_PAT_PIDS=() CL_PAT_REST_PORTS=() CL_PAT_DIRS=()
CL_ETCD_PID="" CL_ETCD_PORT="" CL_ETCD_DATA=""
CL_PAT_PROXY_PID="" CL_PAT_PRIMARY_PORT="" CL_PAT_REPLICA_PORT=""

# The cluster as Patroni's REST API on node $1 (default: the first one alive) describes it:
# one `name role state lag` line per member.
cl_patroni_members() {
  local i
  for i in "${!CL_PAT_REST_PORTS[@]}"; do
    [ -n "${1:-}" ] && [ "$i" != "$1" ] && continue
    curl -s --max-time 2 "http://127.0.0.1:${CL_PAT_REST_PORTS[$i]}/cluster" | python3 -c '
import json, sys
for m in json.load(sys.stdin).get("members", []):
    print(m.get("name"), m.get("role"), m.get("state"), m.get("lag", 0))
' 2>/dev/null && return 0
  done
  return 1
}

cl_patroni_leader() {
  local name
  name=$(cl_patroni_members | awk '$2 == "leader" && $3 == "running" { print $1 }')
  [ -n "$name" ] || return 1
  printf '%s' "${name#node}"
}

# Succeeds when a leader other than node $1 runs with the $2 - 1 other live nodes running as
# synchronous standbys, in Patroni's view and in the leader's pg_stat_replication (what a
# commit waits for); prints the leader.
cl_patroni_healthy() {
  local not=$1 alive=$2 members leader
  members=$(cl_patroni_members) || return 1
  leader=$(awk '$2 == "leader" && $3 == "running" { print $1 }' <<<"$members")
  leader=${leader#node}
  [ -n "$leader" ] && [ "$leader" != "$not" ] || return 1
  [ "$(awk '$2 == "sync_standby" && $3 == "running"' <<<"$members" | wc -l)" -eq $((alive - 1)) ] || return 1
  cl_pg_is "${CL_PG_PORTS[$leader]}" "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync' AND state = 'streaming'" $((alive - 1)) ||
    return 1
  printf '%s' "$leader"
}

cl_patroni_wait_leader() {
  local seconds=$1 not=${2:--1} alive=${#CL_PAT_PIDS[@]} waited=0 leader
  [ "$not" = -1 ] || alive=$((alive - 1))
  while [ "$waited" -lt "$seconds" ]; do
    if leader=$(cl_patroni_healthy "$not" "$alive"); then
      printf '%s' "$leader"
      return 0
    fi
    sleep 1
    waited=$((waited + 1))
  done
  cl_log "no Patroni leader with $((alive - 1)) synchronous replicas within ${seconds}s:"
  cl_patroni_members >&2 || true
  return 1
}

cl_patroni_hosts() {
  local i order=("$@") s=""
  [ ${#order[@]} -gt 0 ] || order=("${!CL_PG_PORTS[@]}")
  for i in "${order[@]}"; do s+="${s:+,}127.0.0.1:${CL_PG_PORTS[$i]}"; done
  printf '%s' "$s"
}

cl_patroni_up() {
  local dir=$1 n=${2:-3} ports i pg_bin user
  pg_bin=$(db_find_pg_bin)
  DB_PG_BIN=$pg_bin
  # Per node: PostgreSQL, Patroni's REST API; then etcd's client and peer ports, haproxy's two.
  mapfile -t ports < <(db_free_ports $((2 * n + 4)))
  CL_ETCD_PORT=${ports[$((2 * n))]}
  CL_PAT_PRIMARY_PORT=${ports[$((2 * n + 2))]}
  CL_PAT_REPLICA_PORT=${ports[$((2 * n + 3))]}
  user=$(id -un)
  if [ "$(id -u)" -eq 0 ]; then
    # Patroni runs PostgreSQL, which refuses to run as root.
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin postgres
    user=postgres
  fi
  chmod 755 "$dir"
  mkdir -p "$dir/etcd"
  # etcd syncs its log to disk on every write, and Patroni writes the leader key every second:
  # on a busy disk a sync took seconds, Patroni's requests timed out and no leader held. Its
  # data goes to memory (nothing here outlives the topology); down.sh finds it by this file.
  CL_ETCD_DATA=$(mktemp -d /dev/shm/apijet-etcd.XXXXXX)
  echo "$CL_ETCD_DATA" >"$dir/etcd/data-dir"
  etcd --name etcd0 --data-dir "$CL_ETCD_DATA" --logger zap --log-outputs "$dir/etcd/etcd.log" \
    --listen-client-urls "http://127.0.0.1:$CL_ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$CL_ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:${ports[$((2 * n + 1))]}" \
    --initial-advertise-peer-urls "http://127.0.0.1:${ports[$((2 * n + 1))]}" \
    --initial-cluster "etcd0=http://127.0.0.1:${ports[$((2 * n + 1))]}" \
    --log-level warn </dev/null >/dev/null 2>&1 &
  CL_ETCD_PID=$!
  echo "$CL_ETCD_PID" >"$dir/etcd/etcd.pid"
  if ! db_poll 30 0.2 "kill -0 $CL_ETCD_PID 2>/dev/null" curl -sf "http://127.0.0.1:$CL_ETCD_PORT/health"; then
    tail -n 20 "$dir/etcd/etcd.log" >&2
    cl_log "etcd did not start"
    return 1
  fi
  for ((i = 0; i < n; i++)); do
    local d=$dir/patroni$i
    CL_PAT_DIRS[i]=$d
    CL_PG_PORTS[i]=${ports[$((2 * i))]}
    CL_PAT_REST_PORTS[i]=${ports[$((2 * i + 1))]}
    mkdir -p "$d"
    cl_patroni_config "$d" "$i" "$n" "$pg_bin" >"$d/patroni.yml"
    chown -R "$user" "$d"
    # CL_DIR marks the daemon as this topology's for scripts/cluster/down.sh. setpriv execs
    # (runuser would stay in between as the parent): the pid is Patroni's own.
    if [ "$user" = postgres ]; then
      setpriv --reuid=postgres --regid=postgres --init-groups \
        env HOME="$d" CL_DIR="$dir" patroni "$d/patroni.yml" </dev/null >"$d/patroni.log" 2>&1 &
    else
      CL_DIR=$dir patroni "$d/patroni.yml" </dev/null >"$d/patroni.log" 2>&1 &
    fi
    CL_PAT_PIDS[i]=$!
    echo "${CL_PAT_PIDS[$i]}" >"$d/patroni.pid"
  done
  local leader
  if ! leader=$(cl_patroni_wait_leader "$CL_WAIT"); then
    for ((i = 0; i < n; i++)); do tail -n 15 "$dir/patroni$i/patroni.log" >&2; done
    return 1
  fi
  cl_log "Patroni: leader node $leader, $((n - 1)) synchronous replicas (PostgreSQL on $(cl_patroni_hosts))"
  cl_patroni_haproxy_up "$dir"
}

# Patroni's configuration of node $2 of $3 in directory $1 ($4: PostgreSQL's binaries).
cl_patroni_config() {
  local d=$1 i=$2 n=$3 pg_bin=$4
  cat <<EOF
scope: apijet
name: node$i
log:
  level: WARNING
restapi:
  listen: 127.0.0.1:${CL_PAT_REST_PORTS[$i]}
  connect_address: 127.0.0.1:${CL_PAT_REST_PORTS[$i]}
etcd3:
  host: 127.0.0.1:$CL_ETCD_PORT
bootstrap:
  dcs:
    ttl: $CL_PAT_TTL
    loop_wait: 1
    retry_timeout: 3
    maximum_lag_on_failover: 1048576
    # A commit returns once every replica has it, and only a synchronous replica may be
    # promoted: a failover loses no acknowledged write. Strict: with no replica left, commits
    # wait instead of going on unreplicated.
    synchronous_mode: true
    synchronous_mode_strict: true
    synchronous_node_count: $((n - 1))
    postgresql:
      use_pg_rewind: false
      use_slots: true
      parameters:
        wal_level: replica
        hot_standby: "on"
        max_wal_senders: 10
        max_replication_slots: 10
        max_connections: 200
  initdb:
    - encoding: UTF8
    - locale: C
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:${CL_PG_PORTS[$i]}
  connect_address: 127.0.0.1:${CL_PG_PORTS[$i]}
  data_dir: $d/data
  bin_dir: $pg_bin
  pgpass: $d/pgpass
  authentication:
    superuser:
      username: postgres
    replication:
      username: postgres
  parameters:
    unix_socket_directories: $d
    TimeZone: UTC
    # Loopback only and a killed process, never a lost machine: the operating system keeps
    # what was written, so fsync only costs time here.
    fsync: "off"
    full_page_writes: "off"
EOF
}

# haproxy in TCP mode over the PostgreSQL nodes, a server up while Patroni's REST API on it
# answers GET /primary (or /replica) with 200; sessions to a server marked down are cut, so no
# pooled connection stays on a demoted primary.
cl_patroni_haproxy_up() {
  local dir=$1 i
  {
    printf 'global\n  maxconn 1024\n'
    printf 'defaults\n  mode tcp\n  timeout connect 2s\n  timeout client 30m\n  timeout server 30m\n'
    printf '  default-server inter 500ms fall 2 rise 1 on-marked-down shutdown-sessions\n'
    for role in primary replica; do
      local port=$CL_PAT_PRIMARY_PORT
      [ "$role" = replica ] && port=$CL_PAT_REPLICA_PORT
      printf 'listen pg_%s\n  bind 127.0.0.1:%s\n  balance roundrobin\n' "$role" "$port"
      printf '  option httpchk GET /%s\n  http-check expect status 200\n' "$role"
      for i in "${!CL_PG_PORTS[@]}"; do
        printf '  server node%s 127.0.0.1:%s check port %s\n' "$i" "${CL_PG_PORTS[$i]}" "${CL_PAT_REST_PORTS[$i]}"
      done
    done
  } >"$dir/haproxy-pg.cfg"
  haproxy -f "$dir/haproxy-pg.cfg" -db </dev/null >"$dir/haproxy-pg.log" 2>&1 &
  CL_PAT_PROXY_PID=$!
  echo "$CL_PAT_PROXY_PID" >"$dir/haproxy-pg.pid"
  if ! db_poll 15 0.5 "kill -0 $CL_PAT_PROXY_PID 2>/dev/null" cl_pg_is "$CL_PAT_PRIMARY_PORT" "SELECT pg_is_in_recovery()" f; then
    cat "$dir/haproxy-pg.log" >&2
    cl_log "haproxy over Patroni did not reach the primary"
    return 1
  fi
  cl_log "haproxy over Patroni: primary on 127.0.0.1:$CL_PAT_PRIMARY_PORT, replicas on 127.0.0.1:$CL_PAT_REPLICA_PORT"
}

cl_patroni_crash() {
  local i=$1 d=${CL_PAT_DIRS[$1]} postmaster children
  postmaster=$(head -n 1 "$d/data/postmaster.pid" 2>/dev/null | tr -dc '0-9')
  children=$([ -n "$postmaster" ] && ps -o pid= --ppid "$postmaster" | tr -s ' \n' ' ')
  # shellcheck disable=SC2086  # a list of pids
  kill -KILL "${CL_PAT_PIDS[$i]}" $postmaster $children 2>/dev/null || true
  wait "${CL_PAT_PIDS[$i]}" 2>/dev/null || true
}

cl_patroni_down() {
  local p d postmaster
  cl_stop_pid "$CL_PAT_PROXY_PID"
  CL_PAT_PROXY_PID=""
  # Patroni stops its PostgreSQL when it is stopped (fast mode); what outlived a crash of the
  # daemon is stopped by its postmaster.pid.
  for p in "${CL_PAT_PIDS[@]}"; do cl_stop_pid "$p"; done
  CL_PAT_PIDS=()
  for d in "${CL_PAT_DIRS[@]}"; do
    if [ -f "$d/data/postmaster.pid" ]; then
      db_as_pg "$DB_PG_BIN/pg_ctl" -D "$d/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
    fi
  done
  CL_PAT_DIRS=()
  cl_stop_pid "$CL_ETCD_PID"
  CL_ETCD_PID=""
  if [ -n "$CL_ETCD_DATA" ]; then rm -rf "$CL_ETCD_DATA"; fi
  CL_ETCD_DATA=""
}
