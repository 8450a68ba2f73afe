"""Spark batch lookups: every row equals the library's answer."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FIXTURES, ROOT, copy_set, count_listings
from gtidx import admin, api
from gtidx.binlog.mariadb import Binlog
from gtidx.cli import cli
from gtidx.errors import NotFoundError

import gtidx.spark as gs  # noqa: E402  (pyspark: the spark extra, installed by the Quickstart)
from gtidx.spark.plan import Plan, summary  # noqa: E402
from gtidx.spark.shuffle import pack, partition_codes, per_file, spark_hash_int  # noqa: E402
from gtidx.spark.where import Where  # noqa: E402


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


def test_locate_lists_the_binlogs_once_on_the_driver(spark, tmp_path, monkeypatch):
    """The driver lists once (the flavor, the catalog's series and the plan
    share that listing); a Listing given is not listed again. The timings
    are the planning's and the tasks'."""
    d = copy_set(tmp_path, FIXTURES / "mariadb-10.11" / "multifile", build=True)
    admin.build_catalog(str(d))
    values = probes(d)[:40]
    df = spark.createDataFrame([(v,) for v in values], "gtid string")
    listed = count_listings(monkeypatch)
    timings: dict = {}
    rows = gs.locate(spark, df, str(d), timings=timings).collect()
    assert listed == [str(d)]
    assert timings["planning_read"] == 0 and timings["files_touched"].value >= 1
    listing = api.list_series(str(d))
    listed.clear()
    again = gs.locate(spark, df, listing).collect()
    assert listed == []
    assert sorted(rows) == sorted(again) and len(rows) == len(values)


def test_locate_refuses_what_the_library_refuses(spark, tmp_path):
    """Text that ``locate`` does not take for a GTID (spaces, empty, seq_no
    0) is a row not found, as the library says, not a failed job; zeros in
    front and a seq_no beyond a signed long are GTIDs."""
    d = copy_set(tmp_path, FIXTURES / "mariadb-10.11" / "multifile", build=True)
    with api.open_binlogs(d) as logs:
        g = logs.end_state().last(0)
    values = [f" {g}", f"{g} ", "", " ", "0-1-0", f"00{g.domain}-0{g.server}-000{g.seq}",
              f"{g.domain}-{g.server}-18446744073709551615", f"{g.domain}-{g.server}-9223372036854775808",
              str(g)] * 2
    df = spark.createDataFrame([(v,) for v in values], "gtid string")
    rows = gs.locate(spark, df, str(d), pass_per_byte=1.0).collect()
    assert sorted(r.gtid for r in rows) == sorted(values)
    with api.open_binlogs(d) as logs:
        for r in rows:
            assert (r.file, r.start, r.end, r.resume, r.timestamp, r.first_gtid, r.found) == \
                library_row(logs, r.gtid), r.gtid
            assert r.found or r.reason
    assert sum(r.found for r in rows) == 4


def test_the_plan_teaches_every_file_and_tabulates_the_planner(tmp_path):
    """What each Spark task is taught leaves ``locate_many`` nothing to
    learn (no walk, though these files have no index to store their ranges);
    the plan's tables (``api.PlanTable``: how each input batch is assigned)
    answer as ``Planner.plan`` for every seq_no, also where a pair went down
    (nonmono) or files are unknown."""
    import random
    for name in ("multifile", "nonmono"):
        d = copy_set(tmp_path / name, FIXTURES / "mariadb-10.11" / name, build=False)
        files = api.list_binlogs(d)
        summaries = [summary(f, f == files[-1], Where()) for f in files]
        plan = Plan(files, [s[1] for s in summaries], summaries[-1][2], [s[3] for s in summaries])
        with api.BinlogSeries(files) as logs:
            plan.share(logs)
            assert not logs.learn(logs.files)
        for key in plan._per_pair():
            table = plan._table(key)
            planner = api.Planner([st.get(*key) for st in plan._states()[0] + [plan._states()[1]]])
            dipped, ranges = plan._per_pair()[key]
            for n in range(0, max(table.points) + 3):
                assert table.plan(n) == planner.plan(n, dipped, {i: ranges.get(i) for i in range(len(files))})
    rnd = random.Random(16)
    for _ in range(300):
        count = rnd.randint(1, 6)
        bounds = [rnd.choice([None, api.UNKNOWN, rnd.randint(0, 40)]) for _ in range(count + 1)]
        if rnd.random() < 0.6:
            bounds = sorted((b for b in bounds if b not in (None, api.UNKNOWN)), key=int) or bounds
        planner = api.Planner(bounds)
        count = len(bounds) - 1
        dipped = {i for i in range(count) if rnd.random() < 0.2}
        ranges = {}
        for i in range(count):
            if rnd.random() < 0.5:
                lo = rnd.randint(1, 40)
                ranges[i] = rnd.choice([None, (lo, lo + rnd.randint(0, 10))])
        table = planner.table(dipped, ranges)
        for n in range(0, 60):
            assert table.plan(n) == planner.plan(n, dipped, ranges), (bounds, dipped, ranges, n)


_PLANS = {}


def _fixture_plan(name: str):
    """A _Plan of a bundled fixture set (read in place: nothing is written)."""
    if name not in _PLANS:
        files = api.list_binlogs(FIXTURES / "mariadb-10.11" / name)
        summaries = [summary(f, f == files[-1], Where()) for f in files]
        _PLANS[name] = Plan(files, [s[1] for s in summaries], summaries[-1][2], [s[3] for s in summaries])
    return _PLANS[name]


_NUMBER = st.one_of(st.integers(0, 12), st.integers(0, 2**64 + 5), st.sampled_from([2**32 - 1, 2**32, 2**63 - 1,
                                                                                     2**63, 2**64 - 1]))
_VALUE = st.one_of(
    st.none(),
    st.builds(lambda d, s, n: f"{d}-{s}-{n}", _NUMBER, _NUMBER, _NUMBER),
    st.builds(lambda d, s, n: f"{d}-{s}-{n}", st.integers(0, 3), st.integers(1, 3), st.integers(0, 700)),
    st.builds(lambda a, b: f"{a},{b}", st.sampled_from(["0-1-5", "1-1-30", "0-2-1"]), st.sampled_from(["1-2-3", "2-1-9"])),
    st.text(alphabet="0123456789-, x", max_size=14))


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["multifile", "nonmono"]), st.lists(_VALUE, max_size=60), st.booleans())
def test_assign_batch_equals_assign_row_by_row(name, values, coded):
    """The planner of input batches (numpy over the plain ``D-S-N`` values,
    the rest one by one) gives each row what ``_Plan.assign`` gives it: the
    file (through ``codes``), the GTID's columns (null beyond a signed
    long, and for positions) and why no file answers it."""
    import pyarrow as pa
    plan = _fixture_plan(name)
    codes = [100 + 3 * i for i in range(len(plan.files))] if coded else None
    got = plan.assign_batch(pa.array(values, pa.string()), codes).to_pydict()
    assert got["gtid"] == values
    for i, v in enumerate(values):
        f, g, why = plan.assign(v)
        assert got["file"][i] == (None if f is None else codes[f] if coded else f), v
        assert got["reason"][i] == why, v
        small = g is not None and g.seq < 2**63
        assert (got["domain"][i], got["server"][i], got["seq"][i]) == \
            ((g.domain, g.server, g.seq) if small else (None, None, None)), v


def test_each_locate_task_gets_its_own_files(spark):
    """The codes locate gives files hash where Spark's hash partitioning puts
    them (Spark's own hash() compared): file i in task i % n, no task idle
    while another has two more."""
    from pyspark.sql import functions as F
    ks = list(range(-3, 2000)) + [2**31 - 1, -2**31]
    rows = spark.createDataFrame([(k,) for k in ks], "k int").select("k", F.hash("k").alias("h")).collect()
    assert {r.k: r.h for r in rows} == {k: spark_hash_int(k) for k in ks}
    for n, count in ((8, 18), (18, 18), (3, 2), (1, 5), (16, 1000)):
        codes = partition_codes(n, count)
        assert len(set(codes)) == count
        assert [spark_hash_int(c) % n for c in codes] == [i % n for i in range(count)]
    df = spark.createDataFrame([(c,) for c in partition_codes(8, 18)], "file int").repartition(8, "file")
    assert sorted(df.rdd.glom().map(len).collect()) == [2] * 6 + [3] * 2


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.tuples(st.one_of(st.none(), st.text(max_size=12)),
                                   st.one_of(st.none(), st.integers(-2**31, 2**31 - 1).filter(lambda c: c != -1),
                                             st.sampled_from([0, 1, 7]))),
                         max_size=40), max_size=5), st.randoms())
def test_locate_packs_each_partitions_values_per_file(parts, rnd):
    """locate's shuffle moves one row per (input partition, file): each
    partition's values packed per file code (null: no file), and each task
    gets every value of its files back, a file's values in input order
    within each partition, each file answered once."""
    import pyarrow as pa
    packed = []
    for rows in parts:
        values = pa.array([v for v, _ in rows], pa.string())
        codes = pa.array([c for _, c in rows], pa.int32())
        b = pack(pa.record_batch([values, codes], names=["gtid", "file"]), codes)
        assert b.schema.names == ["file", "rows"] and len(b) == len({c for _, c in rows})
        packed += [b.slice(i, 1) for i in range(len(b))]
    rnd.shuffle(packed)                      # the partitions' rows reach the task in any order
    seen = {}

    def answer(key, table):
        code = key[0].as_py()
        assert code not in seen
        seen[code] = table.column("gtid").to_pylist()
        return table
    for _ in per_file(iter(packed), answer):
        pass
    expected = {}
    for rows in parts:
        for v, c in rows:
            expected.setdefault(c, []).append(v)
    assert {c: sorted(v, key=repr) for c, v in seen.items()} == {c: sorted(v, key=repr) for c, v in expected.items()}
    if len(parts) == 1:
        assert seen == expected


def test_build_one_task_per_file(spark, tmp_path):
    d = copy_set(tmp_path, FIXTURES / "mariadb-10.11" / "multifile", build=False)
    rows = gs.build(spark, str(d), max_ratio=None).collect()
    assert [r.action for r in rows] == ["built"] * 5 and all(r.records >= 1 for r in rows)
    assert [r.action for r in gs.build(spark, str(d), max_ratio=None).collect()] == ["skipped"] * 5
    for f in api.list_binlogs(d):
        admin.verify(f + ".idx")


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


def _gtids_file(spark, tmp_path, kind: str, values: list[str]) -> Path:
    src = tmp_path / f"gtids.{kind}"
    if kind == "txt":
        src.write_text("\n".join(values) + "\n")
    elif kind == "csv":
        src.write_text("gtid\n" + "\n".join(f'"{v}"' for v in values) + "\n")
    else:
        spark.createDataFrame([(v,) for v in values], "gtid string").write.parquet(str(src))
    return src


@pytest.mark.parametrize("kind", ["txt", "csv", "parquet"])
def test_spark_locate_reads_each_kind_of_gtids_file(spark, tmp_path, kind):
    """What ``gtidx spark locate`` reads from its --gtids file (``read_gtids``,
    by its kind) is every GTID, each located as the library does."""
    from gtidx.spark.run import read_gtids
    d = copy_set(tmp_path, FIXTURES / "mariadb-10.11" / "multifile", build=True)
    values = probes(d)[:200] + ["0-1-99999999"]
    gtids = read_gtids(spark, str(_gtids_file(spark, tmp_path, kind, values)))
    assert sorted(r.gtid for r in gtids.collect()) == sorted(values)
    rows = sorted((r.gtid, r.file and Path(r.file).name, r.start, r.end, r.resume, r.timestamp, r.first_gtid,
                   r.found) for r in gs.locate(spark, gtids, str(d)).collect())
    with api.open_binlogs(d) as logs:
        assert rows == _library_rows(logs, values)


def test_cli_spark_locate(spark, tmp_path):
    """The command end to end, in its own process and session (each kind of
    --gtids file is read by ``read_gtids``: the test above)."""
    d = copy_set(tmp_path, FIXTURES / "mariadb-10.11" / "multifile", build=True)
    values = probes(d)[:200] + ["0-1-99999999"]
    src = _gtids_file(spark, tmp_path, "csv", values)
    out = tmp_path / "out.parquet"
    p = subprocess.run([sys.executable, "-m", "gtidx", "spark", "locate", "--gtids", str(src),
                        "--binlogs", str(d), "--out", str(out), "--master", "local[2]"],
                       capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    assert f"{len(values)} rows" in p.stdout
    # indexed binlogs, nothing to warn about: nothing on stderr, none of the JVM's or Spark's
    # start-up notes (log4j profile, default level, incubator modules, native-hadoop)
    assert p.stderr == "", p.stderr
    rows = spark.read.parquet(str(out)).collect()
    assert len(rows) == len(values) and not [r for r in rows if r.gtid == "0-1-99999999"][0].found


def test_cli_spark_locate_says_a_warning_once(spark, tmp_path):
    """Binlogs without indexes: the executors' warnings (the summary job's and
    the answering tasks', one per file each) reach the driver (an accumulator)
    and the command says them once: one line, the files counted. Run in this
    process on the shared session (the command end to end in its own process
    is ``test_cli_spark_locate``): its stderr is all the command wrote, the
    driver JVM's lines included (they are forwarded to ``sys.stderr``)."""
    d = copy_set(tmp_path, FIXTURES / "mariadb-10.11" / "multifile", build=False)
    (tmp_path / "g.txt").write_text("0-2-432\n0-1-400\n")
    r = CliRunner().invoke(cli, ["spark", "locate", "--gtids", str(tmp_path / "g.txt"), "--binlogs", str(d),
                                 "--out", str(tmp_path / "o.parquet"), "--master", "local[2]"])
    assert r.exit_code == 0 and "2 rows, 2 found" in r.stdout, r.output[-2000:]
    assert r.stderr.splitlines() == [f"gtidx: warning: 5 binlogs, master-bin.000018 .. master-bin.000022 in {d}: "
                                     "no usable index (missing: no index file); answering by scan"], r.stderr
    assert spark.range(3).count() == 3              # the command left the session it did not start running


def test_cli_spark_build(spark, tmp_path):
    """``gtidx spark build --json``, in this process on the shared session
    (in its own process on a terminal: tests/test_progress.py)."""
    d = copy_set(tmp_path, FIXTURES / "mariadb-10.11" / "multifile", build=False)
    r = CliRunner().invoke(cli, ["spark", "build", str(d), "--json", "--master", "local[2]"])
    assert r.exit_code == 0, r.output[-2000:]
    assert [x["action"] for x in json.loads(r.stdout)["results"]] == ["built"] * 5
    assert spark.range(3).count() == 3


# -- the catalog (issue 13 item 4): planning from its entries --------------------------------------

def _rows(spark, d, values, **kw) -> list[tuple]:
    df = spark.createDataFrame([(v,) for v in values], "gtid string")
    rows = gs.locate(spark, df, str(d), **kw).collect()
    assert len(rows) == len(values)
    return sorted((r.gtid, r.file and Path(r.file).name, r.start, r.end, r.resume, r.timestamp, r.first_gtid,
                   r.found) for r in rows)


def _library_rows(logs, values) -> list[tuple]:
    out = []
    for v in values:
        f, *rest = library_row(logs, v)
        out.append((v, f and Path(f).name, *rest))
    return sorted(out)


def test_locate_with_a_catalog_plans_from_it_and_answers_as_the_library(spark, tmp_path):
    """With a current catalog no file is read to plan (the newest is opened
    on the driver to check its entry, as a lookup does); every row equals the
    library's, with the catalog and without. A file grown since the catalog
    was made (another size) is read by the summary job, not planned from its
    old entry (whose seq ranges would hide the groups that came since)."""
    from conftest import growing_copy
    d = copy_set(tmp_path, FIXTURES / "mariadb-10.11" / "multifile", build=True)
    values = probes(d)
    timings = {}
    without = _rows(spark, d, values, timings=timings)
    assert timings["planning_read"] == 5
    admin.build_catalog(str(d))
    with api.open_binlogs(d) as logs:
        assert logs.history == 1
        assert without == _library_rows(logs, values)
    assert _rows(spark, d, values, timings=timings) == without
    assert timings["planning_read"] == 0
    # master-bin.000020 as it was half written when the catalog was made, whole now
    name = "master-bin.000020"
    whole = (d / name).read_bytes()
    with Binlog(d / name) as b:
        ends = [g.end for g in b.groups()]
    (d / name).write_bytes(growing_copy(whole, ends[len(ends) // 2]))
    admin.build_catalog(str(d))
    (d / name).write_bytes(whole)
    assert _rows(spark, d, values, timings=timings) == without
    assert timings["planning_read"] == 1


def test_locate_over_several_histories_needs_one(spark, tmp_path):
    """A catalog with two histories (two servers' binlogs in one directory):
    gs.locate refuses to mix them, as the library does; with ``history`` it
    answers within that one, as ``gtidx.open(..., history=N)``."""
    d = copy_set(tmp_path, FIXTURES / "mariadb-10.11" / "multifile", build=True)
    other = FIXTURES / "mariadb-11.8" / "multifile"
    for f in api.list_binlogs(other):
        n = int(Path(f).name.rsplit(".", 1)[1]) + 4
        shutil.copyfile(f, d / f"master-bin.{n:06d}")
    (d / "master-bin.index").unlink(missing_ok=True)
    admin.build_catalog(str(d))
    values = probes(copy_set(tmp_path / "plain", FIXTURES / "mariadb-10.11" / "multifile", build=False))[::3]
    df = spark.createDataFrame([(v,) for v in values], "gtid string")
    with pytest.raises(api.SeveralHistories, match="2 histories"):
        gs.locate(spark, df, str(d))
    for h in (1, 2):
        with api.open_binlogs(d, history=h) as logs:
            assert _rows(spark, d, values, history=h) == _library_rows(logs, values)
    (tmp_path / "g.txt").write_text("0-1-400\n")
    r = subprocess.run([sys.executable, "-m", "gtidx", "spark", "locate", "--gtids", str(tmp_path / "g.txt"),
                        "--binlogs", str(d), "--out", str(tmp_path / "out"), "--master", "local[1]"],
                       capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 2 and "2 histories" in r.stderr and r.stderr.count("\n") == 1, r.stderr[-2000:]


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    from test_s3 import MotoServer
    server = MotoServer(tmp_path_factory.mktemp("moto"))
    yield server
    server.stop()


def test_locate_on_s3_with_a_catalog_does_not_read_every_preamble(spark, moto, tmp_path):
    """Planning over an S3 prefix, counted on moto_server: without a catalog
    the summary job GETs every binlog object; with one, the catalog object
    and the newest binlog only (its entry checked). Rows equal the library's."""
    import boto3
    opts = {"endpoint_url": moto.url, "key": "testing", "secret": "testing"}
    client = boto3.client("s3", endpoint_url=moto.url, aws_access_key_id="testing",
                          aws_secret_access_key="testing", region_name="us-east-1")
    client.create_bucket(Bucket="sparkcat")
    src = FIXTURES / "mariadb-10.11" / "multifile"
    names = [Path(f).name for f in api.list_binlogs(src)]
    for n in names:
        client.put_object(Bucket="sparkcat", Key=f"m/{n}", Body=(src / n).read_bytes())
    url = "s3://sparkcat/m/"
    assert all(not isinstance(r, Exception) for r in admin.build(url, storage_options=opts))
    values = probes(copy_set(tmp_path / "plain", src, build=False))[::2]
    df = spark.createDataFrame([(v,) for v in values], "gtid string")

    def planning_gets() -> dict:
        moto.requests()
        gs.locate(spark, df, url, storage_options=opts)        # plans now; answers on an action
        got = {}
        for m, p, _ in moto.requests():
            if m == "GET" and "?" not in p:
                got[p.rsplit("/", 1)[1]] = got.get(p.rsplit("/", 1)[1], 0) + 1
        return got

    without = planning_gets()
    assert set(names) <= set(without), without
    admin.build_catalog(url, storage_options=opts)
    with_catalog = planning_gets()
    print(f"planning GETs on {url}: without a catalog {without}, with one {with_catalog}")
    assert set(with_catalog) == {"gtidx-catalog.json", names[-1]}, with_catalog
    rows = gs.locate(spark, df, url, storage_options=opts).collect()
    with api.open_binlogs(url, storage_options=opts) as logs:
        assert logs.history == 1
        assert sorted((r.gtid, r.file, r.start, r.end, r.resume, r.timestamp, r.first_gtid, r.found)
                      for r in rows) == sorted((v, *library_row(logs, v)) for v in values)
