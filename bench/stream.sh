#!/usr/bin/env bash
# bench/stream.sh — streaming benchmark of the read engine (run by hand; not a test).
#
# What it does
#   For each engine (PostgreSQL, MariaDB) it starts a throwaway database server
#   (scripts/lib/db.sh), loads the demo dataset (`apijet demo`), creates the table `t_event`
#   with 1,000,000 generated rows inside the database, registers it in `Access` as `TEvent`,
#   starts `apijet serve` (max_count 1000000, statement_timeout_ms 0) and then, for each row
#   count N, measures:
#     * apijet: `curl` POST /get {"TEvent[]":{"count":N,"TEvent":{"@column":<9 columns>}}}
#       to /dev/null — time_total, time_starttransfer, size_download; meanwhile a background
#       sampler reads VmRSS of the apijet process every ~20 ms (peak = max sample; the
#       kernel's VmHWM, reset before each request via /proc/PID/clear_refs, goes to the JSON).
#     * baseline: the database's own client reading the same 9 columns of the same N rows to
#       /dev/null in the same run: `psql -c "COPY (SELECT …) TO STDOUT"` or
#       `mariadb --quick -N -B -e "SELECT …"`, timed with the same clock ($EPOCHREALTIME).
#   Before the timed runs, one untimed request per N is piped through a small streaming check
#   (python3): HTTP 200, body starts with {"TEvent[]":[, holds exactly N rows (counts
#   "x_uin":), ends with the "msg":"success" envelope. For N <= 100000 the body is also parsed
#   as JSON. This run doubles as the warm-up. Then BENCH_REPEAT rounds alternate
#   apijet / baseline; times are medians over the rounds, the peak RSS is the max.
#
# How to run (from anywhere; needs root or preinstalled PostgreSQL/MariaDB, curl, python3)
#   bench/stream.sh                      # both engines
#   bench/stream.sh postgres             # one engine: postgres | mariadb
#   BENCH_ROWS="10000 100000" BENCH_REPEAT=5 bench/stream.sh
#   APIJET_BIN=/path/to/apijet bench/stream.sh     # skip `cargo build --release`
#   Takes about 3 minutes on 2 cores (row generation 10-20 s per engine). Other work on the
#   machine skews the times: the 1-minute load average is logged and kept in the JSON.
#
# What it prints
#   Progress on stderr; on stdout one table per engine:
#     engine | rows | apijet s | first byte s | baseline s | ratio | apijet peak RSS MiB |
#     idle RSS MiB | bytes
#   ratio = apijet s / baseline s (1.00 = as fast as the database's own client; lower is
#   better); bytes = size of apijet's JSON body. After each table: the memory verdict for the
#   largest N (peak − idle, the bar is 32 MiB above the idle process). The same rows, with a
#   few more fields (baseline bytes, VmHWM, every round's times), go as JSON lines to
#   bench/out/stream-<UTC date>.jsonl. Exit status 1 when a check fails.

set -euo pipefail
shopt -s inherit_errexit
export LC_ALL=C

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/lib/db.sh disable=SC1091
source scripts/lib/db.sh

ROWS=${BENCH_ROWS:-"10000 100000 1000000"}
REPEAT=${BENCH_REPEAT:-3}
TABLE_ROWS=1000000
SAMPLE_INTERVAL=0.02
MEM_BAR_MIB=32
COLUMNS_CSV="x_uin,x_send_time,x_xxxx_id,x_xid,x_xx_id,x_xxxxx_id,x_xxxx_result,x_result,x_credit"
ENGINES=("$@")
[ ${#ENGINES[@]} -gt 0 ] || ENGINES=(postgres mariadb)

log() { printf '[bench] %s\n' "$*" >&2; }
die() {
  printf '[bench] error: %s\n' "$*" >&2
  exit 1
}

for e in "${ENGINES[@]}"; do
  case $e in postgres | mariadb) ;; *) die "unknown engine '$e' (postgres | mariadb)" ;; esac
done
for n in $ROWS; do
  if ! [[ $n =~ ^[1-9][0-9]*$ ]] || [ "$n" -gt "$TABLE_ROWS" ]; then
    die "BENCH_ROWS: '$n' is not a count in 1..$TABLE_ROWS"
  fi
done
[[ $REPEAT =~ ^[1-9][0-9]*$ ]] || die "BENCH_REPEAT must be a positive integer"
for tool in curl python3 awk; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is required"
done

