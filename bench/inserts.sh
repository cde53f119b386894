#!/usr/bin/env bash
# bench/inserts.sh — insert benchmark of the write path (run by hand; not a test).
#
# What it does
#   For each engine (PostgreSQL, MariaDB, SQLite) it starts a throwaway database
#   (scripts/lib/db.sh), restarts/reconfigures it with DURABLE commits (the rig runs with
#   fsync off; group commit is about saving fsyncs, so the benchmark turns them back on —
#   BENCH_DURABLE=0 keeps the rig's settings), creates the database apijet_bench_w, loads the
#   demo dataset (`apijet demo`) and measures rows per second of inserts into `Comment`:
#     (a) single-row POSTs  {"tag":"Comment","Comment":{"momentId":1001,"content":"bench"}}
#         with wrk at BENCH_CLIENTS concurrent connections, once against `apijet serve` with
#         write_queue = false and once with write_queue = true (group commit);
#         raw baseline at the same concurrency: pgbench (-M prepared, a one-row INSERT per
#         transaction) on PostgreSQL, mysqlslap (autocommit one-row INSERTs) on MariaDB;
#         none on SQLite;
#     (b) one POST of BENCH_BATCH (1000) rows {"tag":"Comment:[]","Comment[]":[…]}, sent over
#         and over on one connection (wrk -c 1) for BENCH_SECONDS;
#     (c) the database's own client (psql / mariadb / sqlite3) inserting the same rows as
#         multi-row INSERTs of BENCH_BATCH rows with literal ids, as many statements as fill
#         about BENCH_SECONDS (sized by a 5-statement pilot; BENCH_RAW_ROUNDS fixes the number),
#         in one session fed from a file (autocommit: one transaction each); the client's
#         start-up + connect (the same client running SELECT 1) is subtracted.
#   Every apijet answer is checked in wrk's Lua (HTTP 200, the success envelope and
#   "count":1 / "count":1000), and after each point the rows in `Comment` are counted: the
#   table must have grown by at least the acknowledged rows and by at most that plus the
#   requests still in flight when wrk stopped. PostgreSQL's pg_stat_wal.wal_sync and
#   MariaDB's Innodb_data_fsyncs give the number of fsyncs, hence rows per fsync.
#
# How to run (from anywhere; needs root or preinstalled PostgreSQL/MariaDB clients incl.
# pgbench and mysqlslap, wrk, sqlite3, curl, python3)
#   bench/inserts.sh                         # postgres mariadb sqlite
#   bench/inserts.sh postgres mariadb        # some engines: postgres | mariadb | sqlite
#   BENCH_CLIENTS="1 64" BENCH_SECONDS=5 bench/inserts.sh postgres
#   BENCH_DURABLE=0 bench/inserts.sh         # keep the rig's fsync=off settings
#   BENCH_QUEUE_ROWS=256 BENCH_QUEUE_US=1000 bench/inserts.sh   # write_queue_rows / _us
#   APIJET_BIN=target/release/apijet bench/inserts.sh   # skip `cargo build --release`
#   About 3 minutes per engine on 2 cores with the defaults.
#
# What it prints
#   Progress on stderr; on stdout one table per engine:
#     engine | scenario | clients | queue | rows/s | ratio | rows/fsync | cpu us/row | check
#   rows/fsync: rows counted / fsyncs during the point; cpu us/row: apijet's user + system CPU
#   time (/proc/PID/stat) / rows counted. ratio: queue-on rows against queue-off at the same
#   clients ("x off"); queue-off rows against the raw client at the same clients ("x pgbench",
#   "x mysqlslap"); the 1000-row POST against the client's multi-row INSERT ("x psql"…).
#   Then the goals' verdicts: queue on >= 10x queue off at 64+ clients, the 1000-row POST
#   >= 0.7x the raw multi-row INSERT.
#   JSON lines with more fields (requests, errors, latency, counted rows, fsyncs, settings)
#   go to bench/out/inserts-<UTC date>.jsonl. Exit status 1 when a check fails (error
#   answers, rows missing, a server died); a missed goal is reported, not an error.

set -euo pipefail
shopt -s inherit_errexit
export LC_ALL=C
# The config file below must decide; APIJET_* variables would override it.
unset APIJET_WRITE_QUEUE APIJET_WRITE_QUEUE_ROWS APIJET_WRITE_QUEUE_US APIJET_MAX_BATCH \
  APIJET_POOL_SIZE APIJET_TOKEN_SECRET APIJET_DB APIJET_LISTEN APIJET_MAX_BODY_BYTES \
  APIJET_STATEMENT_TIMEOUT_MS APIJET_DEBUG 2>/dev/null || true

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/lib/db.sh disable=SC1091
source scripts/lib/db.sh

CLIENTS=${BENCH_CLIENTS:-"1 16 64 256"}
DURATION=${BENCH_SECONDS:-8}
BATCH=${BENCH_BATCH:-1000}
RAW_ROUNDS=${BENCH_RAW_ROUNDS:-}
DURABLE=${BENCH_DURABLE:-1}
QUEUE_ROWS=${BENCH_QUEUE_ROWS:-}
QUEUE_US=${BENCH_QUEUE_US:-}
WARMUP_SECONDS=2
DB_NAME=apijet_bench_w
PHONE=13000082001
USER_ID=82001
MOMENT_ID=1001
QUEUE_GOAL=10
BATCH_GOAL=0.7
ENGINES=("$@")
[ ${#ENGINES[@]} -gt 0 ] || ENGINES=(postgres mariadb sqlite)

log() { printf '[bench] %s\n' "$*" >&2; }
die() {
  printf '[bench] error: %s\n' "$*" >&2
  exit 1
}

for e in "${ENGINES[@]}"; do
  case $e in postgres | mariadb | sqlite) ;; *) die "unknown engine '$e' (postgres | mariadb | sqlite)" ;; esac
