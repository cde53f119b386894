#!/usr/bin/env bash
# Stops what scripts/cluster/up.sh or fault-test.sh left running when they could not clean up
# themselves (SIGKILL, a closed terminal), and removes their directories:
#
#   bash scripts/cluster/down.sh DIR…        the directory up.sh printed (/tmp/apijet-cluster.*)
#
# No default: another run (a test suite, say) may be using its own directory at the same time.
# Only processes named by the pid files these scripts wrote are signalled (TERM, then KILL after
# 10 s), and only when the process still names that directory on its command line or (apijet)
# in its environment: a pid reused by someone else's process is left alone.
set -uo pipefail

dirs=("$@")
if [ ${#dirs[@]} -eq 0 ]; then
  echo "usage: $0 /tmp/apijet-cluster.XXXXXX…" >&2
  exit 2
fi

ours() { # PID DIR: the process is one of this topology's servers
  local cmd
  cmd=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null) || return 1
  # Database servers and haproxy name the directory on their command line; apijet instances
  # carry it in their environment (CL_DIR, set by cl_apijet_up).
  case "$cmd" in
  *"$2"*) return 0 ;;
  esac
  tr '\0' '\n' <"/proc/$1/environ" 2>/dev/null | grep -qxF "CL_DIR=$2"
}

for dir in "${dirs[@]}"; do
  case "$dir" in
  /tmp/apijet-cluster.*) ;;
  *)
    echo "[cluster] $dir is not a cluster directory; skipped" >&2
    continue
    ;;
  esac
  pids=()
  while IFS= read -r f; do
    pid=$(head -n 1 "$f" 2>/dev/null | tr -dc '0-9')
    [ -n "$pid" ] && ours "$pid" "$dir" && pids+=("$pid")
  done < <(find "$dir" -maxdepth 3 \( -name '*.pid' -o -name postmaster.pid \) 2>/dev/null)
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for _ in $(seq 100); do
    alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  # etcd's data lives in memory, named in the directory (scripts/cluster/lib-patroni.sh).
  shm=$(cat "$dir/etcd/data-dir" 2>/dev/null || true)
  case "$shm" in
  /dev/shm/apijet-etcd.*) rm -rf "$shm" ;;
  esac
  rm -rf "$dir"
  echo "[cluster] stopped ${#pids[@]} processes and removed $dir" >&2
done