# ---------------------------------------------------------------- cleanup
WORK=$(mktemp -d /tmp/apijet-bench.XXXXXX)
APIJET_PID=""
SAMPLER_PID=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_sampler || true
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
done
db_install_missing "$want_pg" "$want_my" || die "database packages missing"

mkdir -p "$ROOT/bench/out"
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
STARTED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
OUT=$ROOT/bench/out/stream-$STAMP.jsonl
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
DIRTY=$([ -n "$(git status --porcelain -- crates src Cargo.toml Cargo.lock 2>/dev/null)" ] && echo true || echo false)

# ---------------------------------------------------------------- helpers
now() { printf '%s' "$EPOCHREALTIME"; }
loadavg() { local one _; read -r one _ </proc/loadavg; printf '%s' "$one"; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f", b - a }'; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { printf "%.4f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
max_of() { printf '%s\n' "$@" | sort -g | tail -n 1; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
json_list() { local IFS=,; printf '[%s]' "$*"; }

# kB value of a field (VmRSS, VmHWM) of /proc/PID/status, without forking.
proc_kb() {
  local key val _
  while read -r key val _; do
    if [ "$key" = "$2:" ]; then
      printf '%s' "$val"
      return 0
    fi
  done <"/proc/$1/status"
  return 1
}

# Background sampler: the max VmRSS (kB) of PID goes to FILE until stop_sampler.
start_sampler() {
  local pid=$1 file=$2
  (
    max=0
    trap 'printf "%s\n" "$max" >"$file"; exit 0' TERM
    while :; do
      v=$(proc_kb "$pid" VmRSS 2>/dev/null) || v=0
      if [ "$v" -gt "$max" ]; then
        max=$v
        printf '%s\n' "$max" >"$file"
      fi
      sleep "$SAMPLE_INTERVAL" &
      wait $!
    done
  ) &
  SAMPLER_PID=$!
}
stop_sampler() {
  if [ -n "$SAMPLER_PID" ]; then
    kill -TERM "$SAMPLER_PID" 2>/dev/null || true
    wait "$SAMPLER_PID" 2>/dev/null || true
    SAMPLER_PID=""
  fi
}

stop_apijet() {
  if [ -n "$APIJET_PID" ]; then
    if kill -0 "$APIJET_PID" 2>/dev/null; then
      kill -TERM "$APIJET_PID" 2>/dev/null || true
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

# Runs SQL (from stdin) against the bench database of ENGINE.
sql() {
  case $1 in
    postgres) psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$DB_PG_PORT" -U postgres -d "${2:-apijet_bench}" ;;
    mariadb) mariadb --no-defaults -h 127.0.0.1 -P "$DB_MY_PORT" -u root "${2:-apijet_bench}" ;;
  esac
}

select_sql() { printf 'SELECT %s FROM t_event LIMIT %s' "$COLUMNS_CSV" "$1"; }

# The database's own client reading N rows (stdout); baseline_once times it to /dev/null.
# The time includes the client's start-up and connection; LIMIT 0 measures that part.
baseline_cmd() {
  case $1 in
    postgres) PGGSSENCMODE=disable PGSSLMODE=disable psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 \
      -p "$DB_PG_PORT" -U postgres -d apijet_bench -c "COPY ($(select_sql "$2")) TO STDOUT" ;;
    mariadb) mariadb --no-defaults --quick -N -B -h 127.0.0.1 -P "$DB_MY_PORT" -u root apijet_bench \
      -e "$(select_sql "$2")" ;;
  esac
}
baseline_once() {
  local t0 t1
  t0=$(now)
  baseline_cmd "$1" "$2" >/dev/null
  t1=$(now)
  elapsed "$t0" "$t1"
}

request_body() { printf '{"TEvent[]":{"count":%s,"TEvent":{"@column":"%s"}}}' "$1" "$COLUMNS_CSV"; }

# The streaming check of an answer on stdin: prints "BYTES ROWS", then one line per problem.
# Nothing is held in memory, except for N <= 100000 whose body is also parsed as a whole.
cat >"$WORK/check.py" <<'PY'
import json, sys
n = int(sys.argv[1]); need = b'"x_uin":'; keep = len(need) - 1
count = total = 0; head = b""; tail = b""; carry = b""
whole = [] if n <= 100000 else None
while True:
    b = sys.stdin.buffer.read(1 << 20)
    if not b:
        break
    total += len(b)
    if len(head) < 64:
        head += b[:64]
    buf = carry + b
    count += buf.count(need)
    carry = buf[-keep:]
    tail = (tail + b)[-200:]
    if whole is not None:
        whole.append(b)
