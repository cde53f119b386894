#!/usr/bin/env bash
# Per-node figures for the capacity model of docs/scale-out.md: what one request costs each server
# of a topology, in CPU time, measured with wrk on this machine.
#
#   bash scripts/cluster/capacity.sh spider|patroni [SECONDS]
#
# The topology as up.sh builds it (release build recommended: APIJET_BIN=target/release/apijet),
# one apijet instance, then wrk (2 threads) for SECONDS (10) per step:
#   lookup   POST /get {"Moment":{"id":…}}, ids drawn over the 100 demo moments (Spider: one shard
#            per request; Patroni: a replica, through haproxy)
#   insert   POST /post one Comment, logged in (the write queue groups concurrent rows)
#   list     (Spider) a 1,000,000-row list streamed from the three shards, once
# Around each step every server's CPU time (its processes and their children) is read from /proc,
# so each line says how many microseconds of CPU one request took in apijet, the database nodes,
# haproxy and wrk: 1,000,000 / that is what one core of that server serves per second. All the
# processes share this machine's cores, so req/s is the machine's, not a node's.
set -euo pipefail
cd "$(dirname "$0")/../.."

topology=${1:-}
seconds=${2:-10}
case "$topology" in
spider | patroni) ;;
*)
  echo "usage: $0 spider|patroni [SECONDS]" >&2
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
  cl_down
  cl_stop_jobs
  [ -n "$DIR" ] && rm -rf "$DIR"
  cl_log "capacity run done in ${SECONDS} s (exit $rc)"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cl_require "$topology"
command -v wrk >/dev/null 2>&1 || { cl_log "wrk is missing (apt-get install wrk)"; exit 1; }
bin=$(cl_apijet_bin)
export APIJET_BIN=$bin
DIR=$(mktemp -d /tmp/apijet-cluster.XXXXXX)

servers=() # NAME=PID for cpu.py
if [ "$topology" = spider ]; then
  cl_spider_up "$DIR" 3
  cl_spider_sql head "CREATE DATABASE apijet"
  db="mysql://root@127.0.0.1:$CL_SPIDER_HEAD_PORT/apijet"
  "$bin" demo --db "$db" >/dev/null
  cl_spider_shard apijet
  cl_spider_durable
  replicas=""
  servers+=("head=${CL_SPIDER_PIDS[0]}")
  for k in 0 1 2; do servers+=("data$k=${CL_SPIDER_PIDS[$((k + 1))]}"); done
else
  cl_patroni_up "$DIR" 3
  db="postgres://postgres@127.0.0.1:$CL_PAT_PRIMARY_PORT/postgres"
  replicas="postgres://postgres@127.0.0.1:$CL_PAT_REPLICA_PORT/postgres"
  "$bin" demo --db "$db" >/dev/null
  leader=$(cl_patroni_leader)
  for k in "${!CL_PG_PORTS[@]}"; do
    postmaster=$(head -n 1 "${CL_PAT_DIRS[$k]}/data/postmaster.pid")
    if [ "$k" = "$leader" ]; then servers+=("primary=$postmaster"); else servers+=("replica$k=$postmaster"); fi
  done
  servers+=("haproxy=$CL_PAT_PROXY_PID")
fi
CL_API_ENV=("APIJET_MAX_COUNT=1000000" "APIJET_MAX_ANSWER_BYTES=400000000" "APIJET_POOL_SIZE=16"
  "APIJET_STATEMENT_TIMEOUT_MS=300000" "APIJET_ANONYMOUS_STATEMENT_TIMEOUT_MS=0")
cl_apijet_up "$DIR" 0 "$db" "$replicas"
api=http://127.0.0.1:${CL_API_PORTS[0]}
servers=("apijet=${CL_API_PIDS[0]}" "${servers[@]}")
token=$(python3 scripts/cluster/spider-probe.py login --instance "$api")

# Every answer is checked: HTTP 200 with APIJSON code 200, else it is counted as bad.
checked='
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) bad = 0 end
function response(status, headers, body)
  if status ~= 200 or not string.find(body, "\"code\":200", 1, true) then bad = bad + 1 end
end
function done(summary, latency, requests)
  local n = 0
  for _, t in ipairs(threads) do n = n + t:get("bad") end
  io.write("bad answers: " .. n .. "\n")
end'
cat >"$DIR/lookup.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $token"
request = function()
  return wrk.format(nil, "/get", nil, '{"Moment":{"id":' .. (1001 + math.random(0, 99)) .. '}}')
end
$checked
LUA
cat >"$DIR/insert.lua" <<LUA
wrk.method = "POST"
wrk.path = "/post"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $token"
wrk.body = '{"tag":"Comment","Comment":{"momentId":1001,"content":"capacity"}}'
$checked
LUA

