"""``gtidx changes`` and ``format("gtidx.changes")`` on MySQL binlogs, against
the live MySQL 9.7 history of tests/mysqlhistory.py (shared with
tests/test_mysql_show.py): every row equal to ``mysqlbinlog -v``'s
(compressed and uncompressed transactions, FULL and MINIMAL row metadata,
FULL/MINIMAL/NOBLOB images), the table, time and GTID filters equal to
filtering the whole output, ``--parquet`` and Spark the same rows, the same
from S3 (moto_server), splits, and damage: exit 3 at its offset, an event
type gtidx does not know named, the rows before it kept."""
from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from gtidx import changes, rowbatch
from gtidx.binlog.mysql import MysqlBinlog
from tests.mysqlhistory import mysqlbinlog_command, same_rows
from tests.showoracle import mysqlbinlog_rows

RUN = [sys.executable, "-m", "gtidx", "changes"]


@pytest.fixture(scope="module")
def written(mysql_show_history):
    return mysql_show_history


@pytest.fixture(scope="module")
def cli_rows(written):
    """``gtidx changes --json`` of the history's binlog: its rows (dicts)."""
    path = written[0]
    out = subprocess.run([*RUN, "--json", str(path)], capture_output=True, text=True)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def _cli(*args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([*RUN, *map(str, args)], capture_output=True, text=True, env=env)


def _json_text(v):
    """A ``--json`` value as the Arrow/Spark maps hold it (``show.as_text``)."""
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, dict):
        return v["hex"]
    return json.dumps(v)


def _as_tuples(rows: list[dict]) -> list[tuple]:
    image = (lambda m: None if m is None else {k: _json_text(v) for k, v in m.items()})
    return [(r["gtid"], r["file"], r["offset"], r["timestamp"], r["table"], r["op"], image(r["before"]),
             image(r["after"]), r["changed"], r["unknown"]) for r in rows]


def test_rows_equal_mysqlbinlog(written, cli_rows):
    """Every transaction's rows, grouped by its offset, as mysqlbinlog -v
    prints them; the groups are the file's transactions with rows."""
    path, events, srv = written
    oracle = mysqlbinlog_rows(path, mysqlbinlog_command(srv))
    with MysqlBinlog(path) as b:
        groups = {g.start: g for g in b.transactions()}
    per_group: dict = {}
    for r in cli_rows:
        per_group.setdefault(r["offset"], []).append(r)
    assert set(per_group) == {s for s, want in oracle.items() if want["rows"]}
    compressed = kinds = 0
    named = set()
    for start, rows in per_group.items():
        g, want = groups[start], oracle[start]
        if any(not r["table"].startswith("shw.") for r in rows):
            continue            # another test's, written to the shared server meanwhile: not ours to compare
        assert {r["gtid"] for r in rows} == {want["gtid"]} and {r["timestamp"] for r in rows} == {g.timestamp}
        assert {r["file"] for r in rows} == {path.name}
        # mysqlbinlog names no columns: ours are named where FULL metadata named them
        column_names = "metadata" if any(not k.startswith("@") for r in rows for k in (r["after"] or r["before"]))\
            else "positional"
        named.add(column_names)
        assert same_rows(rows, want["rows"], column_names) == [], start
        compressed += want["compressed"]
        kinds += 1
    assert compressed >= 10 and named == {"metadata", "positional"} and kinds >= 40
    text = _cli(path)
    assert text.returncode == 0 and len(text.stdout.splitlines()) == len(cli_rows)
    assert text.stdout.splitlines()[0].startswith(f"{cli_rows[0]['gtid']} {path.name} {cli_rows[0]['offset']} ")


