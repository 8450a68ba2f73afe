"""What the live tests of ``gtidx serve`` share (tests/test_serve_live.py,
tests/test_serve_mysql.py): the replication user's password, and
``gtidx serve`` started as a process on a free port of 127.0.0.1."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "serve-pw"


def start_serve(directory: Path, port: int, server_id: int, where: Path, *more: str):
    """``gtidx serve`` as a process on ``directory`` (``port`` 0: a free one),
    user repl with PASSWORD, its log in ``where``, ``more`` options after
    the others: (the process, its port, its log)."""
    pw = where / "pw"
    pw.write_text(PASSWORD + "\n")
    log = where / "serve.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "gtidx", "serve", str(directory), "--bind", "127.0.0.1",
                                 "--port", str(port), "--user", "repl", "--password-file", str(pw),
                                 "--heartbeat", "1", "--server-id", str(server_id), *more],
                                stderr=err, stdout=subprocess.DEVNULL, env=env)
    with open(log) as lines:
        line = ""
        while proc.poll() is None and not line.endswith("\n"):
            got = lines.readline()              # the first line: where it listens
            line += got
            if not got:
                time.sleep(0.02)
    m = re.search(r" on 127\.0\.0\.1:(\d+)$", line.strip())
    if not m:
        proc.kill()
        raise AssertionError(f"gtidx serve did not say where it listens: {log.read_text()!r}")
    return proc, int(m.group(1)), log
