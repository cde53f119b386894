#!/usr/bin/env bash
# apijet on MariaDB sharded with Spider (a head node and three data nodes, every table
# partitioned by HASH(id)): what one MariaDB answers, Spider must answer too.
#
#   bash scripts/cluster/spider-check.sh
#
# 1. Conformance: the APIJSON demo databases are loaded into the head and sharded, then the
#    recorded cases are replayed (the ignored test conformance::conformance_spider, through
#    cargo test): `conformance [spider]: …` and `conformance writes [spider]: …`; documented
#    deviations are `spider/REF-ID` lines of tests/it/conformance/known-failures.txt.
# 2. Ids: two instances (instance_id 0 and 1) insert rows one at a time and in batches; the rows
#    each data node holds are counted.
# 3. Atomicity: multi-row POSTs and a /crud whose rows fall on every shard commit whole; with a
#    data node down they are refused with code 503 (try again), and none of their rows is on
#    the other shards.
# 4. A 1,000,000-row list (CHECK_LIST_ROWS) streamed from all shards, apijet's peak RSS and the
#    head's measured against a list of a tenth of the rows.
#
# The last line is
#   spider: conformance OK (N cases), ids even (a / b / c), cross-shard writes atomic, N-row list in flat memory (P MiB peak)
# and the exit status is 0 only when every part held. Everything runs on loopback under a mktemp
# directory and is stopped and removed on exit (CHECK_KEEP_LOGS=1 keeps the directory of a
# failed run).
set -euo pipefail
cd "$(dirname "$0")/../.."

CHECK_LIST_ROWS=${CHECK_LIST_ROWS:-1000000}
CHECK_PARTS=${CHECK_PARTS:-conformance ids atomic list}
CHECK_TIMEOUT=${CHECK_TIMEOUT:-900}

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
  if [ "$rc" -ne 0 ] && [ -n "$DIR" ] && [ -n "${CHECK_KEEP_LOGS:-}" ]; then
    cl_log "logs kept in $DIR"
  elif [ -n "$DIR" ]; then
    rm -rf "$DIR"
  fi
  cl_log "spider check done in ${SECONDS} s (exit $rc)"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'cl_log "timed out after ${CHECK_TIMEOUT}s"; exit 124' TERM

cl_require spider
cl_watchdog $$ "$CHECK_TIMEOUT" </dev/null >/dev/null 2>&1 &
bin=$(cl_apijet_bin)
export APIJET_BIN=$bin
DIR=$(mktemp -d /tmp/apijet-cluster.XXXXXX)

cl_spider_up "$DIR" 3
head_args="-h 127.0.0.1 -P $CL_SPIDER_HEAD_PORT -u root"

wants() { [[ " $CHECK_PARTS " == *" $1 "* ]]; }
summary=()
run=$(date +%s)
db="mysql://root@127.0.0.1:$CL_SPIDER_HEAD_PORT/apijet"

# --- 1. Conformance --------------------------------------------------------------------------
check_conformance() {
  local started=$SECONDS loaders=() p rc=0 cases database
  for database in apijet_conf apijet_conf_w; do
    python3 ../shared/apijson/load-demo-db --mariadb-db "$database" --mysql="$head_args" \
      >"$DIR/load-$database.log" 2>&1 &
    loaders+=($!)
  done
  for p in "${loaders[@]}"; do wait "$p" || { cat "$DIR"/load-*.log >&2; return 1; }; done
  cl_spider_shard apijet_conf apijet_conf_w || return 1
  cl_log "demo databases loaded and sharded in $((SECONDS - started)) s"
  APIJET_TEST_SPIDER_URL="mysql://root@127.0.0.1:$CL_SPIDER_HEAD_PORT/mysql" \
    cargo test --quiet --test it -- --ignored --exact conformance::conformance_spider --nocapture \
    >"$DIR/conformance.log" 2>&1 || rc=$?
  grep -E '^(FAIL|REGRESSION|NOW PASSING|known|conformance)' "$DIR/conformance.log" || true
  if [ "$rc" -ne 0 ]; then
    tail -n 30 "$DIR/conformance.log" >&2
    cl_log "the conformance replay on Spider failed"
    return 1
  fi
  cases=$(grep -E '^conformance( writes)? \[spider\]' "$DIR/conformance.log" |
    awk -F'[:,]' '{ for (i = 2; i <= NF; i++) { split($i, w, " "); n += w[1] } } END { print n }')
  summary+=("conformance OK ($cases cases)")
}

