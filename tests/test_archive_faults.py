"""``gtidx tail --archive`` under faults in the middle of an upload, on
moto_server behind the fault proxy (tests/s3faults.py): a connection
dropped half-way through a part, a part never answered (a timeout), a
body stored with other bytes than were sent, kill -9 between two parts of
a multipart upload, SIGTERM during ``--once``'s uploads and during the
running tail's. After each: every closed binlog is in the archive
byte-equal to the local file with its index, nothing is left half-uploaded
(no incomplete multipart upload, no object that is not whole), the
archive's catalog equals a fresh ``catalog build`` of the prefix, every
index verifies, and lookups on the archive answer as on the directory.

The binlogs are fixture files of about 100 KB; to upload them in several
parts, the tail is given a part size of 32 KiB (``--storage-option
default_block_size=32768``, as a user sets it) and this module's
moto_server takes parts that small (S3_UPLOAD_PART_MIN_SIZE; S3 itself
takes parts of 5 MiB at least)."""
from __future__ import annotations

import json
import os
import signal
import time

import pytest

pytest.importorskip("s3fs")

import gtidx  # noqa: E402
from gtidx import admin, api, storage  # noqa: E402
from test_mysql_catalog_s3 import forget  # noqa: E402
from test_archive import BUCKET, CLOSED, MULTI, _binlogs, _catalog, _check, _listing, _run, _tail  # noqa: E402
from test_s3 import FaultProxy  # noqa: E402
from tools.s3server import MotoServer  # noqa: E402

PART = 32 << 10
PARTS = ["--storage-option", f"default_block_size={PART}"]
CLOSED2 = CLOSED[:2]            # the server's .index lists three binlogs: two closed (lean)


def _two_closed(tmp_path):
    """The fixture's binlogs, the server's .index listing the first three: two closed."""
    local = _binlogs(tmp_path)
    (local / "master-bin.index").write_text("".join(f"./{n}\n" for n in CLOSED[:3]))
    return local


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    server = MotoServer(tmp_path_factory.mktemp("moto"), env={"S3_UPLOAD_PART_MIN_SIZE": "1024"})
    proxy = None
    forget()
    try:
        with server.environment():
            server.client = server.bucket(BUCKET)
            server.proxy = proxy = FaultProxy(server.url)
            yield server
    finally:
        if proxy is not None:
            proxy.stop()
        server.stop()
        forget()


def _unfinished(client, prefix: str) -> list:
    """The incomplete multipart uploads under ``prefix``: (key, parts uploaded)."""
    ups = client.list_multipart_uploads(Bucket=BUCKET, Prefix=prefix).get("Uploads", [])
    return [(u["Key"], len(client.list_parts(Bucket=BUCKET, Key=u["Key"], UploadId=u["UploadId"]).get("Parts", [])))
            for u in ups]


def _whole(s3, prefix: str, local, tmp_path, part: int, names=CLOSED2) -> None:
    """The archive under ``prefix`` holds ``names`` as it must: byte-equal
    to the local files (ETags of ``part``-sized parts) with their indexes,
    nothing half-uploaded, its catalog a fresh build's, every index
    verified, lookups answering as on ``local``."""
    objects = _check(s3.client, prefix, local, whole=True, part=part)
    assert sorted(n for n in objects if n.startswith("master-bin.") and not n.endswith(".idx")) == names
    for n in names:
        assert objects[n] == ((local / n).stat().st_size, storage.s3_etag(str(local / n), part)), n
    assert _unfinished(s3.client, prefix) == []
    url = f"s3://{BUCKET}/{prefix}"
    fresh, counts = admin.build_catalog(url, index_root=tmp_path / "fresh")
    assert counts["failed"] == 0
    stored = json.loads(s3.client.get_object(Bucket=BUCKET, Key=prefix + "gtidx-catalog.json")["Body"].read())
    assert json.loads(json.dumps(fresh.files)) == stored["files"] != []
    for n in names:
        assert admin.verify(url + n + ".idx")["records"] > 0, n       # raises on any fault
    oracle = {e["name"]: e for e in json.loads((MULTI / "oracle.json").read_text())["files"]}
    with gtidx.open(url) as remote, gtidx.open(str(local)) as here:
        for n in names:
            for g, _, _ in oracle[n]["groups"][::7]:
                a, b = remote.locate(g), here.locate(g)
                assert (os.path.basename(a.file), a.start, a.end, a.resume) == \
                    (os.path.basename(b.file), b.start, b.end, b.resume), (n, g)
        t = list(api.scan(str(MULTI / names[-1]))[1])[-1].timestamp
        a, b = remote.at_time(t), here.at_time(t)
        assert (os.path.basename(a.file), a.offset, str(a.gtid)) == (os.path.basename(b.file), b.offset, str(b.gtid))


def _in_flight(s3, prefix: str, p, timeout: float = 60) -> str:
    """Wait until a multipart upload under ``prefix`` has a part: its key."""
    end = time.monotonic() + timeout
    while True:
        started = [k for k, parts in _unfinished(s3.client, prefix) if parts]
        if started:
            return started[0][len(prefix):]
        assert p.poll() is None and time.monotonic() < end, p.stderr.read() if p.poll() is not None else "no upload"
        time.sleep(0.01)


def test_dropped_and_stalled_parts_are_sent_again(s3, tmp_path):
    """A part's connection dropped half-way and a part never answered (the
    read timeout set as a user would): the client's retries send them again,
    --once ends 0 with every file whole."""
    local = _two_closed(tmp_path)
    s3.proxy.set(upskip=1, dropup=1, stall=1)
    try:
        r = _run("--once", "--archive", f"s3://{BUCKET}/dropped/", *PARTS,
                 "--storage-option", 'config_kwargs={"read_timeout": 1, "connect_timeout": 2}', str(local),
                 endpoint=s3.proxy.url)
        report = s3.proxy.set()
    finally:
        s3.proxy.set(upskip=0, dropup=0, stall=0)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert report["dropped"] >= 1 and report["stalled"] == 1, report
    assert r.stderr.count("event=archived") == len(CLOSED2)
    _whole(s3, "dropped/", local, tmp_path, PART)


