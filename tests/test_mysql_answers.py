"""The three answers on MySQL binlogs (issue 15 items 4 and 6) against the
MySQL 9.7 fixtures' oracles (fixtures/mysql-9.7/*/oracle.json: the server's
SHOW BINLOG EVENTS, its Previous_gtids text): every transaction located
where the server logged it, the GTID set at every event boundary (the
file's Previous_gtids plus the GTIDs of the Gtid events ending there or
before), null inside events and past the end; mixed and GTID-less series.
The sets are also asked of the live server in tests/test_mysql_answers_live.py,
and the replica starts of real replica connections."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import FIXTURES, ROOT, growing_copy
from gtidx import api
from gtidx.errors import EXIT_BAD_INPUT, MySQLBinlogError, NotFoundError, UnsupportedBinlogError
from gtidx.series.mysql import MysqlSeries, MysqlStateAt
from gtidx.mysqlgtid import GtidSet, MysqlGtid

MYSQL = FIXTURES / "mysql-9.7"
SCENARIOS = sorted(p.parent for p in MYSQL.glob("*/oracle.json"))
FILES = [(d, f) for d in SCENARIOS for f in json.loads((d / "oracle.json").read_text())["files"]]
ids = [f"{d.name}/{f['name']}" for d, f in FILES]
GTID_EVENTS = ("Gtid", "Gtid_tagged_log_event")
UUID = "8f2379f0-e75f-11f1-a262-02fc00000001"


def oracle_sets(f: dict) -> dict[int, GtidSet]:
    """{event boundary: the set there} from the server's SHOW BINLOG EVENTS:
    Previous_gtids plus every GTID whose Gtid event ends at or before it."""
    prev = GtidSet.parse(f["previous_gtids"])
    ends = sorted((e[2], MysqlGtid.parse(e[3].split("'")[1])) for e in f["events"] if e[1] in GTID_EVENTS)
    out = {}
    for b in sorted({e[0] for e in f["events"]} | {e[2] for e in f["events"]} | {f["size"]}):
        s = prev.copy()
        for end, g in ends:
            if end <= b:
                s.add(*g)
        out[b] = s
    return out


def gtidx(*args, warnings: bool = False):
    """(exit code, stdout, stderr lines): without ``warnings``, the
    "gtidx: warning: " lines left out (a fixture has no index: a scan, said)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "gtidx", *map(str, args)], capture_output=True, text=True, env=env)
    lines = p.stderr.splitlines()
    return p.returncode, p.stdout, lines if warnings else [x for x in lines if not x.startswith("gtidx: warning: ")]


def flavor_of(path):
    """The flavor the façade's one listing decides for ``path``."""
    return api.list_series(path).flavor


def test_flavor_of_the_fixtures():
    for d in SCENARIOS:
        assert flavor_of(d) == "mysql"
    assert flavor_of(FIXTURES / "mariadb-10.11" / "multifile") == "mariadb"
    assert flavor_of(FIXTURES / "nowhere") is None


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[d.name for d in SCENARIOS])
def test_every_transaction_is_located(scenario):
    """Each GTID of a scenario's files, looked up in its directory, is the
    transaction the server logged: its file, Gtid event offset and end."""
    oracle = json.loads((scenario / "oracle.json").read_text())
    with api.open_binlogs(scenario) as logs:
        assert isinstance(logs, MysqlSeries)
        n = 0
        for f in oracle["files"]:
            for gtid, start, end in f["groups"]:
                if gtid is None:
                    continue
                loc = logs.locate(gtid)
                assert (os.path.basename(loc.file), loc.start, loc.end, loc.resume) == (f["name"], start, end, end)
                assert str(loc.gtid) == gtid and loc.via == "scan"
                n += 1
                if n % 9 == 1:          # the one-shot entry point too
                    again = api.seek(gtid, scenario)
                    assert (again.file, again.start, again.end) == (loc.file, loc.start, loc.end)


