"""The live MySQL 9.7 history that ``gtidx show`` (tests/test_mysql_show.py)
and ``gtidx changes`` (tests/test_mysql_changes.py) are compared with
``mysqlbinlog -v`` on: one closed binlog written per test session
(conftest's ``mysql_show_history``), tables of many column types,
``binlog_row_metadata`` FULL and MINIMAL, ``binlog_row_image``
FULL/MINIMAL/NOBLOB, ``binlog_transaction_compression`` ON for part of the
transactions, partial JSON updates, statements, a tagged GTID; and how a
row of ours is compared with mysqlbinlog's (``same_rows``)."""
from __future__ import annotations

import json
import random

from tests.showoracle import differences, mysql_escaped
from tools.make_mysql_fixtures import Session
from tools.mysql97 import MySQL97

COLUMNS = ["id", "i", "u", "ti", "bi", "ubi", "d", "dt", "ts", "tm", "dd", "y", "j", "b", "v", "e", "s", "bt",
           "f", "db", "c", "txt"]
ENUM, SET = ["a", "b", "c"], ["x", "y", "z"]
TABLE = """CREATE TABLE shw.t (
  id INT PRIMARY KEY, i INT, u INT UNSIGNED, ti TINYINT, bi BIGINT, ubi BIGINT UNSIGNED,
  d DECIMAL(12,3), dt DATETIME(6), ts TIMESTAMP(3) NULL, tm TIME(2), dd DATE, y YEAR, j JSON, b BLOB,
  v VARCHAR(100) CHARACTER SET utf8mb4, e ENUM('a','b','c'), s SET('x','y','z'), bt BIT(10), f FLOAT,
  db DOUBLE, c CHAR(5) CHARACTER SET latin1, txt TEXT)"""
# image, compression, partial JSON: the session settings of each round (row metadata: the global, per part)
ROUNDS = [("FULL", 0, ""), ("MINIMAL", 0, ""), ("NOBLOB", 0, ""), ("FULL", 1, ""), ("MINIMAL", 1, "PARTIAL_JSON"),
          ("NOBLOB", 1, ""), ("FULL", 0, "PARTIAL_JSON"), ("MINIMAL", 0, "PARTIAL_JSON")]


def _values(rng: random.Random, k: int) -> list:
    def maybe(v):
        return None if rng.random() < 0.15 else v
    doc = {"a": rng.randint(-5, 5), "s": "é\"q\n", "l": [1, 2.5, None, True], "o": {"x": "y" * rng.randint(0, 9)},
           "d": rng.random() * 10 ** rng.randint(-20, 20)}
    return [k, maybe(rng.randint(-2**31, 2**31 - 1)), maybe(rng.randint(0, 2**32 - 1)), maybe(rng.randint(-128, 127)),
            maybe(rng.randint(-2**63, 2**63 - 1)), maybe(rng.randint(0, 2**64 - 1)),
            maybe(f"{rng.randint(-10**8, 10**8)}.{rng.randint(0, 999):03d}"),
            maybe(f"20{rng.randint(10, 37)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)} 1{rng.randint(0, 9)}:"
                  f"{rng.randint(10, 59)}:0{rng.randint(0, 9)}.{rng.randint(0, 999999):06d}"),
            maybe(f"2021-03-0{rng.randint(1, 9)} 0{rng.randint(0, 9)}:00:0{rng.randint(0, 9)}.{rng.randint(0, 999)}"),
            maybe(f"{rng.choice('-') if rng.random() < 0.3 else ''}{rng.randint(0, 838)}:1{rng.randint(0, 9)}:"
                  f"0{rng.randint(0, 9)}.{rng.randint(0, 99):02d}"),
            maybe(f"19{rng.randint(70, 99)}-1{rng.randint(0, 2)}-2{rng.randint(0, 8)}"), maybe(rng.randint(1901, 2155)),
            maybe(json.dumps(doc)), maybe(bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))),
            maybe("ünïcödé ✓ " + "".join(rng.choice("ab'\\\t") for _ in range(8))), maybe(rng.choice(ENUM)),
            maybe(",".join(x for x in SET if rng.random() < 0.5)), maybe(rng.randint(0, 1023)),
            maybe(rng.choice([0.1, -2.5, 3.25e10, 7.0])), maybe(rng.random() * 10 ** rng.randint(-5, 20)),
            maybe("àé" + rng.choice("xyz")), maybe("text " * rng.randint(0, 5))]