done
for n in $CLIENTS; do
  [[ $n =~ ^[1-9][0-9]*$ ]] && [ "$n" -le 1000 ] || die "BENCH_CLIENTS: '$n' is not a count in 1..1000"
done
[[ $DURATION =~ ^[1-9][0-9]*$ ]] && [ "$DURATION" -le 120 ] || die "BENCH_SECONDS must be in 1..120"
[[ $BATCH =~ ^[1-9][0-9]*$ ]] && [ "$BATCH" -le 10000 ] || die "BENCH_BATCH must be in 1..10000"
[ -z "$RAW_ROUNDS" ] || { [[ $RAW_ROUNDS =~ ^[1-9][0-9]*$ ]] && [ "$RAW_ROUNDS" -le 1000 ]; } ||
  die "BENCH_RAW_ROUNDS must be in 1..1000"
case $DURABLE in 0 | 1) ;; *) die "BENCH_DURABLE must be 0 or 1" ;; esac
[ -z "$QUEUE_ROWS" ] || [[ $QUEUE_ROWS =~ ^[1-9][0-9]*$ ]] || die "BENCH_QUEUE_ROWS must be a positive integer"
[ -z "$QUEUE_US" ] || [[ $QUEUE_US =~ ^[0-9]+$ ]] || die "BENCH_QUEUE_US must be a non-negative integer"
for tool in curl wrk python3 awk timeout; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is required (wrk: apt-get install -y wrk)"
done

# ---------------------------------------------------------------- cleanup
WORK=$(mktemp -d "${TMPDIR:-/tmp}/apijet-bench-w.XXXXXX")
APIJET_PID=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_apijet || true
  db_stop_all || true
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- build
if [ -n "${APIJET_BIN:-}" ]; then
  [ -x "$APIJET_BIN" ] || die "APIJET_BIN=$APIJET_BIN is not an executable"
else
  log "cargo build --release"
  cargo build --release --quiet --bin apijet || die "cargo build --release failed"
  APIJET_BIN=$ROOT/target/release/apijet
fi

want_pg=0 want_my=0
for e in "${ENGINES[@]}"; do
  [ "$e" = postgres ] && want_pg=1
  [ "$e" = mariadb ] && want_my=1
  if [ "$e" = sqlite ]; then command -v sqlite3 >/dev/null 2>&1 || die "sqlite3 is required for the sqlite engine"; fi
done
db_install_missing "$want_pg" "$want_my" || die "database packages missing"
[ "$want_pg" = 0 ] || command -v pgbench >/dev/null 2>&1 || die "pgbench is required (package postgresql-contrib / postgresql-client)"
[ "$want_my" = 0 ] || command -v mysqlslap >/dev/null 2>&1 || die "mysqlslap is required (package mariadb-client)"

mkdir -p "$ROOT/bench/out"
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
STARTED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
OUT=$ROOT/bench/out/inserts-$STAMP.jsonl
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
DIRTY=$([ -n "$(git status --porcelain -- crates src Cargo.toml Cargo.lock 2>/dev/null)" ] && echo true || echo false)
FSTYPE=$(df -P -T "$WORK" 2>/dev/null | awk 'NR == 2 { print $2 }')
[ -n "$FSTYPE" ] || FSTYPE=unknown
if [ "$DURABLE" = 1 ] && [ "$FSTYPE" = tmpfs ]; then
  log "warning: $WORK is on tmpfs, where fsync costs nothing; set TMPDIR to a disk-backed directory"
fi

# ---------------------------------------------------------------- helpers
now() { printf '%s' "$EPOCHREALTIME"; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f", b - a }'; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { printf "%.4f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
loadavg() { local one _; read -r one _ </proc/loadavg; printf '%s' "$one"; }
div() { awk -v a="$1" -v b="$2" -v f="${3:-%.1f}" 'BEGIN { if (b > 0) printf f, a / b; else printf "null" }'; }
min() { if [ "$1" -lt "$2" ]; then printf '%s' "$1"; else printf '%s' "$2"; fi; }
json_str() { printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g' | tr '\n\t' '  ')"; }

stop_apijet() {
  if [ -n "$APIJET_PID" ]; then
    if kill -0 "$APIJET_PID" 2>/dev/null; then
      kill -INT "$APIJET_PID" 2>/dev/null || true
      local i=0
      while kill -0 "$APIJET_PID" 2>/dev/null && [ $i -lt 50 ]; do
        sleep 0.1
        i=$((i + 1))
      done
      kill -KILL "$APIJET_PID" 2>/dev/null || true
    fi
    wait "$APIJET_PID" 2>/dev/null || true
    APIJET_PID=""
  fi
}

# CPU time (user + system, in clock ticks) apijet has used so far.
cpu_ticks() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || { printf '0'; return 0; }
  # Fields after the ")" that closes the command name: 3 = state … 14 = utime, 15 = stime.
  printf '%s' "${stat##*) }" | awk '{ print $12 + $13 }'
}
CLK_TCK=$(getconf CLK_TCK 2>/dev/null || echo 100)

# One scalar (or rows, tab-separated) from SQL against the bench database of ENGINE.
q() {
  case $1 in
    postgres) psql -X -q -t -A -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$DB_PG_PORT" -U postgres -d "${3:-$DB_NAME}" -c "$2" ;;
    mariadb) mariadb --no-defaults -N -B -h 127.0.0.1 -P "$DB_MY_PORT" -u root "${3:-$DB_NAME}" -e "$2" ;;
    sqlite) sqlite3 -bail "$SQLITE_FILE" "$2" ;;
  esac
}
count_rows() {
  case $1 in
    postgres) q postgres 'SELECT count(*) FROM "Comment"' ;;
    *) q "$1" 'SELECT count(*) FROM Comment' ;;
  esac
}
# Log flushes so far: PostgreSQL WAL syncs, MariaDB redo-log fsyncs; empty for SQLite.
fsyncs() {
  case $1 in
    postgres) q postgres 'SELECT wal_sync FROM pg_stat_wal' 2>/dev/null || true ;;
    # Innodb_data_fsyncs counts every fsync InnoDB issues, the redo log's included (MariaDB
    # 10.8+ has no Innodb_os_log_fsyncs any more).
    mariadb) q mariadb "SHOW GLOBAL STATUS LIKE 'Innodb_data_fsyncs'" | awk '{ print $2 }' ;;
    sqlite) ;;
  esac
}
# Waits until in-flight inserts have landed (the count holds still for 0.5 s); prints it.
settled_count() {
  local engine=$1 a b i=0
  a=$(count_rows "$engine")
  while :; do
    sleep 0.5
    b=$(count_rows "$engine")
    [ "$a" = "$b" ] && break
    a=$b
    i=$((i + 1))
    [ $i -lt 40 ] || break
  done
  # PostgreSQL backends publish their statistics (pg_stat_wal) up to ~1 s after going idle.
  [ "$engine" != postgres ] || sleep 1.2
  printf '%s' "$b"
}

