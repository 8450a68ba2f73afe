"""Generate a big, realistic MySQL binlog with the real MySQL 9.7, for benchmarks.

    tools/make_mysql_workload [--dir DIR] [--size-mb 256]

Uses the server of ``tools/mysql97.py`` (started when it is not running):
``FLUSH BINARY LOGS``, then a server-side stored procedure runs transactions
in chunks until the new binlog holds SIZE MiB, then ``FLUSH BINARY LOGS``
again, so the file is closed and holds only this workload; it is copied to
DIR (default ``~/.cache/gtidx/mysql-workload``) under its server name, with
``workload.json`` (server, file, size, its Previous_gtids and the set after
it, as the server prints them). The mix per transaction (by i mod 20):
single-row inserts (most), multi-row inserts, updates, deletes, and now and
then a 200-row transaction; all under the server's UUID (gtid_mode=ON).
Typical transactions are 5 events / ~450 bytes: GTID, QUERY (BEGIN),
TABLE_MAP, *_ROWS, XID. While it runs, the server's durability is relaxed
(``sync_binlog=0``, ``innodb_flush_log_at_trx_commit=0``) and restored after.

The result is reused when DIR/workload.json says it is complete. Not part of
CI. The binlog stays in the server's datadir too (the server owns it).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools.mysql97 import MySQL97  # noqa: E402

DEFAULT_DIR = Path(os.environ.get("GTIDX_MYSQL_BENCH_DIR", Path.home() / ".cache" / "gtidx" / "mysql-workload"))
CHUNK = 20_000

PROCEDURE = """
CREATE PROCEDURE mwl.run(start_i INT, n INT)
BEGIN
  DECLARE i INT DEFAULT start_i;
  WHILE i < start_i + n DO
    CASE
      WHEN i % 20 < 13 THEN
        INSERT INTO mwl.t (a, b, c) VALUES (i, i * 7, REPEAT(CHAR(97 + i % 26), 60 + i % 120));
      WHEN i % 20 < 15 THEN
        START TRANSACTION;
        INSERT INTO mwl.t (a, b, c) VALUES (i, 1, REPEAT('m', 41)), (i, 2, REPEAT('m', 42)),
                                           (i, 3, REPEAT('m', 43)), (i, 4, REPEAT('m', 44));
        COMMIT;
      WHEN i % 20 < 17 THEN
        UPDATE mwl.t SET b = b + 1, c = CONCAT(LEFT(c, 50), i) WHERE id = 1 + (i * 7919) % GREATEST(i, 1);
      WHEN i % 20 < 19 THEN
        DELETE FROM mwl.t WHERE id = 1 + (i * 104729) % GREATEST(i, 1);
      ELSE
        IF i % 1000 = 999 THEN
          INSERT INTO mwl.t (a, b, c) SELECT i, n.k, REPEAT('z', 100)
            FROM (WITH RECURSIVE s(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM s WHERE k < 200)
                  SELECT k FROM s) AS n;
        ELSE
          INSERT INTO mwl.t (a, b, c) VALUES (i, 0, 'tick');
        END IF;
    END CASE;
    SET i = i + 1;
  END WHILE;
END
"""


def _current(srv: MySQL97) -> tuple[str, int]:
    rows = srv.sql("SHOW BINARY LOGS")
    name, size = rows[-1][0], rows[-1][1]
    return name, int(size)


def make(directory: Path, size_mb: int) -> dict:
    meta_path = directory / "workload.json"
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if meta.get("size_mb") == size_mb and (directory / meta["file"]).exists():
            return meta
    srv = MySQL97().ensure()
    old = {v: srv.sql(f"SELECT @@GLOBAL.{v}")[0][0] for v in ("sync_binlog", "innodb_flush_log_at_trx_commit")}
    t0 = time.monotonic()
    try:
        srv.sql("SET GLOBAL sync_binlog = 0")
        srv.sql("SET GLOBAL innodb_flush_log_at_trx_commit = 0")
        srv.sql("DROP DATABASE IF EXISTS mwl")
        srv.sql("CREATE DATABASE mwl")
        srv.sql("CREATE TABLE mwl.t (id BIGINT AUTO_INCREMENT PRIMARY KEY, a INT, b INT, c VARCHAR(255)) "
                "ENGINE=InnoDB")
        srv.sql(PROCEDURE)
        srv.sql("FLUSH BINARY LOGS")
        name, size = _current(srv)
        i = 0
        while size < size_mb * 2**20:
            srv.sql(f"CALL mwl.run({i}, {CHUNK})")
            i += CHUNK
            name, size = _current(srv)
            print(f"  {name}: {size / 2**20:.0f} MiB", file=sys.stderr)
        srv.sql("FLUSH BINARY LOGS")
        executed = srv.sql("SELECT @@GLOBAL.gtid_executed")[0][0]
    finally:
        for v, value in old.items():
            srv.sql(f"SET GLOBAL {v} = {value}")
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(srv.datadir / name, directory / name)
    meta = {"server": srv.sql("SELECT VERSION()")[0][0], "file": name, "size_mb": size_mb,
            "size": os.path.getsize(directory / name), "transactions_called": i,
            "gtid_executed_after": executed, "seconds": round(time.monotonic() - t0, 1)}
    meta_path.write_text(json.dumps(meta, indent=1))
    return meta


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--size-mb", type=int, default=256)
    a = ap.parse_args(argv)
    meta = make(a.dir, a.size_mb)
    print(a.dir / meta["file"], meta["size"])


if __name__ == "__main__":
    main()
