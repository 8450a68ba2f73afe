#!/usr/bin/env python3
"""The MySQL 9.7 server the MySQL tests and fixtures ask.

Debian 12 ships no MySQL server: ``mysql-9.7.sh ROOT`` (the shared tool,
``GTIDX_MY97_SCRIPT``) builds a Debian unstable root once with debootstrap
and starts mysqld in it (gtid_mode=ON, ROW, CRC32) on the unix socket
``ROOT/srv/my97/run/mysqld.sock`` and 127.0.0.1:3397 only; its binlogs are
``ROOT/srv/my97/data/binlog.NNNNNN``. ``ROOT`` is ``GTIDX_MY97_ROOT``
(default /var/tmp/gtidx-my97). ``MySQL97().ensure()`` starts it when its
socket does not answer (needs root, as the script does); it is left running.
``GTIDX_MY97_SOCKET`` names the server to ask instead (tools/test sets it),
any mysqld chrooted in ``ROOT``, say a fresh instance with its own datadir:
its binlog directory is the one that server reports, seen from outside ROOT.

    python tools/mysql97.py start      # prints the socket path
    python tools/mysql97.py stop
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:          # run as a script
    sys.path.insert(0, str(REPO))

from tools.mariadb import NO_TLS  # noqa: E402

ROOT = os.environ.get("GTIDX_MY97_ROOT", "/var/tmp/gtidx-my97")
# ../shared beside the checkout, as tools/test finds it (GTIDX_SHARED)
_SHARED = Path(os.environ.get("GTIDX_SHARED", Path(__file__).resolve().parent.parent.parent / "shared"))
SCRIPT = os.environ.get("GTIDX_MY97_SCRIPT", str(_SHARED / "tools" / "mysql-9.7.sh"))
SRV = "srv/my97"


class MySQL97:
    def __init__(self, root: str | os.PathLike = ROOT):
        self.root = Path(root)
        given = os.environ.get("GTIDX_MY97_SOCKET")         # tools/test's (the server it found or started)
        self.socket = Path(given) if given and root == ROOT else self.root / SRV / "run" / "mysqld.sock"
        self.pid_file = self.root / SRV / "run" / "mysqld.pid"
        self._datadir: Path | None = None

    @property
    def datadir(self) -> Path:
        """The directory of the server's binlogs: the server that answers
        on the socket says where it writes them (``@@log_bin_basename``, a
        path inside the chroot), not the path the start script would use."""
        if self._datadir is None:
            base = self.sql("SELECT @@GLOBAL.log_bin_basename")[0][0]
            self._datadir = self.root / Path(base).parent.relative_to("/")
        return self._datadir

    def alive(self) -> bool:
        if not self.socket.exists():
            return False
        try:
            self.connect().close()
            return True
        except Exception:
            return False

    def ensure(self) -> "MySQL97":
        if not self.alive():
            subprocess.run(["bash", SCRIPT, str(self.root)], check=True, stdout=subprocess.DEVNULL)
            for _ in range(60):
                if self.alive():
                    break
                time.sleep(1)
            else:
                raise RuntimeError(f"MySQL 9.7 did not answer on {self.socket}")
        return self

    def connect(self, **kw):
        import pymysql
        return pymysql.connect(unix_socket=str(self.socket), user="root", autocommit=True, **NO_TLS, **kw)

    def stop(self) -> None:
        if self.pid_file.exists():
            os.kill(int(self.pid_file.read_text().strip()), signal.SIGTERM)
            for _ in range(60):
                if not self.pid_file.exists():
                    return
                time.sleep(1)

    def sql(self, query: str, args=None) -> list[tuple]:
        with self.connect() as c, c.cursor() as cur:
            cur.execute(query, args)
            return list(cur.fetchall())


class PrivateMySQL97(MySQL97):
    """A second MySQL 9.7 of its own, beside the shared one: the same root
    (its mysqld, chrooted), its own datadir and socket under
    ``ROOT/srv/NAME`` (unix socket only: skip-networking), so its own
    server_uuid; ``start`` initializes and starts it (about 10 s), ``stop``
    stops it and removes its directory. What a test needs a second server
    for: a failover, binlog names written again by a fresh server."""

    def __init__(self, name: str, root: str | os.PathLike = ROOT):
        super().__init__(root)
        self.srv = f"/srv/{name}"
        self.socket = self.root / self.srv.lstrip("/") / "run" / "mysqld.sock"
        self.pid_file = self.root / self.srv.lstrip("/") / "run" / "mysqld.pid"

    def start(self) -> "PrivateMySQL97":
        MySQL97(self.root).ensure()              # the root built, as the shared server needs it
        home = self.root / self.srv.lstrip("/")
        (home / "data").mkdir(parents=True)
        (home / "run").mkdir()
        (home / "my.cnf").write_text(
            f"[mysqld]\nuser=mysql\ndatadir={self.srv}/data\nsocket={self.srv}/run/mysqld.sock\n"
            f"pid-file={self.srv}/run/mysqld.pid\nskip-networking=ON\nmysqlx=OFF\nsecure-file-priv=\n"
            f"server-id=2\nlog-bin=binlog\nbinlog_checksum=CRC32\ngtid-mode=ON\nenforce-gtid-consistency=ON\n"
            f"log-error={self.srv}/error.log\ninnodb_buffer_pool_size=16M\n")
        cnf = f"--defaults-file={self.srv}/my.cnf"
        subprocess.run(["chroot", str(self.root), "chown", "-R", "mysql:mysql", self.srv], check=True)
        subprocess.run(["chroot", str(self.root), "mysqld", cnf, "--initialize-insecure"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.Popen(["chroot", str(self.root), "mysqld", cnf], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, start_new_session=True)
        for _ in range(120):
            if self.alive():
                return self
            time.sleep(0.5)
        raise RuntimeError(f"the private MySQL 9.7 did not answer on {self.socket}")

    def stop(self) -> None:
        super().stop()
        import shutil
        shutil.rmtree(self.root / self.srv.lstrip("/"), ignore_errors=True)


def main(argv=None) -> None:
    cmd = (argv or sys.argv[1:] or ["start"])[0]
    srv = MySQL97()
    if cmd == "start":
        print(srv.ensure().socket)
    elif cmd == "stop":
        srv.stop()
    else:
        raise SystemExit("usage: tools/mysql97.py start|stop")


if __name__ == "__main__":
    main()