# ---------------------------------------------------------------- request bodies and scripts
awk -v m="$MOMENT_ID" 'BEGIN { printf "{\"tag\":\"Comment\",\"Comment\":{\"momentId\":%d,\"content\":\"bench\"}}", m }' >"$WORK/one.json"
awk -v m="$MOMENT_ID" -v n="$BATCH" 'BEGIN {
  printf "{\"tag\":\"Comment:[]\",\"Comment[]\":["
  for (i = 0; i < n; i++) printf "%s{\"momentId\":%d,\"content\":\"b%d\"}", (i ? "," : ""), m, i
  printf "]}"
}' >"$WORK/batch.json"

# wrk: POST the body of $BENCH_BODY with the bearer token; every answer must be HTTP 200 with
# the success envelope and $BENCH_EXPECT (e.g. "count":1,). Prints one RESULT line.
cat >"$WORK/post.lua" <<'LUA'
local f = assert(io.open(os.getenv("BENCH_BODY"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("BENCH_TOKEN")
local expect = os.getenv("BENCH_EXPECT")
local envelope = '"code":200,"msg":"success","time":'

local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) ok = 0; bad = 0; sample = "" end
function response(status, headers, body)
  if status == 200 and string.find(body, envelope, 1, true) and string.find(body, expect, 1, true) then
    ok = ok + 1
  else
    bad = bad + 1
    if sample == "" then sample = status .. " " .. string.sub(body or "", 1, 300) end
  end
end
function done(summary, latency, requests)
  local ok_n, bad_n, s = 0, 0, ""
  for _, t in ipairs(threads) do
    ok_n = ok_n + t:get("ok")
    bad_n = bad_n + t:get("bad")
    if s == "" then s = t:get("sample") end
  end
  local e = summary.errors
  io.write(string.format("RESULT %d %d %d %d %d %d %d %d %d %.0f %.0f %.0f\n",
    summary.requests, summary.duration, ok_n, bad_n, e.connect, e.read, e.write, e.status,
    e.timeout, latency.mean, latency:percentile(50), latency:percentile(99)))
  if s ~= "" then io.write("SAMPLE " .. string.gsub(s, "[\r\n]", " ") .. "\n") end
end
LUA

# The raw multi-row INSERTs: ROUNDS statements of BATCH rows, literal ids far from
# apijet's clock ids (millisecond << 11, below 9e15 until 2100) and from UUID_SHORT().
raw_batch_sql() {
  local engine=$1 rounds=$2 first=$3 tq cq
  case $engine in
    postgres | sqlite) tq='"Comment"' cq='"userId", "momentId"' ;;
    mariadb) tq='Comment' cq='userId, momentId' ;;
  esac
  awk -v f="$first" -v r="$rounds" -v n="$BATCH" -v u="$USER_ID" -v m="$MOMENT_ID" -v t="$tq" -v c="$cq" 'BEGIN {
    for (k = f; k < f + r; k++) {
      printf "INSERT INTO %s (id, %s, content) VALUES ", t, c
      for (i = 0; i < n; i++) printf "%s(%.0f%06d, %d, %d, '\''b%d'\'')", (i ? "," : ""), 300000000000 + k, i, u, m, i
      printf ";\n"
    }
  }'
}

# ---------------------------------------------------------------- databases
# PostgreSQL from db.sh runs with fsync/synchronous_commit/full_page_writes off and 100
# connections; restart it with durable commits (unless BENCH_DURABLE=0) and room for pgbench.
pg_reconfigure() {
  local dir onoff
  dir=$(dirname "$DB_PG_DATA")
  if [ "$DURABLE" = 1 ]; then onoff=on; else onoff=off; fi
  log "postgres: restarting with fsync=$onoff synchronous_commit=$onoff full_page_writes=$onoff max_connections=300"
  db_as_pg "$DB_PG_BIN/pg_ctl" -D "$DB_PG_DATA" -l "$dir/server.log" -w -t 60 -m fast restart \
    -o "-p $DB_PG_PORT -c listen_addresses=127.0.0.1 -c unix_socket_directories=$dir -c fsync=$onoff -c synchronous_commit=$onoff -c full_page_writes=$onoff -c max_connections=300 -c TimeZone=UTC" \
    >/dev/null || die "postgres: restart failed (see $dir/server.log)"
  local waited=0
  until "$DB_PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$DB_PG_PORT" -U postgres; do
    [ $waited -lt 60 ] || die "postgres: not ready after the restart"
    sleep 1
    waited=$((waited + 1))
  done
  [ "$(q postgres 'SHOW fsync' postgres)" = "$onoff" ] || die "postgres: fsync is not $onoff after the restart"
}

