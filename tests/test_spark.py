"""Spark batch lookups: every row equals the library's answer."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT
from gtidx import api
from gtidx.binlog import Binlog
from gtidx.errors import NotFoundError
from gtidx.indexfile import build_index

import gtidx.spark as gs  # noqa: E402  (pyspark: the spark extra, installed by the Quickstart)


@pytest.fixture(scope="module")
def spark():
    session = gs.session("local[2]", app="gtidx-tests")
    yield session
    session.stop()


def copy_set(tmp_path: Path, scenario: Path, build: bool) -> Path:
    d = tmp_path / f"{scenario.parent.name}-{scenario.name}"
    shutil.copytree(scenario, d)
    for p in d.iterdir():
        p.chmod(0o644)
    if build:
        for f in api.list_binlogs(d):
            build_index(f, page_size=256, span_min=4096, max_ratio=None, force=True)
    return d


def probes(d: Path) -> list[str]:
    """Every GTID of the set, several not in it (never written, purged, a gap),
    a malformed one, duplicates, and replica positions."""
    values = []
    for f in api.list_binlogs(d):
        with Binlog(f) as b:
            values += [str(g.gtid) for g in b.groups()]
    with api.open_binlogs(d) as logs:
        first = logs.start_state(logs.files[0])
        latest = logs.end_state()
        mid = logs.state_at(logs.files[len(logs.files) // 2], os.path.getsize(logs.files[len(logs.files) // 2]))
    last = latest.last(latest.domains()[0])
    values += [f"{last.domain}-{last.server}-{last.seq + 5}", "77-1-1", "0-1-"]          # never, never, bad
    early = first.last(first.domains()[0])
    if early and early.seq > 1:
        values.append(f"{early.domain}-{early.server}-{early.seq - 1}")                 # purged
    values += values[:5]                                                                 # duplicates
    values += [str(mid.position), str(first.position), str(latest.position)]            # positions
    return values


def library_row(logs: api.BinlogSeries, value: str):
    try:
        if "," in value:
            r = logs.replica_start(value)
            first = r.first
            return (r.file, r.offset, None, first.start if first and first.file == r.file else None,
                    first.timestamp if first else None, str(first.gtid) if first else None, True)
        loc = logs.locate(value)
        return (loc.file, loc.start, loc.end, loc.resume, loc.timestamp, None, True)
    except Exception as e:      # NotFoundError, GtidSyntaxError
        assert isinstance(e, (NotFoundError,)) or "bad GTID" in str(e), e
        return (None, None, None, None, None, None, False)


SETS = [(FIXTURES / "mariadb-10.11" / "multifile", True), (FIXTURES / "mariadb-10.11" / "nonmono", True),
        (FIXTURES / "mariadb-10.11" / "xa", False), (FIXTURES / "mariadb-11.8" / "multifile", False)]


@pytest.mark.parametrize("scenario, build", SETS, ids=lambda v: v.name if isinstance(v, Path) else str(v))
@pytest.mark.parametrize("strategy", ["pass", "index"])
def test_locate_equals_the_library_row_by_row(spark, tmp_path, scenario, build, strategy):
    d = copy_set(tmp_path, scenario, build)
    values = probes(d)
    df = spark.createDataFrame([(v,) for v in values], "gtid string")
    per_byte = 1.0 if strategy == "pass" else 1e-12    # 1.0: always a pass; ~0: always the index
    rows = gs.locate(spark, df, str(d), pass_per_byte=per_byte).collect()
    assert len(rows) == len(values)
    with api.open_binlogs(d) as logs:
        for r in rows:
            mine = (r.file, r.start, r.end, r.resume, r.timestamp, r.first_gtid, r.found)
            assert mine == library_row(logs, r.gtid), r.gtid
            assert r.found or r.reason
    assert sum(r.found for r in rows) >= len(values) - 10
    assert sum(not r.found for r in rows) >= 3


def test_build_one_task_per_file(spark, tmp_path):
    d = copy_set(tmp_path, FIXTURES / "mariadb-10.11" / "multifile", build=False)
    rows = gs.build(spark, str(d), max_ratio=None).collect()
    assert [r.action for r in rows] == ["built"] * 5 and all(r.records >= 1 for r in rows)
    assert [r.action for r in gs.build(spark, str(d), max_ratio=None).collect()] == ["skipped"] * 5
    for f in api.list_binlogs(d):
        api.verify(f + ".idx")


def test_data_source_lists_every_group_and_pushes_filters(spark, tmp_path):
    d = copy_set(tmp_path, FIXTURES / "mariadb-10.11" / "multifile", build=False)
    oracle = json.loads((d / "oracle.json").read_text())
    expected = [(f["name"], g, s, e) for f in oracle["files"] for g, s, e in f["groups"]]
    df = spark.read.format("gtidx").load(str(d))
    got = [(r.file, r.gtid, r.start, r.end) for r in df.orderBy("file", "start").collect()]
    assert got == expected
    one = df.filter("file = 'master-bin.000020'")
    plan = one._jdf.queryExecution().executedPlan().toString()
    assert "master-bin.000020" not in plan.split("BatchScan")[0]     # the source applied it, not Spark
    assert one.rdd.getNumPartitions() == 1                            # one file read, not five
    assert {r.file for r in one.collect()} == {"master-bin.000020"}
    dom = df.filter("domain IN (1, 2)").collect()
    assert dom and {r.domain for r in dom} <= {1, 2}
    assert len(dom) == sum(1 for _, g, _, _ in expected if g.split("-")[0] in ("1", "2"))
    row = df.filter("file = 'master-bin.000018'").orderBy("start").first()
    assert (row.domain, row.server, int(row.seq)) == tuple(int(x) for x in row.gtid.split("-"))


@pytest.mark.parametrize("kind", ["txt", "csv", "parquet"])
def test_cli_spark_locate(spark, tmp_path, kind):
    d = copy_set(tmp_path, FIXTURES / "mariadb-10.11" / "multifile", build=True)
    values = probes(d)[:200] + ["0-1-99999999"]
    src = tmp_path / f"gtids.{kind}"
    if kind == "txt":
        src.write_text("\n".join(values) + "\n")
    elif kind == "csv":
        src.write_text("gtid\n" + "\n".join(f'"{v}"' for v in values) + "\n")
    else:
        spark.createDataFrame([(v,) for v in values], "gtid string").write.parquet(str(src))
    out = tmp_path / "out.parquet"
    p = subprocess.run([sys.executable, "-m", "gtidx", "spark", "locate", "--gtids", str(src),
                        "--binlogs", str(d), "--out", str(out), "--master", "local[2]"],
                       capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    assert f"{len(values)} rows" in p.stdout
    rows = spark.read.parquet(str(out)).collect()
    assert len(rows) == len(values) and not [r for r in rows if r.gtid == "0-1-99999999"][0].found


def test_cli_spark_build(tmp_path):
    d = copy_set(tmp_path, FIXTURES / "mariadb-10.11" / "multifile", build=False)
    p = subprocess.run([sys.executable, "-m", "gtidx", "spark", "build", str(d), "--json", "--master", "local[2]"],
                       capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    assert [r["action"] for r in json.loads(p.stdout)["results"]] == ["built"] * 5