@pytest.mark.parametrize("scenario,f", FILES, ids=ids)
def test_pos_at_every_boundary_and_inside_events(scenario, f):
    """state_at at every event boundary (the server's positions) is the
    oracle's set; inside every event, past the end: NotFoundError."""
    path = scenario / f["name"]
    sets = oracle_sets(f)
    with MysqlSeries([str(path)]) as logs:
        for b, want in sets.items():
            got = logs.state_at(path, b)
            assert isinstance(got, MysqlStateAt) and got.state == want, (b, got.state.one_line(), want.one_line())
            assert got.position == got.state and got.via == "scan"
        for off in (0, 1, 2, 3):          # the magic: as offset 4 (pos on MariaDB binlogs answers so too)
            assert logs.state_at(path, off).state == sets[4]
        inside = set()
        for pos, _, end, _ in f["events"]:
            inside.update(x for x in (pos + 1, (pos + end) // 2, end - 1) if pos < x < end and x not in sets)
        for off in sorted(inside):
            with pytest.raises(NotFoundError, match="not the start of an event"):
                logs.state_at(path, off)
        for off in (f["size"] + 1, f["size"] + 1000):
            with pytest.raises(NotFoundError, match="past the end"):
                logs.state_at(path, off)
    # the batch entry point answers the same, file after file
    pairs = [(str(path), b) for b in list(sets)[::5]]
    assert [r.state for r in api.states_at(pairs)] == [sets[b] for _, b in pairs]


def test_pos_and_seek_through_the_cli():
    """JSON: the set on one line (``,`` between UUIDs), position and state
    alike; text: as the server prints it (``,\\n``); a GTID's location as
    MariaDB's; null inside an event, exit 1."""
    d = MYSQL / "rotated"
    f = json.loads((d / "oracle.json").read_text())["files"][1]
    gtid, start, end = f["groups"][1]
    want = oracle_sets(f)[start]
    rc, out, err = gtidx("pos", "--json", d / f["name"], start)
    assert rc == 0, err
    doc = json.loads(out)
    assert doc == {"file": str(d / f["name"]), "offset": start, "position": want.one_line(),
                   "state": want.one_line(), "via": "scan"}
    rc, out, err = gtidx("pos", d / f["name"], start)
    assert (rc, out) == (0, str(want) + "\n") and ",\n" in out
    rc, out, err = gtidx("pos", d / f["name"], start + 1, warnings=True)
    assert rc == 1 and out == "" and len(err) == 2 and "not the start of an event" in err[1]
    assert err[:-1] == [f"gtidx: warning: {d / f['name']}: no usable index (missing: no index file); "
                        "answering by scan"]     # a binlog without its index: said, as for MariaDB's
    rc, out, err = gtidx("seek", "--json", "--gtid", gtid, d)
    assert rc == 0, err
    assert json.loads(out) == {"gtid": gtid, "file": str(d / f["name"]), "start": start, "end": end,
                               "resume": end, "timestamp": json.loads(out)["timestamp"], "via": "scan",
                               "occurrences": [{"file": str(d / f["name"]), "start": start, "end": end}]}
    rc, out, err = gtidx("seek", "--gtid", gtid, d / "binlog.index")
    assert rc == 0 and out.startswith(f"{gtid} {d / f['name']} start {start} end {end} resume {end}"), (out, err)
    # a batch: answers in input order, a bad line its error
    batch = f"{gtid}\n0-1-1\n{UUID}:999999\n"
    p = subprocess.run([sys.executable, "-m", "gtidx", "seek", "--json", "--from", "-", str(d)], input=batch,
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    assert p.returncode == 2 and lines[0]["start"] == start
    assert "MariaDB GTID" in lines[1]["error"]["message"] and lines[2]["error"]["exit_code"] == 1


def test_a_gtid_not_there():
    d = MYSQL / "rotated"
    files = json.loads((d / "oracle.json").read_text())["files"]
    with api.open_binlogs(d) as logs:
        with pytest.raises(NotFoundError, match="never written") as e:
            logs.locate(f"{UUID}:999999")
        assert f"{UUID}:1-" in e.value.hint
        first = files[0]["groups"][0][0]
        with pytest.raises(NotFoundError, match="purged"):            # in the first Previous_gtids
            logs.locate(MysqlGtid(UUID, "", MysqlGtid.parse(first).gno - 1))
        with pytest.raises(NotFoundError, match="never written"):
            logs.locate(f"{UUID}:nosuchtag:1")
    with api.open_binlogs(d / files[1]["name"]) as logs:         # one file: the rest is not its
        with pytest.raises(NotFoundError, match="purged"):
            logs.locate(first)


def test_replica_starts_by_the_previous_gtids():
    """The model's rule on the rotated fixture (the live server is the
    oracle in test_mysql_answers_live.py): the executed set just before any
    transaction starts the replica in that transaction's file, the first
    one sent being that transaction; a hole in an earlier file moves the
    start there; the set after the last file: up to date."""
    d = MYSQL / "rotated"
    files = json.loads((d / "oracle.json").read_text())["files"]
    with api.open_binlogs(d) as logs:
        for f in files:
            sets = oracle_sets(f)
            for gtid, start, end in f["groups"][::4]:
                r = logs.replica_start(sets[start])
                assert (os.path.basename(r.file), r.offset) == (f["name"], 4)
                assert r.state == GtidSet.parse(f["previous_gtids"]) and r.skip == sets[start] - r.state
                assert (str(r.first.gtid), r.first.start, r.first.end) == (gtid, start, end)
        end_set = logs.end_set()
        r = logs.replica_start(end_set)
        assert r.first is None and os.path.basename(r.file) == files[-1]["name"]
        hole = MysqlGtid.parse(files[1]["groups"][3][0])
        r = logs.replica_start(end_set - GtidSet([hole]))
        assert os.path.basename(r.file) == files[1]["name"]
        assert (r.first.gtid, r.first.start) == (hole, files[1]["groups"][3][1])
        # the replica's extra GTIDs: refused, unless they are not the (given) server's
        foreign = "3e11fa47-71ca-11e1-9e33-c80aa9429562:999999"
        with pytest.raises(NotFoundError, match="ER_REPLICA_HAS_MORE_GTIDS_THAN_SOURCE"):
            logs.replica_start(end_set | GtidSet.parse(foreign))
        assert logs.replica_start(end_set | GtidSet.parse(foreign), server_uuid=UUID).first is None
        for extra in (f"{UUID}:999999", f"{UUID}:x:5"):
            with pytest.raises(NotFoundError, match="ER_REPLICA_HAS_MORE_GTIDS_THAN_SOURCE"):
                logs.replica_start(end_set | GtidSet.parse(extra), server_uuid=UUID.upper())
        # purged: the first file's Previous_gtids is not all in the replica's set
        with pytest.raises(NotFoundError, match="ER_SOURCE_HAS_PURGED_REQUIRED_GTIDS") as e:
            logs.replica_start(end_set - GtidSet([MysqlGtid(UUID, "", 1)]))
        assert f"lacks {UUID}:1," in e.value.message
    rc, out, err = gtidx("seek", "--json", "--replica", str(end_set), d)
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["position"] == end_set.one_line() and doc["first"] is None and doc["offset"] == 4
    assert doc["file"] == str(d / files[-1]["name"]) and doc["state"] == files[-1]["previous_gtids"].replace("\n", "")
    rc, out, err = gtidx("seek", "--replica", f"{end_set},{UUID}:999999", d)
    assert rc == 1 and out == "" and len(err) == 1 and "ER_REPLICA_HAS_MORE_GTIDS_THAN_SOURCE" in err[0]
    rc, out, err = gtidx("seek", "--replica", f"{end_set},3e11fa47-71ca-11e1-9e33-c80aa9429562:999999",
                         "--server-uuid", UUID, d)
    assert rc == 0 and "up to date" in out, (out, err)


def test_anonymous_transactions():
    """gtid_mode=ON_PERMISSIVE (the anonymous fixture): pos counts the GTIDs
    only (an anonymous transaction executes none); the GTIDs are found; a
    replica whose start meets an anonymous transaction gets the server's
    refusal (the live server says the same, test_mysql_answers_live.py)."""
    d = MYSQL / "anonymous"
    files = json.loads((d / "oracle.json").read_text())["files"]
    f = files[1]
    with api.open_binlogs(d) as logs:
        for b, want in oracle_sets(f).items():
            assert logs.state_at(d / f["name"], b).state == want
        for gtid, start, end in f["groups"]:
            if gtid is not None:
                assert (logs.locate(gtid).start, logs.locate(gtid).end) == (start, end)
        anon = next(g for g in f["groups"] if g[0] is None)
        sets = oracle_sets(f)
        # a replica lacking a GTID before the anonymous one gets it first (the server sends it, then stops
        # at the anonymous transaction: not checked here, it would take a walk to the end)
        r = logs.replica_start(sets[f["groups"][0][1]])
        assert (r.first.gtid, r.first.start) == (MysqlGtid.parse(f["groups"][0][0]), f["groups"][0][1])
        with pytest.raises(NotFoundError, match="ER_CANT_REPLICATE_ANONYMOUS_WITH_AUTO_POSITION") as e:
            logs.replica_start(sets[anon[1]])
        assert (os.path.basename(e.value.path), e.value.offset) == (f["name"], anon[1])
        # a replica past the last anonymous one starts in the next file
        r = logs.replica_start(logs.end_set())
        assert os.path.basename(r.file) == files[-1]["name"] and r.first is None


def test_mixed_directory_is_refused(tmp_path):
    """MariaDB and MySQL binlogs in one directory (or binlog.index): one
    line, exit 2, for every answer."""
    d = tmp_path / "mixed"
    d.mkdir()
    shutil.copy(FIXTURES / "mariadb-10.11" / "empty" / "master-bin.000016", d / "binlog.000001")
    shutil.copy(MYSQL / "empty" / "binlog.000023", d / "binlog.000002")
    for args in (("seek", "--gtid", f"{UUID}:1", d), ("seek", "--gtid", "0-1-1", d),
                 ("seek", "--replica", f"{UUID}:1-5", d), ("seek", "--json", "--gtid", f"{UUID}:1", d)):
        rc, out, err = gtidx(*args)
        assert rc == 2 and len(err) == 1 and "mix MariaDB's and MySQL's" in err[0], (args, err)
        assert "binlog.000001 is a MariaDB binlog, binlog.000002 a MySQL one" in err[0]
    with pytest.raises(UnsupportedBinlogError, match="mix") as e:
        api.open_binlogs(d)
    assert e.value.exit_code == EXIT_BAD_INPUT
    (d / "binlog.index").write_text("./binlog.000002\n./binlog.000001\n")
    rc, out, err = gtidx("seek", "--gtid", f"{UUID}:1", d / "binlog.index")
    assert rc == 2 and "mix" in err[0]
    # one file of each, alone: each answered as its own
    assert api.state_at(d / "binlog.000002", 4).state == GtidSet.parse(
        json.loads((MYSQL / "empty" / "oracle.json").read_text())["files"][0]["previous_gtids"])
    assert api.state_at(d / "binlog.000001", 4).via == "scan"


def test_a_gtid_of_the_other_flavor():
    rc, out, err = gtidx("seek", "--gtid", f"{UUID}:5", FIXTURES / "mariadb-10.11" / "multifile")
    assert rc == 2 and len(err) == 1 and "is a MySQL GTID or GTID set, not a MariaDB one" in err[0]
    rc, out, err = gtidx("seek", "--gtid", "0-1-5", MYSQL / "rotated")
    assert rc == 2 and len(err) == 1 and "is a MariaDB GTID or position" in err[0]
    rc, out, err = gtidx("seek", "--replica", f"{UUID}:1-5", "--server-uuid", UUID,
                         FIXTURES / "mariadb-10.11" / "multifile")
    assert rc == 2 and len(err) == 1


def test_a_file_without_previous_gtids(tmp_path):
    """What MySQL 5.6 writes with GTIDs off has no Previous_gtids event: the
    set before the file is unknown, so pos and seek refuse it (exit 2)
    rather than count from an empty set. (Made from a 9.7 file by taking
    its Previous_gtids event out.)"""
    d, f = FILES[ids.index("rotated/binlog.000015")]
    data = (d / f["name"]).read_bytes()
    pos, _, end, _ = next(e for e in f["events"] if e[1] == "Previous_gtids")
    (tmp_path / "binlog.000001").write_bytes(data[:pos] + data[end:])
    gtid, start, _ = f["groups"][2]
    rc, out, err = gtidx("pos", tmp_path / "binlog.000001", start - (end - pos))
    assert rc == 2 and len(err) == 1 and "without a Previous_gtids event" in err[0], err
    rc, out, err = gtidx("seek", "--gtid", gtid, tmp_path)
    assert rc == 2 and len(err) == 1 and "without a Previous_gtids event" in err[0], err


def test_a_transaction_without_its_gtid_event(tmp_path):
    """A transaction whose GTID event is missing (5.6 with GTIDs off, or
    gtid_mode switched oddly): pos still answers (the set counts GTID events:
    the transaction executed none), a lookup that has to walk through it
    refuses (exit 2) rather than misplace the transaction. (Made from a 9.7
    file by taking one GTID event out.)"""
    d, f = FILES[ids.index("rotated/binlog.000015")]
    data = (d / f["name"]).read_bytes()
    gone, start, _ = f["groups"][5]
    length = int.from_bytes(data[start + 9:start + 13], "little")
    shutil.copy(d / "binlog.000014", tmp_path / "binlog.000014")
    (tmp_path / "binlog.000015").write_bytes(data[:start] + data[start + length:])
    sets = oracle_sets(f)
    with api.open_binlogs(tmp_path) as logs:
        assert logs.state_at(tmp_path / "binlog.000015", start).state == sets[start]
        with pytest.raises(MySQLBinlogError, match="outside any transaction") as e:
            logs.locate(f["groups"][7][0])
        assert e.value.offset == start and e.value.exit_code == EXIT_BAD_INPUT
        assert logs.locate(f["groups"][4][0]).start == f["groups"][4][1]      # before it: found
    after = sets[f["groups"][7][1]] - GtidSet([MysqlGtid.parse(gone)])
    got = api.state_at(tmp_path / "binlog.000015", f["groups"][7][1] - length).state
    assert got == after


def test_a_growing_file(tmp_path):
    """The file being written (IN_USE set), cut inside a transaction: pos
    answers at its boundaries, a GTID whose transaction is not whole yet is
    not there."""
    d, f = FILES[ids.index("rotated/binlog.000015")]
    data = (d / f["name"]).read_bytes()
    gtid, start, end = f["groups"][3]
    cut = (start + end) // 2
    (tmp_path / "binlog.000015").write_bytes(growing_copy(data, cut))
    sets = oracle_sets(f)
    with api.open_binlogs(tmp_path) as logs:
        assert logs.state_at(tmp_path / "binlog.000015", start).state == sets[start]
        with pytest.raises(NotFoundError):
            logs.state_at(tmp_path / "binlog.000015", cut)
        with pytest.raises(NotFoundError, match="never written"):
            logs.locate(gtid)
        assert logs.locate(f["groups"][2][0]).end == f["groups"][2][2]


def test_at_time():
    """seek --time on MySQL binlogs: the first transaction at that second or
    later, and the set before it; past the last: the end."""
    d = MYSQL / "rotated"
    files = json.loads((d / "oracle.json").read_text())["files"]
    with api.open_binlogs(d) as logs:
        f = files[2]
        gtid, start, _ = f["groups"][0]
        ts = logs.locate(gtid).timestamp
        p = logs.at_time(ts)
        # the first transaction of that second, in file order
        first = next((os.path.basename(loc.file), loc.start) for loc in
                     (logs.locate(g) for ff in files for g, _, _ in ff["groups"]) if loc.timestamp >= ts)
        assert (os.path.basename(p.file), p.offset) == first
        assert p.position == logs.state_at(p.file, p.offset).state
        late = logs.at_time(ts + 10 ** 6)
        assert late.gtid is None and late.position == logs.end_set() and late.offset == files[-1]["size"]
    rc, out, err = gtidx("seek", "--json", "--time", f"@{ts}", d)
    assert rc == 0 and json.loads(out)["offset"] == p.offset and "\n" not in json.loads(out)["position"]


class Records:
    """An index reader as the MySQL index will give one (``at_offset``,
    ``before_gtid``: ``(offset, GtidSet) | None``), its records taken from a
    scan here: every transaction's end."""

    def __init__(self, path, prev: GtidSet, stale: int | None = None):
        from gtidx.binlog.mysql import MysqlBinlog
        self.recs = []
        s = prev.copy()
        with MysqlBinlog(path) as b:
            for g in b.groups():
                if g.gtid is not None:
                    s.add(*g.gtid)
                self.recs.append((g.end if stale is None else g.end + stale, s.copy()))
        self.asked = 0

    def at_offset(self, target):
        self.asked += 1
        return next((r for r in reversed(self.recs) if r[0] <= target), None)

    def before_gtid(self, g):
        self.asked += 1
        return next((r for r in reversed(self.recs) if g not in r[1]), None)


def test_the_index_hook(caplog):
    """The walks start where the index reader's record says (via "index")
    and answer as from the file's start; a record that is not an event of
    the file is not used (a warning, via "scan")."""
    d = MYSQL / "rotated"
    f = json.loads((d / "oracle.json").read_text())["files"][1]
    path = str(d / f["name"])
    sets = oracle_sets(f)

    class Indexed(MysqlSeries):
        stale = None

        def index_reader(self, p):
            if not hasattr(self, "_r"):
                self._r = Records(p, self.previous_gtids(p), self.stale)
            return self._r
    with Indexed([path]) as logs:
        for gtid, start, end in f["groups"][1:]:
            loc = logs.locate(gtid)
            assert (loc.start, loc.end, loc.via) == (start, end, "index")
            at = logs.state_at(path, end)
            assert at.state == sets[end] and at.via == "index"
        assert logs._r.asked > 0
    Indexed.stale = 3
    with Indexed([path]) as logs:
        gtid, start, end = f["groups"][5]
        loc = logs.locate(gtid)
        assert (loc.start, loc.end, loc.via) == (start, end, "scan")
        assert "not an event" in caplog.text


def test_locate_many_equals_locate():
    """Many GTIDs at once (seek --from, Spark's tasks): one pass per file,
    the same answers and errors as one by one."""
    d = MYSQL / "rotated"
    oracle = json.loads((d / "oracle.json").read_text())
    gtids = [g for f in oracle["files"] for g, _, _ in f["groups"]]
    odd = [f"{UUID}:999999", f"{UUID}:1", "0-1-1", "nonsense"]
    with api.open_binlogs(d) as logs:
        many = logs.locate_many(gtids + odd)
        for g in gtids:
            one = logs.locate(g)
            assert many[MysqlGtid.parse(g)] == one
        for x in odd:
            got = many.get(x, many.get(MysqlGtid.parse(x) if ":" in x else None))
            with pytest.raises(type(got)) as e:
                logs.locate(x)
            assert e.value.message == got.message


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda d: d.name)
def test_answers_through_the_index_equal_the_oracle(scenario, tmp_path):
    """With gtidx's MySQL index built (small pages and spans: many records),
    every transaction is located and the set at every event boundary is
    answered from an index record (``via: index``), equal to the server's
    oracle, with nothing said on stderr; inside an event still null."""
    d = tmp_path / scenario.name
    shutil.copytree(scenario, d)
    files = json.loads((d / "oracle.json").read_text())["files"]
    rc, out, err = gtidx("build", "--page-size", "256", "--span-min", "64", "--no-budget", "--quiet", d,
                         warnings=True)
    assert rc == 0, err
    with MysqlSeries.from_path(d) as logs:
        for f in files:
            path = str(d / f["name"])
            for gtid, start, end in f["groups"]:
                if gtid is None:
                    continue
                loc = logs.locate(gtid)
                assert (loc.file, loc.start, loc.end, loc.via) == (path, start, end, "index"), gtid
            sets = oracle_sets(f)
            for b, want in sets.items():
                if b < 4 or (b == f["size"] and not f["events"]):
                    continue
                got = logs.state_at(path, b)
                assert got.state == want, (f["name"], b)
            for pos, _, end, _ in f["events"][2:]:
                if pos + 1 < end:
                    with pytest.raises(NotFoundError):
                        logs.state_at(path, pos + 1)
    for gtid, start, end in (g for f in files for g in f["groups"][:1] if g[0] is not None):
        rc, out, err = gtidx("seek", "--json", "--gtid", gtid, d, warnings=True)
        assert rc == 0 and err == [] and json.loads(out)["via"] == "index", err
        break


def test_a_lookup_walks_no_further_than_its_transaction(tmp_path):
    """``seek --gtid`` walks from the index record (or the file's start) to
    its transaction and no further: an event header destroyed after it (its
    length below the header) does not stop the answer; ``pos`` and ``seek``
    past the damage meet it (exit 3). Before, every lookup first walked the
    whole file to its end (1.2 s on a 256 MiB binlog instead of 3 ms)."""
    src = MYSQL / "single"
    d = tmp_path / "single"
    shutil.copytree(src, d)
    f = json.loads((d / "oracle.json").read_text())["files"][-1]
    groups = [g for g in f["groups"] if g[0] is not None]
    early, late = groups[1], groups[-1]
    path = d / f["name"]
    data = bytearray(path.read_bytes())
    bad = next(e[0] for e in f["events"] if groups[-3][1] < e[0] < late[1])   # an event before the last one
    data[bad + 9:bad + 13] = (5).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    with MysqlSeries.from_path(d) as logs:
        loc = logs.locate(early[0])
        assert (loc.start, loc.end) == (early[1], early[2])
    rc, out, err = gtidx("pos", path, late[1])      # the event walk from the start meets the damage
    assert rc == 3 and f"offset {bad}: event length 5 is below the 19-byte header" in err[0], err
    # a lookup walks every event header on its way (transaction_length is only a cross-check, never
    # a jump over events not seen): a lookup past the damage meets it as pos does
    rc, out, err = gtidx("seek", "--gtid", late[0], d)
    assert rc == 3 and f"offset {bad}: event length 5 is below the 19-byte header" in err[-1], err


def test_an_event_type_gtidx_does_not_know_changes_no_lookup(tmp_path):
    """Lookups answer from the GTID events and the transactions' ends: an
    event of a type no MySQL writes yet (CRC32 still right), inside a
    transaction or where its XID was, changes no located transaction and no
    set at any event boundary (the oracle's, from the server's SHOW BINLOG
    EVENTS); its index, built over it, answers the same. ``show`` of that
    transaction refuses it, naming the type and its offset (exit 2), and
    ``probe`` reports its bytes as damaged: nothing is read past silently."""
    import struct
    import zlib

    from gtidx import admin
    d = MYSQL / "rotated"
    f = json.loads((d / "oracle.json").read_text())["files"][1]
    rows = next(e[0] for e in f["events"] if e[1] == "Write_rows")
    xid = next(e[0] for e in f["events"] if e[1] == "Xid" and e[0] > rows)
    for at in (rows, xid):
        here = tmp_path / str(at)
        here.mkdir()
        b = bytearray((d / f["name"]).read_bytes())
        length = struct.unpack_from("<I", b, at + 9)[0]
        b[at + 4] = 0xE0                                             # no MySQL event type
        struct.pack_into("<I", b, at + length - 4, zlib.crc32(bytes(b[at:at + length - 4])))
        (here / f["name"]).write_bytes(bytes(b))
        path = str(here / f["name"])
        for via in ("scan", "index"):
            if via == "index":
                assert all(not isinstance(r, Exception) for r in admin.build(path))
            for g, start, end in f["groups"]:
                loc = api.seek(g, path)
                assert (loc.start, loc.end, loc.via) == (start, end, via), (at, g)
            for boundary, want in oracle_sets(f).items():
                assert api.state_at(path, boundary).state == want, (at, boundary)
        group = next(g for g in f["groups"] if g[1] < at < g[2])
        r = subprocess.run([sys.executable, "-m", "gtidx", "show", "--gtid", group[0], path], capture_output=True,
                           text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert r.returncode == EXIT_BAD_INPUT and r.stderr.count("\n") == 1, r.stderr
        assert f"offset {at}" in r.stderr and "type 224" in r.stderr, r.stderr
        probe = api.probe(path, at + 5)
        assert probe.damaged is not None and probe.damaged[0] <= at, probe
