"""``gtidx serve`` on an archive in an object store, and a GTID start from the index.

The history of tests/test_serve_live.py (``servehelp.history``: the shared
dev server's binlogs of a database of its own, across a rotation) kept
twice, each indexed by ``gtidx build`` (small spans: many records) with a
catalog: in a local directory, and uploaded to a ``moto_server`` bucket
(``tools/s3server.py``) read through ``tests/s3faults.py`` (a proxy that
records every request and its Range, and fails reads on demand). Both are
served by ``gtidx serve`` processes. The oracles: the real server's stream
byte for byte (a raw replica, ``servehelp.dump_events``), a private MariaDB
10.11 replica restoring to a point (``START SLAVE UNTIL``: its
``gtid_slave_pos`` and ``CHECKSUM TABLE`` the source's there), and the
GETs the archive answered.
"""
from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pymysql
import pytest

from gtidx import admin, api
from gtidx.errors import GtidxError
from gtidx.gtid import Position

from servehelp import (PASSWORD, dump_events, history, replica, replica_facts, replicate,  # noqa: F401
                       restore_until, serving, start_serve)
from test_s3 import FaultProxy
from tools.s3server import MotoServer

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
BUCKET = "serve-archive"
PREFIX = "binlogs"


@pytest.fixture(scope="module")
def archive(history, tmp_path_factory):
    """(the local indexed copy, the moto_server, the proxy before it, the
    archive's URL, the storage options that reach it through the proxy)."""
    d = tmp_path_factory.mktemp("serve-indexed")
    for f in history[0].iterdir():
        shutil.copyfile(f, d / f.name)
    moto = MotoServer(tmp_path_factory.mktemp("serve-moto"))
    proxy = None
    try:
        client = moto.bucket(BUCKET)
        for f in sorted(d.iterdir()):
            client.put_object(Bucket=BUCKET, Key=f"{PREFIX}/{f.name}", Body=f.read_bytes())
        url = f"s3://{BUCKET}/{PREFIX}/"
        for where, opts in ((str(d), None), (url, moto.storage_options())):
            built = list(admin.build(where, storage_options=opts, span_min=1))
            assert built and not [r for r in built if isinstance(r, GtidxError)], built
            admin.build_catalog(where, storage_options=opts)
        proxy = FaultProxy(moto.url)
        yield d, moto, proxy, url, {**moto.storage_options(), "endpoint_url": proxy.url}
    finally:
        if proxy is not None:
            proxy.stop()
        moto.stop()


def option_args(opts: dict) -> list[str]:
    return [a for k, v in opts.items() for a in ("--storage-option", f"{k}={v}")]


@pytest.fixture(scope="module")
def served_local(archive, live_server, tmp_path_factory):
    server_id = live_server.sql("SELECT @@server_id")[0][0]
    with serving(archive[0], 0, server_id, tmp_path_factory.mktemp("serve-local")) as it:
        yield it


@pytest.fixture(scope="module")
def served_s3(archive, live_server, tmp_path_factory):
    d, moto, proxy, url, opts = archive
    server_id = live_server.sql("SELECT @@server_id")[0][0]
    with serving(url, 0, server_id, tmp_path_factory.mktemp("serve-s3"), *option_args(opts)) as it:
        yield it


def gets(proxy, since: int = 0) -> list[tuple[str, int, int]]:
    """(object name, first byte, last byte) of every ranged GET the archive
    answered after the first ``since``."""
    out = []
    for method, path, rng in proxy.set()["requests"][since:]:
        m = re.fullmatch(r"bytes=(\d+)-(\d+)", rng or "")
        if method == "GET" and m:
            out.append((path.split("?")[0].rsplit("/", 1)[-1], int(m.group(1)), int(m.group(2))))
    return out


def ours(port: int) -> dict:
    return {"host": "127.0.0.1", "port": port, "user": "repl", "password": PASSWORD}


@pytest.mark.parametrize("where", ["local", "s3"])
@pytest.mark.parametrize("position, flags", [("start", 2), ("backup", 0), ("backup", 2)])
def test_a_start_from_the_index_streams_what_the_server_streams(history, request, live_server, where,
                                                                position, flags):
    """With indexes, a GTID start inside a file reads from the first group
    sent (``serve.jump``), not from the file's start: the stream is still
    the real server's, byte for byte, from an object store as from a
    local directory."""
    d, start, end, db, checksums, backup = history
    _, port, log = request.getfixturevalue(f"served_{where}")
    state = start if position == "start" else backup["position"]
    theirs = dump_events(live_server.connection_settings(), state, end, flags)
    mine = dump_events(ours(port), state, end, flags)
    assert [e[:3] for e in mine] == [e[:3] for e in theirs]
    assert mine == theirs
    if position == "backup":
        first = api.seek(state, d, replica=True).first
        assert f"the index starts the stream at offset {first.start}" in log.read_text()


