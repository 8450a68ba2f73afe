"""The compiled row decoder (gtidx/_rows.c) against its definition.

``rowbatch.batches`` hands runs of event groups to ``gtidx._rows.Decoder``
where it is built; ``show.decode_group`` (with ``show.text_image``) is the
definition. These tests hold the two equal, row for row and value for value,
on real binlogs only: every fixture, a live 10.11's binlogs under every
binlog_row_metadata x binlog_row_image setting (and log_bin_compress) with a
table of every column type, random schemas and values written by the server
(hypothesis), and damaged copies, where the compiled path must end with the
definition's error (it declines what it cannot decode, and the definition
decides). ``declined`` counts what the decoder handed back: 0 wherever the
types are covered, so the decoder really decoded."""
from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FIXTURES
from gtidx import rowbatch
from gtidx.binlog.mariadb import Binlog
from gtidx.binlog.walk import group_record_chunks
from gtidx.errors import UnsupportedBinlogError
from test_show import fixture_binlogs, row_server, run_workload  # noqa: F401 - row_server: the module's own 10.11

REC = struct.Struct("<QQQIIII")
ROWS_TYPES = {23, 24, 25, 30, 31, 32, 166, 167, 168, 169, 170, 171}


def test_the_compiled_decoder_is_built():
    """pip builds it wherever a C compiler, Python's and zlib's headers are
    (tools/test installs them on a fresh machine)."""
    from gtidx import _rows
    assert rowbatch._rows is _rows


def outcome(path, *, compiled, tables=None, chunks=None, max_rows=rowbatch.MAX_ROWS, stats=None, lo=None, hi=None):
    """The rows ``rowbatch.batches`` gives for ``path`` (each as a dict), and
    the error that ended them: (type name, message) or None."""
    rows, err = [], None
    with Binlog(path) as b:
        try:
            for batch in rowbatch.batches(b, chunks if chunks is not None else group_record_chunks(b),
                                          tables=tables, compiled=compiled, stats=stats, max_rows=max_rows,
                                          lo=lo, hi=hi):
                rows += batch.to_pylist()
        except Exception as e:      # the definition's error, whatever it is, is the answer to equal
            err = (type(e).__name__, str(e))
    return rows, err


def assert_equal(path, *, declined=0, **kw) -> dict:
    """Compiled == definition on ``path`` (``kw``: ``outcome``'s); the compiled path's stats."""
    stats = {}
    mine = outcome(path, compiled=True, stats=stats, **kw)
    theirs = outcome(path, compiled=False, **kw)
    assert mine[1] == theirs[1]
    assert len(mine[0]) == len(theirs[0])
    for i, (a, b) in enumerate(zip(*(mine[0], theirs[0]))):
        assert a == b, (path, i)
    if declined is not None:
        assert stats.get("declined", 0) == declined, stats
    return stats


# -- fixtures -------------------------------------------------------------------------------

@pytest.mark.parametrize("path", fixture_binlogs(), ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}/{p.name}")
def test_every_mariadb_fixture_equals_the_definition(path):
    stats = assert_equal(path)
    with Binlog(path) as b:
        assert stats.get("groups", 0) == len(b.group_records()) // REC.size
    if stats["rows"]:
        # the definition's rows once; the compiled decoder's with batches cut
        # between groups, one table asked for, a time range: those rows, kept
        # as the definition keeps them (a table's rows, the groups stamped in it)
        rows, err = outcome(path, compiled=False)
        assert err is None

        def compiled(**kw):
            stats = {}
            mine, error = outcome(path, compiled=True, stats=stats, **kw)
            assert error is None and stats.get("declined", 0) == 0, (error, stats)
            return mine
        assert compiled(max_rows=7) == rows
        table = rows[0]["table"]
        assert compiled(tables=[table, "no.such"]) == [r for r in rows if r["table"] == table]
        times = sorted({r["timestamp"] for r in rows})
        lo, hi = times[len(times) // 3], times[2 * len(times) // 3]
        kept = compiled(lo=lo, hi=hi)
        assert kept == [r for r in rows if lo <= r["timestamp"] <= hi] and 0 < len(kept) <= len(rows)


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("mysql-*/*/binlog.[0-9]*")),
                         ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}/{p.name}")
