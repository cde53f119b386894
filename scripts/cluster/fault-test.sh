#!/usr/bin/env bash
# Fault test of two apijet instances behind haproxy over a replicated database:
#
#   bash scripts/cluster/fault-test.sh galera     3-node MariaDB Galera; kill -9 one node
#   bash scripts/cluster/fault-test.sh postgres   primary + synchronous hot standby; stop the
#                                                 primary (immediate mode) and promote the standby
#   bash scripts/cluster/fault-test.sh patroni    3 PostgreSQL nodes under Patroni (etcd, haproxy
#                                                 by Patroni's health checks); kill -9 the leader
#                                                 (its Patroni and PostgreSQL): Patroni promotes
#   bash scripts/cluster/fault-test.sh spider     MariaDB sharded with Spider (a head and three
#                                                 data nodes, HASH(id)); kill -9 data node 1, and
#                                                 restart it FT_DOWN_FOR (6) seconds later
#
# Writers (scripts/cluster/writers.py) log in through haproxy and POST new rows through both
# instances at a steady rate (FT_WRITERS writers × FT_RATE per second, FT_SECONDS in all); the
# fault comes FT_KILL_AFTER seconds in. Then every acknowledged write (HTTP 200, code 200, an id)
# must be in the database exactly once. The last line is
#   cluster: N acknowledged writes, 0 lost, 0 duplicated, first success after failover in X s
# and the exit status is 0 only when nothing was lost or duplicated and both instances wrote again
# after the fault. Everything runs on 127.0.0.1 under a mktemp directory, is bounded
# (FT_TIMEOUT seconds in all) and is stopped and removed on exit, success, failure or Ctrl-C:
# every server, the load and the watchdog end before the script does, so
# `r=$(bash scripts/cluster/fault-test.sh galera | tail -1)` returns as soon as it ends. The
# script's last words on stderr are `[cluster] fault test done in N s (exit STATUS)`.
set -euo pipefail
cd "$(dirname "$0")/../.."

topology=${1:-}
case "$topology" in
galera | postgres | patroni | spider) ;;
*)
  echo "usage: $0 galera|postgres|patroni|spider" >&2
  exit 2
  ;;
esac

FT_WRITERS=${FT_WRITERS:-4}
FT_RATE=${FT_RATE:-10}
FT_SECONDS=${FT_SECONDS:-24}
FT_KILL_AFTER=${FT_KILL_AFTER:-8}
FT_TIMEOUT=${FT_TIMEOUT:-420}
FT_DOWN_FOR=${FT_DOWN_FOR:-6}

# shellcheck source=scripts/lib/db.sh
source scripts/lib/db.sh
# shellcheck source=scripts/cluster/lib.sh
source scripts/cluster/lib.sh

DIR=""
report_args=()
# The moment the failed server is gone (its processes killed and reaped): the failover is
# timed from here, and writes sent before it may still land on it.
fault_done() { python3 -c 'import time; print(time.time())' >"$DIR/kill-time"; }
# shellcheck disable=SC2317  # invoked by the trap
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  cl_down
  # The watchdog and the load, when a failure left them running.
  cl_stop_jobs
  if [ "$rc" -ne 0 ] && [ -n "$DIR" ] && [ -n "${FT_KEEP_LOGS:-}" ]; then
    cl_log "logs kept in $DIR"
  elif [ -n "$DIR" ]; then
    rm -rf "$DIR"
  fi
  cl_log "fault test done in ${SECONDS} s (exit $rc)"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'cl_log "timed out after ${FT_TIMEOUT}s"; exit 124' TERM

cl_require "$topology"
cl_watchdog $$ "$FT_TIMEOUT" </dev/null >/dev/null 2>&1 &

bin=$(cl_apijet_bin)
export APIJET_BIN=$bin
# Under /tmp: the postgres user must reach it.
DIR=$(mktemp -d /tmp/apijet-cluster.XXXXXX)
run=$(date +%s)

