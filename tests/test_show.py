"""gtidx show: an event group decoded, against mariadb-binlog -v on the same
files (every group of every fixture; a live 10.11 server's binlogs under
binlog_row_metadata and binlog_row_image settings)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, private
from gtidx import admin, api
from gtidx.binlog.mariadb import Binlog
from gtidx.show import decode_group
from showoracle import binlog_rows, differences

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def fixture_binlogs() -> list[Path]:
    """Every fixture binlog mariadb-binlog can read (not the encrypted set)."""
    return sorted(p for p in FIXTURES.glob("mariadb-*/*/*-bin.[0-9]*")
                  if p.suffix[1:].isdigit() and p.parent.name != "encrypted")


@pytest.mark.parametrize("path", fixture_binlogs(), ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}/{p.name}")
def test_every_fixture_group_equals_mariadb_binlog(path):
    theirs = binlog_rows(path)
    with Binlog(path) as b:
        groups = list(b.groups())
    assert set(theirs) == {g.start for g in groups}
    decoded = 0
    with_rows = [g for g in groups if theirs[g.start]]
    through_api = {g.start for g in with_rows[:1] + with_rows[-1:]}   # the rest: the decoder, one open file
    b = Binlog(path)
    for g in groups:
        mine = (api.show(path, offset=g.start) if g.start in through_api else decode_group(b, g)).as_dict()
        assert (mine["gtid"], mine["start"], mine["end"]) == (str(g.gtid), g.start, g.end)
        assert mine["column_names"] in ("positional", "none")
        wrong = differences(mine["rows"], theirs[g.start])
        assert not wrong, (g, wrong[:5])
        decoded += bool(mine["rows"])
    b.close()
    assert decoded == len(with_rows)


# -- a live 10.11 server: binlog_row_metadata x binlog_row_image ---------------------------

COLUMNS = ["id", "big", "neg", "name", "amount", "dt", "dt6", "ts", "d", "tm", "b", "j", "f", "l1"]
CREATE = ("CREATE TABLE sh.{t} (id INT UNSIGNED PRIMARY KEY, big BIGINT UNSIGNED, neg INT, "
          "name VARCHAR(64) CHARACTER SET utf8mb4, amount DECIMAL(12,3), dt DATETIME, dt6 DATETIME(6), "
          "ts TIMESTAMP(3) NULL, d DATE, tm TIME, b BLOB, j JSON, f DOUBLE, l1 VARCHAR(10) CHARACTER SET latin1)")
# the other types, in a table of their own; zero dates need sql_mode=''
XCOLUMNS = ["id", "e", "s", "bt", "y", "t1", "t3", "t6", "zd", "zdt", "m", "mu", "fl", "ch", "sm", "ts0", "bin", "dt2"]
XCREATE = ("CREATE TABLE sh.{t} (id TINYINT UNSIGNED PRIMARY KEY, e ENUM('a','b','c'), s SET('x','y','z'), "
           "bt BIT(10), y YEAR, t1 TIME(1), t3 TIME(3), t6 TIME(6), zd DATE, zdt DATETIME, m MEDIUMINT, "
           "mu MEDIUMINT UNSIGNED, fl FLOAT, ch CHAR(5), sm SMALLINT, ts0 TIMESTAMP NULL, bin VARBINARY(8), "
           "dt2 DATETIME(2))")
XROWS = ("(200, 'b', 'x,z', b'1000000101', 2024, '-00:00:00.5', '-01:02:03.456', '-838:59:58.999999', "
         "'0000-00-00', '0000-00-00 00:00:00', -8388608, 16777215, 0.1, 'ab', -32768, '1970-01-01 00:00:01', "
         "X'00410a', '2024-01-02 03:04:05.07'), (1, NULL, '', NULL, NULL, '12:00:00.1', '00:00:00.001', "
         "'-00:00:01.000001', '2024-00-15', '2024-02-00 10:00:00', NULL, NULL, -3.25, NULL, NULL, NULL, NULL, "
         "'9999-12-31 23:59:59.99')")
XROW200 = {"id": 200, "e": "b", "s": "x,z", "bt": "1000000101", "y": 2024, "t1": "-00:00:00.5",
           "t3": "-01:02:03.456", "t6": "-838:59:58.999999", "zd": "0000-00-00", "zdt": "0000-00-00 00:00:00",
           "m": -8388608, "mu": 16777215, "fl": 0.1, "ch": "ab", "sm": -32768, "ts0": "1970-01-01T00:00:01Z",
           "bin": {"hex": "00410a"}, "dt2": "2024-01-02 03:04:05.07"}
ROW1 = ("(1, 18446744073709551615, -5, 'héllo 🐬 it''s', -1234.5, '2024-01-02 03:04:05', "
        "'2024-01-02 03:04:05.123456', '2024-05-06 07:08:09.120', '2024-02-29', '-12:34:56', "
        "X'00ff27415c0a', '{\"a\": [1, 2]}', 1.5, 'café')")
# ROW1 as `gtidx show --json` gives it (binlog_row_metadata=FULL: names and character sets known)
ROW1_JSON = {"id": 1, "big": 18446744073709551615, "neg": -5, "name": "héllo 🐬 it's", "amount": "-1234.500",
             "dt": "2024-01-02 03:04:05", "dt6": "2024-01-02 03:04:05.123456", "ts": "2024-05-06T07:08:09.120Z",
             "d": "2024-02-29", "tm": "-12:34:56", "b": {"hex": "00ff27415c0a"}, "j": '{"a": [1, 2]}', "f": 1.5,
             "l1": "café"}


@pytest.fixture(scope="module")
def row_server(tmp_path_factory):
    """A private 10.11 of this module's own: binlog_row_metadata is a global setting."""
    from tools.mariadb import MariaDB
    srv = private(MariaDB(tmp_path_factory.mktemp("show-mariadb")))
    srv.sql("CREATE DATABASE sh")
    try:
        yield srv
    finally:
        srv.stop()


