"""Row changes on Spark (``format("gtidx.changes")``): row for row what
``gtidx show --json`` gives, and its filters pushed down: the same rows as
filtering the full result, with fewer files opened and fewer groups decoded."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT, copy_set
from gtidx import admin, api, rowbatch, show
from gtidx.binlog.mariadb import Binlog

import gtidx.spark as gs  # noqa: E402  (pyspark: the spark extra)
from gtidx.spark.changes import ChangesReader, batch_rows  # noqa: E402
from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, In, LessThan  # noqa: E402

COLUMNS = ["gtid", "file", "offset", "timestamp", "table", "op", "before", "after", "changed", "unknown"]


def fixture_dirs() -> list[Path]:
    """Every fixture directory whose binlogs mariadb-binlog reads (not the encrypted set)."""
    return sorted(p.parent for p in FIXTURES.glob("mariadb-*/*/oracle.json") if p.parent.name != "encrypted")


def json_text(v):
    """A ``--json`` value as the source's maps hold it: strings as they are,
    {"hex": h} as h, null as None, any other JSON value as its JSON text."""
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, dict):
        return v["hex"]
    return json.dumps(v)


def json_rows(doc: dict) -> list[tuple]:
    """The rows of one ``gtidx show --json`` document, as the source's tuples."""
    image = (lambda m: None if m is None else {k: json_text(v) for k, v in m.items()})
    return [(doc["gtid"], os.path.basename(doc["file"]), doc["start"], doc["timestamp"], r["table"], r["op"],
             image(r["before"]), image(r["after"]), r["changed"], r["unknown"]) for r in doc["rows"]]


def show_rows(d: Path) -> tuple[list[tuple], int]:
    """(every row of every group of the binlogs in ``d`` as `gtidx show --json`
    prints them (its document, through json), the groups with rows)."""
    out, with_rows = [], 0
    for f in api.list_binlogs(d):
        with Binlog(f) as b:
            for g in b.groups():
                rows = json_rows(json.loads(json.dumps(show.decode_group(b, g).as_dict())))
                out += rows
                with_rows += bool(rows)
    return out, with_rows


def source_rows(df) -> list[tuple]:
    return [tuple(r[c] for c in COLUMNS) for r in df.collect()]


