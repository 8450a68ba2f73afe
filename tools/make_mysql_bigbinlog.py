#!/usr/bin/env python3
"""A big MySQL binlog of small transactions, written by the live MySQL 9.7
(``tools/mysql97.py``), for measuring the MySQL walk and index (issue 15).

    tools/make_mysql_bigbinlog.py OUT [--mb 60]

Rotates the server's binlog (``FLUSH BINARY LOGS``), runs single-row
INSERTs (autocommit: one transaction each, a random 0-120 byte pad; every
500th an UPDATE of 20 rows) from a stored procedure in database
``myidx_big`` until the new file has ``--mb`` MB, rotates again and copies
that closed file to OUT. Other sessions' transactions may be in it too.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tools.mysql97 import MySQL97  # noqa: E402

DB = "myidx_big"

PROC = f"""
CREATE PROCEDURE {DB}.fill(n INT)
BEGIN
  DECLARE i INT DEFAULT 0;
  WHILE i < n DO
    INSERT INTO {DB}.t (pad) VALUES (REPEAT('x', FLOOR(RAND() * 120)));
    IF i % 500 = 0 THEN
      UPDATE {DB}.t SET n = n + 1 ORDER BY id DESC LIMIT 20;
    END IF;
    SET i = i + 1;
  END WHILE;
END
"""


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--mb", type=float, default=60.0)
    args = ap.parse_args(argv)
    srv = MySQL97().ensure()
    with srv.connect() as c, c.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {DB}")
        cur.execute(f"CREATE DATABASE {DB}")
        cur.execute(f"CREATE TABLE {DB}.t (id INT AUTO_INCREMENT PRIMARY KEY, n INT NOT NULL DEFAULT 0, "
                    "pad VARCHAR(200) NOT NULL)")
        cur.execute(PROC)
        cur.execute("FLUSH BINARY LOGS")
        cur.execute("SHOW BINARY LOG STATUS")
        name = cur.fetchone()[0]
        path = srv.datadir / name
        target = int(args.mb * 1e6)
        t0 = time.monotonic()
        while path.stat().st_size < target:
            cur.execute(f"CALL {DB}.fill(5000)")
            print(f"{path.stat().st_size / 1e6:.1f} MB, {time.monotonic() - t0:.0f} s", file=sys.stderr)
        cur.execute("FLUSH BINARY LOGS")
        cur.execute(f"DROP DATABASE {DB}")
    shutil.copyfile(path, args.out)
    print(args.out)


if __name__ == "__main__":
    main()
