#!/usr/bin/env python3
"""Load for scripts/cluster/fault-test.sh (standard library only).

  writers.py run    --instances URL,URL --proxy URL --writers N --rate R --seconds S --run ID --out DIR
  writers.py report --out DIR --kill-file FILE --rows FILE
                    [--shards N --lost-shard K --restart-file FILE]

`run`: every writer logs in through the proxy (so its token may come from either instance), then
POSTs one new Comment per tick at R per second to its own instance (writers alternate between the
instances), each with a unique content `ft-ID-WRITER-SEQ`; an attempt is acknowledged when the
HTTP answer is 200 with code 200 and an id. After every acknowledged write it GETs the row by id
through the other instance (which reads on its replica when it has one): a 200 without the row is a
stale read. Nothing is retried: an unacknowledged write counts for nothing either way. One line per
attempt goes to DIR/writer-N.log, with what a failure was answered (its APIJSON code, `http-STATUS`
for another answer, `io` when none came).

`report`: compares the acknowledged writes with the rows found in the database (FILE: one
`content<TAB>id` line per row whose content starts with `ft-`) and prints the summary; the last
line is the one the issue asks for. Exit status 1 when a write was lost or duplicated, or no write
was acknowledged after the failover. With --shards (a sharded database, ids spread by id mod N),
the fault took shard K away until the time in --restart-file: every write sent meanwhile must be
acknowledged (on another shard) or answered with an APIJSON error, none acknowledged on shard K,
and a write on shard K must be acknowledged again after the restart.
"""
import argparse
import http.client
import json
import os
import sys
import threading
import time
import urllib.parse

TIMEOUT = 5.0


class Http:
    """One keep-alive connection, reopened after any failure."""

    def __init__(self, base):
        u = urllib.parse.urlsplit(base)
        self.host, self.port = u.hostname, u.port
        self.conn = None

    def post(self, path, body, token=None):
        """The JSON answer (None unless HTTP 200 with JSON), the server that gave it, and what
        it was: the APIJSON code, `http-STATUS`, or `io`."""
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = "Bearer " + token
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=TIMEOUT)
            self.conn.request("POST", path, json.dumps(body), headers)
            r = self.conn.getresponse()
            data = r.read()
            server = r.getheader("X-Apijet-Server", "")
            if r.status != 200:
                return None, server, f"http-{r.status}"
            answer = json.loads(data)
            return answer, server, str(answer.get("code"))
        except (OSError, http.client.HTTPException, ValueError):
            if self.conn is not None:
                self.conn.close()
            self.conn = None
            return None, "", "io"


def writer(args, k, instances, log_path, logins):
    proxy = Http(args.proxy)
    token = None
    deadline = time.time() + 30
    while token is None and time.time() < deadline:
        answer, server, _ = proxy.post("/login", {"phone": "13000082001", "password": "123456"})
        if answer and answer.get("code") == 200:
            token = answer.get("token")
            logins.append((k, server))
        else:
            time.sleep(0.2)
    if token is None:
        print(f"writer {k}: no login through the proxy within 30 s", file=sys.stderr)
        return
    mine = k % len(instances)
    target = Http(instances[mine])
    other = Http(instances[(mine + 1) % len(instances)])
    interval = 1.0 / args.rate
    end = time.time() + args.seconds
    seq = 0
    nxt = time.time()
    with open(log_path, "w") as log:
        while True:
            now = time.time()
            if now >= end:
                break
            if now < nxt:
                time.sleep(nxt - now)
            nxt += interval
            seq += 1
            marker = f"ft-{args.run}-{k}-{seq}"
            sent = time.time()
            answer, _, what = target.post(
                "/post",
                {"tag": "Comment", "Comment": {"momentId": 1001, "content": marker}},
                token,
            )
            done = time.time()
            ok = (
                answer is not None
                and answer.get("code") == 200
                and isinstance(answer.get("Comment"), dict)
                and answer["Comment"].get("id") is not None
            )
            row_id = answer["Comment"]["id"] if ok else ""
            read = "-"
            if ok:
                got, _, _ = other.post("/get", {"Comment": {"id": row_id}}, token)
                if got is None or got.get("code") != 200:
                    read = "error"
                else:
                    row = got.get("Comment")
                    read = "seen" if isinstance(row, dict) and row.get("content") == marker else "stale"
            log.write(f"{sent:.3f}\t{done:.3f}\t{mine}\t{'ok' if ok else 'fail'}\t{marker}\t{row_id}\t{read}\t{what}\n")
            log.flush()


