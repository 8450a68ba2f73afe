"""The three answers on MySQL binlogs against the live MySQL 9.7 itself
(tools/mysql97.py; never restarted here; databases myapi_*):

* the GTID set at every event boundary of every fixture file, as the server
  prints it: its GTID_SUBTRACT(CONCAT(Previous_gtids, GTIDs), '') (9.7 has no
  GTID_UNION);
* replica starts from real replica connections on a snapshot of the
  server's own binlogs: mysql-replication's BinLogStreamReader(auto_position=
  SET) for untagged sets (it cannot parse tagged ones and drops Gtid_tagged
  events), the server's own ``mysqlbinlog --read-from-remote-source=
  BINLOG-DUMP-GTIDS --exclude-gtids=SET`` for every set: the start file (its
  first Rotate), the first transaction sent, or the server's refusal;
* gtid_mode stepped ON -> ON_PERMISSIVE -> OFF_PERMISSIVE -> OFF and back with
  transactions between (9.7 rotates the binlog at each step): positions and
  GTIDs from SHOW BINLOG EVENTS, sets from the server, the refusal of an
  auto-positioned replica at the anonymous transactions."""
from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import FIXTURES
from gtidx import api
from gtidx.errors import NotFoundError
from gtidx.series.mysql import MysqlSeries
from gtidx.mysqlgtid import GtidSet, MysqlGtid
from tools.make_mysql_fixtures import groups_of
from tools.mariadb import NO_TLS
from tools.mysql97 import MySQL97

MYSQL = FIXTURES / "mysql-9.7"
GTID_EVENTS = ("Gtid", "Gtid_tagged_log_event")


@pytest.fixture(scope="module")
def srv():
    s = MySQL97().ensure()
    assert s.sql("SELECT @@GLOBAL.gtid_mode")[0][0] == "ON"
    return s


def server_set(cur, parts: list[str]) -> str:
    """The server's text of the union of ``parts`` (sets as text)."""
    cur.execute("SELECT GTID_SUBTRACT(%s, '')", (",".join(p for p in parts if p),))
    return cur.fetchall()[0][0]


def events(srv, name: str) -> list[tuple]:
    return [(int(r[1]), r[2], int(r[4]), str(r[5])) for r in srv.sql(f"SHOW BINLOG EVENTS IN '{name}'")]


def sets_by_the_server(srv, evs: list[tuple], prev: str | None = None) -> dict[int, str]:
    """{boundary: the server's text of the set there}: Previous_gtids (its
    event's Info unless given) plus the GTIDs of the Gtid events ending at or
    before it."""
    if prev is None:
        prev = next(e[3] for e in evs if e[1] == "Previous_gtids")
    gtids = [(e[2], e[3].split("'")[1]) for e in evs if e[1] in GTID_EVENTS]
    out = {}
    with srv.connect() as c, c.cursor() as cur:
        for b in sorted({e[0] for e in evs} | {e[2] for e in evs}):
            out[b] = server_set(cur, [prev] + [g for end, g in gtids if end <= b])
    return out


@pytest.mark.parametrize("scenario", sorted(p.parent for p in MYSQL.glob("*/oracle.json")),
                         ids=lambda p: p.name)
def test_sets_at_every_boundary_as_the_server_prints_them(srv, scenario):
    oracle = json.loads((scenario / "oracle.json").read_text())
    with MysqlSeries([str(scenario / f["name"]) for f in oracle["files"]]) as logs:
        for f in oracle["files"]:
            evs = [tuple(e) for e in f["events"]]
            for b, text in sets_by_the_server(srv, evs, f["previous_gtids"]).items():
                assert str(logs.state_at(scenario / f["name"], b).state) == text, (f["name"], b)


# -- real replica connections ------------------------------------------------------------------------

def snapshot(srv, dest: Path) -> list[str]:
    """The server's binlogs as they are now, copied (each up to the size
    SHOW BINARY LOGS gives: the active one too), with a binlog.index."""
    dest.mkdir()
    names = []
    for name, size, _ in srv.sql("SHOW BINARY LOGS"):
        with open(srv.datadir / name, "rb") as src:
            (dest / name).write_bytes(src.read(int(size)))
        names.append(name)
    (dest / "binlog.index").write_text("".join(f"./{n}\n" for n in names))
    return names


