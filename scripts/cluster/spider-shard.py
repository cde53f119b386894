#!/usr/bin/env python3
"""Shards a MariaDB database with Spider (for scripts/cluster/lib-spider.sh; standard library
and the `mariadb` client only).

  spider-shard.py --head PORT --servers s0,s1,s2 --data HOST:PORT,HOST:PORT,HOST:PORT DATABASE…

Every InnoDB table of DATABASE on the head node (127.0.0.1:PORT) whose primary key is `id` is
moved onto the data nodes: the same table (same definition, InnoDB) is created in DATABASE on
each data node, and the head's table becomes a Spider table of the same name, partitioned by
HASH(id) into one partition per data node (partition k on Spider server `sk`, which must exist:
CREATE SERVER), with the rows copied through it. Tables with another primary key stay where they
are, on the head (listed on stderr).

A table with a UNIQUE key that does not hold `id` (the demo's Privacy.phone, Access.alias) is not
partitioned: MariaDB partitioning requires every unique key to contain the partitioning column,
and unique per shard is not unique (two registrations of one phone whose ids fall on different
shards would both pass). Such a table moves whole onto the first data node, a Spider table
without partitions, where its keys hold.

What a partitioned Spider table cannot have is left out of the head's definition only (the data
nodes keep the original): FULLTEXT keys and foreign keys are dropped, and the table COMMENT and
AUTO_INCREMENT start give way to the Spider connection (REMOTE_DATABASE, REMOTE_TABLE).

Every sharded table gets a BEFORE DELETE trigger that does nothing: without it MariaDB pushes a
DELETE whole to the data nodes, and a partitioned Spider table then reports 0 affected rows
(MariaDB 10.11) though the rows are gone; with a trigger the server deletes row by row and
counts right.
"""
import argparse
import re
import subprocess
import sys


def sql(host, port, statement, db=None):
    cmd = ["mariadb", "--no-defaults", "-h", host, "-P", str(port), "-u", "root", "-N", "-B", "--raw"]
    if db:
        cmd.append(db)
    r = subprocess.run(cmd, input=statement.encode(), capture_output=True, check=False)
    if r.returncode != 0:
        sys.exit(f"spider-shard: {host}:{port}: {r.stderr.decode().strip()}\n  in: {statement[:300]}")
    return r.stdout.decode()


def ident(name):
    return "`" + name.replace("`", "``") + "`"


def spider_definition(create, database, table, servers):
    """The head's Spider table for the InnoDB `create` (SHOW CREATE TABLE): partitioned by
    HASH(id) over `servers`, or whole on the one server given."""
    lines = create.split("\n")
    head, body, tail = lines[0], lines[1:-1], lines[-1]
    kept = []
    for line in body:
        item = line.strip().rstrip(",")
        if item.startswith("FULLTEXT KEY") or (item.startswith("CONSTRAINT") and "FOREIGN KEY" in item):
            continue
        kept.append("  " + item)
    options = tail.split(" COMMENT=", 1)[0]
    charset = re.search(r"DEFAULT CHARSET=(\S+)", options)
    collate = re.search(r"COLLATE=(\S+)", options)
    definition = (
        f"{head}\n" + ",\n".join(kept) + "\n) ENGINE=SPIDER"
        + (f" DEFAULT CHARSET={charset.group(1)}" if charset else "")
        + (f" COLLATE={collate.group(1)}" if collate else "")
        + f" REMOTE_DATABASE='{database}' REMOTE_TABLE='{table}'"
    )
    if len(servers) == 1:
        return definition + f" REMOTE_SERVER='{servers[0]}'"
    partitions = ",\n  ".join(
        f"PARTITION p{k} REMOTE_SERVER='{server}'" for k, server in enumerate(servers)
    )
    return definition + f"\nPARTITION BY HASH (`id`) (\n  {partitions}\n)"


def shard(args, database):
    tables = sql(
        "127.0.0.1", args.head,
        "SELECT t.TABLE_NAME, (SELECT GROUP_CONCAT(k.COLUMN_NAME) FROM information_schema.KEY_COLUMN_USAGE k"
        " WHERE k.TABLE_SCHEMA = t.TABLE_SCHEMA AND k.TABLE_NAME = t.TABLE_NAME AND k.CONSTRAINT_NAME = 'PRIMARY')"
        f" FROM information_schema.TABLES t WHERE t.TABLE_SCHEMA = '{database}'"
        " AND t.TABLE_TYPE = 'BASE TABLE' AND t.ENGINE = 'InnoDB' ORDER BY t.TABLE_NAME",
    ).splitlines()
    # Unique keys without id, per table.
    unique_elsewhere = set(sql(
        "127.0.0.1", args.head,
        "SELECT DISTINCT s.TABLE_NAME FROM information_schema.STATISTICS s"
        f" WHERE s.TABLE_SCHEMA = '{database}' AND s.NON_UNIQUE = 0 AND s.INDEX_NAME <> 'PRIMARY'"
        " AND NOT EXISTS (SELECT 1 FROM information_schema.STATISTICS i WHERE i.TABLE_SCHEMA = s.TABLE_SCHEMA"
        " AND i.TABLE_NAME = s.TABLE_NAME AND i.INDEX_NAME = s.INDEX_NAME AND i.COLUMN_NAME = 'id')",
    ).split())
    data = [d.rsplit(":", 1) for d in args.data.split(",")]
    servers = args.servers.split(",")
    sharded, whole, local = [], [], []
    for host, port in data:
        sql(host, port, f"CREATE DATABASE IF NOT EXISTS {ident(database)} CHARACTER SET utf8mb4")
    for line in tables:
        table, pk = line.split("\t")
        if pk != "id":
            local.append(table)
            continue
        create = sql("127.0.0.1", args.head, f"SHOW CREATE TABLE {ident(table)}", database).split("\t", 1)[1]
        create = create.rstrip("\n")
        placed = servers[:1] if table in unique_elsewhere else servers
        for host, port in data[: len(placed)]:
            sql(host, port, f"DROP TABLE IF EXISTS {ident(table)};\n{create}", database)
        moved = ident(table + "__unsharded")
        statements = (
            f"RENAME TABLE {ident(table)} TO {moved};\n"
            f"{spider_definition(create, database, table, placed)};\n"
            f"INSERT INTO {ident(table)} SELECT * FROM {moved};\n"
            f"DROP TABLE {moved};\n"
        )
        if len(placed) > 1:
            statements += (
                f"CREATE TRIGGER {ident(table[:48] + '__delete_by_row')} BEFORE DELETE ON {ident(table)}"
                " FOR EACH ROW SET @spider_delete_by_row = 1;"
            )
            sharded.append(table)
        else:
            whole.append(table)
        sql("127.0.0.1", args.head, statements, database)
    print(f"spider-shard: {database}: {len(sharded)} tables sharded by HASH(id) over {len(data)} data nodes"
          + (f"; whole on {servers[0]} (a unique key without id): {', '.join(whole)}" if whole else "")
          + (f"; kept on the head (primary key not id): {', '.join(local)}" if local else ""),
          file=sys.stderr)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--head", required=True, type=int)
    p.add_argument("--servers", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("databases", nargs="+")
    args = p.parse_args()
    for database in args.databases:
        shard(args, database)


if __name__ == "__main__":
    main()