start_db() {
  local engine=$1
  case $engine in
    postgres)
      db_start_postgres "$WORK" || die "PostgreSQL did not start"
      pg_reconfigure
      q postgres "CREATE DATABASE $DB_NAME" postgres >/dev/null || die "postgres: CREATE DATABASE failed"
      DB_URL=postgres://postgres@127.0.0.1:$DB_PG_PORT/$DB_NAME
      DB_VERSION=$(q postgres 'SHOW server_version' postgres)
      DB_SETTINGS=$(q postgres "SELECT string_agg(name || '=' || setting, ' ' ORDER BY name) FROM pg_settings
        WHERE name IN ('fsync','synchronous_commit','full_page_writes','wal_sync_method','commit_delay','max_connections','shared_buffers')" postgres)
      ;;
    mariadb)
      db_start_mariadb "$WORK" || die "MariaDB did not start"
      if [ "$DURABLE" = 1 ]; then
        q mariadb "SET GLOBAL innodb_flush_log_at_trx_commit = 1" mysql || die "mariadb: SET GLOBAL failed"
      fi
      q mariadb "SET GLOBAL max_connections = 300; CREATE DATABASE $DB_NAME CHARACTER SET utf8mb4" mysql ||
        die "mariadb: CREATE DATABASE failed"
      DB_URL=mysql://root@127.0.0.1:$DB_MY_PORT/$DB_NAME
      DB_VERSION=$(q mariadb 'SELECT VERSION()')
      DB_SETTINGS=$(q mariadb "SELECT CONCAT('innodb_flush_log_at_trx_commit=', @@innodb_flush_log_at_trx_commit,
        ' innodb_doublewrite=', @@innodb_doublewrite, ' log_bin=', @@log_bin, ' sync_binlog=', @@sync_binlog,
        ' innodb_flush_method=', @@innodb_flush_method, ' max_connections=', @@max_connections,
        ' innodb_buffer_pool_size=', @@innodb_buffer_pool_size)")
      ;;
    sqlite)
      mkdir -p "$WORK/sqlite"
      SQLITE_FILE=$WORK/sqlite/bench.db
      DB_URL=sqlite://$SQLITE_FILE
      DB_VERSION=$(sqlite3 :memory: 'SELECT sqlite_version()')
      ;;
  esac
  log "$engine: loading the demo dataset"
  "$APIJET_BIN" demo --db "$DB_URL" >/dev/null || die "$engine: apijet demo failed"
  if [ "$engine" = sqlite ]; then
    # apijet sets journal_mode=WAL (persistent in the file) and leaves synchronous at SQLite's
    # default, FULL (2), as does the sqlite3 shell; BENCH_DURABLE=0 has no effect here.
    DB_SETTINGS="journal_mode=$(q sqlite 'PRAGMA journal_mode') synchronous=$(q sqlite 'PRAGMA synchronous') (sqlite3 shell; apijet sets only journal_mode=WAL)"
  fi
  log "$engine $DB_VERSION: $DB_SETTINGS; data on $FSTYPE"
}

# ---------------------------------------------------------------- apijet
start_apijet() {
  local engine=$1 queue=$2 port
  port=$(db_free_ports 1)
  cat >"$WORK/apijet.toml" <<TOML
token_secret = "bench-inserts-$STAMP"
write_queue = $queue
max_batch = $((BATCH > 1000 ? BATCH : 1000))
max_body_bytes = $((4 << 20))
TOML
  [ -z "$QUEUE_ROWS" ] || printf 'write_queue_rows = %s\n' "$QUEUE_ROWS" >>"$WORK/apijet.toml"
  [ -z "$QUEUE_US" ] || printf 'write_queue_us = %s\n' "$QUEUE_US" >>"$WORK/apijet.toml"
  "$APIJET_BIN" serve --db "$DB_URL" --listen "127.0.0.1:$port" --config "$WORK/apijet.toml" \
    >"$WORK/apijet-$engine-$queue.log" 2>&1 </dev/null &
  APIJET_PID=$!
  local i=0
  until grep -q 'listening on' "$WORK/apijet-$engine-$queue.log"; do
    if ! kill -0 "$APIJET_PID" 2>/dev/null; then
      cat "$WORK/apijet-$engine-$queue.log" >&2
      APIJET_PID=""
      die "$engine: apijet serve exited before listening"
    fi
    [ $i -lt 300 ] || die "$engine: apijet did not print 'listening on' within 30 s"
    sleep 0.1
    i=$((i + 1))
  done
  APIJET_URL=http://127.0.0.1:$port
  local answer
  answer=$(curl -sS --max-time 10 -H 'Content-Type: application/json' \
    --data "{\"type\":0,\"phone\":\"$PHONE\",\"password\":\"123456\"}" "$APIJET_URL/login") ||
    die "$engine: /login failed"
  TOKEN=$(printf '%s' "$answer" | sed -n 's/.*"token":"\([^"]*\)".*/\1/p')
  [ -n "$TOKEN" ] || die "$engine: /login gave no token: $answer"
  answer=$(curl -sS --max-time 10 -H 'Content-Type: application/json' -H "Authorization: Bearer $TOKEN" \
    --data @"$WORK/one.json" "$APIJET_URL/post") || die "$engine: POST /post failed"
  case $answer in
    *'"count":1,'*'"code":200,"msg":"success","time":'*) ;;
    *) die "$engine: a single-row POST answered: $answer" ;;
  esac
  log "$engine: apijet pid $APIJET_PID on $APIJET_URL (write_queue = $queue); warm-up ${WARMUP_SECONDS}s"
  BENCH_BODY=$WORK/one.json BENCH_TOKEN=$TOKEN BENCH_EXPECT='"count":1,' \
    timeout 60 wrk -t 2 -c 16 -d "${WARMUP_SECONDS}s" -s "$WORK/post.lua" "$APIJET_URL/post" >/dev/null ||
    die "$engine: warm-up wrk failed"
}

