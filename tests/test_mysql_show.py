"""``gtidx show`` and ``gtidx probe`` on MySQL binlogs, against the live
MySQL 9.7 and its own oracles: every transaction of a binlog written here
(tables of many column types, ``binlog_row_metadata`` FULL and MINIMAL,
``binlog_row_image`` FULL/MINIMAL/NOBLOB, ``binlog_transaction_compression``
ON for part of the transactions, partial JSON updates, tagged GTIDs)
shown as ``mysqlbinlog -v --base64-output=DECODE-ROWS`` prints it; probe's
event boundaries equal to SHOW BINLOG EVENTS' positions; damage exit 3 with
its offset. Each run writes a binlog of its own (FLUSH BINARY LOGS)."""
from __future__ import annotations

import json
import random
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from gtidx import api
from gtidx.binlog.mysql import MysqlBinlog
from tests.showoracle import differences, mysql_escaped, mysqlbinlog_rows
from tools.make_mysql_fixtures import Session
from tools.mysql97 import MySQL97

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "mysql-9.7"

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


@pytest.fixture(scope="module")
def written():
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
        s.sql(f"INSERT INTO shw.t (id, v) VALUES (1000, 'tagged')")
        s.sql("SET gtid_next = 'AUTOMATIC'")
        s.sql("FLUSH BINARY LOGS")
    finally:
        Session(srv).sql(f"SET GLOBAL binlog_row_metadata = '{meta}'")
    events = Session(srv).sql(f"SHOW BINLOG EVENTS IN '{name}'")
    return srv.datadir / name, events, srv


def _mysqlbinlog(srv) -> list:
    return ["chroot", str(srv.root), "mysqlbinlog"]


def _same(ours: list, theirs: list, column_names: str) -> list:
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


def test_show_equals_mysqlbinlog(written):
    path, events, srv = written
    oracle = mysqlbinlog_rows(path, _mysqlbinlog(srv))
    payloads = {int(e[1]) for e in events if e[2] == "Transaction_payload"}
    compared = rows = compressed = partial = 0
    kinds = set()
    statements, annotations = [], []
    with MysqlBinlog(path) as b:
        groups = list(b.transactions())
    assert sorted(oracle) == [g.start for g in groups]
    for g in groups:
        doc = api.show(path, offset=g.start).as_dict()
        want = oracle[g.start]
        assert doc["gtid"] == want["gtid"], g
        assert (doc["start"], doc["end"]) == (g.start, g.end)
        assert doc["compressed"] == want["compressed"] == any(g.start < p < g.end for p in payloads)
        wrong = _same(doc["rows"], want["rows"], doc["column_names"])
        assert wrong == [], (g, wrong[:3])
        compared += 1
        rows += len(doc["rows"])
        compressed += doc["compressed"]
        kinds.add(doc["column_names"])
        partial += sum(isinstance(v, str) and v.startswith("JSON_") for r in doc["rows"]
                       for v in (r["after"] or {}).values())
        statements += doc["statements"]
        annotations += doc["annotations"]
    print(f"{compared} transactions ({compressed} compressed, {rows} rows, {partial} partial JSON updates) "
          "equal mysqlbinlog -v")
    assert TABLE.replace("\n", " ").split() == next(x for x in statements if "shw.t" in x).split()
    assert "SET INSERT_ID=1" in statements and STATEMENTS[1] in statements
    assert "XA START X'6778',X'6271',7" in statements and "XA PREPARE X'6778',X'6271',7" in statements
    assert "XA COMMIT X'6778',X'6271',7" in statements
    assert annotations == ["INSERT INTO shw.ai (v) VALUES ('annotated')"]
    assert compressed >= 10 and partial >= 3 and kinds >= {"metadata", "positional"}
    assert any(doc_gtid.count(":") == 2 for doc_gtid in (v["gtid"] for v in oracle.values()))