def _round(s: Session, rng: random.Random, n0: int) -> None:
    cols = ",".join(COLUMNS)
    marks = ",".join(["%s"] * len(COLUMNS))
    s.sql("BEGIN")
    for k in range(n0, n0 + 3):
        s.sql(f"INSERT INTO shw.t ({cols}) VALUES ({marks})", _values(rng, k))
    s.sql("COMMIT")
    s.sql(f"INSERT INTO shw.t ({cols}) VALUES ({marks})", _values(rng, n0 + 3))
    s.sql("UPDATE shw.t SET i = i + 1, v = CONCAT(v, 'x') WHERE id IN (%s, %s)", [n0, n0 + 1])
    s.sql("UPDATE shw.t SET j = '{\"a\": 1, \"l\": [1, 2], \"o\": {}}' WHERE id IN (%s, %s, %s)",
          [n0 + 1, n0 + 2, n0 + 3])
    s.sql("UPDATE shw.t SET j = JSON_SET(j, '$.a', 42, '$.new', 'n', '$.o.k', JSON_OBJECT('x', 1.5), "
          "'$.l[5]', JSON_ARRAY(1, 'b')), v = 'both' WHERE id = %s", [n0 + 2])
    s.sql("UPDATE shw.t SET j = JSON_REMOVE(j, '$.l') WHERE id = %s AND JSON_CONTAINS_PATH(j, 'one', '$.l')",
          [n0 + 3])
    s.sql("UPDATE shw.t SET j = JSON_REPLACE(j, '$.a', 'x') WHERE id = %s", [n0 + 1])
    s.sql("DELETE FROM shw.t WHERE id = %s", [n0])


STATEMENTS = [
    "CREATE TABLE shw.ai (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(20))",
    "INSERT INTO shw.ai (v) VALUES ('stmt')",            # statement-based: INTVAR before it
    "XA START 'gx', 'bq', 7", "INSERT INTO shw.ai (v) VALUES ('xa')", "XA END 'gx', 'bq', 7",
    "XA PREPARE 'gx', 'bq', 7", "XA COMMIT 'gx', 'bq', 7",
]


def _statements(s: Session) -> None:
    """DDL, a statement-based insert (INTVAR), an XA transaction, and rows
    with their SQL (binlog_rows_query_log_events: ROWS_QUERY events)."""
    s.sql("SET SESSION binlog_format = 'STATEMENT'")
    for q in STATEMENTS:
        s.sql(q)
    s.sql("SET SESSION binlog_format = 'ROW'")
    s.sql("SET SESSION binlog_rows_query_log_events = ON")
    s.sql("INSERT INTO shw.ai (v) VALUES ('annotated')")
    s.sql("SET SESSION binlog_rows_query_log_events = OFF")
    # JSON beyond what json.dumps writes: opaque values (DECIMAL, dates, times, binary
    # strings), doubles the server prints in either notation, a large (32-bit) object
    s.sql("CREATE TABLE shw.j (id INT PRIMARY KEY, j JSON)")
    s.sql("INSERT INTO shw.j VALUES (1, JSON_OBJECT('dec', CAST(-1.25 AS DECIMAL(5,2)), "
          "'dt', CAST('2020-01-02 03:04:05.5' AS DATETIME(1)), 'd', CAST('2020-01-02' AS DATE), "
          "'t', CAST('-01:02:03' AS TIME), 'bin', CAST(x'00ff27' AS BINARY), 'ctl', CONCAT('a', CHAR(1)), "
          "'dbl', JSON_ARRAY(1e300, -5e-7, 1.5e-15, 1e15, 1e16, 32500000000.0, 1/3, -0.0), "
          "'u', 18446744073709551615, 'lit', JSON_ARRAY(true, false, null), 'e', JSON_OBJECT(), "
          "'q', 'it''s \\\\ \\\"x\\\"'))")
    s.sql("INSERT INTO shw.j VALUES (2, JSON_OBJECT('big', REPEAT('x', 70000), 'k', JSON_ARRAY(1, 2)))")
    s.sql("INSERT INTO shw.j VALUES (3, '[1.5, \"q\"]'), (4, '\"scalar\"'), (5, '3'), (6, 'null'), "
          "(7, '{}'), (8, '[]')")


