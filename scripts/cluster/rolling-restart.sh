#!/usr/bin/env bash
# Rolling restart under load: three apijet instances behind haproxy over PostgreSQL, each
# restarted in turn (SIGTERM, then started again on its port) while readers, writers and live
# subscribers go through haproxy (scripts/cluster/rolling.py):
#
#   bash scripts/cluster/rolling-restart.sh
#
# What makes it invisible: an instance that gets SIGTERM drains for drain_ms (RR_DRAIN_MS, 3000)
# before it stops, its /health answering 503 meanwhile, and haproxy checks /health every
# RR_CHECK_INTER (500ms) and takes a server out after two failures; a request that finds the port
# closed is sent to another server (retries, redispatch); live streams end with `event:
# reconnect` and are reopened through haproxy on another instance. The last line is
#   rolling: N requests, 0 failed, M streams resumed
# and the exit status is 0 only when no request failed, streams were resumed, and every stream
# got a live answer after the last instance was back. Everything runs on 127.0.0.1 under a mktemp
# directory and is stopped and removed on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."

RR_DRAIN_MS=${RR_DRAIN_MS:-3000}
RR_CHECK_INTER=${RR_CHECK_INTER:-500ms}
RR_SETTLE=${RR_SETTLE:-3}
RR_TIMEOUT=${RR_TIMEOUT:-300}

# shellcheck source=scripts/lib/db.sh
source scripts/lib/db.sh
# shellcheck source=scripts/cluster/lib.sh
source scripts/cluster/lib.sh

DIR=""
# shellcheck disable=SC2317  # invoked by the trap
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  [ -n "$DIR" ] && touch "$DIR/stop"
  cl_down
  db_stop_all
  cl_stop_jobs
  if [ "$rc" -ne 0 ] && [ -n "$DIR" ] && [ -n "${RR_KEEP_LOGS:-}" ]; then
    cl_log "logs kept in $DIR"
  elif [ -n "$DIR" ]; then
    rm -rf "$DIR"
  fi
  cl_log "rolling restart done in ${SECONDS} s (exit $rc)"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'cl_log "timed out after ${RR_TIMEOUT}s"; exit 124' TERM

cl_require rolling
cl_watchdog $$ "$RR_TIMEOUT" </dev/null >/dev/null 2>&1 &
bin=$(cl_apijet_bin)
export APIJET_BIN=$bin
DIR=$(mktemp -d /tmp/apijet-cluster.XXXXXX)

db_start_postgres "$DIR"
db="postgres://postgres@127.0.0.1:$DB_PG_PORT/postgres"
"$bin" demo --db "$db" >/dev/null
# Short heartbeats: a stream's silence is noticed within seconds.
CL_API_ENV=("APIJET_DRAIN_MS=$RR_DRAIN_MS" "APIJET_LIVE_HEARTBEAT_MS=2000")
for i in 0 1 2; do cl_apijet_up "$DIR" "$i" "$db"; done
CL_CHECK_INTER=$RR_CHECK_INTER cl_haproxy_up "$DIR"

now() { python3 -c 'import time; print(time.time())'; }
now >"$DIR/marks"
python3 scripts/cluster/rolling.py --proxy "http://127.0.0.1:$CL_PROXY_PORT" --readers 4 --writers 2 \
  --streams 6 --stop-file "$DIR/stop" --marks "$DIR/marks" --out "$DIR/failed.txt" &
load=$!
sleep "$RR_SETTLE"
for i in 0 1 2; do
  started=$SECONDS
  pid=${CL_API_PIDS[$i]}
  kill -TERM "$pid"
  # Draining, then finishing what it has (bounded by drain_ms and the 30 s grace for requests
  # in flight; the watchdog bounds the whole run).
  wait "$pid" || { cl_log "instance $i exited with status $? after SIGTERM"; exit 1; }
  cl_apijet_up "$DIR" "$i" "$db" "" "${CL_API_PORTS[$i]}"
  # In service again once haproxy's checks (rise 2) saw it answer.
  sleep 1.5
  now >>"$DIR/marks"
  cl_log "instance $i restarted ($((SECONDS - started)) s from SIGTERM to back in service)"
  sleep "$RR_SETTLE"
done
touch "$DIR/stop"
wait "$load"
