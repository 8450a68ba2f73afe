"""``gtidx tail DIR --archive s3://...``: each closed binlog and its index
uploaded once to moto_server (a real S3 server process), checked against
the local bytes; the archive's catalog always describes the objects really
there; lookups on the archive answer as on DIR; kill -9, SIGTERM and the
fault proxy (tests/s3faults.py: 503 SlowDown, slow answers) change none of it.

One moto_server and one fault proxy for the module; binlogs are copies of
fixture files written by MariaDB 10.11 (a live server adds nothing: the
archive reads closed files only)."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT, answers_equal

pytest.importorskip("s3fs")

import gtidx  # noqa: E402
from gtidx import api, storage  # noqa: E402
from gtidx.tail.archive import ArchiveState  # noqa: E402
from gtidx.tail.metrics import MetricsServer, health  # noqa: E402
from gtidx.tail.tailer import TailState  # noqa: E402
from test_mysql_catalog_s3 import forget  # noqa: E402
from test_s3 import FaultProxy  # noqa: E402
from tools.s3server import MotoServer, free_port  # noqa: E402

BUCKET = "gtidx-archive-tail"
MULTI = FIXTURES / "mariadb-10.11" / "multifile"
CLOSED = ["master-bin.000018", "master-bin.000019", "master-bin.000020", "master-bin.000021"]   # 22: the newest


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    server = MotoServer(tmp_path_factory.mktemp("moto"))
    proxy = FaultProxy(server.url)
    forget()                     # stores and file systems of another module's server (not in their keys)
    try:
        with server.environment():
            server.client = server.bucket(BUCKET)
            server.proxy = proxy
            yield server
    finally:
        proxy.stop()
        server.stop()
        forget()


def _binlogs(tmp_path: Path) -> Path:
    d = tmp_path / "binlogs"
    d.mkdir()
    for f in MULTI.iterdir():
        if f.name.startswith("master-bin"):
            shutil.copy(f, d / f.name)
    return d


def _tail(*args, endpoint=None, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if endpoint:
        env["AWS_ENDPOINT_URL"] = endpoint
    return subprocess.Popen([sys.executable, "-m", "gtidx", "tail", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env, **kw)


def _run(*args, endpoint=None) -> subprocess.CompletedProcess:
    p = _tail(*args, endpoint=endpoint)
    out, err = p.communicate(timeout=120)
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def _listing(client, prefix: str) -> dict:
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
    return {o["Key"][len(prefix):]: (o["Size"], o["ETag"]) for o in listed}


def _check(client, prefix: str, local: Path, *, whole: bool, part: int = storage.UPLOAD_PART) -> dict:
    """The archive as it must be after any step: each binlog object holds the
    local file's bytes (its ETag theirs, uploaded in ``part``-sized parts),
    each index object the local index's; the catalog lists only objects that
    are there, with their sizes and ETags (``whole``: exactly the binlog
    objects). Returns the listing."""
    objects = _listing(client, prefix)
    binlogs = sorted(n for n in objects if n.startswith("master-bin.") and not n.endswith(".idx"))
    for n in binlogs:
        body = client.get_object(Bucket=BUCKET, Key=prefix + n)["Body"].read()
        assert body == (local / n).read_bytes(), n
        assert objects[n][1] == (storage.s3_etag(str(local / n), part) if len(body) > part else
                                 '"%s"' % hashlib.md5(body).hexdigest())
    for n in objects:
        if n.endswith(".idx") and not n.startswith("."):
            assert n[:-4] in binlogs, n                  # never an index before its binlog
            body = client.get_object(Bucket=BUCKET, Key=prefix + n)["Body"].read()
            assert body == (local / n).read_bytes(), n
    if "gtidx-catalog.json" in objects:
        cat = json.loads(client.get_object(Bucket=BUCKET, Key=prefix + "gtidx-catalog.json")["Body"].read())
        names = [e["name"] for e in cat["files"]]
        for e in cat["files"]:
            assert e["name"] in binlogs, e["name"]
            assert (e["size"], e["etag"]) == objects[e["name"]], e["name"]
            assert e["index"]["status"] == "ok" and e["index"]["path"] == f"s3://{BUCKET}/{prefix}{e['name']}.idx"
        if whole:
            assert names == binlogs
    else:
        assert not whole
    return objects


def _catalog(client, prefix: str) -> dict:
    """The archive's catalog with the prefix taken out of its index paths (and its checksum)."""
    raw = client.get_object(Bucket=BUCKET, Key=prefix + "gtidx-catalog.json")["Body"].read().decode()
    cat = json.loads(raw.replace(f"s3://{BUCKET}/{prefix}", ""))
    cat.pop("sha256")
    return cat