def run(args):
    instances = args.instances.split(",")
    os.makedirs(args.out, exist_ok=True)
    logins = []
    threads = [
        threading.Thread(
            target=writer,
            args=(args, k, instances, os.path.join(args.out, f"writer-{k}.log"), logins),
            daemon=True,
        )
        for k in range(args.writers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(args.seconds + 60)
    servers = sorted({s for _, s in logins if s})
    with open(os.path.join(args.out, "logins.txt"), "w") as f:
        for k, s in sorted(logins):
            f.write(f"{k}\t{s}\n")
    print(f"logins through the proxy: {len(logins)} of {args.writers}, served by {', '.join(servers) or '?'}")
    return 0 if len(logins) == args.writers else 1


def report(args):
    kill = float(open(args.kill_file).read().split()[0])
    attempts = []
    for name in sorted(os.listdir(args.out)):
        if name.startswith("writer-") and name.endswith(".log"):
            with open(os.path.join(args.out, name)) as f:
                for line in f:
                    sent, done, inst, status, marker, row_id, read, what = line.rstrip("\n").split("\t")
                    attempts.append((float(sent), float(done), int(inst), status, marker, row_id, read, what))
    rows = {}
    with open(args.rows) as f:
        for line in f:
            if "\t" in line:
                content, row_id = line.rstrip("\n").split("\t", 1)
                rows.setdefault(content, []).append(row_id)
    acked = [a for a in attempts if a[3] == "ok"]
    lost = [a for a in acked if a[4] not in rows]
    wrong_id = [a for a in acked if a[4] in rows and a[5] not in rows[a[4]]]
    duplicated = [c for c, ids in rows.items() if len(ids) > 1]
    all_ids = [i for ids in rows.values() for i in ids]
    failed = [a for a in attempts if a[3] != "ok"]
    unacked_present = [a for a in failed if a[4] in rows]
    stale = [a for a in acked if a[6] == "stale"]
    read_errors = [a for a in acked if a[6] == "error"]
    # Per instance: the first write sent after the kill that was acknowledged.
    recovery = []
    for inst in sorted({a[2] for a in attempts}):
        after = [a for a in acked if a[2] == inst and a[0] >= kill]
        recovery.append(min(a[1] for a in after) - kill if after else None)
    print(f"attempts: {len(attempts)}, acknowledged: {len(acked)}, failed: {len(failed)} "
          f"(of which {len(unacked_present)} committed anyway; allowed: they were never acknowledged)")
    print(f"reads of an acknowledged write through the other instance: "
          f"{sum(1 for a in acked if a[6] == 'seen')} seen, {len(stale)} stale, {len(read_errors)} errors")
    print("first acknowledged write sent after the kill, per instance: "
          + ", ".join("none" if r is None else f"{r:.2f} s" for r in recovery))
    for a in lost[:5]:
        print(f"LOST: {a[4]} (id {a[5]}, acknowledged at {a[1]:.3f})")
    for c in duplicated[:5]:
        print(f"DUPLICATED: {c} ids {rows[c]}")
    if len(set(all_ids)) != len(all_ids):
        print("DUPLICATE IDS in the table")
    bad = bool(lost or duplicated or wrong_id or stale or None in recovery or not acked)
    if args.shards:
        bad = shard_report(args, kill, attempts, acked) or bad
    worst = max((r for r in recovery if r is not None), default=float("nan"))
    print(f"cluster: {len(acked)} acknowledged writes, {len(lost) + len(wrong_id)} lost, "
          f"{len(duplicated)} duplicated, first success after failover in {worst:.2f} s")
    return 1 if bad else 0


def shard_report(args, kill, attempts, acked):
    """The lost shard's window: prints what happened in it; True when something was wrong."""
    # When its restart began, and when it answered again.
    restart, ready = (float(t) for t in open(args.restart_file).read().split()[:2])
    on = lambda a, k: a[5] != "" and int(a[5]) % args.shards == k
    window = [a for a in attempts if kill <= a[0] < restart]
    failed = [a for a in window if a[3] != "ok"]
    unclean = [a for a in failed if not a[7].isdigit()]
    # Acknowledged on the lost shard while it was dead: impossible unless a row went elsewhere.
    # (A write sent while it was down may be acknowledged once the restart has begun: Spider
    # retries the connection.)
    on_lost = [a for a in acked if kill <= a[0] and a[1] < restart and on(a, args.lost_shard)]
    back = [a[1] - ready for a in acked if a[0] >= ready and on(a, args.lost_shard)]
    codes = sorted({a[7] for a in failed})
    slowest = max((a[1] - a[0] for a in failed), default=0.0)
    print(f"shard {args.lost_shard} down {restart - kill:.1f} s (then {ready - restart:.1f} s to restart): "
          f"{len(window)} writes sent meanwhile, {len(window) - len(failed)} acknowledged (on the other "
          f"shards), {len(failed)} refused (APIJSON code {', '.join(codes) or '-'}, each answered within "
          f"{slowest:.2f} s), {len(unclean)} without an APIJSON answer; {len(on_lost)} acknowledged on "
          f"shard {args.lost_shard} while it was down")
    print("first write sent to shard {} after its restart acknowledged {} after it answered again".format(
        args.lost_shard, f"{min(back):.2f} s" if back else "never"))
    return bool(unclean or on_lost or not back)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--instances", required=True)
    r.add_argument("--proxy", required=True)
    r.add_argument("--writers", type=int, default=4)
    r.add_argument("--rate", type=float, default=10.0)
    r.add_argument("--seconds", type=float, default=20.0)
    r.add_argument("--run", required=True)
    r.add_argument("--out", required=True)
    s = sub.add_parser("report")
    s.add_argument("--out", required=True)
    s.add_argument("--kill-file", required=True)
    s.add_argument("--rows", required=True)
    s.add_argument("--shards", type=int, default=0)
    s.add_argument("--lost-shard", type=int, default=0)
    s.add_argument("--restart-file")
    args = p.parse_args()
    sys.exit(run(args) if args.cmd == "run" else report(args))


if __name__ == "__main__":
    main()
