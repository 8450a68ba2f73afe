"""A MySQL archive in an object store with its catalog and indexes: a
``seek --gtid`` makes at most 6 GETs and reads KBs of binlog, not the
file, as for MariaDB (tests/test_s3.py). A real ``moto_server`` on
127.0.0.1; requests counted from its own log, bytes from the ranges gtidx
asked for."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from test_mysql_catalog import archive

boto3 = pytest.importorskip("boto3")
pytest.importorskip("s3fs")

import gtidx  # noqa: E402
from gtidx import api, storage  # noqa: E402
from gtidx.binlog.mysql import MysqlBinlog  # noqa: E402
from tools.s3server import MotoServer  # noqa: E402

BUCKET = "gtidx-mysql"


def forget() -> None:
    """Drop the stores and file systems made for another test module's server
    (the endpoint, from AWS_ENDPOINT_URL, is in neither's cache key)."""
    import s3fs
    storage._STORES.clear()
    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    server = MotoServer(tmp_path_factory.mktemp("moto"))
    forget()
    try:
        with server.environment():
            server.client = server.bucket(BUCKET)
            yield server
    finally:
        forget()
        server.stop()


def test_mysql_seek_on_s3_with_a_catalog_is_at_most_6_gets(s3, tmp_path, monkeypatch):
    """15 MySQL 9.7 binlogs under a prefix, their indexes and catalog
    written there: every GTID sampled across the files is found as locally
    in at most 6 GETs (the LIST names the binlogs with their sizes and ETags
    as the catalog has them: no file is read for its Previous_gtids), with
    a few KiB of binlog read; without the catalog each lookup reads the
    Previous_gtids of the files its bisection visits."""
    local = archive(tmp_path / "a")
    files = sorted(local.glob("binlog.0*"))
    for f in files:
        s3.client.put_object(Bucket=BUCKET, Key=f"arch/{f.name}", Body=f.read_bytes())
    url = f"s3://{BUCKET}/arch/"
    # a record every 4 KiB or so (the fixtures are small: 25 to 250 KB; the default span is 64 KiB)
    built = list(gtidx.build(url, span_min=4096, max_ratio=None))
    assert not [r for r in built if isinstance(r, Exception)], built
    sample = []
    for f in files:
        with MysqlBinlog(str(f)) as b:
            got = [str(g.gtid) for g in b.groups() if g.gtid]
        sample += got[len(got) // 2:len(got) // 2 + 1]
    assert len(sample) >= 8

    def lookups(gtids):
        out = []
        for g in gtids:
            s3.requests()
            ranges.clear()
            loc = api.seek(g, url)
            want = api.seek(g, str(local))
            assert (Path(loc.file).name, loc.start, loc.end) == (Path(want.file).name, want.start, want.end), g
            reqs = s3.requests()
            binlog_bytes = sum(n for p, _, _, n in ranges if Path(p).name.startswith("binlog.0") and
                               not p.endswith((".idx", ".gtidx")))
            out.append((len([r for r in reqs if r[0] == "GET"]), len(reqs), binlog_bytes, loc.via))
            if os.environ.get("DEBUG_S3"):
                print(g, reqs, [(Path(p).name, a, b, n) for p, a, b, n in ranges])
        return out
    ranges = []
    cat = storage.FsspecStore.cat

    def counting(self, path, start, end, etag=None):
        data = cat(self, path, start, end, etag)
        ranges.append((path, start, end, len(data)))
        return data
    monkeypatch.setattr(storage.FsspecStore, "cat", counting)
    without = lookups(sample[::4])
    _, counts = gtidx.build_catalog(url)
    assert counts == {"kept": 0, "walked": 15, "failed": 0}
    with_catalog = lookups(sample)
    most = max(g for g, _, _, _ in with_catalog)
    print(f"seek on {url} (15 MySQL binlogs): without a catalog at most {max(g for g, *_ in without)} GETs, "
          f"with one at most {most} GETs, {max(r for _, r, _, _ in with_catalog)} requests, "
          f"{max(b for _, _, b, _ in with_catalog)} bytes of binlog")
    assert most <= 6, with_catalog
    assert {v for *_, v in with_catalog} == {"index"}
    # the binlog's first 4 KiB, then one GET from the index record: its first window, or all of the
    # file after it when that is short (up to 4 windows, 256 KiB: storage.REMOTE_WINDOW_FIRST)
    assert all(b <= 4096 + 4 * storage.REMOTE_WINDOW_FIRST for _, _, b, _ in with_catalog), with_catalog
    assert sum(g for g, *_ in with_catalog[::4]) < sum(g for g, *_ in without)
