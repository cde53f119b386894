#!/usr/bin/env bash
# Fault test of two apijet instances behind haproxy over a replicated database:
#
#   bash scripts/cluster/fault-test.sh galera     3-node MariaDB Galera; kill -9 one node
#   bash scripts/cluster/fault-test.sh postgres   primary + synchronous hot standby; stop the
#                                                 primary (immediate mode) and promote the standby
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
galera | postgres) ;;
*)
  echo "usage: $0 galera|postgres" >&2
  exit 2
  ;;
esac

FT_WRITERS=${FT_WRITERS:-4}
FT_RATE=${FT_RATE:-10}
FT_SECONDS=${FT_SECONDS:-24}
FT_KILL_AFTER=${FT_KILL_AFTER:-8}
FT_TIMEOUT=${FT_TIMEOUT:-420}

# shellcheck source=scripts/lib/db.sh
source scripts/lib/db.sh
# shellcheck source=scripts/cluster/lib.sh
source scripts/cluster/lib.sh

DIR=""
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

# TERMs this script after $1 seconds. It is one background job that takes its own sleep down
# when it is stopped, and its output goes nowhere: a leftover sleep once held the script's
# standard output open for the whole FT_TIMEOUT after the script had ended.
# shellcheck disable=SC2317  # the trap's command
watchdog() {
  local nap
  trap 'kill "$nap" 2>/dev/null; exit 0' TERM
  sleep "$1" &
  nap=$!
  wait "$nap" && kill -TERM $$
}

cl_require "$topology"
watchdog "$FT_TIMEOUT" </dev/null >/dev/null 2>&1 &

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
  fault() { cl_galera_kill 1; }
  rows() { cl_my "${CL_MY_PORTS[0]}" "SELECT content, id FROM apijet.Comment WHERE content LIKE 'ft-$run-%'"; }
  describe="kill -9 Galera node 1 of 3"
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
  fault() { cl_pg_fail_over; }
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
if [ "$topology" = postgres ]; then
  # The reads of the load so far went to the standby, not the primary.
  replica_reads=$(cl_pg "${CL_PG_PORTS[1]}" "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'apijet-replica'")
  cl_log "connections of the instances' read pools on the standby: $replica_reads"
  [ "$replica_reads" -gt 0 ] || { cl_log "no read reached the standby"; exit 1; }
fi
python3 -c 'import time; print(time.time())' >"$DIR/kill-time"
fault
cl_log "fault injected: $describe"
load_rc=0
wait "$load" || load_rc=$?
rows >"$DIR/rows.txt"
report_rc=0
python3 scripts/cluster/writers.py report --out "$DIR/load" --kill-file "$DIR/kill-time" \
  --rows "$DIR/rows.txt" || report_rc=$?
[ "$load_rc" -eq 0 ] && [ "$report_rc" -eq 0 ]
