#!/usr/bin/env python3
"""CPU seconds used so far by processes and their descendants (Linux /proc; standard library).

  cpu.py NAME=PID…      prints `NAME SECONDS` per argument, SECONDS = user + system time of PID
                        and every live descendant (a PostgreSQL postmaster and its backends),
                        and of descendants that ended and were waited for (cutime, cstime).

scripts/cluster/capacity.sh takes two readings around a load and divides by the requests served:
the CPU one request costs each server, which is what one core of that server can serve.
"""
import os
import sys

TICK = os.sysconf("SC_CLK_TCK")


def stat(pid):
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    # The command name is in parentheses and may hold spaces: fields start after the last ')'.
    fields = text[text.rindex(")") + 2:].split()
    ppid = int(fields[1])
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return ppid, utime + stime, cutime + cstime


def main():
    children = {}
    own = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid, mine, waited = stat(int(entry))
            except (OSError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
            own[int(entry)] = mine + waited
    for arg in sys.argv[1:]:
        name, pid = arg.split("=", 1)
        total, todo = 0, [int(pid)]
        while todo:
            p = todo.pop()
            total += own.get(p, 0)
            todo.extend(children.get(p, []))
        print(f"{name} {total / TICK:.2f}")


if __name__ == "__main__":
    main()
