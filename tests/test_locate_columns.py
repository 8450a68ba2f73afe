"""``gtidx.spark.locate_columns``: ``BinlogSeries.locate_many``'s pass for columns of
GTIDs (Spark's per-file tasks). Every GTID it answers is answered as
``locate`` and ``locate_many`` answer it (file, start, end, timestamp),
also where GTIDs repeat, are absent, or their (domain, server) went down
(nonmono: left to ``locate``); the same with and without the compiled
group walk; a file it cannot walk is left to ``locate_many``."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from gtidx import api
from gtidx.binlog import mariadb as binlog
from gtidx.binlog import walk
from gtidx.binlog.mariadb import Binlog
from gtidx.gtid import Gtid

from conftest import FIXTURES
import gtidx.spark as gs  # noqa: E402  (pyspark: the spark extra)

SETS = [(v, s) for v in ("mariadb-10.11", "mariadb-11.8")
        for s in ("multifile", "nonmono", "mixed", "manydomains", "bigtrx", "xa")
        if (FIXTURES / v / s).is_dir()]


PASS = 1e-9          # GTIDs per byte from which a file is passed over: any number here


def _wanted(files) -> list[Gtid]:
    """Every GTID the files log, some twice, and some they do not."""
    out = []
    for f in files:
        with Binlog(f) as b:
            out += [Gtid(d, s, q) for _, _, (_, s, q, d, _) in b.group_spans()]
    extra = [Gtid(g.domain, g.server, g.seq + 10**6) for g in out[::7]] + [Gtid(g.domain, g.server + 1, g.seq)
                                                                           for g in out[::11]]
    return out + out[::3] + extra + [Gtid(77, 1, 1), Gtid(0, 1, 2**64 - 2)]


def _columns(logs, wanted, per_byte):
    return gs.locate_columns(logs, [g.domain for g in wanted], [g.server for g in wanted],
                             [g.seq for g in wanted], pass_per_byte=per_byte)


@pytest.mark.parametrize("version,name", SETS, ids=[f"{v}/{s}" for v, s in SETS])
def test_locate_columns_answers_as_locate(tmp_path, version, name):
    d = tmp_path / name
    shutil.copytree(FIXTURES / version / name, d)
    files = api.list_binlogs(d)
    wanted = _wanted(files)
    with api.BinlogSeries(files) as logs:
        file, start, end, ts = _columns(logs, wanted, PASS)
        answered = np.flatnonzero(file >= 0)
        for k in answered:
            loc = logs.locate(wanted[k])
            assert (logs.files[file[k]], start[k], end[k], ts[k]) == (loc.file, loc.start, loc.end, loc.timestamp)
        many = logs.locate_many(wanted, pass_per_byte=PASS)
        for k in answered:
            r = many[wanted[k]]
            assert (r.file, r.start, r.end, r.timestamp) == (logs.files[file[k]], start[k], end[k], ts[k])
    if name == "multifile":
        assert len(answered) > len(wanted) // 2
    with api.BinlogSeries(files) as logs:
        few = _columns(logs, wanted, 1.0)          # never a GTID per byte: none by a pass
        assert (few[0] < 0).all()


def test_locate_columns_without_the_compiled_walk(tmp_path, monkeypatch):
    d = tmp_path / "multifile"
    shutil.copytree(FIXTURES / "mariadb-10.11" / "multifile", d)
    files = api.list_binlogs(d)
    wanted = _wanted(files)
    with api.BinlogSeries(files) as logs:
        compiled = _columns(logs, wanted, PASS)
    monkeypatch.setattr(walk, "_groups", None)
    with api.BinlogSeries(files) as logs:
        pure = _columns(logs, wanted, PASS)
    for a, b in zip(compiled, pure):
        assert (a == b).all()


def test_locate_columns_leaves_a_damaged_file_to_locate(tmp_path):
    """A file its pass cannot walk: its GTIDs are left (-1) for
    ``locate_many``, which says what failed, GTID by GTID."""
    d = tmp_path / "multifile"
    shutil.copytree(FIXTURES / "mariadb-10.11" / "multifile", d)
    files = api.list_binlogs(d)
    wanted = _wanted(files)
    with api.BinlogSeries(files) as logs:
        whole = _columns(logs, wanted, PASS)[0]
    assert (whole == 1).any()
    victim = files[1]
    data = bytearray(open(victim, "rb").read())
    with Binlog(victim) as b:
        spans = list(b.group_spans())
    at = spans[len(spans) // 2][0]
    data[at + 9:at + 13] = (3).to_bytes(4, "little")        # a GTID event of length 3
    open(victim, "wb").write(bytes(data))
    with api.BinlogSeries(files) as logs:
        file = _columns(logs, wanted, PASS)[0]
    assert not (file == 1).any()
    assert ((file >= 0) == ((whole >= 0) & (whole != 1))).all()