# ---------------------------------------------------------------- measurements
# Every measurement sets: P_ROWS_S P_OK P_REQ P_BAD P_ERRS P_COUNTED P_FSYNCS P_CHECK P_EXTRA
# P_CPU_US (P_EXTRA: more JSON fields, starting with a comma; P_CPU_US: apijet's CPU time per
# row in microseconds, empty for the raw clients).
FAILED=0
P_ROWS_S=0 P_OK=0 P_REQ=0 P_BAD=0 P_ERRS=0 P_COUNTED=0 P_FSYNCS="" P_CHECK=ok P_EXTRA="" P_CPU_US=""

# wrk against apijet. ENGINE CLIENTS BODY EXPECT ROWS_PER_REQUEST
wrk_point() {
  local engine=$1 n=$2 body=$3 expect=$4 per=$5 threads c0 c1 f0 f1 cpu0 cpu1 out line
  threads=$(min 2 "$n")
  c0=$(settled_count "$engine")
  f0=$(fsyncs "$engine")
  cpu0=$(cpu_ticks "$APIJET_PID")
  out=$(BENCH_BODY=$body BENCH_TOKEN=$TOKEN BENCH_EXPECT=$expect \
    timeout -s INT $((DURATION + 60)) wrk -t "$threads" -c "$n" -d "${DURATION}s" --timeout 10s \
    -s "$WORK/post.lua" "$APIJET_URL/post" 2>&1) || die "$engine: wrk failed: $out"
  cpu1=$(cpu_ticks "$APIJET_PID")
  c1=$(settled_count "$engine")
  f1=$(fsyncs "$engine")
  line=$(printf '%s\n' "$out" | awk '$1 == "RESULT"')
  [ -n "$line" ] || die "$engine: wrk printed no RESULT line: $out"
  local req dur ok bad ec er ew es et lmean l50 l99
  read -r _ req dur ok bad ec er ew es et lmean l50 l99 <<<"$line"
  P_REQ=$req P_OK=$((ok * per)) P_BAD=$bad P_ERRS=$((ec + er + ew + et))
  P_ROWS_S=$(div "$((ok * per))" "$(awk -v d="$dur" 'BEGIN { print d / 1e6 }')")
  P_COUNTED=$((c1 - c0))
  P_FSYNCS=""
  [ -z "$f0" ] || [ -z "$f1" ] || P_FSYNCS=$((f1 - f0))
  P_CHECK=ok
  local slack=$((n * per))
  if [ "$bad" -gt 0 ] || [ "$es" -gt 0 ]; then
    P_CHECK="$bad bad answers"
    log "$engine: $bad answers failed the check, e.g.: $(printf '%s\n' "$out" | sed -n 's/^SAMPLE //p' | head -n 1)"
  elif [ "$P_ERRS" -gt "$n" ]; then
    P_CHECK="$P_ERRS socket errors"
  elif [ "$P_COUNTED" -lt "$P_OK" ]; then
    P_CHECK="rows missing: +$P_COUNTED < $P_OK acked"
  elif [ "$P_COUNTED" -gt $((P_OK + slack)) ]; then
    P_CHECK="extra rows: +$P_COUNTED > $P_OK acked + $slack"
  fi
  [ "$P_CHECK" = ok ] || FAILED=1
  kill -0 "$APIJET_PID" 2>/dev/null || {
    FAILED=1
    P_CHECK="apijet died"
  }
  P_CPU_US=$(awk -v c="$((cpu1 - cpu0))" -v t="$CLK_TCK" -v r="$P_COUNTED" \
    'BEGIN { if (r > 0) printf "%.0f", c / t * 1e6 / r; else printf "null" }')
  P_EXTRA=$(printf ',"apijet_cpu_s":%s,"requests":%s,"duration_s":%s,"socket_errors":{"connect":%s,"read":%s,"write":%s,"timeout":%s},"non2xx":%s,"latency_us":{"mean":%s,"p50":%s,"p99":%s}' \
    "$(awk -v c="$((cpu1 - cpu0))" -v t="$CLK_TCK" 'BEGIN { printf "%.2f", c / t }')" \
    "$req" "$(awk -v d="$dur" 'BEGIN { printf "%.3f", d / 1e6 }')" "$ec" "$er" "$ew" "$et" "$es" "$lmean" "$l50" "$l99")
  log "$engine: clients=$n: $P_ROWS_S rows/s ($req requests, $ok ok, $bad bad, $P_ERRS socket errors, +$P_COUNTED rows counted, fsyncs ${P_FSYNCS:-n/a}, apijet CPU ${P_CPU_US}us/row, p50 ${l50}us p99 ${l99}us): $P_CHECK"
}

