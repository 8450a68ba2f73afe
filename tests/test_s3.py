"""Binlogs and indexes in an object store (issue 13): the same answers as
from local files, lookups in a handful of range GETs, one PUT per index,
and one clear line for every failure.

The S3 endpoint is a real ``moto_server`` process (moto[server], what s3fs's
own tests run) on 127.0.0.1, spoken to over HTTP; requests are counted from
its own request log (one line per request it answered), bytes from the
ranges gtidx asked for."""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT, answers_equal

boto3 = pytest.importorskip("boto3")
pytest.importorskip("s3fs")

import gtidx  # noqa: E402
from gtidx import api, storage  # noqa: E402
from gtidx.binlog.mariadb import Binlog  # noqa: E402
from gtidx.index.meta import IndexMeta  # noqa: E402
from tools.s3server import MotoServer, free_port  # noqa: E402

BUCKET = "gtidx-archive"
MULTI = FIXTURES / "mariadb-10.11" / "multifile"
BIG = FIXTURES / "mariadb-11.8" / "mixed" / "master-bin.000002"    # ~4 MB: 60 index records


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A moto_server with the AWS_* variables (AWS_ENDPOINT_URL among them)
    pointing at it, a bucket, and the fixtures copied into it."""
    server = MotoServer(tmp_path_factory.mktemp("moto"))
    try:
        with server.environment():
            client = server.bucket(BUCKET)               # boto3: s3fs's mkdir does not work against moto
            for f in MULTI.iterdir():
                if f.name.startswith("master-bin"):
                    client.put_object(Bucket=BUCKET, Key=f"multifile/{f.name}", Body=f.read_bytes())
            client.put_object(Bucket=BUCKET, Key=f"big/{BIG.name}", Body=BIG.read_bytes())
            server.client = client
            server.requests()
            yield server
    finally:
        server.stop()


def _objects(client, prefix: str) -> dict[str, bytes]:
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
    return {o["Key"][len(prefix):]: client.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read()
            for o in listed}


def _local_copy(tmp_path: Path, src: Path) -> Path:
    d = tmp_path / src.name
    shutil.copytree(src, d)
    return d


def _cli(*args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gtidx", *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


def _counted(monkeypatch) -> list:
    """The ranges gtidx asks the object store for: (path, start, end, bytes)."""
    ranges = []
    cat = storage.FsspecStore.cat

    def counting(self, path, start, end, etag=None):
        data = cat(self, path, start, end, etag)
        ranges.append((path, start, end, len(data)))
        return data
    monkeypatch.setattr(storage.FsspecStore, "cat", counting)
    return ranges


# -- the same answers -------------------------------------------------------------------

def _build_both(s3, tmp_path, prefix: str, src: Path):
    local = _local_copy(tmp_path, src)
    for r in gtidx.build(str(local)):
        assert not isinstance(r, Exception), r
    for r in gtidx.build(f"s3://{BUCKET}/{prefix}/"):
        assert not isinstance(r, Exception), r
        assert r.action == "built"
    return local


def test_s3_build_writes_the_same_index_with_one_put_each(s3, tmp_path):
    s3.client.copy_object(Bucket=BUCKET, Key="one/master-bin.000018",
                          CopySource={"Bucket": BUCKET, "Key": "multifile/master-bin.000018"})
    s3.requests()
    local = _local_copy(tmp_path, MULTI)
    results = list(gtidx.build(f"s3://{BUCKET}/one/"))
    assert [r.action for r in results] == ["built"]
    puts = [r for r in s3.requests() if r[0] == "PUT"]
    # the index with one PUT, its fingerprint with one more (beside it, bound to the index's ETag)
    assert [p for _, p, _ in puts] == [f"/{BUCKET}/one/master-bin.000018.idx",
                                       f"/{BUCKET}/one/.master-bin.000018.idx.gtidx"]
    assert [r.action for r in gtidx.build(str(local / "master-bin.000018"))] == ["built"]
    objects = _objects(s3.client, "one/")
    assert objects["master-bin.000018.idx"] == (local / "master-bin.000018.idx").read_bytes()
    # built again: valid and current (its fingerprint found and matched): nothing written
    again = list(gtidx.build(f"s3://{BUCKET}/one/"))
    assert [r.action for r in again] == ["skipped"], again
    assert not [r for r in s3.requests() if r[0] == "PUT"]


def test_s3_a_fingerprint_stored_by_an_older_gtidx_is_still_read(s3):
    """A sidecar object written before the fingerprint's byte layout (JSON,
    version 1, bound to its index object by ETag and size) is still read; one
    bound to another index object is not."""
    s3.client.copy_object(Bucket=BUCKET, Key="older/master-bin.000018",
                          CopySource={"Bucket": BUCKET, "Key": "multifile/master-bin.000018"})
    url = f"s3://{BUCKET}/older/master-bin.000018"
    assert [r.action for r in gtidx.build(url)] == ["built"]
    store, index = storage.resolve(url + ".idx")
    meta = IndexMeta.read(index, store)
    head = s3.client.head_object(Bucket=BUCKET, Key="older/master-bin.000018.idx")
    fields = {"v": 1, "size": meta.size, "head_crc32": meta.head_crc32, "tail_crc32": meta.tail_crc32,
              "state": "complete", "page_size": meta.page_size, "span_min": meta.span_min,
              "head_adler32": meta.head_adler32, "tail_adler32": meta.tail_adler32, "binlog_etag": meta.binlog_etag,
              "ranges": [list(r) for r in meta.ranges], "repeats": [list(r) for r in meta.repeats]}
    for etag, read in ((head["ETag"], meta), ('"another"', None)):
        body = json.dumps({**fields, "etag": etag, "index_size": head["ContentLength"]}).encode()
        s3.client.put_object(Bucket=BUCKET, Key="older/.master-bin.000018.idx.gtidx", Body=body)
        assert IndexMeta.read(index, storage.resolve(url + ".idx")[0]) == read


def test_s3_every_offset_answers_as_locally(s3, tmp_path):
    local = _build_both(s3, tmp_path, "multifile", MULTI)
    oracle = json.loads((MULTI / "oracle.json").read_text())
    with gtidx.open(f"s3://{BUCKET}/multifile/") as remote:
        assert [Path(f).name for f in remote.files] == [e["name"] for e in oracle["files"]]
        for entry in oracle["files"]:
            url = f"s3://{BUCKET}/multifile/{entry['name']}"
            assert answers_equal(url, entry, remote, "index") == [], entry["name"]
            assert answers_equal(local / entry["name"], entry, gtidx.open(str(local)), "index") == []


def test_s3_every_gtid_is_found_as_locally(s3, tmp_path):
    for f in MULTI.iterdir():
        if f.name.startswith("master-bin"):
            s3.client.put_object(Bucket=BUCKET, Key=f"seek/{f.name}", Body=f.read_bytes())
    local = _build_both(s3, tmp_path, "seek", MULTI)
    oracle = json.loads((MULTI / "oracle.json").read_text())
    gtids = [g for e in oracle["files"] for g, _, _ in e["groups"]]
    assert len(gtids) > 250
    with gtidx.open(f"s3://{BUCKET}/seek/") as remote, gtidx.open(str(local)) as here:
        for g in gtids:
            a, b = remote.locate(g), here.locate(g)
            assert (Path(a.file).name, a.start, a.end, a.resume) == (Path(b.file).name, b.start, b.end, b.resume)
            assert a.file.startswith(f"s3://{BUCKET}/seek/")
            assert a.via == b.via


def test_s3_index_lines_name_objects_beside_the_index(s3):
    """In an object store every line of master-bin.index means the object of
    its name beside the index (absolute, ``../``, ``./`` alike): the build
    writes under the prefix only, lookups answer from its objects; a line
    naming no object (``..``) is an error naming the line."""
    names = sorted(f.name for f in MULTI.glob("master-bin.0*"))
    for n in names:
        s3.client.copy_object(Bucket=BUCKET, Key=f"lines/{n}", CopySource={"Bucket": BUCKET, "Key": f"multifile/{n}"})
    s3.client.copy_object(Bucket=BUCKET, Key="lines-esc/master-bin.000019",     # another binlog of that name
                          CopySource={"Bucket": BUCKET, "Key": "multifile/master-bin.000021"})
    lines = ["/var/lib/mysql/master-bin.000018", "../lines-esc/master-bin.000019", *(f"./{n}" for n in names[2:])]
    s3.client.put_object(Bucket=BUCKET, Key="lines/master-bin.index", Body="".join(f"{x}\n" for x in lines).encode())
    url = f"s3://{BUCKET}/lines/"
    assert api.list_binlogs(url) == [f"{url}{n}" for n in names]
    assert all(not isinstance(r, Exception) for r in gtidx.build(url))
    assert sorted(_objects(s3.client, "lines/")) == sorted([*names, *(f"{n}.idx" for n in names),
                                                            *(f".{n}.idx.gtidx" for n in names), "master-bin.index"])
    assert sorted(_objects(s3.client, "lines-esc/")) == ["master-bin.000019"]
    gtid, start, end = json.loads((MULTI / "oracle.json").read_text())["files"][1]["groups"][9]
    got = api.seek(gtid, url)
    assert (Path(got.file).name, got.start, got.end, got.via) == ("master-bin.000019", start, end, "index")
    s3.client.put_object(Bucket=BUCKET, Key="lines-bad/master-bin.index", Body=b"./master-bin.000018\n..\n")
    _one_line_error(_cli("build", f"s3://{BUCKET}/lines-bad/"), 3, f"{BUCKET}/lines-bad/master-bin.index",
                    "line 2 '..'", "names no file")


# -- what a lookup costs ------------------------------------------------------------------

def test_s3_lookup_is_a_few_range_gets(s3, tmp_path, monkeypatch):
    """A one-shot ``pos`` on an indexed object: counted on the server, at
    most 4 GETs (the binlog's preamble, the index's fingerprint sidecar, the
    index page, and one GET from the index record the lookup starts from:
    its check and the walk to the target) and 2 HEADs (the binlog's and the
    index's size and ETag); at most 84 KiB of the binlog read: its first
    4 KiB (the preamble) and 64 KiB from the record (plus, past a record's
    span, the rest of a big last group). The binlog's ETag recorded with
    the index stands for the fingerprint: its first and last 64 KiB are not
    read. A ``seek`` reads the file's end too (its end state)."""
    url = f"s3://{BUCKET}/big/{BIG.name}"
    [r] = list(gtidx.build(url))
    assert r.action == "built" and r.records > 30
    etag = s3.client.head_object(Bucket=BUCKET, Key=f"big/{BIG.name}")["ETag"]
    assert f".{BIG.name}.idx.gtidx" in _objects(s3.client, "big/")      # the fingerprint's sidecar object
    store, index = storage.resolve(url + ".idx")
    sidecar = IndexMeta.read(index, store)
    assert sidecar.binlog_etag == etag and sidecar.size == BIG.stat().st_size
    size = BIG.stat().st_size
    local = tmp_path / BIG.name
    shutil.copy(BIG, local)
    targets = [g.end for g in list(api.scan(str(local))[1])[::97]]
    s3.requests()
    ranges = _counted(monkeypatch)
    most = (0, 0)
    for offset in targets:
        ranges.clear()
        got = gtidx.state_at(url, offset)
        assert got.via == "index"
        assert got.position == gtidx.state_at(str(local), offset).position
        reqs = s3.requests()
        gets = [r for r in reqs if r[0] == "GET"]
        heads = [r for r in reqs if r[0] == "HEAD"]
        assert len(gets) <= 4 and len(heads) <= 2 and len(reqs) == len(gets) + len(heads), reqs
        read = [(start, end) for p, start, end, _ in ranges if p == url]
        binlog_bytes = sum(n for p, _, _, n in ranges if p == url)
        assert binlog_bytes <= 4096 + 65536 + 16384 <= 128 << 10, (offset, read)
        assert read[0] == (0, 4096) and len(read) <= 3 and (size - 65536, size) not in read, read
        most = max(most, (binlog_bytes, len(gets)))
    print(f"state_at on {url}: at most {most[1]} GETs, {most[0]} bytes of the binlog per lookup")
    # seek of a GTID in the one file: at most 6 GETs and 3 HEADs (the URL's kind too); its end state
    # is read as well (64 KiB from its last record: the walk to its end), so 4 KiB + 2 x 64 KiB
    most = (0, 0)
    for g in list(api.scan(str(local))[1])[::97]:
        ranges.clear()
        got = api.seek(str(g.gtid), url)
        assert (got.start, got.end, got.via) == (g.start, g.end, "index")
        reqs = s3.requests()
        gets = [r for r in reqs if r[0] == "GET"]
        heads = [r for r in reqs if r[0] == "HEAD"]
        read = [(start, end) for p, start, end, _ in ranges if p == url]
        binlog_bytes = sum(n for p, _, _, n in ranges if p == url)
        assert len(gets) <= 6 and len(heads) <= 3 and len(reqs) == len(gets) + len(heads), reqs
        assert binlog_bytes <= 4096 + 2 * 65536 and (size - 65536, size) not in read, (g.gtid, read)
        most = max(most, (binlog_bytes, len(gets)))
    print(f"seek on {url}: at most {most[1]} GETs, {most[0]} bytes of the binlog per lookup")
    # the whole file is never read, nor more than 8 MiB in one GET
    assert all(end - start <= 8 << 20 for _, start, end, _ in ranges)
    assert size > 3 << 20


def test_s3_a_read_overlapping_held_bytes_asks_only_for_the_rest(s3, monkeypatch):
    """``RemoteFile`` keeps its last ranges: a read that starts or ends
    inside one GETs only the bytes it lacks (an index record's check reads
    the 64 KiB a walk from it reads first; the walk goes on from there)."""
    data = BIG.read_bytes()
    store, path = storage.resolve(f"s3://{BUCKET}/big/{BIG.name}")
    ranges = _counted(monkeypatch)
    with store.open(path) as f:
        assert f.pread(1000, 10_000) == data[10_000:11_000]
        assert f.pread(1000, 10_500) == data[10_500:11_500]          # starts inside: [11000, 11500) asked
        assert f.pread(1000, 20_000) == data[20_000:21_000]
        assert f.pread(1500, 19_500) == data[19_500:21_000]          # ends inside: [19500, 20000) asked
        assert f.pread(800, 10_100) == data[10_100:10_900]           # inside: nothing asked
    assert [(start, end) for _, start, end, _ in ranges] == [(10_000, 11_000), (11_000, 11_500),
                                                             (20_000, 21_000), (19_500, 20_000)]


def _multipart_copy(client, key: str, body: bytes) -> str:
    """``body`` uploaded again as ``key`` in one multipart part: the same
    bytes, another ETag ("<md5 of md5s>-1"). Returns the new ETag."""
    up = client.create_multipart_upload(Bucket=BUCKET, Key=key)
    part = client.upload_part(Bucket=BUCKET, Key=key, PartNumber=1, UploadId=up["UploadId"], Body=body)
    client.complete_multipart_upload(Bucket=BUCKET, Key=key, UploadId=up["UploadId"],
                                     MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]})
    return client.head_object(Bucket=BUCKET, Key=key)["ETag"]