def run_workload(srv, meta: str, image: str) -> tuple[Path, dict]:
    """The scenario's transactions in a binlog file of their own: (its path, {name: GTID})."""
    t = f"t_{meta}_{image}".lower()
    srv.sql(f"SET GLOBAL binlog_row_metadata = {meta}")
    conn = srv.connect(charset="utf8mb4")
    gtids = {}
    try:
        with conn.cursor() as cur:
            cur.execute(f"SET SESSION binlog_row_image = {image}")
            cur.execute("SET time_zone = '+00:00'")
            cur.execute(CREATE.format(t=t))
            cur.execute(XCREATE.format(t="x" + t[1:]))
            cur.execute("SET sql_mode = ''")
            cur.execute("FLUSH BINARY LOGS")
            cur.execute("SHOW MASTER STATUS")
            name = cur.fetchone()[0]

            def trx(label, *statements):
                for s in statements:
                    cur.execute(s)
                cur.execute("SELECT @@last_gtid")
                gtids[label] = cur.fetchone()[0]
            trx("insert", f"INSERT INTO sh.{t} VALUES {ROW1}, (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
                          f"NULL, NULL, NULL, NULL, NULL), (3, 7, 0, '', 0.001, NULL, NULL, NULL, '1999-12-31', "
                          f"'00:00:01', X'', '[]', -0.25, '')")
            trx("update", f"UPDATE sh.{t} SET name = 'x', amount = amount + 1 WHERE id IN (1, 2)")
            trx("blob", f"UPDATE sh.{t} SET b = X'0102', f = f * 2 WHERE id = 1")
            trx("delete", f"DELETE FROM sh.{t} WHERE id = 2")
            trx("multi", "BEGIN", f"INSERT INTO sh.{t} (id, big, name) VALUES (4, 0, 'four')",
                f"UPDATE sh.{t} SET big = 4294967296, dt = '2030-01-01 00:00:00' WHERE id = 4",
                f"DELETE FROM sh.{t} WHERE id = 3", "COMMIT")
            trx("types", "BEGIN", f"INSERT INTO sh.x{t[1:]} VALUES {XROWS}",
                f"UPDATE sh.x{t[1:]} SET e = 'c', s = 'y', bt = b'1', t3 = '-00:00:00.999' WHERE id = 200",
                "COMMIT")
            cur.execute("SET SESSION binlog_format = STATEMENT")
            trx("statement", f"INSERT INTO sh.{t} (id, name) VALUES (5, 'stmt')")
            cur.execute("SET SESSION binlog_format = ROW")
            cur.execute("FLUSH BINARY LOGS")
    finally:
        conn.close()
    return srv.binlog_dir / name, gtids


@pytest.mark.live
@pytest.mark.parametrize("meta,image", [("FULL", "FULL"), ("FULL", "MINIMAL"), ("MINIMAL", "FULL"),
                                        ("MINIMAL", "MINIMAL"), ("NO_LOG", "FULL"), ("FULL", "NOBLOB")])
