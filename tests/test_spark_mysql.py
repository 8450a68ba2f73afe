"""Spark locate on MySQL binlogs (issue 15 item 5): every row's answer is
``gtidx.open(binlogs)``'s (tests/test_mysql_answers.py checks those against
the server's oracles): every GTID of the fixtures, GTIDs not there, bad
rows, replica sets; through ``gtidx spark locate`` too."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import FIXTURES, ROOT, count_listings
from gtidx import admin, api, catalog
from gtidx.errors import GtidxError

import gtidx.spark as gs  # noqa: E402

MYSQL = FIXTURES / "mysql-9.7"
UUID = "8f2379f0-e75f-11f1-a262-02fc00000001"


def expected(logs, value: str) -> tuple:
    """The row gtidx.open's answer makes (found or not)."""
    try:
        r = api.seek(value, logs)
    except GtidxError as e:
        return (value, False, None, None, None, e.message)
    if isinstance(r, api.Location):
        return (value, True, r.file, r.start, r.end, None)
    return (value, True, r.file, r.offset, str(r.first.gtid) if r.first else None, None)


def test_locate_on_mysql_binlogs(spark, tmp_path):
    d = tmp_path / "rotated"
    shutil.copytree(MYSQL / "rotated", d)
    oracle = json.loads((d / "oracle.json").read_text())
    values = [g for f in oracle["files"] for g, _, _ in f["groups"]]
    with api.open_binlogs(d) as logs:
        sets = [str(logs.state_at(d / f["name"], f["groups"][3][1]).state).replace("\n", "") for f in oracle["files"]]
        end = logs.end_set().one_line()
    values += [f"{UUID}:999999", f"{UUID}:1", f"{UUID}:x:1", "0-1-1", "nonsense", end,
               f"{end},3e11fa47-71ca-11e1-9e33-c80aa9429562:999999", *sets]
    df = spark.createDataFrame([(v,) for v in values], "gtid string")
    rows = {r.gtid: r for r in gs.locate(spark, df, str(d)).collect()}
    assert len(rows) == len(values)
    for v in values:
        want = expected(str(d), v)
        r = rows[v]
        got = (v, r.found, r.file, r.start, r.end if r.kind == "gtid" else r.first_gtid, r.reason)
        if not want[1]:
            assert not r.found and r.reason, (v, r)
            continue
        assert got == want, v
    assert rows[values[0]].kind == "gtid" and rows[sets[0]].kind == "position"
    assert not rows["0-1-1"].found and "MariaDB GTID" in rows["0-1-1"].reason
    # the CLI
    (tmp_path / "g.txt").write_text("\n".join(values[:30]) + "\n")
    p = subprocess.run([sys.executable, "-m", "gtidx", "spark", "locate", "--gtids", str(tmp_path / "g.txt"),
                        "--binlogs", str(d), "--out", str(tmp_path / "out.parquet"), "--master", "local[2]",
                        "--json", "-q"], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == {"out": str(tmp_path / "out.parquet"), "rows": 30, "found": 30, "not_found": 0}


def test_locate_on_mysql_binlogs_lists_once_on_the_driver(spark, monkeypatch):
    listed = count_listings(monkeypatch)
    timings: dict = {}
    oracle = json.loads((MYSQL / "rotated" / "oracle.json").read_text())
    values = [oracle["files"][1]["groups"][0][0], f"{UUID}:999999"]
    rows = gs.locate(spark, spark.createDataFrame([(v,) for v in values], "gtid string"), str(MYSQL / "rotated"),
                     timings=timings).collect()
    assert listed == [str(MYSQL / "rotated")]
    assert timings["planning_read"] == 4 and "per_file" not in timings
    assert sorted(r.found for r in rows) == [False, True]


def test_locate_on_mysql_binlogs_in_an_object_store(spark, tmp_path):
    """A prefix of MySQL binlog objects (its flavor read at listing from the
    newest object): every row is the library's answer on the local files.
    With the prefix's catalog, planning GETs the catalog only (no binlog's
    Previous_gtids) and the tasks read fewer objects; a forged entry is
    read instead; the rows the same (counted on moto_server).
    format("gtidx") reads their transactions, gs.build writes their indexes
    beside them, and a lookup answers through those."""
    pytest.importorskip("s3fs")
    from tools.s3server import MotoServer
    moto = MotoServer(tmp_path)
    try:
        opts = {"endpoint_url": moto.url, "key": "testing", "secret": "testing"}
        client = moto.bucket("sparkmysql")
        src = MYSQL / "rotated"
        for f in src.glob("binlog.0*"):
            client.put_object(Bucket="sparkmysql", Key=f"m/{f.name}", Body=f.read_bytes())
        oracle = json.loads((src / "oracle.json").read_text())
        values = [g for f in oracle["files"] for g, _, _ in f["groups"] if g][::4] + [f"{UUID}:999999"]
        df = spark.createDataFrame([(v,) for v in values], "gtid string")
        url, names = "s3://sparkmysql/m/", sorted(f.name for f in src.glob("binlog.0*"))

        def gets(action: bool) -> tuple[dict, list]:
            """The GETs of each object while planning (and answering: ``action``), and the rows."""
            moto.requests()
            out = gs.locate(spark, df, url, storage_options=opts)
            rows = out.collect() if action else []
            got = {}
            for m, p, _ in moto.requests():
                if m == "GET" and "?" not in p:
                    got[p.rsplit("/", 1)[1]] = got.get(p.rsplit("/", 1)[1], 0) + 1
            return got, sorted((r.gtid, r.found, r.file, r.start, r.end) for r in rows)

        without, scanned = gets(True)
        assert set(names) <= set(without)             # every Previous_gtids read
        assert len(scanned) == len(values)
        for gtid, found, file, start, _ in scanned:
            want = expected(str(src), gtid)
            assert (found, file and os.path.basename(file), start) == \
                (want[1], want[2] and os.path.basename(want[2]), want[3]), gtid
            assert file is None or file.startswith(url)
        admin.build_catalog(url, storage_options=opts)
        assert gets(False)[0] == {catalog.NAME: 1}    # planned from the catalog: no binlog read
        with_catalog, rows = gets(True)
        print(f"GETs on {url}: without a catalog {without}, with one {with_catalog}")
        assert rows == scanned
        # each file read by its own task only (no bisection reads another's preamble)
        assert all(with_catalog[n] < without[n] for n in names), (with_catalog, without)
        # a forged entry (another size: the LIST shows it stale) is read instead; the answers the same
        raw = json.loads(client.get_object(Bucket="sparkmysql", Key=f"m/{catalog.NAME}")["Body"].read())
        raw["files"][1]["size"] += 1
        raw[catalog.CHECKSUM] = catalog.checksum(raw)
        client.put_object(Bucket="sparkmysql", Key=f"m/{catalog.NAME}", Body=json.dumps(raw).encode())
        forged, rows = gets(True)
        assert rows == scanned and names[1] in forged
        # format("gtidx") on the objects: the server's transactions; gs.build: indexes beside them
        got = spark.read.format("gtidx").option("storage_options", json.dumps(opts)).load("s3://sparkmysql/m/")
        assert sorted((r["file"], r["gtid"], r["start"], r["end"]) for r in got.collect()) == \
            sorted((f["name"], g, a, b) for f in oracle["files"] for g, a, b in f["groups"])
        built = gs.build(spark, "s3://sparkmysql/m/", storage_options=opts).collect()
        assert sorted(r["index"] for r in built) == sorted(f"s3://sparkmysql/m/{f['name']}.idx"
                                                             for f in oracle["files"])
        assert all(r["action"] == "built" for r in built), built
        gtid, start, end = oracle["files"][-1]["groups"][-1]
        loc = api.seek(gtid, "s3://sparkmysql/m/", storage_options=opts)
        assert (loc.start, loc.end, loc.via) == (start, end, "index")
    finally:
        moto.stop()


def test_build_on_mysql_binlogs(spark, tmp_path):
    """``gs.build`` on a MySQL binlog directory: one task per file writes
    gtidx's MySQL index (its own magic), byte for byte what ``gtidx build``
    writes, and lookups answer through it."""
    a, b = tmp_path / "spark", tmp_path / "local"
    shutil.copytree(MYSQL / "rotated", a)
    shutil.copytree(MYSQL / "rotated", b)
    rows = gs.build(spark, str(a)).collect()
    names = sorted(p.name for p in a.glob("binlog.0*") if not p.name.endswith(".idx"))
    assert sorted(os.path.basename(r["binlog"]) for r in rows) == names
    assert all(r["action"] == "built" for r in rows), rows
    list(admin.build(str(b)))
    for n in names:
        mine = (a / f"{n}.idx").read_bytes()
        assert mine[:4] == b"\xfe\xfe\x0c\x4d" and mine == (b / f"{n}.idx").read_bytes(), n
    oracle = json.loads((a / "oracle.json").read_text())
    gtid, start, end = next(g for f in oracle["files"] for g in f["groups"] if g[0] is not None)
    loc = api.seek(gtid, a)
    assert (loc.start, loc.end, loc.via) == (start, end, "index")


def test_groups_source_on_mysql_binlogs(spark):
    """``format("gtidx")`` on MySQL binlogs: one row per transaction, its
    GTID's text, start and end as the server logged them (the fixtures'
    oracle from SHOW BINLOG EVENTS); no domain, server or seq_no."""
    d = MYSQL / "rotated"
    oracle = json.loads((d / "oracle.json").read_text())
    want = sorted((f["name"], g, s, e) for f in oracle["files"] for g, s, e in f["groups"])
    rows = spark.read.format("gtidx").load(str(d)).collect()
    assert sorted((r["file"], r["gtid"], r["start"], r["end"]) for r in rows) == want
    assert all(r["domain"] is None and r["seq"] is None and r["flags"] is None for r in rows)
    assert spark.read.format("gtidx").load(str(d)).where("domain = 0").count() == 0
    one = oracle["files"][1]["name"]
    assert spark.read.format("gtidx").load(str(d)).where(f"file = '{one}'").count() == \
        len(oracle["files"][1]["groups"])