def test_mysql_binlogs_do_not_crash_it(path):
    """MySQL row changes are not read yet (its binary JSON, PARTIAL_UPDATE_ROWS):
    the decoder must not crash on their bytes, and a group it decodes has the
    rows the definition gives it; what it declines the definition decodes (or
    refuses)."""
    from gtidx import _rows, show
    from gtidx.binlog.mysql import MysqlBinlog
    from gtidx.rowarrow import batch_from
    kinds, charmaps = rowbatch._charset_tables()
    data = path.read_bytes()
    keys = ("table", "op", "before", "after", "changed", "unknown")
    decoded = 0
    with MysqlBinlog(path) as b:
        d = _rows.Decoder(kinds, charmaps, b.checksum_len, None, path.name)
        for g in b.groups():
            rec = REC.pack(g.start, g.end, 0, g.timestamp, 0, 0, 0)
            nxt, status = d.decode(data, rec, 0, 1, None, None, 1000, 1 << 20)
            mine = [{k: r[k] for k in keys} for r in batch_from(d.finish(), rowbatch.ARROW_SCHEMA).to_pylist()]
            if status == 2:
                continue
            assert (nxt, status) == (1, 0)
            decoded += 1
            theirs = [{"table": r.table, "op": r.op, "before": show.text_image(r.before),
                       "after": show.text_image(r.after), "changed": r.changed, "unknown": r.unknown}
                      for r in show.decode_group(b, g).rows]
            assert [{**r, "before": r["before"] and dict(r["before"]), "after": r["after"] and dict(r["after"])}
                    for r in mine] == theirs
    assert d.groups == decoded


def test_add_row_builds_what_the_python_builder_builds():
    """The rows Python adds to the compiled batch (the groups it declines)
    come out as PyBuilder's: every row of a fixture added that way."""
    from gtidx import _rows, show
    from gtidx.rowarrow import batch_from
    path = FIXTURES / "mariadb-10.11" / "mixed" / "master-bin.000002"
    kinds, charmaps = rowbatch._charset_tables()
    with Binlog(path) as b:
        d = _rows.Decoder(kinds, charmaps, b.checksum_len, None, path.name)
        py = rowbatch.PyBuilder(path.name)
        for g in b.groups():
            for r in show.decode_group(b, g).rows:
                args = (str(g.gtid), g.start, g.timestamp, r.table, r.op, show.text_image(r.before),
                        show.text_image(r.after), r.changed, r.unknown)
                d.add_row(*args)
                py.add_row(*args)
    assert d.rows == py.rows > 1000
    assert batch_from(d.finish(), rowbatch.ARROW_SCHEMA).to_pylist() == py.finish().to_pylist()
    assert d.rows == 0


# -- damaged rows events ------------------------------------------------------------------------

def rows_events(path) -> list[tuple[int, int, bytes]]:
    """(event offset, length, its group's record) of every TABLE_MAP and rows event."""
    out = []
    with Binlog(path) as b:
        records = b.group_records()
        for k in range(0, len(records), REC.size):
            rec = records[k:k + REC.size]
            start, end = REC.unpack(rec)[:2]
            for ev in b.events_between(start, end):
                if ev.type in ROWS_TYPES or ev.type == 19:
                    out.append((ev.offset, ev.length, rec))
    return out