def test_every_binlog_of_the_server_reads_as_it_lists_it(srv, tmp_path):
    """The live server's own binlogs, whatever happened to them (its crash
    recovery closes a binlog after its last transaction, with no ROTATE or
    STOP: seen on this server), read as SHOW BINLOG EVENTS lists them (those
    up to 4 MiB)."""
    from gtidx.binlog.mysql import MysqlBinlog
    d = tmp_path / "binlogs"
    for name in snapshot(srv, d):
        size = (d / name).stat().st_size
        if size > 4 << 20:
            continue            # other helpers' benchmarks: hundreds of MiB, listed for minutes
        evs = [list(e) for e in events(srv, name) if e[2] <= size]
        want = groups_of(evs + [[size, "Stop", size, ""]])
        with MysqlBinlog(d / name) as b:
            got = [[None if g.gtid is None else str(g.gtid), g.start, g.end] for g in b.groups()]
        assert got == want, name


class Refused(Exception):
    pass


def mysqlbinlog_start(srv, have: str) -> tuple[str, str | None, int | None]:
    """(start file, first GTID sent, its GTID event's end_log_pos) as the
    server's own mysqlbinlog gets them over a GTID auto-positioned dump
    (BINLOG-DUMP-GTIDS with no file name: the server picks the file);
    Refused(the server's message). (Its "# at" lines count the bytes it
    received: they do not move over the transactions the server skips.)"""
    sock = "/" + str(Path(srv.socket).relative_to(srv.root))
    p = subprocess.Popen(["chroot", str(srv.root), "mysqlbinlog", f"--socket={sock}", "--user=root",
                          "--read-from-remote-source=BINLOG-DUMP-GTIDS", f"--exclude-gtids={have}",
                          "--to-last-log", ""], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first_file = at = None
    try:
        for line in p.stdout:
            m = re.search(r"Rotate to (\S+)\s+pos: (\d+)", line)
            if m and first_file is None:
                first_file = m.group(1)
            m = re.search(r"end_log_pos (\d+)", line)
            if m:
                at = int(m.group(1))
            m = re.match(r"SET @@SESSION.GTID_NEXT= '([^']+)'", line)
            if m and m.group(1) not in ("AUTOMATIC", "ANONYMOUS"):
                return first_file, m.group(1), at
        err = p.stderr.read()
        p.wait(60)
        if "ERROR" in err:
            raise Refused(err)
        return first_file, None, None
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
        p.stdout.close()
        p.stderr.close()


def stream_start(srv, have: str, server_id: int) -> tuple[str, str | None, int | None]:
    """(start file, first GTID, its event's end) from mysql-replication's
    BinLogStreamReader(auto_position=have, blocking=False): the server
    starts it as a replica. Only for untagged sets and answers."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import GtidEvent, RotateEvent
    r = BinLogStreamReader(connection_settings={"unix_socket": str(srv.socket), "user": "root", **NO_TLS},
                           server_id=server_id, auto_position=have, blocking=False,
                           only_events=[GtidEvent, RotateEvent])
    first_file = None
    try:
        for ev in r:
            if isinstance(ev, RotateEvent) and first_file is None:
                first_file = ev.next_binlog
            if isinstance(ev, GtidEvent):
                return first_file, ev.gtid, ev.packet.log_pos
        return first_file, None, None
    except Exception as e:      # the server's refusal arrives as an error packet
        raise Refused(str(e)) from None
    finally:
        r.close()


def event_length(path: Path, offset: int) -> int:
    with open(path, "rb") as f:
        f.seek(offset + 9)
        return int.from_bytes(f.read(4), "little")


def write_history(srv) -> None:
    """Transactions of this test's own (database myapi_replica), whatever
    the server logged before: three files of untagged GTIDs, then tagged
    ones among untagged ones. On a fresh server they are its first history,
    the one a replica of untagged GTIDs can be positioned in."""
    with srv.connect() as c, c.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS myapi_replica")
        cur.execute("CREATE TABLE IF NOT EXISTS myapi_replica.t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(40))")
        for n in range(60):
            if n % 20 == 0:
                cur.execute("FLUSH BINARY LOGS")
            cur.execute("INSERT INTO myapi_replica.t(v) VALUES (%s)", (f"untagged-{n}",))
        for n in range(12):
            cur.execute("SET gtid_next = 'AUTOMATIC:myrep'" if n % 3 else "SET gtid_next = 'AUTOMATIC'")
            cur.execute("INSERT INTO myapi_replica.t(v) VALUES (%s)", (f"mixed-{n}",))
        cur.execute("SET gtid_next = 'AUTOMATIC'")


def test_replica_starts_equal_real_replica_connections(srv, tmp_path):
    write_history(srv)
    d = tmp_path / "binlogs"
    names = snapshot(srv, d)
    rng = random.Random("gtidx-myapi-replica")
    with api.open_binlogs(d) as logs:
        assert isinstance(logs, MysqlSeries)
        end = logs.end_set()
        # every transaction of the snapshot with its file and the set before it (of its files up to
        # 4 MiB: other helpers' benchmarks leave binlogs of hundreds of MiB)
        trx = []
        # the transactions a replica holding only untagged GTIDs (what mysql-replication can send;
        # an empty set it takes for no auto-position at all) starts at: the set before it untagged,
        # no anonymous transaction before it in its file (the server starts in its file, the newest
        # whose Previous_gtids the set holds)
        untagged = []
        for name in names:
            if (d / name).stat().st_size > 4 << 20:
                continue
            prev = logs.previous_gtids(str(d / name))
            s = prev.copy()
            b = logs.opened(str(d / name))
            anonymous_before = False
            for g in b.groups():
                if g.gtid is not None and not g.gtid.tag and not anonymous_before and s and not any(
                        tag for _, tag in s.keys()):
                    untagged.append(len(trx))
                trx.append((name, g, s.copy()))
                if g.gtid is not None:
                    s.add(*g.gtid)
                anonymous_before |= g.gtid is None
        anonymous = [i for i, (_, g, _) in enumerate(trx) if g.gtid is None]
        last_anon = anonymous[-1] if anonymous else -1
        cases = []
        # the set just before a transaction: sampled before and after the last anonymous one
        picks = rng.sample(range(len(trx)), min(40, len(trx)))
        for i in sorted(picks):
            cases.append(("before", trx[i][2], i))
        # with a hole: a GTID of an earlier transaction missing
        after = range(last_anon + 1, len(trx))
        for i in rng.sample(after, min(8, len(after))):
            g = trx[i][1].gtid
            if g is not None:
                cases.append(("hole", end - GtidSet([g]), i))
        cases.append(("up to date", end, None))
        for a in anonymous[:1] + anonymous[-1:]:        # the set there: the server meets it first
            cases.append(("anonymous", trx[a][2], a))
        compared = streamed = refused = 0
        for kind, have, i in cases:
            try:
                mine = logs.replica_start(have)
            except NotFoundError as e:
                mine = e
            try:
                theirs = mysqlbinlog_start(srv, have.one_line())
            except Refused as e:
                assert isinstance(mine, NotFoundError), (kind, i, str(e))
                assert "anonymous" in str(e) and "ER_CANT_REPLICATE_ANONYMOUS" in mine.message, (str(e), mine)
                m = re.search(r"at file \./(\S+), position (\d+)", str(e))
                assert (os.path.basename(mine.path), mine.offset) == (m.group(1), int(m.group(2)))
                refused += 1
                continue
            assert not isinstance(mine, NotFoundError), (kind, i, mine, theirs)
            file, gtid, at = theirs
            if mine.first is not None:
                at -= event_length(Path(mine.first.file), mine.first.start)     # end_log_pos: the start
            if mine.first is None:
                # up to date in the snapshot: the server starts there, or in a newer file
                # than it had (a helper wrote since), and sends nothing the snapshot had
                assert file >= os.path.basename(mine.file) and (gtid is None or MysqlGtid.parse(gtid) not in end)
            else:
                assert file == os.path.basename(mine.file), (kind, i)
                assert (gtid, at) == (str(mine.first.gtid), mine.first.start), (kind, i)
                if i is not None and kind == "before":
                    assert mine.first.gtid == trx[i][1].gtid or trx[i][1].gtid is None
            compared += 1
            # a real replica connection too, where mysql-replication can read the set and the answer
            if have and not any(tag for _, tag in have.keys()) and (mine.first is None or not mine.first.gtid.tag):
                sfile, sgtid, spos = stream_start(srv, have.one_line(), 7100 + streamed)
                assert sfile == file
                if mine.first is not None:
                    assert (sgtid, spos) == (str(mine.first.gtid), mine.first.start +
                                             event_length(Path(mine.first.file), mine.first.start))
                streamed += 1
        # sets of untagged GTIDs only, from the server's history: the 1st, 3rd, ... 60th transaction
        # such a replica can start at (on a fresh server: this test's own, its first files)
        for n in sorted({min(n, len(untagged)) for n in (1, 3, 10, 40, 45, 60)} - {0}):
            have = trx[untagged[n - 1]][2]
            mine = logs.replica_start(have)
            sfile, sgtid, spos = stream_start(srv, have.one_line(), 7200 + n)
            mfile, mgtid, mend = mysqlbinlog_start(srv, have.one_line())
            assert sfile == mfile == os.path.basename(mine.file)
            assert (mgtid, mend) == (str(mine.first.gtid), mine.first.start +
                                     event_length(Path(mine.first.file), mine.first.start))
            if not mine.first.gtid.tag:
                assert (sgtid, spos) == (mgtid, mend)
                streamed += 1
        print(f"{len(cases)} replica sets: {compared} starts equal mysqlbinlog's ({streamed} also a "
              f"BinLogStreamReader's), {refused} refused by both")
        # a server whose history began with tagged GTIDs or anonymous transactions (not one this
        # test began) has fewer such sets: each one it has is streamed
        assert compared >= 20 and streamed >= min(3, len(untagged)) and refused >= (1 if anonymous else 0)


def test_the_replicas_extra_gtids_as_the_server_refuses_them(srv, tmp_path):
    """9.7 refuses a replica's extra GTIDs of its own UUID, tagged or not
    (ER_REPLICA_HAS_MORE_GTIDS_THAN_SOURCE), lets another UUID's pass; gtidx
    with the server's UUID answers the same, without it refuses any extra
    GTID. (Extra: far past what the server has executed, whatever other
    helpers write meanwhile.)"""
    d = tmp_path / "binlogs"
    snapshot(srv, d)
    own = srv.sql("SELECT @@server_uuid")[0][0]
    with api.open_binlogs(d) as logs:
        end = logs.end_set()
        for extra, refused in ((f"{own}:alpha:900000000", True), (f"{own}:zzz:1", True),
                               (f"{own}:900000000", True), ("3e11fa47-71ca-11e1-9e33-c80aa9429562:900000000", False)):
            have = end | GtidSet.parse(extra)
            with pytest.raises(NotFoundError, match="ER_REPLICA_HAS_MORE_GTIDS_THAN_SOURCE"):
                logs.replica_start(have)
            try:
                theirs = mysqlbinlog_start(srv, have.one_line())
            except Refused as e:
                assert refused and "Replica has more GTIDs than the source has" in str(e), (extra, str(e))
                with pytest.raises(NotFoundError, match="ER_REPLICA_HAS_MORE_GTIDS_THAN_SOURCE"):
                    logs.replica_start(have, server_uuid=own)
                continue
            assert not refused, (extra, theirs)
            mine = logs.replica_start(have, server_uuid=own)
            assert mine.first is None and theirs[0] >= os.path.basename(mine.file)


# -- gtid_mode switched ---------------------------------------------------------------------------

MODES = ["ON_PERMISSIVE", "OFF_PERMISSIVE", "OFF", "OFF_PERMISSIVE", "ON_PERMISSIVE", "ON"]


def test_gtid_mode_switched(srv, tmp_path):
    """Binlogs written while gtid_mode steps down to OFF and back up, with
    transactions between (GTID ones, anonymous ones, both in the permissive
    modes): pos, seek and replica starts give the server's answers or its
    refusal, never a set or place it would not give."""
    c = srv.connect()
    cur = c.cursor()

    def sql(q, args=None):
        cur.execute(q, args)
        return cur.fetchall()
    own = sql("SELECT @@server_uuid")[0][0]
    # GTIDs given by gtid_next: new ones on every run (one executed already is not logged again)
    base = GtidSet.parse(sql("SELECT @@GLOBAL.gtid_executed")[0][0]).last(own, "myapi") or 0
    sql("CREATE DATABASE IF NOT EXISTS myapi_mode")
    sql("CREATE TABLE IF NOT EXISTS myapi_mode.t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(40))")
    sql("FLUSH BINARY LOGS")
    first = sql("SHOW BINARY LOG STATUS")[0][0]
    n = 0

    def work(mode: str) -> None:
        nonlocal n
        for _ in range(3):
            n += 1
            sql("INSERT INTO myapi_mode.t(v) VALUES (%s)", (f"{mode}-{n}",))
        if mode in ("ON_PERMISSIVE", "OFF_PERMISSIVE"):
            sql("SET gtid_next = 'ANONYMOUS'" if mode == "ON_PERMISSIVE" else
                f"SET gtid_next = '{own}:myapi:{base + n}'")
            sql("INSERT INTO myapi_mode.t(v) VALUES ('other')")
            sql("SET gtid_next = 'AUTOMATIC'")
    try:
        work("ON")
        for mode in MODES:
            sql(f"SET GLOBAL gtid_mode = {mode}")
            work(mode)
    finally:
        sql("SET gtid_next = 'AUTOMATIC'")
        for mode in ("OFF_PERMISSIVE", "ON_PERMISSIVE", "ON"):       # back to ON whatever happened
            if sql("SELECT @@GLOBAL.gtid_mode")[0][0] != "ON":
                try:
                    sql(f"SET GLOBAL gtid_mode = {mode}")
                except Exception:
                    pass
        assert sql("SELECT @@GLOBAL.gtid_mode")[0][0] == "ON"
    sql("FLUSH BINARY LOGS")
    names = [r[0] for r in sql("SHOW BINARY LOGS")]
    files = [x for x in names[:-1] if x >= first]
    d = tmp_path / "modes"
    d.mkdir()
    evs = {}
    for name in files:
        (d / name).write_bytes((srv.datadir / name).read_bytes())
        evs[name] = events(srv, name)
    assert len(files) >= len(MODES)              # each switch rotated
    anon_at = [(name, e[0]) for name in files for e in evs[name] if e[1] == "Anonymous_Gtid"]
    assert anon_at
    with api.open_binlogs(d) as logs:
        for name in files:
            for b, text in sets_by_the_server(srv, evs[name]).items():
                assert str(logs.state_at(d / name, b).state) == text, (name, b)
            for gtid, start, end in groups_of([list(e) for e in evs[name]]):
                if gtid is not None:
                    loc = logs.locate(gtid)
                    assert (os.path.basename(loc.file), loc.start, loc.end) == (name, start, end)
        # a replica lacking each transaction in turn: the server's start (file, first GTID sent) or its
        # refusal at an anonymous transaction (file, offset), and gtidx's, are the same
        starts = refusals = 0
        for name in files:
            prev = logs.previous_gtids(str(d / name))
            have = prev.copy()
            for g in logs.opened(str(d / name)).groups():
                try:
                    mine = logs.replica_start(have)
                except NotFoundError as e:
                    mine = e
                try:
                    file, gtid, end = mysqlbinlog_start(srv, have.one_line())
                except Refused as e:
                    m = re.search(r"at file \./(\S+), position (\d+)", str(e))
                    assert isinstance(mine, NotFoundError) and "ANONYMOUS" in mine.message, (name, g, str(e))
                    assert (os.path.basename(mine.path), mine.offset) == (m.group(1), int(m.group(2)))
                    refusals += 1
                else:
                    assert not isinstance(mine, NotFoundError), (name, g, mine, file, gtid)
                    assert file == os.path.basename(mine.file) and gtid == str(mine.first.gtid)
                    assert end == mine.first.start + event_length(Path(mine.first.file), mine.first.start)
                    starts += 1
                if g.gtid is not None:
                    have.add(*g.gtid)
        assert starts and refusals, (starts, refusals)


# -- the lookups over a history of this module's own: compression, tags, row formats ----------

# per file: (binlog_row_metadata, binlog_row_image, binlog_transaction_compression)
MATRIX = [("FULL", "FULL", 0), ("MINIMAL", "MINIMAL", 1), ("FULL", "NOBLOB", 1), ("MINIMAL", "FULL", 0)]


@pytest.fixture(scope="module")
def matrix(srv, tmp_path_factory):
    """Closed binlogs of this module's transactions (database myapi_look),
    one per MATRIX line, each written by sessions with its row metadata,
    image and compression: multi-statement, single-row, blob, DDL and
    tagged (``AUTOMATIC:look``, which needs TRANSACTION_GTID_TAG: root has
    it) transactions. Returns (a copy of the files, their names, SHOW
    BINLOG EVENTS of each, (the file rotated, @@gtid_executed just before
    and just after) at each rotation, mysqlbinlog's
    original_committed_timestamp of each GTID). Other clients
    of the shared server may log transactions into these files too: every
    oracle is the server's account of the files, whatever they hold."""
    meta = srv.sql("SELECT @@GLOBAL.binlog_row_metadata")[0][0]
    srv.sql("CREATE DATABASE IF NOT EXISTS myapi_look")
    srv.sql("DROP TABLE IF EXISTS myapi_look.t")
    srv.sql("CREATE TABLE myapi_look.t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(40), b BLOB, j JSON)")
    srv.sql("FLUSH BINARY LOGS")
    first = srv.sql("SHOW BINARY LOG STATUS")[0][0]
    executed = []
    try:
        for n, (metadata, image, compression) in enumerate(MATRIX):
            srv.sql(f"SET GLOBAL binlog_row_metadata = '{metadata}'")
            with srv.connect() as c, c.cursor() as cur:      # the global is read when a session starts
                cur.execute(f"SET SESSION binlog_row_image = '{image}'")
                cur.execute(f"SET SESSION binlog_transaction_compression = {compression}")
                cur.execute("BEGIN")
                for k in range(3):
                    cur.execute("INSERT INTO myapi_look.t (v, b, j) VALUES (%s, %s, %s)",
                                (f"{n}-{k}", bytes([n, k]) * 300, json.dumps({"n": n, "k": [k] * k})))
                cur.execute("COMMIT")
                cur.execute("UPDATE myapi_look.t SET v = CONCAT(v, '+'), b = NULL WHERE id %% 2 = %s", (n % 2,))
                cur.execute("SET gtid_next = 'AUTOMATIC:look'")
                cur.execute("INSERT INTO myapi_look.t (v) VALUES (%s)", (f"tagged-{n}",))
                cur.execute("SET gtid_next = 'AUTOMATIC'")
                cur.execute(f"ALTER TABLE myapi_look.t COMMENT = 'round {n}'")
                cur.execute("DELETE FROM myapi_look.t WHERE v = %s", (f"{n}-0",))
                cur.execute("SHOW BINARY LOG STATUS")
                closed = cur.fetchall()[0][0]
                cur.execute("SELECT @@GLOBAL.gtid_executed")
                before = cur.fetchall()[0][0]
                cur.execute("FLUSH BINARY LOGS")
                cur.execute("SELECT @@GLOBAL.gtid_executed")
                executed.append((closed, before, cur.fetchall()[0][0]))
    finally:
        srv.sql(f"SET GLOBAL binlog_row_metadata = '{meta}'")
    last = srv.sql("SHOW BINARY LOG STATUS")[0][0]
    listed = [r[0] for r in srv.sql("SHOW BINARY LOGS")]
    names = listed[listed.index(first):listed.index(last)]          # closed: the one written now is not
    d = tmp_path_factory.mktemp("look")
    for name in names:
        shutil.copyfile(srv.datadir / name, d / name)
    evs = {name: events(srv, name) for name in names}
    out = subprocess.run(["chroot", str(srv.root), "mysqlbinlog",
                          *(f"/{(srv.datadir / n).relative_to(srv.root)}" for n in names)],
                         capture_output=True, text=True, check=True).stdout
    commit_us = dict((g, int(us)) for us, g in re.findall(
        r"original_committed_timestamp=(\d+).*?\nSET @@SESSION.GTID_NEXT= '([^']+)'", out, re.S))
    return d, names, evs, executed, commit_us


def _transactions(matrix) -> list[tuple]:
    """(name, gtid, start, end) of every transaction, as SHOW BINLOG EVENTS lists them."""
    d, names, evs, _, _ = matrix
    return [(n, g, s, e) for n in names for g, s, e in groups_of([list(x) for x in evs[n]])]


def test_lookups_over_compression_tags_and_row_formats(srv, matrix):
    """Every transaction is located where SHOW BINLOG EVENTS puts it, by
    scan and through the indexes, and shown there; each file's end set is the next file's
    Previous_gtids as the server printed it, holds what @@gtid_executed held
    just before its rotation and is held by what it held just after
    (GTID_SUBSET, by the server)."""
    from gtidx import admin
    d, names, evs, executed, _ = matrix
    trx = _transactions(matrix)
    assert {g.count(":") for _, g, _, _ in trx if g} == {1, 2}                 # tagged and untagged
    payloads = [e for n in names for e in evs[n] if e[1] == "Transaction_payload"]
    assert len(names) >= len(MATRIX) and len(trx) >= 4 * len(MATRIX) and len(payloads) >= 6, (names, len(payloads))
    for via in ("scan", "index"):
        if via == "index":
            assert all(not isinstance(r, Exception) for r in admin.build(str(d)))
        with api.open_binlogs(d) as logs:
            for name, gtid, start, end in trx:
                if gtid is None:
                    continue        # an anonymous one another client logged while gtid_mode was switched
                loc = logs.locate(gtid)
                assert (Path(loc.file).name, loc.start, loc.end, loc.via) == (name, start, end, via), gtid
    # show by GTID: the same transaction, compressed where the server wrote a Transaction_payload
    shown = set()
    for name, gtid, start, end in trx[::2]:
        if gtid is not None:
            doc = api.show(str(d), gtid=gtid).as_dict()
            assert (Path(doc["file"]).name, doc["start"], doc["end"]) == (name, start, end), gtid
            assert doc["compressed"] == any(e[1] == "Transaction_payload" and start < e[0] < end
                                            for e in evs[name]), gtid
            shown.add(doc["compressed"])
    assert shown == {True, False}
    ends = {}
    for i, name in enumerate(names):
        with MysqlSeries([str(d / name)]) as one:
            ends[name] = one.end_set()
        if i + 1 < len(names):
            assert str(ends[name]) == next(e[3] for e in evs[names[i + 1]] if e[1] == "Previous_gtids")
    assert [closed for closed, _, _ in executed] == [n for n in names if n in {c for c, _, _ in executed}]
    with srv.connect() as c, c.cursor() as cur:
        for closed, before, after in executed:
            cur.execute("SELECT GTID_SUBSET(%s, %s), GTID_SUBSET(%s, %s)",
                        (before, ends[closed].one_line(), ends[closed].one_line(), after))
            assert cur.fetchall()[0] == (1, 1), closed


def test_sets_replica_starts_and_times_over_compression_tags_and_row_formats(srv, matrix):
    """pos at every event boundary of every file is the server's set there;
    a replica start from the set at a transaction's start is the newest
    file whose Previous_gtids the set holds (GTID_SUBSET, by the server)
    and that transaction; seek --time of each transaction's second (its
    original_committed_timestamp as mysqlbinlog prints it) is the first
    transaction of that second or later."""
    d, names, evs, _, commit_us = matrix
    trx = _transactions(matrix)
    with MysqlSeries([str(d / n) for n in names]) as logs:
        for name in names:
            for b, text in sets_by_the_server(srv, list(evs[name])).items():
                assert str(logs.state_at(d / name, b).state) == text, (name, b)
        prev = {n: next(e[3] for e in evs[n] if e[1] == "Previous_gtids") for n in names}
        started = 0
        with srv.connect() as c, c.cursor() as cur:
            for name, gtid, start, _ in trx[1::4]:
                if gtid is None:
                    continue
                started += 1
                have = logs.state_at(d / name, start).state.one_line()
                holds = []
                for n in names:
                    cur.execute("SELECT GTID_SUBSET(%s, %s)", (prev[n], have))
                    holds.append(cur.fetchall()[0][0] == 1)
                want_file = max(i for i, h in enumerate(holds) if h)
                r = logs.replica_start(have)
                assert (Path(r.file).name, r.offset) == (names[want_file], 4), gtid
                assert r.first is not None and (str(r.first.gtid), r.first.start) == (gtid, start), gtid
        assert started >= len(MATRIX)
        timed = [(commit_us[g] // 1_000_000, n, s) for n, g, s, _ in trx if g in commit_us]
        assert len(timed) == sum(g is not None for _, g, _, _ in trx)
        for second in sorted({t for t, _, _ in timed}):
            p = logs.at_time(f"@{second}")
            first = next((n, s) for t, n, s in timed if t >= second)
            assert (Path(p.file).name, p.offset) == first, second
            assert p.position == logs.state_at(p.file, p.offset).state


def test_no_anonymous_transaction_while_gtid_mode_is_on(srv):
    """With gtid_mode ON (the matrix's server) a session cannot log an
    anonymous transaction: the server refuses gtid_next ANONYMOUS (anonymous
    transactions are test_gtid_mode_switched's, in the permissive modes)."""
    import pymysql
    with pytest.raises(pymysql.err.OperationalError, match="cannot be set to ANONYMOUS"):
        srv.sql("SET gtid_next = 'ANONYMOUS'")