def test_s3_restore_to_a_point_reads_only_what_it_needs(history, archive, replica, served_s3):
    """The restore from the archive in the bucket: the backup, then START
    SLAVE UNTIL master_gtid_pos= a later position in the same file. The
    replica stops exactly there (gtid_slave_pos, CHECKSUM TABLE the
    source's at that point), started from the index. The archive was read
    in a few ranged GETs: of the first binlog (36 KB, some 150 events) six
    (its preamble twice, the check of the index record, the groups before
    the first one sent, the stream's leading events and its jump, each on a
    handle of its own), nothing of the second (past the UNTIL point: the
    catalog says what it holds)."""
    d, start, end, db, checksums, backup = history
    _, moto, proxy, url, opts = archive
    _, port, log = served_s3
    seen = len(proxy.set()["requests"])
    assert restore_until(replica, port, log, db, backup) == backup["until_checksums"]
    said = log.read_text()
    assert "replica 2: the index starts the stream at offset" in said, said        # with UNTIL, from the index
    files = [Path(f).name for f in api.list_binlogs(archive[0])]
    read = gets(proxy, seen)
    assert read and all(hi - lo < 1 << 30 for name, lo, hi in read if name in files), read
    assert 0 < len([r for r in read if r[0] == files[0]]) <= 6, read
    assert not [r for r in read if r[0] == files[1]], read


def test_s3_a_failed_read_mid_stream_ends_that_connection_and_the_replica_resumes(history, archive, replica,
                                                                                  served_s3):
    """The object store fails a read while a replica is being sent the
    history (its body cut short, twice: gtidx's retry is cut too): that
    connection ends with the reason in the log, the server goes on, the
    replica reconnects by itself and ends with the source's checksums (no
    group lost, none twice)."""
    d, start, end, db, checksums, backup = history
    _, moto, proxy, url, opts = archive
    _, port, log = served_s3
    replica.sql(f"DROP DATABASE IF EXISTS {db}")
    seen = len(proxy.set()["requests"])
    assert dump_events(ours(port), start, end, 0)
    n = len(gets(proxy, seen))                    # the ranged GETs of one dump from the history's start
    proxy.set(cut=2, skip=n - 1)                  # the last of them cut, and its retry
    replicate(replica, served_s3, start, end)
    assert replica_facts(replica, db) == checksums
    assert proxy.set(cut=0, skip=0)["damaged"] >= 2
    said = log.read_text()
    assert re.search(r"connection \d+ from 127\.0\.0\.1:\d+ failed: GtidxIOError: .*cut", said), said[-3000:]


@pytest.fixture(scope="module")
def multidomain(live_server, tmp_path_factory):
    """A history over three domains and two server ids, interleaved (a
    database of its own on the shared dev server, in a binlog of its own),
    copied twice, once indexed (small spans), each served: (the indexed
    directory, [@@gtid_binlog_pos after each group], the position at its
    end, the indexed one's port, its log, the port of the one without
    indexes)."""
    import random
    srv = live_server
    db = f"gtidxserve_md_{os.getpid()}_{random.randrange(1 << 30)}"
    srv.sql("FLUSH BINARY LOGS")
    first = [r[0] for r in srv.sql("SHOW BINARY LOGS")][-1]
    srv.sql(f"CREATE DATABASE {db}")
    srv.sql(f"CREATE TABLE {db}.t (id INT AUTO_INCREMENT PRIMARY KEY, d INT, v VARCHAR(200)) ENGINE=InnoDB")
    rnd, positions = random.Random(7), []
    conn = srv.connect()
    try:
        with conn.cursor() as cur:
            for i in range(60):
                last = i == 59
                cur.execute("SET SESSION gtid_domain_id=%s, server_id=%s",
                            (0 if last else rnd.choice([0, 1, 1, 2]), 1 if last else rnd.choice([1, 1, 2])))
                cur.execute(f"INSERT INTO {db}.t (d, v) VALUES (%s, %s)", (i, "x" * rnd.randrange(150)))
                cur.execute("SELECT @@gtid_binlog_pos")
                positions.append(cur.fetchone()[0])
            cur.execute("SET SESSION gtid_domain_id=0, server_id=@@global.server_id")
    finally:
        conn.close()
    srv.sql("FLUSH BINARY LOGS")
    names = [r[0] for r in srv.sql("SHOW BINARY LOGS")]
    d, plain = tmp_path_factory.mktemp("serve-multidomain"), tmp_path_factory.mktemp("serve-multidomain-plain")
    for name in names[names.index(first):-1]:
        shutil.copyfile(srv.binlog_dir / name, d / name)
        shutil.copyfile(srv.binlog_dir / name, plain / name)
    built = list(admin.build(str(d), span_min=1))
    assert built and not [r for r in built if isinstance(r, GtidxError)], built
    server_id = srv.sql("SELECT @@server_id")[0][0]
    proc, port, log = start_serve(d, 0, server_id, tmp_path_factory.mktemp("serve-md"))
    walk, walk_port, _ = start_serve(plain, 0, server_id, tmp_path_factory.mktemp("serve-md-plain"))
    try:
        yield d, positions, positions[-1], port, log, walk_port
    finally:
        for p in (proc, walk):
            p.terminate()
            p.wait(timeout=30)
        srv.sql(f"DROP DATABASE IF EXISTS {db}")