def test_an_upload_stored_with_other_bytes_is_removed_and_sent_again(s3, tmp_path):
    """The store keeps other bytes than were sent (one PUT's body changed on
    the way, no checksum to catch it): the object's ETag tells, it is
    removed and the file uploaded again; the running tail logs it and its
    recovery."""
    local = _two_closed(tmp_path)
    s3.proxy.set(corrupt=1)
    p = _tail("--archive", f"s3://{BUCKET}/corrupt/", str(local), endpoint=s3.proxy.url)
    try:
        end = time.monotonic() + 60
        while "gtidx-catalog.json" not in _listing(s3.client, "corrupt/") or \
                [e["name"] for e in _catalog(s3.client, "corrupt/")["files"]] != CLOSED2:
            assert p.poll() is None and time.monotonic() < end
            time.sleep(0.02)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    finally:
        p.kill()
        report = s3.proxy.set(corrupt=0)
    assert report["corrupted"] == 1, report
    assert p.returncode == 0 and "Traceback" not in err, err
    assert err.count("uploaded object does not match the binlog") == 1 and "event=archive recovered" in err, err
    assert err.count("event=archived") == len(CLOSED2)
    _whole(s3, "corrupt/", local, tmp_path, storage.UPLOAD_PART)


def test_kill_9_between_parts_then_a_restart_completes(s3, tmp_path):
    """kill -9 while a multipart upload has parts: no object under the
    name (the upload incomplete, invisible); the restart aborts it, uploads
    the file once, and the archive is whole."""
    local = _two_closed(tmp_path)
    s3.proxy.set(delay=0.05)
    try:
        p = _tail("--archive", f"s3://{BUCKET}/killed/", *PARTS, str(local), endpoint=s3.proxy.url)
        name = _in_flight(s3, "killed/", p)
        p.kill()
        p.communicate(timeout=30)
    finally:
        s3.proxy.set(delay=0)
    assert name in CLOSED2 and name not in _listing(s3.client, "killed/")
    assert [k for k, _ in _unfinished(s3.client, "killed/")] == ["killed/" + name]
    done = _check(s3.client, "killed/", local, whole=False, part=PART)
    s3.requests()
    r = _run("--once", "--archive", f"s3://{BUCKET}/killed/", *PARTS, str(local))
    assert r.returncode == 0, r.stderr
    assert "event=aborted an interrupted upload" in r.stderr and f"killed/{name}" in r.stderr, r.stderr
    # what the killed run finished is not sent again; the rest once each
    completed = [path for m, path, _ in s3.requests() if m == "POST" and "uploadId=" in path]
    assert sorted(path.split("?")[0].rsplit("/", 1)[1] for path in completed) == \
        sorted(n for n in CLOSED2 if n not in done)
    _whole(s3, "killed/", local, tmp_path, PART)


@pytest.mark.parametrize("mode", ["once", "running"])
def test_sigterm_during_an_upload_leaves_nothing_half_uploaded(s3, tmp_path, mode):
    """SIGTERM while a multipart upload has parts (``--once``'s uploads, or
    the running tail's): the upload is aborted between two parts, exit 0;
    what is in the archive is whole and in its catalog, and a run after it
    completes the archive."""
    local = _two_closed(tmp_path)
    prefix = f"term-{mode}/"
    s3.proxy.set(delay=0.05)
    try:
        p = _tail(*(["--once"] if mode == "once" else []), "--archive", f"s3://{BUCKET}/{prefix}", *PARTS,
                  str(local), endpoint=s3.proxy.url)
        name = _in_flight(s3, prefix, p)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    finally:
        s3.proxy.set(delay=0)
        p.kill()
    assert p.returncode == 0 and "event=stop" in err and "Traceback" not in err, err
    if mode == "once":
        assert f"event=archive stopped file={local / name}" in err, err
    assert name not in _listing(s3.client, prefix)
    assert _unfinished(s3.client, prefix) == []
    sent = [n for n in _listing(s3.client, prefix) if n.startswith("master-bin.")]
    done = _check(s3.client, prefix, local, whole=bool(sent), part=PART)      # each in the catalog
    assert all(n + ".idx" in done for n in done if n.startswith("master-bin") and not n.endswith(".idx"))
    r = _run("--once", "--archive", f"s3://{BUCKET}/{prefix}", *PARTS, str(local))
    assert r.returncode == 0, r.stderr
    _whole(s3, prefix, local, tmp_path, PART)


def test_an_archive_made_with_another_part_size_is_recognised(s3, tmp_path):
    """A restart with another part size (the default) finds the objects of
    32 KiB parts: their ETags computed again with the object's own part
    size, they are the local bytes; nothing is uploaded again."""
    local = _two_closed(tmp_path)
    r = _run("--once", "--archive", f"s3://{BUCKET}/parts/", *PARTS, str(local))
    assert r.returncode == 0, r.stderr
    r = _run("--once", "--archive", f"s3://{BUCKET}/parts/", str(local))
    assert r.returncode == 0 and "event=archived" not in r.stderr, r.stderr
    _whole(s3, "parts/", local, tmp_path, PART)
    r = _run("--once", "--archive", f"s3://{BUCKET}/bad-part/", "--storage-option", "default_block_size=-1",
             str(local))
    assert r.returncode == 2 and "default_block_size" in r.stderr and "Traceback" not in r.stderr, r.stderr