def test_s3_another_etag_falls_back_to_the_fingerprint(s3, tmp_path, monkeypatch):
    """The ETag recorded with an index only spares reading: the same bytes
    uploaded again in other parts (another ETag) still use the index (its
    fingerprint, first and last 64 KiB, checked); so does an index stored
    before the ETag was (no ``binlog_etag``: ``build`` then records it,
    one PUT of the sidecar); other bytes of the same size make it stale (a
    scan answers). Content decides, never the ETag alone."""
    key = f"etag/{BIG.name}"
    data = BIG.read_bytes()
    s3.client.put_object(Bucket=BUCKET, Key=key, Body=data)
    url = f"s3://{BUCKET}/{key}"
    [r] = list(gtidx.build(url))
    assert r.action == "built"
    local = tmp_path / BIG.name
    shutil.copy(BIG, local)
    offset = [g.end for g in api.scan(str(local))[1]][1000]
    want = gtidx.state_at(str(local), offset).position
    ranges = _counted(monkeypatch)
    size = len(data)

    def lookup():
        ranges.clear()
        got = gtidx.state_at(url, offset)
        assert got.position == want
        return got.via, [(start, end) for p, start, end, _ in ranges if p == url]

    via, read = lookup()
    assert via == "index" and (size - 65536, size) not in read
    old = s3.client.head_object(Bucket=BUCKET, Key=key)["ETag"]
    assert _multipart_copy(s3.client, key, data) != old
    via, read = lookup()
    assert via == "index" and (size - 65536, size) in read, read        # the fingerprint decided
    # an index stored before the ETag was: its sidecar without binlog_etag
    sidecar_key = f"etag/.{BIG.name}.idx.gtidx"
    store, index = storage.resolve(url + ".idx")
    IndexMeta.read(index, store).replace(binlog_etag=None).write_object(store, index)
    assert IndexMeta.read(index, storage.resolve(url + ".idx")[0]).binlog_etag is None
    s3.client.put_object(Bucket=BUCKET, Key=key, Body=data)                    # its first ETag again
    via, read = lookup()
    assert via == "index" and (size - 65536, size) in read, read
    # build again: the index is kept (valid and current), its sidecar gains the ETag: one PUT
    s3.requests()
    [r] = list(gtidx.build(url))
    assert (r.action, r.reason, r.recorded) == ("skipped", "index is valid and current", "ETag"), r
    assert [p for m, p, _ in s3.requests() if m == "PUT"] == [f"/{BUCKET}/{sidecar_key}"]
    assert IndexMeta.read(index, storage.resolve(url + ".idx")[0]).binlog_etag == old
    via, read = lookup()
    assert via == "index" and (size - 65536, size) not in read, read
    # other bytes of the same size (its end rewritten): the index is stale, a scan answers
    s3.client.put_object(Bucket=BUCKET, Key=key, Body=data[:-70000] + bytes(70000))
    via, read = lookup()
    assert via == "scan"