def write_history():
    """A closed binlog of the rounds: (its path, its SHOW BINLOG EVENTS, server)."""
    srv = MySQL97().ensure()
    s = Session(srv)
    meta = s.one("SELECT @@GLOBAL.binlog_row_metadata")
    rng = random.Random("gtidx-mysql-show")
    s.sql("DROP DATABASE IF EXISTS shw")
    s.sql("CREATE DATABASE shw")
    s.sql("FLUSH BINARY LOGS")
    name = s.one("SHOW BINARY LOG STATUS")
    try:
        s.sql(TABLE)
        for r, (image, compression, options) in enumerate(ROUNDS):
            s.sql(f"SET GLOBAL binlog_row_metadata = '{'FULL' if r % 2 else 'MINIMAL'}'")
            s = Session(srv)       # the global is read when a session starts
            s.sql(f"SET SESSION binlog_row_image = '{image}'")
            s.sql(f"SET SESSION binlog_transaction_compression = {compression}")
            s.sql(f"SET SESSION binlog_row_value_options = '{options}'")
            _round(s, rng, 10 * r)
        _statements(Session(srv))
        s.sql("SET gtid_next = 'AUTOMATIC:shw'")        # a tagged GTID
        s.sql("INSERT INTO shw.t (id, v) VALUES (1000, 'tagged')")
        s.sql("SET gtid_next = 'AUTOMATIC'")
        s.sql("FLUSH BINARY LOGS")
    finally:
        Session(srv).sql(f"SET GLOBAL binlog_row_metadata = '{meta}'")
    events = Session(srv).sql(f"SHOW BINLOG EVENTS IN '{name}'")
    return srv.datadir / name, events, srv



def mysqlbinlog_command(srv) -> list:
    """mysqlbinlog of the server's own install (its root: chroot)."""
    return ["chroot", str(srv.root), "mysqlbinlog"]


def same_rows(ours: list, theirs: list, column_names: str) -> list:
    """``differences`` with a partial JSON update compared as text, named
    columns mapped to their positions."""
    named = column_names == "metadata"
    columns = {"shw.t": COLUMNS, "shw.ai": ["id", "v"], "shw.j": ["id", "j"]}[ours[0]["table"]] if ours else COLUMNS
    order = columns if named else None
    ours = [dict(r) for r in ours]
    theirs = [list(t) for t in theirs]
    for o, t in zip(ours, theirs):
        for side, i in (("before", 2), ("after", 3)):
            for k, v in list((o[side] or {}).items()):
                n = columns.index(k) + 1 if named else int(k[1:])
                # a partial JSON update (with no diffs: the column itself, "@13"): text, unquoted
                if isinstance(v, str) and (v.startswith("JSON_") or v == f"@{n}") and t[i] is not None \
                        and n in t[i]:
                    if t[i][n] == v.encode():
                        del t[i][n]
                        o[side] = {x: y for x, y in o[side].items() if x != k}
    encodings = {("c" if named else "@21"): "latin1"}
    return differences(ours, [tuple(t) for t in theirs], order=order, encodings=encodings,
                       named={"e": ENUM, "s": SET} if named else None, escape=mysql_escaped)
