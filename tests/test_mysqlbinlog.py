"""MySQL binlogs: MysqlBinlog against the MySQL 9.7 fixtures' oracles.

The oracle of each file (fixtures/mysql-9.7/*/oracle.json, made by
tools/make_mysql_fixtures from the server's SHOW BINLOG EVENTS and
@@gtid_executed): its transactions with their GTIDs and offsets, its
Previous_gtids set as the server prints it, the set after the scenario.
"""
from __future__ import annotations

import json

import pytest

from conftest import FIXTURES, growing_copy
from gtidx.binlog.mariadb import Binlog
from gtidx.errors import EXIT_BAD_INPUT, CorruptBinlogError, MySQLBinlogError, UnsupportedBinlogError
from gtidx.gtid import BinlogState
from gtidx.binlog.mysql import MysqlBinlog, MysqlGroup, open_binlog
from gtidx.mysqlgtid import GtidSet

MYSQL = FIXTURES / "mysql-9.7"
SCENARIOS = sorted(p.parent for p in MYSQL.glob("*/oracle.json"))
FILES = [(d / f["name"], f) for d in SCENARIOS for f in json.loads((d / "oracle.json").read_text())["files"]]
ids = [f"{p.parent.name}/{p.name}" for p, _ in FILES]


def rows(groups) -> list[list]:
    return [[str(g.gtid) if g.gtid is not None else None, g.start, g.end] for g in groups]


def test_fixtures_are_there():
    names = {d.name for d in SCENARIOS}
    assert {"single", "uuids", "tagged", "compressed", "nochecksum", "rotated", "anonymous", "empty"} <= names
    for d in SCENARIOS:
        assert sum(f.stat().st_size for f in d.iterdir()) < 1 << 20


@pytest.mark.parametrize("path,expected", FILES, ids=ids)
def test_groups_equal_the_server(path, expected):
    with MysqlBinlog(path) as b:
        assert rows(b.groups()) == expected["groups"]
        assert b.flavor == "mysql"
        assert b.checksum_len == (4 if expected["checksum"] == "CRC32" else 0)


@pytest.mark.parametrize("path,expected", FILES, ids=ids)
def test_previous_gtids_equal_the_server(path, expected):
    with MysqlBinlog(path) as b:
        assert str(b.previous_gtids) == expected["previous_gtids"]
        prev = [e for e in expected["events"] if e[1] == "Previous_gtids"][0]
        assert (b.previous_gtids_offset, b.body_start) == (prev[0], prev[2])


@pytest.mark.parametrize("path,expected", FILES, ids=ids)
def test_groups_from_an_event_boundary(path, expected):
    """``groups(start)`` from any transaction's start gives the rest."""
    with MysqlBinlog(path) as b:
        for i in range(0, len(expected["groups"]), 7):
            assert rows(b.groups(expected["groups"][i][1])) == expected["groups"][i:]
        # from inside a transaction (its second event): the ones after it
        for i, e in enumerate(expected["events"]):
            if e[1] in ("Gtid", "Gtid_tagged_log_event", "Anonymous_Gtid") and i % 5 == 0:
                inside = expected["events"][i + 1][0]
                assert rows(b.groups(inside)) == [g for g in expected["groups"] if g[1] > e[0]]


@pytest.mark.parametrize("path,expected", FILES, ids=ids)
def test_gtid_event_fields(path, expected):
    """The GTID event's transaction_length is the transaction's size; the
    timestamp is original_commit_timestamp's second."""
    with MysqlBinlog(path) as b:
        for g in b.groups():
            assert isinstance(g, MysqlGroup)
            assert g.length == g.end - g.start
            assert g.commit_us is not None and g.timestamp == g.commit_us // 1_000_000
            header_ts = b.event_header(g.start)[0]
            assert abs(g.timestamp - header_ts) <= 1


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[d.name for d in SCENARIOS])
def test_end_sets_chain_to_gtid_executed(scenario):
    """Each file's end set is the next file's Previous_gtids; the last one's
    is @@gtid_executed after the scenario."""
    oracle = json.loads((scenario / "oracle.json").read_text())
    ends = []
    for f in oracle["files"]:
        with MysqlBinlog(scenario / f["name"]) as b:
            ends.append(b.end_set())
    for end, nxt in zip(ends, oracle["files"][1:]):
        assert str(end) == nxt["previous_gtids"]
    assert str(ends[-1]) == oracle["gtid_executed"]


