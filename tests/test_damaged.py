"""Damaged binlogs in a directory: a closed binlog cut short says so (issue 11
item 4), and one damaged newest binlog fails only the lookups that need it
(issue 11 item 10, the lookup half)."""
from __future__ import annotations

import json
import logging
import os
import shutil

import pytest
from click.testing import CliRunner

from conftest import FIXTURES
from gtidx import api
from gtidx.binlog.mariadb import Binlog
from gtidx.cli import cli
from gtidx.errors import CorruptBinlogError, GtidxError, NotFoundError
from gtidx.index.build import build_index

M1011 = FIXTURES / "mariadb-10.11"
MULTI = M1011 / "multifile"
NEXT = M1011 / "manydomains" / "master-bin.000024"     # the binlog the same server wrote after them
ENCRYPTED = M1011 / "encrypted" / "master-bin.000002"


def _group_cut(path) -> int:
    """An event boundary inside a multi-event group near the middle."""
    with Binlog(path) as b:
        heads = [off for off, _, _, _ in b.headers()]
        g = list(b.groups())[len(list(b.groups())) // 2]
    return next(off for off in heads if g.start < off < g.end)


DAMAGES = {
    "empty": lambda: b"",
    "fde cut": lambda: NEXT.read_bytes()[:60],
    "cut mid-event": lambda: NEXT.read_bytes()[:NEXT.stat().st_size // 2 + 3],
    "cut inside a group": lambda: NEXT.read_bytes()[:_group_cut(NEXT)],
    "encrypted": lambda: ENCRYPTED.read_bytes(),
}


def _directory(tmp_path, damage: str | None, index: bool = False):
    d = tmp_path / "binlogs"
    d.mkdir(parents=True)
    for f in sorted(MULTI.glob("master-bin.0*")):
        shutil.copyfile(f, d / f.name)
        if index:
            build_index(d / f.name, page_size=512, span_min=2048, max_ratio=None)
    (d / NEXT.name).write_bytes(NEXT.read_bytes() if damage is None else DAMAGES[damage]())
    names = sorted(p.name for p in d.iterdir() if p.name[-6:].isdigit())
    (d / "master-bin.index").write_text("".join(f"./{n}\n" for n in names))
    return d


def _oracle_groups():
    o = json.loads((MULTI / "oracle.json").read_text())
    return [(f["name"], g, s, e) for f in o["files"] for g, s, e in f["groups"]]


@pytest.mark.parametrize("index", [False, True], ids=["scan", "index"])
@pytest.mark.parametrize("damage", list(DAMAGES))
def test_damaged_newest_binlog_fails_only_the_lookups_that_need_it(tmp_path, caplog, damage, index):
    d = _directory(tmp_path, damage, index)
    intact = _directory(tmp_path / "intact", None)
    caplog.set_level(logging.WARNING, logger="gtidx")
    with api.open_binlogs(d) as logs:
        for name, g, start, end in _oracle_groups()[::9]:
            loc = logs.locate(g)
            assert (os.path.basename(loc.file), loc.start, loc.end) == (name, start, end)
        assert any(NEXT.name in r.getMessage() for r in caplog.records)     # the damage is said
        # a GTID only the damaged file could hold: its error, not "never written"
        with pytest.raises(GtidxError) as e:
            logs.locate("0-1-99999999")
        assert not isinstance(e.value, NotFoundError) and e.value.path.endswith(NEXT.name)
        with pytest.raises(NotFoundError, match="purged"):
            logs.locate("0-1-1")
        # a replica whose first group is in an intact file starts as with the intact directory
        f20 = str(d / "master-bin.000020")
        pos = str(logs.state_at(f20, _some_group_end(f20)).position)
        with api.open_binlogs(intact) as good:
            expected = good.replica_start(pos)
        r = logs.replica_start(pos)
        assert (os.path.basename(r.file), r.first and r.first.gtid, r.first and r.first.start) == \
            (os.path.basename(expected.file), expected.first and expected.first.gtid,
             expected.first and expected.first.start)
        # a replica that is up to date needs the newest binlog
        with api.open_binlogs(intact) as good:
            newest = str(good.end_state().position())
        with pytest.raises(GtidxError) as e:
            logs.replica_start(newest)
        assert e.value.path.endswith(NEXT.name)


def _some_group_end(path) -> int:
    with Binlog(path) as b:
        return list(b.groups())[20].end


def test_seek_cli_answers_beside_a_damaged_newest_binlog(tmp_path):
    d = _directory(tmp_path, "cut inside a group")
    name, g, start, end = _oracle_groups()[100]
    r = CliRunner().invoke(cli, ["seek", "--gtid", g, str(d)])
    assert r.exit_code == 0, r.output
    assert f"{name} start {start} end {end}" in r.stdout
    assert "warning" in r.stderr and NEXT.name in r.stderr and "truncated" in r.stderr
    r = CliRunner().invoke(cli, ["seek", "--gtid", "0-1-99999999", str(d)])
    assert r.exit_code == 3 and "truncated" in r.stderr


# -- a closed binlog cut inside a transaction ---------------------------------------------------------

def test_closed_binlog_cut_inside_a_group_end_to_end(tmp_path):
    """scan lists the complete groups then fails (exit 3, path and offset);
    state_at answers before the cut and refuses the cut end; locate answers
    GTIDs before the cut and fails on the cut one; build writes no index."""
    src = M1011 / "mixed" / "master-bin.000002"
    cut = _group_cut(src)
    p = tmp_path / src.name
    p.write_bytes(src.read_bytes()[:cut])
    with Binlog(src) as b:
        groups = list(b.groups())
    before = [g for g in groups if g.end < cut]
    cut_group = next(g for g in groups if g.start < cut < g.end)

    r = CliRunner().invoke(cli, ["scan", str(p)])
    assert r.exit_code == 3
    assert "truncated" in r.stderr and str(p) in r.stderr and f"offset {cut}" in r.stderr
    assert str(before[-1].gtid) in r.stdout and f"{cut_group.gtid} " not in r.stdout

    with api.BinlogSeries([str(p)]) as logs:
        assert logs.state_at(p, before[-1].end).position is not None
        with pytest.raises(CorruptBinlogError, match="truncated"):
            logs.state_at(p, cut)
        loc = logs.locate(str(before[3].gtid))
        assert (loc.start, loc.end) == (before[3].start, before[3].end)
        with pytest.raises(CorruptBinlogError, match="truncated"):
            logs.locate(str(cut_group.gtid))
    with pytest.raises(CorruptBinlogError, match="truncated"):
        build_index(p, max_ratio=None)
    assert not os.path.exists(str(p) + ".idx")
    r = CliRunner().invoke(cli, ["pos", str(p), str(cut)])
    assert r.exit_code == 3 and "truncated" in r.stderr


def test_spark_locate_beside_a_damaged_newest_binlog(spark, tmp_path):
    """Spark's planning reads every file's summary: a damaged newest binlog
    fails only the rows that need it (with its error as the reason)."""
    gs = pytest.importorskip("gtidx.spark")
    d = _directory(tmp_path, "cut inside a group")
    groups = _oracle_groups()[::25]
    values = [g for _, g, _, _ in groups] + ["0-1-99999999"]
    df = spark.createDataFrame([(v,) for v in values], "gtid string")
    for per_byte in (1.0, 1e-12):
        rows = {r.gtid: r for r in gs.locate(spark, df, str(d), pass_per_byte=per_byte).collect()}
        for name, g, start, end in groups:
            r = rows[g]
            assert r.found and (os.path.basename(r.file), r.start, r.end) == (name, start, end)
        bad = rows["0-1-99999999"]
        assert not bad.found and "truncated" in bad.reason and NEXT.name in bad.reason