def test_s3_build_reads_in_large_ranges(s3, monkeypatch):
    """``build`` reads the binlog once, in GETs growing from 64 KiB to 8 MiB (x4 each)."""
    s3.client.copy_object(Bucket=BUCKET, Key=f"bigbuild/{BIG.name}",
                          CopySource={"Bucket": BUCKET, "Key": f"big/{BIG.name}"})
    ranges = _counted(monkeypatch)
    [r] = list(gtidx.build(f"s3://{BUCKET}/bigbuild/"))
    assert r.action == "built"
    walked = [(s, e) for p, s, e, _ in ranges if p.endswith(BIG.name)]
    assert sum(e - s for s, e in walked) <= BIG.stat().st_size + 3 * 65536     # once (plus the fingerprint)
    assert len(walked) <= 6, walked


# -- the CLI: URLs, credentials, failures ---------------------------------------------------

def test_s3_cli_pos_seek_build(s3, tmp_path):
    for f in MULTI.iterdir():
        if f.name.startswith("master-bin"):
            s3.client.put_object(Bucket=BUCKET, Key=f"cli/{f.name}", Body=f.read_bytes())
    url = f"s3://{BUCKET}/cli/"
    built = _cli("build", "--json", url)
    assert built.returncode == 0, built.stderr
    assert [r["action"] for r in json.loads(built.stdout)["results"]] == ["built"] * 5
    oracle = json.loads((MULTI / "oracle.json").read_text())
    entry = oracle["files"][2]
    gtid, start, end = entry["groups"][10]
    got = _cli("seek", "--json", "--gtid", gtid, url)
    assert got.returncode == 0, got.stderr
    loc = json.loads(got.stdout)
    assert (loc["file"], loc["start"], loc["end"], loc["via"]) == (url + entry["name"], start, end, "index")
    offset, answer = next((o, a) for o, a in entry["pos"] if o > 50000 and a)
    got = _cli("pos", "--json", url + entry["name"], str(offset))
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["position"] == str(gtidx.Position.parse(answer))
    # the endpoint as a storage option instead of AWS_ENDPOINT_URL
    env = {k: v for k, v in os.environ.items() if k != "AWS_ENDPOINT_URL"}
    got = subprocess.run([sys.executable, "-m", "gtidx", "pos", url + entry["name"], str(offset),
                          "--storage-option", f"endpoint_url={s3.url}"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT)})
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == str(gtidx.Position.parse(answer))


def _one_line_error(r: subprocess.CompletedProcess, code: int, *words: str) -> None:
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_s3_missing_bucket_prefix_object(s3):
    _one_line_error(_cli("seek", "--gtid", "0-1-1", "s3://no-such-bucket-gtidx/x/"), 3, "no such object")
    _one_line_error(_cli("seek", "--gtid", "0-1-1", f"s3://{BUCKET}/no/such/prefix/"), 3,
                    f"s3://{BUCKET}/no/such/prefix/", "no such object")
    _one_line_error(_cli("pos", f"s3://{BUCKET}/multifile/master-bin.999999", "4"), 3, "master-bin.999999")
    _one_line_error(_cli("build", f"s3://{BUCKET}/no/such/prefix/"), 3, "no such object")
    r = _cli("pos", f"s3://{BUCKET}/multifile/master-bin.000018", "4", "--storage-option", "nonsense")
    assert r.returncode == 2 and "is not KEY=VALUE" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_s3_endpoint_down(s3):
    port = free_port()            # nothing listens there
    r = _cli("pos", f"s3://{BUCKET}/multifile/master-bin.000018", "4", env={"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"})
    _one_line_error(r, 3, "Could not connect", "endpoint")


def test_s3_not_an_object_store_url(s3, tmp_path):
    _one_line_error(_cli("pos", "nosuchproto://x/y", "4"), 2, "nosuchproto")
    # file:// URLs are local paths
    local = _local_copy(tmp_path, MULTI)
    r = _cli("pos", f"file://{local}/master-bin.000018", "531")
    assert r.returncode == 0, r.stderr


@pytest.fixture(scope="module")
def s3_auth(tmp_path_factory):
    """A moto_server that checks credentials (its IAM enforcement starts
    after the few actions that create a user, its key and the bucket)."""
    server = MotoServer(tmp_path_factory.mktemp("moto-auth"), env={"INITIAL_NO_AUTH_ACTION_COUNT": "4"})
    try:
        anon = dict(endpoint_url=server.url, region_name="us-east-1", aws_access_key_id="x",
                    aws_secret_access_key="x")
        iam = boto3.client("iam", **anon)
        iam.create_user(UserName="gtidx")
        iam.put_user_policy(UserName="gtidx", PolicyName="all", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
        key = iam.create_access_key(UserName="gtidx")["AccessKey"]
        server.key = (key["AccessKeyId"], key["SecretAccessKey"])
        client = server.bucket(BUCKET, aws_access_key_id=key["AccessKeyId"],
                               aws_secret_access_key=key["SecretAccessKey"])
        f = MULTI / "master-bin.000018"
        client.put_object(Bucket=BUCKET, Key=f"auth/{f.name}", Body=f.read_bytes())
        server.client = client
        yield server
    finally:
        server.stop()


def test_s3_wrong_credentials(s3_auth):
    url = f"s3://{BUCKET}/auth/master-bin.000018"
    good = {"AWS_ENDPOINT_URL": s3_auth.url, "AWS_ACCESS_KEY_ID": s3_auth.key[0],
            "AWS_SECRET_ACCESS_KEY": s3_auth.key[1]}
    r = _cli("pos", url, "531", env=good)
    assert r.returncode == 0, r.stderr
    bad = {**good, "AWS_SECRET_ACCESS_KEY": "wrong"}
    _one_line_error(_cli("pos", url, "531", env=bad), 3, "access denied", "credentials")
    _one_line_error(_cli("build", f"s3://{BUCKET}/auth/", env=bad), 3, "access denied")
    # nothing written by the build that could not read
    assert sorted(_objects(s3_auth.client, "auth/")) == ["master-bin.000018"]


def test_s3_catalog_without_list_permission(s3_auth, caplog):
    """A reader allowed to get objects but not to list the prefix, naming
    the binlogs by ``master-bin.index``: the catalog's entries cannot be
    checked with a LIST; the lookup says so once and goes on as before
    (each entry checked when its file is opened), the answer right."""
    import logging
    full = {"endpoint_url": s3_auth.url, "key": s3_auth.key[0], "secret": s3_auth.key[1]}
    prefix = "nolist/"
    for f in MULTI.iterdir():
        if f.name.startswith("master-bin"):
            s3_auth.client.put_object(Bucket=BUCKET, Key=prefix + f.name, Body=f.read_bytes())
    url = f"s3://{BUCKET}/{prefix}"
    assert all(not isinstance(r, Exception) for r in gtidx.build(url, storage_options=full))
    gtidx.build_catalog(url, storage_options=full)
    iam = boto3.client("iam", endpoint_url=s3_auth.url, region_name="us-east-1",
                       aws_access_key_id=s3_auth.key[0], aws_secret_access_key=s3_auth.key[1])
    iam.create_user(UserName="reader")
    iam.put_user_policy(UserName="reader", PolicyName="get", PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}]}))
    key = iam.create_access_key(UserName="reader")["AccessKey"]
    reader = {"endpoint_url": s3_auth.url, "key": key["AccessKeyId"], "secret": key["SecretAccessKey"]}
    with pytest.raises(gtidx.GtidxError):
        api.list_binlogs(url, storage_options=reader)             # no LIST for this reader
    gtid, start, end = json.loads((MULTI / "oracle.json").read_text())["files"][1]["groups"][7]
    caplog.set_level(logging.WARNING, logger="gtidx")
    got = api.seek(gtid, url + "master-bin.index", storage_options=reader)
    assert (Path(got.file).name, got.start, got.end) == ("master-bin.000019", start, end)
    assert caplog.text.count("cannot list the prefix to check the catalog's entries") == 1, caplog.text


