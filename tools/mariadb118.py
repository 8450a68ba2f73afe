"""A private MariaDB 11.8 for tests: a server of its own inside the Debian 13
root that ``../shared/tools/mariadb-11.8.sh`` builds (the shared dev 11.8
runs from the same root; this one never touches it).

The server's files live in ``ROOT/srv/NAME`` (NAME: given, unique per
test), seen from this machine through that path: its unix socket, its
binlogs (``binlog_dir``), its error log. It listens on 127.0.0.1 (a free
port) and runs as the root's ``mysql`` user. ``stop`` ends it and removes
its directory. Needs root (chroot), like the shared script.

    with MariaDB118("gtidx-test-1234", {"log_bin_compress": "ON"}) as srv: srv.sql("select 1")
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tools.mariadb import BASE_OPTIONS, MariaDB, _free_port

ROOT_ENV = "GTIDX_M118_ROOT"
DEFAULT_ROOT = "/var/tmp/gtidx-ci-m118"
SHARED_TOOL = Path(__file__).resolve().parent.parent.parent / "shared" / "tools" / "mariadb-11.8.sh"


class MariaDB118(MariaDB):
    """A private mariadbd 11.8 in the shared script's root, under ``/srv/NAME``."""

    def __init__(self, name: str, options: dict | None = None, root: str | os.PathLike | None = None):
        self.chroot = Path(root or os.environ.get(ROOT_ENV) or DEFAULT_ROOT)
        self.inside = f"/srv/{name}"                 # the server's own view of its directory
        super().__init__(self.chroot / self.inside.lstrip("/"), options)
        self.options = {k: v for k, v in {**BASE_OPTIONS, **(options or {})}.items()}

    def _chroot(self, *cmd, **kw):
        return subprocess.run(["chroot", str(self.chroot), *cmd], **kw)

    def write_config(self) -> None:
        self.port = self.port or _free_port()
        d = self.inside
        lines = ["[mariadbd]", f"datadir={d}/data", f"socket={d}/mysqld.sock", f"port={self.port}",
                 "bind-address=127.0.0.1", f"pid-file={d}/mysqld.pid", f"log-error={d}/err.log",
                 f"log_bin={d}/binlog/master-bin", f"tmpdir={d}", "user=mysql"]
        lines += [k if v is None else f"{k}={v}" for k, v in self.options.items()]
        self.cnf.write_text("\n".join(lines) + "\n")

    def start(self, timeout: float = 90.0) -> "MariaDB118":
        if not (self.chroot / "usr/sbin/mariadbd").exists():
            if not SHARED_TOOL.exists():
                raise RuntimeError(f"no MariaDB 11.8 root at {self.chroot} and no {SHARED_TOOL} to build one")
            r = subprocess.run(["bash", str(SHARED_TOOL), str(self.chroot)], capture_output=True, text=True)
            if r.returncode:
                raise RuntimeError(f"{SHARED_TOOL} failed: {r.stderr[-2000:]}")
        for sub, how in (("proc", ["-t", "proc", "proc"]), ("dev", ["--bind", "/dev"])):
            if subprocess.run(["mountpoint", "-q", str(self.chroot / sub)]).returncode:
                subprocess.run(["mount", *how, str(self.chroot / sub)], check=True)
        (self.root / "data").mkdir(parents=True, exist_ok=True)
        self.binlog_dir.mkdir(exist_ok=True)
        self.write_config()
        self._chroot("chown", "-R", "mysql:mysql", self.inside, check=True)
        if not (self.datadir / "mysql").is_dir():
            r = self._chroot("mariadb-install-db", f"--defaults-file={self.inside}/my.cnf", "--user=mysql",
                             "--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve", "--force",
                             capture_output=True, text=True)
            if r.returncode:
                raise RuntimeError(f"mariadb-install-db (11.8) failed: {(r.stdout + r.stderr)[-2000:]}")
        if os.path.exists(self.socket):
            os.unlink(self.socket)
        return self.run_server(["chroot", str(self.chroot), "mariadbd", f"--defaults-file={self.inside}/my.cnf"],
                               timeout, "mariadbd 11.8")

    def stop(self, timeout: float = 60.0) -> None:
        super().stop(timeout)
        shutil.rmtree(self.root, ignore_errors=True)