if [ "$topology" = galera ]; then
  cl_galera_up "$DIR" 3
  cl_my "${CL_MY_PORTS[0]}" "CREATE DATABASE apijet"
  url() { # the node list starting at node $1
    local i hosts=""
    for i in 0 1 2; do
      hosts+="${hosts:+,}127.0.0.1:${CL_MY_PORTS[$((($1 + i) % 3))]}"
    done
    printf 'mysql://root@%s/apijet' "$hosts"
  }
  "$bin" demo --db "$(url 0)" >/dev/null
  # Instance 0 writes on node 0 and reads on node 1; instance 1 writes on node 1, reads on node 2.
  # Killing node 1 takes away instance 1's primary and instance 0's replica.
  cl_apijet_up "$DIR" 0 "$(url 0)" "mysql://root@127.0.0.1:${CL_MY_PORTS[1]}/apijet"
  cl_apijet_up "$DIR" 1 "$(url 1)" "mysql://root@127.0.0.1:${CL_MY_PORTS[2]}/apijet"
  fault() { cl_galera_kill 1 && fault_done; }
  rows() { cl_my "${CL_MY_PORTS[0]}" "SELECT content, id FROM apijet.Comment WHERE content LIKE 'ft-$run-%'"; }
  describe="kill -9 Galera node 1 of 3"
elif [ "$topology" = spider ]; then
  cl_spider_up "$DIR" 3
  cl_spider_sql head "CREATE DATABASE apijet"
  db="mysql://root@127.0.0.1:$CL_SPIDER_HEAD_PORT/apijet"
  "$bin" demo --db "$db" >/dev/null
  cl_spider_shard apijet
  # From here on a commit on a data node is on its disk before it returns.
  cl_spider_durable
  # Both instances on the head; Spider sends each row to the data node HASH(id) names.
  cl_apijet_up "$DIR" 0 "$db"
  cl_apijet_up "$DIR" 1 "$db"
  fault() { cl_spider_kill 1 && fault_done; }
  after_fault() {
    sleep "$FT_DOWN_FOR"
    # When the restart began and when the node answered again.
    python3 -c 'import time; print(time.time())' >"$DIR/restart-time"
    cl_spider_start 1
    python3 -c 'import time; print(time.time())' >>"$DIR/restart-time"
    cl_log "data node 1 restarted after ${FT_DOWN_FOR} s; XA transactions it held in doubt: $(cl_spider_resolve)"
  }
  rows() { cl_spider_sql head "SELECT content, id FROM apijet.Comment WHERE content LIKE 'ft-$run-%'"; }
  report_args=(--shards 3 --lost-shard 1 --restart-file "$DIR/restart-time")
  describe="kill -9 Spider data node 1 of 3 (shard p1), restart it ${FT_DOWN_FOR} s later"
elif [ "$topology" = patroni ]; then
  cl_patroni_up "$DIR" 3
  primary=postgres://postgres@127.0.0.1:$CL_PAT_PRIMARY_PORT/postgres
  list="postgres://postgres@$(cl_patroni_hosts)/postgres?target_session_attrs"
  "$bin" demo --db "$primary" >/dev/null
  # Instance 0 through haproxy (writes where GET /primary answers 200, reads where /replica
  # does), instance 1 through the host list (target_session_attrs picks the primary for writes,
  # a standby for reads). Neither is told about the failover: they find the new leader.
  cl_apijet_up "$DIR" 0 "$primary" "postgres://postgres@127.0.0.1:$CL_PAT_REPLICA_PORT/postgres?application_name=apijet-replica"
  cl_apijet_up "$DIR" 1 "$list=read-write" "$list=read-only&application_name=apijet-replica"
  leader=$(cl_patroni_leader)
  fault() { cl_patroni_crash "$leader" && fault_done; }
  # The new leader, as Patroni says, and how long the election took.
  after_fault() {
    local new
    new=$(cl_patroni_wait_leader 60 "$leader") || return 1
    cl_log "Patroni promoted node $new (node $leader was the leader) $(python3 -c "import time; print(f'{time.time() - $(cat "$DIR/kill-time"):.2f}')") s after the kill"
  }
  rows() { cl_pg "$CL_PAT_PRIMARY_PORT" "SELECT content, id FROM \"Comment\" WHERE content LIKE 'ft-$run-%'" | tr '|' '\t'; }
  describe="kill -9 the Patroni leader (node $leader: its Patroni daemon and PostgreSQL)"