# pgbench: one-row INSERT per transaction (autocommit), N clients, prepared statements.
pgbench_point() {
  local n=$1 out c0 c1 f0 f1 tps done_tx failed
  c0=$(settled_count postgres)
  f0=$(fsyncs postgres)
  out=$(PGGSSENCMODE=disable PGSSLMODE=disable timeout $((DURATION + 120)) pgbench -n -M prepared \
    -f "$WORK/pgbench-one.sql" -c "$n" -j "$(min 2 "$n")" -T "$DURATION" \
    -h 127.0.0.1 -p "$DB_PG_PORT" -U postgres "$DB_NAME" 2>&1) || die "pgbench -c $n failed: $out"
  c1=$(settled_count postgres)
  f1=$(fsyncs postgres)
  tps=$(printf '%s\n' "$out" | sed -n 's/^tps = \([0-9.]*\) (without initial connection time).*/\1/p')
  done_tx=$(printf '%s\n' "$out" | sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p')
  failed=$(printf '%s\n' "$out" | sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p')
  [ -n "$tps" ] && [ -n "$done_tx" ] || die "pgbench -c $n: unexpected output: $out"
  P_ROWS_S=$(awk -v t="$tps" 'BEGIN { printf "%.1f", t }') P_CPU_US=""
  P_OK=$done_tx P_REQ=$done_tx P_BAD=${failed:-0} P_ERRS=0 P_COUNTED=$((c1 - c0)) P_FSYNCS=""
  [ -z "$f0" ] || [ -z "$f1" ] || P_FSYNCS=$((f1 - f0))
  P_CHECK=ok
  if [ "$P_BAD" -gt 0 ]; then
    P_CHECK="$P_BAD failed transactions"
  elif [ "$P_COUNTED" -lt "$P_OK" ]; then P_CHECK="rows missing: +$P_COUNTED < $P_OK"; fi
  [ "$P_CHECK" = ok ] || FAILED=1
  P_EXTRA=$(printf ',"transactions":%s,"tool":"pgbench -n -M prepared -j %s -T %s"' "$done_tx" "$(min 2 "$n")" "$DURATION")
  log "postgres: pgbench clients=$n: $P_ROWS_S rows/s ($done_tx transactions, +$P_COUNTED rows counted, fsyncs $P_FSYNCS): $P_CHECK"
}

# mysqlslap runs a fixed number of queries, a multiple of N with >= 20 per client (with
# fewer it was seen to hang at 256 clients). Pilots (x4 until one takes >= 0.5 s) size the real
# run to about BENCH_SECONDS. mysqlslap is an optional baseline: when it fails or hangs (killed
# after a bounded time) the row says so and the run goes on.
mysqlslap_run() {
  local n=$1 queries=$2 limit=$3 out rc=0
  out=$(timeout "$limit" mysqlslap --no-defaults -h 127.0.0.1 -P "$DB_MY_PORT" -u root \
    --create-schema="$DB_NAME" --no-drop --concurrency="$n" --iterations=1 --number-of-queries="$queries" \
    --query="INSERT INTO Comment (id, userId, momentId, content) VALUES (UUID_SHORT(), $USER_ID, $MOMENT_ID, 'bench')" 2>&1) || rc=$?
  SLAP_SECS=$(printf '%s\n' "$out" | sed -n 's/.*Average number of seconds to run all queries: \([0-9.]*\) seconds.*/\1/p')
  if [ "$rc" != 0 ] || [ -z "$SLAP_SECS" ]; then
    log "mariadb: mysqlslap --concurrency=$n --number-of-queries=$queries failed (exit $rc$([ "$rc" = 124 ] && echo ', killed after '"$limit"'s')): $(printf '%s' "$out" | tr '\n' ' ' | cut -c1-300)"
    SLAP_SECS=""
    SLAP_RC=$rc
    return 1
  fi
}
mysqlslap_point() {
  local n=$1 queries i c0 c1 f0 f1
  queries=$((n * 20 > 100 ? n * 20 : ((100 + n - 1) / n) * n))
  P_ROWS_S=null P_OK=0 P_REQ=0 P_BAD=0 P_ERRS=0 P_COUNTED=0 P_FSYNCS="" P_EXTRA="" P_CPU_US=""
  for i in 1 2 3 4 5 6; do
    if ! mysqlslap_run "$n" "$queries" 60; then
      P_CHECK="mysqlslap failed (exit $SLAP_RC)"
      return 0
    fi
    awk -v s="$SLAP_SECS" 'BEGIN { exit !(s >= 0.5) }' && break
    queries=$((queries * 4))
  done
  queries=$(awk -v p="$queries" -v s="$SLAP_SECS" -v d="$DURATION" -v n="$n" 'BEGIN {
    r = (s > 0) ? p / s : 1000; q = int(r * d / n) * n; if (q < 20 * n) q = 20 * n;
    if (q > 500000) q = int(500000 / n) * n; print q }')
  c0=$(settled_count mariadb)
  f0=$(fsyncs mariadb)
  if ! mysqlslap_run "$n" "$queries" $((DURATION * 4 + 60)); then
    P_CHECK="mysqlslap failed (exit $SLAP_RC)"
    return 0
  fi
  c1=$(settled_count mariadb)
  f1=$(fsyncs mariadb)
  P_ROWS_S=$(div "$queries" "$SLAP_SECS")
  P_OK=$queries P_REQ=$queries P_COUNTED=$((c1 - c0))
  [ -z "$f0" ] || [ -z "$f1" ] || P_FSYNCS=$((f1 - f0))
  P_CHECK=ok
  [ "$P_COUNTED" = "$P_OK" ] || {
    P_CHECK="rows: +$P_COUNTED, expected $P_OK"
    FAILED=1
  }
  P_EXTRA=$(printf ',"queries":%s,"seconds":%s,"tool":"mysqlslap --iterations=1 (time includes the clients connecting)"' "$queries" "$SLAP_SECS")
  log "mariadb: mysqlslap concurrency=$n: $P_ROWS_S rows/s ($queries queries in ${SLAP_SECS}s, +$P_COUNTED rows counted, fsyncs ${P_FSYNCS:-n/a}): $P_CHECK"
}

# The client's own multi-row INSERTs, one session, timed minus the client's start-up.
raw_client_cmd() {
  case $1 in
    postgres) RAW_CMD=(env PGGSSENCMODE=disable PGSSLMODE=disable psql -X -q -v ON_ERROR_STOP=1
      -h 127.0.0.1 -p "$DB_PG_PORT" -U postgres -d "$DB_NAME") ;;
    mariadb) RAW_CMD=(mariadb --no-defaults -h 127.0.0.1 -P "$DB_MY_PORT" -u root "$DB_NAME") ;;
    sqlite) RAW_CMD=(sqlite3 -bail "$SQLITE_FILE") ;;
  esac
}
# Runs FILE through the client; prints the seconds it took.
raw_timed() {
  local t0 t1
  t0=$(now)
  timeout 600 "${RAW_CMD[@]}" <"$1" >/dev/null || die "the client failed on $1"
  t1=$(now)
  elapsed "$t0" "$t1"
}
raw_batch_point() {
  local engine=$1 total starts=() i s c0 c1 f0 f1 net rounds pilot
  raw_client_cmd "$engine"
  printf 'SELECT 1;\n' >"$WORK/select1.sql"
  for i in 1 2 3; do
    starts+=("$(raw_timed "$WORK/select1.sql")")
  done
  s=$(median "${starts[@]}")
  # A pilot of 5 statements (also the warm-up) sizes the run to about BENCH_SECONDS.
  raw_batch_sql "$engine" 5 0 >"$WORK/raw-pilot.sql"
  pilot=$(raw_timed "$WORK/raw-pilot.sql")
  if [ -n "$RAW_ROUNDS" ]; then
    rounds=$RAW_ROUNDS
  else
    rounds=$(awk -v p="$pilot" -v s="$s" -v d="$DURATION" -v b="$BATCH" 'BEGIN {
      t = p - s; if (t < p / 2) t = p / 2; r = int(5 * b / t * d / b); if (r < 10) r = 10; if (r > 500) r = 500; print r }')
  fi
  raw_batch_sql "$engine" "$rounds" 1000 >"$WORK/raw-batch.sql"
  c0=$(settled_count "$engine")
  f0=$(fsyncs "$engine")
  total=$(raw_timed "$WORK/raw-batch.sql")
  c1=$(settled_count "$engine")
  f1=$(fsyncs "$engine")
  net=$(awk -v t="$total" -v s="$s" 'BEGIN { d = t - s; if (d < t / 2) d = t / 2; printf "%.4f", d }')
  P_OK=$((rounds * BATCH)) P_REQ=$rounds P_BAD=0 P_ERRS=0 P_COUNTED=$((c1 - c0)) P_CPU_US=""
  P_ROWS_S=$(div "$P_OK" "$net")
  P_FSYNCS=""
  [ -z "$f0" ] || [ -z "$f1" ] || P_FSYNCS=$((f1 - f0))
  P_CHECK=ok
  [ "$P_COUNTED" = "$P_OK" ] || {
    P_CHECK="rows: +$P_COUNTED, expected $P_OK"
    FAILED=1
  }
  P_EXTRA=$(printf ',"statements":%s,"total_s":%s,"client_startup_s":%s,"net_s":%s,"tool":"%s"' \
    "$rounds" "$total" "$s" "$net" "${RAW_CMD[*]}")
  log "$engine: $rounds x $BATCH-row INSERT by the client: ${total}s - start-up ${s}s -> $P_ROWS_S rows/s: $P_CHECK"
}