def _same(client, objects: dict, prefix: str, plain: dict) -> None:
    """The archive under ``prefix`` is the uninterrupted run's: the same
    objects (sizes and ETags) and the same catalog but for the prefix."""
    assert {k: v for k, v in objects.items() if k != "gtidx-catalog.json"} == \
        {k: v for k, v in plain.items() if k != "gtidx-catalog.json"}
    assert _catalog(client, prefix) == _catalog(client, "plain/")


def _puts(server, prefix: str) -> list:
    return [p for m, p, _ in server.requests() if m in ("PUT", "POST") and p.startswith(f"/{BUCKET}/{prefix}")]


@pytest.fixture(scope="module")
def archived(s3, tmp_path_factory):
    """One uninterrupted ``tail --once --archive`` of the fixture: (dir, prefix, listing)."""
    local = _binlogs(tmp_path_factory.mktemp("plain"))
    r = _run("--once", "--archive", f"s3://{BUCKET}/plain/", str(local))
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("event=archived") == len(CLOSED)
    return local, "plain/", _check(s3.client, "plain/", local, whole=True)


def test_archive_uploads_the_closed_binlogs_once(s3, archived):
    local, prefix, objects = archived
    assert sorted(n for n in objects if n.startswith("master-bin") and not n.endswith(".idx")) == CLOSED
    assert {n for n in objects if n.endswith(".idx") and not n.startswith(".")} == {n + ".idx" for n in CLOSED}
    s3.requests()
    r = _run("--once", "--archive", f"s3://{BUCKET}/{prefix}", str(local))     # again: nothing to send
    assert r.returncode == 0 and "event=archived" not in r.stderr, r.stderr
    assert _puts(s3, prefix) == []
    assert _check(s3.client, prefix, local, whole=True) == objects
    # a binlog purged locally stays in the archive (and in its catalog)
    kept = {n: (local / n).read_bytes() for n in (CLOSED[0], CLOSED[0] + ".idx", "master-bin.index")}
    for n in kept:
        os.remove(local / n)
    (local / "master-bin.index").write_text("".join(f"./{n}\n" for n in CLOSED[1:] + ["master-bin.000022"]))
    r = _run("--once", "--archive", f"s3://{BUCKET}/{prefix}", str(local))
    assert r.returncode == 0, r.stderr
    for n, data in kept.items():                                 # for the comparisons
        (local / n).write_bytes(data)
    assert _check(s3.client, prefix, local, whole=True).keys() == objects.keys()


def test_archive_lookups_answer_as_on_the_directory(s3, archived):
    local, prefix, _ = archived
    url = f"s3://{BUCKET}/{prefix}"
    oracle = {e["name"]: e for e in json.loads((MULTI / "oracle.json").read_text())["files"]}
    with gtidx.open(url) as remote, gtidx.open(str(local)) as here:
        assert [Path(f).name for f in remote.files] == CLOSED
        for name in CLOSED:
            # a sample (test_s3 checks every offset and GTID of these files on S3)
            sample = dict(oracle[name], pos=oracle[name]["pos"][::10])
            assert answers_equal(url + name, sample, remote, "index") == [], name
            for g, _, _ in oracle[name]["groups"][::5]:
                a, b = remote.locate(g), here.locate(g)
                assert (Path(a.file).name, a.start, a.end, a.resume, a.via) == \
                    (Path(b.file).name, b.start, b.end, b.resume, b.via)
        times = [g.timestamp for n in CLOSED for g in api.scan(str(MULTI / n))[1]]
        for t in times[::20] + [times[0], times[-1]]:
            a, b = remote.at_time(t), here.at_time(t)
            assert (Path(a.file).name, a.offset, str(a.gtid)) == (Path(b.file).name, b.offset, str(b.gtid))


def test_archive_never_replaces_another_object(s3, tmp_path):
    local = _binlogs(tmp_path)
    s3.client.put_object(Bucket=BUCKET, Key="reused/" + CLOSED[1], Body=(MULTI / CLOSED[2]).read_bytes())
    r = _run("--once", "--archive", f"s3://{BUCKET}/reused/", str(local))
    assert r.returncode == 3, r.stderr
    assert "the archive holds another master-bin.000019" in r.stderr and "Traceback" not in r.stderr
    assert s3.client.get_object(Bucket=BUCKET, Key="reused/" + CLOSED[1])["Body"].read() == \
        (MULTI / CLOSED[2]).read_bytes()
    assert "master-bin.000019.idx" not in _listing(s3.client, "reused/")


