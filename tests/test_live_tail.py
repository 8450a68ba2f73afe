"""gtidx tail beside a live MariaDB 10.11 under load: rotations, kill -9 of
the tail at random points, a server restart, a server crash that loses the
binlog's tail, and readers checking the active file while it is indexed.
At the end every binlog's index equals a clean `gtidx build` of it."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import ROOT
from gtidx import api
from gtidx.binlog.mariadb import Binlog
from gtidx.index.build import build_index
from gtidx.index.files import verify_index
from gtidx.index.reader import IndexReader
from test_live import setup_schema, write_mix
from tools.mariadb import MariaDB

pytestmark = pytest.mark.live


class TailProcess:
    """`gtidx tail` as a separate process, its log lines appended to a file."""

    def __init__(self, directory: Path, log: Path, extra: tuple = ()):
        self.directory, self.log, self.extra = directory, log, extra
        self.proc = None

    def start(self):
        self.starts = self.log.read_text().count("event=start") if self.log.exists() else 0
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gtidx", "tail", str(self.directory), "--interval", "0.1",
             "--page-size", "512", "--span-min", "8192", *self.extra],
            stdout=subprocess.DEVNULL, stderr=open(self.log, "a"), cwd=ROOT)

    def started(self, timeout: float = 60.0) -> None:
        """Wait until this start has logged ``event=start``: a kill after it
        lands in the tail's work, not in its interpreter's start-up (which a
        loaded machine can stretch past the test's random delays)."""
        deadline = time.monotonic() + timeout
        while self.log.read_text().count("event=start") <= self.starts:
            assert self.proc.poll() is None, self.log.read_text()[-4000:]
            assert time.monotonic() < deadline, "gtidx tail did not start"
            time.sleep(0.05)

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)


class Load:
    """A writer thread: the multi-domain mix, rotating files now and then."""

    def __init__(self, srv):
        self.srv, self.stop, self.errors, self.rounds = srv, threading.Event(), [], 0
        self.thread = threading.Thread(target=self.run)

    def run(self):
        try:
            conn = self.srv.connect()
            while not self.stop.is_set():
                write_mix(conn, 20, seed=self.rounds)
                self.rounds += 1
                if self.rounds % 30 == 0:
                    conn.cursor().execute("FLUSH BINARY LOGS")
            conn.close()
        except Exception as e:
            if not self.stop.is_set():
                self.errors.append(e)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def check_readers(binlog_dir: Path, rnd: random.Random) -> tuple[int, int]:
    """A reader in another process than the tail: answers for the active file,
    through whatever index is on disk now, equal a plain scan."""
    files = api.list_binlogs(binlog_dir / "master-bin.index")
    active = files[-1]
    with Binlog(active) as b:
        ends = [e for _, e, _ in b.group_spans()]
    if not ends:
        return 0, 0
    via_index = 0
    with api.BinlogSeries([active]) as logs, api.BinlogSeries([active], use_index=False) as scan:
        for off in rnd.sample(ends, min(10, len(ends))):
            got = logs.state_at(active, off)
            assert got.state == scan.state_at(active, off).state, (active, off)
            via_index += got.via == "index"
    return via_index, min(10, len(ends))