def test_a_multi_domain_start_from_the_index_streams_what_the_walk_streams(multidomain):
    """Positions inside a history of three interleaved domains and two
    server ids: ones taken after a group (every domain reached by its own
    GTID before the first group sent), and mixed ones whose domains stand
    at different points (a domain still to reach after the jump keeps
    leaving its groups out until its GTID). From the indexed copies, with
    the jump taken, gtidx streams byte for byte what it streams from the
    same binlogs without indexes, walking from the file's start: the index
    only shortens the work. (The walk is the 10.11 server's stream for a
    single domain, above; with domains reached at different points the
    server sends a fake GTID_LIST at each, docs/serve.md, Plan.)"""
    d, positions, end, port, log, walk_port = multidomain
    mixed = []
    for k in (12, 30, 41):
        ahead = Position.parse(positions[min(k + 15, len(positions) - 2)])
        here = Position.parse(positions[k])
        mixed.append(",".join(str(ahead.get(g.domain) if g.domain == 2 else g) for g in here))
    for state in (positions[25], positions[44], *mixed):
        for flags in (0, 2):
            walked = dump_events(ours(walk_port), state, end, flags)
            mine = dump_events(ours(port), state, end, flags)
            assert [e[:3] for e in mine] == [e[:3] for e in walked], state
            assert mine == walked, state
    assert log.read_text().count("the index starts the stream at offset") >= 8, log.read_text()


def serve_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "gtidx", "serve", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_s3_an_archive_that_cannot_be_served_is_one_line(archive):
    """A prefix with nothing there, and one without binlogs: gtidx serve
    does not start, one line and the exit code every command gives."""
    d, moto, proxy, url, opts = archive
    moto.client().put_object(Bucket=BUCKET, Key="notes/readme.txt", Body=b"not a binlog")
    for where, code, words in ((f"s3://{BUCKET}/missing/", 3, "no such object, prefix or bucket"),
                               (f"s3://{BUCKET}/notes/", 1, "no binlog files here")):
        r = serve_cli(where, "--port", "0", "--no-auth", *option_args(opts))
        assert r.returncode == code and r.stderr == f"gtidx: {where}: {words}\n", r