problems = []
if not head.startswith(b'{"TEvent[]":['):
    problems.append('body does not start with {"TEvent[]":[ : %r' % head[:64])
if count != n:
    problems.append("%d rows in the body, expected %d" % (count, n))
if b'"msg":"success"' not in tail or not tail.endswith(b"}"):
    problems.append("body does not end with the success envelope: %r" % tail[-120:])
if whole is not None and not problems:
    try:
        doc = json.loads(b"".join(whole))
        items = doc.get("TEvent[]", [])
        if len(items) != n or doc.get("code") != 200:
            problems.append("parsed JSON: %d items, code %r" % (len(items), doc.get("code")))
        elif "x_uin" not in items[0] or "x_send_time" not in items[0]:
            problems.append("first row lacks columns: %r" % items[0])
    except ValueError as e:
        problems.append("not valid JSON: %s" % e)
print(total, count)
for p in problems:
    print(p)
PY

# Untimed request through the check (also the warm-up); sets VERIFY_BYTES.
verify() {
  local n=$1 url=$2 st code
  set +e
  curl -sS --max-time 600 -D "$WORK/verify.headers" -H 'Content-Type: application/json' \
    --data "$(request_body "$n")" "$url/get" | python3 "$WORK/check.py" "$n" >"$WORK/verify.txt"
  st=("${PIPESTATUS[@]}")
  set -e
  code=$(awk 'NR == 1 { print $2 }' "$WORK/verify.headers" 2>/dev/null || true)
  [ "${st[0]}" = 0 ] || die "verify N=$n: curl failed (exit ${st[0]}: the body was aborted or cut; HTTP ${code:-?})"
  [ "${st[1]}" = 0 ] || die "verify N=$n: the checker failed (exit ${st[1]})"
  [ "$code" = 200 ] || die "verify N=$n: HTTP $code"
  if [ "$(wc -l <"$WORK/verify.txt")" -gt 1 ]; then
    tail -n +2 "$WORK/verify.txt" >&2
    die "verify N=$n: the answer is incomplete or invalid"
  fi
  read -r VERIFY_BYTES _ <"$WORK/verify.txt"
}

# One timed apijet request; sets RUN_TOTAL RUN_FIRST RUN_BYTES RUN_WALL RUN_PEAK_KB RUN_HWM_KB.
apijet_once() {
  local n=$1 url=$2 w t0 t1 code
  # Reset the kernel's peak-RSS counter (VmHWM) so it covers this request only.
  echo 5 >"/proc/$APIJET_PID/clear_refs" 2>/dev/null || true
  rm -f "$WORK/peak"
  start_sampler "$APIJET_PID" "$WORK/peak"
  t0=$(now)
  w=$(curl -sS --max-time 600 -o /dev/null -H 'Content-Type: application/json' \
    --data "$(request_body "$n")" -w '%{time_total} %{time_starttransfer} %{size_download} %{http_code}' \
    "$url/get") || {
    stop_sampler
    die "apijet N=$n: curl failed (exit $?)"
  }
  t1=$(now)
  stop_sampler
  read -r RUN_TOTAL RUN_FIRST RUN_BYTES code <<<"$w"
  [ "$code" = 200 ] || die "apijet N=$n: HTTP $code"
  RUN_WALL=$(elapsed "$t0" "$t1")
  RUN_PEAK_KB=$(cat "$WORK/peak" 2>/dev/null || echo 0)
  RUN_HWM_KB=$(proc_kb "$APIJET_PID" VmHWM) || RUN_HWM_KB=0
  kill -0 "$APIJET_PID" 2>/dev/null || die "apijet died during N=$n (see $WORK/apijet.log)"
}

# ---------------------------------------------------------------- data
create_table() {
  local engine=$1
  case $engine in
    postgres)
      # Without synchronized scans every LIMIT N without ORDER BY reads the first N rows in
      # physical order, for apijet and psql alike (otherwise a scan starts where the last ended).
      sql postgres postgres <<<"CREATE DATABASE apijet_bench;
        ALTER DATABASE apijet_bench SET synchronize_seqscans = off;" ||
        die "postgres: CREATE DATABASE failed"
      ;;
    mariadb)
      mariadb --no-defaults -h 127.0.0.1 -P "$DB_MY_PORT" -u root -e "CREATE DATABASE apijet_bench CHARACTER SET utf8mb4" ||
        die "mariadb: CREATE DATABASE failed"
      ;;
  esac
  log "$engine: loading the demo dataset (Access, User, Moment, ...)"
  "$APIJET_BIN" demo --db "$DB_URL" >/dev/null || die "$engine: apijet demo failed"
  log "$engine: generating $TABLE_ROWS rows in t_event"
  local t0 t1
  t0=$(now)
  case $engine in
    postgres)
      sql postgres <<SQL || die "postgres: creating t_event failed"