# ---------------------------------------------------------------- table
TABLES=""
VERDICTS=""
hdr() {
  printf '%-8s | %-28s | %7s | %5s | %10s | %-16s | %10s | %11s | %s' engine scenario clients queue rows/s ratio rows/fsync 'cpu us/row' check
}
# ENGINE SCENARIO CLIENTS QUEUE RATIO_TEXT RATIO RATIO_TO TOOL — uses the P_* of the last point.
record() {
  local engine=$1 scenario=$2 n=$3 queue=$4 rtext=$5 ratio=$6 rto=$7 tool=$8 rpf qjson
  rpf=$([ -n "$P_FSYNCS" ] && div "$P_COUNTED" "$P_FSYNCS" || printf 'n/a')
  ROWS+=$'\n'$(printf '%-8s | %-28s | %7s | %5s | %10s | %-16s | %10s | %11s | %s' "$engine" "$scenario" "$n" "$queue" "$P_ROWS_S" "$rtext" "$rpf" "$P_CPU_US" "$P_CHECK")
  case $queue in on) qjson=true ;; off) qjson=false ;; *) qjson=null ;; esac
  printf '{"date":"%s","loadavg":%s,"commit":"%s","dirty":%s,"cpus":%s,"engine":"%s","server_version":%s,"db_settings":%s,"durable":%s,"fs":"%s","scenario":"%s","tool":"%s","clients":%s,"queue":%s,"rows_per_s":%s,"ratio":%s,"ratio_to":%s,"rows_ok":%s,"rows_counted":%s,"bad":%s,"errors":%s,"fsyncs":%s,"rows_per_fsync":%s,"apijet_cpu_us_per_row":%s,"check":%s,"config":{"write_queue_rows":%s,"write_queue_us":%s,"max_batch":%s,"pool_size":"default"}%s}\n' \
    "$STARTED" "$(loadavg)" "$COMMIT" "$DIRTY" "$(nproc)" "$engine" "$(json_str "$DB_VERSION")" "$(json_str "$DB_SETTINGS")" \
    "$([ "$DURABLE" = 1 ] && echo true || echo false)" "$FSTYPE" "$scenario" "$tool" "$n" "$qjson" "$P_ROWS_S" \
    "${ratio:-null}" "$([ -n "$rto" ] && json_str "$rto" || echo null)" "$P_OK" "$P_COUNTED" "$P_BAD" "$P_ERRS" \
    "${P_FSYNCS:-null}" "$([ "$rpf" = n/a ] && echo null || echo "$rpf")" "${P_CPU_US:-null}" "$(json_str "$P_CHECK")" \
    "${QUEUE_ROWS:-64}" "${QUEUE_US:-2000}" "$((BATCH > 1000 ? BATCH : 1000))" "$P_EXTRA" >>"$OUT"
}