def test_several_histories_are_refused_unless_one_is_picked(tmp_path):
    """A directory whose catalog shows two histories (one server's binlogs,
    then an unrelated server's under the following names) is refused in
    the words every command uses; --history N serves that history's files
    alone; a history that is not there is bad input too."""
    d = tmp_path / "two"
    d.mkdir()
    for src, shift in ((FIXTURES / "mariadb-10.11" / "multifile", 0), (FIXTURES / "mariadb-11.8" / "multifile", 4)):
        for f in sorted(src.iterdir()):
            if f.name.startswith("master-bin.0") and not f.name.endswith(".idx"):
                shutil.copy(f, d / f"master-bin.{int(f.name.rsplit('.', 1)[1]) + shift:06d}")
    admin.build_catalog(str(d))
    r = serve_cli(str(d), "--port", "0", "--no-auth")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r
    assert "2 histories" in r.stderr and "--history" in r.stderr
    r = serve_cli(str(d), "--port", "0", "--no-auth", "--history", "3")
    assert r.returncode == 2 and "no history 3" in r.stderr and r.stderr.count("\n") == 1, r
    with api.open_binlogs(str(d), history=2) as two:
        second, state = two.files[1], str(two.start_state(two.files[1]).position())
    proc, port, log = start_serve(d, 0, 1000, tmp_path, "--history", "2")
    try:
        conn = pymysql.connect(**ours(port), autocommit=True)
        try:
            with conn.cursor() as cur:
                cur.execute(f"SET @slave_connect_state='{state}'")
            conn._execute_command(0x12, struct.pack("<IHI", 4, 0, 77))
            rotate = conn._read_packet().get_all_data()[1:]
        finally:
            conn.close()
        assert rotate[4] == 4 and Path(second).name.encode() in rotate
        assert int(Path(second).name.rsplit(".", 1)[1]) >= 23
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def streamed(logs, position: str, with_index: bool) -> tuple[bytes, bool]:
    """What a Stream sends for a GTID start at ``position`` over ``logs``'
    files until their end (no replica: a socket pair read to its end), from
    the index's jump where ``with_index`` allows one; and whether it jumped."""
    import socket
    import threading

    from gtidx.serve.jump import index_jump
    from gtidx.serve.stream import Skipper, Stream
    from gtidx.serve.wire import Connection
    start = logs.replica_start(position)
    skipper = Skipper(start.skip)
    jump = index_jump(logs, start, skipper, None) if with_index else None
    mine, theirs = socket.socketpair()
    got = bytearray()

    def read():
        while data := theirs.recv(1 << 20):
            got.extend(data)
    reader = threading.Thread(target=read)
    reader.start()
    try:
        s = Stream(Connection(mine), logs.files, logs.files.index(start.file), 4, skipper, 1, 30,
                   lambda line: None, jump=jump)
        for i in range(s.first, len(logs.files)):
            s.send_file(logs.files[i], i == s.first)
        s.announce(0, True)
        s.flush()
    finally:
        mine.close()
        reader.join(30)
        theirs.close()
    return bytes(got), jump is not None


@pytest.mark.parametrize("scenario", ["mariadb-11.8/multifile", "mariadb-11.8/nochecksum", "mariadb-10.11/multifile",
                                      "mariadb-10.11/nonmono"])
def test_a_start_from_the_index_sends_what_the_walk_sends_at_every_kind_of_position(scenario, tmp_path):
    """Real servers' binlogs (indexed copies of the fixtures: several
    domains and servers, BINLOG_CHECKPOINTs written after a file's first
    groups, no checksums, seq_no going back): for replica positions at group
    ends through each file, and mixed ones (each domain from another point),
    the stream from the index's jump is byte for byte the stream of the walk
    from the file's start (its fake GTID_LISTs too, one per domain reached);
    the jump is taken (not where a (domain, server) of the position goes
    back in the file: ``replica_start`` answers there from a walk), and
    across a late BINLOG_CHECKPOINT where the set has one."""
    from conftest import copy_set
    from gtidx.binlog.events import BINLOG_CHECKPOINT
    d = copy_set(tmp_path, FIXTURES / scenario)
    jumps = across = 0
    with api.open_binlogs(str(d)) as logs:
        ends = []
        for f in logs.files:
            groups = list(api.scan(f)[1])
            ends += [(f, g.end) for g in groups[3::max(1, len(groups) // 5)]]
        states = [logs.state_at(f, end).position for f, end in ends]
        positions = [str(p) for p in states]
        for a, b in zip(states, states[3:]):
            positions.append(",".join(str(b.get(g.domain) if g.domain % 2 and b.get(g.domain) else g) for g in a))
        for position in positions:
            walked, _ = streamed(logs, position, False)
            mine, jumped = streamed(logs, position, True)
            assert mine == walked, position
            jumps += jumped
            if jumped:
                with api.open_binlogs(str(d)) as fresh:
                    start = fresh.replica_start(position)
                    from gtidx.serve.jump import index_jump
                    from gtidx.serve.stream import Skipper
                    jump = index_jump(fresh, start, Skipper(start.skip), None)
                    b = fresh.opened(start.file).binlog
                    across += any(b.event_header(gap.lo)[1] == BINLOG_CHECKPOINT for gap in jump.gaps)
    if scenario.endswith("nonmono"):    # where a pair of the position goes back, replica_start walks: no jump
        assert 0 < jumps < len(positions) and len(positions) >= 5, (jumps, len(positions))
    else:
        assert jumps >= len(positions) // 2, (jumps, len(positions))
    if scenario.startswith("mariadb-11.8"):
        assert across, "no jump across a late BINLOG_CHECKPOINT"