CREATE TABLE t_event (
  id bigint PRIMARY KEY,
  x_uin bigint NOT NULL,
  x_send_time timestamp NOT NULL,
  x_xxxx_id int NOT NULL,
  x_xid int NOT NULL,
  x_xx_id int,
  x_xxxxx_id int NOT NULL,
  x_xxxx_result int NOT NULL,
  x_result smallint NOT NULL,
  x_credit int NOT NULL,
  x_channel varchar(32),
  x_remark varchar(64),
  x_tag varchar(16)
);
INSERT INTO t_event
SELECT g,
       100000000 + (g * 7919) % 900000000,
       timestamp '2024-01-01 00:00:00' + (g % 31536000) * interval '1 second',
       g % 1000, g % 50000,
       CASE WHEN g % 13 = 0 THEN NULL ELSE g % 100 END,
       g % 10000, (g * 31) % 1000, (g % 3)::smallint, (g * 17) % 100000,
       'channel-' || (g % 20), md5(g::text), 'tag' || (g % 7)
FROM generate_series(1::bigint, $TABLE_ROWS) AS g;
CREATE INDEX t_event_x_xid ON t_event (x_xid);
VACUUM ANALYZE t_event;
INSERT INTO "Access" (id, debug, "schema", name, alias, "get", "head", gets, heads, post, put, "delete", "date", detail)
VALUES (1000, 0, NULL, 't_event', 'TEvent',
        '["UNKNOWN","LOGIN","CONTACT","CIRCLE","OWNER","ADMIN"]',
        '["UNKNOWN","LOGIN","CONTACT","CIRCLE","OWNER","ADMIN"]',
        '[]', '[]', '[]', '[]', '[]', '2024-01-01 00:00:00', 'bench/stream.sh');
SQL
      ;;
    mariadb)
      local seq
      if sql mariadb <<<"SELECT 1 FROM seq_1_to_2 LIMIT 1;" >/dev/null 2>&1; then
        seq="SELECT seq AS g FROM seq_1_to_$TABLE_ROWS"
      else
        log "mariadb: no Sequence engine, using a recursive CTE"
        seq="WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i < 999)
             SELECT a.i * 1000 + b.i + 1 AS g FROM k a CROSS JOIN k b"
      fi
      sql mariadb >/dev/null <<SQL || die "mariadb: creating t_event failed"
