#!/usr/bin/env python3
"""Steady load for scripts/cluster/rolling-restart.sh (standard library only).

  rolling.py --proxy URL --readers R --writers W --streams S --stop-file FILE --marks FILE --out FILE

Through the balancer, until FILE exists: R readers GET one Moment after another, W writers
(logged in) POST Comments on Moment 1001 and read each back, and S subscribers hold a live
stream of the three newest Comments of Moment 1001, which the writers keep changing. A request
fails when it gets no answer, an HTTP status other than 200, or an APIJSON code other than 200.
A stream that ends with `event: reconnect` is reopened at once with Last-Event-ID (as an
EventSource does after the event's `retry:`) and counts as resumed; one that ends any other way,
or cannot be reopened, is a failure.

At the end (MARKS: a file whose last line is the time the last instance was back in service),
every stream must have received an answer after that time: live answers still flow. Prints
`rolling: N requests, F failed, M streams resumed` and exits 1 unless F is 0, M > 0 and every
stream was pushed to after the last restart.
"""
import argparse
import http.client
import json
import os
import sys
import threading
import time
import urllib.parse

TIMEOUT = 10.0
PHONE, PASSWORD = "13000082001", "123456"
SUBSCRIPTION = {"Comment[]": {"count": 3, "Comment": {"momentId": 1001, "@order": "id-", "@column": "id,content"}}}


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = 0
        self.failed = []
        self.resumed = 0

    def request(self, ok, what):
        with self.lock:
            self.requests += 1
            if not ok:
                self.failed.append(f"{time.time():.3f} {what}")


def client_address(role, k):
    """Each worker is a client of its own, as haproxy's X-Forwarded-For tells the instances
    (they trust haproxy): behind one proxy address, workers sharing one identity would share
    one anonymous budget and be refused for each other's reads, which is not what this test is
    about."""
    return f"10.{role}.0.{k + 1}"


def call(conn_box, base, path, body, token=None, client=None):
    """One POST on the worker's keep-alive connection (reopened after a failure): the JSON
    answer, or a string saying why there is none."""
    u = urllib.parse.urlsplit(base)
    headers = {"Content-Type": "application/json"}
    if client:
        headers["X-Forwarded-For"] = client
    if token:
        headers["Authorization"] = "Bearer " + token
    try:
        if conn_box[0] is None:
            conn_box[0] = http.client.HTTPConnection(u.hostname, u.port, timeout=TIMEOUT)
        conn_box[0].request("POST", path, json.dumps(body), headers)
        r = conn_box[0].getresponse()
        data = r.read()
        if r.getheader("Connection", "").lower() == "close":
            conn_box[0].close()
            conn_box[0] = None
        if r.status != 200:
            return f"HTTP {r.status}: {data[:120]!r}"
        return json.loads(data)
    except (OSError, http.client.HTTPException, ValueError) as e:
        if conn_box[0] is not None:
            conn_box[0].close()
        conn_box[0] = None
        return f"no answer: {e!r}"


def ok(answer):
    return isinstance(answer, dict) and answer.get("code") == 200


def reader(args, tally, k):
    box = [None]
    n = 0
    while not os.path.exists(args.stop_file):
        n += 1
        answer = call(box, args.proxy, "/get", {"Moment": {"id": 1001 + (k * 7 + n) % 100}}, client=client_address(1, k))
        tally.request(ok(answer), f"reader {k}: {answer}")
        time.sleep(0.02)


def writer(args, tally, k):
    box = [None]
    answer = call(box, args.proxy, "/login", {"phone": PHONE, "password": PASSWORD}, client=client_address(2, k))
    tally.request(ok(answer), f"writer {k} login: {answer}")
    if not ok(answer):
        return
    token = answer["token"]
    n = 0
    while not os.path.exists(args.stop_file):
        n += 1
        marker = f"rolling-{k}-{n}"
        answer = call(box, args.proxy, "/post", {"tag": "Comment", "Comment": {"momentId": 1001, "content": marker}}, token, client_address(2, k))
        tally.request(ok(answer), f"writer {k}: {answer}")
        if ok(answer):
            got = call(box, args.proxy, "/get", {"Comment": {"id": answer["Comment"]["id"]}}, client=client_address(2, k))
            seen = ok(got) and isinstance(got.get("Comment"), dict) and got["Comment"].get("content") == marker
            tally.request(seen, f"writer {k} read-back: {got}")
        time.sleep(0.05)


def subscriber(args, tally, k, last_push):
    u = urllib.parse.urlsplit(args.proxy)
    last_id = None
    while not os.path.exists(args.stop_file):
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream", "X-Forwarded-For": client_address(3, k)}
        if last_id:
            headers["Last-Event-ID"] = last_id
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=TIMEOUT)
        reconnect = False
        try:
            conn.request("POST", "/subscribe", json.dumps(SUBSCRIPTION), headers)
            r = conn.getresponse()
            if r.status != 200 or "event-stream" not in r.getheader("Content-Type", ""):
                tally.request(False, f"stream {k}: HTTP {r.status} {r.read()[:120]!r}")
                time.sleep(0.5)
                continue
            tally.request(True, "")
            kind, data = None, None
            while not os.path.exists(args.stop_file):
                line = r.readline()
                if not line:
                    break
                line = line.decode().rstrip("\n")
                if line.startswith("id: "):
                    last_id = line[4:]
                elif line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: "):
                    data = line[6:]
                elif line == "":
                    if data is not None:
                        if kind == "reconnect":
                            reconnect = True
                        elif kind in (None, "patch"):
                            last_push[k] = time.time()
                        else:
                            tally.request(False, f"stream {k}: event {kind}: {data[:120]}")
                    kind, data = None, None
        except (OSError, http.client.HTTPException) as e:
            if not os.path.exists(args.stop_file):
                tally.request(False, f"stream {k}: {e!r}")
        finally:
            conn.close()
        if os.path.exists(args.stop_file):
            break
        if reconnect:
            with tally.lock:
                tally.resumed += 1
        else:
            tally.request(False, f"stream {k} ended without event: reconnect")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--proxy", required=True)
    p.add_argument("--readers", type=int, default=4)
    p.add_argument("--writers", type=int, default=2)
    p.add_argument("--streams", type=int, default=6)
    p.add_argument("--stop-file", required=True)
    p.add_argument("--marks", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    tally = Tally()
    last_push = {}
    threads = [threading.Thread(target=reader, args=(args, tally, k), daemon=True) for k in range(args.readers)]
    threads += [threading.Thread(target=writer, args=(args, tally, k), daemon=True) for k in range(args.writers)]
    threads += [threading.Thread(target=subscriber, args=(args, tally, k, last_push), daemon=True)
                for k in range(args.streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with open(args.out, "w") as f:
        f.write("\n".join(tally.failed) + "\n")
    back = float(open(args.marks).read().split()[-1])
    stale = [k for k in range(args.streams) if last_push.get(k, 0) < back]
    for line in tally.failed[:10]:
        print(f"FAILED {line}")
    print(f"streams pushed to after the last instance was back: {args.streams - len(stale)} of {args.streams}")
    print(f"rolling: {tally.requests} requests, {len(tally.failed)} failed, {tally.resumed} streams resumed")
    sys.exit(0 if not tally.failed and tally.resumed > 0 and not stale else 1)


if __name__ == "__main__":
    main()