@pytest.mark.parametrize("path", [FIXTURES / "mariadb-10.11" / "nochecksum" / "master-bin.000011",
                                  FIXTURES / "mariadb-11.8" / "nochecksum" / "master-bin.000014",
                                  FIXTURES / "mariadb-10.11" / "mixed" / "master-bin.000002",
                                  FIXTURES / "mariadb-10.11" / "compressed" / "master-bin.000014"],
                         ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_a_damaged_rows_event_gives_the_definitions_answer(tmp_path, path):
    """A byte flipped inside a TABLE_MAP or rows event: with checksums the
    CRC32 says so, without them the bytes are decoded (or not) as the
    definition decodes them: the same rows and the same error either way."""
    data = path.read_bytes()
    events = rows_events(path)
    rng = random.Random(26)
    copy = tmp_path / path.name
    (tmp_path / path.name).write_bytes(data)
    errors = 0
    for _ in range(150):
        off, ln, rec = rng.choice(events)
        at = off + rng.randrange(19, ln)            # the body (and its CRC32)
        damaged = bytearray(data)
        damaged[at] ^= 1 << rng.randrange(8)
        copy.write_bytes(bytes(damaged))
        mine = outcome(copy, compiled=True, chunks=[rec])
        theirs = outcome(copy, compiled=False, chunks=[rec])
        assert mine == theirs, (at, mine[1], theirs[1])
        errors += theirs[1] is not None
    assert errors       # some flips are errors (all of them, with checksums)


def test_a_bad_crc_is_the_definitions_error(tmp_path):
    """As tests/test_show.py's damaged event: the compiled path declines it and
    the definition's CorruptBinlogError ends the rows, after the groups before."""
    src = FIXTURES / "mariadb-10.11" / "mixed" / "master-bin.000002"
    copy = tmp_path / src.name
    data = bytearray(src.read_bytes())
    data[800] ^= 0x20                      # inside the Write_rows event at 761-840
    copy.write_bytes(bytes(data))
    stats = {}
    rows, err = outcome(copy, compiled=True, stats=stats)
    assert err is not None and err[0] == "CorruptBinlogError" and "CRC32 mismatch in WRITE_ROWS_V1" in err[1]
    assert (rows, err) == outcome(copy, compiled=False)
    assert stats["declined"] == 1


def test_a_row_of_no_bytes_is_declined(tmp_path):
    """A rows event whose columns bitmap names no column (its CRC32 made
    right): each row would take no byte, and mysql-replication's loop would
    read such rows forever; the decoder hands the group back, without a row,
    and the definition refuses the event (show._imageless) with its offset."""
    import zlib

    from gtidx import _rows
    src = FIXTURES / "mariadb-10.11" / "mixed" / "master-bin.000002"
    data = bytearray(src.read_bytes())
    off, ln, rec = next(e for e in rows_events(src) if data[e[0] + 4] in (23, 30))
    at = off + 19 + (8 if data[off + 4] == 23 else 10)
    width = data[at]
    assert width < 251
    data[at + 1:at + 1 + (width + 7) // 8] = bytes((width + 7) // 8)
    data[off + ln - 4:off + ln] = struct.pack("<I", zlib.crc32(bytes(data[off:off + ln - 4])))
    kinds, charmaps = rowbatch._charset_tables()
    d = _rows.Decoder(kinds, charmaps, 4, None, src.name)
    assert d.decode(bytes(data), rec, 0, 1, None, None, 100, 1 << 20) == (0, 2)
    assert (d.declined, d.groups, d.rows) == (1, 0, 0)
    copy = tmp_path / src.name
    copy.write_bytes(bytes(data))
    for compiled in (True, False):
        with pytest.raises(UnsupportedBinlogError) as e:
            rowbatch.binlog_table(copy, compiled=compiled)
        assert e.value.offset == off and "names no column" in str(e.value)


# -- a live 10.11: every type, every binlog_row_metadata x binlog_row_image ------------------------

ALL_CREATE = """CREATE TABLE sh.{t} (
  id INT PRIMARY KEY,
  d1 DECIMAL(65,30), d2 DECIMAL(10,0), d3 DECIMAL(20,10), d4 DECIMAL(5,5), d5 DECIMAL(38,7), d6 DECIMAL(1,0),
  d7 DECIMAL(18,9) UNSIGNED, d8 DECIMAL(30,25),
  dt0 DATETIME, dt1 DATETIME(1), dt2 DATETIME(2), dt3 DATETIME(3), dt4 DATETIME(4), dt5 DATETIME(5),
  dt6 DATETIME(6),
  tm0 TIME, tm1 TIME(1), tm2 TIME(2), tm3 TIME(3), tm4 TIME(4), tm5 TIME(5), tm6 TIME(6),
  ts0 TIMESTAMP NULL, ts1 TIMESTAMP(1) NULL, ts2 TIMESTAMP(2) NULL, ts3 TIMESTAMP(3) NULL,
  ts4 TIMESTAMP(4) NULL, ts5 TIMESTAMP(5) NULL, ts6 TIMESTAMP(6) NULL,
  dd DATE, y YEAR,
  b1 BIT(1), b7 BIT(7), b8 BIT(8), b9 BIT(9), b63 BIT(63), b64 BIT(64),
  st SET('a','b','c','d','zz'), en ENUM('x','y','z','ü'), j JSON, g GEOMETRY,
  lb LONGBLOB, mb MEDIUMBLOB, tb TINYBLOB, tx TEXT CHARACTER SET utf8mb4, ltx LONGTEXT CHARACTER SET latin1,
  u8 VARCHAR(300) CHARACTER SET utf8mb4, u3 VARCHAR(20) CHARACTER SET utf8mb3, l1 VARCHAR(20) CHARACTER SET latin1,
  a1 CHAR(10) CHARACTER SET ascii, bn BINARY(4), vb VARBINARY(300), ch CHAR(10) CHARACTER SET utf8mb4,
  fl FLOAT, db DOUBLE,
  ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED, mi MEDIUMINT, miu MEDIUMINT UNSIGNED,
  ii INT, iu INT UNSIGNED, bi BIGINT, bu BIGINT UNSIGNED, uu UUID, i6 INET6, i4 INET4
) DEFAULT CHARSET=utf8mb4"""
ALL_COLUMNS = [c.strip().split()[0] for c in ALL_CREATE.split("(", 1)[1].rsplit(")", 1)[0].replace("\n", " ")
               .split(", ") if c.strip()]

ALL_ROWS = [
    # extremes and edges
    {"id": 1, "d1": "12345678901234567890123456789012345.123456789012345678901234567890",
     "d2": "-9999999999", "d3": "0.0000000001", "d4": "0.00001", "d5": "-1234567890123456789012345678901.1234567",
     "d6": "-9", "d7": "999999999.999999999", "d8": "-0.0000000000000000000000001",
     "dt0": "'1000-01-01 00:00:00'", "dt1": "'9999-12-31 23:59:59.9'", "dt2": "'2024-02-29 12:34:56.07'",
     "dt3": "'2024-01-02 03:04:05.123'", "dt4": "'2024-01-02 03:04:05.0001'", "dt5": "'2024-01-02 03:04:05.99999'",
     "dt6": "'9999-12-31 23:59:59.999999'",
     "tm0": "'-838:59:59'", "tm1": "'-00:00:00.5'", "tm2": "'838:59:59.99'", "tm3": "'-01:02:03.456'",
     "tm4": "'-00:00:00.0001'", "tm5": "'12:00:00.00001'", "tm6": "'-838:59:58.999999'",
     "ts0": "'1970-01-01 00:00:01'", "ts1": "'2038-01-19 03:14:07.9'", "ts2": "'2000-01-01 00:00:00.01'",
     "ts3": "'2024-05-06 07:08:09.120'", "ts4": "'1999-12-31 23:59:59.9999'", "ts5": "'2010-10-10 10:10:10.00001'",
     "ts6": "'2038-01-19 03:14:07.999999'",
     "dd": "'9999-12-31'", "y": "2155", "b1": "b'1'", "b7": "b'1010101'", "b8": "b'11111111'",
     "b9": "b'100000001'", "b63": "b'" + "1" * 63 + "'", "b64": "b'1" + "0" * 62 + "1'",
     "st": "'a,d,zz'", "en": "'ü'", "j": "'{\"k\": [1, 2.5, \"é\"]}'", "g": "ST_GeomFromText('POINT(1 2)')",
     "lb": "REPEAT(X'00ff10', 1000000)", "mb": "REPEAT('ab', 40000)", "tb": "X'00'",
     "tx": "'héllo 🐬 wörld'", "ltx": "'café crème'", "u8": "'𝄞 music 🎵'", "u3": "'ünïcödé'",
     "l1": "X'8141E9'", "a1": "'plain'", "bn": "X'00010203'", "vb": "X'c328'", "ch": "'🐬'",
     "fl": "3.4e38", "db": "1.7976931348623157e308",
     "ti": "-128", "tiu": "255", "si": "-32768", "siu": "65535", "mi": "-8388608", "miu": "16777215",
     "ii": "-2147483648", "iu": "4294967295", "bi": "-9223372036854775808", "bu": "18446744073709551615",
     "uu": "'123e4567-e89b-12d3-a456-426655440000'", "i6": "'2001:db8::ff00:42:8329'", "i4": "'192.168.0.1'"},
    # zeros, zero dates, small floats
    {"id": 2, "d1": "0", "d2": "0", "d3": "0", "d4": "0", "d5": "0", "d6": "0", "d7": "0", "d8": "0",
     "dt0": "'0000-00-00 00:00:00'", "dt1": "'0000-00-00 00:00:00'", "dt2": "'2024-00-15 00:00:00'",
     "dt3": "'2024-02-00 10:00:00.5'", "dt4": "'0000-00-00 00:00:00'", "dt5": "'0000-00-00 00:00:00'",
     "dt6": "'0000-00-00 00:00:00'",
     "tm0": "'00:00:00'", "tm1": "'00:00:00'", "tm2": "'-00:00:00.01'", "tm3": "'00:00:00'", "tm4": "'00:00:00'",
     "tm5": "'-00:00:00.00001'", "tm6": "'-00:00:00.000001'",
     "ts0": "'0000-00-00 00:00:00'", "ts1": "'0000-00-00 00:00:00'", "ts2": "NULL", "ts3": "NULL",
     "ts4": "'1970-01-01 00:00:01.0001'", "ts5": "NULL", "ts6": "'1970-01-01 00:00:01.000001'",
     "dd": "'0000-00-00'", "y": "0", "b1": "b'0'", "b7": "b'0'", "b8": "b'0'", "b9": "b'0'", "b63": "b'0'",
     "b64": "b'0'", "st": "''", "en": "'x'", "j": "'[]'", "g": "ST_GeomFromText('LINESTRING(0 0,1 1)')",
     "lb": "X''", "mb": "''", "tb": "''", "tx": "''", "ltx": "''", "u8": "''", "u3": "''", "l1": "''",
     "a1": "''", "bn": "X''", "vb": "X''", "ch": "''",
     "fl": "1.17549435e-38", "db": "5e-324",
     "ti": "0", "tiu": "0", "si": "0", "siu": "0", "mi": "0", "miu": "0", "ii": "0", "iu": "0", "bi": "0", "bu": "0",
     "uu": "'00000000-0000-0000-0000-000000000000'", "i6": "'::'", "i4": "'0.0.0.0'"},
    # everyday values
    {"id": 3, "d1": "-0.000000000000000000000000000001", "d2": "1", "d3": "-12.5", "d4": "-0.12345",
     "d5": "0.0000001", "d6": "5", "d7": "0.000000001", "d8": "0.0000001",
     "dt0": "'2024-01-02 03:04:05'", "dt1": "'2024-01-02 03:04:05.1'", "dt2": "'2024-01-02 03:04:05.99'",
     "dt3": "'2024-01-02 03:04:05.001'", "dt4": "'2024-01-02 03:04:05.9999'", "dt5": "'2024-01-02 03:04:05.5'",
     "dt6": "'2024-01-02 03:04:05.000001'",
     "tm0": "'12:34:56'", "tm1": "'-12:34:56.7'", "tm2": "'-00:00:01.01'", "tm3": "'100:00:00.999'",
     "tm4": "'-99:59:59.9999'", "tm5": "'-00:00:01.5'", "tm6": "'-00:00:01.000001'",
     "ts0": "'2024-06-30 23:59:59'", "ts1": "'2024-06-30 23:59:59.5'", "ts2": "'2024-06-30 23:59:59.05'",
     "ts3": "'2024-06-30 23:59:59.999'", "ts4": "'2024-06-30 23:59:59.0001'", "ts5": "'2024-06-30 23:59:59.12345'",
     "ts6": "'2024-06-30 23:59:59.654321'",
     "dd": "'2024-02-29'", "y": "1901", "b1": "b'1'", "b7": "b'1'", "b8": "b'10000000'", "b9": "b'11'",
     "b63": "b'101'", "b64": "b'" + "1" * 64 + "'", "st": "'zz,b'", "en": "'y'", "j": "'{\"a\": null}'",
     "g": "ST_GeomFromText('POLYGON((0 0,1 0,1 1,0 0))')", "lb": "X'c3a9'", "mb": "X'ff'", "tb": "'tiny'",
     "tx": "X'eda080'", "ltx": "X'80818d8f909d'", "u8": "'it''s \"quoted\" \\\\ back'", "u3": "'abc'",
     "l1": "'café'", "a1": "'x y'", "bn": "X'ff'", "vb": "'text'", "ch": "'ab  '",
     "fl": "0.1", "db": "-0.0",
     "ti": "-1", "tiu": "128", "si": "-1", "siu": "32768", "mi": "-1", "miu": "8388608", "ii": "-1",
     "iu": "2147483648", "bi": "-1", "bu": "9223372036854775808"},
    {"id": 4},      # NULL in every column
]
ALL_UPDATES = [
    "UPDATE sh.{t} SET d3 = d3 + 1, fl = -0.0, db = 0.0, u8 = 'x', b9 = b'1', st = 'b', en = 'z' WHERE id = 3",
    "UPDATE sh.{t} SET db = -0.0, fl = 0.0, d2 = -0, lb = X'01', tx = 'ü' WHERE id = 3",
    "UPDATE sh.{t} SET d1 = 1, tm6 = '-00:00:00.000002', ts3 = NULL, j = '{}' WHERE id IN (1, 2, 4)",
    "UPDATE sh.{t} SET lb = REPEAT(X'ab', 3000000) WHERE id = 2",
]


def all_types_rows(cur, t: str) -> None:
    cur.execute(ALL_CREATE.format(t=t))
    for row in ALL_ROWS:
        cols = list(row)
        cur.execute(f"INSERT INTO sh.{t} ({', '.join(cols)}) VALUES ({', '.join(str(row[c]) for c in cols)})")
    for u in ALL_UPDATES:
        cur.execute(u.replace("{t}", t))
    cur.execute(f"DELETE FROM sh.{t} WHERE id IN (2, 4)")
    cur.execute("BEGIN")
    cur.execute(f"INSERT INTO sh.{t} (id, u8, bu) VALUES (10, 'multi', 1), (11, NULL, 2)")
    cur.execute(f"UPDATE sh.{t} SET u8 = 'multi2' WHERE id >= 10")
    cur.execute(f"DELETE FROM sh.{t} WHERE id = 10")
    cur.execute("COMMIT")


def all_types_binlog(srv, meta: str, image: str, compress: bool) -> Path:
    """A binlog of its own with the every-type table's rows, under these settings."""
    t = f"all_{meta}_{image}{'_z' if compress else ''}".lower()
    srv.sql(f"SET GLOBAL binlog_row_metadata = {meta}")
    srv.sql(f"SET GLOBAL log_bin_compress = {'ON' if compress else 'OFF'}")
    srv.sql("SET GLOBAL log_bin_compress_min_len = 10")
    conn = srv.connect(charset="utf8mb4")
    try:
        with conn.cursor() as cur:
            cur.execute(f"SET SESSION binlog_row_image = {image}")
            cur.execute("SET time_zone = '+00:00'")
            cur.execute("SET sql_mode = 'ALLOW_INVALID_DATES'")
            cur.execute("FLUSH BINARY LOGS")
            cur.execute("SHOW MASTER STATUS")
            name = cur.fetchone()[0]
            all_types_rows(cur, t)
            cur.execute("FLUSH BINARY LOGS")
    finally:
        conn.close()
        srv.sql("SET GLOBAL log_bin_compress = OFF")
    return srv.binlog_dir / name


MATRIX = [(meta, image) for meta in ("NO_LOG", "MINIMAL", "FULL") for image in ("FULL", "MINIMAL", "NOBLOB")]


@pytest.mark.live
@pytest.mark.parametrize("meta,image", MATRIX)
def test_live_every_type_equals_the_definition(row_server, meta, image):
    path = all_types_binlog(row_server, meta, image, compress=False)
    stats = assert_equal(path)
    assert stats["rows"] >= 12 and stats["groups"] > 0
    path, _ = run_workload(row_server, meta, image)        # tests/test_show.py's scenario too
    assert_equal(path)


@pytest.mark.live
@pytest.mark.parametrize("meta,image", [("FULL", "FULL"), ("NO_LOG", "MINIMAL"), ("MINIMAL", "NOBLOB")])
def test_live_compressed_events_equal_the_definition(row_server, meta, image):
    """log_bin_compress=ON: the rows events are MariaDB's compressed ones."""
    path = all_types_binlog(row_server, meta, image, compress=True)
    with Binlog(path) as b:
        records = b.group_records()
        types = {ev.type for k in range(0, len(records), REC.size)
                 for ev in b.events_between(*REC.unpack_from(records, k)[:2])}
    assert types & {166, 167, 168, 169, 170, 171}
    assert_equal(path)


# -- random schemas and values, written by the server ------------------------------------------

def _sql_str(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "''") + "'"


def _hex(b: bytes) -> str:
    return f"X'{b.hex()}'"


@st.composite
def column(draw):
    """(type text, a strategy of SQL literals for it)."""
    kind = draw(st.sampled_from(["int", "decimal", "float", "double", "datetime", "time", "timestamp", "date",
                                 "year", "bit", "enum", "set", "varchar", "latin1", "binary", "blob", "json"]))
    if kind == "int":
        name, bits = draw(st.sampled_from([("TINYINT", 8), ("SMALLINT", 16), ("MEDIUMINT", 24), ("INT", 32),
                                           ("BIGINT", 64)]))
        unsigned = draw(st.booleans())
        lo, hi = (0, (1 << bits) - 1) if unsigned else (-(1 << bits - 1), (1 << bits - 1) - 1)
        return f"{name}{' UNSIGNED' if unsigned else ''}", st.integers(lo, hi).map(str)
    if kind == "decimal":
        p = draw(st.integers(1, 65))
        s = draw(st.integers(0, min(p, 30)))

        def lit(parts):
            neg, i, f = parts
            return f"{'-' if neg else ''}{i}{'.' + f if s else ''}"
        return f"DECIMAL({p},{s})", st.tuples(st.booleans(), st.integers(0, 10 ** (p - s) - 1),
                                              st.text("0123456789", min_size=s, max_size=s)).map(lit)
    if kind == "float":
        return "FLOAT", st.floats(width=32, allow_nan=False, allow_infinity=False, min_value=-3.3999999521443642e38,
                                  max_value=3.3999999521443642e38).map(repr)
    if kind == "double":
        return "DOUBLE", st.floats(allow_nan=False, allow_infinity=False).map(repr)
    fsp = draw(st.integers(0, 6))
    frac = st.integers(0, 10 ** fsp - 1).map(lambda f: f".{f:0{fsp}d}" if fsp else "")
    if kind == "datetime":
        return f"DATETIME({fsp})", st.tuples(st.integers(0, 9999), st.integers(0, 12), st.integers(0, 31),
                                             st.integers(0, 23), st.integers(0, 59), st.integers(0, 59), frac).map(
            lambda v: f"'{v[0]:04d}-{v[1]:02d}-{v[2]:02d} {v[3]:02d}:{v[4]:02d}:{v[5]:02d}{v[6]}'")
    if kind == "time":
        return f"TIME({fsp})", st.tuples(st.booleans(), st.integers(0, 838), st.integers(0, 59),
                                         st.integers(0, 59), frac).map(
            lambda v: f"'{'-' if v[0] else ''}{v[1]:02d}:{v[2]:02d}:{v[3]:02d}{v[4]}'")
    if kind == "timestamp":
        return f"TIMESTAMP({fsp}) NULL", st.tuples(st.integers(1, 2 ** 31 - 1), frac).map(
            lambda v: f"FROM_UNIXTIME({v[0]}{v[1]})")
    if kind == "date":
        return "DATE", st.tuples(st.integers(0, 9999), st.integers(0, 12), st.integers(0, 31)).map(
            lambda v: f"'{v[0]:04d}-{v[1]:02d}-{v[2]:02d}'")
    if kind == "year":
        return "YEAR", st.sampled_from(["0", "1901", "1999", "2155", "70"])
    if kind == "bit":
        n = draw(st.integers(1, 64))
        return f"BIT({n})", st.integers(0, (1 << n) - 1).map(lambda v: f"b'{v:b}'")
    if kind == "enum":
        members = draw(st.lists(st.text("abcé🐬", min_size=1, max_size=3), min_size=1, max_size=5, unique=True))
        return "ENUM(" + ",".join(map(_sql_str, members)) + ")", st.sampled_from(members).map(_sql_str)
    if kind == "set":
        members = draw(st.lists(st.text("abcé", min_size=1, max_size=3), min_size=1, max_size=8, unique=True))
        return "SET(" + ",".join(map(_sql_str, members)) + ")", st.lists(st.sampled_from(members)).map(
            lambda v: _sql_str(",".join(v)))
    n = draw(st.integers(1, 300))
    if kind == "varchar":
        return f"VARCHAR({n}) CHARACTER SET utf8mb4", st.text(max_size=n).filter(
            lambda s: "\x00" not in s and all(not 0xD800 <= ord(c) < 0xE000 for c in s)).map(_sql_str)
    if kind == "latin1":
        return f"VARCHAR({n}) CHARACTER SET latin1", st.binary(max_size=n).map(_hex)
    if kind == "binary":
        return f"VARBINARY({n})", st.binary(max_size=n).map(_hex)
    if kind == "blob":
        return draw(st.sampled_from(["BLOB", "TINYBLOB", "TEXT CHARACTER SET utf8mb4", "MEDIUMTEXT"])), \
            st.binary(max_size=200).map(_hex)
    return "JSON", st.sampled_from(["'{}'", "'[1, 2]'", "'{\"a\": \"é\"}'", "'null'"])


@st.composite
def scenario(draw):
    cols = draw(st.lists(column(), min_size=1, max_size=6))
    rows = [[draw(st.one_of(st.just("NULL"), strategy)) for _, strategy in cols]
            for _ in range(draw(st.integers(1, 3)))]
    after = [draw(st.one_of(st.just("NULL"), strategy)) for _, strategy in cols]
    meta = draw(st.sampled_from(["NO_LOG", "MINIMAL", "FULL"]))
    image = draw(st.sampled_from(["FULL", "MINIMAL", "NOBLOB"]))
    return [c for c, _ in cols], rows, after, meta, image


_examples = [0]


@pytest.mark.live
def test_random_schemas_equal_the_definition(row_server):
    seen = {"rows": 0, "declined": 0}

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(scenario())
    def check(s):
        types, rows, after, meta, image = s
        _examples[0] += 1
        t = f"sh.h{_examples[0]}"
        names = [f"c{i}" for i in range(len(types))]
        row_server.sql(f"SET GLOBAL binlog_row_metadata = {meta}")
        conn = row_server.connect(charset="utf8mb4")
        try:
            with conn.cursor() as cur:
                cur.execute(f"SET SESSION binlog_row_image = {image}")
                cur.execute("SET time_zone = '+00:00'")
                cur.execute("SET sql_mode = ''")
                cur.execute("FLUSH BINARY LOGS")
                cur.execute("SHOW MASTER STATUS")
                name = cur.fetchone()[0]
                cur.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, "
                            + ", ".join(f"{n} {c}" for n, c in zip(names, types)) + ") DEFAULT CHARSET=utf8mb4")
                for i, row in enumerate(rows):
                    cur.execute(f"INSERT INTO {t} VALUES ({i}, {', '.join(row)})")
                cur.execute(f"UPDATE {t} SET " + ", ".join(f"{n} = {v}" for n, v in zip(names, after)))
                cur.execute(f"DELETE FROM {t} WHERE id = 0")
                cur.execute("FLUSH BINARY LOGS")
        finally:
            conn.close()
        stats = assert_equal(row_server.binlog_dir / name, declined=None)
        seen["rows"] += stats["rows"]
        seen["declined"] += stats["declined"]

    check()
    assert seen["rows"] > 0
    assert seen["declined"] == 0