CREATE TABLE t_event (
  id bigint NOT NULL PRIMARY KEY,
  x_uin bigint NOT NULL,
  x_send_time datetime NOT NULL,
  x_xxxx_id int NOT NULL,
  x_xid int NOT NULL,
  x_xx_id int,
  x_xxxxx_id int NOT NULL,
  x_xxxx_result int NOT NULL,
  x_result tinyint NOT NULL,
  x_credit int NOT NULL,
  x_channel varchar(32),
  x_remark varchar(64),
  x_tag varchar(16),
  KEY t_event_x_xid (x_xid)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
INSERT INTO t_event
SELECT g,
       100000000 + (g * 7919) % 900000000,
       TIMESTAMP '2024-01-01 00:00:00' + INTERVAL (g % 31536000) SECOND,
       g % 1000, g % 50000,
       CASE WHEN g % 13 = 0 THEN NULL ELSE g % 100 END,
       g % 10000, (g * 31) % 1000, g % 3, (g * 17) % 100000,
       CONCAT('channel-', g % 20), MD5(g), CONCAT('tag', g % 7)
FROM ($seq) AS s;
ANALYZE TABLE t_event;
INSERT INTO Access (id, debug, \`schema\`, name, alias, \`get\`, \`head\`, gets, heads, post, put, \`delete\`, \`date\`, detail)
VALUES (1000, 0, NULL, 't_event', 'TEvent',
        '["UNKNOWN","LOGIN","CONTACT","CIRCLE","OWNER","ADMIN"]',
        '["UNKNOWN","LOGIN","CONTACT","CIRCLE","OWNER","ADMIN"]',
        '[]', '[]', '[]', '[]', '[]', '2024-01-01 00:00:00', 'bench/stream.sh');
SQL
      ;;
  esac
  t1=$(now)
  local count
  count=$(printf 'SELECT count(*) FROM t_event;\n' | case $engine in
    postgres) psql -X -q -t -A -h 127.0.0.1 -p "$DB_PG_PORT" -U postgres -d apijet_bench ;;
    mariadb) mariadb --no-defaults -N -B -h 127.0.0.1 -P "$DB_MY_PORT" -u root apijet_bench ;;
  esac)
  [ "$count" = "$TABLE_ROWS" ] || die "$engine: t_event holds $count rows, expected $TABLE_ROWS"
  log "$engine: t_event ready ($count rows in $(elapsed "$t0" "$t1") s)"
}

# ---------------------------------------------------------------- apijet
start_apijet() {
  local engine=$1 port
  port=$(db_free_ports 1)
  cat >"$WORK/apijet.toml" <<TOML
max_count = $TABLE_ROWS
statement_timeout_ms = 0
debug = false
pool_size = 4
TOML
  "$APIJET_BIN" serve --db "$DB_URL" --listen "127.0.0.1:$port" --config "$WORK/apijet.toml" \
    >"$WORK/apijet.log" 2>&1 </dev/null &
  APIJET_PID=$!
  local i=0
  until grep -q 'listening on' "$WORK/apijet.log"; do
    if ! kill -0 "$APIJET_PID" 2>/dev/null; then
      cat "$WORK/apijet.log" >&2
      APIJET_PID=""
      die "$engine: apijet serve exited before listening"
    fi
    [ $i -lt 300 ] || die "$engine: apijet did not print 'listening on' within 30 s"
    sleep 0.1
    i=$((i + 1))
  done
  APIJET_URL=http://127.0.0.1:$port
  # Let start-up allocations settle before the idle reading.
  sleep 1
  IDLE_KB=$(proc_kb "$APIJET_PID" VmRSS) || die "cannot read /proc/$APIJET_PID/status"
  log "$engine: apijet pid $APIJET_PID on $APIJET_URL, idle RSS $(mib "$IDLE_KB") MiB"
}

# ---------------------------------------------------------------- run
FAILED=0
TABLES=""

run_engine() {
  local engine=$1 ver
  case $engine in
    postgres)
      db_start_postgres "$WORK" || die "PostgreSQL did not start"
      DB_URL=postgres://postgres@127.0.0.1:$DB_PG_PORT/apijet_bench
      ver=$(psql -X -t -A -h 127.0.0.1 -p "$DB_PG_PORT" -U postgres -d postgres -c 'SHOW server_version')
      ;;
    mariadb)
      db_start_mariadb "$WORK" || die "MariaDB did not start"
      DB_URL=mysql://root@127.0.0.1:$DB_MY_PORT/apijet_bench
      ver=$(mariadb --no-defaults -N -B -h 127.0.0.1 -P "$DB_MY_PORT" -u root -e 'SELECT VERSION()')
      ;;
  esac
  create_table "$engine"
  start_apijet "$engine"

  local table row n r overheads=()
  log "$engine: load average $(loadavg) on $(nproc) CPUs before the runs"
  table=$(printf '%-8s | %9s | %8s | %12s | %10s | %5s | %19s | %12s | %11s' \
    engine rows 'apijet s' 'first byte s' 'baseline s' ratio 'apijet peak RSS MiB' 'idle RSS MiB' bytes)
  table+=$'\n'$(printf '%s' "$table" | tr -c '|\n' '-')
  local last_peak_kb=0 last_hwm_kb=0 last_n=0
  for n in $ROWS; do
    log "$engine: N=$n verify + warm-up"
    verify "$n" "$APIJET_URL"
    local bbytes
    bbytes=$(baseline_cmd "$engine" "$n" | wc -c | tr -d ' ')
    local bt totals=() firsts=() zeros=() walls=() peaks=() hwms=() bases=() bytes=()
    for ((r = 1; r <= REPEAT; r++)); do
      apijet_once "$n" "$APIJET_URL"
      totals+=("$RUN_TOTAL") firsts+=("$RUN_FIRST") walls+=("$RUN_WALL")
      peaks+=("$RUN_PEAK_KB") hwms+=("$RUN_HWM_KB") bytes+=("$RUN_BYTES")
      bt=$(baseline_once "$engine" "$n")
      bases+=("$bt")
      bt=$(baseline_once "$engine" 0)
      zeros+=("$bt")
      log "$engine: N=$n round $r: apijet ${RUN_TOTAL}s (first byte ${RUN_FIRST}s, peak $(mib "$RUN_PEAK_KB") MiB, HWM $(mib "$RUN_HWM_KB") MiB), baseline ${bases[-1]}s"
    done
    local b
    for b in "${bytes[@]}"; do
      [ "$b" = "$VERIFY_BYTES" ] || {
        log "$engine: N=$n: body size varies between runs ($b vs $VERIFY_BYTES bytes)"
        FAILED=1
      }
    done
    local t_med f_med w_med b_med z_med ratio peak hwm
    t_med=$(median "${totals[@]}")
    f_med=$(median "${firsts[@]}")
    w_med=$(median "${walls[@]}")
    b_med=$(median "${bases[@]}")
    z_med=$(median "${zeros[@]}")
    overheads+=("$z_med")
    ratio=$(awk -v a="$t_med" -v b="$b_med" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }')
    peak=$(max_of "${peaks[@]}")
    hwm=$(max_of "${hwms[@]}")
    row=$(printf '%-8s | %9s | %8.3f | %12.3f | %10.3f | %5s | %19s | %12s | %11s' \
      "$engine" "$n" "$t_med" "$f_med" "$b_med" "$ratio" "$(mib "$peak")" "$(mib "$IDLE_KB")" "$VERIFY_BYTES")
    table+=$'\n'$row
    printf '{"date":"%s","loadavg":%s,"commit":"%s","dirty":%s,"cpus":%s,"engine":"%s","server_version":"%s","rows":%s,"repeat":%s,"apijet_s":%s,"first_byte_s":%s,"apijet_wall_s":%s,"baseline_s":%s,"baseline_limit0_s":%s,"ratio":%s,"peak_rss_mib":%s,"hwm_rss_mib":%s,"idle_rss_mib":%s,"bytes":%s,"baseline_bytes":%s,"apijet_s_runs":%s,"first_byte_s_runs":%s,"baseline_s_runs":%s,"peak_rss_kb_runs":%s,"hwm_rss_kb_runs":%s}\n' \
      "$STARTED" "$(loadavg)" "$COMMIT" "$DIRTY" "$(nproc)" "$engine" "$ver" "$n" "$REPEAT" "$t_med" "$f_med" "$w_med" "$b_med" "$z_med" "$ratio" \
      "$(mib "$peak")" "$(mib "$hwm")" "$(mib "$IDLE_KB")" "$VERIFY_BYTES" "$bbytes" \
      "$(json_list "${totals[@]}")" "$(json_list "${firsts[@]}")" "$(json_list "${bases[@]}")" \
      "$(json_list "${peaks[@]}")" "$(json_list "${hwms[@]}")" >>"$OUT"
    last_peak_kb=$peak last_hwm_kb=$hwm last_n=$n
  done

  # Memory verdict for the largest N: the larger of the sampled peak and VmHWM, above idle.
  local worst growth verdict
  worst=$(max_of "$last_peak_kb" "$last_hwm_kb")
  growth=$(awk -v p="$worst" -v i="$IDLE_KB" 'BEGIN { printf "%.1f", (p - i) / 1024 }')
  if awk -v g="$growth" -v bar="$MEM_BAR_MIB" 'BEGIN { exit !(g <= bar) }'; then
    verdict="ok"
  else
    verdict="OVER THE BAR"
    FAILED=1
  fi
  table+=$'\n'"memory, $last_n rows: peak $(mib "$worst") MiB (max of sampled VmRSS and VmHWM) - idle $(mib "$IDLE_KB") MiB = $growth MiB above idle (bar $MEM_BAR_MIB MiB): $verdict"
  table+=$'\n'"baseline client start-up + connect (same query with LIMIT 0): $(median "${overheads[@]}") s"
  TABLES+=$table$'\n\n'

  stop_apijet
  db_stop_all
}

log "engines: ${ENGINES[*]}; rows: $ROWS; rounds: $REPEAT; cpus: $(nproc); apijet $COMMIT (dirty: $DIRTY)"
for e in "${ENGINES[@]}"; do
  run_engine "$e"
done

printf '\n%s' "$TABLES"
printf 'ratio = apijet s / baseline s (median of %s rounds; baseline = %s). JSON lines: %s\n' \
  "$REPEAT" "psql COPY … TO STDOUT / mariadb --quick -N -B, to /dev/null" "${OUT#"$ROOT"/}"
[ "$FAILED" = 0 ] || die "some checks failed (see above)"