# -- indexes apart from the binlogs ---------------------------------------------------------

def test_s3_index_dir_local_for_an_archive(s3, tmp_path):
    """An archive gtidx may not write to: ``build --index-dir DIR`` puts the
    indexes in DIR, mirroring bucket and keys, and writes nothing to the
    bucket; lookups with the same ``--index-dir`` use them, without it they scan."""
    for f in MULTI.iterdir():
        if f.name.startswith("master-bin"):
            s3.client.put_object(Bucket=BUCKET, Key=f"apart/{f.name}", Body=f.read_bytes())
    url = f"s3://{BUCKET}/apart/"
    idx = tmp_path / "idx"
    s3.requests()
    r = _cli("build", "--json", "--index-dir", str(idx), url)
    assert r.returncode == 0, r.stderr
    assert not [q for q in s3.requests() if q[0] in ("PUT", "POST", "DELETE")]
    assert sorted(p.name for p in (idx / BUCKET / "apart").iterdir()) == \
        [f"master-bin.0000{n}.idx" for n in range(18, 23)]
    assert sorted(_objects(s3.client, "apart/")) == [f"master-bin.0000{n}" for n in range(18, 23)] + \
        ["master-bin.index"]
    entry = json.loads((MULTI / "oracle.json").read_text())["files"][3]
    gtid, start, end = entry["groups"][-5]
    with_dir = json.loads(_cli("seek", "--json", "--gtid", gtid, "--index-dir", str(idx), url).stdout)
    assert (with_dir["start"], with_dir["end"], with_dir["via"]) == (start, end, "index")
    without = _cli("seek", "--json", "--gtid", gtid, url)
    assert json.loads(without.stdout)["via"] == "scan" and "no usable index" in without.stderr
    # a library caller: index_root=
    with gtidx.open(url, index_root=str(idx)) as logs:
        assert answers_equal(url + entry["name"], entry, logs, "index") == []


def test_s3_index_dir_url_for_local_binlogs(s3, tmp_path):
    """Local binlogs, their indexes in the object store (one PUT each),
    mirrored under the prefix by the binlogs' absolute paths; nothing
    written beside the binlogs. An index beside a binlog still serves when
    the index root has none for it."""
    local = _local_copy(tmp_path, MULTI)
    root = f"s3://{BUCKET}/indexes/"
    s3.requests()
    results = list(gtidx.build(str(local), index_root=root))
    assert [r.action for r in results] == ["built"] * 5
    assert all(r.index.startswith(root + str(local).lstrip("/")) for r in results), results[0].index
    puts = [p for m, p, _ in s3.requests() if m == "PUT"]
    assert len([p for p in puts if p.endswith(".idx")]) == 5 and len(puts) == 10
    assert not list(local.glob("*.idx"))
    oracle = json.loads((MULTI / "oracle.json").read_text())
    with gtidx.open(str(local), index_root=root) as logs:
        for entry in oracle["files"]:
            assert answers_equal(local / entry["name"], entry, logs, "index") == []
    # an index beside the binlog, none under the root: read from beside
    other = tmp_path / "other"
    shutil.copytree(MULTI, other)
    assert [r.action for r in gtidx.build(str(other / "master-bin.000020"))] == ["built"]
    entry = oracle["files"][2]
    with gtidx.open(str(other), index_root=root) as logs:
        assert answers_equal(other / entry["name"], entry, logs, "index") == []


def test_s3_storage_options_in_the_library(s3, monkeypatch):
    """``storage_options=`` instead of the environment: endpoint and keys."""
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    opts = {"endpoint_url": s3.url, "key": "testing", "secret": "testing"}
    entry = json.loads((MULTI / "oracle.json").read_text())["files"][0]
    url = f"s3://{BUCKET}/multifile/{entry['name']}"
    with gtidx.open(url, storage_options=opts) as logs:
        assert answers_equal(url, entry, logs, None) == []
    gtid, start, _ = entry["groups"][3]
    assert api.seek(gtid, f"s3://{BUCKET}/multifile/", storage_options=opts).start == start
    with pytest.raises(gtidx.GtidxError) as e:
        gtidx.state_at(url, 4, storage_options={"endpoint_url": s3.url, "no_such_option": 1})
    assert e.value.exit_code == 2 and "bad storage option" in str(e.value), e.value