def _first_binlog(client, prefix: str, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while not any(n.startswith("master-bin.") and not n.endswith(".idx") for n in _listing(client, prefix)):
        assert time.monotonic() < end, "nothing archived"
        time.sleep(0.02)


def test_archive_kill_9_then_restart_ends_as_an_uninterrupted_run(s3, archived, tmp_path):
    plain = archived[2]
    local = _binlogs(tmp_path)
    s3.proxy.set(delay=0.05)
    try:
        p = _tail("--archive", f"s3://{BUCKET}/killed/", str(local), endpoint=s3.proxy.url)
        _first_binlog(s3.client, "killed/")
        p.kill()
        p.communicate(timeout=30)
    finally:
        s3.proxy.set(delay=0)
    _check(s3.client, "killed/", local, whole=False)           # after kill -9: nothing half there
    r = _run("--once", "--archive", f"s3://{BUCKET}/killed/", str(local))
    assert r.returncode == 0, r.stderr
    _same(s3.client, _check(s3.client, "killed/", local, whole=True), "killed/", plain)


def _wait_for(client, prefix: str, name: str, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while name not in _listing(client, prefix):
        assert time.monotonic() < end, f"{name} not archived"
        time.sleep(0.02)


def test_archive_follows_rotations_and_sigterm_stops_cleanly(s3, tmp_path):
    """Running (woken by inotify): a binlog is archived when the server's
    .index lists a later one, never before; SIGTERM in the middle of a
    file's steps ends with that file's index and catalog entry written, every
    object whole and the catalog describing them."""
    local = _binlogs(tmp_path)
    listed = ["master-bin.000018", "master-bin.000019", "master-bin.000020"]
    (local / "master-bin.index").write_text("".join(f"./{n}\n" for n in listed))
    p = _tail("--archive", f"s3://{BUCKET}/termed/", str(local))
    try:
        _wait_for(s3.client, "termed/", "gtidx-catalog.json")
        end = time.monotonic() + 60
        while [e["name"] for e in _catalog(s3.client, "termed/")["files"]] != listed[:2]:
            assert time.monotonic() < end and p.poll() is None
            time.sleep(0.02)
        assert "master-bin.000020" not in _listing(s3.client, "termed/")     # the newest: never
        (local / "master-bin.index").write_text("".join(f"./{n}\n" for n in [*listed, CLOSED[-1]]))
        _wait_for(s3.client, "termed/", "master-bin.000020")                # a rotation: 20 closed
        p.send_signal(signal.SIGTERM)                    # its index and the catalog not written yet
        _, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 0 and "event=stop" in err and "Traceback" not in err, err
    _check(s3.client, "termed/", local, whole=True)                          # the file under way finished whole
    assert [e["name"] for e in _catalog(s3.client, "termed/")["files"]] == listed


def test_archive_under_throttling_loses_nothing(s3, archived, tmp_path):
    local = _binlogs(tmp_path)
    s3.proxy.set(slowdown=1)                     # botocore's retries absorb it
    r = _run("--once", "--archive", f"s3://{BUCKET}/throttled/", str(local), endpoint=s3.proxy.url)
    assert r.returncode == 0, r.stderr
    assert s3.proxy.set()["throttled"] >= 1
    _same(s3.client, _check(s3.client, "throttled/", local, whole=True), "throttled/", archived[2])
    # the endpoint refuses connections (no retries): every file fails, logged once each, exit 3, and
    # nothing is there; the next run, the endpoint back, archives them all
    no_retries = ["--storage-option", 'config_kwargs={"retries": {"max_attempts": 1, "mode": "standard"}}']
    (tmp_path / "again").mkdir()
    local2 = _binlogs(tmp_path / "again")
    r = _run("--once", "--archive", f"s3://{BUCKET}/throttled2/", *no_retries, str(local2),
             endpoint=f"http://127.0.0.1:{free_port()}")
    assert r.returncode == 3 and r.stderr.count("event=cannot archive") == len(CLOSED), r.stderr
    assert "Traceback" not in r.stderr
    assert _listing(s3.client, "throttled2/") == {}
    r = _run("--once", "--archive", f"s3://{BUCKET}/throttled2/", *no_retries, str(local2))
    assert r.returncode == 0, r.stderr
    _same(s3.client, _check(s3.client, "throttled2/", local2, whole=True), "throttled2/", archived[2])


def test_upload_multipart_etag_and_a_stopped_upload_leaves_nothing(s3, tmp_path):
    store, url = storage.resolve(f"s3://{BUCKET}/parts/big")
    f = tmp_path / "big"
    f.write_bytes(os.urandom(11 << 20))
    part = 5 << 20                                               # S3's least part
    assert store.upload(url, str(f), part) == storage.s3_etag(str(f), part)
    assert storage.s3_etag(str(f), part).endswith('-3"')
    assert s3.client.get_object(Bucket=BUCKET, Key="parts/big")["Body"].read() == f.read_bytes()
    calls = []
    with pytest.raises(InterruptedError):
        store.upload(url + "2", str(f), part, stopping=lambda: calls.append(1) or len(calls) > 1)
    assert "big2" not in _listing(s3.client, "parts/")
    assert s3.client.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []) == []


def test_archive_metrics_and_health():
    archive = ArchiveState(uploaded_files=2, uploaded_bytes=1234, errors={"GtidxIOError": 1}, retries=1,
                           last_upload=time.time(), pending={"master-bin.000009": time.time() - 120})
    tail = TailState()
    tail.last_look = time.time()
    ok, reasons = health(tail, 60, 10, archive=archive)
    assert not ok and reasons == [{"file": "master-bin.000009", "reason": "archive lagging",
                                   "seconds": reasons[0]["seconds"]}]
    server = MetricsServer(tail, "127.0.0.1", 0, max_lag=60, archive=archive)
    try:
        text = urllib.request.urlopen(f"http://{server.address}/metrics", timeout=10).read().decode()
        for line in ("gtidx_archive_uploaded_files_total 2.0", "gtidx_archive_uploaded_bytes_total 1234.0",
                     'gtidx_archive_errors_total{kind="GtidxIOError"} 1.0', "gtidx_archive_retries_total 1.0",
                     "gtidx_archive_pending_files 1.0"):
            assert line in text, line
        assert "gtidx_archive_last_upload_timestamp_seconds" in text and "gtidx_archive_lag_seconds 1" in text
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"http://{server.address}/healthz", timeout=10)
        assert e.value.code == 503 and json.loads(e.value.read())["reasons"][0]["reason"] == "archive lagging"
        archive.pending = {}
        assert urllib.request.urlopen(f"http://{server.address}/healthz", timeout=10).status == 200
    finally:
        server.close()