# ---------------------------------------------------------------- run
run_engine() {
  local engine=$1 n queue raw_tool raw_batch_tool
  case $engine in
    postgres) raw_tool=pgbench raw_batch_tool=psql ;;
    mariadb) raw_tool=mysqlslap raw_batch_tool=mariadb ;;
    sqlite) raw_tool="" raw_batch_tool=sqlite3 ;;
  esac
  start_db "$engine"
  log "$engine: load average $(loadavg) on $(nproc) CPUs before the runs"

  # Saved results per point: rows/s and the P_* needed to print the row later.
  declare -A RS=() SAVE=()
  save() { RS[$1]=$P_ROWS_S SAVE[$1]=$(declare -p P_ROWS_S P_OK P_REQ P_BAD P_ERRS P_COUNTED P_FSYNCS P_CHECK P_EXTRA P_CPU_US); }
  load() { eval "${SAVE[$1]//declare -- /}"; }

  for queue in off on; do
    start_apijet "$engine" "$([ $queue = on ] && echo true || echo false)"
    for n in $CLIENTS; do
      wrk_point "$engine" "$n" "$WORK/one.json" '"count":1,' 1
      save "single-$queue-$n"
    done
    if [ $queue = on ]; then
      log "$engine: $BATCH-row POSTs, one connection, ${DURATION}s"
      wrk_point "$engine" 1 "$WORK/batch.json" "\"count\":$BATCH," "$BATCH"
      save batch
    fi
    stop_apijet
  done

  if [ -n "$raw_tool" ]; then
    if [ "$engine" = postgres ]; then
      q postgres 'CREATE SEQUENCE bench_id START 200000000000000000' >/dev/null
      printf 'INSERT INTO "Comment" (id, "userId", "momentId", content) VALUES (nextval('\''bench_id'\''), %s, %s, '\''bench'\'');\n' \
        "$USER_ID" "$MOMENT_ID" >"$WORK/pgbench-one.sql"
    fi
    for n in $CLIENTS; do
      "${raw_tool}_point" "$n"
      save "raw-$n"
    done
  fi
  raw_batch_point "$engine"
  save raw-batch

  # Rows: per clients, queue off / on / raw; then the batch and the raw batch.
  ROWS=""
  local ratio
  for n in $CLIENTS; do
    load "single-off-$n"
    ratio=$([ -n "$raw_tool" ] && div "${RS[single-off-$n]}" "${RS[raw-$n]}" '%.2f' || echo null)
    record "$engine" "POST 1 row" "$n" off "$([ "$ratio" != null ] && echo "${ratio}x $raw_tool")" \
      "$([ "$ratio" != null ] && echo "$ratio")" "$([ "$ratio" != null ] && echo "$raw_tool")" apijet
    load "single-on-$n"
    ratio=$(div "${RS[single-on-$n]}" "${RS[single-off-$n]}" '%.2f')
    record "$engine" "POST 1 row" "$n" on "${ratio}x off" "$ratio" "queue off" apijet
    if [ -n "$raw_tool" ]; then
      load "raw-$n"
      record "$engine" "$raw_tool 1-row INSERT" "$n" - "" "" "" "$raw_tool"
    fi
  done
  load batch
  ratio=$(div "${RS[batch]}" "${RS[raw-batch]}" '%.2f')
  record "$engine" "POST $BATCH rows (Comment[])" 1 - "${ratio}x $raw_batch_tool" "$ratio" "$raw_batch_tool" apijet
  load raw-batch
  record "$engine" "$raw_batch_tool $BATCH-row INSERT" 1 - "" "" "" "$raw_batch_tool"

  local table v
  table="$engine $DB_VERSION — $DB_SETTINGS; data on $FSTYPE"$'\n'$(hdr)
  table+=$'\n'$(hdr | tr -c '|\n' '-')$ROWS
  for n in $CLIENTS; do
    [ "$n" -ge 64 ] || continue
    ratio=$(div "${RS[single-on-$n]}" "${RS[single-off-$n]}" '%.2f')
    if awk -v r="$ratio" -v g="$QUEUE_GOAL" 'BEGIN { exit !(r >= g) }'; then v=met; else v=MISSED; fi
    table+=$'\n'"goal: queue on >= ${QUEUE_GOAL}x queue off at $n clients: ${ratio}x — $v"
    VERDICTS+="$engine queue@$n ${ratio}x $v; "
  done
  ratio=$(div "${RS[batch]}" "${RS[raw-batch]}" '%.2f')
  if awk -v r="$ratio" -v g="$BATCH_GOAL" 'BEGIN { exit !(r >= g) }'; then v=met; else v=MISSED; fi
  table+=$'\n'"goal: $BATCH-row POST >= ${BATCH_GOAL}x $raw_batch_tool multi-row INSERT: ${ratio}x — $v"
  VERDICTS+="$engine batch ${ratio}x $v; "
  TABLES+=$table$'\n\n'

  db_stop_all
}

log "engines: ${ENGINES[*]}; clients: $CLIENTS; ${DURATION}s per point; batch $BATCH; durable: $DURABLE; write_queue_rows ${QUEUE_ROWS:-64 (default)}, write_queue_us ${QUEUE_US:-2000 (default)}; cpus: $(nproc); apijet $COMMIT (dirty: $DIRTY)"
for e in "${ENGINES[@]}"; do
  run_engine "$e"
done

printf '\n%s' "$TABLES"
printf 'rows/s: acknowledged rows / wrk duration (apijet), pgbench tps, mysqlslap queries / time, client rows / (time - start-up).\n'
printf 'rows/fsync: rows counted / fsyncs (pg_stat_wal.wal_sync, Innodb_data_fsyncs). cpu us/row: apijet user+system CPU time / rows counted.\n'
printf 'goals: %s\n' "${VERDICTS%; }"
printf 'JSON lines: %s\n' "${OUT#"$ROOT"/}"
[ "$FAILED" = 0 ] || die "some checks failed (see the check column)"