def test_tail_under_load(tmp_path):
    srv = MariaDB(tmp_path / "server", {"max_binlog_size": str(4 * 1024 * 1024)})
    srv.start()
    log = tmp_path / "tail.log"
    tail = TailProcess(srv.binlog_dir, log)
    rnd = random.Random(2026)
    readers = [0, 0]
    try:
        setup_schema(srv)
        tail.start()
        tail.started()
        with Load(srv) as load:
            for _ in range(4):                                   # kill -9 at random points of its work
                time.sleep(rnd.uniform(0.5, 2.0))
                v, n = check_readers(srv.binlog_dir, rnd)
                readers[0] += v
                readers[1] += n
                tail.kill9()
                tail.start()
                tail.started()
                v, n = check_readers(srv.binlog_dir, rnd)
                readers[0] += v
                readers[1] += n
        assert not load.errors, load.errors
        # A clean server restart: the active binlog is closed with a STOP event.
        srv.stop()
        srv.start()
        with Load(srv) as load:
            time.sleep(1.5)
        # A server crash that loses the binlog's tail (as an unsynced disk would).
        active = api.list_binlogs(srv.binlog_dir / "master-bin.index")[-1]
        while os.path.getsize(active) < 16384:
            # the load rotated just before it stopped: give the new binlog a
            # tail worth losing (3000 bytes below)
            srv.sql("INSERT INTO gtidx_live.t (d, v) VALUES (1, REPEAT('x', 200))")
            active = api.list_binlogs(srv.binlog_dir / "master-bin.index")[-1]
        time.sleep(0.5)
        srv.kill()
        size = os.path.getsize(active)
        with open(active, "r+b") as f:
            f.truncate(size - 3000)
        srv.start()
        with Load(srv) as load:
            time.sleep(1.5)
            v, n = check_readers(srv.binlog_dir, rnd)
            readers[0] += v
            readers[1] += n
        assert not load.errors, load.errors
        srv.sql("FLUSH BINARY LOGS")
        time.sleep(1.0)
        rc = tail.stop()                                         # SIGTERM: clean stop
        assert rc == 0, log.read_text()[-4000:]
        subprocess.run([sys.executable, "-m", "gtidx", "tail", "--once", str(srv.binlog_dir),
                        "--page-size", "512", "--span-min", "8192"], check=True, cwd=ROOT,
                       stderr=open(log, "a"))
    finally:
        if tail.proc and tail.proc.poll() is None:
            tail.proc.kill()
        srv.stop()
    lines = log.read_text()
    assert lines.count("event=start") >= 6 and "how=resumed" in lines
    assert "event=stop" in lines
    files = api.list_binlogs(srv.binlog_dir / "master-bin.index")
    assert len(files) >= 4
    for f in files[:-1]:            # every closed binlog: its index is the clean build
        idx = Path(f + ".idx")
        clean = tmp_path / "clean.idx"
        build_index(f, out=str(clean), page_size=512, span_min=8192, force=True)
        ours = [(r.offset, r.state) for r in IndexReader(idx.read_bytes()).records()]
        assert ours == [(r.offset, r.state) for r in IndexReader(clean.read_bytes()).records()], f
        verify_index(f)
    assert readers[1] >= 30 and readers[0] >= 1, readers