def test_tagged_and_anonymous_transactions():
    single = json.loads((MYSQL / "tagged" / "oracle.json").read_text())["files"][0]
    with MysqlBinlog(MYSQL / "tagged" / single["name"]) as b:
        tags = {g.gtid.tag for g in b.groups()}
    assert {"", "alpha", "beta_2", "ops", "ddl"} <= tags
    anon = json.loads((MYSQL / "anonymous" / "oracle.json").read_text())["files"][1]
    with MysqlBinlog(MYSQL / "anonymous" / anon["name"]) as b:
        groups = list(b.groups())
        assert sum(g.gtid is None for g in groups) == 9
        assert len(b.end_set()) == len(b.previous_gtids) + len(groups) - 9


# -- growing and cut files ---------------------------------------------------

CUT_FILES = [(p, e) for p, e in FILES if len(e["groups"]) > 10]


@pytest.mark.parametrize("path,expected", CUT_FILES, ids=[f"{p.parent.name}/{p.name}" for p, _ in CUT_FILES])
def test_growing_file_yields_only_terminated_transactions(tmp_path, path, expected):
    """A prefix as the server had it while writing (IN_USE set): a
    transaction counts once its last event is on disk; a partial event at
    the end is where the walk stops."""
    data = path.read_bytes()
    cuts = sorted({x for g in expected["groups"][::3] for x in (g[1], g[2] - 1, g[2], g[2] + 5)})
    for n in cuts:
        p = tmp_path / path.name
        p.write_bytes(growing_copy(data, n))
        with MysqlBinlog(p) as b:
            assert b.growing
            assert rows(b.groups()) == [g for g in expected["groups"] if g[2] <= n], n


def test_closed_file_cut_short(tmp_path):
    """A closed file cut at a transaction's end is whole (MySQL's crash
    recovery leaves the binlog it recovers so: IN_USE cleared, no ROTATE or
    STOP after the last transaction; the live server's own binlogs are read
    in tests/test_mysql_answers_live.py); cut inside a transaction: the
    complete ones, then the truncation error; inside an event: the error at
    once."""
    path, expected = FILES[ids.index("single/" + json.loads(
        (MYSQL / "single" / "oracle.json").read_text())["files"][0]["name"])]
    data = path.read_bytes()
    g = expected["groups"][10]
    (tmp_path / "cut").write_bytes(data[:g[2]])
    with MysqlBinlog(tmp_path / "cut") as b:
        assert rows(b.groups()) == expected["groups"][:11]
    n = next(e[2] for e in expected["events"] if e[0] > expected["groups"][11][1] and e[2] < expected["groups"][11][2])
    (tmp_path / "cut").write_bytes(data[:n])
    seen = []
    with MysqlBinlog(tmp_path / "cut") as b, pytest.raises(CorruptBinlogError, match="truncated"):
        for x in b.groups():
            seen.append(x)
    assert rows(seen) == expected["groups"][:11]
    (tmp_path / "cut").write_bytes(data[:g[2] - 3])
    with MysqlBinlog(tmp_path / "cut") as b, pytest.raises(CorruptBinlogError, match="runs past the end"):
        list(b.groups())


def test_damaged_gtid_event(tmp_path):
    """A GTID event whose body no longer decodes is corruption at its offset
    (binlog_checksum=NONE: no CRC to catch it first)."""
    path, expected = next((p, e) for p, e in FILES if e["checksum"] == "NONE" and e["groups"])
    data = bytearray(path.read_bytes())
    start = expected["groups"][3][1]
    data[start + 19 + 17:start + 19 + 25] = b"\0" * 8          # gno 0
    (tmp_path / path.name).write_bytes(data)
    with MysqlBinlog(tmp_path / path.name) as b, pytest.raises(CorruptBinlogError) as e:
        list(b.groups())
    assert e.value.offset == start and "GTID number 0" in str(e.value)


# -- the flavor, and MariaDB's answers on a MySQL file ------------------------------

MARIADB = next(FIXTURES.glob("mariadb-10.11/mixed/master-bin.*"))


def test_open_binlog_picks_the_flavor():
    with open_binlog(FILES[0][0]) as b:
        assert type(b) is MysqlBinlog
    with open_binlog(MARIADB) as b:
        assert type(b) is Binlog and b.flavor == "mariadb"
    with pytest.raises(UnsupportedBinlogError, match="a MariaDB binlog"):
        MysqlBinlog(MARIADB)


def test_binlog_refuses_a_mysql_file():
    with pytest.raises(MySQLBinlogError, match="a MySQL binlog .*: MySQL binlogs are not supported yet") as e:
        Binlog(FILES[0][0])
    assert e.value.exit_code == EXIT_BAD_INPUT and e.value.offset == 4


