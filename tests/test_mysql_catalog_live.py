"""The MySQL catalog on binlogs the live MySQL 9.7 writes, with a second,
private 9.7 (``tools.mysql97.PrivateMySQL97``: its own datadir and
server_uuid, started and removed by the fixture, about 10 s) for what one
server cannot write:

* a failover: the second server takes the first's executed set (``SET
  GLOBAL GTID_PURGED``, as a replica promoted has it) and writes its own
  transactions: its files continue the first's history, a new UUID in them;
* a name reused: a fresh server's ``binlog.00000N`` written under names the
  archive already had (what uploading its binlogs to the same prefix does):
  its files do not chain, another history.

Oracles: each file's Previous_gtids as the server lists it (``SHOW BINLOG
EVENTS``), the set after the last file as the next file's Previous_gtids,
the server's ``GTID_SUBSET`` / ``GTID_SUBTRACT``, and the transactions'
``original_commit_timestamp`` as ``mysqlbinlog`` prints them for ``seek
--time``."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

import gtidx
from gtidx.mysqlgtid import GtidSet
from gtidx.series.mysql import MysqlSeries

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the MySQL 9.7 root needs root")
DB = "gtidx_mycat_live"


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gtidx", *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def _rounds(srv, rounds: int, rows: int) -> list[str]:
    """``rounds`` binlogs of ``rows`` transactions each, closed (FLUSH): their names."""
    names = []
    with srv.connect() as c, c.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS {DB}")
        cur.execute(f"CREATE TABLE IF NOT EXISTS {DB}.t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(64))")
        cur.execute("FLUSH BINARY LOGS")
        for _ in range(rounds):
            cur.execute("SHOW BINARY LOG STATUS")
            names.append(cur.fetchone()[0])
            for i in range(rows):
                cur.execute(f"INSERT INTO {DB}.t (v) VALUES (%s)", (f"row {i}",))
            cur.execute("FLUSH BINARY LOGS")
    return names


def _previous(srv, name: str) -> str:
    """The Previous_gtids of ``name`` as the server lists it, on one line."""
    rows = srv.sql(f"SHOW BINLOG EVENTS IN '{name}' LIMIT 2")
    assert rows[1][2] == "Previous_gtids", rows
    return srv.sql("SELECT GTID_SUBTRACT(%s, '')", (rows[1][5],))[0][0].replace(",\n", ",")


def _stamps(srv, path: Path) -> list[tuple[str, int]]:
    """(GTID, original_commit_timestamp in microseconds) of each transaction, as mysqlbinlog prints them."""
    with open(path, "rb") as f:             # the root's mysqlbinlog, the file on its stdin
        out = subprocess.run(["chroot", str(srv.root), "mysqlbinlog", "-"], stdin=f, capture_output=True,
                             text=True, check=True)
    stamps = [int(x) for x in re.findall(r"^# original_commit_timestamp=(\d+)", out.stdout, re.M)]
    gtids = re.findall(r"SET @@SESSION.GTID_NEXT= '([0-9a-f-]{36}:[^']+)'", out.stdout)
    assert len(gtids) == len(stamps), (len(gtids), len(stamps))
    return list(zip(gtids, stamps))


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    from tools.mysql97 import MySQL97, PrivateMySQL97
    srv = MySQL97().ensure()
    base = tmp_path_factory.mktemp("mycat")
    names = _rounds(srv, 4, 5)
    shared = {n: _previous(srv, n) for n in names}
    after = _previous(srv, srv.sql("SHOW BINARY LOG STATUS")[0][0])     # the set after the last of them
    other = PrivateMySQL97(f"gtidx-mycat-{os.getpid()}")
    try:
        other.start()
        fresh = _rounds(other, 2, 3)                   # a fresh server's first binlogs
        fresh_prev = {n: _previous(other, n) for n in fresh}
        reused = base / "reused"                       # a fresh server's first binlogs under the first's names
        reused.mkdir()
        for n in names:
            shutil.copy(srv.datadir / n, reused / n)
        for n, m in zip(fresh, names):
            shutil.copy(other.datadir / n, reused / m)
        other.sql("RESET BINARY LOGS AND GTIDS")       # the private server only: it takes the first's set
        other.sql("SET GLOBAL GTID_PURGED = %s", (after,))
        promoted = _rounds(other, 2, 3)
        promoted_prev = {n: _previous(other, n) for n in promoted}
        other_after = _previous(other, other.sql("SHOW BINARY LOG STATUS")[0][0])
        uuid = other.sql("SELECT @@server_uuid")[0][0]
        # does the second server's first binlog continue the first's history? the server says (9.7 writes
        # Previous_gtids without a set given by SET GTID_PURGED: then it does not)
        subset = other.sql("SELECT GTID_SUBSET(%s, %s)", (after, promoted_prev[promoted[0]]))[0][0]
        # the first's files, then the second's, named after the first's last
        failover = base / "failover"
        failover.mkdir()
        last = int(names[-1].rsplit(".", 1)[1])
        for n in names:
            shutil.copy(srv.datadir / n, failover / n)
        later = {}
        for i, n in enumerate(promoted):
            later[f"binlog.{last + 1 + i:06d}"] = n
            shutil.copy(other.datadir / n, failover / f"binlog.{last + 1 + i:06d}")
        stamps = {p.name: _stamps(srv, p) for p in sorted(failover.glob("binlog.0*"))}
    finally:
        other.stop()
    yield {"srv": srv, "names": names, "shared": shared, "after": after, "fresh": fresh, "fresh_prev": fresh_prev,
           "promoted": later, "promoted_prev": promoted_prev, "other_after": other_after, "uuid": uuid,
           "subset": subset, "failover": failover, "reused": reused, "stamps": stamps}


def test_a_second_server_after_the_first(live):
    """The first server's files, then those of a second server given the
    first's executed set (``SET GTID_PURGED``, as a server restored from a
    backup is) writing its own transactions (a new UUID): every entry's
    Previous_gtids the server's, each end set the next file's Previous_gtids
    (within a server); the histories as the server's ``GTID_SUBSET`` of the
    first's set in the second's first Previous_gtids says (one when it
    holds it, else two); lookups of either server's GTIDs, with and without
    the catalog, agree (within each history)."""
    d = live["failover"]
    r = _cli("catalog", "build", "--json", str(d))
    assert r.returncode == 0, r.stderr
    histories = 1 if live["subset"] == 1 else 2
    assert json.loads(r.stdout)["histories"] == histories
    raw = json.loads(_cli("catalog", "show", "--json", str(d)).stdout)
    want_prev = {**live["shared"], **{k: live["promoted_prev"][v] for k, v in live["promoted"].items()}}
    files = raw["files"]
    assert [e["name"] for e in files] == sorted(want_prev)
    ends = {**{n: live["shared"][m] for n, m in zip(live["names"], live["names"][1:])},
            live["names"][-1]: live["after"]}
    second = sorted(live["promoted"])
    ends.update({n: want_prev[m] for n, m in zip(second, second[1:])})
    ends[second[-1]] = live["other_after"]
    for e in files:
        assert e["start_state"] == want_prev[e["name"]], e["name"]
        assert e["end_state"] == ends[e["name"]], e["name"]
        assert (live["uuid"] in e["uuids"]) == (e["name"] in live["promoted"]), e["name"]
        assert e["history"] == (1 if histories == 1 or e["name"] not in live["promoted"] else 2)
    assert all(h["gaps"] == [] for h in raw["histories"]) and raw["histories"][-1]["end_state"] == live["other_after"]
    plain = d.parent / "failover-plain"
    shutil.copytree(d, plain)
    (plain / "gtidx-catalog.json").unlink()
    for h in range(1, histories + 1):
        mine = [n for n in sorted(want_prev) if (n in live["promoted"]) == (h == 2 or histories == 1 and
                                                                            n in live["promoted"])]
        gtids = [g for n in mine for g, _ in live["stamps"][n]]
        with gtidx.open(str(d), history=h) as a, MysqlSeries([str(plain / n) for n in mine]) as b:
            assert a.end_set() == b.end_set()
            for g in gtids:
                x, y = a.locate(g), b.locate(g)
                assert (Path(x.file).name, x.start, x.end) == (Path(y.file).name, y.start, y.end), g
            s = b.end_set().one_line()
            x, y = a.replica_start(s), b.replica_start(s)
            assert (Path(x.file).name, x.state, x.first and x.first.gtid) == \
                (Path(y.file).name, y.state, y.first and y.first.gtid)


def test_seek_time_against_mysqlbinlog(live):
    """``seek --time`` at every transaction's microsecond (and one after):
    the first transaction at or after it, by the timestamps mysqlbinlog
    prints, and the set before it, over the first server's files (a
    history of the catalog: ``--history 1``; over both histories, when the
    second does not chain, exit 2)."""
    d = live["failover"]
    cat, _ = gtidx.build_catalog(str(d))
    order = [(n, g, us) for n in live["names"] for g, us in live["stamps"][n]]
    assert len(order) >= 4 * 5                      # the inserts (other sessions may have written too)
    if len(cat.histories) > 1:
        r = _cli("seek", "--time", "@0", str(d))
        assert r.returncode == 2 and "2 histories" in r.stderr, r.stderr
    r = _cli("seek", "--json", "--history", "1", "--time", "@0", str(d))
    assert r.returncode == 0 and json.loads(r.stdout)["gtid"] == order[0][1], r.stderr
    logs = gtidx.open(str(d), history=1)
    for _, _, us in order[::2] + order[-1:]:
        for t in (us, us + 1):
            when = f"@{t // 10**6}.{t % 10**6:06d}"
            first = next(((n, g) for n, g, u in order if u // 10**6 >= -(-t // 10**6)), None)
            p = logs.at_time(when)
            got = {"file": p.file, "gtid": None if p.gtid is None else str(p.gtid), "position": str(p.position)}
            if first is None:
                assert got["gtid"] is None
            else:
                assert (Path(got["file"]).name, got["gtid"]) == first, (when, got)
                before = [g for n, g, _ in order[:order.index((*first, next(u for n, g, u in order
                                                                              if (n, g) == first)))]]
                have = GtidSet.parse(live["shared"][order[0][0]])
                for g in before:
                    have |= GtidSet.parse(g)
                assert GtidSet.parse(got["position"]) == have, when
    logs.close()


def test_a_name_reused_by_a_fresh_server_is_another_history(live):
    """A fresh server's first binlogs written under two of the archive's
    names: those files are history 1 (their own chain, from the fresh
    server's empty set), the first server's later files history 2; a lookup
    across both is refused without --history and answered within one."""
    d = live["reused"]
    cat, _ = gtidx.build_catalog(str(d))
    names = live["names"]
    assert [(h["first"], h["last"], h["files"]) for h in cat.histories] == [
        (names[0], names[1], 2), (names[2], names[3], 2)]
    assert [e["start_state"] for e in cat.files[:2]] == [live["fresh_prev"][n] for n in live["fresh"]]
    g = f"{live['uuid']}:4"                     # in the fresh server's second binlog (its first: the DDL)
    r = _cli("seek", "--gtid", g, str(d))
    assert r.returncode == 2 and "2 histories" in r.stderr, r.stderr
    r = _cli("seek", "--json", "--history", "1", "--gtid", g, str(d))
    assert r.returncode == 0 and Path(json.loads(r.stdout)["file"]).name in names[:2], r.stderr
    r = _cli("seek", "--history", "2", "--gtid", g, str(d))
    assert r.returncode == 1, r.stderr
