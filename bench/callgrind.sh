#!/usr/bin/env bash
# Instructions per request of one server, counted by callgrind: repeatable whatever else the
# machine is doing, unlike wall-clock benchmarks on a shared box.
#
#   bench/callgrind.sh apijet|handwritten DB_URL [BODY] [N]
#
# Starts `apijet serve` (or the hand-written endpoint of the bench kit, `apijet-bench`, for
# PurchSkuMaster=purch_sku_master.sku_id) under `valgrind --tool=callgrind`, sends 200
# warm-up requests, zeroes the counters, sends N (default 2000) sequential requests on one
# keep-alive connection (curl), dumps, and prints instructions per request. The profile stays
# in bench/out/callgrind.<what>.<pid>* for callgrind_annotate.
#
# APIJET_BIN (default: release/apijet in cargo's build folder, `target/` or wherever
# CARGO_TARGET_DIR puts it) is the server, APIJET_BENCH_BIN (default: release/apijet-bench
# beside it) the kit (cargo build --release -p apijet -p apijet-bench); the database must hold
# the data
# (`apijet bench --keep-data`, or a --postgres-url/--mysql-url run of `apijet bench`).
set -euo pipefail
what=${1:?apijet|handwritten}
db=${2:?database URL}
body=${3:-'{"PurchSkuMaster":{"sku_id":"1000c0ff-ee42-4b7d-a1c2-e5f60718293a"}}'}
n=${4:-2000}
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/lib/cargo.sh
source "$root/scripts/lib/cargo.sh"
bin=${APIJET_BIN:-$(cd "$root" && cargo_bin release)}
kit=${APIJET_BENCH_BIN:-$(dirname "$bin")/apijet-bench}
out=$root/bench/out
mkdir -p "$out"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
case $what in
  apijet)
    conf=$out/callgrind.toml
    printf 'max_count = 100\ntoken_secret = "callgrind"\nstatement_timeout_ms = 0\n' >"$conf"
    args=(serve --db "$db" --listen "127.0.0.1:$port" --config "$conf") ;;
  handwritten)
    bin=$kit
    args=(--serve-handwritten PurchSkuMaster=purch_sku_master.sku_id
      --handwritten-db "$db" --handwritten-listen "127.0.0.1:$port") ;;
  *) echo "apijet or handwritten, not $what" >&2; exit 2 ;;
esac
prefix=$out/callgrind.$what
valgrind --tool=callgrind --callgrind-out-file="$prefix.%p" "$bin" "${args[@]}" \
  >"$prefix.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 600); do
  curl -s -o /dev/null "http://127.0.0.1:$port/" && break
  kill -0 $pid 2>/dev/null || { cat "$prefix.log"; exit 1; }
  sleep 0.2
done
send() {
  local urls=() i
  for ((i = 0; i < $1; i++)); do urls+=("http://127.0.0.1:$port/get"); done
  curl -s -H 'Content-Type: application/json' --data-binary "$body" "${urls[@]}" >"$prefix.answers"
}
send 200
grep -q '"code":200' "$prefix.answers" || { echo "not a success: $(head -c 300 "$prefix.answers")" >&2; exit 1; }
callgrind_control -z $pid >/dev/null 2>&1
send "$n"
callgrind_control -d $pid >/dev/null 2>&1
file=$prefix.$pid.1
total=""
for _ in $(seq 100); do
  total=$(callgrind_annotate "$file" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1; exit}')
  [ -n "$total" ] && break
  sleep 0.5
done
echo "$what $db: $total instructions for $n requests = $((total / n)) per request ($file)"
