"""gtidx tail beside a live MariaDB 10.11 under load: rotations, kill -9 of
the tail at random points, a server restart, a server crash that loses the
binlog's tail, and readers checking the active file while it is indexed.
At the end every binlog's index equals a clean `gtidx build` of it."""
from __future__ import annotations

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
from gtidx.binlog import Binlog
from gtidx.indexfile import build_index, verify_index
from gtidx.reader import IndexReader
from test_live import setup_schema, write_mix
from tools.mariadb import MariaDB

pytestmark = pytest.mark.live


class TailProcess:
    """`gtidx tail` as a separate process, its log lines appended to a file."""

    def __init__(self, directory: Path, log: Path):
        self.directory, self.log = directory, log
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gtidx", "tail", str(self.directory), "--interval", "0.1",
             "--page-size", "512", "--span-min", "8192"],
            stdout=subprocess.DEVNULL, stderr=open(self.log, "a"), cwd=ROOT)

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
        with Load(srv) as load:
            for _ in range(4):                                   # kill -9 at random points
                time.sleep(rnd.uniform(0.5, 2.0))
                v, n = check_readers(srv.binlog_dir, rnd)
                readers[0] += v
                readers[1] += n
                tail.kill9()
                tail.start()
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
