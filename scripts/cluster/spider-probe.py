#!/usr/bin/env python3
"""Requests of scripts/cluster/spider-check.sh against apijet on Spider (standard library only).

  spider-probe.py batches --instances URL,URL --marker M --batches B --rows R
      B batch POSTs (`Comment[]`, R rows each) through each instance, rows marked `M-…`;
      prints the number of rows acknowledged.
  spider-probe.py login --instance URL
      prints a login token (Ada's).
  spider-probe.py writes --instance URL --token T --marker M [--moment ID] [--avoid-shard K]
      one multi-row POST (6 Comments) and one /crud (a POST of 3 Comments and a PUT of the
      visitor's Moment ID, else of a Moment it posts first, on a shard other than K) whose rows
      fall on every shard; prints one JSON line: each call's code, message and new ids, and the
      Moment.
  spider-probe.py list --instance URL --rows N --pids PID,PID
      streams `{"TBig[]":{"count":N,…}}` to the end, counting rows, while sampling the resident
      memory of the processes PID…; prints one JSON line: rows, seconds, bytes and the peak RSS
      of each process in KiB.
"""
import argparse
import http.client
import json
import sys
import threading
import time
import urllib.parse

PHONE, PASSWORD = "13000082001", "123456"


def call(base, path, body, token=None, timeout=30.0):
    u = urllib.parse.urlsplit(base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    try:
        conn.request("POST", path, json.dumps(body), headers)
        r = conn.getresponse()
        data = r.read()
        try:
            return json.loads(data)
        except ValueError:
            return {"code": f"http-{r.status}", "msg": data[:200].decode(errors="replace")}
    except (OSError, http.client.HTTPException) as e:
        return {"code": "io", "msg": str(e)}
    finally:
        conn.close()


def login(base):
    answer = call(base, "/login", {"phone": PHONE, "password": PASSWORD})
    if answer.get("code") != 200:
        sys.exit(f"spider-probe: login failed: {answer}")
    return answer["token"]


def comments(marker, n):
    return [{"momentId": 1001, "content": f"{marker}-{k}"} for k in range(n)]


def batches(args):
    acked = 0
    for base in args.instances.split(","):
        token = login(base)
        for b in range(args.batches):
            rows = comments(f"{args.marker}-{b}", args.rows)
            answer = call(base, "/post", {"tag": "Comment:[]", "Comment[]": rows}, token)
            if answer.get("code") == 200:
                acked += len(answer.get("Comment", {}).get("id[]", []))
            else:
                print(f"batch refused: {answer}", file=sys.stderr)
    print(acked)


def own_moment(base, token, avoid):
    """A new Moment of the visitor's whose id is not on shard `avoid` (of 3)."""
    for _ in range(20):
        answer = call(base, "/post", {"tag": "Moment", "Moment": {"content": "spider probe"}}, token)
        moment = answer.get("Moment", {}).get("id") if isinstance(answer.get("Moment"), dict) else None
        if moment is None:
            sys.exit(f"spider-probe: cannot post a Moment: {answer}")
        if moment % 3 != avoid:
            return moment
    sys.exit("spider-probe: 20 Moments, all on one shard")


def writes(args):
    token = args.token
    moment = args.moment or own_moment(args.instance, token, args.avoid_shard)
    post = call(
        args.instance, "/post", {"tag": "Comment:[]", "Comment[]": comments(f"{args.marker}-post", 6)}, token
    )
    crud = call(
        args.instance,
        "/crud",
        {
            "@post": {"Comment[]": "Comment:[]"},
            "Comment[]": comments(f"{args.marker}-crud", 3),
            "@put": {"Moment": "Moment"},
            "Moment": {"id": moment, "content": f"{args.marker}-crud-moment"},
        },
        token,
    )
    out = {"moment": moment}
    for name, answer in (("post", post), ("crud", crud)):
        out[name] = {
            "code": answer.get("code"),
            "msg": answer.get("msg"),
            "ids": answer.get("Comment", {}).get("id[]", []) if isinstance(answer.get("Comment"), dict) else [],
        }
    print(json.dumps(out))


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def list_rows(args):
    pids = [int(p) for p in args.pids.split(",") if p]
    peaks = {p: rss_kib(p) for p in pids}
    idle = dict(peaks)
    done = threading.Event()

    def sample():
        while not done.is_set():
            for p in pids:
                peaks[p] = max(peaks[p], rss_kib(p))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    columns = "id,x_uin,x_send_time,x_xid,x_result,x_credit,x_channel,x_remark"
    body = json.dumps({"TBig[]": {"count": args.rows, "TBig": {"@column": columns}}})
    u = urllib.parse.urlsplit(args.instance)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    started = time.time()
    conn.request("POST", "/get", body, {"Content-Type": "application/json"})
    r = conn.getresponse()
    rows = nbytes = 0
    tail = b""
    needle = b'"x_uin":'
    while True:
        try:
            chunk = r.read(1 << 16)
        except http.client.IncompleteRead as e:
            sys.exit(f"spider-probe: the answer was cut after {nbytes} bytes ({e!r}); see the server's log")
        if not chunk:
            break
        nbytes += len(chunk)
        window = tail + chunk
        rows += window.count(needle)
        tail = window[-(len(needle) - 1):]
    seconds = time.time() - started
    done.set()
    sampler.join()
    print(json.dumps({"status": r.status, "rows": rows, "seconds": round(seconds, 2), "bytes": nbytes,
                      "idle_kib": idle, "peak_kib": peaks}))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("batches")
    b.add_argument("--instances", required=True)
    b.add_argument("--marker", required=True)
    b.add_argument("--batches", type=int, default=5)
    b.add_argument("--rows", type=int, default=100)
    li = sub.add_parser("login")
    li.add_argument("--instance", required=True)
    w = sub.add_parser("writes")
    w.add_argument("--instance", required=True)
    w.add_argument("--token", required=True)
    w.add_argument("--moment", type=int)
    w.add_argument("--avoid-shard", type=int, default=-1)
    w.add_argument("--marker", required=True)
    lst = sub.add_parser("list")
    lst.add_argument("--instance", required=True)
    lst.add_argument("--rows", type=int, required=True)
    lst.add_argument("--pids", required=True)
    args = p.parse_args()
    if args.cmd == "login":
        print(login(args.instance))
        return
    {"batches": batches, "writes": writes, "list": list_rows}[args.cmd](args)


if __name__ == "__main__":
    main()