def test_archive_readme_recipe(s3, tmp_path):
    """The README's recipe, each command as written (the prefix and the
    directory mapped onto moto_server and a copy of the Quickstart's
    binlogs): each exits 0, and the seek on the archive answers as on DIR."""
    from test_readme import readme_blocks
    (body,) = [b for section, lang, b, _ in readme_blocks()
               if section == "Ship the closed binlogs to S3" and lang == "sh"]
    local = _binlogs(tmp_path)
    outputs = []
    for line in body.strip().splitlines():
        line = line.replace("s3://backups/db1/binlogs/", f"s3://{BUCKET}/readme/")
        args = line.replace("/var/lib/mysql/binlog", str(local)).split()
        assert args[0] == "gtidx", line
        r = subprocess.run([sys.executable, "-m", "gtidx", *args[1:], "--json"], capture_output=True, text=True,
                           cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
        assert r.returncode == 0, (line, r.stderr)
        outputs.append(r.stdout)
        if args[1] == "tail":
            _check(s3.client, "readme/", local, whole=True)
    gtid = args[args.index("--gtid") + 1]
    here = subprocess.run([sys.executable, "-m", "gtidx", "seek", "--gtid", gtid, str(local), "--json"],
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    a, b = json.loads(outputs[-1]), json.loads(here.stdout)
    assert (Path(a["file"]).name, a["start"]) == (Path(b["file"]).name, b["start"])


def test_archive_of_mysql_binlogs(s3, tmp_path):
    """MySQL 9.7's binlogs: the MySQL catalog of the prefix, and lookups on
    the archive equal to the directory's."""
    src = FIXTURES / "mysql-9.7" / "rotated"
    local = tmp_path / "mysql"
    shutil.copytree(src, local)
    (local / "oracle.json").unlink()
    r = _run("--once", "--archive", f"s3://{BUCKET}/mysql/", str(local))
    assert r.returncode == 0, r.stderr
    files = json.loads((src / "oracle.json").read_text())["files"]
    cat = json.loads(s3.client.get_object(Bucket=BUCKET, Key="mysql/gtidx-catalog.json")["Body"].read())
    objects = _listing(s3.client, "mysql/")
    assert cat["flavor"] == "mysql"
    assert [(e["name"], e["size"], e["etag"]) for e in cat["files"]] == \
        [(f["name"], *objects[f["name"]]) for f in files[:-1]]
    with gtidx.open(f"s3://{BUCKET}/mysql/") as remote, gtidx.open(str(local)) as here:
        for f in files[:-1]:
            for g in f["groups"][::3]:
                a, b = remote.locate(g[0]), here.locate(g[0])
                assert (Path(a.file).name, a.start, a.end, a.via) == (Path(b.file).name, b.start, b.end, b.via)


def test_archive_bad_input_is_exit_2_before_anything(s3, tmp_path):
    local = _binlogs(tmp_path)
    for args, words in [(["--archive", str(tmp_path / "elsewhere")], "expected an S3 prefix"),
                        (["--archive", f"s3://{BUCKET}/bad/", "--storage-option", "bogus=1"], "bad storage option")]:
        r = _run("--once", *args, str(local))
        assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert not list(local.glob("*.idx"))                 # refused before the tail began