else
  cl_pg_up "$DIR"
  primary=127.0.0.1:${CL_PG_PORTS[0]}
  standby=127.0.0.1:${CL_PG_PORTS[1]}
  "$bin" demo --db "postgres://postgres@$primary/postgres" >/dev/null
  # Both instances: writes on whichever host accepts them (instance 1 lists the standby first:
  # target_session_attrs=read-write skips it until it is promoted), reads on the standby.
  replica="postgres://postgres@$standby/postgres?application_name=apijet-replica"
  cl_apijet_up "$DIR" 0 "postgres://postgres@$primary,$standby/postgres?target_session_attrs=read-write" "$replica"
  cl_apijet_up "$DIR" 1 "postgres://postgres@$standby,$primary/postgres?target_session_attrs=read-write" "$replica"
  # The primary's crash is the fault; the promotion that follows is part of the failover.
  fault() { cl_pg_crash_primary && fault_done && cl_pg_promote_standby; }
  rows() { cl_pg "${CL_PG_PORTS[1]}" "SELECT content, id FROM \"Comment\" WHERE content LIKE 'ft-$run-%'" | tr '|' '\t'; }
  describe="stop the primary (immediate) and promote the standby"
fi
cl_haproxy_up "$DIR"

instances="http://127.0.0.1:${CL_API_PORTS[0]},http://127.0.0.1:${CL_API_PORTS[1]}"
cl_log "$FT_WRITERS writers × $FT_RATE/s for ${FT_SECONDS}s; at ${FT_KILL_AFTER}s: $describe"
python3 scripts/cluster/writers.py run --instances "$instances" \
  --proxy "http://127.0.0.1:$CL_PROXY_PORT" --writers "$FT_WRITERS" --rate "$FT_RATE" \
  --seconds "$FT_SECONDS" --run "$run" --out "$DIR/load" &
load=$!
sleep "$FT_KILL_AFTER"
if [ "$topology" = postgres ] || [ "$topology" = patroni ]; then
  # The reads of the load so far went to the standbys, not the primary.
  standbys=("${CL_PG_PORTS[1]}")
  if [ "$topology" = patroni ]; then
    standbys=()
    for i in "${!CL_PG_PORTS[@]}"; do [ "$i" = "$leader" ] || standbys+=("${CL_PG_PORTS[$i]}"); done
  fi
  replica_reads=0
  for port in "${standbys[@]}"; do
    n=$(cl_pg "$port" "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'apijet-replica'")
    replica_reads=$((replica_reads + n))
  done
  cl_log "connections of the instances' read pools on the standbys: $replica_reads"
  [ "$replica_reads" -gt 0 ] || { cl_log "no read reached a standby"; exit 1; }
fi
fault
cl_log "fault injected: $describe"
if declare -F after_fault >/dev/null; then after_fault || exit 1; fi
load_rc=0
wait "$load" || load_rc=$?
rows >"$DIR/rows.txt"
if [ "$topology" = spider ]; then
  # Settled at the restart; one left would hold its rows locked and invisible.
  in_doubt=0
  for k in 0 1 2; do in_doubt=$((in_doubt + $(cl_spider_sql "$k" "XA RECOVER" | wc -l))); done
  [ "$in_doubt" -eq 0 ] || { cl_log "$in_doubt XA transactions still in doubt"; exit 1; }
fi
report_rc=0
python3 scripts/cluster/writers.py report --out "$DIR/load" --kill-file "$DIR/kill-time" \
  --rows "$DIR/rows.txt" "${report_args[@]}" || report_rc=$?
[ "$load_rc" -eq 0 ] && [ "$report_rc" -eq 0 ]