def test_live_groups_equal_mariadb_binlog(row_server, meta, image):
    path, gtids = run_workload(row_server, meta, image)
    t = f"sh.t_{meta}_{image}".lower()
    theirs = binlog_rows(path)
    named = meta == "FULL"
    key = (lambda c: c) if named else (lambda c: f"@{COLUMNS.index(c) + 1}")
    encodings = {key("l1"): "cp1252"} if meta != "NO_LOG" else {}
    shown = {}
    members = {"e": ["a", "b", "c"], "s": ["x", "y", "z"]} if named else {}
    for label, g in gtids.items():
        mine = api.show(row_server.binlog_dir, gtid=g).as_dict()      # the directory: looked up like seek
        shown[label] = mine
        assert (mine["gtid"], mine["file"]) == (g, str(path))
        order = (XCOLUMNS if label == "types" else COLUMNS) if named else None
        wrong = differences(mine["rows"], theirs[mine["start"]], order, encodings, members)
        assert not wrong, (label, wrong)
        assert mine["column_names"] == ("none" if label == "statement" else "metadata" if named else "positional")
        assert all(r["table"] == (t if label != "types" else "sh.x" + t[4:]) for r in mine["rows"])
        assert "foreign-key cascades" in mine["note"]
    assert [r["op"] for r in shown["multi"]["rows"]] == ["insert", "update", "delete"]
    assert [r["op"] for r in shown["insert"]["rows"]] == ["insert"] * 3
    stmt = shown["statement"]
    assert stmt["rows"] == [] and stmt["statements"] == [f"INSERT INTO {t} (id, name) VALUES (5, 'stmt')"]
    upd = shown["update"]["rows"][0]
    if image == "FULL":
        assert all(r["unknown"] == [] for s in shown.values() for r in s["rows"])
        assert upd["changed"] == [key("name"), key("amount")]
        assert shown["blob"]["rows"][0]["changed"] == [key("b"), key("f")]
        assert shown["update"]["rows"][1]["changed"] == [key("name")]     # NULL + 1 stays NULL
    elif image == "MINIMAL":
        # the before image is the primary key, the after image the columns the statement set:
        # the others are unknown, not guessed
        assert list(upd["before"]) == [key("id")] and set(upd["after"]) == {key("name"), key("amount")}
        assert upd["changed"] == []
        assert set(upd["unknown"]) == {key(c) for c in COLUMNS}
        assert list(shown["delete"]["rows"][0]["before"]) == [key("id")]
    else:                   # NOBLOB: every column but the BLOB/TEXT ones that did not change
        assert key("b") in upd["unknown"] and key("j") in upd["unknown"] and key("b") not in upd["after"]
        assert shown["blob"]["rows"][0]["after"][key("b")] == {"hex": "0102"}
    if meta == "FULL" and image == "FULL":
        assert shown["insert"]["rows"][0]["after"] == ROW1_JSON
        assert shown["insert"]["rows"][0]["before"] is None
    xkey = (lambda c: c) if named else (lambda c: f"@{XCOLUMNS.index(c) + 1}")
    types = shown["types"]["rows"]
    if image == "FULL":
        assert types[2]["changed"] == [xkey("e"), xkey("s"), xkey("bt"), xkey("t3")]
    if meta == "FULL" and image == "FULL":
        assert types[0]["after"] == XROW200
        assert types[1]["after"][xkey("s")] == ""
        assert (types[1]["after"]["zd"], types[1]["after"]["zdt"]) == ("2024-00-15", "2024-02-00 10:00:00")
    elif image == "FULL":     # members not named: the ENUM index, the SET bitmask
        assert (types[0]["after"][xkey("e")], types[0]["after"][xkey("s")], types[1]["after"][xkey("s")]) == (2, 5, 0)
    if meta == "MINIMAL" and image == "FULL":     # MINIMAL metadata: signedness and character sets, no names
        assert shown["insert"]["rows"][0]["after"] == {f"@{COLUMNS.index(k) + 1}": v for k, v in ROW1_JSON.items()}
    if meta == "NO_LOG":      # no charset in the binlog: latin1 bytes that are not UTF-8 come as bytes
        assert shown["insert"]["rows"][0]["after"]["@14"] == {"hex": "café".encode("latin1").hex()}
        assert shown["insert"]["rows"][0]["after"]["@2"] == "-1 (18446744073709551615)"
    # the command line: --json is api.show's document; the text names the columns and the changes
    g = gtids["update"]
    out = subprocess.run([PY, "-m", "gtidx", "show", "--json", "--gtid", g, str(row_server.binlog_dir)],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == shown["update"]
    out = subprocess.run([PY, "-m", "gtidx", "show", str(path), str(shown["update"]["start"])],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert f"### UPDATE `{t.replace('.', '`.`')}`" in out.stdout and "foreign-key cascades" in out.stdout
    if image == "FULL":
        assert f"# changed: {key('name')}, {key('amount')}" in out.stdout


# -- mysql-replication is imported by show only ------------------------------------------------

_IMPORTED = """
import sys
from gtidx.cli import main
try:
    main(sys.argv[1:])
except SystemExit as e:
    code = e.code
print(code, 'pymysqlreplication' in sys.modules, 'pymysql' in sys.modules)
"""


def test_seek_does_not_import_mysql_replication():
    path = str(FIXTURES / "mariadb-10.11" / "mixed" / "master-bin.000002")
    r = subprocess.run([PY, "-c", "import sys, gtidx.cli; print('pymysqlreplication' in sys.modules)"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.stdout.split() == ["False"], r.stderr
    for args, imported in ((["seek", "--gtid", "0-1-9", path], "False"), (["pos", path, "1520"], "False"),
                           (["show", path, "1520"], "True")):      # the check sees an import where there is one
        r = subprocess.run([PY, "-c", _IMPORTED, *args], capture_output=True, text=True, cwd=ROOT)
        assert r.stdout.split()[-3:] == ["0", imported, imported], (args, r.stdout, r.stderr)


# -- the command line: usage and errors are one line and an exit code --------------------------

MIXED = FIXTURES / "mariadb-10.11" / "mixed" / "master-bin.000002"


def gtidx(*args):
    return subprocess.run([PY, "-m", "gtidx", *map(str, args)], capture_output=True, text=True, cwd=ROOT)


@pytest.mark.parametrize("args,code,says", [
    (["show"], 2, "give --gtid GTID [PATH], or FILE OFFSET"),
    (["show", MIXED], 2, "give --gtid GTID [PATH], or FILE OFFSET"),
    (["show", "--gtid", "0-1-9", MIXED, MIXED], 2, "at most one PATH"),
    (["show", MIXED, "12x"], 2, "12x"),
    (["show", "--gtid", "0-1", MIXED], 2, "0-1"),
    (["show", MIXED, 1521], 1, "not an event boundary"),
    (["show", MIXED, 300], 1, "no event group at this offset"),
    (["show", "--gtid", "0-1-99999", MIXED], 1, "0-1-99999"),
    (["show", "/nonexistent/master-bin.000001", 4], 3, "/nonexistent"),
])
def test_show_errors(args, code, says):
    r = gtidx(*args)
    assert r.returncode == code, (r.stdout, r.stderr)
    assert says in r.stderr and "Traceback" not in r.stderr
    r = gtidx(*args, "--json")
    assert r.returncode == code
    assert json.loads(r.stdout)["error"]["exit_code"] == code


def test_show_statement_group_and_text():
    """A group with a QUERY event (DDL here) shows its statement; no rows."""
    r = gtidx("show", "--json", MIXED, 387)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["gtid"] == "0-1-5" and doc["rows"] == []
    assert doc["statements"] == ["CREATE TABLE fx.ddl_1 (id INT PRIMARY KEY, v VARCHAR(64)) ENGINE=InnoDB"]
    r = gtidx("show", MIXED, 614)      # an event inside the group 0-1-6: that group
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith(f"# GTID 0-1-6 in {MIXED} start 572 end 871 at ")
    assert "###   @2='202df092 row offset commit domain rollba'" in r.stdout


@pytest.mark.live
def test_live_old_temporal_formats(row_server):
    """Tables made with mysql56_temporal_format=OFF: DATETIME, TIME, TIMESTAMP in
    the pre-10.1 formats (no fraction) are decoded as mariadb-binlog -v reads them;
    with a fraction (a layout neither mariadb-binlog nor mysql-replication reads)
    the answer is one line and exit 2, not a wrong value."""
    conn = row_server.connect(charset="utf8mb4")
    try:
        with conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")
            cur.execute("SET sql_mode = ''")
            cur.execute("SET GLOBAL binlog_row_metadata = FULL")
            cur.execute("SET GLOBAL mysql56_temporal_format = OFF")
            try:
                cur.execute("CREATE TABLE sh.old0 (id INT PRIMARY KEY, dt DATETIME, t TIME, ts TIMESTAMP NULL)")
                cur.execute("CREATE TABLE sh.old6 (id INT PRIMARY KEY, dt DATETIME(3))")
            finally:
                cur.execute("SET GLOBAL mysql56_temporal_format = ON")
            cur.execute("FLUSH BINARY LOGS")
            cur.execute("SHOW MASTER STATUS")
            path = row_server.binlog_dir / cur.fetchone()[0]
            cur.execute("INSERT INTO sh.old0 VALUES (1, '2024-01-02 03:04:05', '-12:34:56', '2024-05-06 07:08:09'), "
                        "(2, '0000-00-00 00:00:00', '838:59:59', NULL), (3, '2024-02-00 00:00:01', '00:00:00', "
                        "'1970-01-01 00:00:01')")
            cur.execute("SELECT @@last_gtid")
            plain = cur.fetchone()[0]
            cur.execute("INSERT INTO sh.old6 VALUES (1, '2024-01-02 03:04:05.123')")
            cur.execute("SELECT @@last_gtid")
            hires = cur.fetchone()[0]
            cur.execute("FLUSH BINARY LOGS")
    finally:
        conn.close()
    theirs = binlog_rows(path, check=False)     # it stops at the fractional table's rows, exit 1
    mine = api.show(path, gtid=plain).as_dict()
    assert len(mine["rows"]) == 3 and not differences(mine["rows"], theirs[mine["start"]], ["id", "dt", "t", "ts"])
    assert [r["after"]["dt"] for r in mine["rows"]] == ["2024-01-02 03:04:05", "0000-00-00 00:00:00",
                                                         "2024-02-00 00:00:01"]
    r = subprocess.run([PY, "-m", "gtidx", "show", "--gtid", hires, str(path)], capture_output=True, text=True,
                       cwd=ROOT)
    errors = [x for x in r.stderr.splitlines() if not x.startswith("gtidx: warning: ")]   # no index: a scan
    assert r.returncode == 2 and r.stdout == "" and len(errors) == 1, r.stderr
    assert "cannot decode the rows of WRITE_ROWS_V1 event on sh.old6" in r.stderr
    assert "mysql56_temporal_format=OFF" in r.stderr


def test_damaged_rows_event_is_exit_3(tmp_path):
    """A byte changed inside a rows event (a copy of a fixture): its CRC32 says so,
    one line and exit 3, never values decoded from damaged bytes."""
    copy = tmp_path / MIXED.name
    data = bytearray(MIXED.read_bytes())
    data[800] ^= 0x20                      # inside the Write_rows event at 761-840 of group 0-1-6
    copy.write_bytes(bytes(data))
    r = gtidx("show", copy, 572)
    assert r.returncode == 3 and r.stdout == "", r.stderr
    assert len(r.stderr.splitlines()) == 1
    assert r.stderr.startswith(f"gtidx: {copy}, offset 761: CRC32 mismatch in WRITE_ROWS_V1 event (stored ")
    assert gtidx("show", copy, 387).returncode == 0        # the other groups are still shown


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("mariadb-*/xa/master-bin.000006")),
                         ids=lambda p: p.parent.parent.name)
def test_xa_statements_equal_mariadb_binlog(path):
    """XA groups: XA START (carried by the GTID event), XA END, XA PREPARE (its own
    event), and the XA COMMIT/ROLLBACK group, as
    mariadb-binlog -v prints them, group by group."""
    out = subprocess.run(["mariadb-binlog", "-v", "--base64-output=DECODE-ROWS", str(path)],
                         capture_output=True, check=True).stdout.decode()
    theirs, at, start = {}, None, None
    for line in out.splitlines():
        if line.startswith("# at "):
            at = int(line[5:])
        elif "\tGTID " in line and line.startswith("#"):
            start = at
        elif line.startswith("XA "):
            theirs.setdefault(start, []).append(line.removesuffix("/*!*/;"))
    assert len(theirs) > 50       # (XA COMMIT ... ONE PHASE is logged as a plain transaction: not here)
    with Binlog(path) as b:
        mine = {g.start: [s for s in decode_group(b, g).statements if s.startswith("XA ")] for g in b.groups()}
    assert {k: v for k, v in mine.items() if v} == theirs


@pytest.mark.live
def test_live_schema_from_names_the_columns(row_server, tmp_path):
    """binlog_row_metadata=MINIMAL writes no column names: ``--schema-from``
    names them from a live server's information_schema (its socket, or a DSN),
    values unchanged; a table whose column count differs on the server keeps
    @1, @2, ... (not guessed); a server that cannot be reached: one line, exit 3."""
    conn = row_server.connect(charset="utf8mb4")
    try:
        with conn.cursor() as cur:
            cur.execute("SET GLOBAL binlog_row_metadata = MINIMAL")
            cur.execute("CREATE TABLE sh.sf (id INT PRIMARY KEY, name VARCHAR(10), amount DECIMAL(5,2))")
            cur.execute("CREATE TABLE sh.sf_altered (id INT PRIMARY KEY, v INT)")
            cur.execute("CREATE USER 'sf'@'127.0.0.1' IDENTIFIED BY 'p@ss'")
            cur.execute("GRANT SELECT ON sh.* TO 'sf'@'127.0.0.1'")
            cur.execute("FLUSH BINARY LOGS")
            cur.execute("SHOW MASTER STATUS")
            path = row_server.binlog_dir / cur.fetchone()[0]
            cur.execute("BEGIN")
            cur.execute("INSERT INTO sh.sf VALUES (42, 'x', 1.50)")
            cur.execute("INSERT INTO sh.sf_altered VALUES (1, 2)")
            cur.execute("COMMIT")
            cur.execute("SELECT @@last_gtid")
            g = cur.fetchone()[0]
            cur.execute("ALTER TABLE sh.sf_altered ADD COLUMN w INT")      # the server's table is not the binlog's
            cur.execute("FLUSH BINARY LOGS")
    finally:
        conn.close()
    plain = api.show(path, gtid=g).as_dict()
    assert plain["column_names"] == "positional"
    assert [r["after"] for r in plain["rows"]] == [{"@1": 42, "@2": "x", "@3": "1.50"}, {"@1": 1, "@2": 2}]
    dsn = f"mysql://sf:p%40ss@127.0.0.1:{row_server.port}"
    for where in (row_server.socket, dsn):
        r = gtidx("show", "--json", "--gtid", g, "--schema-from", where, path)
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["column_names"] == "mixed"
        assert [r["after"] for r in doc["rows"]] == [{"id": 42, "name": "x", "amount": "1.50"}, {"@1": 1, "@2": 2}]
    r = gtidx("show", "--gtid", g, "--schema-from", row_server.socket, path)
    assert r.returncode == 0 and "###   name='x'" in r.stdout, r.stderr
    gone = tmp_path / "no.sock"
    for where, code in ((str(gone), 3), (f"mysql://sf:wrong@127.0.0.1:{row_server.port}", 3),
                        ("http://host/x", 2)):
        r = gtidx("show", "--gtid", g, "--schema-from", where, path)
        errors = [x for x in r.stderr.splitlines() if not x.startswith("gtidx: warning: ")]   # no index: a scan
        assert r.returncode == code and len(errors) == 1, (where, r.stderr)
        assert "Traceback" not in r.stderr and "wrong" not in r.stderr


def test_show_at_an_offset_walks_from_the_index_record_before_it(tmp_path):
    """``show FILE OFFSET`` on an indexed binlog walks from the index record
    at or before OFFSET, not from the file's start: with an event header
    destroyed in the middle of the file (its length; where the index's
    fingerprint of the file's head and tail does not look), a group far past
    it is still shown, equal to the undamaged file's; without the index the
    walk from the start meets the damage (exit 3). The index only shortens
    the walk: a missing one is not mentioned (one line on stderr)."""
    from gtidx.index.build import build_index
    copy = tmp_path / MIXED.name
    data = bytearray(MIXED.read_bytes())
    copy.write_bytes(bytes(data))
    build_index(copy, span_min=4096)
    records = [r.offset for r in admin.index_records(str(copy) + ".idx")[1]]
    far = next(r for r in records if r > 600_000)
    with Binlog(copy) as b:
        group = next(b.groups(far))
        hit = next(g for g in b.groups() if g.start > 200_000)
        event = list(b.events_between(hit.start, hit.end))[1].offset
    clean = gtidx("show", "--json", copy, group.start)
    assert clean.returncode == 0 and clean.stderr == "", clean.stderr
    data[event + 9] ^= 0x40                # the event's length
    copy.write_bytes(bytes(data))
    r = gtidx("show", "--json", copy, group.start)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert json.loads(r.stdout) == json.loads(clean.stdout)
    Path(str(copy) + ".idx").unlink()
    r = gtidx("show", copy, group.start)
    assert r.returncode == 3 and len(r.stderr.splitlines()) == 1, r.stderr
    at = int(r.stderr.split(", offset ")[1].split(":")[0])
    assert event <= at < group.start, r.stderr      # the walk from the start met the damage
