# shellcheck shell=bash disable=SC2034  # CL_* variables are for the caller
# MariaDB sharded with Spider, for scripts/cluster/*.sh (sourced by lib.sh; see there for the
# conventions: loopback, free ports, one directory, bounded waits, pid files, cl_down).
#
#   cl_spider_up DIR [N]        a head node (Spider) on 127.0.0.1 and N (3) data nodes, data node k
#                               on 127.0.0.(k+2), each a plain MariaDB; the head knows them as
#                               servers s0…s(N-1). CL_SPIDER_HEAD_PORT, CL_SPIDER_DATA=(HOST:PORT…),
#                               CL_SPIDER_PIDS (head first)
#   cl_spider_shard DB…         moves every table of DB whose primary key is id onto the data nodes,
#                               partitioned by HASH(id) (scripts/cluster/spider-shard.py)
#   cl_spider_durable           data nodes flush their log at every commit from now on, restarts
#                               included (they load with it off)
#   cl_spider_kill K            kill -9 data node K
#   cl_spider_start K           (re)starts data node K on its data directory and waits for it
#   cl_spider_sql K SQL         runs SQL on node K (head, or a data node's index), tab-separated
#   cl_spider_resolve           settles the XA transactions data nodes hold in doubt (prepared
#                               when a node died, before the head's commit reached it) as the
#                               head decided them; prints how many were committed and rolled back
#
# Settings of the head, each for a reason found running apijet's conformance cases on it
# (CL_SPIDER_XA=OFF turns the first off, to measure what it costs):
# - spider_internal_xa: a transaction that wrote on several data nodes commits with XA (prepare
#   on every node, then commit), so a node that fails before it prepared rolls the whole
#   transaction back. Spider's XA bookkeeping tells the members of a transaction apart by host
#   only (the key of mysql.spider_xa_member has no port), so every data node has an address of
#   its own; on one address the second member of a transaction fails with "This xid member
#   already exists" (error 12606).
#   A data node killed between a transaction's PREPARE and its COMMIT comes back with the branch
#   still prepared (XA RECOVER lists it, its rows locked, invisible), and the head keeps the
#   transaction in mysql.spider_xa; until both are settled, a new transaction the head gives the
#   same xid fails ("This xid already exists", "XAER_DUPID"). The head does not settle them by
#   itself: cl_spider_resolve does, as an operator would after restarting the node.
# - spider_multi_split_read = 0: with it, a count over OR-ed ranges of id is sent to the data
#   nodes as a UNION ALL ending in ORDER BY `id`, which they refuse ("Unknown column 'id' in
#   'ORDER BY'"): apijet's `id%` with several ranges failed.
# - a BEFORE DELETE trigger on every sharded table (spider-shard.py): a DELETE pushed whole to
#   the data nodes of a partitioned Spider table reports 0 affected rows though it deleted them;
#   apijet takes 0 for "not yours or not there" and rolls back. A trigger makes the server delete
#   row by row (each row found, then deleted by primary key), with the right count.

CL_SPIDER_PLUGIN=${CL_SPIDER_PLUGIN:-/usr/lib/mysql/plugin/ha_spider.so}
CL_SPIDER_HEAD_PORT="" CL_SPIDER_DATA=() CL_SPIDER_PIDS=() CL_SPIDER_DIRS=() CL_SPIDER_ARGS=()
CL_SPIDER_FLUSH=0

# Node K's address: the head (K = head) on 127.0.0.1, data node K on 127.0.0.(K+2).
cl_spider_addr() {
  if [ "$1" = head ]; then printf '127.0.0.1:%s' "$CL_SPIDER_HEAD_PORT"; else printf '%s' "${CL_SPIDER_DATA[$1]}"; fi
}

cl_spider_sql() {
  local addr
  addr=$(cl_spider_addr "$1")
  mariadb --no-defaults -h "${addr%:*}" -P "${addr##*:}" -u root -N -B -e "$2"
}

# Starts node $1 (0 = the head, k = data node k-1) from CL_SPIDER_DIRS / CL_SPIDER_ARGS.
cl_spider_launch() {
  local i=$1 d=${CL_SPIDER_DIRS[$1]} mariadbd
  mariadbd=$(command -v mariadbd || echo /usr/sbin/mariadbd)
  # shellcheck disable=SC2086  # the node's own options, word-split on purpose
  "$mariadbd" --no-defaults --datadir="$d/data" --socket="$d/mysqld.sock" --pid-file="$d/mysqld.pid" \
    --tmpdir="$d/tmp" --user="$(id -un)" --log-error="$d/server.log" --default-time-zone=+00:00 \
    --skip-name-resolve --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
    --innodb-buffer-pool-size=128M --innodb-flush-log-at-trx-commit="$CL_SPIDER_FLUSH" --innodb-doublewrite=0 \
    --max-connections=500 ${CL_SPIDER_ARGS[$i]} </dev/null >/dev/null 2>&1 &
  CL_SPIDER_PIDS[i]=$!
}