def cli_show(path: str, offset: int) -> dict:
    r = subprocess.run([sys.executable, "-m", "gtidx", "show", "--json", path, str(offset)], capture_output=True,
                       text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


# -- row for row what `gtidx show --json` says ------------------------------------------------

def test_source_equals_show_json_on_every_fixture(spark):
    """Every group of every fixture directory with rows: the source's rows,
    in order (binlog order, one partition per file), are the --json rows;
    the first and last group with rows of each directory through the CLI itself."""
    dirs = 0
    for d in fixture_dirs():
        expected, groups = show_rows(d)
        if not expected:
            continue
        dirs += 1
        got = source_rows(spark.read.format("gtidx.changes").load(str(d)))
        assert len(got) == len(expected), d
        assert got == expected, (d, next(((a, b) for a, b in zip(got, expected) if a != b), None))
        files = {os.path.basename(f): f for f in api.list_binlogs(d)}
        for file, offset in {(r[1], r[2]) for r in (expected[0], expected[-1])}:
            assert json_rows(cli_show(files[file], offset)) == [r for r in expected if r[1:3] == (file, offset)]
    assert dirs >= 15


def test_values_as_text_are_the_json_values():
    """show.as_text: a value's --json text (BLOB: hex digits; DECIMAL exact; NULL: None)."""
    import decimal
    for v, text in [(None, None), ("it's", "it's"), (b"\x00\xff", "00ff"), (decimal.Decimal("-1234.500"), "-1234.500"),
                    (18446744073709551615, "18446744073709551615"), (1.5, "1.5"), (0.1, "0.1"),
                    ("-1 (18446744073709551615)", "-1 (18446744073709551615)")]:
        assert show.as_text(v) == text
        assert json_text(json.loads(json.dumps(show.json_image({"c": v})))["c"]) == text


# -- filters: the same rows as filtering the whole, fewer files and groups --------------------

def pushed(df) -> bool:
    """Did the source take every filter (none left for Spark above the scan)?"""
    plan = df._jdf.queryExecution().executedPlan().toString()
    return "Filter" not in plan.split("BatchScan")[0]


def check(spark, d: Path, everything: list[tuple], where: str, keep) -> list[tuple]:
    df = spark.read.format("gtidx.changes").load(str(d)).where(where)
    got = source_rows(df)
    assert got == [r for r in everything if keep(dict(zip(COLUMNS, r)))], where
    assert pushed(df), where
    return got


@pytest.mark.parametrize("scenario", ["mariadb-10.11/multifile", "mariadb-11.8/nonmono"])
def test_filters_give_the_rows_of_the_whole_filtered(spark, tmp_path, scenario):
    d = copy_set(tmp_path, FIXTURES / scenario, build="11.8" not in scenario)   # 11.8: the server's own .idx
    everything = source_rows(spark.read.format("gtidx.changes").load(str(d)))
    tables = sorted({r[4] for r in everything})
    times = sorted({r[3] for r in everything})
    gtids = [r[0] for r in everything]
    twice = sorted({g for g in gtids if len({(r[1], r[2]) for r in everything if r[0] == g}) > 1})
    if "nonmono" in scenario:
        assert twice                                # a GTID logged twice: both groups' rows
    mid = times[len(times) // 2]
    cases = [
        (f"table = '{tables[0]}'", lambda r: r["table"] == tables[0]),
        (f"table IN ('{tables[-1]}', 'no.such')", lambda r: r["table"] == tables[-1]),
        ("table = 'no.such'", lambda r: False),
        (f"timestamp >= {mid}", lambda r: r["timestamp"] >= mid),
        (f"timestamp > {mid} AND timestamp <= {times[-1]}", lambda r: mid < r["timestamp"] <= times[-1]),
        (f"timestamp < {mid}", lambda r: r["timestamp"] < mid),
        (f"timestamp = {mid}", lambda r: r["timestamp"] == mid),
        (f"timestamp IN ({times[0]}, {times[-1]})", lambda r: r["timestamp"] in (times[0], times[-1])),
        (f"timestamp BETWEEN {mid} AND {mid}", lambda r: r["timestamp"] == mid),
        (f"timestamp > {mid + 0.5}", lambda r: r["timestamp"] > mid + 0.5),
        (f"gtid = '{gtids[len(gtids) // 3]}'", lambda r: r["gtid"] == gtids[len(gtids) // 3]),
        (f"gtid IN ('{gtids[0]}', '{gtids[-1]}', '77-1-1', '0-1-', '{'0' + gtids[-1]}')",
         lambda r: r["gtid"] in (gtids[0], gtids[-1])),
        (f"gtid = '{gtids[-1]}' AND timestamp < {times[0]}", lambda r: False),
        (f"gtid IN ('{gtids[0]}', '{gtids[-1]}') AND table = '{tables[0]}'",
         lambda r: r["gtid"] in (gtids[0], gtids[-1]) and r["table"] == tables[0]),
        (f"table = '{tables[0]}' AND timestamp >= {mid}", lambda r: r["table"] == tables[0] and r["timestamp"] >= mid),
    ]
    cases += [(f"gtid = '{g}'", lambda r, g=g: r["gtid"] == g) for g in twice[:3]]
    for where, keep in cases:
        check(spark, d, everything, where, keep)


class Counting:
    """Counts Binlog opens (files opened, driver and reader alike) and groups
    decoded (by the definition: the compiled decoder is put aside), while
    the reader runs in this process."""

    def __init__(self, monkeypatch):
        self.opened, self.decoded, self.events = [], 0, 0
        init, decode, event = Binlog.__init__, show.group_rows, show._Lib.event
        monkeypatch.setattr(rowbatch, "USE_COMPILED", False)     # groups decoded by the definition: counted

        def counting_init(b, path, *a, **kw):
            self.opened.append(os.path.basename(str(path)))
            init(b, path, *a, **kw)

        def counting_decode(*a, **kw):
            self.decoded += 1
            return decode(*a, **kw)

        def counting_event(*a, **kw):
            self.events += 1
            return event(*a, **kw)
        monkeypatch.setattr(Binlog, "__init__", counting_init)
        monkeypatch.setattr(show, "group_rows", counting_decode)
        monkeypatch.setattr(show._Lib, "event", counting_event)

    def read(self, d: Path, filters: list) -> list[tuple]:
        """The rows; ``planned``: the files the driver opened to plan,
        ``opened``: those the tasks opened."""
        self.decoded = self.events = 0
        self.opened.clear()
        reader = ChangesReader(str(d))
        assert list(reader.pushFilters(filters)) == []
        parts = reader.partitions()
        self.planned = list(self.opened)
        self.opened.clear()
        return [row for p in parts for batch in reader.read(p) for row in batch_rows(batch)]


def test_pruning_opens_fewer_files_and_decodes_fewer_groups(spark, tmp_path, monkeypatch):
    d = copy_set(tmp_path, FIXTURES / "mariadb-10.11" / "multifile")
    names = [os.path.basename(f) for f in api.list_binlogs(d)]
    groups = {n: sum(1 for _ in Binlog(d / n).groups()) for n in names}
    df = spark.read.format("gtidx.changes").load(str(d))
    full = source_rows(df)
    one = next(r for r in full if r[1] == names[2])
    assert df.where(f"gtid = '{one[0]}'").rdd.getNumPartitions() == 1
    assert df.where(f"file = '{names[1]}'").rdd.getNumPartitions() == 1

    n = Counting(monkeypatch)
    assert n.read(d, []) == full
    assert sorted(n.opened) == names and n.decoded == sum(groups.values())
    every_event = n.events
    # a GTID: located on the driver as `gtidx seek` does (each file's GTID_LIST read, the
    # index of its file to the group); its task opens that file only and decodes one group
    rows = n.read(d, [EqualTo(("gtid",), one[0])])
    assert rows == [r for r in full if r[0] == one[0]] and n.decoded == 1
    assert n.opened == [one[1]], n.opened
    # a table: every group is walked, only its rows events decoded
    table = "fx.t_myi"
    rows = n.read(d, [In(("table",), (table,))])
    assert rows == [r for r in full if r[4] == table]
    assert n.events < every_event / 10, (n.events, every_event)
    # a time range without a catalog: every file's headers read, only the groups in range decoded
    times = sorted({r[3] for r in full})
    lo = times[3]
    rows = n.read(d, [GreaterThanOrEqual(("timestamp",), lo)])
    assert rows == [r for r in full if r[3] >= lo]
    in_range = sum(groups[n_] for n_ in names if any(r[1] == n_ and r[3] >= lo for r in full))
    assert n.decoded == in_range < sum(groups.values())
    assert sorted(set(n.opened)) == names
    # ... with a catalog: the files all older than the range are not opened (the newest always is)
    admin.build_catalog(str(d))
    rows = n.read(d, [GreaterThanOrEqual(("timestamp",), lo), LessThan(("timestamp",), math.inf)])
    assert rows == [r for r in full if r[3] >= lo]
    newer = {r[1] for r in full if r[3] >= lo}
    assert newer != set(names) and set(n.opened) == newer | {names[-1]}, n.opened
    assert set(n.planned) <= {names[-1]}, n.planned         # the newest, to check its entry
    # ... and a GTID is located from the catalog: only the newest and its own file opened to plan
    rows = n.read(d, [In(("gtid",), (one[0], "77-1-1"))])
    assert rows == [r for r in full if r[0] == one[0]] and n.decoded == 1 and n.opened == [one[1]]
    assert set(n.planned) <= {names[-1], one[1]}, n.planned
    monkeypatch.undo()
    got = df.where(f"timestamp >= {lo}")
    assert got.rdd.getNumPartitions() == len(newer | {names[-1]})
    assert source_rows(got) == [r for r in full if r[3] >= lo]


# -- big binlogs in pieces (split_bytes) ------------------------------------------------------

def test_pieces_of_big_binlogs_give_the_rows_of_whole_files(spark, tmp_path):
    """split_bytes 16 KiB: each binlog of the set in pieces, from its index's
    records; then with one index's record forged (moved inside a group: its
    file's pieces from the header walk) and with no index at all. The same
    rows in the same order (the partitions in file order) and the filters
    pushed down as on whole files; a GTID's file read whole."""
    from conftest import forge_index_record
    from gtidx.errors import BadInputError
    from gtidx.spark.changes import ChangesDataSource
    d = copy_set(tmp_path, FIXTURES / "mariadb-10.11" / "multifile")
    files = api.list_binlogs(d)
    whole = source_rows(spark.read.format("gtidx.changes").load(str(d)))

    def pieces():
        return spark.read.format("gtidx.changes").option("split_bytes", 16384).load(str(d))
    df = pieces()
    assert df.rdd.getNumPartitions() > 4 * len(files)
    assert source_rows(df) == whole
    times = sorted({r[3] for r in whole})
    mid = times[len(times) // 2]
    for where, keep in [("table = 'fx.t_myi'", lambda r: r[4] == "fx.t_myi"),
                        (f"timestamp >= {mid}", lambda r: r[3] >= mid)]:
        got = df.where(where)
        assert source_rows(got) == [r for r in whole if keep(r)] and pushed(got), where
    one = whole[len(whole) // 2]
    got = df.where(f"gtid = '{one[0]}'")
    assert got.rdd.getNumPartitions() == 1 and source_rows(got) == [r for r in whole if r[0] == one[0]]

    forge_index_record(files[1], lambda b, off: off + b.event_header(off)[3])
    assert source_rows(pieces()) == whole
    for f in files:
        os.remove(f"{f}.idx")
    df = pieces()
    assert df.rdd.getNumPartitions() > 4 * len(files) and source_rows(df) == whole

    for bad in ("0", "64M", "-1"):
        with pytest.raises(BadInputError, match="split_bytes"):
            ChangesDataSource({"path": str(d), "split_bytes": bad}).reader(None)


def test_the_batches_schema_is_the_ddl_schema(spark):
    """The executors' batches (rowbatch.ARROW_SCHEMA) are what Spark makes of
    the source's DDL schema (it refuses a batch whose schema differs)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from gtidx.rowbatch import ARROW_SCHEMA
    from gtidx.spark.changes import CHANGES_SCHEMA
    assert to_arrow_schema(spark.createDataFrame([], CHANGES_SCHEMA).schema, timezone="UTC").equals(ARROW_SCHEMA)