def test_show_by_gtid_and_the_cli(written, tmp_path):
    path, events, srv = written
    with MysqlBinlog(path) as b:
        groups = list(b.transactions())
    tagged = next(g for g in groups if g.gtid is not None and g.gtid.tag)
    compressed = next(g for g in groups if any(e[2] == "Transaction_payload" and g.start <= int(e[1]) < g.end
                                              for e in events))
    doc = api.show(path, gtid=str(tagged.gtid)).as_dict()
    assert (doc["gtid"], doc["start"], doc["rows"][0]["after"]["v"]) == (str(tagged.gtid), tagged.start, "tagged")
    run = [sys.executable, "-m", "gtidx"]
    out = subprocess.run([*run, "show", "--json", "--gtid", str(compressed.gtid), str(path)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == api.show(path, offset=compressed.start).as_dict()
    out = subprocess.run([*run, "show", str(path), str(compressed.start)], capture_output=True, text=True)
    assert out.returncode == 0 and "# compressed: " in out.stdout and out.stdout.count("### ") >= 2
    out = subprocess.run([*run, "show", str(path), str(compressed.start + 1)], capture_output=True, text=True)
    assert out.returncode == 1 and out.stderr.count("\n") == 1 and "not an event boundary" in out.stderr


def _payload_event(events) -> int:
    return next(int(e[1]) for e in events if e[2] == "Transaction_payload")


def test_damaged_payload_is_exit_3_at_its_offset(written, tmp_path):
    path, events, srv = written
    at = _payload_event(events)
    data = bytearray(path.read_bytes())
    ln = struct.unpack_from("<I", data, at + 9)[0]
    start = max(int(e[1]) for e in events if int(e[1]) < at and e[2] == "Gtid")
    run = [sys.executable, "-m", "gtidx", "show"]
    # a flipped byte in the compressed bytes: the event's CRC32 says so
    bad = bytearray(data)
    bad[at + ln - 10] ^= 0x40
    (tmp_path / "crc").write_bytes(bad)
    out = subprocess.run([*run, str(tmp_path / "crc"), str(start)], capture_output=True, text=True)
    assert out.returncode == 3 and out.stderr.count("\n") == 1 and f"offset {at}" in out.stderr, out.stderr
    # the same with its CRC32 made right again: the payload itself does not read
    struct.pack_into("<I", bad, at + ln - 4, zlib.crc32(bad[at:at + ln - 4]))
    (tmp_path / "forged").write_bytes(bad)
    out = subprocess.run([*run, str(tmp_path / "forged"), str(start)], capture_output=True, text=True)
    assert out.returncode == 3 and out.stderr.count("\n") == 1, out.stderr
    assert f"offset {at}" in out.stderr and "TRANSACTION_PAYLOAD" in out.stderr, out.stderr


def test_probe_equals_show_binlog_events(written):
    """Every event boundary of the binlog (SHOW BINLOG EVENTS' positions) is
    one for probe, with the set ``pos`` gives there; three bytes inside each
    event give that event's start and end."""
    path, events, srv = written
    # the events of a compressed transaction are listed too, each at the payload's end and ending there
    spans = [(int(e[1]), int(e[4])) for e in events if int(e[1]) < int(e[4])]
    assert len(spans) < len(events) and spans[0][0] == 4 and all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert spans[-1][1] == path.stat().st_size
    probed = 0
    with api.open_binlogs(path) as logs:
        for lo, hi in spans:
            r = logs.probe(path, lo)
            assert (r.before, r.after, r.damaged) == (lo, lo, None)
            assert r.position == logs.state_at(path, lo).state
            for inside in {lo + 1, (lo + hi) // 2, hi - 1}:
                r = logs.probe(path, inside)
                assert (r.before, r.after) == (lo, hi), (lo, hi, inside)
                assert r.state == logs.state_at(path, lo).state
                probed += 1
    assert probed > 3 * len(spans) // 2
    out = subprocess.run([sys.executable, "-m", "gtidx", "probe", "--json", str(path), str(spans[-1][0] + 1)],
                         capture_output=True, text=True)
    doc = json.loads(out.stdout)
    assert out.returncode == 0 and (doc["before"], doc["after"]) == spans[-1] and "\n" not in doc["state"]
    out = subprocess.run([sys.executable, "-m", "gtidx", "probe", str(path), str(spans[-1][1] + 1)],
                         capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "past the end" in out.stderr


def test_probe_across_a_destroyed_header(written, tmp_path):
    """A destroyed header (a compressed transaction's payload event): the
    damaged range is that event, the chain resumes at the next one, the set
    after it unknown; exit 0 (the damage is in the answer)."""
    path, events, srv = written
    spans = [(int(e[1]), int(e[4])) for e in events if int(e[1]) < int(e[4])]
    lo, hi = next((int(e[1]), int(e[4])) for e in events if e[2] == "Transaction_payload")
    data = bytearray(path.read_bytes())
    data[lo + 9:lo + 13] = b"\xff\xff\xff\x7f"          # its length: nothing real
    bad = tmp_path / path.name
    bad.write_bytes(data)
    r = api.probe(bad, lo + 5)
    assert (r.before, r.after, r.damaged) == (lo, hi, (lo, hi))
    r = api.probe(bad, hi + 1)
    assert r.damaged == (lo, hi) and r.state is None and r.before == hi
    out = subprocess.run([sys.executable, "-m", "gtidx", "probe", str(bad), str(hi)], capture_output=True, text=True)
    assert out.returncode == 0 and f"damaged: no trustworthy event in bytes {lo} to {hi}" in out.stdout
    out = subprocess.run([sys.executable, "-m", "gtidx", "show", str(bad), str(max(s for s, _ in spans if s < lo))],
                         capture_output=True, text=True)
    assert out.returncode == 3 and out.stderr.count("\n") == 1 and f"offset {lo}" in out.stderr, out.stderr


@pytest.mark.parametrize("fixture", sorted(p.name for p in FIXTURES.iterdir() if p.is_dir()))
def test_show_equals_mysqlbinlog_on_the_fixtures(fixture):
    """Every transaction of every MySQL fixture (anonymous ones, tagged
    GTIDs, many UUIDs, compressed, without checksums) as mysqlbinlog -v
    prints it."""
    srv = MySQL97().ensure()
    compared = 0
    for path in sorted((FIXTURES / fixture).glob("binlog.0*")):
        oracle = mysqlbinlog_rows(path, _mysqlbinlog(srv))
        with MysqlBinlog(path) as b:
            groups = list(b.transactions())
        assert sorted(oracle) == [g.start for g in groups]
        for g in groups:
            doc = api.show(path, offset=g.start).as_dict()
            want = oracle[g.start]
            assert (doc["gtid"] or "ANONYMOUS") == want["gtid"] and doc["compressed"] == want["compressed"]
            assert differences(doc["rows"], want["rows"], escape=mysql_escaped) == [], g
            compared += 1
    assert compared or fixture == "empty"


def test_an_unknown_event_in_a_payload_is_an_error_naming_it(written, tmp_path):
    """An event type gtidx show does not know, inside a compressed
    transaction (forged: the BEGIN made type 37 with the ignorable flag, the
    payload compressed again, sizes and CRC32 right): exit 2, one line, its
    type named, never left out."""
    import zstandard
    from gtidx.binlog import mysqlpayload
    path, events, srv = written
    lo, hi = next((int(e[1]), int(e[4])) for e in events if e[2] == "Transaction_payload")
    start = max(int(e[1]) for e in events if int(e[1]) < lo and e[2] == "Gtid")
    data = bytearray(path.read_bytes())
    body = bytes(data[lo + 19:hi - 4])
    p = mysqlpayload.decode(body, path=str(path), offset=lo)
    inner = bytearray(b"".join(bytes(mysqlpayload.EVENT_HEADER.pack(e.timestamp, e.type, e.server_id, e.length, 0,
                                                                    e.flags)) + e.body for e in p.events))
    assert p.events[0].type == 2           # the BEGIN
    inner[4] = 37
    struct.pack_into("<H", inner, 17, p.events[0].flags | 0x80)
    packed = zstandard.ZstdCompressor().compress(bytes(inner))

    def field(kind, value):
        v = value.to_bytes(2, "little")
        return bytes([kind, 3, 252]) + v
    new_body = field(2, 0)[:1] + bytes([1, 0]) + field(3, len(inner)) + field(1, len(packed)) + b"\0" + packed
    header = bytearray(data[lo:lo + 19])
    struct.pack_into("<I", header, 9, 19 + len(new_body) + 4)
    struct.pack_into("<I", header, 13, 0)
    event = bytes(header) + new_body
    event += struct.pack("<I", zlib.crc32(event))
    forged = tmp_path / path.name
    forged.write_bytes(bytes(data[:lo]) + event + bytes(data[hi:hi]))   # the file ends after it
    with MysqlBinlog(forged) as b:
        g = next(x for x in b.groups() if x.start == start)
    with pytest.raises(Exception) as e:
        api.show(forged, offset=g.start)
    assert e.value.exit_code == 2 and "an event of type 37" in str(e.value) and e.value.offset == lo, e.value
    out = subprocess.run([sys.executable, "-m", "gtidx", "show", str(forged), str(start)], capture_output=True,
                         text=True)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "type 37" in out.stderr, out.stderr
    assert f"offset {lo}" in out.stderr and "uncompressed payload" in out.stderr


def test_show_through_the_index_equals_show_by_scan(written, tmp_path, monkeypatch):
    """With gtidx's MySQL index beside the binlog, the walk to a transaction
    starts at the record before it (records lie at transaction ends) and
    shows the same."""
    path, events, srv = written
    copy = tmp_path / path.name
    shutil.copy(path, copy)
    from gtidx import admin
    assert all(not isinstance(r, Exception) for r in admin.build([str(copy)], span_min=1, max_ratio=None))
    starts = []
    group_at = api._group_at

    def spy(b, offset, start=None):
        starts.append(start)
        return group_at(b, offset, start)
    monkeypatch.setattr(api, "_group_at", spy)
    with MysqlBinlog(path) as b:
        groups = list(b.transactions())
    for g in groups:
        a, b = api.show(copy, offset=g.start).as_dict(), api.show(path, offset=g.start).as_dict()
        assert {**a, "file": None} == {**b, "file": None}
    from_index = [s for s in starts[::2] if s is not None]
    assert len(from_index) >= len(groups) - 2 and len(starts[1::2]) == len(groups) and not any(starts[1::2])


def test_json_doubles_as_the_server_prints_them():
    """A JSON double's text (``mysqljson.to_text`` of the binary form) is
    the server's (``CAST(JSON_ARRAY(...) AS CHAR)``): fixed or exponent
    notation, ``.0`` on a whole number, over many magnitudes."""
    from gtidx import mysqljson
    srv = MySQL97().ensure()
    rng = random.Random("gtidx-json-doubles")
    values = [1e300, -5e-7, 0.1, 100.0, 1e15, 1e16, 1.5e-14, 1.5e-15, 1e-5, 1e21, 2.0 ** 60, 1e-300, 5e-324,
              -0.0, 0.0, 1 / 3, 3.25e10] + [rng.random() * 10 ** rng.randint(-25, 25) * rng.choice([1, -1])
                                            for _ in range(300)]
    marks = ",".join("CAST(%s AS DOUBLE)" for _ in values)
    theirs = srv.sql(f"SELECT CAST(JSON_ARRAY({marks}) AS CHAR)", [repr(v) for v in values])[0][0]
    ours = "[" + ", ".join(mysqljson.to_text(bytes([mysqljson.DOUBLE]) + struct.pack("<d", v)) for v in values) + "]"
    assert ours == theirs