# Waits until node $1 (as cl_spider_launch numbers them) answers.
cl_spider_wait() {
  local i=$1 node=head
  [ "$i" -gt 0 ] && node=$((i - 1))
  if ! db_poll "$CL_WAIT" 0.5 "kill -0 ${CL_SPIDER_PIDS[$i]} 2>/dev/null" cl_spider_sql "$node" "SELECT 1"; then
    tail -n 20 "${CL_SPIDER_DIRS[$i]}/server.log" >&2 || true
    cl_log "Spider node $node did not start"
    return 1
  fi
}

cl_spider_up() {
  local dir=$1 n=${2:-3} ports i
  mapfile -t ports < <(db_free_ports $((n + 1)))
  CL_SPIDER_HEAD_PORT=${ports[0]}
  mkdir -p "$dir/spider-template"
  # One installation, copied: mariadb-install-db takes seconds per node.
  if ! mariadb-install-db --no-defaults --datadir="$dir/spider-template" --user="$(id -un)" \
    --auth-root-authentication-method=normal --skip-test-db >"$dir/spider-install.log" 2>&1; then
    cat "$dir/spider-install.log" >&2
    return 1
  fi
  for ((i = 0; i <= n; i++)); do
    local d=$dir/spider$i
    mkdir -p "$d/tmp"
    cp -a "$dir/spider-template" "$d/data"
    CL_SPIDER_DIRS[i]=$d
    if [ "$i" -eq 0 ]; then
      CL_SPIDER_ARGS[i]="--bind-address=127.0.0.1 --port=${ports[0]} --plugin-load-add=ha_spider \
        --loose-spider-internal-xa=${CL_SPIDER_XA:-ON} --loose-spider-multi-split-read=0"
    else
      CL_SPIDER_DATA[i - 1]=127.0.0.$((i + 1)):${ports[$i]}
      CL_SPIDER_ARGS[i]="--bind-address=127.0.0.$((i + 1)) --port=${ports[$i]}"
    fi
    cl_spider_launch "$i"
  done
  rm -rf "$dir/spider-template"
  for ((i = 0; i <= n; i++)); do cl_spider_wait "$i" || return 1; done
  for ((i = 0; i < n; i++)); do
    local addr=${CL_SPIDER_DATA[$i]}
    cl_spider_sql head "CREATE SERVER s$i FOREIGN DATA WRAPPER mysql OPTIONS (HOST '${addr%:*}', PORT ${addr##*:}, USER 'root')" ||
      return 1
  done
  cl_log "Spider: head on 127.0.0.1:$CL_SPIDER_HEAD_PORT, data nodes ${CL_SPIDER_DATA[*]}"
}

cl_spider_shard() {
  local servers="" i
  for i in "${!CL_SPIDER_DATA[@]}"; do servers+="${servers:+,}s$i"; done
  python3 scripts/cluster/spider-shard.py --head "$CL_SPIDER_HEAD_PORT" --servers "$servers" \
    --data "$(IFS=,; echo "${CL_SPIDER_DATA[*]}")" "$@"
}

cl_spider_durable() {
  local i
  CL_SPIDER_FLUSH=1
  for i in "${!CL_SPIDER_DATA[@]}"; do
    cl_spider_sql "$i" "SET GLOBAL innodb_flush_log_at_trx_commit = 1" || return 1
  done
}

cl_spider_resolve() {
  local k fmt gl bl xid match status committed=0 rolled_back=0
  for k in "${!CL_SPIDER_DATA[@]}"; do
    while IFS=$'\t' read -r fmt gl bl xid; do
      [ -n "$xid" ] || continue
      match="format_id = $fmt AND gtrid_length = $gl AND bqual_length = $bl AND LEFT(data, $((gl + bl))) = CONCAT($xid)"
      status=$(cl_spider_sql head "SELECT status FROM mysql.spider_xa WHERE $match")
      # PREPARED: every member prepared, the head was committing; COMMIT: it said so. Anything
      # else (NOT YET, ROLLBACK, no record) never reached the commit decision.
      if [ "$status" = PREPARED ] || [ "$status" = COMMIT ]; then
        cl_spider_sql "$k" "XA COMMIT $xid, $fmt" && committed=$((committed + 1))
      else
        cl_spider_sql "$k" "XA ROLLBACK $xid, $fmt" && rolled_back=$((rolled_back + 1))
      fi
      cl_spider_sql head "DELETE FROM mysql.spider_xa_member WHERE $match; DELETE FROM mysql.spider_xa WHERE $match"
      cl_log "XA $xid in doubt on data node $k: head said '${status:-nothing}', settled"
    done < <(cl_spider_sql "$k" "XA RECOVER FORMAT='SQL'")
  done
  printf '%s committed, %s rolled back' "$committed" "$rolled_back"
}

cl_spider_kill() {
  local p=${CL_SPIDER_PIDS[$(($1 + 1))]}
  kill -KILL "$p" 2>/dev/null || true
  wait "$p" 2>/dev/null || true
}

cl_spider_start() {
  cl_spider_launch $(($1 + 1))
  cl_spider_wait $(($1 + 1))
}

# The nodes' files are removed right after: a clean shutdown (tens of seconds for four servers
# on a busy machine, the head waiting on its background threads) would buy nothing.
cl_spider_down() {
  local p
  for p in "${CL_SPIDER_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  for p in "${CL_SPIDER_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  CL_SPIDER_PIDS=()
}