# apijet's demo database, sharded, and two instances behind haproxy. (The checks run in `||`
# lists, where `set -e` does not hold: every step that can fail says so itself.)
apijet_up() {
  cl_spider_sql head "CREATE DATABASE apijet" &&
    "$bin" demo --db "$db" >/dev/null &&
    cl_spider_shard apijet &&
    cl_apijet_up "$DIR" 0 "$db" &&
    cl_apijet_up "$DIR" 1 "$db" &&
    cl_haproxy_up "$DIR"
}

# --- 2. Ids ----------------------------------------------------------------------------------
check_ids() {
  local instances singles stale batched shares=() k four line total worst text
  instances="http://127.0.0.1:${CL_API_PORTS[0]},http://127.0.0.1:${CL_API_PORTS[1]}"
  # Single-row POSTs from both instances (4 writers, 20 a second each, every row read back
  # through the other instance), then batches of 100 rows.
  python3 scripts/cluster/writers.py run --instances "$instances" --proxy "http://127.0.0.1:$CL_PROXY_PORT" \
    --writers 4 --rate 20 --seconds 6 --run "$run" --out "$DIR/ids" >/dev/null || return 1
  singles=$(cat "$DIR"/ids/writer-*.log | awk -F'\t' '$4 == "ok"' | wc -l)
  stale=$(cat "$DIR"/ids/writer-*.log | awk -F'\t' '$4 == "ok" && $7 != "seen"' | wc -l)
  batched=$(python3 scripts/cluster/spider-probe.py batches --instances "$instances" --marker "ft-$run-batch" --batches 5 --rows 100) ||
    return 1
  for k in 0 1 2; do
    shares+=("$(cl_spider_sql "$k" "SELECT COUNT(*) FROM apijet.Comment WHERE content LIKE 'ft-$run-%'")") || return 1
  done
  # The same ids, were they spread by HASH(id) over four shards instead (id mod 4).
  four=$(cl_spider_sql head "SELECT MOD(id, 4), COUNT(*) FROM apijet.Comment WHERE content LIKE 'ft-$run-%' GROUP BY 1" |
    awk '{ n[$1] = $2 } END { printf "%d / %d / %d / %d", n[0], n[1], n[2], n[3] }')
  line=$(python3 - "$singles" "$batched" "$stale" "$four" "${shares[@]}" <<'PY'
import sys
singles, batched, stale, four = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
shares = [int(x) for x in sys.argv[5:]]
total = sum(shares)
even = total / len(shares)
worst = max(abs(s - even) / even for s in shares) if total else 1.0
print(f"{total} {worst:.4f} spider ids: {total} new rows ({singles} single POSTs through 2 instances, "
      f"{batched} in batches of 100) on the 3 shards: {' / '.join(map(str, shares))} "
      f"(largest deviation from even {100 * worst:.1f} %); {stale} reads through the other instance "
      f"missed a row; over 4 shards by HASH(id) they would be {four}")
PY
  )
  read -r total worst text <<<"$line"
  echo "$text"
  if [ "$total" -ne $((singles + batched)) ] || [ "$stale" -ne 0 ] || ! awk "BEGIN { exit !($worst < 0.15) }"; then
    cl_log "ids: $((singles + batched)) acknowledged, $total on the shards, deviation $worst (allowed 0.15), $stale stale reads"
    return 1
  fi
  summary+=("ids even (${shares[*]})")
}

# --- 3. Atomicity across shards --------------------------------------------------------------
marked() { # "NODES" MARKER: the rows holding MARKER on those data nodes
  local n=0 k
  for k in $1; do
    n=$((n + $(cl_spider_sql "$k" "SELECT COUNT(*) FROM apijet.Comment WHERE content LIKE '$2-%'")))
  done
  echo "$n"
}

