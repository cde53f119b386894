#!/usr/bin/env bash
# Brings a local topology up, prints how to reach it, keeps it up for SECONDS (default 600) or
# until Ctrl-C, then takes everything down and removes its files:
#
#   bash scripts/cluster/up.sh galera   [SECONDS]   3-node MariaDB Galera + 2 apijet + haproxy
#   bash scripts/cluster/up.sh postgres [SECONDS]   PostgreSQL primary + synchronous hot standby
#                                                   + 2 apijet (reads on the standby) + haproxy
#   bash scripts/cluster/up.sh patroni  [SECONDS]   3 PostgreSQL nodes under Patroni (etcd) + haproxy by
#                                                   Patroni's checks + 2 apijet (through it / a host list)
#   bash scripts/cluster/up.sh spider   [SECONDS]   MariaDB Spider: a head + 3 data nodes, the demo
#                                                   tables sharded by HASH(id) + 2 apijet on the head
#   bash scripts/cluster/up.sh haproxy DB_URL [SECONDS]
#                                                   2 apijet over an existing database + haproxy
#
# Everything listens on loopback (free ports; Spider's data nodes on 127.0.0.2-4), lives in a
# mktemp directory under /tmp, and the demo dataset is loaded into the new databases. The URLs
# apijet needs are printed on standard output as `db=…` (and `read_replicas=…`) lines. The instances share token_secret and have
# instance ids 0 and 1. To fail a server by hand while it runs: `kill -9 PID` of a Galera node,
# or the pg_ctl commands printed for PostgreSQL.
set -euo pipefail
cd "$(dirname "$0")/../.."

topology=${1:-}
case "$topology" in
galera | postgres | patroni | spider) seconds=${2:-600} ;;
haproxy)
  [ -n "${2:-}" ] || { echo "usage: $0 haproxy DB_URL [SECONDS]" >&2; exit 2; }
  seconds=${3:-600}
  ;;
*)
  echo "usage: $0 galera|postgres|patroni|spider [SECONDS] | haproxy DB_URL [SECONDS]" >&2
  exit 2
  ;;
esac

# shellcheck source=scripts/lib/db.sh
source scripts/lib/db.sh
# shellcheck source=scripts/cluster/lib.sh
source scripts/cluster/lib.sh

DIR=""
# shellcheck disable=SC2317  # invoked by the trap
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  cl_log "taking the $topology topology down"
  cl_down
  # The sleep that keeps the topology up, when Ctrl-C or a TERM ended the wait.
  cl_stop_jobs
  [ -n "$DIR" ] && rm -rf "$DIR"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 0' INT TERM

cl_require "$topology"
bin=$(cl_apijet_bin)
export APIJET_BIN=$bin
DIR=$(mktemp -d /tmp/apijet-cluster.XXXXXX)
cl_log "files in $DIR (if this script is killed: bash scripts/cluster/down.sh $DIR)"

case "$topology" in
galera)
  cl_galera_up "$DIR" 3
  cl_my "${CL_MY_PORTS[0]}" "CREATE DATABASE apijet"
  hosts() { local i s=""; for i in 0 1 2; do s+="${s:+,}127.0.0.1:${CL_MY_PORTS[$((($1 + i) % 3))]}"; done; printf '%s' "$s"; }
  "$bin" demo --db "mysql://root@$(hosts 0)/apijet" >/dev/null
  cl_apijet_up "$DIR" 0 "mysql://root@$(hosts 0)/apijet"
  cl_apijet_up "$DIR" 1 "mysql://root@$(hosts 1)/apijet"
  for i in 0 1 2; do
    cl_log "Galera node $i: mariadb -h 127.0.0.1 -P ${CL_MY_PORTS[$i]} -u root apijet   (pid ${CL_MY_PIDS[$i]})"
  done
  ;;
postgres)
  cl_pg_up "$DIR"
  p=127.0.0.1:${CL_PG_PORTS[0]} s=127.0.0.1:${CL_PG_PORTS[1]}
  "$bin" demo --db "postgres://postgres@$p/postgres" >/dev/null
  for i in 0 1; do
    cl_apijet_up "$DIR" "$i" "postgres://postgres@$p,$s/postgres?target_session_attrs=read-write" \
      "postgres://postgres@$s/postgres"
  done
  cl_log "primary: psql -h 127.0.0.1 -p ${CL_PG_PORTS[0]} -U postgres; standby: -p ${CL_PG_PORTS[1]}"
  cl_log "fail over: $DB_PG_BIN/pg_ctl -D ${CL_PG_DATA[0]} -m immediate stop; $DB_PG_BIN/pg_ctl -D ${CL_PG_DATA[1]} promote  (as user postgres)"
  ;;
patroni)
  cl_patroni_up "$DIR" 3
  primary=postgres://postgres@127.0.0.1:$CL_PAT_PRIMARY_PORT/postgres
  replicas=postgres://postgres@127.0.0.1:$CL_PAT_REPLICA_PORT/postgres
  list="postgres://postgres@$(cl_patroni_hosts)/postgres?target_session_attrs"
  "$bin" demo --db "$primary" >/dev/null
  # Instance 0 through haproxy (Patroni's health checks pick the primary), instance 1 through a
  # libpq host list (target_session_attrs picks it): two ways to the same failover.
  cl_apijet_up "$DIR" 0 "$primary" "$replicas"
  cl_apijet_up "$DIR" 1 "$list=read-write" "$list=read-only"
  printf 'db=%s\n' "$primary" "$list=read-write"
  printf 'read_replicas=%s\n' "$replicas" "$list=read-only"
  for i in "${!CL_PG_PORTS[@]}"; do
    cl_log "node $i: psql -h 127.0.0.1 -p ${CL_PG_PORTS[$i]} -U postgres; Patroni: curl -s 127.0.0.1:${CL_PAT_REST_PORTS[$i]}/cluster (pid ${CL_PAT_PIDS[$i]})"
  done
  cl_log "fail over: kill -9 the leader's Patroni and PostgreSQL; Patroni promotes a replica within ${CL_PAT_TTL} s"
  ;;
spider)
  cl_spider_up "$DIR" 3
  cl_spider_sql head "CREATE DATABASE apijet"
  db="mysql://root@127.0.0.1:$CL_SPIDER_HEAD_PORT/apijet"
  "$bin" demo --db "$db" >/dev/null
  cl_spider_shard apijet
  cl_spider_durable
  cl_apijet_up "$DIR" 0 "$db"
  cl_apijet_up "$DIR" 1 "$db"
  printf 'db=%s\n' "$db"
  cl_log "head: mariadb -h 127.0.0.1 -P $CL_SPIDER_HEAD_PORT -u root apijet (pid ${CL_SPIDER_PIDS[0]})"
  for i in "${!CL_SPIDER_DATA[@]}"; do
    cl_log "data node $i (shard p$i): mariadb -h ${CL_SPIDER_DATA[$i]%:*} -P ${CL_SPIDER_DATA[$i]##*:} -u root apijet (pid ${CL_SPIDER_PIDS[$((i + 1))]})"
  done
  ;;
haproxy)
  cl_apijet_up "$DIR" 0 "$2"
  cl_apijet_up "$DIR" 1 "$2"
  ;;
esac
cl_haproxy_up "$DIR"
cl_log "apijet through haproxy: http://127.0.0.1:$CL_PROXY_PORT  (instances: ${CL_API_PORTS[*]}); up for ${seconds}s, Ctrl-C to stop"
sleep "$seconds" &
wait $! || true