@pytest.mark.parametrize("call", [
    lambda b: b.state_at(4), lambda b: b.start_state, lambda b: b.group_spans(),
    lambda b: b.group_batches(65536), lambda b: b.apply_until(BinlogState(), 4, 100),
    lambda b: b.group_records(),
], ids=["state_at", "start_state", "group_spans", "group_batches", "apply_until", "group_records"])
def test_mariadb_answers_are_refused(call):
    """What only a MariaDB binlog answers fails clearly on a MySQL one,
    never a wrong (empty) answer."""
    with MysqlBinlog(FILES[0][0]) as b, pytest.raises(MySQLBinlogError) as e:
        call(b)
    assert "a MySQL binlog" in str(e.value) and "not supported yet" in str(e.value)
    assert e.value.exit_code == EXIT_BAD_INPUT


def test_previous_gtids_decode_tagged_format():
    """The tagged PREVIOUS_GTIDS format (a tag after a UUID) once tags exist."""
    oracle = json.loads((MYSQL / "compressed" / "oracle.json").read_text())
    with MysqlBinlog(MYSQL / "compressed" / oracle["files"][0]["name"]) as b:
        assert any(tag for _, tag in b.previous_gtids.keys())
        assert b.previous_gtids == GtidSet.parse(oracle["files"][0]["previous_gtids"])


def test_older_gtid_event_layouts():
    """A 9.7 GTID event body cut to what 5.7 (flags, uuid, gno, logical
    clock: 42 bytes) and 5.6 (25 bytes) write decodes to the same GTID,
    without the fields those versions lack."""
    from gtidx.binlog.mysql import ANONYMOUS_GTID, GTID_LOG, decode_untagged_gtid
    path, expected = next((p, e) for p, e in FILES if e["checksum"] == "CRC32" and len(e["groups"]) > 5)
    data = path.read_bytes()
    start = expected["groups"][0][1]
    length = int.from_bytes(data[start + 9:start + 13], "little")
    body = data[start + 19:start + length - 4]
    full = decode_untagged_gtid(body, GTID_LOG)
    assert str(full.gtid) == expected["groups"][0][0] and full.length == expected["groups"][0][2] - start
    for cut in (42, 25):
        short = decode_untagged_gtid(body[:cut], GTID_LOG)
        assert short.gtid == full.gtid and short.commit_us is None and short.length is None
    with pytest.raises(ValueError, match="ANONYMOUS_GTID event with GTID number"):
        decode_untagged_gtid(body, ANONYMOUS_GTID)


def test_mysql_before_5_6_1_has_no_checksum_byte(tmp_path):
    """A MySQL FDE older than 5.6.1 ends with its post-header lengths, no
    checksum-algorithm byte (MySQL's checksum_version_product): such a file
    is named a MySQL binlog, not a corrupt one with an unknown algorithm.
    (No 5.5 server here: a 9.7 FDE given 5.5's version and a post-header
    length where 9.7 has the algorithm byte.)"""
    data = bytearray(FILES[0][0].read_bytes())
    length = int.from_bytes(data[4 + 9:4 + 13], "little")
    data[4 + 19 + 2:4 + 19 + 52] = b"5.5.62-log".ljust(50, b"\0")
    data[4 + length - 5] = 0x0A
    (tmp_path / "old").write_bytes(data)
    with pytest.raises(MySQLBinlogError, match="a MySQL binlog .*'5.5.62-log'"):
        Binlog(tmp_path / "old")


def test_events_outside_any_transaction_are_refused(tmp_path):
    """A transaction without its GTID event (what 5.6 writes with GTIDs off)
    is not silently left out: MySQLBinlogError (exit 2) at its first event.
    (Made from a 9.7 file by taking out one GTID event.)"""
    path, expected = FILES[ids.index("single/" + json.loads(
        (MYSQL / "single" / "oracle.json").read_text())["files"][0]["name"])]
    data = path.read_bytes()
    start = expected["groups"][5][1]
    length = int.from_bytes(data[start + 9:start + 13], "little")
    (tmp_path / "f").write_bytes(data[:start] + data[start + length:])
    seen = []
    with MysqlBinlog(tmp_path / "f") as b, pytest.raises(MySQLBinlogError, match="outside any transaction") as e:
        for g in b.groups():
            seen.append(g)
    assert e.value.offset == start and e.value.exit_code == EXIT_BAD_INPUT
    assert rows(seen) == expected["groups"][:5]