check_atomic() {
  local api=http://127.0.0.1:${CL_API_PORTS[0]} token up down left moment in_doubt k verdict own
  # A login reads Privacy by phone, on every shard: it is done while they are all up.
  token=$(python3 scripts/cluster/spider-probe.py login --instance "$api") || return 1
  up=$(python3 scripts/cluster/spider-probe.py writes --instance "$api" --token "$token" --marker "at-$run-up" --avoid-shard 1) ||
    return 1
  own=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["moment"])' "$up")
  cl_spider_kill 1 || return 1
  down=$(python3 scripts/cluster/spider-probe.py writes --instance "$api" --token "$token" --marker "at-$run-down" --moment "$own") ||
    return 1
  left=$(marked "0 2" "at-$run-down")
  cl_spider_start 1 || return 1
  cl_log "XA transactions data node 1 held in doubt: $(cl_spider_resolve)"
  left=$((left + $(marked 1 "at-$run-down")))
  moment=$(cl_spider_sql head "SELECT content FROM apijet.Moment WHERE id = $own")
  in_doubt=$(cl_spider_sql head "SELECT COUNT(*) FROM mysql.spider_xa")
  for k in 0 1 2; do in_doubt=$((in_doubt + $(cl_spider_sql "$k" "XA RECOVER" | wc -l))); done
  verdict=$(python3 - "$up" "$down" "$left" "$moment" "$in_doubt" "at-$run-up-crud-moment" <<'PY'
import json, sys
up, down = json.loads(sys.argv[1]), json.loads(sys.argv[2])
left, moment, in_doubt, kept = int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), sys.argv[6]
shards = sorted({i % 3 for call in (up["post"], up["crud"]) for i in call["ids"]})
ok = (up["post"]["code"] == 200 and up["crud"]["code"] == 200 and len(shards) == 3
      and down["post"]["code"] == 503 and down["crud"]["code"] == 503
      and left == 0 and in_doubt == 0 and moment == kept)
print(("OK " if ok else "BAD ") +
      f"spider atomicity: with every shard up, a 6-row POST and a /crud (3 rows and a PUT) wrote on "
      f"shards {shards} whole (codes {up['post']['code']}, {up['crud']['code']}); with shard 1 down "
      f"both were refused (codes {down['post']['code']}, {down['crud']['code']}: "
      f"\"{down['post']['msg']}\"), {left} of their rows are on any shard and the Moment kept "
      f"\"{moment}\"; {in_doubt} XA transactions in doubt after the restart")
PY
  )
  echo "${verdict#* }"
  [ "${verdict%% *}" = OK ] || return 1
  summary+=("cross-shard writes atomic")
}

