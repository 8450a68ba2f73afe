"""Generate big, realistic binlogs with a real MariaDB 10.11, for benchmarks.

    tools/make_workload [--dir DIR] [--files 4] [--size-mb 256]

Starts a private server (tools/mariadb.py) with max_binlog_size = SIZE and
runs a server-side stored procedure until FILES binlogs of about SIZE MiB are
closed. The mix per transaction (by i mod 20): single-row inserts (most),
multi-row inserts, updates, deletes, MyISAM inserts, and now and then a
1000-row transaction; three domains, two server ids. Typical groups are
5 events / ~500 bytes: GTID, ANNOTATE_ROWS, TABLE_MAP, *_ROWS, XID.

The result is reused when DIR/workload.json says it is complete, so benchmarks
can call this every time. Not part of CI: 4 x 256 MiB takes a few minutes.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from tools.mariadb import MariaDB

DEFAULT_DIR = Path(os.environ.get("GTIDX_BENCH_DIR", Path.home() / ".cache" / "gtidx" / "workload"))

PROCEDURE = """
CREATE PROCEDURE w.run(start_i INT, n INT)
BEGIN
  DECLARE i INT DEFAULT start_i;
  WHILE i < start_i + n DO
    SET SESSION gtid_domain_id = IF(i % 10 < 7, 0, IF(i % 10 < 9, 1, 2));
    SET SESSION server_id = 1 + (i % 7 = 0);
    CASE
      WHEN i % 20 < 12 THEN
        INSERT INTO w.t (a, b, c) VALUES (i, i * 7, REPEAT(CHAR(97 + i % 26), 60 + i % 120));
      WHEN i % 20 < 14 THEN
        START TRANSACTION;
        INSERT INTO w.t (a, b, c) SELECT i, seq, REPEAT('m', 40 + seq) FROM seq_1_to_10;
        COMMIT;
      WHEN i % 20 < 17 THEN
        UPDATE w.t SET b = b + 1, c = CONCAT(LEFT(c, 50), i) WHERE id = 1 + (i * 7919) % GREATEST(i, 1);
      WHEN i % 20 < 18 THEN
        DELETE FROM w.t WHERE id = 1 + (i * 104729) % GREATEST(i, 1);
      WHEN i % 20 < 19 THEN
        INSERT INTO w.m (a, c) VALUES (i, REPEAT('y', 80));
      ELSE
        IF i % 1000 = 19 THEN
          START TRANSACTION;
          INSERT INTO w.t (a, b, c) SELECT i, seq, REPEAT('z', 100) FROM seq_1_to_1000;
          COMMIT;
        ELSE
          INSERT INTO w.t (a, b, c) VALUES (i, 0, 'tick');
        END IF;
    END CASE;
    SET i = i + 1;
  END WHILE;
END
"""


def closed_files(srv: MariaDB) -> list[tuple[str, int]]:
    rows = srv.sql("SHOW BINARY LOGS")
    return [(r[0], int(r[1])) for r in rows[:-1]]   # the last one is still open


def generate(root: Path, files: int, size_mb: int) -> dict:
    meta_path = root / "workload.json"
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if meta.get("files_wanted", 0) >= files and meta.get("size_mb") == size_mb and all(
                (root / "binlog" / f["name"]).exists() for f in meta["files"][:files]):
            return meta
    srv = MariaDB(root / "server", {"max_binlog_size": str(size_mb * 1024 * 1024)})
    srv.binlog_dir = root / "binlog"
    t0 = time.monotonic()
    with srv:
        srv.sql("CREATE DATABASE IF NOT EXISTS w")
        srv.sql("CREATE TABLE IF NOT EXISTS w.t (id BIGINT AUTO_INCREMENT PRIMARY KEY, a INT, b INT, "
                "c VARCHAR(300)) ENGINE=InnoDB")
        srv.sql("CREATE TABLE IF NOT EXISTS w.m (id BIGINT AUTO_INCREMENT PRIMARY KEY, a INT, "
                "c VARCHAR(100)) ENGINE=MyISAM")
        srv.sql("DROP PROCEDURE IF EXISTS w.run")
        srv.sql(PROCEDURE)
        i = int(srv.sql("SELECT COALESCE(MAX(a), 0) + 1 FROM w.t")[0][0])
        batch = 20000
        while len(closed_files(srv)) < files:
            srv.sql("CALL w.run(%s, %s)", (i, batch))
            i += batch
            done = sum(s for _, s in closed_files(srv))
            print(f"\r{done / 2**20:8.0f} MiB in {time.monotonic() - t0:5.0f}s", end="", file=sys.stderr)
        print(file=sys.stderr)
        names = closed_files(srv)
        state = srv.sql("SELECT @@gtid_binlog_state")[0][0]
        version = srv.sql("SELECT VERSION()")[0][0]
    meta = {"server": version, "size_mb": size_mb, "files_wanted": files,
            "files": [{"name": n, "size": s} for n, s in names],
            "server_state": state, "seconds": round(time.monotonic() - t0, 1)}
    meta_path.write_text(json.dumps(meta, indent=1))
    return meta


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="make_workload", description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--size-mb", type=int, default=256)
    a = ap.parse_args(argv)
    meta = generate(a.dir.resolve(), a.files, a.size_mb)
    for f in meta["files"]:
        print(a.dir.resolve() / "binlog" / f["name"], f["size"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