def _catalog_show(d: Path) -> dict:
    r = subprocess.run([sys.executable, "-m", "gtidx", "catalog", "show", "--json", str(d)], capture_output=True,
                       text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _catalog_current(d: Path) -> bool:
    """Does the catalog list every binlog at its size now, each closed one with its finished index
    and IN_USE clear (the server clears it after the rotate event: same size, another mtime)?"""
    files = api.list_binlogs(d / "master-bin.index")
    try:
        cat = json.loads((d / "gtidx-catalog.json").read_text())
    except ValueError:
        return False
    entries = cat["files"]
    return [e["name"] for e in entries] == [os.path.basename(f) for f in files] and \
        all(e.get("size") == os.path.getsize(f) for e, f in zip(entries, files)) and \
        all(e["index"]["status"] == "ok" and e["in_use"] is False for e in entries[:-1])


def _wait_current(d: Path, log: Path) -> None:
    deadline = time.monotonic() + 60
    while not _catalog_current(d):
        assert time.monotonic() < deadline, (log.read_text()[-3000:], _catalog_show(d))
        time.sleep(0.1)


def _same_answers(d: Path) -> int:
    """Every GTID, every file's end and the latest state: through the catalog as without it."""
    files = api.list_binlogs(d / "master-bin.index")
    n = 0
    with api.open_binlogs(str(d)) as cat, api.BinlogSeries(files) as plain:
        assert cat.history == 1 and cat._catalog          # the catalog is read, one history
        for f in files:
            for g in api.scan(f)[1]:
                x, y = cat.locate(g.gtid), plain.locate(g.gtid)
                assert (x.file, x.start, x.end, x.resume) == (y.file, y.start, y.end, y.resume) == \
                    (f, g.start, g.end, x.resume), g
                n += 1
            pos = str(plain.start_state(f).position())
            if pos:
                x, y = cat.replica_start(pos), plain.replica_start(pos)
                assert (x.file, x.offset, str(x.state)) == (y.file, y.offset, str(y.state)), pos
        assert cat.end_state() == plain.end_state()
    return n


def test_tail_keeps_the_catalog_current_across_rotations(tmp_path):
    """A catalog made before `gtidx tail` starts: the tail keeps it current
    (issue 13 item 4) through rotations (FLUSH BINARY LOGS), a kill -9 of the
    tail, and the growing binlog's entry made again as it grows (at most
    every --catalog-interval). Once the tail has caught up, the catalog is
    what `gtidx catalog build` makes from scratch, and every lookup through
    it answers as without it; a growing binlog whose entry is older than the
    file is read, not taken from its entry."""
    srv = MariaDB(tmp_path / "server", {"max_binlog_size": str(16 * 1024 * 1024)})
    srv.start()
    d = srv.binlog_dir
    log = tmp_path / "tail.log"
    tail = TailProcess(d, log, ("--catalog-interval", "0.3", "--log-level", "debug"))
    try:
        setup_schema(srv)
        conn = srv.connect()
        write_mix(conn, 40, seed=1)
        srv.sql("FLUSH BINARY LOGS")
        write_mix(conn, 20, seed=2)
        r = subprocess.run([sys.executable, "-m", "gtidx", "catalog", "build", str(d)], capture_output=True,
                           text=True, cwd=ROOT, timeout=120)
        assert r.returncode == 0, r.stderr
        made = len(_catalog_show(d)["files"])
        tail.start()
        for rnd in range(4):
            write_mix(conn, 60, seed=10 + rnd)
            srv.sql("FLUSH BINARY LOGS")
            write_mix(conn, 15, seed=20 + rnd)
            if rnd == 1:
                time.sleep(0.5)
                tail.kill9()                     # whatever it was doing; it resumes
                tail.start()
            _wait_current(d, log)                # each closed binlog's entry, as it closes
        for rnd in range(4):                     # the growing binlog's entry follows it
            write_mix(conn, 10, seed=30 + rnd)
            time.sleep(0.5)
        _wait_current(d, log)
        assert tail.stop() == 0, log.read_text()[-3000:]
        kept = _catalog_show(d)
        assert len(kept["files"]) == made + 4 and kept["files"][-1]["in_use"] is True
        # what catalog build makes from scratch
        (d / "gtidx-catalog.json").rename(tmp_path / "tail-catalog.json")
        r = subprocess.run([sys.executable, "-m", "gtidx", "catalog", "build", "--json", str(d)],
                           capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert r.returncode == 0 and json.loads(r.stdout)["walked"] == made + 4, r.stderr
        scratch = _catalog_show(d)
        assert [{k: (a[k], b.get(k)) for k in a if a[k] != b.get(k)} for a, b in zip(kept["files"], scratch["files"])
                if a != b] == []
        assert scratch == kept
        (tmp_path / "tail-catalog.json").replace(d / "gtidx-catalog.json")
        assert _same_answers(d) >= 300
        # the growing binlog grows past its entry (no tail running): read, not taken from the entry
        write_mix(conn, 10, seed=99)
        assert _catalog_show(d) == kept
        _same_answers(d)
        conn.close()
    finally:
        if tail.proc and tail.proc.poll() is None:
            tail.proc.kill()
        srv.stop()
    lines = log.read_text()
    assert "cannot update catalog" not in lines, lines[-3000:]
    assert lines.count("level=info event=catalog updated") >= 4                 # rotations
    assert lines.count("level=debug event=catalog updated") >= 3                # the growing binlog's entry
    assert not list(d.glob(".gtidx-catalog.json.*")), "a temporary catalog left behind"
