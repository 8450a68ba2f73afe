#!/usr/bin/env python3
"""Start and stop a private MariaDB server for tests, fixtures and benchmarks.

Never the system service: the server gets its own datadir, unix socket, pid
file and error log inside a directory we own, listens on 127.0.0.1 only
(a free port), and its binlogs go to ``DIR/binlog/master-bin.*``.

    python tools/mariadb.py start DIR [--set key=value ...]   # prints the socket path
    python tools/mariadb.py stop DIR

As a library: ``with MariaDB(dir, options) as srv: srv.sql("select 1")``.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

# Defaults shared by every private server: ROW binlogs with CRC32 like the
# 11.8 reference fixtures; durability off because nothing here needs it and it
# makes generating hundreds of MB of binlog several times faster.
BASE_OPTIONS = {
    "server_id": "1",
    "binlog_format": "ROW",
    "binlog_checksum": "CRC32",
    "gtid_strict_mode": "0",
    "innodb_buffer_pool_size": "128M",
    "innodb_log_file_size": "256M",
    "innodb_flush_log_at_trx_commit": "0",
    "sync_binlog": "0",
    "skip-name-resolve": None,
    "max_connections": "100",
    "max_allowed_packet": "64M",
}


def find_binary(*names: str) -> str:
    for name in names:
        for d in ("/usr/sbin", "/usr/bin", "/usr/local/bin", "/usr/local/sbin"):
            p = Path(d) / name
            if p.exists():
                return str(p)
        found = shutil.which(name)
        if found:
            return found
    raise RuntimeError(
        f"{names[0]} not found: install MariaDB 10.11 with "
        "'apt-get update && apt-get install -y mariadb-server mariadb-client' (tools/test installs it)"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Our servers are reached by their unix socket, which is local: no TLS. (PyMySQL
# 1.2 otherwise tries it on every connection, "preferred": a CA bundle loaded and
# a TLS handshake each time, about 40 ms of CPU where the connection and a
# statement take 0.3 ms; the tests open thousands.)
NO_TLS = {"ssl_disabled": True}


class MariaDB:
    """A private mariadbd rooted at ``root`` (created if needed)."""

    def __init__(self, root: str | os.PathLike, options: dict | None = None):
        self.root = Path(root).resolve()
        self.datadir = self.root / "data"
        self.binlog_dir = self.root / "binlog"
        self.socket = str(self.root / "mysqld.sock")
        self.pidfile = self.root / "mysqld.pid"
        self.errlog = self.root / "err.log"
        self.cnf = self.root / "my.cnf"
        self.options = dict(BASE_OPTIONS)
        self.options.update(options or {})
        self.port = None
        self.proc = None

    # -- lifecycle ---------------------------------------------------------
    def write_config(self) -> None:
        self.port = self.port or _free_port()
        lines = ["[mariadbd]",
                 f"datadir={self.datadir}",
                 f"socket={self.socket}",
                 f"port={self.port}",
                 "bind-address=127.0.0.1",
                 f"pid-file={self.pidfile}",
                 f"log-error={self.errlog}",
                 f"log_bin={self.binlog_dir}/master-bin",
                 f"tmpdir={self.root}"]
        if os.geteuid() == 0:
            lines.append("user=root")
        for k, v in self.options.items():
            lines.append(k if v is None else f"{k}={v}")
        self.cnf.write_text("\n".join(lines) + "\n")

    def start(self, timeout: float = 90.0) -> "MariaDB":
        self.root.mkdir(parents=True, exist_ok=True)
        self.binlog_dir.mkdir(exist_ok=True)
        self.write_config()
        if not (self.datadir / "mysql").is_dir():
            self.datadir.mkdir(exist_ok=True)
            cmd = [find_binary("mariadb-install-db", "mysql_install_db"),
                   f"--defaults-file={self.cnf}", "--auth-root-authentication-method=normal",
                   "--skip-test-db", "--skip-name-resolve"]
            if os.geteuid() == 0:
                cmd.append("--user=root")
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"mariadb-install-db failed: {r.stderr[-2000:]}")
        if os.path.exists(self.socket):
            os.unlink(self.socket)
        return self.run_server([find_binary("mariadbd", "mysqld"), f"--defaults-file={self.cnf}"], timeout)

    def run_server(self, cmd: list, timeout: float, what: str = "mariadbd"):
        """Starts the server process ``cmd`` (its own session, no output) and
        waits until it answers on its socket; raises with its error log's
        tail if it exits or is not ready within ``timeout`` seconds."""
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{what} exited with {self.proc.returncode}: {self._errtail()}")
            if os.path.exists(self.socket):
                try:
                    self.sql("SELECT 1")
                    return self
                except Exception:
                    pass
            time.sleep(0.2)
        raise RuntimeError(f"{what} did not become ready in {timeout}s: {self._errtail()}")

    def stop(self, timeout: float = 60.0) -> None:
        pid = self._pid()
        if pid is None:
            return
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                return
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)

    def kill(self) -> None:
        """SIGKILL: a server crash, for crash-recovery scenarios."""
        pid = self._pid()
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            if self.proc is not None:
                self.proc.wait()

    def _pid(self):
        if self.proc is not None:
            return self.proc.pid
        try:
            return int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None

    def _errtail(self) -> str:
        try:
            return self.errlog.read_text(errors="replace")[-3000:]
        except OSError:
            return "(no error log)"

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # -- client ------------------------------------------------------------
    def connect(self, **kw):
        import pymysql
        kw.setdefault("autocommit", True)
        return pymysql.connect(unix_socket=self.socket, user="root", password="", **NO_TLS, **kw)

    def sql(self, statement: str, args=None):
        """Run one statement on a fresh connection; returns all rows."""
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(statement, args)
                return cur.fetchall()
        finally:
            conn.close()

    def connection_settings(self) -> dict:
        """For mysql-replication's BinLogStreamReader."""
        return {"unix_socket": self.socket, "user": "root", "password": "", **NO_TLS}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("start")
    s.add_argument("dir")
    s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    t = sub.add_parser("stop")
    t.add_argument("dir")
    a = ap.parse_args(argv)
    if a.cmd == "start":
        opts = {}
        for kv in a.set:
            k, _, v = kv.partition("=")
            opts[k] = v or None
        srv = MariaDB(a.dir, opts).start()
        print(srv.socket)
    else:
        MariaDB(a.dir).stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