def test_filters_equal_filtering_everything(written, cli_rows):
    """--table, --since/--until and --gtid: the rows of the whole output
    that pass (library and CLI), the other tables not decoded."""
    path = written[0]

    def got(**kw):
        out = []
        for b in changes.changes(str(path), **kw):
            for r in b.rows:
                assert not isinstance(r, Exception), r
                out.append(r.offset)
        return out
    assert got(tables=["shw.j"]) == [r["offset"] for r in cli_rows if r["table"] == "shw.j"] != []
    stamps = sorted({r["timestamp"] for r in cli_rows})
    mid = stamps[len(stamps) // 2]
    assert got(since=f"@{mid}") == [r["offset"] for r in cli_rows if r["timestamp"] >= mid] != []
    assert got(until=f"@{mid}", tables=["shw.t"]) == [r["offset"] for r in cli_rows
                                                      if r["timestamp"] < mid and r["table"] == "shw.t"]
    tagged = next(r["gtid"] for r in cli_rows if (r["gtid"] or "").count(":") == 2)
    compressed_one = next(r["gtid"] for r in cli_rows[len(cli_rows) // 2:] if r["gtid"])
    out = _cli("--json", "--gtid", tagged, "--gtid", compressed_one, path)
    assert out.returncode == 0, out.stderr
    assert [json.loads(x) for x in out.stdout.splitlines()] == [r for r in cli_rows
                                                                if r["gtid"] in (tagged, compressed_one)]
    out = _cli("--gtid", "0-1-2", path)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "MySQL GTID" in out.stderr


def test_parquet_and_the_pieces_hold_the_same_rows(written, cli_rows, tmp_path):
    """--parquet (pyarrow reads it) and the rows of a split binlog, piece
    after piece (each at a transaction start), are the JSON rows."""
    import pyarrow.parquet as pq
    path = written[0]
    out = _cli("--parquet", tmp_path / "out", path)
    assert out.returncode == 0 and out.stdout == "", out.stderr
    table = pq.read_table(tmp_path / "out" / f"{path.name}.parquet")
    assert table.schema.equals(rowbatch.ARROW_SCHEMA)
    rows = [tuple(dict(v) if isinstance(v, list) and k in ("before", "after") else v for k, v in r.items())
            for r in table.to_pylist()]
    assert rows == _as_tuples(cli_rows)
    src = changes.ChangeSource.source(str(path))
    assert isinstance(src, changes.MysqlChangeSource)
    pieces = src.splits(str(path), 16 << 10)
    assert len(pieces) > 3
    with src.open(str(path)) as b:
        starts = {g.start for g in b.transactions()}
        assert all(lo in starts for lo, _ in pieces[1:])
        got = [r for piece in pieces for batch in rowbatch.source_batches(src, b, None, split=piece)
               for r in zip(*[c.to_pylist() for c in batch.columns])]
    assert [r[:6] for r in got] == [r[:6] for r in _as_tuples(cli_rows)]


def test_spark_reads_the_same_rows(spark, written, cli_rows):
    """``format("gtidx.changes")`` on the binlog, cut in pieces, gives the
    rows of gtidx changes (one Spark job: a session is the cost); its
    reader with a table filter pushed down (without Spark: the same
    ``ChangesReader``) those of that table."""
    from gtidx.spark.changes import ChangesReader, batch_rows
    from pyspark.sql.datasource import EqualTo, IsNotNull
    path = written[0]
    df = spark.read.format("gtidx.changes").option("split_bytes", path.stat().st_size // 3).load(str(path))
    parts = df.rdd.getNumPartitions()
    assert parts > 1, parts
    got = [tuple(r) for r in df.collect()]
    assert got == _as_tuples(cli_rows), (len(got), len(cli_rows))
    reader = ChangesReader(str(path), split_bytes=32 << 10)
    kept = list(reader.pushFilters([EqualTo(("table",), "shw.j"), IsNotNull(("gtid",))]))
    assert kept == [IsNotNull(("gtid",))]          # a MySQL gtid can be null: Spark checks it
    got = [r for p in reader.partitions() for batch in reader.read(p) for r in batch_rows(batch)]
    assert got == [t for t in _as_tuples(cli_rows) if t[4] == "shw.j"] != []


def test_s3_gives_the_local_rows(written, cli_rows, tmp_path):
    """The binlog as an object on moto_server: the same JSON rows."""
    from tools.s3server import AWS_ENV, MotoServer
    path = written[0]
    server = MotoServer(tmp_path)
    try:
        client = server.bucket("gtidx-mysql")
        client.put_object(Bucket="gtidx-mysql", Key=f"logs/{path.name}", Body=path.read_bytes())
        env = {**os.environ, **AWS_ENV, "AWS_ENDPOINT_URL": server.url}
        for k in ("AWS_SESSION_TOKEN", "AWS_PROFILE"):          # as tests/test_s3.py: moto's keys only
            env.pop(k, None)
        out = _cli("--json", "s3://gtidx-mysql/logs/", env=env)
        assert out.returncode == 0, out.stderr
        assert [json.loads(x) for x in out.stdout.splitlines()] == cli_rows
    finally:
        server.stop()


def _events(data: bytes, start: int) -> list[tuple[int, int, int]]:
    """(offset, type, length) of the events from ``start`` to the end."""
    out = []
    while start + 19 <= len(data):
        etype, ln = data[start + 4], struct.unpack_from("<I", data, start + 9)[0]
        out.append((start, etype, ln))
        start += ln
    return out


def test_damage_is_exit_3_at_its_offset_and_an_unknown_event_is_named(written, cli_rows, tmp_path):
    """A flipped byte in a rows event and in a compressed payload: exit 3,
    one line with the event's offset, the rows of the transactions before
    its own printed. A rows
    event made an unknown type (its CRC32 right): exit 2, one line naming
    the type. Nothing is dropped silently."""
    path, events, _ = written
    data = path.read_bytes()
    rows_at = next(int(e[1]) for e in events if e[2] == "Write_rows")
    payload_at = next(int(e[1]) for e in events if e[2] == "Transaction_payload")
    with MysqlBinlog(path) as b:
        starts = [g.start for g in b.transactions()]
    for at in (rows_at, payload_at):
        ln = struct.unpack_from("<I", data, at + 9)[0]
        holder = max(s for s in starts if s < at)         # its transaction: no row of it, then the error
        bad = bytearray(data)
        bad[at + ln - 10] ^= 0x40
        copy = tmp_path / f"{at}" / path.name
        copy.parent.mkdir()
        copy.write_bytes(bad)
        out = _cli("--json", copy)
        assert out.returncode == 3 and out.stderr.count("\n") == 1 and f"offset {at}" in out.stderr, out.stderr
        lines = [json.loads(x) for x in out.stdout.splitlines()]
        assert lines[:-1] == [r for r in cli_rows if r["offset"] < holder] and "error" in lines[-1]
    bad = bytearray(data)
    bad[rows_at + 4] = 37
    ln = struct.unpack_from("<I", bad, rows_at + 9)[0]
    struct.pack_into("<I", bad, rows_at + ln - 4, zlib.crc32(bad[rows_at:rows_at + ln - 4]))
    copy = tmp_path / "unknown" / path.name
    copy.parent.mkdir()
    copy.write_bytes(bad)
    out = _cli(copy)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "type 37" in out.stderr, out.stderr
    assert f"offset {rows_at}" in out.stderr


def test_several_binlogs_and_the_anonymous_fixture(tmp_path):
    """A directory of MySQL binlogs (the anonymous fixture: gtid_mode
    switched, anonymous transactions) read in binlog order; an anonymous
    transaction's gtid is null (JSON) and "(anonymous)" (text)."""
    d = Path(__file__).resolve().parent.parent / "fixtures" / "mysql-9.7" / "anonymous"
    shutil.copytree(d, tmp_path / "a")
    out = _cli("--json", tmp_path / "a")
    assert out.returncode == 0, out.stderr
    rows = [json.loads(x) for x in out.stdout.splitlines()]
    assert any(r["gtid"] is None for r in rows) and any(r["gtid"] for r in rows)
    names = [r["file"] for r in rows]
    assert names == sorted(names)
    text = _cli(tmp_path / "a")
    assert text.returncode == 0 and any(x.startswith("(anonymous) ") for x in text.stdout.splitlines())


MYSQL_FIXTURES = sorted(p for p in (Path(__file__).resolve().parent.parent / "fixtures" / "mysql-9.7").iterdir()
                        if p.is_dir() and any(p.glob("binlog.0*")))


def _arrow(path, compiled: bool, stats: dict, **kw):
    import pyarrow as pa
    batches = []
    for b in changes.changes(str(path), reader=lambda s, b, sp: rowbatch.source_batches(s, b, sp, compiled=compiled,
                                                                                         stats=stats), **kw):
        for x in b.rows:
            assert not isinstance(x, Exception), x
            batches.append(x)
    return pa.Table.from_batches(batches, rowbatch.ARROW_SCHEMA)


@pytest.mark.skipif(not rowbatch.USE_COMPILED, reason="gtidx._rows is not built")
def test_the_compiled_decoder_gives_the_definitions_rows(written):
    """The compiled decoder on MySQL transactions (told their gtid texts)
    gives, batch contents aside, the table the definition gives, on every
    MySQL fixture and the live history, with a table filter and a time
    range too (the fixtures' seconds; the runs' records outside it passed
    over by the decoder); it
    decodes most transactions itself (a compressed one: declined in the
    file, then its inner events) and hands the rest (anonymous ones, JSON
    columns) to the definition."""
    decoded = declined = 0
    for path in [*MYSQL_FIXTURES, written[0]]:
        for kw in ({}, {"tables": ["fx.t", "shw.ai"]}, {"since": "@1795453874", "until": "@1795453876"}):
            ours, theirs = {}, {}
            got = _arrow(path, True, ours, **kw)
            assert got.equals(_arrow(path, False, theirs, **kw)), (path, kw)
            assert ours["rows"] == got.num_rows
            decoded += ours["groups"]
            declined += ours["declined"]
            if path.name == "compressed" and not kw:
                assert ours["groups"] >= 36 and ours["declined"] == 32, ours     # 32 payloads, decoded inside
    assert decoded > 400 and declined > 100, (decoded, declined)


@pytest.mark.skipif(not rowbatch.USE_COMPILED, reason="gtidx._rows is not built")
def test_the_decoder_without_the_compiled_transaction_walk(monkeypatch):
    """Without ``mysql_records`` (gtidx._skip older or not built) the
    decoder is handed the transactions one by one: the same table, on the
    fixtures whose transactions it takes and declines (compressed,
    anonymous), with a time range too."""
    from gtidx.binlog import mysql as mysqlbinlog
    paths = [p for p in MYSQL_FIXTURES if p.name in ("compressed", "anonymous", "rotated")]
    kws = ({}, {"since": "@1795453874", "until": "@1795453876"})
    runs = [_arrow(p, True, {}, **kw) for p in paths for kw in kws]
    monkeypatch.setattr(mysqlbinlog, "_mysql_records", None)
    assert [_arrow(p, True, {}, **kw) for p in paths for kw in kws] == runs
    assert sum(t.num_rows for t in runs) > 1000