def test_s3_an_object_replaced_while_read_is_never_mixed(s3):
    """A binlog replaced by another object between the HEAD that opened it and
    a later range GET (a re-upload, a name reused after a failover): the
    reads are pinned to the object first seen (If-Match on its ETag), so the
    lookup fails with one clear line (exit 3) instead of mixing the bytes of
    two objects; so does one cut short (a truncated upload)."""
    key = "replaced/master-bin.000002"
    data = BIG.read_bytes()
    same_size = data[:-80000] + bytes(80000)        # as long, other bytes where the read goes
    url = f"s3://{BUCKET}/{key}"
    for body in (same_size, data[:len(data) // 2]):
        s3.client.put_object(Bucket=BUCKET, Key=key, Body=BIG.read_bytes())
        store, path = storage.resolve(url)
        f = store.open(path)
        first = f.pread(4096, 0)
        assert first == data[:4096]
        s3.client.put_object(Bucket=BUCKET, Key=key, Body=body)
        with pytest.raises(gtidx.errors.GtidxIOError) as e:
            f.pread(65536, len(data) - 70000)
        assert e.value.exit_code == 3 and "changed" in e.value.message and e.value.path == url
        f.close()


# -- the catalog of a prefix ------------------------------------------------------------------

def test_s3_catalog_makes_a_multi_file_seek_a_handful_of_requests(s3, tmp_path):
    """A ``seek`` over a 5-file prefix with indexes: without a catalog every
    file's preamble is read for its start state; with one (one GET) only
    the file holding the GTID is opened: the LIST that names the binlogs
    shows every object's size and ETag as the catalog has them, so the
    newest file's end state is its entry's, unread. Counted on the server."""
    for f in MULTI.iterdir():
        if f.name.startswith("master-bin.0"):
            s3.client.put_object(Bucket=BUCKET, Key=f"cat/{f.name}", Body=f.read_bytes())
    url = f"s3://{BUCKET}/cat/"
    assert all(not isinstance(r, Exception) for r in gtidx.build(url))
    gtids = [g for e in json.loads((MULTI / "oracle.json").read_text())["files"] for g, _, _ in e["groups"]]
    target = gtids[len(gtids) // 3]
    s3.requests()
    before = api.seek(target, url)
    without = s3.requests()
    cat, counts = gtidx.build_catalog(url)
    assert counts == {"kept": 0, "walked": 5, "failed": 0} and len(cat.histories) == 1
    puts = [p for m, p, _ in s3.requests() if m == "PUT"]
    assert puts == [f"/{BUCKET}/cat/gtidx-catalog.json"]           # one PUT: whole or not at all
    after = api.seek(target, url)
    with_catalog = s3.requests()
    assert (after.file, after.start, after.end, after.via) == (before.file, before.start, before.end, before.via)
    gets = lambda reqs: [r for r in reqs if r[0] == "GET"]      # noqa: E731
    print(f"seek {target} on {url}: without a catalog {len(without)} requests ({len(gets(without))} GETs), "
          f"with {len(with_catalog)} ({len(gets(with_catalog))} GETs)")
    assert len(with_catalog) <= len(without) // 2, (without, with_catalog)
    # one LIST, the catalog, then the file holding the GTID and its index only: 8 requests
    assert [p for _, p, _ in with_catalog if "list-type" in p] == [f"/{BUCKET}?list-type=2&prefix=cat/&delimiter=/"
                                                                   "&encoding-type=url"]
    opened = {p.split("/")[-1] for _, p, _ in with_catalog if "master-bin" in p}
    assert opened == {Path(after.file).name, Path(after.file).name + ".idx", f".{Path(after.file).name}.idx.gtidx"}
    assert len(with_catalog) <= 8, with_catalog
    assert sum(1 for _, p, _ in with_catalog if p.endswith("gtidx-catalog.json")) == 1
    shown = _cli("catalog", "show", "--json", url)
    assert shown.returncode == 0, shown.stderr
    files = json.loads(shown.stdout)["files"]
    assert [e["name"] for e in files] == [f"master-bin.0000{n}" for n in range(18, 23)]
    assert {e["index"]["status"] for e in files} == {"ok"}
    # every GTID answers as without the catalog
    with gtidx.open(url) as logs:
        for g in gtids[::5]:
            x, y = logs.locate(g), api.seek(g, str(MULTI))
            assert (Path(x.file).name, x.start, x.end) == (Path(y.file).name, y.start, y.end)
    # a replaced object: its entry is not trusted (fingerprint), catalog build walks it again
    s3.client.put_object(Bucket=BUCKET, Key="cat/master-bin.000022",
                         Body=(FIXTURES / "mariadb-11.8" / "multifile" / "master-bin.000022").read_bytes())
    r = _cli("seek", "--gtid", target, url)
    assert r.returncode == 0 and "catalog entry is stale" in r.stderr, r.stderr
    cat, counts = gtidx.build_catalog(url)
    assert counts["walked"] == 1 and len(cat.histories) == 2
    r = _cli("seek", "--gtid", target, url)          # one history holds it: answered there, and said
    assert r.returncode == 0 and "history 1 of these binlogs" in r.stdout, r.stderr
    r = _cli("seek", "--replica", target, url)        # a replica's start over both: refused
    assert r.returncode == 2 and "2 histories" in r.stderr


def test_s3_a_catalog_edited_by_hand_changes_no_answer(s3):
    """The catalog of a prefix, one entry's max_timestamp and ranges edited
    (the objects untouched, the checksum as it was): not used (one warning),
    seek --gtid and seek --time answer as without a catalog."""
    from conftest import forge_catalog
    prefix = "edited/"
    for f in MULTI.iterdir():
        if f.name.startswith("master-bin.0"):
            s3.client.put_object(Bucket=BUCKET, Key=prefix + f.name, Body=f.read_bytes())
    url = f"s3://{BUCKET}/{prefix}"
    lookups = [("seek", "--gtid", "0-1-400"), ("seek", "--time", "@1795317387")]
    plain = [_cli(*args, url) for args in lookups]
    assert [r.returncode for r in plain] == [0, 0], [r.stderr for r in plain]
    gtidx.build_catalog(url)
    key = prefix + "gtidx-catalog.json"
    raw = json.loads(s3.client.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    forge_catalog(raw)
    s3.client.put_object(Bucket=BUCKET, Key=key, Body=json.dumps(raw).encode())
    for args, want in zip(lookups, plain):
        r = _cli(*args, url)
        assert (r.returncode, r.stdout) == (want.returncode, want.stdout), (args, r.stderr)
        said = [line for line in r.stderr.splitlines() if "gtidx-catalog.json" in line]
        assert len(said) == 1 and "sha256 does not match" in said[0], r.stderr


HISTORY_118 = [FIXTURES / "mariadb-11.8" / "multifile" / "master-bin.000022",     # ends at C
               FIXTURES / "mariadb-11.8" / "multifile" / "master-bin.000023",     # 487 bytes: C, no group
               FIXTURES / "mariadb-11.8" / "manydomains" / "master-bin.000025"]   # starts at C
SAME_SIZE_118 = FIXTURES / "mariadb-11.8" / "empty" / "master-bin.000017"          # 487 bytes, an older state


def test_s3_catalog_entries_are_checked_with_one_list(s3, tmp_path, caplog):
    """With a catalog, the files a lookup does not open are checked against
    the LIST that names them (size and ETag per object): one binlog replaced
    by another of the same size (real ones: two empty binlogs of one server,
    487 bytes each, other GTID_LISTs) is noticed although the lookup never
    opens it (its entry is not taken: a warning, the file read instead), and
    the answer is the one a catalog-less lookup over the same bytes gives.
    The same bytes uploaded again in other parts (another ETag, same size)
    are checked by their fingerprint and still trusted: content decides."""
    import logging
    prefix = "listed/"
    names = ["master-bin.000022", "master-bin.000023", "master-bin.000024"]
    here = tmp_path / "same-bytes"
    here.mkdir()
    for name, src in zip(names, HISTORY_118):
        s3.client.put_object(Bucket=BUCKET, Key=prefix + name, Body=src.read_bytes())
        shutil.copy(src, here / name)
    url = f"s3://{BUCKET}/{prefix}"
    assert all(not isinstance(r, Exception) for r in gtidx.build(url))
    cat, _ = gtidx.build_catalog(url)
    assert len(cat.histories) == 1
    assert all(e["etag"] == s3.client.head_object(Bucket=BUCKET, Key=prefix + e["name"])["ETag"] for e in cat.files)
    with Binlog(str(here / names[2])) as b:
        late = [g.gtid for g in b.groups()][5]
    with Binlog(str(here / names[0])) as b:
        early = [g.gtid for g in b.groups()][-3]
    caplog.set_level(logging.WARNING, logger="gtidx")

    def seek(g):
        s3.requests()
        caplog.clear()
        got = api.seek(str(g), url)
        want = api.seek(str(g), str(here))           # no catalog there: every file read
        assert (Path(got.file).name, got.start, got.end) == (Path(want.file).name, want.start, want.end)
        return Path(got.file).name, s3.requests(), caplog.text

    for g, holder in ((late, names[2]), (early, names[0])):
        name, reqs, said = seek(g)
        assert name == holder and "stale" not in said
        assert not [p for _, p, _ in reqs if names[1] in p], reqs             # the empty one is never opened
    # the same bytes again in one multipart part: another ETag; opened, fingerprint checked, still trusted
    _multipart_copy(s3.client, prefix + names[0], HISTORY_118[0].read_bytes())
    name, reqs, said = seek(late)
    assert name == names[2] and "stale" not in said and "1 binlog object(s) have another ETag" in said, said
    assert [p for _, p, _ in reqs if p.endswith(names[0])], reqs
    cat, counts = gtidx.build_catalog(url)             # kept (same content), its new ETag recorded
    assert counts == {"kept": 3, "walked": 0, "failed": 0}
    assert cat.files[0]["etag"] == s3.client.head_object(Bucket=BUCKET, Key=prefix + names[0])["ETag"]
    name, reqs, said = seek(late)
    assert not [p for _, p, _ in reqs if p.endswith(names[0])], reqs
    # another binlog of the same size under the empty one's name: noticed, read, answered right (its
    # fingerprint's CRC32s equal the first one's: a CRC32 over whole events that end with their own
    # CRC32 depends on their lengths only; its Adler-32s and GTID_LIST tell it apart)
    s3.client.put_object(Bucket=BUCKET, Key=prefix + names[1], Body=SAME_SIZE_118.read_bytes())
    shutil.copy(SAME_SIZE_118, here / names[1])
    assert SAME_SIZE_118.stat().st_size == HISTORY_118[1].stat().st_size
    for g, other in ((late, names[0]), (early, names[2])):
        name, reqs, said = seek(g)
        assert f"{names[1]}: catalog entry is stale" in said, said
        lists = [p for _, p, _ in reqs if "list-type" in p]
        print(f"seek {g} on {url} with one entry replaced: {len(reqs)} requests, {len(lists)} LIST")
        assert len(lists) == 1 and not [p for _, p, _ in reqs if other in p], reqs
    # the LIST, the catalog, the replaced file checked (its 487 bytes: HEAD, GET), the file holding the
    # GTID and its index (5), and the replaced file read for what it holds: its old index no longer
    # matches it (the fingerprint's Adler-32s see the other content; its CRC32s alone did not), so
    # learning its ranges opens it with its index's sidecar, and the scan once more with its index:
    # 19 requests. (The GTID early in the series is looked for in all of its file now: the replaced
    # file's older GTID_LIST makes seq_nos go down, so a GTID may be there twice.)
    name, reqs, said = seek(late)
    assert len(reqs) <= 19, reqs


def test_s3_readme_archives_story(s3):
    """The README's S3 recipes, each command run as written against moto_server
    (the fixture's AWS_* variables), with its example prefix mapped onto a
    copy of the Quickstart's binlogs (MariaDB's) and of the README's MySQL
    binlogs: each exits 0; the point-in-time answer is the first group at
    that second or later, the MySQL transaction found and shown as in the
    local files, through the index built in the store."""
    from test_readme import readme_blocks
    body, mysql = [b for section, lang, b, _ in readme_blocks()
                   if section == "Index and search an S3 archive" and lang == "sh"]
    prefix = "readme/binlogs/"
    for f in MULTI.iterdir():
        if f.name.startswith("master-bin"):
            s3.client.put_object(Bucket=BUCKET, Key=prefix + f.name, Body=f.read_bytes())
    outputs = []
    for line in body.strip().splitlines():
        args = shlex.split(line.replace("s3://backups/db1/binlogs/", f"s3://{BUCKET}/{prefix}"))
        assert args[0] == "gtidx", line
        r = _cli(*args[1:])
        assert r.returncode == 0, (line, r.stdout, r.stderr)
        outputs.append(r.stdout)
    answer = json.loads(outputs[-1])
    files = api.list_binlogs(MULTI)
    first = next((f, g) for f in files for g in api.scan(f)[1] if g.timestamp >= api.parse_time("2026-11-22T03:16:28Z"))
    assert (os.path.basename(answer["file"]), answer["offset"], answer["gtid"]) == \
        (os.path.basename(first[0]), first[1].start, str(first[1].gtid))
    url = _put(s3, "readme/mysql", {f.name: f for f in MYSQL.glob("binlog.0*")})
    outputs = []
    for line in mysql.strip().splitlines():
        r = _cli(*shlex.split(line.replace("s3://backups/db2/binlogs/", url))[1:])
        assert r.returncode == 0, (line, r.stdout, r.stderr)
        outputs.append(r.stdout)
    gtid = shlex.split(mysql.strip().splitlines()[1])[3]
    loc = api.seek(gtid, str(MYSQL))
    assert outputs[1].split()[1:] == [url + Path(loc.file).name, "start", str(loc.start), "end", str(loc.end),
                                      "resume", str(loc.resume), "(via", "index)"], outputs[1]
    want = api.show(str(MYSQL), gtid=gtid).as_dict()
    assert json.loads(outputs[2]) == {**want, "file": url + Path(want["file"]).name}


# -- throttling and timeouts: a fault-injecting proxy (tests/s3faults.py) in front of moto_server ----

class FaultProxy:
    """tests/s3faults.py as a child process in front of ``upstream``."""

    def __init__(self, upstream: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "s3faults.py"), str(self.port), upstream],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            try:
                self.set()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("the fault proxy did not start")
                time.sleep(0.05)

    def set(self, **faults) -> dict:
        query = "&".join(f"{k}={v}" for k, v in faults.items())
        return json.loads(urllib.request.urlopen(f"{self.url}/__faults__?{query}", timeout=5).read())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


@pytest.fixture
def faults(s3):
    proxy = FaultProxy(s3.url)
    try:
        yield proxy
    finally:
        proxy.stop()


def _pos_through(proxy, *extra) -> subprocess.CompletedProcess:
    entry = json.loads((MULTI / "oracle.json").read_text())["files"][1]
    return _cli("pos", f"s3://{BUCKET}/multifile/{entry['name']}", "4", *extra,
                env={"AWS_ENDPOINT_URL": proxy.url})


def test_s3_throttling_is_retried_with_backoff(faults):
    """S3 answers SlowDown (503) to the first requests: they are retried
    (botocore's and s3fs's backoff, as S3 convention expects) and the
    answer is the same."""
    want = _pos_through(faults)
    assert want.returncode == 0, want.stderr
    faults.set(slowdown=3)
    got = _pos_through(faults)
    assert got.returncode == 0, got.stderr
    assert got.stdout == want.stdout
    assert faults.set()["throttled"] == 3


def test_s3_throttling_that_persists_is_one_line_exit_3(faults):
    faults.set(slowdown=10000)
    t0 = time.monotonic()
    r = _pos_through(faults, "--storage-option", 'config_kwargs={"retries": {"max_attempts": 2}}')
    _one_line_error(r, 3, "throttl")
    assert time.monotonic() - t0 < 60


def test_s3_a_read_that_times_out_is_one_line_exit_3(faults):
    faults.set(delay=3)
    r = _pos_through(faults, "--storage-option",
                     'config_kwargs={"read_timeout": 1, "connect_timeout": 1, "retries": {"max_attempts": 1}}')
    _one_line_error(r, 3, "timed out")


def _faulty_answers(url: str, local: Path, proxy, only=("seek", "pos", "show")) -> dict:
    """The answers of MySQL lookups through ``proxy``, as ``local``'s files
    give them: seek of a GTID, pos, show (their text with ``url`` for the
    local directory; not how, by index or scan), or the GtidxError each raised."""
    oracle = json.loads((local / "oracle.json").read_text())
    f = oracle["files"][1]
    gtid, start = f["groups"][5][:2]
    opts = {"endpoint_url": proxy.url}
    calls = {"seek": lambda: api.seek(gtid, url, storage_options=opts),
             "pos": lambda: api.state_at(url + f["name"], start, storage_options=opts),
             "show": lambda: api.show(url, gtid=gtid, storage_options=opts).as_dict()}
    out = {}
    for name in only:
        try:
            answer = calls[name]()
        except gtidx.GtidxError as e:
            out[name] = e
            continue
        # an index read that failed is an index not used: the same answer by scan
        answer = {k: v for k, v in answer.items() if k != "via"} if isinstance(answer, dict) else \
            answer._replace(via="")
        out[name] = str(answer).replace(url, str(local) + "/")
    return out


def test_s3_mysql_lookups_on_a_faulty_store_answer_as_locally_or_say_where(s3, tmp_path, faults):
    """A MySQL archive behind a store that cuts bodies (half the bytes, with
    a Content-Length that says so or one that does not), drops connections
    or trickles its answers: at every ranged GET of seek, pos, show and
    build in turn, each gives the local files' answer (a cut answer is asked
    for again; botocore retries a dropped connection) or fails exit 3 naming
    the object and the offset of the read (an index whose read fails is not
    used: the answer by scan); never another answer, and an index in the
    store is the local build's or none."""
    src = MYSQL.parent / "rotated"
    names = sorted(f.name for f in src.glob("binlog.0*"))[:2]     # the second holds the transaction looked up
    url = _put(s3, "myfaults", {n: src / n for n in names})
    local = tmp_path / "rotated"
    local.mkdir()
    for n in (*names, "oracle.json"):
        shutil.copyfile(src / n, local / n)
    want = {"scan": _faulty_answers(str(local) + "/", local, faults)}
    assert not any(isinstance(v, Exception) for v in want["scan"].values()), want
    for r in gtidx.build(str(local)):
        assert not isinstance(r, Exception), r
    want["index"] = _faulty_answers(str(local) + "/", local, faults)
    indexes = {n + ".idx": (local / (n + ".idx")).read_bytes() for n in names}

    def failed_where(e, phase) -> None:
        assert isinstance(e, gtidx.GtidxError) and e.exit_code == 3, (phase, e)
        assert e.path.startswith(url) and e.offset is not None and "\n" not in str(e), (phase, e)

    def index_objects() -> dict:
        return {k: v for k, v in _objects(s3.client, "myfaults/").items() if k.endswith(".idx")}
    healed = failed = 0
    for phase in ("scan", "index"):
        if phase == "index":
            faults.set(short=0, skip=0)
            assert all(not isinstance(r, Exception) for r in gtidx.build(url, storage_options={
                "endpoint_url": faults.url}))
        reads = faults.set()["ranged"]
        _faulty_answers(url, local, faults)
        reads = faults.set()["ranged"] - reads
        assert reads >= 3, reads
        # by scan every read in turn; through the indexes (their pages, then the same walks) every third
        for n, k in enumerate(range(0, reads, 1 if phase == "scan" else 3)):
            faults.set(short=1 + n % 2, skip=k)        # odd: the second read is cut too
            # seek at each; pos and show (reads of their own) at every third
            got = _faulty_answers(url, local, faults, ("seek", "pos", "show") if n % 3 == 0 else ("seek",))
            for name, answer in got.items():
                if isinstance(answer, Exception):
                    failed_where(answer, (phase, k, name))
                    failed += 1
                else:
                    assert answer == want[phase][name], (phase, k, name)
                    healed += 1
    # build: every read of it cut in turn
    for o in index_objects():
        s3.client.delete_object(Bucket=BUCKET, Key=f"myfaults/{o}")
    faults.set(short=0, skip=0)
    reads = faults.set()["ranged"]
    assert all(not isinstance(r, Exception) for r in gtidx.build(url, storage_options={"endpoint_url": faults.url}))
    reads = faults.set()["ranged"] - reads
    assert index_objects() == indexes
    for k in range(0, reads, max(1, reads // 3)):
        faults.set(short=2, skip=k)
        for r in gtidx.build(url, force=True, storage_options={"endpoint_url": faults.url}):
            if isinstance(r, Exception):
                failed_where(r, ("build", k))
        assert index_objects() == indexes, k
    assert healed and failed
    # the other faults, once each at a read in the middle of a seek by scan, and as the CLI says them
    for o in index_objects():
        s3.client.delete_object(Bucket=BUCKET, Key=f"myfaults/{o}")
    quiet = {"drop": 0, "cut": 0, "short": 0, "trickle": 0, "skip": 0}
    for fault in ("drop", "cut", "trickle"):
        hit = faults.set(**{**quiet, fault: 0.01 if fault == "trickle" else 1, "skip": 1})
        assert _faulty_answers(url, local, faults, ("seek",)) == {"seek": want["scan"]["seek"]}, fault
        now = faults.set(**quiet)
        assert fault == "trickle" or now["dropped"] + now["damaged"] == hit["dropped"] + hit["damaged"] + 1, (hit, now)
    env = {"AWS_ENDPOINT_URL": faults.url}
    faults.set(cut=2, skip=1)
    gtid = json.loads((src / "oracle.json").read_text())["files"][1]["groups"][5][0]
    _one_line_error(_cli("seek", "--gtid", gtid, url, env=env), 3, url, "offset ", "cut")
    faults.set(short=2, skip=0)
    _one_line_error(_cli("pos", url + names[1], "4", env=env), 3, url + names[1], "offset 0", "cut")
    assert faults.set()["dropped"] == 1


def test_s3_an_entry_made_while_its_binlog_was_written_is_compared_first(s3, tmp_path, caplog):
    """An archive synced while the server wrote master-bin.000020: its
    catalog entry (made then, in_use) describes half the file; the whole
    file was uploaded later, the catalog not. A lookup over the prefix does
    not take that entry without comparing the object with it (its seq ranges
    would hide the groups that came since: "not in these binlogs"); every
    GTID is where it is without a catalog."""
    import logging
    from conftest import growing_copy
    from gtidx.binlog.mariadb import Binlog
    name = "master-bin.000020"
    whole = (MULTI / name).read_bytes()
    with Binlog(MULTI / name) as b:
        ends = [g.end for g in b.groups()]
    for f in MULTI.iterdir():
        if f.name.startswith("master-bin.0"):
            s3.client.put_object(Bucket=BUCKET, Key=f"synced/{f.name}", Body=f.read_bytes())
    s3.client.put_object(Bucket=BUCKET, Key=f"synced/{name}", Body=growing_copy(whole, ends[len(ends) // 2]))
    url = f"s3://{BUCKET}/synced/"
    cat, _ = gtidx.build_catalog(url)
    assert [e["in_use"] for e in cat.files] == [False, False, True, False, False]
    s3.client.put_object(Bucket=BUCKET, Key=f"synced/{name}", Body=whole)
    caplog.set_level(logging.WARNING, logger="gtidx")
    oracle = json.loads((MULTI / "oracle.json").read_text())["files"]
    later = [(g, start, end) for e in oracle if e["name"] == name for g, start, end in e["groups"]
             if start >= ends[len(ends) // 2]]
    assert len(later) >= 5
    for g, start, end in later:           # the groups that came after the entry, each by a new lookup
        with gtidx.open(url) as logs:
            loc = logs.locate(g)
        assert (Path(loc.file).name, loc.start, loc.end) == (name, start, end), g
    assert any("stale" in r.getMessage() and name in r.getMessage() for r in caplog.records)


# -- the flavor of objects ----------------------------------------------------------------------

MYSQL = FIXTURES / "mysql-9.7" / "rotated"


def _put(s3, prefix: str, files: dict) -> str:
    """``files`` ({name: Path or bytes}) as the objects of ``prefix``; its URL."""
    for name, f in files.items():
        s3.client.put_object(Bucket=BUCKET, Key=f"{prefix}/{name}", Body=f if isinstance(f, bytes) else f.read_bytes())
    return f"s3://{BUCKET}/{prefix}/"


def test_s3_flavor_is_read_from_the_newest_object_once(s3, monkeypatch):
    """A prefix's flavor is its newest object's: one HEAD and one ranged GET
    of its first 4 KiB at listing, which the series takes over (a seek reads
    those bytes once in all). MySQL's and MariaDB's alike; an older object is
    read only when the newest is no binlog."""
    for prefix, src, pattern, flavor in (("flavor-my", MYSQL, "binlog.0*", "mysql"),
                                         ("flavor-ma", MULTI, "master-bin.0*", "mariadb")):
        files = sorted(src.glob(pattern))
        url = _put(s3, prefix, {f.name: f for f in files})
        s3.requests()
        listing = api.list_series(url)
        reqs = s3.requests()
        assert listing.flavor == flavor and [h.path for h in listing.heads] == [url + files[-1].name]
        assert len(reqs) == 3 and "list-type" in reqs[0][1], reqs
        assert [(m, p) for m, p, _ in reqs[1:]] == [("HEAD", f"/{BUCKET}/{prefix}/{files[-1].name}"),
                                                    ("GET", f"/{BUCKET}/{prefix}/{files[-1].name}")], reqs
        gtid = str(next(iter(api.scan(str(files[-1]))[1])).gtid)
        ranges = _counted(monkeypatch)
        got, want = api.seek(gtid, url), api.seek(gtid, str(src))
        assert (Path(got.file).name, got.start, got.end, got.via) == (Path(want.file).name, want.start, want.end,
                                                                      want.via)
        assert [(s, e) for p, s, e, _ in ranges if p == url + files[-1].name].count((0, 4096)) == 1, ranges
        monkeypatch.undo()
        # the newest object no binlog: the one before it tells
        _put(s3, prefix, {files[-1].name.rsplit(".", 1)[0] + ".999999": b"not a binlog"})
        assert api.list_series(url).flavor == flavor


def test_s3_flavor_of_a_prefix_with_a_catalog_reads_no_binlog(s3):
    """A catalog describing a listed object as the very one it walked (size
    and ETag as the LIST shows them) says MariaDB's: the listing reads the
    catalog (which the series then uses, not read again) and no binlog."""
    url = _put(s3, "flavor-cat", {f.name: f for f in MULTI.glob("master-bin.0*")})
    gtidx.build_catalog(url)
    s3.requests()
    listing = api.list_series(url)
    reqs = s3.requests()
    assert listing.flavor == "mariadb" and listing.heads == () and listing.catalog[1] is not None
    assert len(reqs) == 2 and "list-type" in reqs[0][1] and reqs[1][1].endswith("/gtidx-catalog.json"), reqs
    with api.BinlogSeries.from_listing(listing) as logs:
        assert logs.cataloged(logs.files[0]) is not None
    assert not s3.requests()
    # a catalog of MySQL binlogs ("flavor": "mysql") says MySQL's, as unread
    url = _put(s3, "flavor-mycat", {f.name: f for f in MYSQL.glob("binlog.0*")})
    gtidx.build_catalog(url)
    s3.requests()
    listing = api.list_series(url)
    reqs = s3.requests()
    assert listing.flavor == "mysql" and listing.heads == () and listing.catalog[1].FLAVOR == "mysql"
    assert len(reqs) == 2 and reqs[1][1].endswith("/gtidx-catalog.json"), reqs


def test_s3_mysql_binlogs_answer_as_locally(s3, tmp_path):
    """MySQL binlogs in an object store: seek (a GTID, every occurrence, a
    replica's set), pos, seek --time answer as the same files do locally,
    by scan and, once built in the store, by their indexes; probe and show
    too."""
    names = sorted(f.name for f in MYSQL.glob("binlog.0*"))
    url = _put(s3, "mysql", {n: MYSQL / n for n in names})
    local = tmp_path / "mysql"
    shutil.copytree(MYSQL, local)
    oracle = json.loads((MYSQL / "oracle.json").read_text())
    gtids = [g for f in oracle["files"] for g, _, _ in f["groups"] if g]
    offsets = [(f["name"], o) for f in oracle["files"] for _, o, _ in f["groups"]][::5]

    def same(a, b):
        return a._replace(file=a.file.replace(url, str(local) + "/")) == b
    for via in ("scan", "index"):
        if via == "index":
            assert all(not isinstance(r, Exception) for r in gtidx.build(url))
            assert all(not isinstance(r, Exception) for r in gtidx.build(str(local)))
        with gtidx.open(url) as remote, gtidx.open(str(local)) as here:
            assert type(remote).__name__ == "MysqlSeries"
            for g in gtids[::3]:
                a, b = remote.locate(g), here.locate(g)
                assert same(a, b) and a.via == via, (g, a, b)
            end = here.end_set().one_line()
            a, b = remote.replica_start(end), here.replica_start(end)
            assert (a.file.replace(url, str(local) + "/"), a.offset) == (b.file, b.offset)
            for t in ("@0", "@1795317387"):
                a, b = remote.at_time(t), here.at_time(t)
                assert (a.file.replace(url, str(local) + "/"), a.offset) == (b.file, b.offset)
        for name, off in offsets:
            assert same(gtidx.state_at(url + name, off), gtidx.state_at(str(local / name), off))
    got = _cli("seek", "--json", "--gtid", gtids[7], url)
    assert got.returncode == 0 and json.loads(got.stdout)["file"] == url + Path(api.seek(gtids[7], str(local)).file).name
    a, b = api.probe(url + names[0], 200), api.probe(str(local / names[0]), 200)
    assert same(a, b) and a.before < 200 < a.after
    got = _cli("show", "--json", "--gtid", gtids[7], url)
    assert got.returncode == 0, got.stderr
    want = api.show(str(local), gtid=gtids[7]).as_dict()
    assert json.loads(got.stdout) == {**want, "file": url + Path(want["file"]).name}


def _invoke(*args) -> tuple[int, str, str]:
    """The CLI in this process (click's runner): exit code, stdout, stderr."""
    from click.testing import CliRunner

    from gtidx.cli.main import cli
    r = CliRunner().invoke(cli, [str(a) for a in args])
    return r.exit_code, r.stdout, r.stderr


def test_s3_every_command_takes_mysql_urls(s3, tmp_path, monkeypatch):
    """Every command that reads binlogs or indexes takes MySQL objects as
    their local copies (s3:// with --storage-option, file://, --index-dir):
    show FILE OFFSET, probe, scan, build, verify, info, dump give the local
    files' answers with the URL for the path; status and tail, which follow
    a live server's directory, refuse an object store in one line, exit 2."""
    src = MYSQL.parent / "compressed"
    name = next(src.glob("binlog.0*")).name
    url = _put(s3, "mycli", {name: src / name})
    local = tmp_path / "mycli"
    shutil.copytree(src, local)
    opts = ["--storage-option", f"endpoint_url={s3.url}"]
    groups = json.loads((src / "oracle.json").read_text())["files"][0]["groups"]
    start = groups[len(groups) // 2][1]

    def same(args, *, at: str = name):
        got = _invoke(*args(url + at), "--json", *opts)
        want = _invoke(*args(str(local / at)), "--json")
        assert got[0] == want[0] == 0, (args, got, want)
        assert got[1].replace(url, str(local) + "/") == want[1], args
        return json.loads(got[1])
    monkeypatch.delenv("AWS_ENDPOINT_URL")        # the endpoint from --storage-option alone
    shown = same(lambda f: ("show", f, start))
    assert shown["start"] == start and shown["file"] == url + name
    assert same(lambda f: ("probe", f, start + 7))["before"] == start
    assert same(lambda f: ("scan", f))["count"] == len(groups)
    # file:// is the local file
    code, out, _ = _invoke("show", "--json", f"file://{local}/{name}", start)
    assert code == 0 and json.loads(out)["start"] == start
    # indexes in the store, under --index-dir: lookups through them; verify/info/dump of the objects
    idx = tmp_path / "idx"
    assert _invoke("build", "-q", "--index-dir", idx, *opts, url)[0] == 0
    assert _invoke("build", "-q", url, *opts)[0] == 0 and _invoke("build", "-q", local)[0] == 0
    for extra in ((), ("--index-dir", idx)):
        code, out, _ = _invoke("show", "--json", *extra, *opts, "--gtid", groups[-1][0], url)
        assert code == 0 and json.loads(out)["start"] == groups[-1][1], extra
        code, out, _ = _invoke("probe", "--json", *extra, *opts, url + name, start + 7)
        assert code == 0 and json.loads(out)["via"] == "index", extra
    assert same(lambda f: ("verify", f), at=name + ".idx")["ok"]
    info = same(lambda f: ("info", f), at=name + ".idx")
    assert info["status"] == "ok" and info["records"] >= 1
    code, out, _ = _invoke("dump", url + name + ".idx", *opts)
    assert code == 0 and out == _invoke("dump", local / (name + ".idx"))[1]
    for command in (("status",), ("tail", "--once")):
        code, out, err = _invoke(*command, url)
        assert code == 2 and err.count("\n") == 1 and "not an object store" in err, (command, err)
    code, out, _ = _invoke("status", "--json", f"file://{local}")
    assert code == 0 and [os.path.basename(f["file"]) for f in json.loads(out)["files"]] == [name]


def test_s3_a_prefix_mixing_flavors_is_refused_when_the_odd_file_is_read(s3):
    """The flavor of a prefix is its newest object's; an object of the other
    flavor is refused, one line, exit 2, when the lookup reads it."""
    ma = sorted(MULTI.glob("master-bin.0*"))
    my = sorted(MYSQL.glob("binlog.0*"))
    url = _put(s3, "mixed-my", {**{f.name: f for f in ma}, "master-bin.000099": my[1]})
    gtid = str(next(iter(api.scan(str(my[1]))[1])).gtid)
    assert api.list_series(url).flavor == "mysql"
    _one_line_error(_cli("seek", "--gtid", gtid, url), 2, "a MariaDB binlog among MySQL binlogs")
    url = _put(s3, "mixed-ma", {"master-bin.000001": my[1], ma[1].name: ma[1]})
    assert api.list_series(url).flavor == "mariadb"
    gtid = str(next(iter(api.scan(str(ma[1]))[1])).gtid)
    r = _cli("seek", "--gtid", gtid, url)
    errors = [line for line in r.stderr.splitlines() if not line.startswith("gtidx: warning: ")]   # the others' scans
    _one_line_error(subprocess.CompletedProcess(r.args, r.returncode, r.stdout, "\n".join(errors)), 2,
                    "master-bin.000001", "a MySQL binlog among MariaDB binlogs")


def test_s3_a_big_binlog_is_cut_in_the_pieces_of_its_local_copy(s3, tmp_path, monkeypatch):
    """``ChangeSource.splits`` on an object: its size from the LIST, the
    split points from the index beside it (checked with range reads), no
    header walk: the pieces of the local copy, and their rows its pieces'."""
    import pyarrow as pa
    from gtidx import changes, rowbatch
    local = tmp_path / BIG.name
    shutil.copyfile(BIG, local)
    for r in [*gtidx.build(str(local)), *gtidx.build(f"s3://{BUCKET}/big/")]:
        assert not isinstance(r, Exception), r
    walks = []
    monkeypatch.setattr(changes, "walked_points", lambda *a: walks.append(a) or [])
    url = f"s3://{BUCKET}/big/{BIG.name}"
    src = changes.ChangeSource(f"s3://{BUCKET}/big/")
    assert src.files == [url]
    pieces = src.splits(url, 256 << 10)
    assert len(pieces) > 5 and pieces == changes.ChangeSource(str(local)).splits(str(local), 256 << 10)
    assert walks == []
    mine = changes.ChangeSource(str(local))
    with src.open(url) as b, mine.open(str(local)) as c:          # two pieces read from the middle
        for s in pieces[1:3]:
            got = pa.Table.from_batches(rowbatch.source_batches(src, b, None, split=s), rowbatch.ARROW_SCHEMA)
            assert got.num_rows and got.equals(pa.Table.from_batches(
                rowbatch.source_batches(mine, c, None, split=s), rowbatch.ARROW_SCHEMA))