# NAME REQUESTS-COMMAND…: runs the command between two CPU readings; the command prints the
# number of requests it served on its last line.
measure() {
  local name=$1 before after served
  shift
  before=$(python3 scripts/cluster/cpu.py "${servers[@]}" "wrk=$$")
  served=$("$@" | tail -n 1) || return 1
  [ -n "$served" ] || return 1
  after=$(python3 scripts/cluster/cpu.py "${servers[@]}" "wrk=$$")
  python3 - "$name" "$served" "$before" "$after" <<'PY'
import sys
name, served = sys.argv[1], sys.argv[2].split()
requests, rate = int(served[0]), served[1]
before = dict(l.split() for l in sys.argv[3].splitlines())
after = dict(l.split() for l in sys.argv[4].splitlines())
unit, scale = ("ns", 1e9) if requests >= 100000 and "rows" in rate else ("µs", 1e6)
costs = ", ".join(f"{k} {scale * (float(after[k]) - float(before[k])) / requests:.0f}" for k in after)
print(f"{name}: {requests} requests ({rate}); CPU {unit} per request: {costs}")
PY
}

# Runs wrk (logged in: reads without a login are limited per client address); prints
# "REQUESTS REQ/S at c=C" last, or fails when an answer was not a success.
run_wrk() { # CONNECTIONS SCRIPT PATH
  local out
  out=$(wrk -t2 -c"$1" -d"${seconds}s" -s "$2" "$api$3")
  echo "$out" >&2
  grep -q '^bad answers: 0$' <<<"$out" || { cl_log "wrk: answers that were not successes"; return 1; }
  awk -v c="$1" '/ requests in / { n = $1 } /^Requests\/sec/ { r = $2 } END { printf "%d %.0f req/s at c=%d\n", n, r, c }' <<<"$out"
}

cl_log "checking the requests"
curl -s "$api/get" -d '{"Moment":{"id":1001}}' | grep -q '"code":200' || { cl_log "lookup refused"; exit 1; }
for c in 16 64; do measure "lookup" run_wrk "$c" "$DIR/lookup.lua" /get; done
for c in 16 64; do measure "insert" run_wrk "$c" "$DIR/insert.lua" /post; done

if [ "$topology" = spider ]; then
  columns="id bigint NOT NULL PRIMARY KEY, x_uin bigint NOT NULL, x_send_time datetime NOT NULL,
    x_xid int NOT NULL, x_result tinyint NOT NULL, x_credit int NOT NULL, x_channel varchar(32),
    x_remark varchar(64)"
  fills=() parts=""
  for k in 0 1 2; do
    cl_spider_sql "$k" "CREATE TABLE apijet.t_big ($columns) ENGINE=InnoDB;
      INSERT INTO apijet.t_big SELECT seq, 100000000 + (seq * 7919) % 900000000,
        TIMESTAMP '2024-01-01 00:00:00' + INTERVAL (seq % 31536000) SECOND,
        CASE WHEN seq % 20 < 6 THEN 1001 WHEN seq % 20 < 11 THEN 1002 ELSE 2000 + seq % 50000 END,
        seq % 3, (seq * 17) % 100000, CONCAT('channel-', seq % 20), CONCAT('remark for event ', seq)
      FROM apijet.seq_1_to_1000000 WHERE MOD(seq, 3) = $k" &
    fills+=($!)
    parts+="${parts:+, }PARTITION p$k REMOTE_SERVER='s$k'"
  done
  for p in "${fills[@]}"; do wait "$p"; done
  cl_spider_sql head "CREATE TABLE apijet.t_big ($columns) ENGINE=SPIDER REMOTE_DATABASE='apijet'
      REMOTE_TABLE='t_big' PARTITION BY HASH (id) ($parts);
    INSERT INTO apijet.Access (id, name, alias, get, head) VALUES (990001, 't_big', 'TBig',
      '[\"UNKNOWN\",\"LOGIN\"]', '[\"UNKNOWN\",\"LOGIN\"]')"
  kill -INT "${CL_API_PIDS[0]}" && cl_stop_pid "${CL_API_PIDS[0]}"
  cl_apijet_up "$DIR" 0 "$db" "" "${CL_API_PORTS[0]}"
  servers[0]="apijet=${CL_API_PIDS[0]}"
  list_once() {
    python3 scripts/cluster/spider-probe.py list --instance "$api" --rows 1000000 --pids "${CL_API_PIDS[0]}" >&2
    echo "1000000 rows"
  }
  measure "list (per row)" list_once
fi