# --- 4. A big list from every shard ----------------------------------------------------------
check_list() {
  local n=$CHECK_LIST_ROWS k fills=() p servers="" head_pid tenth full line columns
  columns="id bigint NOT NULL PRIMARY KEY, x_uin bigint NOT NULL, x_send_time datetime NOT NULL,
    x_xid int NOT NULL, x_result tinyint NOT NULL, x_credit int NOT NULL, x_channel varchar(32),
    x_remark varchar(64)"
  # Each data node fills its own share (the ids HASH(id) gives it): no row goes through the head.
  for k in 0 1 2; do
    cl_spider_sql "$k" "CREATE TABLE apijet.t_big ($columns) ENGINE=InnoDB;
      INSERT INTO apijet.t_big SELECT seq, 100000000 + (seq * 7919) % 900000000,
        TIMESTAMP '2024-01-01 00:00:00' + INTERVAL (seq % 31536000) SECOND,
        CASE WHEN seq % 20 < 6 THEN 1001 WHEN seq % 20 < 11 THEN 1002 ELSE 2000 + seq % 50000 END,
        seq % 3, (seq * 17) % 100000, CONCAT('channel-', seq % 20), CONCAT('remark for event ', seq)
      FROM apijet.seq_1_to_$n WHERE MOD(seq, 3) = $k" &
    fills+=($!)
    servers+="${servers:+, }PARTITION p$k REMOTE_SERVER='s$k'"
  done
  for p in "${fills[@]}"; do wait "$p" || return 1; done
  cl_log "t_big: $n rows written on the data nodes"
  cl_spider_sql head "CREATE TABLE apijet.t_big ($columns) ENGINE=SPIDER REMOTE_DATABASE='apijet'
      REMOTE_TABLE='t_big' PARTITION BY HASH (id) ($servers);
    INSERT INTO apijet.Access (id, name, alias, get, head) VALUES (990001, 't_big', 'TBig',
      '[\"UNKNOWN\",\"LOGIN\",\"CONTACT\",\"CIRCLE\",\"OWNER\",\"ADMIN\"]',
      '[\"UNKNOWN\",\"LOGIN\",\"CONTACT\",\"CIRCLE\",\"OWNER\",\"ADMIN\"]')" || return 1
  # One answer of n rows is larger than the default max_answer_bytes (16 MiB), and takes longer
  # than an anonymous statement may (5 s) in a debug build on a busy machine.
  CL_API_ENV=("APIJET_MAX_COUNT=$n" "APIJET_MAX_ANSWER_BYTES=$((400 * n))"
    "APIJET_STATEMENT_TIMEOUT_MS=300000" "APIJET_ANONYMOUS_STATEMENT_TIMEOUT_MS=0")
  cl_apijet_up "$DIR" 2 "$db" || return 1
  CL_API_ENV=()
  head_pid=${CL_SPIDER_PIDS[0]}
  tenth=$(python3 scripts/cluster/spider-probe.py list --instance "http://127.0.0.1:${CL_API_PORTS[2]}" \
    --rows $((n / 10)) --pids "${CL_API_PIDS[2]},$head_pid") || return 1
  full=$(python3 scripts/cluster/spider-probe.py list --instance "http://127.0.0.1:${CL_API_PORTS[2]}" \
    --rows "$n" --pids "${CL_API_PIDS[2]},$head_pid") || return 1
  line=$(python3 - "$n" "$tenth" "$full" "${CL_API_PIDS[2]}" "$head_pid" <<'PY'
import json, sys
n, tenth, full, api, head = int(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4], sys.argv[5]
mib = lambda kib: kib / 1024
peak, peak10 = mib(full["peak_kib"][api]), mib(tenth["peak_kib"][api])
grew = mib(full["peak_kib"][head] - full["idle_kib"][head])
ok = full["rows"] == n and tenth["rows"] == n // 10 and peak <= 1.5 * peak10 + 16
print(("OK " if ok else "BAD ") + f"{n} {peak:.0f} spider list: {full['rows']} rows "
      f"({full['bytes'] / 1e6:.0f} MB) streamed from 3 shards in {full['seconds']:.1f} s; apijet peak RSS "
      f"{peak:.1f} MiB ({peak10:.1f} MiB for {tenth['rows']} rows), head node RSS {mib(full['idle_kib'][head]):.0f} → "
      f"{mib(full['peak_kib'][head]):.0f} MiB (+{grew:.0f})")
PY
  )
  read -r verdict rows peak text <<<"$line"
  echo "$text"
  [ "$verdict" = OK ] || return 1
  summary+=("$rows-row list in flat memory (${peak} MiB peak)")
}

# PART: runs check_PART, timed.
part() {
  local started=$SECONDS
  "check_$1" || { cl_log "$1: failed after $((SECONDS - started)) s"; return 1; }
  cl_log "$1: done in $((SECONDS - started)) s"
}
if wants conformance; then part conformance || exit 1; fi
if wants ids || wants atomic || wants list; then apijet_up || exit 1; fi
if wants ids; then part ids || exit 1; fi
if wants atomic; then part atomic || exit 1; fi
if wants list; then part list || exit 1; fi
echo "spider: $(IFS=,; echo "${summary[*]}" | sed 's/,/, /g')"
